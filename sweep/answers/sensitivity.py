"""Sensitivities: elasticities of the epoch time to every machine parameter, by autodiff.

.. math::
    e_\\theta = \\frac{\\partial \\ln t}{\\partial \\ln \\theta}
              = \\frac{\\theta}{t}\\,\\frac{\\partial t}{\\partial \\theta}

(+1 % of θ changes t by about e %). Computed with :func:`jax.grad` through
the same strategy kernels as ``sweep run`` (not finite differences): every
parameter is scaled by ``exp(s)`` through :func:`kernels.with_params` and the
gradient taken at s = 0, in float64. ``inter_bandwidth_Bps`` scales every
inter-node level together (with equal levels, as on the shipped machines,
that is exactly the sweep axis); ``inter_alpha_s`` is the first level's
latency with deeper levels keeping their extra latency over it, as the axis
defines it. Whole numbers (``gpus_per_node``, ``gpu_sms`` ...), switches and choices
(``allreduce_algo``, ``attention`` ...), as their records in :data:`kernels.names.PARAMS`
say, have no derivative and are left out (the output says so). ``gpu_mem_bytes`` and
``optimizer_states`` only decide feasibility: their elasticity is 0. At a kink of the model (a NIC-sharing ``max``, the cheaper
of two algorithms) the derivative is the one-sided value JAX picks.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa

from kernels import SCALAR_PARAMS, Config
from kernels.machine import param_value
from kernels.names import BATCH
from kernels.names import PARAMS as PARAMS_BY_NAME
from kernels.strategies import registry
from sweep.engine import backend
from sweep.engine.evaluate import Evaluator, Inputs, column
from sweep.errors import InputError
from sweep.inputs.configs import (
    NO_OWN,
    Bound,
    check_strategy,
    default_p2,
    defaults,
    resolve,
)
from sweep.inputs.machines import override
from sweep.output import store

#: Parameters without a derivative, and why: every one that is not continuous (its record,
#: :data:`kernels.names.PARAMS`): a whole number, a switch, a choice.
SKIPPED: dict[str, str] = {n: p.fixed_why for n, p in PARAMS_BY_NAME.items() if not p.varied}
#: Parameters differentiated, in :data:`kernels.SCALAR_PARAMS` order.
PARAMS: tuple[str, ...] = tuple(k for k in SCALAR_PARAMS if k not in SKIPPED)
#: Result columns whose elasticity can be asked for.
METRICS = ("t_epoch_s", "t_iter_s", "t_comp_s", "t_comm_s", "gpu_hours")
#: Most rows ``sweep sensitivity DIR`` takes without ``--max-rows``.
MAX_ROWS = 10_000


def _metric_fn(ev: Evaluator, metric: str):
    """``f(s, inputs, cfg, values) -> metric`` with every parameter scaled by ``exp(s_i)`` after
    the evaluator's overrides: the evaluator's kernel and overheads, as in ``estimate`` and sweeps."""

    def f(s, inputs, cfg, values):
        machine = ev.machine(inputs, values)
        base = {name: param_value(machine, name) for name in PARAMS}
        scaled = override(machine, {n: base[n] * jnp.exp(s[i]) for i, n in enumerate(PARAMS)})
        return column(*ev.on(inputs.net, scaled, cfg), metric)

    return f


def elasticity_fn(ev: Evaluator, metric: str = "t_epoch_s"):
    """``g(inputs, cfg, values) -> (metric, elasticities[len(PARAMS)], limit)``, jit- and vmap-able."""
    f = _metric_fn(ev, metric)
    value_and_grad = jax.value_and_grad(f)

    def g(inputs, cfg, values):
        zero = jnp.zeros(len(PARAMS), dtype=jnp.float64)
        t, dt = value_and_grad(zero, inputs, cfg, values)
        e = jnp.where(t != 0, dt / t, jnp.nan)
        return t, e, ev(inputs, cfg, values)[0].limit

    return g


#: Compiled signatures kept for the process (least recently used dropped first); a result
#: does not depend on whether its function was kept.
COMPILED_KEPT = 64


@functools.lru_cache(maxsize=COMPILED_KEPT)
def _compiled(ev: Evaluator, metric: str, batched: bool):
    """:func:`elasticity_fn` jitted (and vmapped over configurations and values), once per signature."""
    g = elasticity_fn(ev, metric)
    return jax.jit(jax.vmap(g, in_axes=(None, 0, 0)) if batched else g)


def metric_fn(strategy: str, swept: Sequence[str], metric: str = "t_epoch_s"):
    """``h(s, net, machine, cfg, values) -> metric`` (for finite-difference checks)."""
    f = _metric_fn(Evaluator(strategy, tuple(swept)), metric)
    return lambda s, net, machine, cfg, values: f(s, Inputs(net, machine, ()), cfg, values)


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise InputError(f"of: unknown metric '{metric}' (known: {', '.join(METRICS)})", param="of")
    return metric


def _f64(tree):
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), tree)


def sensitivity(
    bound: Bound,
    strategy: str,
    p: int,
    b: int | None,
    p2: int | None = None,
    S: int | None = None,
    metric: str = "t_epoch_s",
    own: Mapping[str, int | str] | None = None,
    *,
    global_batch: int | None = None,
    micro_batch: int | None = None,
) -> pa.Table:
    """Elasticities of one configuration: a one-row table (see :func:`sensitivities`), in float64
    (JAX's x64 mode is on during the call and put back after). ``own`` holds the strategy's own
    axes by name (data+tensor+pipeline's ``tp``, ``pp``, ``recompute``, ``zero``, ...: codes,
    :mod:`kernels.strategies.registry`); those not given take their defaults. ``global_batch``
    instead of ``b`` gives ``b = global_batch / p1`` and ``micro_batch`` instead of ``S`` gives
    ``S = b / micro_batch`` (:func:`sweep.inputs.configs.resolve`); where they do not
    divide, the row is infeasible (``batch``)."""
    _check_metric(metric)
    if (b is None) == (global_batch is None):
        raise InputError("give b or global_batch (not both)")
    if S is not None and micro_batch is not None:
        raise InputError("give S or micro_batch, not both")
    with backend.settings(jax_enable_x64=True):
        return _one(bound, strategy, p, b, p2, S, metric, dict(own or {}), global_batch, micro_batch)


def _one(
    bound: Bound,
    strategy: str,
    p: int,
    b: int | None,
    p2: int | None,
    S: int | None,
    metric: str,
    own: dict,
    global_batch: int | None,
    micro_batch: int | None,
) -> pa.Table:
    # a library call may pass every shared axis (p2, S) whatever the strategy; an own setting the
    # strategy does not have is refused, since its elasticities would answer another question
    check_strategy(strategy)
    entry = registry.entry(strategy)
    unknown = [k for k in own if not entry.uses(k) or k in registry.SHARED_AXES]
    if unknown:
        raise InputError(f"{strategy} has no axis '{unknown[0]}' (its own: {_own_names(entry)})")
    # the configuration's one resolution (the registry's): defaults and the batch as users set it
    config = resolve(
        bound.profile,
        strategy,
        p,
        b,
        p2,
        S,
        global_batch=global_batch,
        micro_batch=micro_batch,
        own=own,
        warn=False,
    )
    ev, inputs = Evaluator.of(bound, strategy)
    g = _compiled(ev, metric, False)
    t, e, limit = g(inputs, Config(*(jnp.asarray(v, jnp.float64) for v in config.config)), ())
    if not config.fits:  # the global batch or the micro-batch size does not divide
        limit = np.int32(BATCH)
    shown = [int(v) if float(v) == int(v) else float(v) for v in config.config[:4]]  # p, b, p2, S
    ident: dict[str, list] = {
        "model": [bound.model.name],
        "machine": [bound.profile.name],
        "strategy": [strategy],
        **{k: [v] for k, v in zip(("p", "b", "p2", "S"), shown, strict=True)},
        **{a.name: [a.label(getattr(config.own, a.name))] for a in entry.own},
    }
    values_now = {k: [float(_value_of(bound, k))] for k in PARAMS}
    return _table(ident, values_now, metric, np.asarray([t]), np.asarray([e]), np.asarray([limit]))


def _own_names(entry) -> str:
    return ", ".join(a.name for a in entry.own) or "none"


def _own_arrays(own: Mapping[str, int]) -> dict:
    """A strategy's own axis values as float64 arrays for :class:`kernels.Config` (only its fields)."""
    return {k: jnp.asarray(v, jnp.float64) for k, v in own.items() if k in Config._fields}


def _value_of(bound: Bound, name: str) -> float:
    return float(bound.profile.value(name))


def _table(ident: Mapping[str, list], values: Mapping[str, list], metric, t, e, limit) -> pa.Table:
    cols: dict[str, object] = dict(ident)
    for k in PARAMS:
        cols[k] = pa.array(values[k], pa.float64())
    cols[metric] = pa.array(np.asarray(t, np.float64))
    cols["feasible"] = pa.array(np.asarray(limit) == 0)
    cols[store.LIMIT_REASON] = pa.array([store.limit_reason(int(x)) for x in np.asarray(limit)], pa.string())
    e = np.asarray(e, np.float64).reshape(len(t), len(PARAMS))
    for i, k in enumerate(PARAMS):
        cols[f"e_{k}"] = pa.array(e[:, i])
    lever = [_lever(row) for row in e]
    cols["lever"] = pa.array([lv[0] for lv in lever])
    cols["lever_e"] = pa.array([lv[1] for lv in lever], pa.float64())
    meta = {
        b"paradl_sensitivity": (
            f"elasticity e_X = d ln {metric} / d ln X by jax.grad; not differentiated: "
            + ", ".join(f"{k} ({why})" for k, why in SKIPPED.items())
        ).encode()
    }
    return pa.table(cols).replace_schema_metadata(meta)


def _lever(e: np.ndarray) -> tuple[str | None, float]:
    """The parameter with the largest |elasticity| (the knob that pays off most)."""
    mag = np.where(np.isfinite(e), np.abs(e), -1.0)
    if len(mag) == 0 or mag.max() <= 0:
        return None, 0.0
    i = int(np.argmax(mag))
    return PARAMS[i], float(e[i])


def sensitivities(
    source, where: str | None = None, max_rows: int = MAX_ROWS, metric: str = "t_epoch_s"
) -> pa.Table:
    """Elasticities for every row of a small sweep result (a folder, file or :class:`~sweep.query.Sweep`).

    The models and machines are rebuilt from the data's own metadata (the
    sweep spec), each row's swept machine parameters are applied, and one
    ``jit(vmap(grad))`` per (model, machine, strategy) evaluates all its rows.
    """
    _check_metric(metric)
    with backend.settings(jax_enable_x64=True):
        return _every(source, where, max_rows, metric)


def _every(source, where: str | None, max_rows: int, metric: str) -> pa.Table:
    from sweep.answers.query import as_sweep

    sw = as_sweep(source)
    need = [c for c in ("model", "machine", "strategy", "p", "b") if c not in sw.schema.names]
    if need:
        raise InputError(f"the data lacks column '{need[0]}', needed to rebuild each configuration")
    n = sw.count_rows(where)
    if n > max_rows:
        raise InputError(
            f"{n:,} rows match; sensitivities take at most {max_rows:,} (narrow where or raise max_rows)",
            param=("where", "max_rows"),
        )
    swept = [c for c in sw.schema.names if c in SCALAR_PARAMS]
    cols = [
        c
        for c in ("model", "machine", "strategy", "p", "b", "p2", "S", *NO_OWN._fields)
        if c in sw.schema.names
    ]
    table = sw.to_table(where, [*cols, *swept])
    bounds = _bounds(sw, table)
    pieces = []
    keys = list(zip(*(table.column(c).to_pylist() for c in ("model", "machine", "strategy")), strict=True))
    for key in dict.fromkeys(keys):
        idx = np.asarray([i for i, k in enumerate(keys) if k == key])
        sub = table.take(pa.array(idx))
        pieces.append(_rows(bounds[key[:2]], key[2], sub, swept, metric))
    if not pieces:
        return _table(
            {c: [] for c in ("model", "machine", "strategy", "p", "b", "p2", "S")},
            {k: [] for k in PARAMS},
            metric,
            np.zeros(0),
            np.zeros((0, len(PARAMS))),
            np.zeros(0, np.int64),
        )
    return pa.concat_tables(pieces)


def _rows(bound: Bound, strategy: str, sub: pa.Table, swept: Sequence[str], metric: str) -> pa.Table:
    n = sub.num_rows
    gpn = default_p2(bound.profile)

    def col(name, default):
        if name in sub.column_names:
            return np.asarray(store.category_codes(name, sub.column(name)), np.float64)  # names as codes
        return np.full(n, float(default))

    p = col("p", 1)
    b = col("b", 1)
    given = {k: col(k, 1) if k in sub.column_names else None for k in ("p2", "S")}
    p2, S = defaults(
        p,
        given["p2"] if registry.entry(strategy).uses("p2") else None,
        given["S"] if registry.entry(strategy).uses("S") else None,
        np.full(n, float(gpn)),
    )
    tensor = [col(k, d) for k, d in NO_OWN._asdict().items()]  # the strategies' own axes (registry)
    ev, inputs = Evaluator.of(bound, strategy, swept)
    values = [col(k, 0) for k in swept]
    g = _compiled(ev, metric, True)
    size = max(16, 1 << (n - 1).bit_length())  # padded to a power of two: few distinct compiles

    def pad(v):
        return jnp.asarray(np.concatenate([v, np.repeat(v[-1:], size - n)]))

    cfg = Config(*(pad(v) for v in (p, b, p2, S, *tensor)))
    t, e, limit = g(inputs, cfg, tuple(pad(v) for v in values))
    t, e, limit = np.asarray(t)[:n], np.asarray(e)[:n], np.asarray(limit)[:n]
    base = {k: np.full(n, _value_of(bound, k)) for k in PARAMS}
    for k, v in zip(swept, values, strict=True):
        if k in base:
            base[k] = v
    ident = {c: sub.column(c).to_pylist() for c in ("model", "machine", "strategy")}
    ident.update({"p": p.astype(int).tolist(), "b": b.astype(int).tolist()})
    shown_p2 = col("p2", gpn) if "p2" in sub.column_names else p2
    shown_S = col("S", 1) if "S" in sub.column_names else S
    ident.update({"p2": shown_p2.astype(int).tolist(), "S": shown_S.astype(int).tolist()})
    return _table(ident, {k: base[k].tolist() for k in PARAMS}, metric, t, e, limit)


def _bounds(sw, table: pa.Table) -> dict[tuple[str, str], Bound]:
    """Bound models and machines named in ``table``, from the data's spec metadata or built-ins."""
    from sweep.inputs.machines import load_machine
    from sweep.inputs.models import load_model

    wanted = set(zip(table.column("model").to_pylist(), table.column("machine").to_pylist(), strict=True))
    out: dict[tuple[str, str], Bound] = {}
    meta = sw.metadata
    if meta.get("spec"):
        from sweep.inputs.grid import parse_spec, plan

        spec_path = meta.get("spec_path") or "spec"
        base = Path(spec_path).resolve().parent
        try:
            spec = parse_spec(tomllib.loads(meta["spec"]), spec_path, base, meta["spec"])
            for job in plan(spec).jobs:
                out[(job.bound.model.name, job.bound.profile.name)] = job.bound
        except (InputError, tomllib.TOMLDecodeError, OSError):
            out = {}
    for model, machine in wanted:
        if (model, machine) not in out:
            try:
                out[(model, machine)] = Bound.of(load_model(model), load_machine(machine))
            except InputError:
                raise InputError(
                    f"cannot rebuild model '{model}' on machine '{machine}': the data's spec metadata "
                    "does not load and they are not built-ins"
                ) from None
    return out


def format_sensitivity(table: pa.Table, metric: str = "t_epoch_s") -> str:
    """A readable report of a one-row table (or the first row)."""
    row = table.slice(0, 1).to_pylist()[0]
    head = (
        f"{row['model']} on {row['machine']}, {row['strategy']}, p={row['p']:,} b={row['b']:,}"
        + (f" p2={row['p2']}" if row["strategy"] in ("data+filter", "data+spatial") else "")
        + (f" S={row['S']}" if registry.entry(row["strategy"]).uses("S") else "")
        + "".join(f" {a.name}={row[a.name]}" for a in registry.entry(row["strategy"]).own if _shown(a, row))
        + f": {metric} = {row[metric]:.6g}"
        + ("" if row["feasible"] else f" (infeasible: {row[store.LIMIT_REASON]})")
    )
    width = max(20, *(len(k) for k in PARAMS))  # the longest parameter name sets the column
    lines = [
        head,
        f"elasticity e = d ln {metric} / d ln X (jax.grad): +1% of X changes {metric} by about e %",
        f"  {'parameter':<{width}} {'value':>12} {'elasticity':>11}",
    ]
    ranked = sorted(PARAMS, key=lambda k: -abs(row[f"e_{k}"]) if np.isfinite(row[f"e_{k}"]) else 0)
    for k in ranked:
        lines.append(f"  {k:<{width}} {row[k]:>12.6g} {row[f'e_{k}']:>+11.4f}")
    lines.append("not differentiated: " + ", ".join(f"{k} ({why})" for k, why in SKIPPED.items()))
    lines.append(lever_sentence(row["lever"], row["lever_e"], metric))
    return "\n".join(lines)


def _shown(axis: registry.Axis, row: Mapping) -> bool:
    """Whether a report shows an own axis of the row (:meth:`~kernels.strategies.registry.Axis.shown`)."""
    return axis.name in row and axis.shown(row[axis.name])


def lever_sentence(name: str | None, e: float, metric: str = "t_epoch_s") -> str:
    if name is None:
        return f"no parameter moves {metric} here"
    way = "raise" if e < 0 else "lower"
    sign = "+" if e < 0 else "-"
    return f"pays off most: {name} ({way} it: {sign}1% changes {metric} by {-abs(e):+.3g}%)"


#: Elasticities shown on the terminal for a table of rows (``sweep sensitivity DIR``).
SHOWN = ("gpu_flops", "inter_bandwidth_Bps", "intra_bandwidth_Bps", "inter_alpha_s")


def display_columns(table: pa.Table, metric: str = "t_epoch_s") -> list[str]:
    """The columns a terminal shows of a table of elasticities: identity, ``metric``, the
    elasticities of :data:`SHOWN` and the lever."""
    extra = [f"e_{k}" for k in SHOWN]
    wanted = ("model", "strategy", "p", "b", "p2", metric, *extra, "lever", "lever_e")
    return [c for c in wanted if c in table.column_names]


def lever_over(table: pa.Table) -> str:
    """The parameter with the largest mean |elasticity| over the table's rows, as a sentence."""
    mean = {
        k: float(np.nanmean(np.abs(table.column(f"e_{k}").to_numpy(zero_copy_only=False)))) for k in PARAMS
    }
    top = max(mean, key=lambda k: mean[k])
    return f"pays off most over these rows: {top} (mean |elasticity| {mean[top]:.3g})"
