r"""Calibration's problem: the parameters a fit may move, their priors, and the log iteration
times they predict.

The fitted quantities (docs/trust.md, *What is fitted*) are scalar machine
parameters (docs/model.md §8), a factor per collective kind shared by every
strategy (``collective.<term>``), a compute scale per model
(``model.<name>.compute``), and per-strategy overheads: factors on compute
and each communication term, and additive seconds per iteration and per
sample (:func:`kernels.terms.scale_terms`). Each parameter ``v`` lives in log
space inside its bounds ``[lo, hi]``, shifted by a floor ``f`` (0 except for
an additive overhead, which can then be 0), ``u = log(v + f)``.

The fit minimises the negative log posterior (:class:`Problem`,
:mod:`sweep.trust.objective`):

.. math::
    E(u) = \sum_i w_i\, \rho\bigl((\log t_{pred,i}(u) - \log t_{meas,i}) / s\bigr)
         + \tfrac12 \sum_j z_j^2

with run weights ``w_i``, a robust loss ``rho`` of scale ``s``, and
``z_j = (u_j - u_{0,j}) / \sigma_j`` for a log-normal prior around the
profile's value (``v_j / \tau_j`` for an additive overhead, a half-normal
prior around 0); gradients from :func:`jax.grad` through the same kernels the
sweeps use (:class:`sweep.engine.evaluate.Evaluator`), in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from kernels import SCALAR_PARAMS, STRATEGIES
from kernels.terms import ADDITIVE_TERMS as KERNEL_ADDITIVE
from kernels.terms import OVERHEAD_TERMS
from sweep.engine.evaluate import Evaluator, Inputs
from sweep.errors import InputError
from sweep.inputs.configs import input_elems, model_overheads
from sweep.inputs.machines import INPUT_TERM, MachineProfile, override
from sweep.inputs.measured import Measurements
from sweep.trust.objective import Settings, prior_width, rho, run_weights
from sweep.trust.validation import groups

COMM_TERMS: tuple[str, ...] = ("allreduce", "allgather", "halo", "p2p")
#: Additive overheads (seconds): per iteration, per sample, per input element per sample.
ADDITIVE_TERMS: tuple[str, ...] = (*KERNEL_ADDITIVE, INPUT_TERM)
TIES: dict[str, tuple[str, ...]] = {"comm": COMM_TERMS, "all": OVERHEAD_TERMS}
#: Scalar machine parameters that cannot be fitted, and why.
NOT_FITTABLE: dict[str, str] = {
    "gpu_mem_bytes": "it only decides feasibility, not time",
    "gpus_per_node": "it is a whole number (the node size)",
    "nics_per_node": "it is a whole number",
    "allreduce_algo": "it is a choice of algorithm, not a number",
    "memory_model": "it is a choice of memory equation, not a number",
    "optimizer_states": "it only decides feasibility, not time",
}
#: Default bounds: a factor of this around the starting value for machine parameters.
MACHINE_SPAN = 100.0
#: Default bounds of an overhead factor (and of a collective kind's factor).
OVERHEAD_BOUNDS = (0.1, 1e3)
#: Step of the Hessian's central differences (log units).
HESSIAN_STEP = 1e-4
#: Default bounds of a model's compute scale.
MODEL_BOUNDS = (0.1, 10.0)
#: Default bounds of an additive overhead, seconds (per iteration; per sample of b per iteration) ...
ADDITIVE_BOUNDS: dict[str, tuple[float, float]] = {
    "per_iter_s": (0.0, 100.0),
    "per_sample_s": (0.0, 1.0),
    "per_input_s": (0.0, 1e-4),
}
#: ... and its floor: it lives in log(value + floor) space, so it can reach 0 (below the floor it is
#: effectively linear). The floors are far below the costs that matter (ms per iteration or sample).
ADDITIVE_FLOOR: dict[str, float] = {"per_iter_s": 1e-5, "per_sample_s": 1e-6, "per_input_s": 1e-12}


@dataclass(frozen=True)
class Param:
    """One fitted parameter: its name, bounds, starting value (the prior's centre), floor and prior width.

    The start is the profile's value for a machine parameter (the geometric
    mean of the bounds if that value is 0), 1 for a factor (an overhead, a
    collective kind, a model's compute) and 0 for an additive overhead. The
    fit works in ``log(value + floor)``: ``floor`` is 0 except for an
    additive overhead, whose value may then be 0. ``width`` is the prior's
    (:func:`sweep.trust.objective.prior_width`): log-normal sigma, or seconds
    for an additive overhead.
    """

    name: str
    lo: float
    hi: float
    start: float
    floor: float = 0.0
    width: float = 1.0

    @property
    def additive(self) -> bool:
        """An additive overhead (seconds added), not a factor or a machine parameter."""
        target = self.overhead
        return target is not None and target[1][0] in ADDITIVE_TERMS

    @property
    def overhead(self) -> tuple[str, tuple[str, ...]] | None:
        """``(strategy, terms)`` for an overhead, None for a machine parameter."""
        return overhead_target(self.name)

    @property
    def collective(self) -> tuple[str, ...] | None:
        """The terms a ``collective.<term>`` factor scales in every strategy; None for other names."""
        return collective_terms(self.name)

    @property
    def model(self) -> str | None:
        """The model a ``model.<name>.compute`` scale belongs to; None for other names."""
        return model_of(self.name)

    @property
    def machine(self) -> bool:
        """A scalar machine parameter."""
        return self.overhead is None and self.collective is None and self.model is None


def overhead_target(name: str) -> tuple[str, tuple[str, ...]] | None:
    """``overheads.<strategy>.<term>`` as ``(strategy, terms it scales)``; None for other names."""
    if not name.startswith("overheads."):
        return None
    strategy, _, term = name[len("overheads.") :].rpartition(".")
    return strategy, TIES.get(term, (term,))


def collective_terms(name: str) -> tuple[str, ...] | None:
    """``collective.<term>`` as the communication terms it scales; None for other names."""
    if not name.startswith("collective."):
        return None
    term = name[len("collective.") :]
    return TIES.get(term, (term,)) if term != "all" else COMM_TERMS


def model_of(name: str) -> str | None:
    """``model.<name>.compute`` as the model's name; None for other names."""
    if not (name.startswith("model.") and name.endswith(".compute")):
        return None
    return name[len("model.") : -len(".compute")]


def make_param(
    name: str, profile: MachineProfile, bounds: tuple[float, float] | None = None, width: float | None = None
) -> Param:
    """A :class:`Param` from its name, checked; default bounds around the profile's value, and the
    default prior width of its kind (:func:`sweep.trust.objective.prior_width`) unless ``width``.

    An overhead factor is a factor on top of the profile's own ``[overheads]``
    (they multiply), so it starts at 1 whatever the profile has; an additive
    overhead is added to the profile's own, so it starts at 0. A collective
    factor multiplies its term in every strategy, a model's compute scale that
    model's per-sample compute time, both on top of the profile's.
    """
    param = _make_param(name, profile, bounds)
    return replace(param, width=float(prior_width(name) if width is None else width))


def _make_param(name: str, profile: MachineProfile, bounds: tuple[float, float] | None) -> Param:
    if name.startswith("overheads."):
        strategy, _, term = name[len("overheads.") :].rpartition(".")
        if strategy not in STRATEGIES:
            raise InputError(
                f"fit {name}: unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})", param="fit"
            )
        if term in ADDITIVE_TERMS:
            lo, hi = bounds or ADDITIVE_BOUNDS[term]
            if not 0 <= lo < hi or not math.isfinite(hi):
                raise InputError(
                    f"fit {name}: bounds must be 0 <= LO < HI seconds, got {lo:g}:{hi:g}", param="fit"
                )
            return Param(name, float(lo), float(hi), 0.0, ADDITIVE_FLOOR[term])
        if term not in OVERHEAD_TERMS and term not in TIES:
            known = ", ".join((*OVERHEAD_TERMS, *TIES, *ADDITIVE_TERMS))
            raise InputError(f"fit {name}: unknown term '{term}' (known: {known})", param="fit")
        start = 1.0  # on top of the profile's own overheads, which stay as they are
        lo, hi = bounds or OVERHEAD_BOUNDS
    elif name.startswith("collective."):
        if name[len("collective.") :] not in (*COMM_TERMS, "comm"):
            raise InputError(
                f"fit {name}: unknown collective (known: {', '.join((*COMM_TERMS, 'comm'))})", param="fit"
            )
        start, (lo, hi) = 1.0, bounds or OVERHEAD_BOUNDS
    elif name.startswith("model."):
        if model_of(name) is None:
            raise InputError(f"fit {name}: a model's compute scale is model.<name>.compute", param="fit")
        start, (lo, hi) = 1.0, bounds or MODEL_BOUNDS
    else:
        if name in NOT_FITTABLE:
            raise InputError(f"fit {name}: cannot be fitted: {NOT_FITTABLE[name]}", param="fit")
        if name not in SCALAR_PARAMS:
            known = ", ".join(p for p in SCALAR_PARAMS if p not in NOT_FITTABLE)
            raise InputError(
                f"fit {name}: unknown parameter (machine: {known}; overheads.<strategy>.<term>, "
                "collective.<term>, model.<name>.compute)",
                param="fit",
            )
        start = profile.value(name)
        if bounds is None and start <= 0:
            raise InputError(f"fit {name}: its value is {start:g}; give bounds as {name}=LO:HI", param="fit")
        lo, hi = bounds or (start / MACHINE_SPAN, start * MACHINE_SPAN)
        if name == "efficiency" or name.startswith("efficiency_"):  # fractions of peak (docs/model.md §3)
            if bounds is None:
                hi = min(hi, 1.0)
            if not 0 < lo < hi <= 1:
                raise InputError(f"fit {name}: bounds must lie in (0, 1], got {lo:g}:{hi:g}", param="fit")
    if not 0 < lo < hi or not math.isfinite(hi):
        raise InputError(f"fit {name}: bounds must be 0 < LO < HI, got {lo:g}:{hi:g}", param="fit")
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
                raise InputError(f"fit expects NAME or NAME=LO:HI, got '{item}'", param="fit")
        if any(p.name == name for p in out):
            raise InputError(f"fit {name}: named twice", param="fit")
        out.append(make_param(name, profile, bounds))
    if not out:
        raise InputError("fit names no parameter", param="fit")
    return out


class Problem:
    """Measured runs on one machine, a list of parameters, and the jitted pieces of the fit.

    Parameters are handled in the coordinates ``logv = log(value + floor)``
    (the natural log of the value, except for an additive overhead, whose
    floor lets it reach 0; see :class:`Param`). :meth:`log_pred` maps them to
    the log iteration time of every run;
    ``objective_and_grad(logv, weights, log_meas, prior_on, center, width)``
    gives the negative log posterior (module docstring; ``prior_on`` marks the
    parameters whose prior counts, the fitted ones; ``center`` and ``width``
    are the priors', by default :attr:`log_start` and :attr:`width`) and its gradient
    (:func:`jax.value_and_grad`); :meth:`jacobian` the ``[runs, params]``
    sensitivities (:func:`jax.jacfwd`), :meth:`hessian` the objective's second
    derivatives (:func:`jax.hessian`, compiled when first asked). The weights and
    measured times are arguments (cross-validation folds reuse the compiled
    code; ``log_meas`` may be replaced).
    """

    def __init__(
        self,
        meas: Measurements,
        profile: MachineProfile,
        params: Sequence[Param],
        settings: Settings | None = None,
    ):
        self.meas = meas
        self.profile = profile
        self.params = tuple(params)
        self.settings = settings or Settings()
        self.weights = run_weights(meas, self.settings)
        self.log_meas = np.log([r.iter_time_s for r in meas.runs])
        self.floor = np.asarray([p.floor for p in self.params], np.float64)
        self.log_start = np.log([p.start + p.floor for p in self.params])
        self.log_lo = np.log([p.lo + p.floor for p in self.params])
        self.log_hi = np.log([p.hi + p.floor for p in self.params])
        self.width = np.asarray([p.width for p in self.params], np.float64)
        self.additive = np.asarray([p.additive for p in self.params], bool)
        self._groups = groups(meas)
        for g in self._groups:
            if g.profile.name != profile.name or g.machine != self._groups[0].machine:
                raise InputError("calibration needs every run predicted on the one machine it fits")
        self._inputs = {g.model: input_elems(meas.bounds[(g.machine, g.model)].model) for g in self._groups}
        self._objective = self._make_objective()
        self.objective_and_grad: Callable = jax.jit(jax.value_and_grad(self._objective))
        self._hessian: Callable | None = None
        self._effective: np.ndarray | None = None
        log_pred = self._log_pred
        self._pred_and_jac: Callable = jax.jit(jax.jacfwd(lambda v: (log_pred(v), log_pred(v)), has_aux=True))

    def _make_objective(self) -> Callable:
        log_pred, loss, scale = self._log_pred, self.settings.loss, self.settings.scale
        additive = self.additive

        def objective(logv, weights, log_meas, prior_on, center, width):
            data = jnp.sum(weights * rho((log_pred(logv) - log_meas) / scale, loss))
            z = jnp.where(additive, jnp.exp(logv) - jnp.exp(center), logv - center) / width
            return data + 0.5 * jnp.sum(prior_on * z * z)

        return objective

    def hessian(self, logv, weights, prior_on, center, width, exact: bool = False) -> np.ndarray:
        """The objective's Hessian in ``logv`` at ``logv``.

        By central differences of the exact gradient (:func:`jax.grad`, step
        :data:`HESSIAN_STEP` in log units; a Hessian of the whole kernel
        program takes a minute to compile), symmetrised; ``exact`` uses
        :func:`jax.hessian` (the tests check that both agree).
        """
        args = [jnp.asarray(a, jnp.float64) for a in (weights, self.log_meas, prior_on, center, width)]
        x = np.asarray(logv, np.float64)
        if exact:
            if self._hessian is None:
                self._hessian = jax.jit(jax.hessian(self._objective))
            return np.asarray(self._hessian(jnp.asarray(x), *args))
        h = np.zeros((x.size, x.size))
        for j in np.flatnonzero(np.asarray(prior_on) != 0):
            step = np.zeros_like(x)
            step[j] = HESSIAN_STEP
            up = np.asarray(self.objective_and_grad(jnp.asarray(x + step), *args)[1])
            down = np.asarray(self.objective_and_grad(jnp.asarray(x - step), *args)[1])
            h[:, j] = (up - down) / (2 * HESSIAN_STEP)
        return 0.5 * (h + h.T)

    @property
    def effective(self) -> np.ndarray:
        """Per parameter: whether it moves some run's time at the starting values."""
        if self._effective is None:
            self._effective = np.any(self.jacobian(self.log_start) != 0, axis=0)
        return self._effective

    def log_pred(self, logv) -> np.ndarray:
        """Log predicted iteration time of every run."""
        return np.asarray(self._pred_and_jac(jnp.asarray(logv, jnp.float64))[1])

    def jacobian(self, logv) -> np.ndarray:
        """``d log t_pred / d log v``, ``[runs, params]``."""
        return np.asarray(self._pred_and_jac(jnp.asarray(logv, jnp.float64))[0])

    def _log_pred(self, logv):
        machine, overheads, scales = parameterised(self.profile, self.params, jnp.exp(logv) - self.floor)
        out = jnp.zeros(len(self.meas.runs), jnp.float64)
        for g in self._groups:
            ev = Evaluator(g.strategy, overheads=model_overheads(overheads, self._inputs[g.model]))
            net, cfg = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), (g.net, g.cfg))
            net = scaled_net(net, self.meas.bounds[(g.machine, g.model)].model.name, scales)
            _, derived = jax.vmap(ev, in_axes=(None, 0))(Inputs(net, machine, ()), cfg)
            out = out.at[g.index].set(jnp.log(derived.t_iter_s))
        return out

    def values(self, logv) -> dict[str, float]:
        """Parameter values from their coordinates (an additive overhead is never below 0)."""
        return {
            p.name: max(float(math.exp(v)) - p.floor, 0.0) if p.floor else float(math.exp(v))
            for p, v in zip(self.params, logv, strict=True)
        }


def parameterised(profile: MachineProfile, params: Sequence[Param], values) -> tuple:
    """``(machine, overheads, scales)`` of ``profile`` with ``params`` at ``values`` (traced or not):
    the kernels' machine in float64 (the profile's overrides, then the machine parameters), the
    ``strategy -> {term: value}`` overheads (the profile's, then the overheads and collective
    factors on top, :func:`add_overhead`) and ``model -> factor`` on its measured compute time."""
    machine = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), profile.pytree())
    machine = override(machine, {k: jnp.asarray(v) for k, v in profile.override_values(np.float64).items()})
    machine = override(machine, {p.name: values[i] for i, p in enumerate(params) if p.machine})
    overheads: dict[str, dict] = {s: dict(t) for s, t in profile.overheads.items()}
    for i, p in enumerate(params):
        if p.overhead is not None or p.collective is not None:
            add_overhead(overheads, p.name, values[i])
    scales = {p.model: values[i] for i, p in enumerate(params) if p.model is not None}
    return machine, overheads, scales


def scaled_net(net, model: str, scales: dict):
    """``net`` with its measured compute times scaled by ``scales[model]`` (a ``model.<name>.compute``
    parameter), if it has one."""
    return net._replace(t_measured_s=net.t_measured_s * scales[model]) if model in scales else net


def add_overhead(overheads: dict[str, dict], name: str, value) -> None:
    """Put the overhead ``name`` (``overheads.<strategy>.<term>``, or ``collective.<term>`` for
    every strategy) into a ``strategy -> {term: value}`` table, on top of what it holds: factors
    multiply, additive seconds add."""
    target = overhead_target(name)
    if target is None:
        terms = collective_terms(name)
        assert terms is not None
        for strategy in STRATEGIES:
            add_overhead(overheads, f"overheads.{strategy}.{name.partition('.')[2]}", value)
        return
    strategy, terms = target
    table = overheads.setdefault(strategy, {})
    for term in terms:
        if term in ADDITIVE_TERMS:
            table[term] = table.get(term, 0.0) + value
        else:
            table[term] = table.get(term, 1.0) * value
