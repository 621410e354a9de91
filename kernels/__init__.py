"""Pure JAX cost equations of the ParaDL oracle (docs/model.md). No I/O here."""

from kernels.collectives import ALLREDUCE_ALGOS
from kernels.machine import SCALAR_PARAMS, Link, Machine, with_params
from kernels.network import ACTIVE_FAMILIES, KINDS, LayerArrays, Net, build_net
from kernels.strategies import STRATEGIES
from kernels.terms import LIMITS, Config, Cost, Derived, derive

__all__ = [
    "ACTIVE_FAMILIES",
    "ALLREDUCE_ALGOS",
    "KINDS",
    "LIMITS",
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
