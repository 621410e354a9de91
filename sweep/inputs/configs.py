"""Rules of a configuration, one home each: which axes a strategy uses, the defaults of
p2 and S, and a model bound to a machine profile."""

from __future__ import annotations

from dataclasses import dataclass

from kernels import STRATEGIES
from kernels.network import Net
from sweep.errors import InputError
from sweep.inputs.layers import Model, bind
from sweep.inputs.machines import MachineProfile

#: Strategies whose rows use the p2 axis, and the one that uses S.
HYBRIDS = frozenset({"data+filter", "data+spatial"})
PIPELINE = "pipeline"


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
        return strategy == PIPELINE
    return True


@dataclass(frozen=True)
class Bound:
    """A model bound to a machine profile: the kernels' Net and Machine, as numpy."""

    model: Model
    profile: MachineProfile
    net: Net

    @classmethod
    def of(cls, model: Model, profile: MachineProfile) -> Bound:
        return cls(model, profile, bind(model, profile.measured_key, profile.ref_rate_flops))


def default_p2(profile: MachineProfile) -> int:
    """p2 = gpus_per_node by default (docs/model.md §2)."""
    return int(profile.value("gpus_per_node"))


#: A profile's overheads, hashable for compile caches: ((strategy, ((term, value), ...)), ...).
Overheads = tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


def frozen_overheads(profile: MachineProfile) -> Overheads:
    """A profile's overheads table as a hashable tuple, for the compile caches."""
    return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in profile.overheads.items()))


def resolve_config(
    profile: MachineProfile, strategy: str, p: int, b: int, p2: int | None, S: int | None
) -> tuple[int, int]:
    """Check one configuration given by a user and fill in the defaults: ``(p2, S)``.

    p2 = gpus_per_node and S = p by default (docs/model.md §2); every value must
    be >= 1 and a hybrid's p2 must divide p. Mistakes are :class:`InputError` s.
    """
    check_strategy(strategy)
    for name, value in (("p", p), ("b", b), ("p2", p2), ("S", S)):
        if value is not None and value < 1:
            raise InputError(f"--{name} must be >= 1, got {value}")
    p2 = default_p2(profile) if p2 is None else p2
    if strategy in HYBRIDS and p % p2:
        raise InputError(f"--p2 {p2} must divide --p {p}: {strategy} runs p/p2 groups of p2 GPUs")
    return p2, p if S is None else S
