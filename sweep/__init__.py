"""paradl-sweep: the ParaDL cost model swept over design spaces, and answers from the sweeps.

The Python API lives in :mod:`sweep.api` and is re-exported here on first use, so
``import sweep`` is quick and changes nothing in the process (no environment variable,
no JAX setting, JAX not even imported): ``sweep.estimate``, ``sweep.evaluate``,
``sweep.run``, ``sweep.open``, ``sweep.codesign``, ``sweep.sensitivity``,
``sweep.validate``, ``sweep.calibrate`` (and ``sweep.plan``, ``sweep.bind``). Bad input raises
:class:`sweep.InputError` (:class:`sweep.errors.InputError`), whose message names the parameter.

>>> import sweep
>>> sweep.estimate("resnet50", "abci", "data", p=1024, b=32)["t_epoch_s"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweep.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from sweep.api import (
        bind,
        calibrate,
        codesign,
        estimate,
        evaluate,
        open,
        plan,
        run,
        sensitivity,
        validate,
    )

__all__ = [
    "InputError",
    "bind",
    "calibrate",
    "codesign",
    "estimate",
    "evaluate",
    "open",
    "plan",
    "run",
    "sensitivity",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "InputError":
        from sweep import api

        return getattr(api, name)
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
