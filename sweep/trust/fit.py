"""Calibration's fit: a deterministic L-BFGS over the parameters' bounded coordinates (a MAP
fit: the objective is the negative log posterior of :mod:`sweep.trust.problem`), and
cross-validation.

:func:`lbfgs` is Nocedal and Wright, *Numerical Optimization*, 2nd ed.,
algorithm 7.4, with Armijo backtracking. Which parameters are free is a
boolean mask over the problem's parameters; :mod:`sweep.trust.structure`
chooses it among candidate structures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sweep.errors import InputError
from sweep.inputs.measured import Measurements
from sweep.trust.problem import Problem

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


class Prior(NamedTuple):
    """The priors' centres (coordinates ``log(value + floor)``) and widths, per parameter."""

    center: np.ndarray
    width: np.ndarray


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
    prior: Prior | None = None  # the priors it was fitted under (widths scaled)


#: Starting points are moved this far (fraction of the log range) inside the bounds.
START_MARGIN = 0.02


def _sigmoid(theta) -> np.ndarray:
    """``1 / (1 + exp(-theta))`` without overflow for large ``|theta|``."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(theta, np.float64)))


@dataclass(frozen=True)
class Objective:
    """The objective as a function of the unconstrained ``theta`` of the free parameters.

    ``log v = log lo + (log hi - log lo) sigmoid(theta)`` for free parameters;
    fixed ones stay at ``logv0``. ``fg(theta)`` returns the loss and its
    gradient (:func:`jax.value_and_grad` through the kernels, chained with the
    sigmoid's derivative). ``weights`` are the runs' (0 for runs left out); the
    priors of the free parameters count.
    """

    problem: Problem
    free: np.ndarray
    weights: np.ndarray
    logv0: np.ndarray
    center: np.ndarray  # the priors' centres (coordinates)
    width: np.ndarray  # and widths, prior scale included

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
        # numpy arguments: a device array made of each, every call, costs more than the call
        value, grad = self.problem.objective_and_grad(
            np.asarray(self.to_logv(theta), np.float64),
            np.asarray(self.weights, np.float64),
            np.asarray(self.problem.log_meas, np.float64),
            np.asarray(self.free, np.float64),
            np.asarray(self.center, np.float64),
            np.asarray(self.width, np.float64),
        )
        return float(value), np.asarray(grad)[self.free] * self.span * sig * (1 - sig)


def fit(
    problem: Problem,
    free: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
    prior_scale: float | None = None,
    prior: Prior | None = None,
    **lbfgs_options,
) -> Fit:
    """Fit the ``free`` parameters (all by default) to the runs with ``weights`` (the problem's
    run weights by default; 0 leaves a run out), under their priors.

    ``start`` overrides the starting values (coordinates); fixed parameters
    stay at theirs. ``prior`` overrides the priors' centres and widths (the
    profile's values and :attr:`Problem.width` by default); ``prior_scale``
    multiplies every width (the settings' by default).
    """
    k = len(problem.params)
    free = np.ones(k, bool) if free is None else np.asarray(free, bool)
    weights = problem.weights if weights is None else np.asarray(weights, np.float64)
    logv0 = problem.log_start.copy() if start is None else np.asarray(start, np.float64).copy()
    scale = problem.settings.prior_scale if prior_scale is None else prior_scale
    prior = prior or Prior(problem.log_start, problem.width)
    obj = Objective(problem, free, weights, logv0, prior.center, prior.width * scale)
    if not free.any():
        return Fit(
            logv0, free, obj.fg(np.zeros(0))[0], 0, True, np.zeros(k, bool), Prior(prior.center, obj.width)
        )
    m = lbfgs(obj.fg, obj.theta0(), **lbfgs_options)
    logv = obj.to_logv(m.x)
    edge = np.zeros(k, bool)
    pos = (logv[free] - obj.lo) / obj.span
    edge[free] = (pos < 1e-3) | (pos > 1 - 1e-3)
    return Fit(logv, free, m.f, m.iterations, m.converged, edge, Prior(prior.center, obj.width))


def prior_z(problem: Problem, result: Fit) -> np.ndarray:
    """How many prior widths each parameter of a fit sits from its prior's centre (signed)."""
    prior = result.prior or Prior(problem.log_start, problem.width)
    z = np.where(problem.additive, np.exp(result.logv) - np.exp(prior.center), result.logv - prior.center)
    return z / prior.width


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
        raise InputError(f"cv needs at least 2 folds, got {k}", param="cv")
    k = min(k, n)
    order = np.random.default_rng(0).permutation(n)
    out = []
    for i in range(k):
        mask = np.zeros(n, bool)
        mask[order[i::k]] = True
        out.append(mask)
    return out


def cross_validate(
    problem: Problem, folds: list[np.ndarray], fitter: Callable[[np.ndarray], Fit]
) -> tuple[np.ndarray, list[Fit]]:
    """Held-out predicted iteration times: each fold's runs predicted by a fit on the others.

    ``fitter(weights)`` fits with the given run weights (the problem's, 0 for
    the held-out runs): under priors, a parameter that only the held-out runs
    inform stays at its prior's centre, the profile's value. Returns the
    predictions and each fold's fit.
    """
    out = np.full(len(problem.log_meas), np.nan)
    fits = []
    for test in folds:
        f = fitter(problem.weights * ~test)
        fits.append(f)
        pred = np.exp(np.asarray(problem.log_pred(f.logv)))
        out[test] = pred[test]
    return out, fits
