"""Calibrate a machine profile on measured runs, by gradient descent through the kernels.

:func:`calibrate` is what ``sweep calibrate`` (and :func:`sweep.calibrate`) runs:
the problem (:mod:`sweep.trust.problem`: parameters, bounds, predicted log
times), the fit and the default choice of parameters (:mod:`sweep.trust.fit`:
L-BFGS, identifiability, cross-validation), then the fitted machine profile
(:func:`fitted_profile`). :mod:`sweep.trust.report` turns the result into the
command's report and machine file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.errors import InputError
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements
from sweep.trust.fit import (
    Fit,
    Objective,
    Selection,
    cross_validate,
    fit,
    fit_default,
    lbfgs,
    make_folds,
    select_identifiable,
)
from sweep.trust.problem import (
    Param,
    Problem,
    add_overhead,
    default_candidates,
    make_param,
    overhead_target,
    parse_fit,
)

__all__ = [
    "Calibration",
    "Fit",
    "Objective",
    "Param",
    "Problem",
    "Selection",
    "calibrate",
    "cross_validate",
    "default_candidates",
    "fit",
    "fit_default",
    "fitted_profile",
    "lbfgs",
    "make_folds",
    "make_param",
    "parse_fit",
    "select_identifiable",
    "transferred",
]


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
