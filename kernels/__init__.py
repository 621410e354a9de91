"""Pure JAX cost equations of the ParaDL oracle (docs/model.md). No I/O here.

The names below are imported on first use, so that ``kernels.names`` (the limit
reasons and machine parameters) can be read without importing JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernels.collectives import ALLREDUCE_ALGOS
    from kernels.machine import Link, Machine, with_params
    from kernels.names import LIMITS, MEMORY_MODELS, SCALAR_PARAMS
    from kernels.network import ACTIVE_FAMILIES, KINDS, LayerArrays, Net, build_net
    from kernels.strategies import STRATEGIES
    from kernels.terms import Config, Cost, Derived, derive

#: Where each public name lives.
_HOMES = {
    "ALLREDUCE_ALGOS": "kernels.collectives",
    "ACTIVE_FAMILIES": "kernels.network",
    "KINDS": "kernels.network",
    "LayerArrays": "kernels.network",
    "Net": "kernels.network",
    "build_net": "kernels.network",
    "LIMITS": "kernels.names",
    "MEMORY_MODELS": "kernels.names",
    "SCALAR_PARAMS": "kernels.names",
    "STRATEGIES": "kernels.strategies",
    "Link": "kernels.machine",
    "Machine": "kernels.machine",
    "with_params": "kernels.machine",
    "Config": "kernels.terms",
    "Cost": "kernels.terms",
    "Derived": "kernels.terms",
    "derive": "kernels.terms",
}

__all__ = [
    "ACTIVE_FAMILIES",
    "ALLREDUCE_ALGOS",
    "KINDS",
    "LIMITS",
    "MEMORY_MODELS",
    "SCALAR_PARAMS",
    "STRATEGIES",
    "Config",
    "Cost",
    "Derived",
    "LayerArrays",
    "Link",
    "Machine",
    "Net",
    "build_net",
    "derive",
    "with_params",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
