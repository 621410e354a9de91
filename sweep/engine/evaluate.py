"""The evaluator: one strategy on one bound model and machine, as a pure function of a configuration.

:class:`Evaluator` is the one home of the evaluation recipe (the profile's
machine pytree, its overrides, its calibrated overheads, the strategy's
kernel): ``ev(inputs, cfg, values) -> (Cost, Derived)`` for one
:class:`kernels.Config` and the values of the free machine parameters. Sweeps
``vmap`` it, sensitivity and calibration take its ``grad``, co-design bisects
on it and ``sweep estimate`` calls it once. :func:`point_fn` is the kernel
with overrides and overheads applied, which the engine's chunk program
wraps; :data:`RESULT_COLUMNS` is docs/output-format.md#columns's column order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import SCALAR_PARAMS, STRATEGIES, Config, Cost, Derived, Net, derive
from kernels.names import BATCH, DATASET, MEMORY, OK
from kernels.strategies.registry import REGISTRY
from kernels.terms import memory_parts, scale_terms
from sweep.errors import InputError
from sweep.inputs.configs import NO_OWN, Bound, Overheads, Own, Request, Resolved, frozen_overheads, resolve
from sweep.inputs.machines import override
from sweep.output.store import LIMIT_REASON, NULL_WHERE_NAN, choices_of, column_name, limit_reason

#: Integer-valued configuration fields of :class:`kernels.Cost`, in output order.
CONFIG_FIELDS: tuple[str, ...] = ("p", "p1", "p2", "b", "B", "S", "iterations")
#: Those a row always writes as whole numbers (rounded where a configuration breaks a rule).
WHOLE_FIELDS: tuple[str, ...] = ("p", "p1", "p2", "b", "B", "S")
#: Their output columns (``B`` is ``global_batch``: :data:`sweep.output.store.FIELD_COLUMNS`).
CONFIG_COLUMNS: tuple[str, ...] = tuple(column_name(f) for f in CONFIG_FIELDS)
#: Float result columns, in output order (docs/output-format.md#columns).
RESULT_COLUMNS: tuple[str, ...] = (
    "t_comp_s",
    "t_comm_s",
    "t_epoch_s",
    "t_iter_s",
    "t_allreduce_s",
    "t_allgather_s",
    "t_halo_s",
    "t_p2p_s",
    "t_alltoall_s",
    "mem_bytes",
    "mem_states_bytes",
    "mem_activations_bytes",
    "gpu_hours",
    "samples_per_s",
    "tokens_per_s",
    "mfu",
    "params",
    "active_params",
    "flops_per_token",
    "energy_kwh",
    "cost_usd",
)

#: Result columns that count things (weights), whole numbers: an int in a row's dict.
WHOLE_COLUMNS = frozenset({"params", "active_params"})


def point_fn(
    strategy: str,
    swept: Sequence[str],
    *,
    overheads: Mapping[str, Mapping[str, object]] | None = None,
) -> Callable:
    """``f(net, machine, cfg, values) -> (Cost, Derived)`` for one configuration.

    ``values`` is a tuple of the swept machine parameters, in the order of
    ``swept``, applied with :func:`sweep.inputs.machines.override`. ``overheads`` is a
    profile's ``strategy -> {term: value}`` table (:attr:`MachineProfile.overheads`):
    factors on ``compute``, ``allreduce``, ``allgather``, ``halo``, ``p2p`` and
    additive seconds ``per_iter_s``, ``per_sample_s``. The entry of ``strategy``,
    if any, is applied with :func:`kernels.terms.scale_terms` (values may be
    traced arrays: calibration differentiates through them).
    """
    kernel = STRATEGIES[strategy]
    factors = dict((overheads or {}).get(strategy, {}))

    def f(net: Net, machine, cfg: Config, values: tuple) -> tuple[Cost, Derived]:
        machine = override(machine, dict(zip(swept, values, strict=True)))
        cost = memory_parts(kernel(net, machine, cfg))
        if factors:
            cost = scale_terms(cost, **factors)
        return cost, derive(cost, net, machine)

    return f


class Inputs(NamedTuple):
    """The arrays an :class:`Evaluator` reads: the kernels' net and base machine, and the values
    of the profile's fixed overrides (in the order of :attr:`Evaluator.fixed`)."""

    net: Net
    machine: Any
    fixed: tuple


@dataclass(frozen=True)
class Evaluator:
    """A strategy on a bound model and machine: ``ev(inputs, cfg, values) -> (Cost, Derived)``.

    ``free`` names the machine parameters whose values each call takes
    (``values``, in that order: a swept axis, co-design's parameter);
    ``fixed`` the profile's other overrides, whose values travel in
    :class:`Inputs`. Both are applied in one :func:`sweep.inputs.machines.override`,
    free first. ``overheads`` is the profile's calibrated table
    (:func:`sweep.inputs.configs.frozen_overheads`, hashable, so an evaluator
    keys compile caches) or a mapping whose values may be traced (calibration
    differentiates through them). Pure: jit, vmap and grad take it as it is;
    :meth:`bind` fixes the inputs, giving ``f(cfg, values)``.
    """

    strategy: str
    free: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    overheads: Overheads | Mapping[str, Mapping[str, Any]] = ()

    @classmethod
    def of(
        cls, bound: Bound, strategy: str, free: Sequence[str] = (), dtype=np.float64
    ) -> tuple[Evaluator, Inputs]:
        """The evaluator of ``strategy`` on ``bound`` with machine parameters ``free``, and its
        inputs in ``dtype`` (the profile's other overrides fixed at their values)."""
        fixed = bound.profile.override_values(dtype, skip=tuple(free))
        ev = cls(strategy, tuple(free), tuple(fixed), frozen_overheads(bound.profile))
        return ev, ev.inputs(bound, dtype)

    def inputs(self, bound: Bound, dtype=np.float64) -> Inputs:
        """``bound``'s net, machine and fixed override values as ``dtype`` device arrays."""
        cast = functools.partial(jax.tree_util.tree_map, lambda a: jnp.asarray(a, dtype))
        overrides = bound.profile.override_values(dtype)
        return Inputs(
            cast(bound.net),
            cast(bound.profile.pytree(np.float64)),
            tuple(jnp.asarray(overrides[k]) for k in self.fixed),
        )

    def table(self) -> dict[str, dict[str, Any]]:
        """The overheads as :func:`point_fn` takes them."""
        items = self.overheads.items() if isinstance(self.overheads, Mapping) else self.overheads
        return {k: dict(v) for k, v in items}

    def machine(self, inputs: Inputs, values: Sequence = ()):
        """The kernels' machine with the free ``values`` and the fixed overrides applied."""
        names, given = (*self.free, *self.fixed), (*values, *inputs.fixed)
        return override(inputs.machine, dict(zip(names, given, strict=True)))

    def __call__(self, inputs: Inputs, cfg: Config, values: Sequence = ()) -> tuple[Cost, Derived]:
        return self.on(inputs.net, self.machine(inputs, values), cfg)

    def on(self, net: Net, machine, cfg: Config) -> tuple[Cost, Derived]:
        """The evaluation on a machine whose parameters are already applied (:meth:`machine`):
        the strategy's kernel and the overheads."""
        return point_fn(self.strategy, (), overheads=self.table() or None)(net, machine, cfg, ())

    def bind(self, inputs: Inputs) -> Callable[..., tuple[Cost, Derived]]:
        """``f(cfg, values=()) -> (Cost, Derived)`` with ``inputs`` fixed."""
        return functools.partial(self, inputs)


@functools.lru_cache(maxsize=64)
def jitted(ev: Evaluator) -> Callable[..., tuple[Cost, Derived]]:
    """``jax.jit(ev)``, once per evaluator (an evaluator with a traced overheads table is not kept)."""
    return jax.jit(ev)


#: Evaluators and their device inputs kept for the last bound models (:func:`kept_evaluator`).
_KEPT_INPUTS: dict[tuple, tuple[Bound, Evaluator, Inputs]] = {}


def kept_evaluator(bound: Bound, strategy: str, dtype) -> tuple[Evaluator, Inputs]:
    """:meth:`Evaluator.of` ``bound``, kept while ``bound`` is the same object (the API keeps
    bound models, :mod:`sweep.inputs.kept`): the device copy of a large net is made once."""
    key = (id(bound), strategy, np.dtype(dtype).name)
    entry = _KEPT_INPUTS.get(key)
    if entry is not None and entry[0] is bound:
        return entry[1], entry[2]
    ev, inputs = Evaluator.of(bound, strategy, dtype=dtype)
    if len(_KEPT_INPUTS) >= 16:
        _KEPT_INPUTS.pop(next(iter(_KEPT_INPUTS)))
    _KEPT_INPUTS[key] = (bound, ev, inputs)
    return ev, inputs


@functools.lru_cache(maxsize=64)
def packed(ev: Evaluator, dtype: str) -> Callable[..., tuple[Cost, Derived]]:
    """:func:`jitted` ``ev`` whose every column comes back to the host in one vector, unpacked
    there into numpy scalars of each column's own type: one transfer per evaluation, where
    reading each column of a device result costs one each (more than the evaluation). One per
    evaluator and input ``dtype`` (the name), each traced once."""
    layout: list = []

    def flat(inputs: Inputs, cfg: Config):
        leaves, tree = jax.tree_util.tree_flatten(ev(inputs, cfg))
        layout[:] = [tree, [leaf.dtype for leaf in leaves]]
        wide = jnp.result_type(float)  # float64 with x64 on, else float32: codes and flags are exact
        return jnp.stack([jnp.asarray(leaf, wide).reshape(()) for leaf in leaves])

    run = jax.jit(flat)

    def call(inputs: Inputs, cfg: Config) -> tuple[Cost, Derived]:
        values = np.asarray(run(inputs, cfg))
        tree, dtypes = layout
        return jax.tree_util.tree_unflatten(
            tree, [np.asarray(v).astype(t) for v, t in zip(values, dtypes, strict=True)]
        )

    return call


def column(cost: Cost, derived: Derived, name: str):
    """The column ``name`` of an evaluation: a field of :class:`Cost` or of :class:`Derived`."""
    return getattr(derived, name) if name in Derived._fields else getattr(cost, name)


def config(*values, dtype=np.float64) -> Config:
    """A :class:`kernels.Config` of ``values`` in field order (p, b, p2, S, then the strategies'
    own axes), as ``dtype`` arrays; fields not given stay None (their defaults)."""
    return Config(*(jnp.asarray(v, dtype) for v in values))


def estimate(
    bound: Bound,
    strategy: str | Request,
    p: int | None = None,
    b: int | None = None,
    p2: int | None = None,
    S: int | None = None,
    *,
    global_batch: int | None = None,
    micro_batch: int | None = None,
    own: Mapping[str, object] | None = None,
    warn: bool = True,
    refuse: bool = False,
) -> dict:
    """All output columns of one configuration (docs/output-format.md#columns).

    ``strategy`` is a :class:`~sweep.inputs.configs.Request`, or a strategy's name with the
    request's values as the other arguments (``own``: the strategy's own axes by name, e.g.
    data+tensor+pipeline's ``tp``, docs/model.md §16). The request is checked and completed by
    :func:`sweep.inputs.configs.resolve`. A configuration that breaks a rule of its strategy's
    registry entry, or whose global batch or micro-batch does not divide, is with ``refuse`` an
    :class:`InputError` naming the rule and the parameters (:func:`refusal`), else a row that is
    infeasible with the rule's limit reason, as in a sweep. Evaluated in float64 when JAX's x64
    mode is on (the CLI turns it on for ``sweep estimate``), else in float32.
    """
    profile = bound.profile
    request = (
        strategy
        if isinstance(strategy, Request)
        else Request.of(strategy, p, b, p2, S, global_batch=global_batch, micro_batch=micro_batch, own=own)
    )
    config = resolve(profile, request, warn=warn)
    strategy = request.strategy
    if refuse:
        refusal(bound, request, config)
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    ev, inputs = kept_evaluator(bound, strategy, dtype)
    # one compile costs less than dispatching every term eagerly; the configuration as numpy
    # scalars (a device array each costs more than the evaluation)
    cost, derived = packed(ev, np.dtype(dtype).name)(
        inputs, Config(*(np.asarray(v, dtype) for v in config.config))
    )
    cost, derived = batch_fit(cost, derived, config.fits)
    return row_dict(bound, strategy, cost, derived, profile.overrides, config.own)


def refusal(bound: Bound, request: Request, config: Resolved) -> None:
    """An :class:`InputError` when a resolved configuration cannot run on ``bound``: the first
    rule of its strategy's registry entry it breaks (:meth:`Strategy.broken`, on the machine
    with its overrides), its message and parameters; or a global batch (a micro-batch) that
    the data-parallel replicas times the micro-batch (b) does not divide (``batch``)."""
    entry = REGISTRY[request.strategy]
    p, b, _, S, *own = config.config
    machine = bound.profile.pytree(np.float64)
    machine = override(machine, bound.profile.override_values(np.float64))
    found = entry.broken(
        bound.net, {"p": p, "b": b, "S": S, **dict(zip(Own._fields, own, strict=True))}, machine
    )
    batch_rule = found is not None and bool({"b", "S", "micro_batch"} & set(found.rule.params))
    if not config.fits and (found is None or batch_rule):
        micro = request.micro_batch or (entry.micro_batch if request.S is None else None)
        if request.global_batch is not None:
            what = f"{config.p1} data-parallel replicas" + (f" x micro_batch {micro}" if micro else "")
            raise InputError(
                f"{request.strategy}: global_batch {request.global_batch} is not a multiple of the {what} (batch)",
                param=("global_batch", "micro_batch") if micro else "global_batch",
            )
        raise InputError(
            f"{request.strategy}: micro_batch {micro} does not divide b {request.b} (batch)",
            param=("micro_batch", "b"),
        )
    if found is not None:
        raise InputError(f"{request.strategy}: {found.message}", param=found.rule.params)


def batch_fit(cost: Cost, derived: Derived, fits) -> tuple[Cost, Derived]:
    """An evaluation whose batch as the user set it does not divide (``fits`` false: a global
    batch p1 does not divide, a micro-batch b does not) made infeasible with limit ``batch``,
    unless it already breaks a rule of its strategy (a reason named before ``batch``:
    ``heads``, ``divides``, ...). Scalars or (traced) arrays."""
    if fits is True:
        return cost, derived
    result = (cost.limit == OK) | (cost.limit == MEMORY) | (cost.limit == DATASET)
    limit = jnp.where(fits | ~result, cost.limit, BATCH).astype(cost.limit.dtype)
    return cost._replace(limit=limit), derived._replace(feasible=derived.feasible & fits)


def row_dict(
    bound: Bound,
    strategy: str,
    cost: Cost,
    derived: Derived,
    overrides: Mapping[str, float],
    own: Own = NO_OWN,
) -> dict:
    """One row as a plain dict in output column order (docs/output-format.md#columns); the
    strategy's own axes (its registry entry's) after the configuration columns."""
    row: dict = {"model": bound.model.name, "machine": bound.profile.name, "strategy": strategy}
    for field, name in zip(CONFIG_FIELDS, CONFIG_COLUMNS, strict=True):
        value = float(getattr(cost, field))
        # whole numbers, as a sweep writes them: a configuration that breaks a rule has a
        # fractional p1 (p / group), b or global batch, shown rounded beside its limit reason
        whole = field in WHOLE_FIELDS or value == round(value)
        row[name] = round(value) if math.isfinite(value) and whole else value
    # a categorical axis as its name (recompute = "full")
    entry = REGISTRY[strategy]
    row.update((a.name, a.label(getattr(own, a.name))) for a in entry.own)
    if entry.micro_batch is not None:  # samples per micro-batch, as a sweep's column
        row["micro_batch"] = round(float(cost.b) / float(cost.S))
    for name in SCALAR_PARAMS:
        if name in overrides:
            choices = choices_of(name)  # a categorical setting (memory_model) as its name
            row[name] = choices[int(overrides[name])] if choices else float(overrides[name])
    merged = {**cost._asdict(), **derived._asdict()}
    for name in RESULT_COLUMNS:
        value = float(merged[name])
        # a CNN's tokens_per_s (no tokens): null, as in the Parquet output
        row[name] = None if name in NULL_WHERE_NAN and math.isnan(value) else value
        if name in WHOLE_COLUMNS and math.isfinite(value):  # counts, written as 25,502,912
            row[name] = round(value)
    row["feasible"] = bool(derived.feasible)
    row[LIMIT_REASON] = limit_reason(int(cost.limit))
    return row
