"""Names the kernels define that code outside them needs without importing JAX: the limit
reasons of a configuration, the layer kinds and the machine's scalar parameters."""

from kernels.kinds import TABLE as KIND_TABLE

#: Reasons a configuration is infeasible: ``Cost.limit`` codes index this tuple (docs/model.md §11;
#: column ``limit_reason``), 0 feasible. After the paper's four, the rules of the strategy
#: registry (:class:`kernels.strategies.registry.Rule`): tp not dividing the heads, the replica
#: group not dividing p, a precision the GPU has no rate for, vp > 1 without pipeline stages.
LIMITS: tuple[str, ...] = (
    "",
    "memory",
    "max_p",
    "batch",
    "dataset",
    "heads",
    "divides",
    "precision",
    "schedule",
)
OK, MEMORY, MAX_P, BATCH, DATASET = 0, 1, 2, 3, 4
HEADS, DIVIDES, PRECISION, SCHEDULE = 5, 6, 7, 8
#: The reasons that are results of a configuration that can be formed (it does not fit the
#: memory, its global batch exceeds the data set), not a rule it breaks.
RESULT_LIMITS: tuple[int, ...] = (OK, MEMORY, DATASET)

#: Layer kinds (docs/model.md §1); ``LayerArrays.kind`` indexes this tuple: the names of
#: :data:`kernels.kinds.TABLE`, one record per kind, new kinds at the end. Here, not in
#: :mod:`kernels.network`, so that the machine parameters below can name one efficiency per
#: kind without loading JAX.
KINDS: tuple[str, ...] = tuple(kind.name for kind in KIND_TABLE)

#: Scalar parameters that a sweep axis, ``--set`` or calibration may change; the last ones,
#: ``efficiency_<kind>``, are one per layer kind (docs/model.md §3).
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
    "memory_model",
    "optimizer_states",
    "mem_passes",
    *(f"efficiency_{kind}" for kind in KINDS),
    "op_latency_s",
    "eltwise_traffic",
    "gpu_sms",
    "gemm_tile_m",
    "gemm_tile_n",
    "scatter_gather",
    "attention",
    "gpu_flops_fp8",
    "overlap_grad_reduce",
)

#: Memory models (docs/model.md §6), machine key ``memory_model``: the code the kernels see.
MEMORY_MODELS: dict[str, int] = {"training": 0, "paradl": 1}

#: Attention implementations (docs/model.md §16), machine key ``attention``: the code the kernels see.
#: A fused ("flash") attention keeps no ``a s^2`` scores for the backward pass.
ATTENTIONS: dict[str, int] = {"standard": 0, "flash": 1}

#: The categorical machine settings: each one's names, in code order (the code the kernels see
#: is the index). Sweep output writes a swept one's column as these names, as it writes a
#: strategy's categorical axis (:attr:`kernels.strategies.registry.Axis.choices`). A new
#: categorical setting is one entry here (docs/output-format.md#columns).
MACHINE_CHOICES: dict[str, tuple[str, ...]] = {
    "memory_model": tuple(sorted(MEMORY_MODELS, key=MEMORY_MODELS.__getitem__)),
    # kernels.collectives.ALLREDUCE_ALGOS's codes (a test checks they agree)
    "allreduce_algo": ("ring", "tree", "auto", "hierarchical"),
    "attention": tuple(sorted(ATTENTIONS, key=ATTENTIONS.__getitem__)),
}
