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

:func:`predictive` gives the intervals of measured runs (``sweep validate``),
:func:`estimate_interval` of one configuration (``sweep estimate``), and
:class:`RowIntervals` of a sweep's rows (``sweep run --interval``,
:mod:`sweep.trust.annotate`), all through :func:`posterior_bounds`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np

from kernels import Config
from kernels.strategies.registry import OWN_AXES
from sweep.engine.evaluate import Evaluator, Inputs
from sweep.inputs.configs import NO_OWN, Bound, Own, input_elems, model_overheads
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements, Run
from sweep.trust.fit import Fit
from sweep.trust.problem import Param, Problem, make_param, parameterised, scaled_net

#: Smallest eigenvalue kept in the Hessian (per unit of log parameter, squared).
MIN_CURVATURE = 1e-6
#: Default interval level.
LEVEL = 0.8
#: Rows per compiled call of :meth:`RowIntervals.jacobian`.
BATCH = 4096


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
    params = posterior_params(profile)
    problem = Problem(meas, profile, params)
    t = np.exp(problem.log_pred(problem.log_start))
    lo, hi = posterior_bounds(profile, params, problem.jacobian(problem.log_start), t, level)
    return t, lo, hi


def posterior_bounds(
    profile: MachineProfile, params: Sequence[Param], jac, t: np.ndarray, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """The interval at ``level`` of times ``t`` whose logs have the gradient ``jac`` (``[rows,
    params]``, in :func:`posterior_params`' coordinates, at the profile's values or a row's swept
    ones): the posterior's covariance propagated through it, plus its spread (the module's
    formula). :func:`predictive` and :class:`RowIntervals` both end here."""
    post = profile.posterior
    assert post is not None
    jac = np.array(jac, np.float64)
    for j, p in enumerate(params):
        if p.additive:
            jac[:, j] *= math.exp(post.log_values[j]) / p.floor
    var = parameter_variance(jac, np.asarray(post.covariance, np.float64).reshape(len(params), len(params)))
    return bounds(t, var, post.spread_log, level)


def estimate_interval(bound: Bound, row: dict, level: float = LEVEL) -> tuple[float, float]:
    """The interval of one configuration's ``t_iter_s`` (``row``: :func:`sweep.engine.evaluate.estimate`'s)
    on a calibrated profile."""
    profile = bound.profile
    run = Run(
        line=0, model=bound.model.name, strategy=row["strategy"], machine=profile.name,
        p=int(row["p"]), b=int(row["b"]), p2=int(row["p2"]), S=int(row["S"]), iter_time_s=1.0,
        own=Own(**{a: OWN_AXES[a].code(d if row.get(a) is None else row[a]) for a, d in NO_OWN._asdict().items()}),
    )  # fmt: skip
    meas = Measurements(
        "estimate", (), [run], [], {(profile.name, bound.model.name): bound}, {profile.name: profile.name}
    )
    _, lo, hi = predictive(meas, profile, level)
    return float(lo[0]), float(hi[0])


class RowIntervals:
    """The intervals of one job's rows (a model on a calibrated machine, a strategy, the machine
    parameters it sweeps): what :func:`estimate_interval` gives one configuration, for rows of a
    sweep at once.

    Per row, :meth:`jacobian` gives the gradient of its log iteration time in
    :func:`posterior_params`' coordinates, what :func:`predictive` takes from
    :class:`~sweep.trust.problem.Problem`; :meth:`bounds` puts it through
    :func:`posterior_bounds`. A swept machine parameter that the calibration fitted is
    taken at the row's value with the posterior's (relative) uncertainty, as ``sweep
    estimate --set`` takes it. One :func:`jax.jit` of ``vmap(jacfwd(...))``, called on
    batches of at most :data:`BATCH` rows padded to a power of two.
    """

    def __init__(self, bound: Bound, strategy: str, swept: Sequence[str] = ()):
        self.bound, self.strategy = bound, strategy
        self.params = posterior_params(bound.profile)
        fitted = {p.name: j for j, p in enumerate(self.params) if p.machine}
        #: swept parameters the posterior holds (their coordinates vary per row), and the others
        self.moved = {name: fitted[name] for name in swept if name in fitted}
        self.swept = tuple(name for name in swept if name not in fitted)
        self.start = np.log([p.start + p.floor for p in self.params])
        self._fn = _jacobian_fn(bound, strategy, self.swept, self.params)

    def jacobian(self, config: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(t_iter_s, J)`` per row of ``config``: equal-length columns as a dataset holds them,
        ``p``, ``b``, ``p2``, ``S``, the strategies' own axes (registry: their defaults where
        absent) and each swept machine parameter."""
        n = len(config["p"])
        cols = [np.asarray(config[k], np.float64) for k in ("p", "b", "p2", "S")]
        for axis, default in NO_OWN._asdict().items():
            given = np.asarray(config[axis]) if axis in config else np.full(n, default)
            if given.dtype.kind in "UO":  # a categorical axis by its names (an estimate row)
                given = np.array([OWN_AXES[axis].code(v) for v in given.tolist()])
            cols.append(np.asarray(given, np.float64))
        values = [np.asarray(config[k], np.float64) for k in self.swept]
        u = np.tile(self.start, (n, 1))
        for name, j in self.moved.items():
            u[:, j] = np.log(np.asarray(config[name], np.float64) + self.params[j].floor)
        t, jac = np.empty(n), np.empty((n, len(self.params)))
        for lo in range(0, n, BATCH):
            k = min(BATCH, n - lo)
            pad = np.minimum(np.arange(lo, lo + max(8, 1 << (k - 1).bit_length())), lo + k - 1)
            cfg = Config(*(jnp.asarray(c[pad]) for c in cols))
            j, log_t = self._fn(jnp.asarray(u[pad]), cfg, tuple(jnp.asarray(v[pad]) for v in values))
            t[lo : lo + k] = np.exp(np.asarray(log_t)[:k])
            jac[lo : lo + k] = np.asarray(j)[:k]
        return t, jac

    def bounds(
        self, config: Mapping[str, np.ndarray], t: np.ndarray, level: float = LEVEL
    ) -> tuple[np.ndarray, np.ndarray]:
        """The interval at ``level`` of times ``t`` of the rows ``config``, centred on ``t`` as
        written. ``t`` may be ``t_epoch_s``: its log differs from ``t_iter_s``'s by
        ``log iterations``, which no parameter moves, so it has the same gradient."""
        _, jac = self.jacobian(config)
        return posterior_bounds(self.bound.profile, self.params, jac, np.asarray(t, np.float64), level)


def _jacobian_fn(bound: Bound, strategy: str, swept: tuple[str, ...], params: Sequence[Param]) -> Callable:
    """``f(u, cfg, values) -> (J, log t_iter)`` per row of ``u``, ``cfg`` and ``values``, jitted:
    the parameters applied as :meth:`Problem._log_pred <sweep.trust.problem.Problem>` applies them."""
    profile = bound.profile
    floor = np.asarray([p.floor for p in params], np.float64)
    inputs = input_elems(bound.model)
    net = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), bound.net)

    def log_t(u, cfg, values):
        machine, overheads, scales = parameterised(profile, params, jnp.exp(u) - floor)
        ev = Evaluator(strategy, swept, overheads=model_overheads(overheads, inputs))
        _, derived = ev(Inputs(scaled_net(net, bound.model.name, scales), machine, ()), cfg, values)
        return jnp.log(derived.t_iter_s)

    def one(u, cfg, values):
        return jax.jacfwd(lambda v: (log_t(v, cfg, values),) * 2, has_aux=True)(u)

    return jax.jit(jax.vmap(one))
