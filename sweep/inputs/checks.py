"""The Python API's arguments checked by name: a wrong type or value is an
:class:`~sweep.errors.InputError` whose ``param`` (and message) names the parameter, never a raw
``TypeError`` from deep inside.

Each public function of :mod:`sweep.api` and of the query object
(:class:`sweep.answers.query.Sweep`) starts with one line, ``arguments(locals())``: every
argument given (not None) is checked by the rule of its name in :data:`RULES`, the same rule
wherever the name appears (``p`` is a whole number >= 1, or a list of them where a question
chooses from several; ``set`` a mapping of machine parameters to values). The keywords of
``**own`` (a strategy's own settings, by axis name) are checked as names or whole numbers; their
ranges are the registry's, checked where the configuration is built. Needs no JAX.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sweep.errors import InputError


def _fail(name: str, what: str, value: Any) -> InputError:
    return InputError(f"{name} must be {what}, got {value!r}", param=name)


def one_whole(name: str, value: Any) -> None:
    """A whole number >= 1 (:func:`whole` as a rule of :data:`RULES`)."""
    whole(name, value)


def whole(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int when it is a whole number >= ``minimum`` (an int, or a float equal to
    one; no text, bool or fraction)."""
    ok = not isinstance(value, bool | str)
    try:
        ok = ok and math.isfinite(float(value)) and float(value) == int(value)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or int(value) < minimum:
        raise _fail(name, f"a whole number >= {minimum}", value)
    return int(value)


def wholes(name: str, value: Any, minimum: int = 1) -> None:
    """A whole number >= ``minimum``, or a non-empty list of them (a question's choices)."""
    if hasattr(value, "tolist"):  # a NumPy array or scalar
        value = value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if not value:
            raise _fail(name, f"a whole number >= {minimum} or a non-empty list of them", value)
        for item in value:
            try:
                whole(name, item, minimum)
            except InputError:
                raise _fail(name, f"a whole number >= {minimum} or a list of them", value) from None
        return
    whole(name, value, minimum)


def text(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise _fail(name, "text", value)


def texts(name: str, value: Any) -> None:
    """One name, or a list of names (``"a,b"`` allowed)."""
    if isinstance(value, str):
        return
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise _fail(name, "a name or a list of names", value)


def flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _fail(name, "True or False", value)


def number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise _fail(name, "a finite number", value)


def positive(name: str, value: Any) -> None:
    number(name, value)
    if value <= 0:
        raise _fail(name, "a number > 0", value)


def path(name: str, value: Any) -> None:
    if not isinstance(value, str | os.PathLike):
        raise _fail(name, "a path", value)


def _spelt(kinds: tuple[str, ...]) -> Callable[[str, Any], None]:
    """A path or name, or an object of one of the classes ``kinds`` (``module:Class``)."""

    def check(name: str, value: Any) -> None:
        if isinstance(value, str | os.PathLike):
            return
        import importlib

        classes = []
        for kind in kinds:
            module, _, cls = kind.partition(":")
            classes.append(getattr(importlib.import_module(module), cls))
        if not isinstance(value, tuple(classes)):
            shown = " or ".join(k.partition(":")[2] for k in kinds)
            raise _fail(name, f"a built-in name, a path or a {shown}", value)

    return check


def machine_values(name: str, value: Any) -> None:
    """``set``: machine parameters by name, each a number (or a name, for a choice)."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _fail(
            name, "a mapping of machine parameters to values, e.g. {'inter_bandwidth_Bps': 25e9}", value
        )
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, numbers.Real | str):
            raise InputError(f"{name}: {key} must be a number or a name, got {item!r}", param=name)


def bounds(name: str, value: Any) -> None:
    """``range``: two numbers, low then high."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise _fail(name, "two numbers (low, high)", value)
    for item in value:
        number(name, item)


def own_settings(name: str, value: Any) -> None:
    """``**own``: each setting a name or a whole number, or a list of them (a question's choices);
    their ranges are the registry's, checked where the configuration is built."""
    for axis, item in value.items():
        items = item if isinstance(item, Sequence) and not isinstance(item, str) else [item]
        for one in items:
            if one is None or isinstance(one, str):
                continue
            if isinstance(one, bool) or not isinstance(one, numbers.Real) or float(one) != round(float(one)):
                raise _fail(axis, "a name or a whole number", one)


def _where(name: str, value: Any) -> None:
    """A filter text, or one compiled (:class:`sweep.answers.where.Filter`, read by its fields:
    this layer does not import the answers)."""
    if not isinstance(value, str) and not hasattr(value, "expression"):
        raise _fail(name, "a filter text, e.g. \"p >= 256 and strategy == 'data'\"", value)


def _spec(name: str, value: Any) -> None:
    if isinstance(value, str | os.PathLike | Mapping) and value is not None:
        return
    from sweep.inputs.grid import SweepSpec

    if not isinstance(value, SweepSpec):
        raise _fail(
            name,
            "a sweep file's path, a shipped sweep's name, a TOML document as a dict or a SweepSpec",
            value,
        )


def _target(name: str, value: Any) -> None:
    """``target``: a text ``"t_epoch_s <= 10"`` or a parsed :class:`sweep.answers.codesign.Target`."""
    if not isinstance(value, str) and not all(hasattr(value, k) for k in ("metric", "op", "value")):
        raise _fail(name, "a target text, e.g. 't_epoch_s <= 10'", value)


def _whole_or_zero(name: str, value: Any) -> None:
    whole(name, value, minimum=0)


_FLAGS: tuple[str, ...] = ("x64", "only_feasible", "resume", "overwrite", "confirm", "space_check")
_FLAGS += ("strict", "transfer", "descending", "rank", "all", "feasible_only")

#: The rule of each argument name of the API (a name with no rule is not checked here).
RULES: dict[str, Callable[[str, Any], None]] = {
    **dict.fromkeys(("p", "b", "p2", "S", "B", "global_batch", "micro_batch"), wholes),
    **dict.fromkeys(("k", "chunk", "grid", "max_rows", "batch_rows"), one_whole),
    "max_points": _whole_or_zero,
    "model": _spelt(("sweep.inputs.layers:Model",)),
    "machine": _spelt(("sweep.inputs.machines:MachineProfile",)),
    "spec": _spec,
    **dict.fromkeys(("strategy", "param", "beats", "metric", "of", "by", "name", "loss", "keep"), text),
    **dict.fromkeys(("strategies", "minimize", "maximize", "per", "columns", "fit"), texts),
    **dict.fromkeys(_FLAGS, flag),
    **dict.fromkeys(("loss_scale", "prior_scale", "tokens"), positive),
    **dict.fromkeys(("lc", "out", "plot", "measured", "path"), path),
    "set": machine_values,
    "range": bounds,
    "where": _where,
    "target": _target,
    "interval": number,
    "own": own_settings,
}


#: Arguments that are never optional, so None is checked (and refused) too.
REQUIRED = ("spec", "path", "measured")


def arguments(given: Mapping[str, Any]) -> None:
    """Check each argument of ``given`` (a public function's ``locals()``, taken first thing)
    that is not None (or is :data:`REQUIRED`) by the rule of its name (:data:`RULES`)."""
    for name, value in given.items():
        rule = RULES.get(name)
        if rule is not None and (value is not None or name in REQUIRED):
            rule(name, value)


def cv_folds(cv: str | int) -> str | int:
    """Cross-validation as calibration takes it: ``"model"`` (leave one model out), 0 (none) or
    a number of folds >= 2; an :class:`InputError` naming ``cv`` otherwise."""
    text = str(cv).strip()
    if text == "model":
        return text
    try:
        folds = int(text)
    except ValueError:
        raise InputError(f"cv must be a number of folds, 'model' or 0, got '{cv}'", param="cv") from None
    if folds < 0 or folds == 1:
        raise InputError(f"cv needs 0 (none) or at least 2 folds, got {folds}", param="cv")
    return folds


def column_list(columns: Sequence[str] | str | None) -> tuple[str, ...] | None:
    """Output columns as given (names, or comma-separated text), as a tuple; None for all."""
    if columns is None:
        return None
    names = [columns] if isinstance(columns, str) else list(columns)
    cols = tuple(c.strip() for n in names for c in n.split(",") if c.strip())
    if not cols:
        raise InputError(f"columns names no column, got '{','.join(names)}'", param="columns")
    return cols
