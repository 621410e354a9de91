"""Prediction intervals of a calibrated model: a Laplace approximation of the posterior, plus the
scatter of held-out residuals.

At the MAP fit ``u*`` (the free parameters' coordinates ``log(value + floor)``)
the posterior is approximated by a normal with covariance ``C = H^{-1}``, ``H``
the Hessian of the negative log posterior (:func:`jax.hessian` through the
kernels; eigenvalues below :data:`MIN_CURVATURE` are raised to it, since a
robust loss can curve downward at far outliers). A prediction's log time
then has the variance ``J C J^T`` (``J`` its gradient in ``u``) from the
parameters, and a run's measurement scatters around it by ``sigma``, set from held-out log
residuals ``r`` so that ``+-z sigma`` holds the fraction ``q`` of them
(``sigma = quantile_q(|r|) / z``: split-conformal, honest for the heavy
tails a normal fit to the residuals would under-cover). The interval at
level ``q``:

.. math::
    t \\exp\\bigl(\\pm z_{(1+q)/2} \\sqrt{J C J^T + \\sigma^2}\\bigr)

Laplace rather than a bootstrap: one Hessian per fit instead of a refit per
resample (cross-validation already refits per fold), and deterministic. The
parameter part alone is too narrow for a new model (the fit's own
residuals understate how far a model it never saw strays), hence the
held-out scatter: under cross-validation, each fold's ``sigma`` comes from
the other folds' held-out residuals, so coverage is measured on runs that
set neither the fit nor the width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sweep.inputs.configs import TENSOR_AXES, Bound, Tensor
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements, Run
from sweep.trust.fit import Fit
from sweep.trust.problem import Param, Problem, make_param

#: Smallest eigenvalue kept in the Hessian (per unit of log parameter, squared).
MIN_CURVATURE = 1e-6
#: Default interval level.
LEVEL = 0.8


def z_of(level: float) -> float:
    """The standard normal quantile of a two-sided interval at ``level``."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def spread(residuals: np.ndarray, level: float = LEVEL) -> float:
    """``quantile_level(|r|) / z_level``: the scatter whose interval holds ``level`` of ``residuals``."""
    r = np.abs(np.asarray(residuals, np.float64))
    r = r[np.isfinite(r)]
    return float(np.quantile(r, level) / z_of(level)) if r.size else 0.0


def covariance(problem: Problem, result: Fit, weights: np.ndarray) -> np.ndarray:
    """``H^{-1}`` over the free parameters (Laplace), in their coordinates ``log(value + floor)``,
    under the priors the fit used."""
    free = result.free
    if not free.any():
        return np.zeros((0, 0))
    assert result.prior is not None
    h = problem.hessian(result.logv, weights, free, result.prior.center, result.prior.width)
    h = h[np.ix_(free, free)]
    h = 0.5 * (h + h.T)
    vals, vecs = np.linalg.eigh(h)
    return (vecs / np.maximum(vals, MIN_CURVATURE)) @ vecs.T


def parameter_variance(jac_free: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """``diag(J C J^T)`` per row of ``jac_free`` (``[runs, free params]``)."""
    if cov.size == 0:
        return np.zeros(jac_free.shape[0])
    return np.maximum(np.einsum("ij,jk,ik->i", jac_free, cov, jac_free), 0.0)


def bounds(
    t: np.ndarray, variance: np.ndarray, spread: float, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """The interval ``t exp(+-z sqrt(variance + spread^2))``."""
    half = z_of(level) * np.sqrt(np.asarray(variance) + spread**2)
    return t * np.exp(-half), t * np.exp(half)


@dataclass(frozen=True)
class Intervals:
    """Held-out intervals of every run and their coverage."""

    level: float
    lo_s: np.ndarray
    hi_s: np.ndarray
    covered: np.ndarray  # bool per run (False where no prediction)

    @property
    def coverage(self) -> float:
        ok = np.isfinite(self.lo_s)
        return float(self.covered[ok].mean()) if ok.any() else math.nan


def held_out(
    problem: Problem,
    folds: Sequence[np.ndarray],
    fits: Sequence[Fit],
    held_s: np.ndarray,
    level: float = LEVEL,
) -> Intervals:
    """Each fold's held-out runs with the interval of its own fit (its Laplace covariance) and the
    spread of the other folds' held-out residuals."""
    resid = np.log(held_s) - problem.log_meas
    lo, hi = np.full(len(held_s), np.nan), np.full(len(held_s), np.nan)
    for test, f in zip(folds, fits, strict=True):
        cov = covariance(problem, f, problem.weights * ~test)
        jac = problem.jacobian(f.logv)[:, f.free]
        a, b = bounds(held_s, parameter_variance(jac, cov), spread(resid[~test], level), level)
        lo[test], hi[test] = a[test], b[test]
    t = np.exp(problem.log_meas)
    return Intervals(level, lo, hi, (lo <= t) & (t <= hi))


def posterior_params(profile: MachineProfile) -> list[Param]:
    """The fitted parameters of a calibrated profile's ``[calibration]`` table, as :class:`Param`
    starting at the profile's (fitted) values: perturbations of it, whose Jacobian gives ``J``."""
    assert profile.posterior is not None
    return [make_param(name, profile) for name in profile.posterior.params]


def predictive(
    meas: Measurements, profile: MachineProfile, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, lo, hi)`` per run of ``meas`` (all predicted on ``profile``, which carries a
    ``[calibration]`` table): the predicted iteration time and its interval at ``level``.

    ``J`` comes from :func:`jax.jacfwd` at the profile's values; an additive
    overhead's column, taken at 0 on top of the fitted value ``v``, is scaled
    by ``(v + f) / f`` into the coordinate ``log(v + f)`` of the covariance.
    """
    post = profile.posterior
    assert post is not None
    params = posterior_params(profile)
    problem = Problem(meas, profile, params)
    jac = np.array(problem.jacobian(problem.log_start))
    for j, p in enumerate(params):
        if p.additive:
            jac[:, j] *= math.exp(post.log_values[j]) / p.floor
    t = np.exp(problem.log_pred(problem.log_start))
    var = parameter_variance(jac, np.asarray(post.covariance, np.float64).reshape(len(params), len(params)))
    lo, hi = bounds(t, var, post.spread_log, level)
    return t, lo, hi


def estimate_interval(bound: Bound, row: dict, level: float = LEVEL) -> tuple[float, float]:
    """The interval of one configuration's ``t_iter_s`` (``row``: :func:`sweep.engine.evaluate.estimate`'s)
    on a calibrated profile."""
    profile = bound.profile
    run = Run(
        line=0, model=bound.model.name, strategy=row["strategy"], machine=profile.name,
        p=int(row["p"]), b=int(row["b"]), p2=int(row["p2"]), S=int(row["S"]), iter_time_s=1.0,
        tensor=Tensor(*(int(row.get(a, d)) for a, d in zip(TENSOR_AXES, Tensor(), strict=True))),
    )  # fmt: skip
    meas = Measurements(
        "estimate", (), [run], [], {(profile.name, bound.model.name): bound}, {profile.name: profile.name}
    )
    _, lo, hi = predictive(meas, profile, level)
    return float(lo[0]), float(hi[0])
