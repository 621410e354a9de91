"""Calibrate a machine profile on measured runs, by gradient descent through the kernels.

The fitted quantities are scalar machine parameters (docs/model.md §8),
per-strategy multiplicative overheads on compute and on each communication
term, and per-strategy additive overheads per iteration and per sample
(:func:`kernels.terms.scale_terms`). Each parameter ``v`` lives in log space
inside its bounds ``[lo, hi]``, shifted by a floor ``f`` (0 except for an
additive overhead, which can then be 0):

.. math::
    \\log (v + f) = \\log (lo + f) + \\bigl(\\log (hi + f) - \\log (lo + f)\\bigr)\\,\\sigma(\\theta)

and ``theta`` minimises the mean squared log error of the iteration time
over the measured runs,

.. math::
    L(\\theta) = \\frac{1}{n}\\sum_i \\bigl(\\log t_{pred,i}(\\theta) - \\log t_{meas,i}\\bigr)^2

with gradients from :func:`jax.grad` through the same kernels the sweeps use
(:func:`sweep.evaluate.point_fn`), in float64, and a deterministic L-BFGS
(Nocedal and Wright, *Numerical Optimization*, 2nd ed., algorithm 7.4, with
Armijo backtracking).

Parameter names (``--fit``): a scalar machine parameter (``inter_bandwidth_Bps``,
``efficiency``, ...), or ``overheads.<strategy>.<term>`` with term one of
``compute``, ``allreduce``, ``allgather``, ``halo``, ``p2p``, ``comm`` (the four
communication terms tied) or ``all`` (every multiplicative term tied), factors
that multiply, or ``per_iter_s``, ``per_sample_s``, seconds that add.
``NAME=LO:HI`` sets the bounds.

Without explicit parameters, :func:`default_candidates` lists a priority
order and :func:`select_identifiable` keeps those the runs can tell apart: a
greedy pivoted selection on the Jacobian of the log times with respect to the
log parameters, at the starting values; :func:`fit_default` fits them and
repeats without the additive overheads the fit put at 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from kernels import SCALAR_PARAMS, STRATEGIES, with_params
from kernels.terms import ADDITIVE_TERMS, OVERHEAD_TERMS
from sweep.engine.evaluate import point_fn
from sweep.errors import InputError
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements
from sweep.trust.validation import groups

#: Communication terms (the ``comm`` tie) and every term (the ``all`` tie).
COMM_TERMS: tuple[str, ...] = ("allreduce", "allgather", "halo", "p2p")
TIES: dict[str, tuple[str, ...]] = {"comm": COMM_TERMS, "all": OVERHEAD_TERMS}
#: Default candidates per measured strategy, in priority order (see :func:`default_candidates`).
CANDIDATE_TERMS: tuple[str, ...] = ("per_sample_s", "all", "compute", "comm", "per_iter_s")
#: Scalar machine parameters that cannot be fitted, and why.
NOT_FITTABLE: dict[str, str] = {
    "gpu_mem_bytes": "it only decides feasibility, not time",
    "gpus_per_node": "it is a whole number (the node size)",
    "nics_per_node": "it is a whole number",
    "allreduce_algo": "it is a choice of algorithm, not a number",
}
#: Default bounds: a factor of this around the starting value for machine parameters.
MACHINE_SPAN = 100.0
#: Default bounds of an overhead factor.
OVERHEAD_BOUNDS = (0.1, 1e3)
#: Default bounds of an additive overhead, seconds (per iteration; per sample of b per iteration) ...
ADDITIVE_BOUNDS: dict[str, tuple[float, float]] = {"per_iter_s": (0.0, 100.0), "per_sample_s": (0.0, 1.0)}
#: ... and its floor: it lives in log(value + floor) space, so it can reach 0 (below the floor it is
#: effectively linear). The floors are far below the costs that matter (ms per iteration or sample).
ADDITIVE_FLOOR: dict[str, float] = {"per_iter_s": 1e-5, "per_sample_s": 1e-6}
#: Default selection: a parameter must move some run's log time by this much per unit log change ...
MIN_SENSITIVITY = 0.1
#: ... and keep this fraction of its Jacobian column outside the span of those already chosen.
MIN_INDEPENDENCE = 0.2


@dataclass(frozen=True)
class Param:
    """One fitted parameter: its name, bounds, starting value and floor.

    The start is the profile's value for a machine parameter (the geometric
    mean of the bounds if that value is 0), 1 for an overhead factor and 0 for
    an additive overhead. The fit works in ``log(value + floor)``: ``floor``
    is 0 except for an additive overhead, whose value may then be 0.
    """

    name: str
    lo: float
    hi: float
    start: float
    floor: float = 0.0

    @property
    def additive(self) -> bool:
        """An additive overhead (seconds added), not a factor or a machine parameter."""
        target = self.overhead
        return target is not None and target[1][0] in ADDITIVE_TERMS

    @property
    def overhead(self) -> tuple[str, tuple[str, ...]] | None:
        """``(strategy, terms)`` for an overhead, None for a machine parameter."""
        return overhead_target(self.name)


def overhead_target(name: str) -> tuple[str, tuple[str, ...]] | None:
    """``overheads.<strategy>.<term>`` as ``(strategy, terms it scales)``; None for other names."""
    if not name.startswith("overheads."):
        return None
    strategy, _, term = name[len("overheads.") :].rpartition(".")
    return strategy, TIES.get(term, (term,))


def make_param(name: str, profile: MachineProfile, bounds: tuple[float, float] | None = None) -> Param:
    """A :class:`Param` from its name, checked; default bounds around the profile's value.

    An overhead factor is a factor on top of the profile's own ``[overheads]``
    (they multiply), so it starts at 1 whatever the profile has; an additive
    overhead is added to the profile's own, so it starts at 0.
    """
    if name.startswith("overheads."):
        strategy, _, term = name[len("overheads.") :].rpartition(".")
        if strategy not in STRATEGIES:
            raise InputError(f"--fit {name}: unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})")
        if term in ADDITIVE_TERMS:
            lo, hi = bounds or ADDITIVE_BOUNDS[term]
            if not 0 <= lo < hi or not math.isfinite(hi):
                raise InputError(f"--fit {name}: bounds must be 0 <= LO < HI seconds, got {lo:g}:{hi:g}")
            return Param(name, float(lo), float(hi), 0.0, ADDITIVE_FLOOR[term])
        if term not in OVERHEAD_TERMS and term not in TIES:
            known = ", ".join((*OVERHEAD_TERMS, *TIES, *ADDITIVE_TERMS))
            raise InputError(f"--fit {name}: unknown term '{term}' (known: {known})")
        start = 1.0  # on top of the profile's own overheads, which stay as they are
        lo, hi = bounds or OVERHEAD_BOUNDS
    else:
        if name in NOT_FITTABLE:
            raise InputError(f"--fit {name}: cannot be fitted: {NOT_FITTABLE[name]}")
        if name not in SCALAR_PARAMS:
            known = ", ".join(p for p in SCALAR_PARAMS if p not in NOT_FITTABLE)
            raise InputError(
                f"--fit {name}: unknown parameter (machine: {known}; or overheads.<strategy>.<term>)"
            )
        start = profile.value(name)
        if bounds is None and start <= 0:
            raise InputError(f"--fit {name}: its value is {start:g}; give bounds as {name}=LO:HI")
        lo, hi = bounds or (start / MACHINE_SPAN, start * MACHINE_SPAN)
        if name == "efficiency":
            if bounds is None:
                hi = min(hi, 1.0)
            if not 0 < lo < hi <= 1:
                raise InputError(f"--fit {name}: bounds must lie in (0, 1], got {lo:g}:{hi:g}")
    if not 0 < lo < hi or not math.isfinite(hi):
        raise InputError(f"--fit {name}: bounds must be 0 < LO < HI, got {lo:g}:{hi:g}")
    if start <= 0:
        start = math.sqrt(lo * hi)
    return Param(name, float(lo), float(hi), float(start))


def parse_fit(items: str | Sequence[str], profile: MachineProfile) -> list[Param]:
    """``NAME[=LO:HI]`` items, comma-separated or repeated, as :class:`Param` (duplicates refused)."""
    if isinstance(items, str):
        items = [items]
    out: list[Param] = []
    for item in (x.strip() for text in items for x in text.split(",")):
        if not item:
            continue
        name, sep, rng = item.partition("=")
        name = name.strip()
        bounds = None
        if sep:
            lo_text, colon, hi_text = rng.partition(":")
            try:
                bounds = (float(lo_text), float(hi_text))
            except ValueError:
                bounds = None
            if not colon or bounds is None:
                raise InputError(f"--fit expects NAME or NAME=LO:HI, got '{item}'")
        if any(p.name == name for p in out):
            raise InputError(f"--fit {name}: named twice")
        out.append(make_param(name, profile, bounds))
    if not out:
        raise InputError("--fit names no parameter")
    return out


def default_candidates(meas: Measurements, profile: MachineProfile) -> list[Param]:
    """The default parameters in priority order (see :func:`select_identifiable`).

    Per strategy measured: first ``overheads.<s>.per_sample_s``, an additive
    cost per sample that does not depend on the model (what the hybrid runs
    on the public ABCI file show, docs/trust.md), so that it, not a factor on
    the model's own terms, explains a strategy's excess time when the runs
    cannot tell the two apart (runs of one model): it is the one that carries
    to other models. Then ``overheads.<s>.all`` (how much slower the
    implementation is overall), ``compute`` and ``comm`` (the split between
    them) and ``per_iter_s`` (a fixed cost per iteration). Then the
    inter-node bandwidth and latency, shared by every strategy; last, each
    communication term on its own. Overheads come before the network because
    they stay with the strategy whose runs fitted them, where a fitted
    network parameter moves every strategy's predictions.
    """
    present = [s for s in STRATEGIES if any(r.strategy == s for r in meas.runs)]
    names = [f"overheads.{s}.{t}" for t in CANDIDATE_TERMS for s in present]
    names += ["inter_bandwidth_Bps", "inter_alpha_s"]
    names += [f"overheads.{s}.{t}" for s in present for t in COMM_TERMS]
    return [make_param(n, profile) for n in names]


class Problem:
    """Measured runs on one machine, a list of parameters, and the jitted pieces of the fit.

    Parameters are handled in the coordinates ``logv = log(value + floor)``
    (the natural log of the value, except for an additive overhead, whose
    floor lets it reach 0; see :class:`Param`). :meth:`log_pred` maps them to
    the log iteration time of every run; ``loss_and_grad(logv, weights, log_meas)`` gives
    the weighted mean squared log error and its gradient (:func:`jax.value_and_grad`);
    :meth:`jacobian` the ``[runs, params]`` sensitivities (:func:`jax.jacfwd`).
    Two compilations in all, whatever the weights and measured times
    (cross-validation folds reuse them; ``log_meas`` may be replaced).
    """

    def __init__(self, meas: Measurements, profile: MachineProfile, params: Sequence[Param]):
        self.meas = meas
        self.profile = profile
        self.params = tuple(params)
        self.log_meas = np.log([r.iter_time_s for r in meas.runs])
        self.floor = np.asarray([p.floor for p in self.params], np.float64)
        self.log_start = np.log([p.start + p.floor for p in self.params])
        self.log_lo = np.log([p.lo + p.floor for p in self.params])
        self.log_hi = np.log([p.hi + p.floor for p in self.params])
        self._groups = groups(meas)
        for g in self._groups:
            if g.profile is not profile:
                raise InputError("calibration needs every run predicted on the one machine it fits")
        log_pred = self._log_pred

        def loss(logv, weights, log_meas):
            r = log_pred(logv) - log_meas
            return jnp.sum(weights * r * r) / jnp.sum(weights)

        self.loss_and_grad: Callable = jax.jit(jax.value_and_grad(loss))
        self._pred_and_jac: Callable = jax.jit(jax.jacfwd(lambda v: (log_pred(v), log_pred(v)), has_aux=True))

    def log_pred(self, logv) -> np.ndarray:
        """Log predicted iteration time of every run."""
        return np.asarray(self._pred_and_jac(jnp.asarray(logv, jnp.float64))[1])

    def jacobian(self, logv) -> np.ndarray:
        """``d log t_pred / d log v``, ``[runs, params]``."""
        return np.asarray(self._pred_and_jac(jnp.asarray(logv, jnp.float64))[0])

    def _log_pred(self, logv):
        values = jnp.exp(logv) - self.floor
        machine = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), self.profile.pytree())
        if self.profile.overrides:
            machine = with_params(
                machine, **{k: jnp.asarray(v, jnp.float64) for k, v in self.profile.overrides.items()}
            )
        scalars = {p.name: values[i] for i, p in enumerate(self.params) if p.overhead is None}
        if scalars:
            machine = with_params(machine, **scalars)
        overheads: dict[str, dict] = {s: dict(t) for s, t in self.profile.overheads.items()}
        for i, p in enumerate(self.params):
            if p.overhead is not None:
                add_overhead(overheads, p.name, values[i])
        out = jnp.zeros(len(self.meas.runs), jnp.float64)
        for g in self._groups:
            f = point_fn(g.strategy, (), overheads=overheads)
            net, cfg = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), (g.net, g.cfg))
            _, derived = jax.vmap(f, in_axes=(None, None, 0, None))(net, machine, cfg, ())
            out = out.at[g.index].set(jnp.log(derived.t_iter_s))
        return out

    def values(self, logv) -> dict[str, float]:
        """Parameter values from their coordinates (an additive overhead is never below 0)."""
        return {
            p.name: max(float(math.exp(v)) - p.floor, 0.0) if p.floor else float(math.exp(v))
            for p, v in zip(self.params, logv, strict=True)
        }


def add_overhead(overheads: dict[str, dict], name: str, value) -> None:
    """Put the overhead ``name`` (``overheads.<strategy>.<term>``) into a ``strategy -> {term: value}``
    table, on top of what it holds: factors multiply, additive seconds add."""
    target = overhead_target(name)
    assert target is not None
    strategy, terms = target
    table = overheads.setdefault(strategy, {})
    for term in terms:
        if term in ADDITIVE_TERMS:
            table[term] = table.get(term, 0.0) + value
        else:
            table[term] = table.get(term, 1.0) * value


# ------------------------------------------------------------------------------------------- L-BFGS


@dataclass(frozen=True)
class Minimum:
    """Where :func:`lbfgs` stopped."""

    x: np.ndarray
    f: float
    iterations: int
    converged: bool


def lbfgs(
    fg: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    *,
    max_iter: int = 2000,
    memory: int = 20,
    gtol: float = 1e-11,
    ftol: float = 1e-15,
) -> Minimum:
    """Minimise ``f`` from ``x0`` by L-BFGS with Armijo backtracking (deterministic, numpy).

    Stops when the largest gradient component is below ``gtol``, when ``f``
    changes by less than ``ftol * max(1, |f|)`` over 10 steps, or when no
    step decreases it.
    """
    x = np.asarray(x0, np.float64).copy()
    f, g = fg(x)
    s_list: list[np.ndarray] = []
    y_list: list[np.ndarray] = []
    history = [f]
    for it in range(1, max_iter + 1):
        if not np.all(np.isfinite(g)) or np.max(np.abs(g), initial=0.0) <= gtol:
            return Minimum(x, f, it - 1, bool(np.all(np.isfinite(g))))
        q = g.copy()
        alphas = []
        for s, y in zip(reversed(s_list), reversed(y_list), strict=True):
            a = (s @ q) / (y @ s)
            alphas.append(a)
            q -= a * y
        if s_list:
            q *= (s_list[-1] @ y_list[-1]) / (y_list[-1] @ y_list[-1])
        else:
            q /= max(1.0, float(np.linalg.norm(g)))
        for (s, y), a in zip(zip(s_list, y_list, strict=True), reversed(alphas), strict=True):
            q += (a - (y @ q) / (y @ s)) * s
        d = -q
        slope = float(g @ d)
        if slope >= 0:  # not a descent direction: restart from steepest descent
            s_list.clear()
            y_list.clear()
            d = -g / max(1.0, float(np.linalg.norm(g)))
            slope = float(g @ d)
        t = 1.0
        for _ in range(60):
            x_new = x + t * d
            f_new, g_new = fg(x_new)
            if np.isfinite(f_new) and f_new <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return Minimum(x, f, it, True)  # no step decreases f: a minimum to working precision
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12 * np.linalg.norm(s) * np.linalg.norm(y):
            s_list.append(s)
            y_list.append(y)
            if len(s_list) > memory:
                s_list.pop(0)
                y_list.pop(0)
        x, f, g = x_new, f_new, g_new
        history.append(f)
        if len(history) > 10 and abs(history[-11] - f) <= ftol * max(1.0, abs(f)):
            return Minimum(x, f, it, True)
    return Minimum(x, f, max_iter, False)


# --------------------------------------------------------------------------------------------- fit


@dataclass(frozen=True)
class Fit:
    """A fit: coordinates ``log(value + floor)`` of every parameter (fixed ones at their start), loss,
    and how it ended (:meth:`Problem.values` gives the values)."""

    logv: np.ndarray
    free: np.ndarray  # bool per parameter
    loss: float
    iterations: int
    converged: bool
    at_bound: np.ndarray  # bool per parameter: within 0.1 % (of the log range) of a bound


#: Starting points are moved this far (fraction of the log range) inside the bounds.
START_MARGIN = 0.02


def _sigmoid(theta) -> np.ndarray:
    """``1 / (1 + exp(-theta))`` without overflow for large ``|theta|``."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(theta, np.float64)))


@dataclass(frozen=True)
class Objective:
    """The loss as a function of the unconstrained ``theta`` of the free parameters.

    ``log v = log lo + (log hi - log lo) sigmoid(theta)`` for free parameters;
    fixed ones stay at ``logv0``. ``fg(theta)`` returns the loss and its
    gradient (:func:`jax.value_and_grad` through the kernels, chained with the
    sigmoid's derivative).
    """

    problem: Problem
    free: np.ndarray
    weights: np.ndarray
    logv0: np.ndarray

    @property
    def lo(self) -> np.ndarray:
        return self.problem.log_lo[self.free]

    @property
    def span(self) -> np.ndarray:
        return (self.problem.log_hi - self.problem.log_lo)[self.free]

    def theta0(self) -> np.ndarray:
        """Starting ``theta``: the starting values, moved :data:`START_MARGIN` inside the bounds."""
        frac = np.clip((self.logv0[self.free] - self.lo) / self.span, START_MARGIN, 1 - START_MARGIN)
        return np.log(frac / (1 - frac))

    def to_logv(self, theta) -> np.ndarray:
        logv = self.logv0.copy()
        logv[self.free] = self.lo + self.span * _sigmoid(theta)
        return logv

    def fg(self, theta) -> tuple[float, np.ndarray]:
        sig = _sigmoid(theta)
        value, grad = self.problem.loss_and_grad(
            jnp.asarray(self.to_logv(theta)), jnp.asarray(self.weights), jnp.asarray(self.problem.log_meas)
        )
        return float(value), np.asarray(grad)[self.free] * self.span * sig * (1 - sig)


def fit(
    problem: Problem,
    free: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
    **lbfgs_options,
) -> Fit:
    """Fit the ``free`` parameters (all by default) to the runs with ``weights`` (all 1 by default).

    ``start`` overrides the starting values (natural logs); fixed parameters stay at theirs.
    """
    k = len(problem.params)
    free = np.ones(k, bool) if free is None else np.asarray(free, bool)
    weights = np.ones(len(problem.log_meas)) if weights is None else np.asarray(weights, np.float64)
    logv0 = problem.log_start.copy() if start is None else np.asarray(start, np.float64).copy()
    obj = Objective(problem, free, weights, logv0)
    if not free.any():
        return Fit(logv0, free, obj.fg(np.zeros(0))[0], 0, True, np.zeros(k, bool))
    m = lbfgs(obj.fg, obj.theta0(), **lbfgs_options)
    logv = obj.to_logv(m.x)
    edge = np.zeros(k, bool)
    pos = (logv[free] - obj.lo) / obj.span
    edge[free] = (pos < 1e-3) | (pos > 1 - 1e-3)
    return Fit(logv, free, m.f, m.iterations, m.converged, edge)


@dataclass(frozen=True)
class Selection:
    """The default parameters kept, and why the others were not."""

    keep: np.ndarray  # bool per candidate
    reasons: dict[str, str]  # dropped name -> reason


def select_identifiable(
    problem: Problem, rows: np.ndarray | None = None, exclude: np.ndarray | None = None
) -> Selection:
    """Greedy pivoted choice of candidates the runs in ``rows`` can identify.

    With ``J`` the Jacobian of the runs' log times with respect to the log
    parameters at their starting values, a candidate is kept, in priority
    order, when it moves some run's log time by at least
    :data:`MIN_SENSITIVITY` per unit, and at least :data:`MIN_INDEPENDENCE`
    of its column's norm lies outside the span of the columns already kept; at
    most as many as there are runs. ``exclude`` marks candidates not to
    consider (additive overheads a fit put at 0, see :func:`fit_default`).
    """
    jac = np.asarray(problem.jacobian(problem.log_start))
    if rows is not None:
        jac = jac[np.asarray(rows, bool)]
    keep = np.zeros(jac.shape[1], bool)
    reasons: dict[str, str] = {}
    basis = np.zeros((jac.shape[0], 0))
    for j, p in enumerate(problem.params):
        col = jac[:, j]
        if exclude is not None and exclude[j]:
            reasons[p.name] = "fitted to 0 (an additive overhead these runs do not need)"
            continue
        if np.max(np.abs(sensitivity(problem, j, col)), initial=0.0) < MIN_SENSITIVITY:
            reasons[p.name] = "too little effect on these runs"
            continue
        rest = col - basis @ (basis.T @ col)
        if np.linalg.norm(rest) < MIN_INDEPENDENCE * np.linalg.norm(col):
            reasons[p.name] = "not separable from the parameters before it"
            continue
        if keep.sum() >= jac.shape[0]:
            reasons[p.name] = "no runs left to fit it"
            continue
        keep[j] = True
        basis = np.column_stack([basis, rest / np.linalg.norm(rest)])
    return Selection(keep, reasons)


def sensitivity(problem: Problem, j: int, col: np.ndarray) -> np.ndarray:
    """What :func:`select_identifiable` tests against :data:`MIN_SENSITIVITY`, per run.

    ``col`` is parameter ``j``'s column of the Jacobian at the start. For a
    factor or a machine parameter, the column itself. An additive overhead
    starts at 0, where it moves nothing, and its share of a run's time grows
    with its value: its test is its effect per e-fold at the top of its
    bounds, ``hi x_i / (t_i + hi x_i)`` with ``x_i = dt_i / dv`` (from the
    column: ``x_i / t_i = col_i / (start + floor)``).
    """
    p = problem.params[j]
    if not p.additive:
        return col
    share = p.hi * np.abs(col) / (p.start + p.floor)
    return share / (1.0 + share)


def fit_default(problem: Problem, rows: np.ndarray | None = None) -> tuple[Selection, Fit]:
    """The default procedure on the runs in ``rows`` (all by default): select, fit, and repeat
    without the additive overheads the fit put at 0.

    An additive overhead can only add time; where the runs do not need it the
    fit leaves it at its lower bound of 0, where it still holds the place of a
    parameter the selection found not separable from it (a factor on the same
    runs). Such overheads are dropped and the selection and fit repeated,
    until none is at 0 (at most once per additive candidate).
    """
    weights = None if rows is None else np.asarray(rows, np.float64)
    exclude = np.zeros(len(problem.params), bool)
    while True:
        selection = select_identifiable(problem, rows, exclude)
        result = fit(problem, selection.keep, weights)
        pos = (result.logv - problem.log_lo) / (problem.log_hi - problem.log_lo)
        idle = np.array([p.additive and p.lo == 0 for p in problem.params]) & result.free & (pos < 1e-3)
        if not idle.any():
            return selection, result
        exclude |= idle


# ---------------------------------------------------------------------------------- cross-validation


def make_folds(meas: Measurements, cv: str | int) -> list[np.ndarray]:
    """Test sets of the runs: ``k`` folds (a fixed shuffle, seed 0), or ``model`` (one per model)."""
    n = len(meas.runs)
    if cv == "model":
        models = list(dict.fromkeys(r.model for r in meas.runs))
        if len(models) < 2:
            raise InputError("leave-one-model-out cross-validation needs runs of at least two models")
        return [np.asarray([r.model == m for r in meas.runs]) for m in models]
    k = int(cv)
    if k < 2:
        raise InputError(f"--cv needs at least 2 folds, got {k}")
    k = min(k, n)
    order = np.random.default_rng(0).permutation(n)
    out = []
    for i in range(k):
        mask = np.zeros(n, bool)
        mask[order[i::k]] = True
        out.append(mask)
    return out


def cross_validate(problem: Problem, folds: list[np.ndarray], default: bool) -> np.ndarray:
    """Held-out predicted iteration times: each fold's runs predicted by a fit on the others.

    ``default`` re-selects the default parameters on each training set (the
    whole procedure is validated, not only the last step); otherwise every
    parameter that affects the training runs is fitted and the others stay at
    their starting values. A fold whose training runs are fewer than its
    parameters is not fitted; its runs stay NaN.
    """
    out = np.full(len(problem.log_meas), np.nan)
    jac = np.asarray(problem.jacobian(problem.log_start))
    for test in folds:
        train = ~test
        if not train.any():
            continue
        if default:
            f = fit_default(problem, train)[1]
        else:
            free = np.any(jac[train] != 0, axis=0)
            if free.sum() > train.sum():
                continue
            f = fit(problem, free, train.astype(np.float64))
        pred = np.exp(np.asarray(problem.log_pred(f.logv)))
        out[test] = pred[test]
    return out


# ------------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class Calibration:
    """Everything ``sweep calibrate`` reports."""

    problem: Problem
    fit: Fit
    selection: Selection | None  # the default selection, None for explicit parameters
    uncalibrated_s: np.ndarray  # predicted iteration times before the fit
    train_s: np.ndarray  # after the fit, on the runs it was fitted to
    cv_s: np.ndarray | None  # held out (NaN where no prediction could be made)
    cv: str

    @property
    def fitted(self) -> dict[str, float]:
        """Fitted values of the free parameters."""
        values = self.problem.values(self.fit.logv)
        return {p.name: values[p.name] for p, f in zip(self.problem.params, self.fit.free, strict=True) if f}

    def profile(self, name: str | None = None, transfer: bool = True) -> MachineProfile:
        """The base profile with the fitted values written in (see :func:`fitted_profile`)."""
        return fitted_profile(self.problem.profile, self.fitted, name, transfer)


def calibrate(
    meas: Measurements, profile: MachineProfile, params: list[Param] | None = None, cv: str | int = 5
) -> Calibration:
    """Fit ``params`` (or the default set) to ``meas`` on ``profile``, and cross-validate.

    ``cv``: a number of folds, ``model`` (leave one model out), or 0 for none.
    Refuses (:class:`InputError`) fewer runs than parameters, and explicit
    parameters that affect none of the runs.
    """
    n = len(meas.runs)
    default = params is None
    folds = make_folds(meas, cv) if cv not in (0, "0") else None
    if params is not None and len(params) > n:
        raise InputError(
            f"{len(params)} parameters to fit but only {n} measured runs: fit fewer parameters "
            "or measure more runs"
        )
    problem = Problem(meas, profile, params if params is not None else default_candidates(meas, profile))
    selection = None
    if default:
        selection, result = fit_default(problem)
    else:
        jac = np.asarray(problem.jacobian(problem.log_start))
        for p, col in zip(problem.params, jac.T, strict=True):
            if not np.any(col != 0):
                raise InputError(f"--fit {p.name}: affects none of the {n} measured runs")
        result = fit(problem)
    uncal = np.exp(problem.log_pred(problem.log_start))  # every parameter at the profile's value
    train = np.exp(np.asarray(problem.log_pred(result.logv)))
    cv_s = None if folds is None else cross_validate(problem, folds, default)
    return Calibration(problem, result, selection, uncal, train, cv_s, str(cv))


#: Pure strategies that inherit the fitted overheads of the hybrid built on them (see :func:`fitted_profile`).
TRANSFER: dict[str, str] = {"data+spatial": "spatial", "data+filter": "filter"}


def transferred(base: MachineProfile, fitted: dict[str, float]) -> dict[str, str]:
    """``pure -> hybrid`` for the pure strategies :func:`fitted_profile` gives a hybrid's overheads."""
    fitted_strategies = {t[0] for t in map(overhead_target, fitted) if t is not None}
    return {
        pure: hybrid
        for hybrid, pure in TRANSFER.items()
        if hybrid in fitted_strategies and pure not in fitted_strategies and pure not in base.overheads
    }


def fitted_profile(
    base: MachineProfile, fitted: dict[str, float], name: str | None = None, transfer: bool = True
) -> MachineProfile:
    """``base`` with fitted machine parameters written in and fitted overheads multiplied into its own.

    The result keeps the measured per-sample times of ``base`` (its
    ``[measured]`` table names ``base``'s key and reference rate), so compute
    on the calibrated profile is the base machine's, scaled by the fit.

    With ``transfer``, a pure strategy that was not fitted (and has no
    overheads of its own) takes the overheads fitted for the hybrid built on
    it: spatial those of data+spatial, filter those of data+filter. The hybrid
    runs its pure strategy inside each group with the same implementation,
    so its measured slowness is a better prior for the pure strategy than
    none; this is an assumption the measured runs do not test.
    """
    overheads = {s: dict(t) for s, t in base.overheads.items()}
    scalars = {}
    for key, value in fitted.items():
        if overhead_target(key) is None:
            scalars[key] = value
        else:
            add_overhead(overheads, key, value)
    if transfer:
        for pure, hybrid in transferred(base, fitted).items():
            overheads[pure] = dict(overheads[hybrid])
    return base.baked(
        scalars,
        name=name or f"{base.name}-calibrated",
        overheads={s: t for s, t in overheads.items() if t},
        measured_as=base.measured_key,
        measured_rate_flops=base.ref_rate_flops,
    )
