"""paradl-sweep: the ParaDL cost model swept over design spaces, and answers from the sweeps.

``sweep.open(DIR)`` opens a sweep's Parquet output for queries in a notebook
(see :mod:`sweep.query`); it is imported on first use, so ``import sweep.cli``
stays fast.
"""

from __future__ import annotations

import os
import platform
from typing import Any

__all__ = ["open"]


def _same_bits_in_every_program() -> None:
    """Cap XLA's x86 CPU code at AVX (no FMA), unless ``XLA_FLAGS`` already picks an ISA.

    XLA contracts ``a * b + c`` into a fused multiply-add wherever the two
    operations land in one fusion, and the fusions differ between the
    programs a sweep compiles (every row kept, ``--keep``, a chunk evaluated
    again), so the same configuration could come out a last bit apart, and
    rows tied on a Pareto front could split depending on the path. Without
    FMA every program rounds every operation the same way; measured on this
    project's 2-core AVX2 machine, the kernels run as fast (see README,
    Speed). ``SWEEP_CPU_FMA=1`` keeps XLA's default. Takes effect only when
    ``sweep`` is imported before JAX creates its CPU client.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if os.environ.get("SWEEP_CPU_FMA") == "1" or "xla_cpu_max_isa" in flags:
        return
    if platform.machine().lower() in ("x86_64", "amd64"):
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_max_isa=AVX".strip()


_same_bits_in_every_program()


def __getattr__(name: str) -> Any:
    if name == "open":
        from sweep.query import open_sweep

        return open_sweep
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
