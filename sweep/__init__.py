"""paradl-sweep: the ParaDL cost model swept over design spaces, and answers from the sweeps.

``sweep.open(DIR)`` opens a sweep's Parquet output for queries in a notebook
(see :mod:`sweep.query`); it is imported on first use, so ``import sweep.cli``
stays fast.
"""

from __future__ import annotations

from typing import Any

__all__ = ["open"]


def __getattr__(name: str) -> Any:
    if name == "open":
        from sweep.query import open_sweep

        return open_sweep
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
