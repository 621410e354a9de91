"""Names the kernels define that code outside them needs without importing JAX: the limit
reasons of a configuration and the machine's scalar parameters."""

#: Reasons a configuration is infeasible: ``Cost.limit`` codes index this tuple (docs/model.md §11;
#: column ``limit_reason``), 0 feasible.
LIMITS: tuple[str, ...] = ("", "memory", "max_p", "batch")
OK, MEMORY, MAX_P, BATCH = 0, 1, 2, 3

#: Scalar parameters that a sweep axis, ``--set`` or calibration may change.
SCALAR_PARAMS: tuple[str, ...] = (
    "gpu_flops",
    "efficiency",
    "gpu_mem_bytes",
    "gpu_mem_bw_Bps",
    "gpus_per_node",
    "nics_per_node",
    "bytes_per_element",
    "wu_passes",
    "intra_alpha_s",
    "intra_bandwidth_Bps",
    "inter_alpha_s",
    "inter_bandwidth_Bps",
    "allreduce_algo",
    "op_latency_s",
    "eltwise_traffic",
)
