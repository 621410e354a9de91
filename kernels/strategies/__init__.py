"""One cost function per strategy of docs/model.md §10, each ``f(net, machine, cfg) -> Cost``.

:mod:`kernels.strategies.registry` holds each strategy's entry (kernel, axes, defaults, legal
values) and imports no JAX; the kernels themselves load on first use of a name below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernels.strategies.registry import REGISTRY

if TYPE_CHECKING:
    from kernels.strategies.data import data
    from kernels.strategies.filter import channel, filter_
    from kernels.strategies.hybrid import data_filter, data_spatial
    from kernels.strategies.megatron import data_tensor_pipeline
    from kernels.strategies.pipeline import pipeline
    from kernels.strategies.serial import serial
    from kernels.strategies.spatial import spatial

    STRATEGIES: dict[str, Callable[..., Any]]

#: The paper's strategies (docs/model.md §10), without data+tensor+pipeline (§16).
PAPER_STRATEGIES: tuple[str, ...] = tuple(name for name, e in REGISTRY.items() if e.paper)

#: Kernel function name to its module.
_KERNELS = {e.kernel_path.split(":")[1]: e.kernel_path.split(":")[0] for e in REGISTRY.values()}


def _memory_split(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` whose memory parts (``mem_states_bytes``, ``mem_activations_bytes``) are arrays
    of its other fields' shape and type (:func:`kernels.terms.memory_parts`): a strategy that
    does not split its memory leaves them NaN, in the sweep's precision like every column."""

    def split(net, machine, cfg):
        from kernels.terms import memory_parts

        return memory_parts(kernel(net, machine, cfg))

    split.__name__, split.__doc__, split.__wrapped__ = kernel.__name__, kernel.__doc__, kernel  # type: ignore[attr-defined]
    return split


def __getattr__(name: str) -> Any:
    if name == "STRATEGIES":  # strategy name (docs/model.md §2, column ``strategy``) to kernel
        # built once, on first use: later reads find the module attribute, not this hook
        table = globals()["STRATEGIES"] = {s: _memory_split(e.kernel) for s, e in REGISTRY.items()}
        return table
    if name in _KERNELS:
        return getattr(importlib.import_module(_KERNELS[name]), name)
    raise AttributeError(f"module 'kernels.strategies' has no attribute {name!r}")


__all__ = [
    "PAPER_STRATEGIES",
    "REGISTRY",
    "STRATEGIES",
    "channel",
    "data",
    "data_filter",
    "data_spatial",
    "data_tensor_pipeline",
    "filter_",
    "pipeline",
    "serial",
    "spatial",
]
