"""Calibration's objective: run weights, the robust loss on log ratios, and the priors.

Each run's residual is ``r_i = log t_pred,i - log t_meas,i``. Its weight
(:func:`run_weights`) is

.. math::
    w_i = q(\\text{quality}_i)\\,\\frac{1}{1 + (c_i / c_0)^2}, \\qquad c_i = \\frac{\\text{iter\\_time\\_std\\_s}_i}{\\text{iter\\_time\\_s}_i}

with ``q`` from :data:`QUALITY_WEIGHTS` (a ``fair`` run, one epoch with
start-up or a noisy series, counts less than a ``good`` one) and ``c_0`` =
:data:`SPREAD_REF`: a run whose relative spread is ``c_0`` counts half. Runs
of the same configuration measured twice are both kept, each with its weight.

The loss of a residual is a robust ``rho(r / s)`` (:func:`rho`): ``cauchy``
``log(1 + u^2)`` (the negative log likelihood of a Cauchy error, whose
influence falls back to 0 for far outliers), ``huber`` (quadratic within one
scale, linear beyond: bounded influence) or ``l2`` ``u^2 / 2``. ``s`` is the
scale of a typical log error (:data:`LOSS_SCALE`).

Priors (:func:`prior_width`): every fitted parameter has one, centred on the
profile's value: log-normal of width ``sigma`` for factors and machine
parameters, half-normal of width ``tau`` seconds around 0 for additive
overheads. Widths are wide for physical parameters whose effective value is
poorly known from the vendor figure (effective bandwidths and latencies of a
software stack), narrower for compute rates and implementation overheads.
``prior_scale`` multiplies every width (smaller: stronger shrinkage toward the
profile).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from sweep.errors import InputError
from sweep.inputs.measured import Measurements

#: Weight of a run by its ``quality`` column; runs without one (or another value) weigh 1. A
#: ``fair`` run (one epoch with start-up, or a noisy series) is off by up to 2x to 4x where a
#: ``good`` one is within about 10 % (grids/measurements/README.md): by inverse variance it would
#: weigh a few hundredths; 0.1 keeps it a witness where no good run exists.
QUALITY_WEIGHTS: dict[str, float] = {"good": 1.0, "fair": 0.1}
#: A run whose relative spread ``iter_time_std_s / iter_time_s`` is this much counts half.
SPREAD_REF = 0.2
#: Robust losses, and the default.
LOSSES: tuple[str, ...] = ("cauchy", "huber", "l2")
LOSS = "cauchy"
#: Default scale of the loss, in log units (0.2: a 22 % error is one scale).
LOSS_SCALE = 0.2

#: Prior widths by kind of parameter: log-normal sigma (natural log) for factors and machine
#: parameters, seconds for additive overheads (half-normal around 0).
PRIOR_WIDTHS: dict[str, float] = {
    # physical, vendor figure known, effective value not: achieved bandwidth and latency of a stack
    "inter_bandwidth_Bps": 1.0,
    "intra_bandwidth_Bps": 1.0,
    "inter_alpha_s": 1.5,
    "intra_alpha_s": 1.5,
    "gpu_mem_bw_Bps": 0.3,
    # compute: a datasheet peak times an efficiency the framework reaches
    "gpu_flops": 0.2,
    "efficiency": 0.5,
    "bytes_per_element": 0.1,
    "wu_passes": 0.3,
    # the CPU-side cost of one framework op, 5-25 us by the source the a100-ib800 profile cites
    "op_latency_s": 1.0,
    # a collective kind's effective bandwidth against the network's (every strategy)
    "collective": 1.0,
    # how fast the framework computes one model against its profiled per-sample time
    "model": 0.5,
    # implementation overheads of one strategy, deviations from the shared physics
    "factor": 1.0,
    "per_iter_s": 0.05,
    "per_sample_s": 2e-3,
    # moving each input element to its GPUs: 1e-8 s per 4-byte element is 400 MB/s
    "per_input_s": 1e-8,
}


@dataclass(frozen=True)
class Settings:
    """How runs are weighed and errors counted (documented defaults; ``sweep calibrate`` options)."""

    loss: str = LOSS
    scale: float = LOSS_SCALE
    quality: Mapping[str, float] = field(default_factory=lambda: dict(QUALITY_WEIGHTS))
    spread_ref: float = SPREAD_REF
    prior_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise InputError(f"loss: unknown loss '{self.loss}' (known: {', '.join(LOSSES)})", param="loss")
        for name, value in (("loss_scale", self.scale), ("prior_scale", self.prior_scale)):
            if not (math.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a number > 0, got {value:g}", param=name)
        if not self.spread_ref > 0:
            raise InputError(f"the spread reference must be > 0, got {self.spread_ref:g}")
        for key, value in self.quality.items():
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"quality {key}: must be a number >= 0, got {value:g}", param="quality")


def parse_quality(items: str | Sequence[str] | None) -> dict[str, float]:
    """``QUALITY=WEIGHT`` items (comma-separated or repeated) over :data:`QUALITY_WEIGHTS`."""
    out = dict(QUALITY_WEIGHTS)
    if items is None:
        return out
    for item in (
        x.strip() for text in ([items] if isinstance(items, str) else items) for x in text.split(",")
    ):
        if not item:
            continue
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise InputError(f"quality expects QUALITY=WEIGHT, got '{item}'", param="quality")
    return out


def run_weights(meas: Measurements, settings: Settings) -> np.ndarray:
    """Each run's weight ``w_i`` (see the module docstring): quality times spread."""
    out = np.empty(len(meas.runs))
    for i, run in enumerate(meas.runs):
        q = settings.quality.get(run.fields.get("quality", "").strip(), 1.0)
        spread = (run.iter_time_std_s or 0.0) / run.iter_time_s
        out[i] = q / (1.0 + (spread / settings.spread_ref) ** 2)
    return out


def rho(u, loss: str):
    """The robust loss of a scaled residual ``u`` (traceable)."""
    if loss == "cauchy":
        return jnp.log1p(u * u)
    if loss == "huber":
        a = jnp.abs(u)
        return jnp.where(a <= 1.0, 0.5 * u * u, a - 0.5)
    return 0.5 * u * u


#: Width of a machine parameter :data:`PRIOR_WIDTHS` does not name (one a kernel adds later).
DEFAULT_WIDTH = 0.5


def prior_width(name: str) -> float:
    """The prior width of a fitted parameter by its name (see :data:`PRIOR_WIDTHS`)."""
    if name in PRIOR_WIDTHS:
        return PRIOR_WIDTHS[name]
    head, _, term = name.rpartition(".")
    if name.startswith("overheads."):
        return PRIOR_WIDTHS.get(term, PRIOR_WIDTHS["factor"])
    return PRIOR_WIDTHS.get(head.partition(".")[0], DEFAULT_WIDTH)
