"""Which parameters a default calibration fits: candidate structures, chosen by leave-one-model-out
cross-validation.

A structure is data: a list of parameter groups (:data:`STRUCTURES`), each a
kind of parameter (:func:`parameter_groups`), and a prior scale (a factor on
every prior width; smaller shrinks the fit toward the profile). The groups,
shared physics first:

- ``models``: a compute scale per measured model (``model.<m>.compute``), so
  that how fast a framework computes one model is that model's, never the
  network's; pinned by the model's own runs (its single-GPU runs have no
  communication to share the blame with); a model without runs keeps the
  profile's value;
- ``compute``: the compute rate shared by every model (``gpu_flops``);
- ``network``: effective bandwidth and latency inside and across nodes (the
  per-message cost times the messages each strategy sends, which the model
  counts per layer);
- ``collectives``: a factor per collective kind (allreduce, allgather, halo,
  point-to-point) shared by every strategy: its effective bandwidth against
  the network's;
- ``factors``: per measured strategy, factors on its compute and its
  communication, deviations from the shared physics under their priors;
- ``additive``: per measured strategy, seconds per sample and per iteration;
- ``input``: per measured strategy, seconds per element of a model's input
  sample (``per_input_s``): the cost of moving each sample to its GPUs, which
  carries from a 224x224 image to a 512^3 volume where a cost per sample
  cannot.

:func:`choose` fits every candidate in every leave-one-model-out fold and
keeps the best one that is never worse than nothing (docs/trust.md): a
candidate is flagged when a held-out (model, strategy) group, whose strategy
has runs in the training folds, comes out below its uncalibrated accuracy.
The lead adds a group by naming its parameters in :func:`parameter_groups`
(or ``extra_groups``) and a structure that lists it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kernels import STRATEGIES
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements
from sweep.trust.fit import Fit, cross_validate, fit
from sweep.trust.problem import COMM_TERMS, Param, Problem, make_param
from sweep.trust.validation import symmetric_accuracy


@dataclass(frozen=True)
class Structure:
    """A candidate: the parameter groups it fits, and the scale of every prior width."""

    name: str
    groups: tuple[str, ...]
    prior_scale: float = 1.0

    @property
    def label(self) -> str:
        return self.name if self.prior_scale == 1.0 else f"{self.name} (priors x{self.prior_scale:g})"


_PHYSICS = ("models", "compute", "network", "collectives")
#: Candidate structures, from the profile alone to per-strategy overheads on top of shared physics;
#: each also with priors half and a quarter as wide (shrinkage toward the profile).
STRUCTURES: tuple[Structure, ...] = tuple(
    Structure(name, groups, scale)
    for scale in (1.0, 0.5, 0.25)
    for name, groups in (
        ("physics", _PHYSICS),
        ("physics+input", (*_PHYSICS, "input")),
        ("physics+factors+input", (*_PHYSICS, "factors", "input")),
        ("physics+overheads+input", (*_PHYSICS, "factors", "additive", "input")),
    )
)
#: The profile itself: nothing fitted. Always a candidate, and the fallback of last resort.
NOTHING = Structure("uncalibrated", ())


def parameter_groups(
    meas: Measurements, extra: Mapping[str, Sequence[str]] | None = None
) -> dict[str, list[str]]:
    """Parameter names per group (see the module docstring) for these runs; ``extra`` adds groups."""
    strategies = [s for s in STRATEGIES if any(r.strategy == s for r in meas.runs)]
    models = list(dict.fromkeys(meas.bound(r).model.name for r in meas.runs))
    # a cost per operation launched (docs/model.md §16), where the machine has one: its prior is
    # log-normal around the profile's value, so a profile without one leaves it out
    launches = any(meas.bound(r).profile.value("op_latency_s") > 0 for r in meas.runs)
    # runs inside one node say nothing of the network between nodes: a factor on a collective's
    # whole time, fitted on their NVLink collectives, would be carried to the inter-node ones of a
    # larger run. Such a fit moves the intra-node link (``network``) and leaves the factors out.
    one_node = all(r.p <= meas.bound(r).profile.value("gpus_per_node") for r in meas.runs)
    comm_factors = () if one_node else ("comm",)
    out = {
        "models": [f"model.{m}.compute" for m in models],
        "compute": ["gpu_flops", *(["op_latency_s"] if launches else [])],
        "network": ["inter_bandwidth_Bps", "inter_alpha_s", "intra_bandwidth_Bps", "intra_alpha_s"],
        "collectives": [] if one_node else [f"collective.{t}" for t in COMM_TERMS],
        "factors": [f"overheads.{s}.{t}" for s in strategies for t in ("compute", *comm_factors)],
        "additive": [f"overheads.{s}.{t}" for s in strategies for t in ("per_sample_s", "per_iter_s")],
        "input": [f"overheads.{s}.per_input_s" for s in strategies],
    }
    for name, names in (extra or {}).items():
        out[name] = list(names)
    return out


def candidate_params(
    meas: Measurements, profile: MachineProfile, groups: Mapping[str, Sequence[str]]
) -> tuple[list[Param], dict[str, np.ndarray]]:
    """Every parameter of every group, once, and each group as a mask over that list."""
    names = list(dict.fromkeys(n for g in groups.values() for n in g))
    params = [make_param(n, profile) for n in names]
    masks = {g: np.array([n in set(members) for n in names]) for g, members in groups.items()}
    return params, masks


def free_mask(problem: Problem, masks: Mapping[str, np.ndarray], structure: Structure) -> np.ndarray:
    """The parameters a structure fits: its groups' members that move some run's time."""
    free = np.zeros(len(problem.params), bool)
    for g in structure.groups:
        free |= masks.get(g, free)
    return free & problem.effective


@dataclass(frozen=True)
class Candidate:
    """A structure's leave-one-model-out result."""

    structure: Structure
    free: np.ndarray
    held_out_s: np.ndarray  # held-out predicted iteration time per run
    fits: list[Fit]  # per fold
    accuracy: float  # mean symmetric accuracy, held out
    flagged: list[tuple[str, str, float, float]]  # (model, strategy, calibrated, uncalibrated)


def flags(
    meas: Measurements, folds: list[np.ndarray], held_out_s: np.ndarray, uncal_s: np.ndarray
) -> list[tuple[str, str, float, float]]:
    """Held-out (model, strategy) groups worse than uncalibrated, whose strategy the training folds
    measured: ``(model, strategy, calibrated accuracy, uncalibrated accuracy)``."""
    t = np.array([r.iter_time_s for r in meas.runs])
    cal, unc = symmetric_accuracy(held_out_s, t), symmetric_accuracy(uncal_s, t)
    out = []
    for test in folds:
        trained = {r.strategy for r, k in zip(meas.runs, test, strict=True) if not k}
        for key in dict.fromkeys((r.model, r.strategy) for r, k in zip(meas.runs, test, strict=True) if k):
            rows = test & np.array([(r.model, r.strategy) == key for r in meas.runs])
            a, b = float(cal[rows].mean()), float(unc[rows].mean())
            if key[1] in trained and a < b - 1e-9:
                out.append((*key, a, b))
    return out


def fit_procedure(
    problem: Problem, masks: Mapping[str, np.ndarray], structure: Structure, weights: np.ndarray
) -> Fit:
    """Fit a structure on the runs with ``weights`` (0: left out), single-GPU runs first.

    When the structure has the ``models`` group, the compute scale of each
    model with single-GPU runs among them is fitted on those runs alone (no
    communication to share the time with, under its prior) and then held
    there: the other parameters are fitted with it fixed, so that no
    strategy's or network's parameter is asked to explain how fast the
    framework computes that model, nor the model's scale how slow a strategy
    is. A model without single-GPU runs keeps its scale free under its prior
    (a model without runs stays at the profile's value).
    """
    free = free_mask(problem, masks, structure)
    scale = problem.settings.prior_scale * structure.prior_scale
    models = free & masks.get("models", np.zeros_like(free))
    single = np.array([r.p == 1 for r in problem.meas.runs]) & (weights > 0)
    pinned = np.zeros_like(free)
    if models.any() and single.any():
        pinned = models & np.any(problem.jacobian(problem.log_start)[single] != 0, axis=0)
    if not pinned.any():
        return fit(problem, free, weights, prior_scale=scale)
    start = fit(problem, pinned, weights * single, prior_scale=scale).logv
    result = fit(problem, free & ~pinned, weights, start=start, prior_scale=scale)
    return replace(result, free=free)  # the pinned scales are fitted too, in the first step


def evaluate(
    problem: Problem,
    masks: Mapping[str, np.ndarray],
    structure: Structure,
    folds: list[np.ndarray],
    uncal_s: np.ndarray,
) -> Candidate:
    """A structure fitted in every fold, its held-out predictions, accuracy and flags."""
    free = free_mask(problem, masks, structure)
    held, fits = cross_validate(problem, folds, lambda w: fit_procedure(problem, masks, structure, w))
    t = np.exp(problem.log_meas)
    acc = float(symmetric_accuracy(held, t).mean())
    return Candidate(structure, free, held, fits, acc, flags(problem.meas, folds, held, uncal_s))


def choose(
    problem: Problem,
    masks: Mapping[str, np.ndarray],
    folds: list[np.ndarray],
    structures: Sequence[Structure] = STRUCTURES,
) -> tuple[Candidate, list[Candidate]]:
    """The best candidate by held-out accuracy among those with no flagged group (the profile
    itself, :data:`NOTHING`, is one), and every candidate's result."""
    uncal = np.exp(problem.log_pred(problem.log_start))
    results = [evaluate(problem, masks, s, folds, uncal) for s in (NOTHING, *structures)]
    clean = [c for c in results if not c.flagged]
    best = max(clean, key=lambda c: c.accuracy)
    return best, results


def fit_structure(problem: Problem, masks: Mapping[str, np.ndarray], structure: Structure) -> Fit:
    """A structure fitted on every run."""
    return fit_procedure(problem, masks, structure, problem.weights)
