"""Names the kernels define that code outside them needs without importing JAX: the limit
reasons of a configuration, the layer kinds and the machine's scalar parameters."""

from kernels.kinds import TABLE as KIND_TABLE
from kernels.params import CHOICE, Param, machine_params

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

#: Selective recomputation's policies (docs/model.md §21), machine key ``selective_recompute``:
#: Megatron-LM's (the attention core again) or torchtitan's per-operation one ("op").
SELECTIVE_POLICIES: dict[str, int] = PARAMS["selective_recompute"].codes

#: The categorical machine settings: each one's names, in code order (the code the kernels see
#: is the index). Sweep output writes a swept one's column as these names, as it writes a
#: strategy's categorical axis (:attr:`kernels.strategies.registry.Axis.choices`). A new
#: categorical setting is one record of kind ``choice`` in :mod:`kernels.params`
#: (docs/output-format.md#columns); ``allreduce_algo``'s names are
#: kernels.collectives.ALLREDUCE_ALGOS's codes (a test checks they agree).
MACHINE_CHOICES: dict[str, tuple[str, ...]] = {n: p.choices for n, p in PARAMS.items() if p.kind == CHOICE}
