"""paradl-sweep: the ParaDL cost model swept over design spaces, and answers from the sweeps.

The Python API lives in :mod:`sweep.api` and is re-exported here on first use, so
``import sweep`` is quick and changes nothing in the process (no environment variable,
no JAX setting): ``sweep.estimate``, ``sweep.evaluate``, ``sweep.run``, ``sweep.open``,
``sweep.codesign``, ``sweep.sensitivity``, ``sweep.validate``, ``sweep.calibrate``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["open"]


def __getattr__(name: str) -> Any:
    if name == "open":
        from sweep.answers.query import open_sweep

        return open_sweep
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
