"""Wiring between files and kernels: one strategy on one bound model and machine.

:func:`point_fn` returns the per-configuration function that the engine
vmaps and ``sweep estimate`` calls once; :data:`COLUMNS` is docs/output-format.md#columns's
column order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp

from kernels import SCALAR_PARAMS, STRATEGIES, Config, Cost, Derived, Net, derive
from kernels.strategies.registry import OWN_AXES
from kernels.terms import scale_terms
from sweep.inputs.configs import TENSOR, TENSOR_AXES, Bound, Tensor, resolve_config
from sweep.inputs.machines import override
from sweep.output.store import LIMIT_REASON, NULL_WHERE_NAN, choices_of, column_name, limit_reason

#: Integer-valued configuration fields of :class:`kernels.Cost`, in output order.
CONFIG_FIELDS: tuple[str, ...] = ("p", "p1", "p2", "b", "B", "S", "iterations")
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
    "mem_bytes",
    "gpu_hours",
    "samples_per_s",
    "tokens_per_s",
    "mfu",
)


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
        cost = kernel(net, machine, cfg)
        if factors:
            cost = scale_terms(cost, **factors)
        return cost, derive(cost, net, machine)

    return f


def estimate(
    bound: Bound,
    strategy: str,
    p: int,
    b: int,
    p2: int | None = None,
    S: int | None = None,
    tensor: Tensor | None = None,
) -> dict:
    """All output columns of one configuration (docs/output-format.md#columns).

    Evaluated in float64 when JAX's x64 mode is on (the CLI turns it on for
    ``sweep estimate``), else in float32. ``tensor`` is data+tensor+pipeline's
    tp, pp, recompute and zero (docs/model.md §16).
    """
    profile = bound.profile
    tensor = tensor or Tensor()
    p2, S = resolve_config(profile, strategy, p, b, p2, S)
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    overrides = profile.override_values(dtype)
    names = tuple(overrides)
    # one compile costs less than dispatching every term eagerly
    f = jax.jit(point_fn(strategy, names, overheads=profile.overheads))
    machine = profile.pytree(dtype)
    cfg = Config(*(jnp.asarray(v, dtype) for v in (p, b, p2, S, *tensor)))
    cost, derived = f(bound.net, machine, cfg, tuple(overrides.values()))
    return row_dict(bound, strategy, cost, derived, profile.overrides, tensor)


def row_dict(
    bound: Bound,
    strategy: str,
    cost: Cost,
    derived: Derived,
    overrides: Mapping[str, float],
    tensor: Tensor | None = None,
) -> dict:
    """One row as a plain dict in output column order (docs/output-format.md#columns)."""
    row: dict = {"model": bound.model.name, "machine": bound.profile.name, "strategy": strategy}
    for field, name in zip(CONFIG_FIELDS, CONFIG_COLUMNS, strict=True):
        value = float(getattr(cost, field))
        row[name] = round(value) if math.isfinite(value) and value == round(value) else value
    if strategy == TENSOR:  # a categorical axis as its name (recompute = "full")
        row.update((a, OWN_AXES[a].label(v)) for a, v in zip(TENSOR_AXES, tensor or Tensor(), strict=True))
    for name in SCALAR_PARAMS:
        if name in overrides:
            choices = choices_of(name)  # a categorical setting (memory_model) as its name
            row[name] = choices[int(overrides[name])] if choices else float(overrides[name])
    merged = {**cost._asdict(), **derived._asdict()}
    for name in RESULT_COLUMNS:
        value = float(merged[name])
        # a CNN's tokens_per_s (no tokens): null, as in the Parquet output
        row[name] = None if name in NULL_WHERE_NAN and math.isnan(value) else value
    row["feasible"] = bool(derived.feasible)
    row[LIMIT_REASON] = limit_reason(int(cost.limit))
    return row
