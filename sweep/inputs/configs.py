"""Rules of a configuration, one home each (docs/model.md §2), read from the strategy registry
(:mod:`kernels.strategies.registry`): which axes a strategy uses (:func:`uses`), a value a user
gave checked (:func:`whole`, :func:`own_record`), the defaults of p2 and S (:func:`defaults`),
whether a hybrid's p2 fits p (:func:`p2_fits`), the batch as users set it (:func:`batch_from`),
the columns a strategy writes (:func:`own_values`), the one configuration request
(:class:`Request`: checked by :meth:`Request.checked`, completed by :func:`complete` on ints or
traced arrays, both by :func:`resolve`), a row that cannot exist (:func:`impossible`, the
registry's rules), and a model bound to a machine profile (:class:`Bound`)."""

from __future__ import annotations

import collections
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from kernels.network import Net
from kernels.strategies.registry import OWN_AXES, REGISTRY, SHARED_AXES
from sweep.errors import InputError, InputWarning
from sweep.inputs.layers import Model, bind
from sweep.inputs.machines import INPUT_TERM, MachineProfile, check_family

#: The paper's strategies: a sweep spec without ``strategies`` runs these.
PAPER_STRATEGIES: tuple[str, ...] = tuple(s.name for s in REGISTRY.values() if s.paper)
#: The batch as users set it (docs/model.md §2): the global batch, ``b = global_batch / p1``,
#: and the micro-batch, ``S = b / micro_batch``; each instead of ``b`` or ``S``.
BATCH_AXES: tuple[str, ...] = ("global_batch", "micro_batch")
#: Every configuration axis: shared, batch as users set it, then every strategy's own (registry order).
CONFIG_AXES: tuple[str, ...] = (*SHARED_AXES, *BATCH_AXES, *OWN_AXES)

#: The configuration record of the strategies' own axes: one field per name of
#: :data:`kernels.strategies.registry.OWN_AXES`, in :class:`kernels.terms.Config` order, the
#: default of each (codes for categorical axes). It travels from the CLI/API to the kernel.
Own = collections.namedtuple("Own", tuple(OWN_AXES), defaults=tuple(a.default for a in OWN_AXES.values()))  # type: ignore[misc]
#: Every own axis at its default: a strategy without own axes.
NO_OWN = Own()


def check_strategy(name: str) -> str:
    """An :class:`InputError` for an unknown strategy name."""
    if name not in REGISTRY:
        raise InputError(f"unknown strategy '{name}' (known: {', '.join(REGISTRY)})", param="strategy")
    return name


def uses(strategy: str, axis: str) -> bool:
    """Whether a strategy's rows multiply by configuration axis ``axis`` (its registry entry):
    ``global_batch`` like ``b``, ``micro_batch`` like ``S``; machine parameters always."""
    entry = REGISTRY[strategy]
    if axis == "global_batch":
        return entry.uses("b")
    if axis == "micro_batch":
        return entry.uses("S")
    return entry.uses(axis) if axis in CONFIG_AXES else True


def users(axis: str) -> str:
    """The strategies that use ``axis``, for messages."""
    return ", ".join(name for name in REGISTRY if uses(name, axis))


def whole(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int when it is a whole number >= ``minimum`` (an int, or a float equal to
    one), else an :class:`InputError` naming the parameter ``name``: no string, bool or fraction."""
    ok = not isinstance(value, bool | str)
    try:
        ok = ok and math.isfinite(float(value)) and float(value) == int(value)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or int(value) < minimum:
        raise InputError(f"{name} must be a whole number >= {minimum}, got {value!r}", param=name)
    return int(value)


def ignored(strategy: str, name: str, value: Any) -> None:
    """The one-line warning for a setting ``strategy`` does not use."""
    warnings.warn(
        InputWarning(f"{name} {value} is ignored: only {users(name)} use it", param=name), stacklevel=3
    )


def own_record(strategy: str, given: Mapping[str, Any], *, warn: bool = True) -> Own:
    """The :class:`Own` record of ``strategy`` from the own axes a user gave (None: not given).

    Each value is checked against its registry :class:`~kernels.strategies.registry.Axis`
    (a name of a categorical axis, or a whole number in range); a bad one is an
    :class:`InputError` naming the axis. An axis the strategy does not own is left at
    its default, with a warning unless ``warn`` is false.
    """
    entry = REGISTRY[strategy]
    values: dict[str, int] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name not in OWN_AXES:
            raise InputError(f"unknown setting '{name}' (known: {', '.join(OWN_AXES)})", param=name)
        try:
            code = OWN_AXES[name].code(value)
        except ValueError as err:
            raise InputError(str(err), param=name) from None
        if not entry.uses(name):
            if warn:
                ignored(strategy, name, value)
            continue
        values[name] = code
    return Own(**values)


def labels(own: Own) -> dict[str, str | int]:
    """An :class:`Own` record as people read it: names for categorical axes."""
    return {name: OWN_AXES[name].label(code) for name, code in own._asdict().items()}


def default_S(strategy: str, p):
    """S when not given (docs/model.md §2, §16): 1 for a strategy whose S does not default to p
    (data+tensor+pipeline), else p (pipeline; the others ignore S)."""
    entry = REGISTRY[strategy]
    return 1 if entry.uses("S") and not entry.S_is_p else p


def replicas(strategy: str, p, p2, own: Mapping[str, Any]):
    """p1 = p // group, at least 1: the data-parallel replicas (registry ``group``); ints or arrays."""
    q = p // REGISTRY[strategy].group(p, p2, own)
    return q + (q < 1) * (1 - q)


def batch_from(p1, b, S, global_batch=None, micro_batch=None):
    """``(b, S, fits)`` with the batch as users set it (docs/model.md §2): ``b = global_batch / p1``
    and ``S = b / micro_batch`` where given; ``fits`` whether each is a whole number >= 1 (a row
    that does not fit is infeasible, limit ``batch``). Ints or (traced) arrays."""
    fits = True
    if global_batch is not None:
        b = global_batch / p1
        fits = (b >= 1) & (b % 1 == 0)
    if micro_batch is not None:
        S = b / micro_batch
        fits = fits & (S >= 1) & (S % 1 == 0)
    return b, S, fits


@dataclass(frozen=True)
class Bound:
    """A model bound to a machine profile: the kernels' Net and Machine, as numpy."""

    model: Model
    profile: MachineProfile
    net: Net

    @classmethod
    def of(cls, model: Model, profile: MachineProfile) -> Bound:
        """``model`` on ``profile``; a calibrated profile's compute scale and cost per input element
        of this model applied (docs/trust.md, *Calibrated machine files*); a profile that does not
        state what the model's family needs refused (:func:`~sweep.inputs.machines.check_family`)."""
        check_family(profile, model.name, {layer.kind for layer in model.layers})
        net = bind(model, profile.measured_key, profile.ref_rate_flops)
        if model.name in profile.compute_scale:
            net = net._replace(t_measured_s=net.t_measured_s * profile.compute_scale[model.name])
        if any(INPUT_TERM in t for t in profile.overheads.values()):
            profile = replace(profile, overheads=model_overheads(profile.overheads, input_elems(model)))
        return cls(model, profile, net)


def input_elems(model: Model) -> float:
    """Elements of one input sample of ``model``: its first layer's input, ``C X1 X2 X3``."""
    return float(np.prod([v for v in model.layers[0].x if v]))


def model_overheads(overheads: Mapping[str, Mapping[str, Any]], elems) -> dict[str, dict[str, Any]]:
    """An overheads table for a model whose input sample has ``elems`` elements: each strategy's
    ``per_input_s`` becomes ``per_sample_s += per_input_s * elems`` (values may be traced)."""
    out = {}
    for strategy, terms in overheads.items():
        table = {k: v for k, v in terms.items() if k != INPUT_TERM}
        if INPUT_TERM in terms:
            table["per_sample_s"] = table.get("per_sample_s", 0.0) + terms[INPUT_TERM] * elems
        out[strategy] = table
    return out


def default_p2(profile: MachineProfile) -> int:
    """p2 = gpus_per_node by default (docs/model.md §2)."""
    return int(profile.value("gpus_per_node"))


def defaults(p, p2, S, gpus_per_node):
    """``(p2, S)`` with the defaults of docs/model.md §2 filled in: p2 = gpus_per_node, S = p.

    ``None`` means not given; the values may be ints or (traced) arrays, so the
    engine and the single-configuration callers share this one rule.
    """
    return (gpus_per_node if p2 is None else p2), (p if S is None else S)


def p2_fits(p, p2):
    """Whether a hybrid can run p GPUs as groups of p2: p2 >= 1 divides p, so p >= p2 (docs/model.md §2).

    On ints a bool; on (traced) arrays a boolean array (the kernels' own test,
    ``kernels.strategies.hybrid``, marks a misfit evaluated anyway as ``max_p``).
    """
    if isinstance(p, int | np.integer) and isinstance(p2, int | np.integer):
        return p2 >= 1 and p >= p2 and p % p2 == 0
    return (p2 >= 1) & (p >= p2) & (p % p2 == 0)


class Resolved(NamedTuple):
    """One configuration as evaluated and written (docs/model.md §2): the strategy's own p2
    and S (1 where it has none), its replicas p1 and global batch B = b * p1; then its own
    axes (:class:`Own`), whether the batch as the user set it fits (a row that does not is
    infeasible, limit ``batch``), and the values the kernel takes (:class:`kernels.terms.Config`'s)."""

    p: int
    b: int | float
    p2: int
    S: int | float
    p1: int
    B: int | float
    own: Own = NO_OWN
    fits: bool = True
    config: tuple = ()


def own_values(strategy: str, p: int, b, p2: int, S, own: Own = NO_OWN) -> Resolved:
    """The columns a strategy writes for a configuration whose p2 and S are already resolved:
    the group of its registry entry as p2, p1 = p // group, S only where the strategy has one."""
    entry = REGISTRY[strategy]
    group = entry.group(p, p2, own._asdict())
    p1 = replicas(strategy, p, p2, own._asdict())
    return Resolved(p, b, group, S if entry.uses("S") else 1, p1, b * p1, own)


class Request(NamedTuple):
    """One configuration as a person asks for it (docs/model.md §2): the strategy, the shared axes
    ``p``, ``b``, ``p2``, ``S``, the batch as users set it (``global_batch``, ``micro_batch``) and
    the strategy's own axes by name (``own``: name-value pairs). None is not given (the default).

    The values are what a person gave (:meth:`checked` checks them) or, inside a sweep's
    program, traced arrays; :func:`complete` derives the rest on either, :func:`resolve` does both.
    """

    strategy: str
    p: Any = None
    b: Any = None
    p2: Any = None
    S: Any = None
    global_batch: Any = None
    micro_batch: Any = None
    own: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(
        cls,
        strategy: str,
        p: Any = None,
        b: Any = None,
        p2: Any = None,
        S: Any = None,
        *,
        global_batch: Any = None,
        micro_batch: Any = None,
        own: Mapping[str, Any] | None = None,
    ) -> Request:
        """A request from keywords, ``own`` a mapping of the own axes by name."""
        return cls(strategy, p, b, p2, S, global_batch, micro_batch, tuple((own or {}).items()))

    def shared(self) -> dict[str, Any]:
        """The shared axes and the batch as users set it, by name (None: not given)."""
        return {k: getattr(self, k) for k in ("p", "b", "p2", "S", "global_batch", "micro_batch")}

    def checked(self, warn: bool = True) -> Request:
        """The request checked against its strategy's registry entry (docs/model.md §2): every
        value a whole number >= 1 (:func:`whole`); serial takes p = 1 only (its default); ``b``
        or ``global_batch`` given, not both, and ``S`` or ``micro_batch`` at most one of them;
        each own axis a value of its :class:`~kernels.strategies.registry.Axis`. These are
        :class:`InputError` s naming the parameter. A value the strategy does not use (``p2``
        but on a hybrid, ``S`` or ``micro_batch`` but on pipeline and data+tensor+pipeline, an
        own axis of another strategy's) is dropped, with a warning unless ``warn`` is false, as
        is sequence parallelism at tp 1 (nothing to split). Own axes come back as codes."""
        strategy = check_strategy(self.strategy)
        entry = REGISTRY[strategy]
        checked = {k: None if v is None else whole(k, v) for k, v in self.shared().items()}
        if checked["b"] is not None and checked["global_batch"] is not None:
            raise InputError("give b or global_batch, not both", param=("b", "global_batch"))
        if checked["b"] is None and checked["global_batch"] is None:
            raise InputError("give b (samples per replica) or global_batch", param=("b", "global_batch"))
        if checked["S"] is not None and checked["micro_batch"] is not None:
            raise InputError("give S or micro_batch, not both", param=("S", "micro_batch"))
        if checked["p"] is None:
            if entry.uses("p"):
                raise InputError("p (the number of GPUs) is required", param="p")
            checked["p"] = 1
        if not entry.uses("p") and checked["p"] != 1:
            raise InputError(f"{strategy} runs on one GPU: p must be 1, got {checked['p']}", param="p")
        for name in ("p2", "S", "micro_batch"):
            if checked[name] is not None and not uses(strategy, name):
                if warn:
                    ignored(strategy, name, checked[name])
                checked[name] = None
        given = dict(self.own)
        record = own_record(strategy, given, warn=warn)
        own = tuple((k, getattr(record, k)) for k in given if given[k] is not None and entry.uses(k))
        named = record._asdict()
        if warn and entry.uses("sp") and named["sp"] > 0 and named["tp"] == 1:
            warnings.warn(
                InputWarning("sp 1 is ignored at tp 1: sequence parallelism splits over tp", param="sp"),
                stacklevel=2,
            )
        c = checked
        return Request(strategy, c["p"], c["b"], c["p2"], c["S"], c["global_batch"], c["micro_batch"], own)


def complete(request: Request, gpus_per_node) -> Resolved:
    """The configuration a request names, its defaults filled in and the batch rule applied
    (docs/model.md §2), on ints or (traced) arrays, unchecked: p2 = gpus_per_node and S = p
    (:func:`defaults`; S = 1 for a strategy that reads S but does not default it to p), or S
    from the micro-batch (the strategy's default micro-batch, :attr:`Strategy.micro_batch`,
    where neither S nor a micro-batch is given: data+tensor+pipeline's 1, Megatron-LM's); own
    axes not given at their defaults; then b and S from the global batch and micro-batch
    (:func:`batch_from`), ``fits`` false where they are not whole. ``config`` is what the
    kernel takes: (p, b, p2, S, own axes)."""
    strategy = request.strategy
    entry = REGISTRY[strategy]
    p = 1 if request.p is None else request.p
    own = Own(**dict(request.own))
    micro = request.micro_batch
    if micro is None and request.S is None:
        micro = entry.micro_batch
    S0 = default_S(strategy, p) if request.S is None else request.S
    p2, S = defaults(p, request.p2, S0, gpus_per_node)
    b, fits = request.b, True
    if request.global_batch is not None or micro is not None:
        p1 = replicas(strategy, p, p2, own._asdict())
        b, S, fits = batch_from(p1, b, S, request.global_batch, micro)
    written = own_values(strategy, p, b, p2, S, own)
    if request.global_batch is not None:
        written = written._replace(B=request.global_batch)
    return written._replace(fits=fits, config=(p, b, p2, S, *own))


def resolve(
    profile: MachineProfile,
    request: Request | str,
    p: int | None = None,
    b: int | None = None,
    p2: int | None = None,
    S: int | None = None,
    *,
    global_batch: int | None = None,
    micro_batch: int | None = None,
    own: Mapping[str, Any] | None = None,
    warn: bool = True,
) -> Resolved:
    """One configuration a user gave, checked (:meth:`Request.checked`) and completed on
    ``profile`` (:func:`complete`); hybrids' p2 must divide p (:func:`p2_fits`, an
    :class:`InputError`). ``request`` is a :class:`Request`, or a strategy's name with the
    request's values as the other arguments. A global batch that p1 does not divide, or a
    micro-batch that does not divide b, is no error here: the result's ``fits`` is false (the
    row infeasible, limit ``batch``, in a sweep; an error in ``sweep estimate``)."""
    if not isinstance(request, Request):
        request = Request.of(
            request, p, b, p2, S, global_batch=global_batch, micro_batch=micro_batch, own=own
        )
    request = request.checked(warn)
    out = complete(request, default_p2(profile))
    strategy = request.strategy
    if uses(strategy, "p2") and not p2_fits(out.p, out.config[2]):
        raise InputError(
            f"p2 {out.config[2]} must divide p {out.p}: {strategy} runs p/p2 groups of p2 GPUs",
            param=("p2", "p"),
        )
    whole_b, whole_S, whole_B = (int(v) if v == int(v) else v for v in (out.b, out.config[3], out.B))
    return out._replace(
        b=whole_b,
        S=whole_S if uses(strategy, "S") else out.S,
        B=whole_B,
        fits=bool(out.fits),
        config=(out.p, whole_b, out.config[2], whole_S, *out.config[4:]),
    )


def impossible(strategy: str, net, p: int, b: int, S: int, own: Own) -> str | None:
    """Why a configuration cannot exist on model ``net`` (:class:`kernels.network.Net`), or None:
    the first rule of its strategy's registry entry it breaks
    (:meth:`kernels.strategies.registry.Strategy.check`). A sweep keeps such rows as
    infeasible; a measured row of one is skipped."""
    return REGISTRY[strategy].check(net, {"p": p, "b": b, "S": S, **own._asdict()})


#: A profile's overheads, hashable for compile caches: ((strategy, ((term, value), ...)), ...).
Overheads = tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


def frozen_overheads(profile: MachineProfile) -> Overheads:
    """A profile's overheads table as a hashable tuple, for the compile caches."""
    return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in profile.overheads.items()))
