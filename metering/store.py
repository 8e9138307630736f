"""What a batch looks like on its way to the sample table, and its rollup sums.

A batch travels as columns, one list or tuple per name in COLUMNS: (index in the batch, gpu
id, ts, node id, tenant id, interval_s, allocated, fraction, util_pct, mem_used_mib, power_w,
temp_c, owner).
"""

from metering.usage import tally

COLUMNS = ("idx", "gpu_id", "ts", "node_id", "tenant_id", "interval_s", "allocated", "fraction",
           "util_pct", "mem_used_mib", "power_w", "temp_c", "owner")
# What a resent sample must repeat exactly; anything else under a stored key is a conflict.
READING = ("interval_s", "allocated", "fraction", "util_pct", "mem_used_mib", "power_w",
           "temp_c", "owner")


def batch_sums(columns: list) -> tuple[dict, dict, dict]:
    """Rollup sums of samples known to be new: per (tenant, hour), per (GPU, tenant, hour),
    and the GPUs each tenant held at each instant (the SQLite writer turns those into peaks;
    on PostgreSQL the database sums inserted rows itself: migration metering 0004)."""
    _index, gpu, ts, _node, tenant, interval, allocated, fraction, util, *_rest = columns
    return tally(zip(gpu, ts, tenant, interval, allocated, fraction, util, strict=True))
