"""A co-design question's target and range (docs/tutorial-codesign.md): ``metric OP value`` over a
result column, or ``feasible``, which configuration is the best against it, and the values of
the parameter searched.

The software is re-optimised at every value of the parameter: the best configuration is the
one the target favours, the least ``metric`` for ``<=`` and ``<`` (``t_epoch_s <= 10``), the
greatest for ``>=`` and ``>`` (``mfu >= 0.4``), over the feasible configurations only. The
target ``feasible`` holds where some configuration is feasible (it fits in memory, breaks no
rule): ``t_epoch_s < inf``, whose best is the fastest feasible configuration.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kernels.names import PARAMS
from kernels.params import WHOLE
from sweep.engine.evaluate import RESULT_COLUMNS
from sweep.errors import InputError
from sweep.inputs.configs import Bound

TARGET_OPS = ("<=", "<", ">=", ">")
#: The columns a target or a metric may name.
KNOWN = ", ".join(RESULT_COLUMNS)
#: The largest dense grid: a grid point holds every configuration's columns (2.6 GB at 1e8).
MAX_GRID = 1 << 20
#: The target that holds where a configuration is feasible.
FEASIBLE = "feasible"


@dataclass(frozen=True)
class Target:
    """``metric OP value``, e.g. ``t_epoch_s <= 10``."""

    metric: str
    op: str
    value: float

    def text(self) -> str:
        if self.is_feasible:
            return FEASIBLE
        return f"{self.metric} {self.op} {self.value:g}"

    @property
    def maximises(self) -> bool:
        """Whether the best configuration is the greatest ``metric`` (``>=``, ``>``)."""
        return self.op in (">=", ">")

    @property
    def is_feasible(self) -> bool:
        return (self.metric, self.op, self.value) == ("t_epoch_s", "<", math.inf)


def parse_target(text: str) -> Target:
    """``COL <= X`` (also ``<``, ``>=``, ``>``) over a result column (docs/output-format.md#columns),
    or ``feasible``: some configuration is feasible (``t_epoch_s < inf``)."""
    if (text or "").strip() == FEASIBLE:
        return Target("t_epoch_s", "<", math.inf)
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*([-+0-9.eE_]+)\s*", text or "")
    if m is None:
        raise InputError(
            f"target must look like 't_epoch_s <= 10', 'mfu >= 0.4' or be 'feasible', got '{text}'",
            param="target",
        )
    metric, op, raw = m.groups()
    if metric not in RESULT_COLUMNS:
        raise InputError(f"target: unknown metric '{metric}' (known: {KNOWN})", param="target")
    try:
        value = float(raw.replace("_", ""))
    except ValueError:
        raise InputError(f"target: '{raw}' is not a number", param="target") from None
    if not math.isfinite(value):
        raise InputError(f"target: '{raw}' is not a finite number", param="target")
    return Target(metric, op, value)


def default_range(bound: Bound, param: str) -> tuple[float, float]:
    """The machine's value / 64 to x 64 (a whole number: 1 to x 64, every whole number); a fraction
    (bounded above: efficiency, efficiency_<kind>) 0.01 to its bound; 0 to 1 where the value is 0."""
    base = float(bound.profile.value(param))
    if PARAMS[param].kind == WHOLE:
        return 1.0, max(2.0, base * 64)
    high = PARAMS[param].high
    if math.isfinite(high):
        return 0.01, high
    if base <= 0:
        return 0.0, 1.0
    return base / 64, base * 64


def whole_range(param: str, lo: float, hi: float) -> tuple[float, float]:
    """The whole numbers >= 1 of ``[lo, hi]`` as their least and greatest, at most :data:`MAX_GRID` of them."""
    lo, hi = float(max(1, math.ceil(lo))), float(math.floor(hi))
    if hi <= lo:
        raise InputError(
            f"range: {param} is a whole number >= 1; [{lo:g}, {hi:g}] has fewer than two", param="range"
        )
    if hi - lo + 1 > MAX_GRID:
        raise InputError(f"range: {hi - lo + 1:,.0f} whole numbers, more than {MAX_GRID:,}", param="range")
    return lo, hi
