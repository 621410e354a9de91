"""Calibration's fit: a deterministic L-BFGS over the parameters' bounded coordinates, the
default choice of parameters the runs can identify, and cross-validation.

:func:`lbfgs` is Nocedal and Wright, *Numerical Optimization*, 2nd ed.,
algorithm 7.4, with Armijo backtracking. Without explicit parameters,
:func:`sweep.trust.problem.default_candidates` lists a priority order and
:func:`select_identifiable` keeps those the runs can tell apart: a greedy
pivoted selection on the Jacobian of the log times with respect to the log
parameters, at the starting values; :func:`fit_default` fits them and repeats
without the additive overheads the fit put at 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from sweep.errors import InputError
from sweep.inputs.measured import Measurements
from sweep.trust.problem import Problem

#: Default selection: a parameter must move some run's log time by this much per unit log change ...
MIN_SENSITIVITY = 0.1
#: ... and keep this fraction of its Jacobian column outside the span of those already chosen.
MIN_INDEPENDENCE = 0.2


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
