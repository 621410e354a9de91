"""Traced kernels kept between runs, beside the persistent XLA cache.

XLA's persistent cache spares a second run the compilation, not the Python
before it: tracing and lowering a job's chunk kernel takes 0.15-0.35 s, and
its per-point kernel 0.06 s more, holding the GIL. On 2 cores that set the
pace of a warm ``--keep pareto`` run of the seven-job co-design grid (3.5 s
of preparing against about 1.5 s of computing). A stored module
(:mod:`jax.export`, StableHLO) lowers again in about 0.03 s and then
compiles from XLA's cache as before.

A module is stored under a key that hashes everything its trace can read:
this package's and :mod:`kernels`' source, the versions of Python, NumPy, JAX and jaxlib,
JAX's configuration, the devices, the job itself (model, machine profile,
strategy, axes; every field but its index) and the caller's static
arguments (chunk size, reduction, dtype). Anything else changed means
another key, so a stored module is never stale; it may only be unused. A
file that cannot be read back is traced again and replaced.

The modules live in ``paradl-traced/`` under JAX's cache folder
(``jax_compilation_cache_dir``, which ``sweep run`` sets from
``SWEEP_JAX_CACHE``); with no cache folder nothing is stored. At most
:data:`MAX_MODULES` are kept, the least recently used deleted first; the
folder may be deleted at any time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

from sweep import store
from sweep.grid import Job

#: Bump when what is stored, or how it is keyed, changes.
FORMAT = "paradl-traced-2"
FOLDER = "paradl-traced"
SUFFIX = ".module"
#: Modules kept at most (30-90 kB each); beyond, the least recently used go.
MAX_MODULES = 4096


@functools.cache
def code_digest() -> str:
    """SHA-256 of the source of the ``kernels`` and ``sweep`` packages, every ``.py`` file."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for package in ("kernels", "sweep"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def folder() -> Path | None:
    """Where modules are kept: a folder in JAX's persistent cache folder, or None without one."""
    cache = jax.config.values.get("jax_compilation_cache_dir")
    return Path(cache) / FOLDER if cache else None


def key(job: Job, static: tuple, devices: list) -> str:
    """The name a job's module is stored under (see the module docstring)."""
    digest = hashlib.sha256()
    settings = sorted((k, repr(v)) for k, v in jax.config.values.items())
    for part in (
        FORMAT,
        code_digest(),
        sys.version,
        np.__version__,
        jax.__version__,
        jaxlib.__version__,
        repr([(d.platform, d.device_kind) for d in devices]),
        repr(settings),
        repr(static),
    ):
        digest.update(part.encode() + b"\0")
    digest.update(pickle.dumps(dataclasses.replace(job, index=0), protocol=5))
    return digest.hexdigest()


def compile_kept(job: Job, static: tuple, devices: list, build: Callable[[], Any], args: tuple) -> Callable:
    """``build()(*args)`` compiled: from the stored module when there is one, else traced
    (and stored, when there is a cache folder). The result is called like ``build()``."""
    where = folder()
    if where is None:
        return build().lower(*args).compile()
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    path = where / f"{key(job, static, devices)}{SUFFIX}"
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
        exported = jax.export.deserialize(bytearray(record["module"]))
        out_tree, used = record["out_tree"], tuple(record["used"])
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to go when the folder is pruned
    except Exception:  # missing, truncated, or from another version of anything: trace it again
        exported = None
    if exported is None:
        fn = build()
        box: dict[str, Any] = {}

        def flat(*leaves):
            out = fn(*jax.tree_util.tree_unflatten(in_tree, leaves))
            flat_out, box["out_tree"] = jax.tree_util.tree_flatten(out)
            return tuple(flat_out)

        try:
            exported, used = _export(flat, leaves)
            blob = exported.serialize()
        except Exception:  # something export does not support: no module to keep
            return fn.lower(*args).compile()
        out_tree = box["out_tree"]
        _write(path, {"module": bytes(blob), "out_tree": out_tree, "used": used})
    try:
        compiled = jax.jit(exported.call).lower(*(leaves[i] for i in used)).compile()
    except Exception:  # a module this platform cannot take back: the traced kernel, as without a cache
        return build().lower(*args).compile()
    unflatten = functools.partial(jax.tree_util.tree_unflatten, out_tree)

    def call(*args):
        leaves = jax.tree_util.tree_leaves(args)
        return unflatten(compiled(*(leaves[i] for i in used)))

    return call


def _export(flat: Callable, leaves: list) -> tuple[jax.export.Exported, tuple[int, ...]]:
    """``flat`` exported as a function of only the inputs it reads, and their positions.

    A jitted program drops the inputs it does not read, so two jobs whose
    strategies read different inputs can still compile to one program (filter
    and channel on the co-design grid), which XLA's cache then holds once.
    An exported module drops them inside, behind a call that takes every
    input; exported again over the inputs it reads, its program is the same
    for such jobs again (the co-design grid compiles 12 programs, not 14).
    """
    whole = jax.export.export(jax.jit(flat))(*leaves)
    used = tuple(int(i) for i in whole.module_kept_var_idx)

    def reads(*kept):
        every = [jnp.zeros(a.shape, a.dtype) for a in whole.in_avals]  # never read
        for i, x in zip(used, kept, strict=True):
            every[i] = x
        return whole.call(*every)

    return jax.export.export(jax.jit(reads))(*(leaves[i] for i in used)), used


def _write(path: Path, record: dict) -> None:
    """Write ``record`` to ``path`` whole or not at all (a temporary file renamed)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write_bytes(path, pickle.dumps(record, protocol=5))
        _prune(path.parent)
    except OSError:  # a read-only or full cache folder costs the next run a trace, nothing more
        pass


def _prune(where: Path) -> None:
    """Delete the least recently used modules beyond :data:`MAX_MODULES`."""
    stamps = []
    for f in where.glob(f"*{SUFFIX}"):
        with contextlib.suppress(OSError):  # another process may prune at the same time
            stamps.append((f.stat().st_mtime_ns, f))
    stamps.sort()
    for _stamp, f in stamps[: max(len(stamps) - MAX_MODULES, 0)]:
        f.unlink(missing_ok=True)
