"""Bound models kept between calls of one process, so that a notebook's loop of ``sweep.estimate``
on one model and machine loads, checks and tabulates them once.

A bound model (:class:`sweep.inputs.configs.Bound`) costs a model's load and its per-stage tables
(GPT-3 175B: about 0.1 s); a configuration's evaluation well under a millisecond. :func:`bound`
keeps the last :data:`KEPT` bound models, keyed by what they were made from:

- a built-in name as the name;
- a file by its resolved path, modification time and size, so that an edited file is read again;
- an object already loaded (a :class:`~sweep.inputs.layers.Model`, a
  :class:`~sweep.inputs.machines.MachineProfile`) by its identity and its fields (a model's name,
  data set size, measured times and its list of layers, that list's identity and length; a
  profile's name, parameters and overrides): the entry holds the object and is used only for
  that very object, as it was when kept;
- the ``set`` overrides by their items.

What a kept entry returns is what a fresh load would (the same checks ran when it was made);
an input that fails its checks is never kept, so it fails again, with the same error, on every call.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

#: Bound models kept per process (least recently used dropped first).
KEPT = 8

_bound: OrderedDict[Hashable, tuple[tuple[Any, ...], Any]] = OrderedDict()


def _file(text: str) -> Hashable:
    """A file's identity as loaded: resolved path, modification time and size (None: no such file)."""
    try:
        info = os.stat(text)
    except (OSError, ValueError):
        return None
    return (str(Path(text).resolve()), info.st_mtime_ns, info.st_size)


def spec_key(spec: Any) -> tuple[Hashable, tuple[Any, ...]]:
    """``(key, held)``: a name or path as its text and file identity, an object by its identity
    (``held`` keeps the object, so the key cannot outlive it)."""
    if isinstance(spec, str | Path):
        return ("spec", str(spec), _file(str(spec))), ()
    return ("object", id(spec), _fields(spec)), (spec,)


def _fields(obj: Any) -> Hashable:
    """What a kept model or profile object is checked by, beyond its identity."""
    layers = getattr(obj, "layers", None)
    if layers is not None:  # a Model
        return (obj.name, obj.dataset_samples, id(layers), len(layers), sets_key(obj.measured_s))
    params, overrides = getattr(obj, "params", None), getattr(obj, "overrides", None)
    if isinstance(params, Mapping) and isinstance(overrides, Mapping):  # a MachineProfile
        return (obj.name, sets_key(params), sets_key(overrides))
    return None


def sets_key(values: Mapping[str, Any] | None) -> Hashable:
    """``set`` overrides as a key: their items, sorted (a value of an unhashable type: its repr)."""
    items = sorted((values or {}).items())
    return tuple((k, v if isinstance(v, Hashable) else repr(v)) for k, v in items)


def bound(key: Hashable, held: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """The kept value of ``key`` whose held objects are ``held`` (the very ones), else ``make()``,
    kept. ``make`` raising keeps nothing."""
    entry = _bound.get(key)
    if (
        entry is not None
        and len(entry[0]) == len(held)
        and all(a is b for a, b in zip(entry[0], held, strict=True))
    ):
        _bound.move_to_end(key)
        return entry[1]
    value = make()
    _bound[key] = (held, value)
    _bound.move_to_end(key)
    while len(_bound) > KEPT:
        _bound.popitem(last=False)
    return value


def clear() -> None:
    """Forget every kept bound model."""
    _bound.clear()
