"""Co-design inverse questions: the value of one machine parameter at which a target starts to hold.

"How much inter-node bandwidth does ResNet-50 need for an epoch under 10 s on
1,024 GPUs?", "from which NVLink bandwidth on does data+filter beat data?".
For a model, a machine, a set of strategies and their configurations at a
fixed GPU count p (samples per replica ``b`` or a fixed global batch ``B``,
group sizes ``p2``, micro-batches ``S``), the predicate is

* ``target``: the best feasible ``metric`` over every configuration of every
  strategy satisfies ``metric <= X`` (or ``<``, ``>=``, ``>``): the best is the least
  for ``<=`` and ``<``, the greatest for ``>=`` and ``>`` (``mfu >= 0.4``); ``feasible``
  holds where some configuration is (:mod:`sweep.answers.targets`);
* ``beats``: the best feasible ``metric`` of the strategies is strictly below
  that of a rival strategy (a strategy with no feasible configuration never
  wins; one against a rival with none always does);

both when both are given. It is evaluated by the same kernels as ``sweep
run`` (:class:`sweep.engine.evaluate.Evaluator`, float64) on a dense grid of the
parameter (4096 log-spaced values by default; a whole-number parameter such as
``gpus_per_node``: every whole number of its range, no bisection), one ``jit(vmap(vmap))``
over configurations x values; every change of the predicate between two
neighbouring grid values is then refined by a vectorized bisection on the
device (``lax.fori_loop``, all crossings at once, in log space) to float64
precision. The answer lists the intervals where the predicate holds, the
crossing values, the smallest and largest value where it holds, and the
best configuration of each strategy there and just on the other side of a
single threshold. The configurations (:mod:`sweep.answers.splits`) include a
strategy's own axes, so data+tensor+pipeline's split (tp, pp, micro-batch,
recompute, zero) is re-optimised at every value: each predicate evaluation
takes the minimum over all of them. A predicate that flips more than
once is reported as such; nothing assumes monotonicity, but a change
between two grid neighbours and back is invisible to the grid.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from kernels.names import BATCH, PARAMS
from kernels.params import WHOLE
from kernels.strategies import registry
from sweep.answers.splits import Candidates, candidates, check_lists, codes, refuse_unanswerable, row_config
from sweep.answers.splits import configurations as configurations  # re-exported: codesign's rows
from sweep.answers.targets import KNOWN as _KNOWN
from sweep.answers.targets import MAX_GRID as MAX_GRID  # re-exported
from sweep.answers.targets import TARGET_OPS, Target, parse_target  # re-exported: the targets' home
from sweep.answers.targets import default_range as _default_range
from sweep.answers.targets import whole_range as _whole_range
from sweep.engine import backend, evaluate
from sweep.engine.evaluate import RESULT_COLUMNS, Evaluator, Inputs, row_dict
from sweep.errors import InputError
from sweep.inputs.configs import (
    Bound,
    Overheads,
    check_strategy,
    frozen_overheads,
)
from sweep.inputs.machines import override
from sweep.output import store

if TYPE_CHECKING:  # pragma: no cover
    from sweep.inputs.layers import Model
    from sweep.inputs.machines import MachineProfile

#: Parameters that are not continuous (their records, :data:`kernels.names.PARAMS`), and why.
NOT_CONTINUOUS: dict[str, str] = {n: p.fixed_why for n, p in PARAMS.items() if not p.varied}
#: Parameters an inverse question cannot ask about, and why: a switch or a choice has no order
#: for a threshold; a sweep over its values compares them. A whole number (``gpus_per_node``)
#: is asked about on every whole number of its range, without bisection.
REFUSED: dict[str, str] = {n: why for n, why in NOT_CONTINUOUS.items() if PARAMS[n].kind != WHOLE}
GRID = 4096
BISECT_STEPS = 64


@dataclass(frozen=True)
class Question:
    """One inverse question; ``b`` or ``B`` (global batch) lists, ``None`` lists mean defaults."""

    strategies: tuple[str, ...]
    param: str
    p: int
    b: tuple[int, ...] | None = None
    B: tuple[int, ...] | None = None
    p2: tuple[int, ...] | None = None
    S: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    #: lists of the strategies' own axes by name (codes), e.g. (("tp", (1, 2, 4)), ...); an axis
    #: not listed takes every legal value (tp, pp, recompute, zero) or its default (the others)
    own: tuple[tuple[str, tuple[int, ...]], ...] = ()
    target: Target | None = None
    beats: str | None = None
    metric: str = "t_epoch_s"
    lo: float | None = None
    hi: float | None = None
    grid: int = GRID

    def describe(self, lo: float, hi: float) -> str:
        what = []
        if self.beats:
            what.append(f"{' or '.join(self.strategies)} beats {self.beats} on {self.metric}")
        if self.target and self.target.is_feasible:
            what.append(f"a configuration of {', '.join(self.strategies)} is feasible")
        elif self.target:
            what.append(f"best {self.target.text()} over {', '.join(self.strategies)}")
        batch = f"B in {_list(self.B)}" if self.B else f"b in {_list(self.b or ())}"
        if self.micro_batch:
            batch += f", micro-batch in {_list(self.micro_batch)}"
        return f"{' and '.join(what)}, at p = {self.p:,} ({batch}), for {self.param} in [{lo:.4g}, {hi:.4g}]"


def _list(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


@dataclass
class Answer:
    """Where the predicate holds over the searched range, refined to float64 precision."""

    question: Question
    model: str
    machine: str
    lo: float
    hi: float
    holds: list[tuple[float, float]]  # closed intervals where the predicate holds
    crossings: list[float]  # refined values where it changes
    smallest: float | None  # smallest value where it holds (the threshold of "at least")
    largest: float | None
    best: list[dict] = field(default_factory=list)  # best configuration per strategy at the threshold
    at: float | None = None  # the parameter value ``best`` was evaluated at
    other: list[dict] = field(default_factory=list)  # the same on the threshold's other side
    other_at: float | None = None  # the parameter value ``other`` was evaluated at

    @property
    def threshold(self) -> float | None:
        """The crossing when there is exactly one, else the smallest value where it holds."""
        return self.crossings[0] if len(self.crossings) == 1 else self.smallest

    def verdict(self) -> str:
        q, name = self.question, self.question.param
        if not self.holds:
            return f"never holds for {name} in [{self.lo:.6g}, {self.hi:.6g}]"
        if len(self.holds) == 1:
            a, b = self.holds[0]
            at_lo, at_hi = a <= self.lo, b >= self.hi
            if at_lo and at_hi:
                return f"holds over the whole range of {name} [{self.lo:.6g}, {self.hi:.6g}]"
            if at_hi:
                return f"holds for {name} >= {a:.6g} (threshold; fails below)"
            if at_lo:
                return f"holds for {name} <= {b:.6g} (threshold; fails above)"
            return f"holds only for {name} in [{a:.6g}, {b:.6g}]"
        del q
        parts = ", ".join(f"[{a:.6g}, {b:.6g}]" for a, b in self.holds)
        return f"holds on {len(self.holds)} separate intervals of {name}: {parts} (not monotone)"

    def to_json(self) -> dict:
        q = self.question
        return {
            "model": self.model,
            "machine": self.machine,
            "param": q.param,
            "p": q.p,
            "strategies": list(q.strategies),
            "beats": q.beats,
            "target": q.target.text() if q.target else None,
            "metric": q.metric,
            "range": [self.lo, self.hi],
            "threshold": self.threshold,
            "smallest": self.smallest,
            "largest": self.largest,
            "holds": [list(iv) for iv in self.holds],
            "crossings": self.crossings,
            "verdict": self.verdict(),
            "at": self.at,
            "best": self.best,
            "other_at": self.other_at,
            "other": self.other,
        }


def check_param(name: str) -> str:
    """A machine parameter an inverse question can vary: its record's kind is continuous or a
    whole number. A switch or a choice is refused, saying which it is."""
    if name in REFUSED:
        raise InputError(
            f"param {name} is {REFUSED[name]}: co-design varies a number over a range; compare its "
            f"values with 'sweep run' (an axis {name})",
            param="param",
        )
    if name not in PARAMS:
        known = ", ".join(k for k in PARAMS if k not in REFUSED)
        raise InputError(f"param: unknown machine parameter '{name}' (known: {known})", param="param")
    return name


@dataclass(frozen=True)
class _Shape:
    """What the compiled programs depend on; values (net, machine, target value) are arguments."""

    strategies: tuple[str, ...]
    beats: str | None
    metric: str
    target_metric: str | None  # the target's operator and value are arguments
    target_max: bool  # the target's best configuration is its greatest metric (mfu >= 0.4)
    names: tuple[str, ...]  # the parameter, then fixed overrides
    log: bool
    overheads: Overheads = ()  # the profile's calibrated overheads, hashable

    def evaluator(self, strategy: str) -> Evaluator:
        """The strategy's evaluator: the parameter free, the profile's overrides and overheads fixed."""
        return Evaluator(strategy, self.names[:1], self.names[1:], self.overheads)

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.strategies, *([self.beats] if self.beats else [])]))


#: Compiled question shapes kept for the process (least recently used dropped first): the
#: programs depend only on the shape, so the answers are the same whether one is kept or not.
PROGRAMS_KEPT = 32


@functools.lru_cache(maxsize=PROGRAMS_KEPT)
def _programs(shape: _Shape):
    """``(pred, bisect, rows)``, jitted once per :class:`_Shape` and reused across questions.

    The best configuration at a parameter value is a minimum over the evaluator vmapped over the
    configurations; the grid vmaps that over the values (work that depends on the configuration
    only is done once per configuration: JAX batches an operation only over the axes it reads).
    """

    def grid(strategy, inputs, cfgs, valid, thetas, column, sign):
        f = shape.evaluator(strategy).bind(inputs)

        def one(cfg, theta):
            cost, der = f(row_config(strategy, cfg), (theta,))
            return jnp.where(cost.limit == 0, sign * evaluate.column(cost, der, column), jnp.inf)

        vals = jax.vmap(jax.vmap(one, (None, 0)), (0, None))(cfgs, thetas)
        return jnp.where(valid[:, None], vals, jnp.inf)

    def best_of(strategies, inputs, cfgs, valid, thetas, column, sign=1.0):
        """The least ``sign * column`` of the feasible configurations, times ``sign``: with
        ``sign = -1`` the greatest ``column`` (-inf where none is feasible)."""
        out = jnp.full(thetas.shape, jnp.inf)
        for s in strategies:
            i = shape.all.index(s)
            if cfgs[i].shape[0]:
                out = jnp.minimum(out, grid(s, inputs, cfgs[i], valid[i], thetas, column, sign).min(axis=0))
        return sign * out

    def pred(inputs, target, cfgs, valid, thetas):
        ok = jnp.ones(thetas.shape, bool)
        if shape.beats:
            mine = best_of(shape.strategies, inputs, cfgs, valid, thetas, shape.metric)
            rival = best_of((shape.beats,), inputs, cfgs, valid, thetas, shape.metric)
            ok &= jnp.isfinite(mine) & (mine < rival)
        if shape.target_metric is not None:
            sign = -1.0 if shape.target_max else 1.0
            best = best_of(shape.strategies, inputs, cfgs, valid, thetas, shape.target_metric, sign)
            op, value = target  # op: index into TARGET_OPS
            hit = jnp.select(
                [op == 0, op == 1, op == 2], [best <= value, best < value, best >= value], best > value
            )
            ok &= jnp.isfinite(best) & hit
        return ok

    def bisect(inputs, target, cfgs, valid, lo, hi, at_lo):
        def body(_, c):
            lo, hi = c
            mid = jnp.sqrt(lo * hi) if shape.log else 0.5 * (lo + hi)
            same = pred(inputs, target, cfgs, valid, mid) == at_lo
            return jnp.where(same, mid, lo), jnp.where(same, hi, mid)

        return jax.lax.fori_loop(0, BISECT_STEPS, body, (lo, hi))

    def rows(strategy, inputs, cfgs, theta):
        f = shape.evaluator(strategy).bind(inputs)
        return jax.vmap(lambda cfg: f(row_config(strategy, cfg), (theta,)))(cfgs)

    return jax.jit(pred), jax.jit(bisect), jax.jit(rows, static_argnums=0)


class _Problem:
    """One question's inputs as float64 device arrays, and its (shared) compiled programs."""

    def __init__(self, bound: Bound, q: Question, log: bool):
        fixed = bound.profile.override_values(np.float64, skip=(q.param,))
        self.shape = _Shape(
            q.strategies,
            q.beats,
            q.metric,
            q.target.metric if q.target else None,
            bool(q.target and q.target.maximises),
            (q.param, *fixed),
            log,
            frozen_overheads(bound.profile),
        )
        self.all = self.shape.all
        self.inputs = _inputs(self.shape, bound)
        self.target = (
            jnp.asarray(TARGET_OPS.index(q.target.op) if q.target else 0, jnp.int32),
            jnp.asarray(q.target.value if q.target else 0.0, jnp.float64),
        )
        self._pred, self._bisect, self._rows = _programs(self.shape)

    def pred(self, cfgs, valid, thetas):
        return self._pred(self.inputs, self.target, cfgs, valid, thetas)

    def bisect(self, cfgs, valid, lo, hi, at_lo):
        return self._bisect(self.inputs, self.target, cfgs, valid, lo, hi, at_lo)

    def rows(self, strategy: str, cfgs, theta):
        return self._rows(strategy, self.inputs, cfgs, theta)


def _inputs(shape: _Shape, bound: Bound) -> Inputs:
    """The evaluators' inputs (any strategy's: they share the net, machine and fixed overrides)."""
    return shape.evaluator(shape.all[0]).inputs(bound)


def solve(bound: Bound, q: Question) -> Answer:
    """Answer one question on a bound model and machine (float64: JAX's x64 mode is on during
    the call and put back after)."""
    with backend.settings(jax_enable_x64=True):
        return _solve(bound, q)


def _solve(bound: Bound, q: Question) -> Answer:
    for s in (*q.strategies, *([q.beats] if q.beats else [])):
        check_strategy(s)
    check_lists(q, (*q.strategies, *([q.beats] if q.beats else [])))
    check_param(q.param)
    if q.target is None and q.beats is None:
        raise InputError("give a target ('t_epoch_s <= 10') or beats (a rival)", param=("target", "beats"))
    if q.beats and q.beats in q.strategies:
        raise InputError(f"beats {q.beats} is also one of strategies", param=("beats", "strategies"))
    if q.p < 1:
        raise InputError(f"p must be >= 1, got {q.p}", param="p")
    if not q.b and not q.B:
        raise InputError("give samples per replica (b) or a global batch (B)", param=("b", "B"))
    whole = PARAMS[q.param].kind == WHOLE
    if not 2 <= q.grid <= MAX_GRID and not whole:
        raise InputError(f"grid must be in 2..{MAX_GRID:,}, got {q.grid:,}", param="grid")
    d_lo, d_hi = _default_range(bound, q.param)
    lo, hi = (d_lo if q.lo is None else q.lo), (d_hi if q.hi is None else q.hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise InputError(f"range must satisfy 0 <= LO < HI, got {lo:g}:{hi:g}", param="range")
    if hi > PARAMS[q.param].high:
        raise InputError(f"range: {q.param} is at most {PARAMS[q.param].high:g}, got {hi:g}", param="range")
    if whole:
        lo, hi = _whole_range(q.param, lo, hi)
    log = lo > 0
    prob = _Problem(bound, q, log)
    cand = _candidates(bound, q, prob.all)
    cfgs = tuple(jnp.asarray(c.rows) for c in cand)
    valid = tuple(jnp.asarray(c.valid) for c in cand)
    if whole:  # every whole number of the range: the crossings are exact, no bisection
        thetas = np.arange(lo, hi + 1.0)
    else:
        thetas = np.geomspace(lo, hi, q.grid) if log else np.linspace(lo, hi, q.grid)
        thetas[0], thetas[-1] = lo, hi
    holds = np.asarray(prob.pred(cfgs, valid, jnp.asarray(thetas)))
    change = np.flatnonzero(holds[1:] != holds[:-1])
    crossings: list[float] = []
    edges: list[tuple[float, bool]] = []  # (refined value, holds just above it)
    if len(change):
        m = len(change)
        pad = 8 * -(-m // 8)  # one compile for up to 8, 16, ... crossings
        b_lo = np.full(pad, thetas[0])
        b_hi = np.full(pad, thetas[1])
        at_lo = np.zeros(pad, bool)
        b_lo[:m], b_hi[:m], at_lo[:m] = thetas[change], thetas[change + 1], holds[change]
        if whole:  # neighbouring whole numbers: the last that fails and the first that holds, or back
            r_lo, r_hi = b_lo[:m], b_hi[:m]
        else:
            r_lo, r_hi = prob.bisect(cfgs, valid, jnp.asarray(b_lo), jnp.asarray(b_hi), jnp.asarray(at_lo))
            r_lo, r_hi = np.asarray(r_lo)[:m], np.asarray(r_hi)[:m]
        for i in range(m):
            # rising: the smallest value found that holds is r_hi; falling: the largest is r_lo
            rising = not holds[change[i]]
            crossings.append(float(r_hi[i] if rising else r_lo[i]))
            edges.append((crossings[-1], rising))
    intervals: list[tuple[float, float]] = []
    start = lo if holds[0] else None
    for value, rising in edges:
        if rising:
            start = value
        elif start is not None:
            intervals.append((start, value))
            start = None
    if start is not None:
        intervals.append((start, hi))
    smallest = intervals[0][0] if intervals else None
    largest = intervals[-1][1] if intervals else None
    answer = Answer(q, bound.model.name, bound.profile.name, lo, hi, intervals, crossings, smallest, largest)
    at = answer.threshold
    if at is None:
        at = hi
    answer.at = float(at)
    answer.best = _best_rows(prob, bound, q, cand, float(at))
    if len(crossings) == 1:
        # the other side of the threshold: the bisection's last value where the predicate fails
        other = float(r_lo[0] if not holds[change[0]] else r_hi[0])
        answer.other_at = other
        answer.other = _best_rows(prob, bound, q, cand, other)
    return answer


def _candidates(bound: Bound, q: Question, strategies: Sequence[str]) -> list[Candidates]:
    """Each strategy's candidates (:func:`sweep.answers.splits.candidates`); an :class:`InputError`
    when every one of a strategy's breaks a rule of its registry entry (the rules reading the
    machine, precision, on its values unless the question varies them) or none has a global
    batch that splits: no value of the parameter answers such a question."""
    machine = None
    if q.param not in ("gpu_flops_fp8", "gpu_flops_mxfp8", "gpu_flops_fp4"):
        machine = override(bound.profile.pytree(np.float64), bound.profile.override_values(np.float64))
    cand = [candidates(bound, s, q) for s in strategies]
    for s, c in zip(strategies, cand, strict=True):
        refuse_unanswerable(bound, s, c, q.p, machine)  # the rule named first
        if not c.valid.any():
            given = "b/B/p2" + "/micro-batch" * bool(q.micro_batch) + "".join(f"/{k}" for k, _ in q.own)
            raise InputError(f"strategy {s} has no configuration at p = {q.p} with the given {given}")
    return cand


def _best_rows(
    prob: _Problem, bound: Bound, q: Question, cand: Sequence[Candidates], theta: float
) -> list[dict]:
    """The best feasible configuration of each strategy at ``theta`` (all columns), fastest first;
    a strategy's own axes and its micro-batch size are columns too."""
    metric = q.target.metric if q.target and not q.beats else q.metric
    sign = -1.0 if q.target and not q.beats and q.target.maximises else 1.0  # the best is the greatest
    out = []
    overrides = {**bound.profile.overrides, q.param: theta}
    for s, c in zip(prob.all, cand, strict=True):
        cost, der = prob.rows(s, jnp.asarray(c.rows), jnp.asarray(theta, jnp.float64))
        value = np.asarray(evaluate.column(cost, der, metric), dtype=np.float64)
        value = np.where((np.asarray(cost.limit) == 0) & c.valid, sign * value, np.inf)
        i = int(np.argmin(value))
        pick_cost, pick_der = jax.tree_util.tree_map(lambda a, i=i: np.asarray(a)[i], (cost, der))
        if not c.valid[i]:  # the global batch does not split over this configuration
            pick_cost = pick_cost._replace(limit=np.int32(BATCH))
            pick_der = pick_der._replace(feasible=np.bool_(False))
        row = row_dict(bound, s, pick_cost, pick_der, overrides)
        entry = registry.entry(s)
        for axis in entry.own:
            row[axis.name] = axis.label(c.rows[i][c.columns.index(axis.name)])
        out.append(row)
    out.sort(key=lambda r: (not r["feasible"], sign * r[metric]))
    return out


def codesign(
    model: str | Path | Model,
    machine: str | Path | MachineProfile,
    strategies: Sequence[str] | str,
    param: str,
    *,
    p: Sequence[int] | int,
    b: Sequence[int] | int | None = None,
    B: Sequence[int] | int | None = None,
    p2: Sequence[int] | int | None = None,
    S: Sequence[int] | int | None = None,
    micro_batch: Sequence[int] | int | None = None,
    own: Mapping[str, Sequence[int | str] | int | str | None] | None = None,
    target: str | Target | None = None,
    beats: str | None = None,
    metric: str = "t_epoch_s",
    range: tuple[float, float] | None = None,
    grid: int = GRID,
    lc: str | Path | None = None,
    set: Mapping[str, float | str] | None = None,
) -> list[Answer]:
    """Answer the question at each GPU count in ``p``: what ``sweep codesign`` runs.

    ``model`` and ``machine`` are built-in names, paths, or loaded objects; ``set``
    overrides machine parameters. ``b`` (samples per replica) or ``B`` (fixed global
    batches) list the batches to choose from; ``p2`` and ``S`` the hybrids' group sizes
    and the pipeline's micro-batches (default: gpus_per_node and p); ``micro_batch`` sizes give
    S = b / size instead. ``own`` lists, by axis name, the values of a strategy's own axes it
    chooses from at every value of the parameter (data+tensor+pipeline's ``tp``, ``pp``,
    ``recompute``, ``zero``, ``vp``, ``sp``, ``precision``); an axis not listed takes every legal
    value where the registry marks it ``searched`` (the registry's ``legal``), else its default;
    micro-batch sizes default to every divisor of b. The predicate is
    ``target`` (``"t_epoch_s <= 10"``) and/or ``beats`` (a rival strategy), searched over
    ``range`` (default: the machine's value / 64 to x 64) on a ``grid`` of values.
    """
    from sweep.inputs.layers import Model
    from sweep.inputs.machines import MachineProfile, load_machine
    from sweep.inputs.models import load_model

    check_param(param)
    if metric not in RESULT_COLUMNS:
        raise InputError(f"metric: unknown column '{metric}' (known: {_KNOWN})", param="metric")
    if b and B:
        raise InputError("give b or B, not both", param=("b", "B"))
    base = machine if isinstance(machine, MachineProfile) else load_machine(machine)
    profile = base.with_overrides(dict(set or {}))
    loaded = model if isinstance(model, Model) else load_model(model, lc=lc)
    bound = Bound.of(loaded, profile)
    lo, hi = range if range is not None else (None, None)
    names = [strategies] if isinstance(strategies, str) else list(strategies)
    own_lists = tuple((k, codes(k, v)) for k, v in (own or {}).items() if v is not None)
    question = functools.partial(
        Question,
        strategies=tuple(x.strip() for n in names for x in n.split(",") if x.strip()),
        param=param,
        b=_tuple(b),
        B=_tuple(B),
        p2=_tuple(p2),
        S=_tuple(S),
        micro_batch=_tuple(micro_batch),
        own=own_lists,
        target=parse_target(target) if isinstance(target, str) else target,
        beats=beats,
        metric=metric,
        lo=lo,
        hi=hi,
        grid=grid,
    )
    return [solve(bound, question(p=int(pi))) for pi in ([p] if isinstance(p, int) else p)]


def _tuple(values: Sequence[int] | int | None) -> tuple[int, ...] | None:
    if values is None:
        return None
    return (int(values),) if isinstance(values, int) else tuple(int(v) for v in values)


def format_answer(a: Answer) -> str:
    """The human-readable report of one answer."""
    q = a.question
    lines = [
        f"question: {q.describe(a.lo, a.hi)}; {a.model} on {a.machine}",
        f"answer:   {a.verdict()}",
    ]
    if a.crossings:
        lines.append("crossings: " + ", ".join(f"{c:.6g}" for c in a.crossings))
    metric = q.target.metric if q.target and not q.beats else q.metric
    if a.best and a.at is not None:
        lines.append(f"best configuration per strategy at {q.param} = {a.at:.6g}:")
        lines += [_format_row(r, metric) for r in a.best]
    if a.other and a.other_at is not None:
        side = "below" if a.other_at < (a.at or 0) else "above"
        lines.append(f"just {side} the threshold, at {q.param} = {a.other_at:.12g} (fails):")
        same = {r["strategy"]: _split(r) for r in a.best}
        for r in a.other:
            if same.get(r["strategy"]) == _split(r):
                lines.append(f"  {r['strategy']:<13} the same configuration, {metric}={r[metric]!r}")
            else:
                lines.append(_format_row(r, metric))
    return "\n".join(lines)


def _split(r: dict) -> tuple:
    """A row's configuration: its shared and own axes."""
    own = [x.name for x in registry.entry(r["strategy"]).own]
    return tuple(r.get(k) for k in ("p", "b", "p2", "S", *own))


def _format_row(r: dict, metric: str) -> str:
    entry = registry.entry(r["strategy"])
    extra = f"  p2={r['p2']}" if entry.uses("p2") else ""
    extra += f"  S={r['S']}" if entry.uses("S") else ""
    extra += f"  micro_batch={r['micro_batch']}" if "micro_batch" in r else ""
    extra += "".join(f"  {x.name}={r[x.name]}" for x in entry.own if x.name in r and x.shown(r[x.name]))
    state = "" if r["feasible"] else f"  infeasible ({r[store.LIMIT_REASON]})"
    # beside a per-iteration metric, compute and communication per iteration too
    its, per = (r["iterations"], "_per_iter") if metric == "t_iter_s" and r.get("iterations") else (1, "")
    return (
        f"  {r['strategy']:<13} p={r['p']:,}  b={r['b']:,}  B={r['global_batch']:,}{extra}  "
        f"{metric}={r[metric]:.6g}  t_comp{per}_s={r['t_comp_s'] / its:.6g}  "
        f"t_comm{per}_s={r['t_comm_s'] / its:.6g}  mem_bytes={r['mem_bytes']:.4g}{state}"
    )
