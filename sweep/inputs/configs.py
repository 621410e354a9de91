"""Rules of a configuration, one home each (docs/model.md §2): which axes a strategy uses,
the defaults of p2 and S (:func:`defaults`), whether a hybrid's p2 fits p (:func:`p2_fits`),
the columns a strategy writes (:func:`own_values`), a configuration a user gave checked and
completed (:func:`resolve`), and a model bound to a machine profile (:class:`Bound`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from kernels import STRATEGIES, strategies
from kernels.network import Net
from kernels.transformer import RECOMPUTE
from sweep.errors import InputError
from sweep.inputs.layers import Model, bind
from sweep.inputs.machines import INPUT_TERM, MachineProfile

#: Strategies whose rows use the p2 axis, and the one that uses S.
HYBRIDS = frozenset({"data+filter", "data+spatial"})
PIPELINE = "pipeline"
#: Megatron-style data+tensor+pipeline (docs/model.md §16) and the axes only it uses.
TENSOR = "data+tensor+pipeline"
TENSOR_AXES: tuple[str, ...] = ("tp", "pp", "recompute", "zero")
#: The paper's strategies: a sweep spec without ``strategies`` runs these.
PAPER_STRATEGIES = strategies.PAPER_STRATEGIES


class Tensor(NamedTuple):
    """data+tensor+pipeline's own configuration (docs/model.md §16): tensor and pipeline degrees,
    recomputation code (:data:`kernels.transformer.RECOMPUTE`), ZeRO stage."""

    tp: int = 1
    pp: int = 1
    recompute: int = 0
    zero: int = 0


def recompute_code(value) -> int:
    """The code of a ``recompute`` value: a name of :data:`kernels.transformer.RECOMPUTE` or its code."""
    if isinstance(value, str) and value in RECOMPUTE:
        return RECOMPUTE.index(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and value in range(len(RECOMPUTE)):
        return int(value)
    raise InputError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {value!r}")


def checked_tensor(tp: int = 1, pp: int = 1, recompute=0, zero: int = 0, flag: str = "--") -> Tensor:
    """A :class:`Tensor` from values a user gave; a bad value is an :class:`InputError`."""
    for name, value in (("tp", tp), ("pp", pp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{flag}{name} must be a whole number >= 1, got {value!r}")
    if zero not in (0, 1) or isinstance(zero, bool):
        raise InputError(f"{flag}zero must be 0 or 1 (ZeRO stage), got {zero!r}")
    return Tensor(tp, pp, recompute_code(recompute), int(zero))


#: The configuration of a strategy other than data+tensor+pipeline.
NO_TENSOR = Tensor()


def default_S(strategy: str, p):
    """S when not given (docs/model.md §2, §16): p for pipeline, 1 for data+tensor+pipeline."""
    return 1 if strategy == TENSOR else p


def check_strategy(name: str) -> str:
    """An :class:`InputError` for an unknown strategy name."""
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy '{name}' (known: {', '.join(STRATEGIES)})")
    return name


def uses_axis(strategy: str, axis: str) -> bool:
    """Whether a strategy's rows multiply by an axis (docs/model.md §2): p2 for hybrids, S for pipeline."""
    if axis == "p":
        return strategy != "serial"
    if axis == "p2":
        return strategy in HYBRIDS
    if axis == "S":
        return strategy in (PIPELINE, TENSOR)
    if axis in TENSOR_AXES:
        return strategy == TENSOR
    return True


@dataclass(frozen=True)
class Bound:
    """A model bound to a machine profile: the kernels' Net and Machine, as numpy."""

    model: Model
    profile: MachineProfile
    net: Net

    @classmethod
    def of(cls, model: Model, profile: MachineProfile) -> Bound:
        """``model`` on ``profile``; a calibrated profile's compute scale and cost per input element
        of this model applied (docs/trust.md, *Calibrated machine files*)."""
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
    and S (1 where it has none), its replicas p1 and global batch B = b * p1."""

    p: int
    b: int
    p2: int
    S: int
    p1: int
    B: int


def own_values(strategy: str, p: int, b: int, p2: int, S: int, tensor: Tensor = NO_TENSOR) -> Resolved:
    """The columns a strategy writes for a configuration whose p2 and S are already resolved."""
    if strategy == TENSOR:
        group = tensor.tp * tensor.pp
        p1 = max(p // group, 1)
        return Resolved(p, b, group, S, p1, b * p1)
    if strategy in HYBRIDS:
        p1, group = p // p2, p2
    elif strategy == "data":
        p1, group = p, 1
    elif strategy == "serial":
        p1, group = 1, 1
    else:  # model-parallel: the group is all p GPUs
        p1, group = 1, p
    return Resolved(p, b, group, S if strategy == PIPELINE else 1, p1, b * p1)


def _checked_given(
    strategy: str, p: int, b: int, p2: int | None, S: int | None, flag: str, warn: bool
) -> None:
    for name, value in (("p", p), ("b", b), ("p2", p2), ("S", S)):
        if value is not None and value < 1:
            raise InputError(f"{flag}{name} must be >= 1, got {value}")
    if strategy == "serial" and p != 1:
        raise InputError(f"serial runs on one GPU: {flag}p must be 1, got {p}")
    if warn and p2 is not None and strategy not in HYBRIDS:
        warnings.warn(f"{flag}p2 {p2} is ignored: only {' and '.join(sorted(HYBRIDS))} use it", stacklevel=3)
    if warn and S is not None and strategy not in (PIPELINE, TENSOR):
        warnings.warn(f"{flag}S {S} is ignored: only {PIPELINE} and {TENSOR} use it", stacklevel=3)


def resolve(
    profile: MachineProfile,
    strategy: str,
    p: int,
    b: int,
    p2: int | None = None,
    S: int | None = None,
    *,
    flag: str = "--",
    warn: bool = True,
    tensor: Tensor | None = None,
) -> Resolved:
    """Check one configuration a user gave, fill in its defaults and derive its fit (docs/model.md §2).

    Every value must be >= 1; serial takes p = 1 only; a hybrid's p2 must
    divide p (:func:`p2_fits`). These are :class:`InputError` s. A p2 given to
    a strategy other than the hybrids, or an S to one other than pipeline,
    is ignored, with a warning unless ``warn`` is false. ``flag`` prefixes the option names in messages.
    The result's p2 and S are the strategy's own values (:func:`own_values`).
    """
    check_strategy(strategy)
    _checked_given(strategy, p, b, p2, S, flag, warn)
    if warn and tensor is not None and tensor != Tensor() and strategy != TENSOR:
        warnings.warn(f"{flag}tp, pp, recompute and zero are ignored: only {TENSOR} uses them", stacklevel=2)
    p2, S = defaults(p, p2, default_S(strategy, p) if S is None else S, default_p2(profile))
    if strategy in HYBRIDS and not p2_fits(p, p2):
        raise InputError(f"{flag}p2 {p2} must divide {flag}p {p}: {strategy} runs p/p2 groups of p2 GPUs")
    return own_values(strategy, p, b, p2, S, tensor or NO_TENSOR)


#: A profile's overheads, hashable for compile caches: ((strategy, ((term, value), ...)), ...).
Overheads = tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


def frozen_overheads(profile: MachineProfile) -> Overheads:
    """A profile's overheads table as a hashable tuple, for the compile caches."""
    return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in profile.overheads.items()))


def resolve_config(
    profile: MachineProfile,
    strategy: str,
    p: int,
    b: int,
    p2: int | None,
    S: int | None,
    *,
    warn: bool = True,
) -> tuple[int, int]:
    """:func:`resolve`'s checks, then ``(p2, S)`` as the kernels take them: as given, else the
    defaults (:func:`defaults`). A strategy that ignores p2 or S computes the same with any."""
    resolve(profile, strategy, p, b, p2, S, warn=warn)
    return defaults(p, p2, default_S(strategy, p) if S is None else S, default_p2(profile))
