"""Calibrate a machine profile on measured runs, by gradient descent through the kernels.

:func:`calibrate` is what ``sweep calibrate`` (and :func:`sweep.calibrate`) runs:
the problem (:mod:`sweep.trust.problem`: parameters, bounds, predicted log
times), the fit and the default choice of parameters (:mod:`sweep.trust.fit`:
L-BFGS, identifiability, cross-validation), then the fitted machine profile
(:func:`fitted_profile`). :mod:`sweep.trust.report` turns the result into the
command's report and machine file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from sweep.errors import InputError
from sweep.inputs.machines import MachineProfile, Posterior
from sweep.inputs.measured import Measurements
from sweep.trust import intervals
from sweep.trust.fit import Fit, Objective, cross_validate, fit, lbfgs, make_folds, prior_z
from sweep.trust.objective import Settings
from sweep.trust.problem import (
    Param,
    Problem,
    add_overhead,
    make_param,
    model_of,
    overhead_target,
    parse_fit,
)
from sweep.trust.structure import (
    STRUCTURES,
    Candidate,
    Structure,
    candidate_params,
    choose,
    fit_procedure,
    fit_structure,
    parameter_groups,
)

__all__ = [
    "Calibration",
    "Fit",
    "Objective",
    "Param",
    "Problem",
    "Settings",
    "Structure",
    "calibrate",
    "cross_validate",
    "fit",
    "fitted_profile",
    "lbfgs",
    "make_folds",
    "make_param",
    "parse_fit",
    "transferred",
]


# ------------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class Calibration:
    """Everything ``sweep calibrate`` reports."""

    problem: Problem
    fit: Fit
    structure: Structure  # the one fitted (explicit parameters: "explicit")
    candidates: list[Candidate] | None  # every candidate's leave-one-model-out result (default only)
    uncalibrated_s: np.ndarray  # predicted iteration times before the fit
    train_s: np.ndarray  # after the fit, on the runs it was fitted to
    cv_s: np.ndarray | None  # held out (NaN where no prediction could be made)
    cv: str
    cv_intervals: intervals.Intervals | None  # held-out intervals and their coverage
    covariance: np.ndarray  # Laplace, over the free parameters
    spread_log: float  # robust spread of held-out log residuals (the intervals' scatter)

    @property
    def fitted(self) -> dict[str, float]:
        """Fitted values of the free parameters."""
        values = self.problem.values(self.fit.logv)
        return {p.name: values[p.name] for p, f in zip(self.problem.params, self.fit.free, strict=True) if f}

    @property
    def prior_z(self) -> np.ndarray:
        """How many prior widths each parameter moved (signed)."""
        return prior_z(self.problem, self.fit)

    @property
    def chosen(self) -> Candidate | None:
        """The chosen candidate's leave-one-model-out result (default calibration only)."""
        if self.candidates is None:
            return None
        return next(c for c in self.candidates if c.structure == self.structure)

    def posterior(self) -> Posterior:
        """What a calibrated machine file carries to reproduce the intervals."""
        free = self.fit.free
        chosen = self.chosen
        acc = chosen.accuracy if chosen is not None else math.nan
        return Posterior(
            structure=self.structure.label,
            cv="model" if chosen is not None else self.cv,
            cv_accuracy=acc if math.isfinite(acc) else -1.0,
            spread_log=self.spread_log,
            params=tuple(p.name for p, f in zip(self.problem.params, free, strict=True) if f),
            log_values=tuple(float(v) for v in self.fit.logv[free]),
            floors=tuple(float(v) for v in self.problem.floor[free]),
            covariance=tuple(tuple(float(x) for x in row) for row in self.covariance),
        )

    def profile(self, name: str | None = None, transfer: bool = True) -> MachineProfile:
        """The base profile with the fitted values written in (see :func:`fitted_profile`) and the
        posterior the intervals need."""
        out = fitted_profile(self.problem.profile, self.fitted, name, transfer)
        return replace(out, posterior=self.posterior())


def calibrate(
    meas: Measurements,
    profile: MachineProfile,
    params: list[Param] | None = None,
    cv: str | int = 5,
    settings: Settings | None = None,
    structures: tuple[Structure, ...] = STRUCTURES,
    extra_groups: dict[str, list[str]] | None = None,
) -> Calibration:
    """Fit ``params`` (or the default structure) to ``meas`` on ``profile``, and cross-validate.

    Default: the candidate ``structures`` (:mod:`sweep.trust.structure`; groups
    from :func:`~sweep.trust.structure.parameter_groups` plus ``extra_groups``)
    are compared by leave-one-model-out cross-validation (k-fold when the runs
    hold one model) and the best one is fitted. ``cv``: a number of folds,
    ``model`` (leave one model out), or 0 for none. Refuses
    (:class:`InputError`) explicit parameters that affect none of the runs.
    """
    n = len(meas.runs)
    default = params is None
    folds = make_folds(meas, cv) if cv not in (0, "0") else None
    candidates = best = None
    if default:
        groups = parameter_groups(meas, extra_groups)
        cands, masks = candidate_params(meas, profile, groups)
        problem = Problem(meas, profile, cands, settings)
        one_model = len({r.model for r in meas.runs}) < 2
        choice_folds = make_folds(meas, min(5, n) if one_model else "model")
        best, candidates = choose(problem, masks, choice_folds, structures)
        structure, free = best.structure, best.free
    else:
        assert params is not None
        problem = Problem(meas, profile, params, settings)
        for p, ok in zip(problem.params, problem.effective, strict=True):
            if not ok:
                raise InputError(f"fit {p.name}: affects none of the {n} measured runs", param="fit")
        structure = Structure("explicit", ("explicit",))
        free = np.ones(len(params), bool)
    if best is not None:
        result = fit_structure(problem, masks, structure)
        fitter = partial(fit_procedure, problem, masks, structure)
    else:
        result = fit(problem, free)
        fitter = partial(_fit_free, problem, free)
    uncal = np.exp(problem.log_pred(problem.log_start))  # every parameter at the profile's value
    train = np.exp(np.asarray(problem.log_pred(result.logv)))
    cv_s = cv_int = None
    if folds is not None:
        if best is not None and cv == "model":
            cv_s, fits = best.held_out_s, best.fits
        else:
            cv_s, fits = cross_validate(problem, folds, fitter)
        cv_int = intervals.held_out(problem, folds, fits, cv_s)
    held = best.held_out_s if best is not None else cv_s
    spread = intervals.spread(np.log(held) - problem.log_meas) if held is not None else 0.0
    cov = intervals.covariance(problem, result, problem.weights)
    return Calibration(
        problem, result, structure, candidates, uncal, train, cv_s, str(cv), cv_int, cov, spread
    )


def _fit_free(problem: Problem, free: np.ndarray, weights: np.ndarray) -> Fit:
    return fit(problem, free, weights)


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
    scales = dict(base.compute_scale)
    scalars = {}
    for key, value in fitted.items():
        model = model_of(key)
        if model is not None:
            scales[model] = scales.get(model, 1.0) * value
        elif overhead_target(key) is None and not key.startswith("collective."):
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
        compute_scale=scales,
        posterior=None,
    )
