"""What a batch's rows look like on their way to the sample table, and their rollup sums.

A row: (index in the batch, gpu id, ts, node id, tenant id, interval_s, allocated, fraction,
util_pct, mem_used_mib, power_w, temp_c, owner).
"""

from operator import itemgetter

from metering.usage import tally

COLUMNS = ("idx", "gpu_id", "ts", "node_id", "tenant_id", "interval_s", "allocated", "fraction",
           "util_pct", "mem_used_mib", "power_w", "temp_c", "owner")
# What a resent sample must repeat exactly; anything else under a stored key is a conflict.
READING = ("interval_s", "allocated", "fraction", "util_pct", "mem_used_mib", "power_w",
           "temp_c", "owner")


_TALLIED = itemgetter(1, 2, 4, 5, 6, 7, 8)  # what tally reads of a row


def batch_sums(rows: list[tuple]) -> tuple[dict, dict, dict]:
    """Rollup sums of rows known to be new: per (tenant, hour), per (GPU, tenant, hour), and
    the GPUs each tenant held at each instant (the writers turn those into peaks)."""
    return tally(map(_TALLIED, rows))
