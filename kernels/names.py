"""Names the kernels define that code outside them needs without importing JAX: the limit
reasons of a configuration, the layer kinds and the machine's scalar parameters."""

from kernels.params import CHOICE, Param, machine_params

#: Reasons a configuration is infeasible: ``Cost.limit`` codes index this tuple (docs/model.md §11;
#: column ``limit_reason``), 0 feasible.
LIMITS: tuple[str, ...] = ("", "memory", "max_p", "batch", "dataset")
OK, MEMORY, MAX_P, BATCH, DATASET = 0, 1, 2, 3, 4

#: Layer kinds (docs/model.md §1); ``LayerArrays.kind`` indexes this tuple. New kinds go at
#: the end. Here, not in :mod:`kernels.network`, so that the machine parameters below can
#: name one efficiency per kind without loading any other kernels module.
KINDS: tuple[str, ...] = (
    "conv",
    "fc",
    "pool_max",
    "pool_avg",
    "relu",
    "bnorm",
    "add",
    "dropout",
    # transformer kinds (docs/model.md §16), appended so the CNN kinds keep their codes
    "linear",
    "attention",
    "layernorm",
    "embedding",
    "gelu",
)

#: Every machine parameter as a record (unit, kind, bounds, default, help; :mod:`kernels.params`),
#: one ``efficiency_<kind>`` per layer kind of :data:`KINDS`.
PARAMS: dict[str, Param] = machine_params(KINDS)

#: Scalar parameters that a sweep axis, ``--set`` or calibration may change, in the kernels'
#: order (docs/model.md §8): the names of :data:`PARAMS`.
SCALAR_PARAMS: tuple[str, ...] = tuple(PARAMS)

#: Memory models (docs/model.md §6), machine key ``memory_model``: the code the kernels see.
MEMORY_MODELS: dict[str, int] = PARAMS["memory_model"].codes

#: Attention implementations (docs/model.md §16), machine key ``attention``: the code the kernels see.
#: A fused ("flash") attention keeps no ``a s^2`` scores for the backward pass.
ATTENTIONS: dict[str, int] = PARAMS["attention"].codes

#: The categorical machine settings: each one's names, in code order (the code the kernels see
#: is the index). Sweep output writes a swept one's column as these names, as it writes a
#: strategy's categorical axis (:attr:`kernels.strategies.registry.Axis.choices`). A new
#: categorical setting is one record of kind ``choice`` in :mod:`kernels.params`
#: (docs/output-format.md#columns); ``allreduce_algo``'s names are
#: kernels.collectives.ALLREDUCE_ALGOS's codes (a test checks they agree).
MACHINE_CHOICES: dict[str, tuple[str, ...]] = {n: p.choices for n, p in PARAMS.items() if p.kind == CHOICE}
