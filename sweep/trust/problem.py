"""Calibration's problem: the parameters a fit may move, and the log iteration times they predict.

The fitted quantities are scalar machine parameters (docs/model.md), per-strategy
multiplicative overheads on compute and on each communication term, and
per-strategy additive overheads per iteration and per sample
(:func:`kernels.terms.scale_terms`). Each parameter ``v`` lives in log space
inside its bounds ``[lo, hi]``, shifted by a floor ``f`` (0 except for an
additive overhead, which can then be 0):

.. math::
    \\log (v + f) = \\log (lo + f) + \\bigl(\\log (hi + f) - \\log (lo + f)\\bigr)\\,\\sigma(\\theta)

and ``theta`` minimises the mean squared log error of the iteration time
over the measured runs (:class:`Problem`, :mod:`sweep.trust.fit`),

.. math::
    L(\\theta) = \\frac{1}{n}\\sum_i \\bigl(\\log t_{pred,i}(\\theta) - \\log t_{meas,i}\\bigr)^2

with gradients from :func:`jax.grad` through the same kernels the sweeps use
(:func:`sweep.engine.evaluate.point_fn`), in float64.

Parameter names (``--fit``): a scalar machine parameter (``inter_bandwidth_Bps``,
``efficiency``, ...), or ``overheads.<strategy>.<term>`` with term one of
``compute``, ``allreduce``, ``allgather``, ``halo``, ``p2p``, ``comm`` (the four
communication terms tied) or ``all`` (every multiplicative term tied), factors
that multiply, or ``per_iter_s``, ``per_sample_s``, seconds that add.
``NAME=LO:HI`` sets the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from kernels import SCALAR_PARAMS, STRATEGIES
from kernels.terms import ADDITIVE_TERMS, OVERHEAD_TERMS
from sweep.engine.evaluate import point_fn
from sweep.errors import InputError
from sweep.inputs.machines import MachineProfile, override
from sweep.inputs.measured import Measurements
from sweep.trust.validation import groups

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

    First, where the profile sets it above 0, ``op_latency_s``, the cost of
    each operation per micro-batch (docs/model.md §16). Then, per strategy measured: first ``overheads.<s>.per_sample_s``, an additive
    cost per sample that does not depend on the model (what the hybrid runs
    on the public ABCI file show, the README's Trust section), so that it, not a factor on
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
    # a cost per operation and micro-batch (docs/model.md §16), first where the profile has one:
    # no overhead scales with the micro-batches
    names = ["op_latency_s"] if profile.value("op_latency_s") > 0 else []
    names += [f"overheads.{s}.{t}" for t in CANDIDATE_TERMS for s in present]
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
        machine = override(
            machine, {k: jnp.asarray(v) for k, v in self.profile.override_values(np.float64).items()}
        )
        machine = override(
            machine, {p.name: values[i] for i, p in enumerate(self.params) if p.overhead is None}
        )
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
