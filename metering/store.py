"""What a batch's rows look like on their way to the sample table, and their rollup sums.

A row: (index in the batch, gpu id, ts, node id, tenant id, interval_s, allocated, fraction,
util_pct, mem_used_mib, power_w, temp_c, owner).
"""

from metering.usage import tally

COLUMNS = ("idx", "gpu_id", "ts", "node_id", "tenant_id", "interval_s", "allocated", "fraction",
           "util_pct", "mem_used_mib", "power_w", "temp_c", "owner")
# What a resent sample must repeat exactly; anything else under a stored key is a conflict.
READING = ("interval_s", "allocated", "fraction", "util_pct", "mem_used_mib", "power_w",
           "temp_c", "owner")


def batch_sums(rows: list[tuple]) -> tuple[dict, dict, dict]:
    """Rollup sums of rows known to be new: per (tenant, hour), per (GPU, tenant, hour), and
    the GPUs each tenant held at each instant (the writers turn those into peaks)."""
    return tally((row[1], row[2], row[4], row[5], row[6], row[7], row[8]) for row in rows)
