"""Compiled kernels kept between runs, beside the persistent XLA cache.

XLA's persistent cache spares a second run the compilation, not the Python
before it: tracing and lowering a job's kernels, holding the GIL; the
look-up then serialises and hashes the lowered module, and loads the
program. On few cores that sets the pace of warm runs of a few jobs
(docs/performance.md#the-compiled-kernel-cache). So each kernel is kept, in two files:

* a **module** per job (``<key>.module``): its StableHLO (:mod:`jax.export`),
  the tree of its outputs, the inputs it reads, and the name of its program.
  The module lowers again, quickly, when the program must be compiled.
* a **program** per distinct compiled program (``<name>.program``): the
  executable (:mod:`jax.experimental.serialize_executable`), which loads
  with no lowering. Jobs whose kernels lower to the
  same text share it (filter and channel; one grid's job and another's
  with other axis values). A program is kept only when it was compiled
  here, not served by XLA's cache (:data:`FRESH`), and when, loaded back,
  it gives the same outputs bit for bit as the compiled one.

A module is stored under a key that hashes everything its trace or its
compilation can read: this package's and :mod:`kernels`' source, the
versions of Python, NumPy, JAX and jaxlib, JAX's configuration and
``XLA_FLAGS``, the devices and their platform version, the host CPU's
features (XLA compiles for them), the job itself (model, machine profile,
strategy, axes; every field but its index) and the caller's static
arguments (chunk size, reduction, dtype). A program's name hashes the same
environment and its lowered text. Anything else changed means another
name, so nothing stored is ever stale; it may only be unused. A file that
cannot be read back is made again and replaced.

The files live in ``paradl-traced/`` under JAX's cache folder
(``jax_compilation_cache_dir``, which ``sweep run`` sets from
``SWEEP_JAX_CACHE``); with no cache folder nothing is stored. At most
:data:`MAX_MODULES` modules and :data:`MAX_PROGRAMS` programs are kept,
the least recently used deleted first. The folder may be deleted at any
time; deleted alone, without the rest of JAX's cache folder, each program
is compiled twice when next needed (XLA's cache serves the first compile,
see :func:`_compile_program`). Like XLA's own cache, the
programs are machine code run when loaded: the folder is only as
trustworthy as whoever can write to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import pickle
import platform
import random
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax.experimental import serialize_executable

from sweep.inputs.grid import Job
from sweep.output import store

#: Bump when what is stored, or how it is keyed, changes.
FORMAT = "paradl-traced-3"
FOLDER = "paradl-traced"
SUFFIX = ".module"
PROGRAM = ".program"
#: Modules (tens of kB each) and programs (up to about a MB on a CPU) kept at most; beyond,
#: the least recently used go.
MAX_MODULES = 4096
MAX_PROGRAMS = 512


@functools.cache
def code_digest() -> str:
    """SHA-256 of the source of the ``kernels`` and ``sweep`` packages, every ``.py`` file."""
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(path.relative_to(SOURCE_ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


#: The folder holding the ``kernels`` and ``sweep`` packages.
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def source_files() -> list[Path]:
    """Every ``.py`` file of the ``kernels`` and ``sweep`` packages: what :func:`code_digest` reads."""
    return [
        path for package in ("kernels", "sweep") for path in sorted((SOURCE_ROOT / package).rglob("*.py"))
    ]


def folder() -> Path | None:
    """Where modules are kept: a folder in JAX's persistent cache folder, or None without one."""
    cache = jax.config.values.get("jax_compilation_cache_dir")
    return Path(cache) / FOLDER if cache else None


@functools.cache
def host_cpu() -> str:
    """The host CPU's architecture, model and features (XLA compiles CPU code for them)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:  # Linux; elsewhere the architecture
        for line in f:
            name, _, value = line.partition(":")
            if name.strip() in ("vendor_id", "model name", "flags", "CPU implementer", "Features"):
                fields.setdefault(name.strip(), value.strip())
    return repr((platform.machine(), platform.processor(), sorted(fields.items())))


def _environment(devices: list) -> list[str]:
    """What a compiled program depends on besides its own text."""
    settings = sorted((k, repr(v)) for k, v in jax.config.values.items())
    return [
        FORMAT,
        sys.version,
        np.__version__,
        jax.__version__,
        jaxlib.__version__,
        repr([(d.platform, d.device_kind, d.client.platform_version) for d in devices]),
        host_cpu(),
        os.environ.get("XLA_FLAGS", ""),
        repr(settings),
    ]


def key(job: Job, static: tuple, devices: list) -> str:
    """The name a job's kernel is stored under (see the module docstring)."""
    digest = hashlib.sha256()
    for part in (*_environment(devices), code_digest(), repr(static)):
        digest.update(part.encode() + b"\0")
    digest.update(stable_pickle(dataclasses.replace(job, index=0)))
    return digest.hexdigest()


class _StablePickler(pickle.Pickler):
    """Pickles sets and frozensets with their members in a fixed order: pickle writes them in
    iteration order, which for strings follows the process's hash seed. As persistent ids: the
    C pickler asks :meth:`reducer_override` about neither, :meth:`persistent_id` about every
    object."""

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in (set, frozenset):
            return type(obj).__name__, tuple(sorted(obj, key=repr))
        return None


def stable_pickle(obj: Any) -> bytes:
    """``obj`` pickled to the same bytes in every process: a job holds a machine profile's
    frozenset of stated parameters, and a key that differed between processes would have every
    warm run trace and lower its kernels again."""
    out = io.BytesIO()
    _StablePickler(out, protocol=5).dump(obj)
    return out.getvalue()


def program_name(lowered: Any, devices: list) -> str:
    """The name a compiled program is stored under: its text (no debug information), and
    the environment it compiles in. Jobs whose kernels lower alike share it."""
    digest = hashlib.sha256()
    for part in (*_environment(devices), lowered.as_text(debug_info=False)):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def compile_kept(job: Job, static: tuple, devices: list, build: Callable[[], Any], args: tuple) -> Callable:
    """``build()(*args)`` compiled: loaded when an earlier run kept it, else traced (and
    kept, when there is a cache folder). The result is called like ``build()``."""
    where = folder()
    if where is None:
        return build().lower(*args).compile()
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    path = where / f"{key(job, static, devices)}{SUFFIX}"
    record = _read(path)
    if record is not None and not {"module", "out_tree", "used"} <= record.keys():
        record = None  # not one of ours
    exported = None
    if record is not None:
        compiled = _load_program(where, record.get("program"), devices)
        if compiled is not None:
            return _caller(compiled, record["out_tree"], record["used"])
        try:
            exported = jax.export.deserialize(bytearray(record["module"]))
        except Exception:  # truncated, or from another version of anything: trace it again
            record = None
    if record is None:
        fn = build()
        box: dict[str, Any] = {}

        def flat(*leaves):
            out = fn(*jax.tree_util.tree_unflatten(in_tree, leaves))
            flat_out, box["out_tree"] = jax.tree_util.tree_flatten(out)
            return tuple(flat_out)

        try:
            exported, used = _export(flat, leaves)
            record = {"module": bytes(exported.serialize()), "out_tree": box["out_tree"], "used": used}
        except Exception:  # something export does not support: nothing to keep
            return fn.lower(*args).compile()
    assert exported is not None
    inputs = [leaves[i] for i in record["used"]]
    try:
        lowered = jax.jit(exported.call).lower(*inputs)
        program = program_name(lowered, devices)
        # another job's may be the same program (this job's own, if named, failed to load above)
        compiled = None if program == record.get("program") else _load_program(where, program, devices)
        if compiled is None:
            compiled = _compile_program(where, program, lowered, inputs, devices)
    except Exception:  # a module this platform cannot take back: the traced kernel, as without a cache
        return build().lower(*args).compile()
    if record.get("program") != program:
        record["program"] = program
        _write(path, record)
    return _caller(compiled, record["out_tree"], record["used"])


def _caller(compiled: Callable, out_tree: Any, used: tuple[int, ...]) -> Callable:
    """``compiled``, which takes the leaves at ``used``, called like the kernel it came from."""
    unflatten = functools.partial(jax.tree_util.tree_unflatten, out_tree)

    def call(*args):
        leaves = jax.tree_util.tree_leaves(args)
        return unflatten(compiled(*(leaves[i] for i in used)))

    return call


def _read(path: Path) -> dict | None:
    """The record stored at ``path``, marked used; None if there is none that can be read."""
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
        if not isinstance(record, dict):
            return None
    except Exception:  # missing, truncated, or from another version of anything
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: the last to go when the folder is pruned
    return record


#: Compiled with this, a program is compiled, not served by XLA's persistent cache: JAX
#: 0.10's executable loaded from that cache serialises into one that fails when run
#: ("Function wrapped_iota not found"). It changes the cache key, nothing else: the
#: option only bounds a debugging printout.
FRESH_OPTION = "xla_debug_buffer_assignment_show_max"
FRESH = {FRESH_OPTION: 15}


def _compile_program(where: Path, program: str, lowered: Any, inputs: list, devices: list) -> Any:
    """``lowered`` compiled, and kept as ``program`` when its serialised form loads and
    gives the same outputs, bit for bit, on ``inputs``.

    XLA's cache holds a program compiled with :data:`FRESH` when this folder
    kept it once and lost it (pruned, deleted) but XLA's cache did not, or
    when JAX's cache is another folder (it takes the first folder a process
    sets); and in the test suite's long process a program compiled anew
    sometimes failed too. A program that fails the check is compiled once
    more under a key of its own (a random bound on the printout), which
    XLA's cache cannot hold, and kept if that one passes.
    """
    for options in (FRESH, {FRESH_OPTION: random.randrange(1 << 20, 1 << 30)}):
        compiled = lowered.compile(compiler_options=options)
        try:
            blob = pickle.dumps(serialize_executable.serialize(compiled), protocol=5)
        except Exception:  # a platform that cannot serialise it: compiled each run, from XLA's cache
            return compiled
        # one run's outputs held at a time: a whole-job kernel's are 100 MB or more
        want = digest(compiled(*inputs))
        try:
            got = digest(_load(blob, devices)(*inputs))
        except Exception:  # loaded, it fails: "Function ... not found" (see FRESH)
            got = None
        if want == got:
            _write(
                where / f"{program}{PROGRAM}", {"executable": blob, "sha256": hashlib.sha256(blob).digest()}
            )
            return compiled
    return compiled


def digest(outputs: Any) -> bytes:
    """SHA-256 of every leaf of ``outputs``: its type, shape and bits."""
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(outputs):
        a = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data)
    return h.digest()


#: Programs loaded by this process and still in use (weak references: a program goes
#: when no kernel holds it, as before): jobs that share a program (filter and channel, see
#: :func:`_export`), prepared while one another runs, load it once, not once each (a load
#: is a large part of a warm run's CPU time). A program is taken from here only while its
#: file is the one it was loaded from.
_LOADED: dict[tuple, tuple[tuple, weakref.ref]] = {}
_LOCK = threading.Lock()
_LOADING: dict[tuple, threading.Lock] = {}  # one per program being loaded: two jobs wait for one load


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _load_program(where: Path, program: str | None, devices: list) -> Any:
    """The program kept as ``program``, loaded onto ``devices``; None when there is none."""
    if program is None:
        return None
    at = (str(where), program, id(devices[0].client), tuple(d.id for d in devices))
    path = where / f"{program}{PROGRAM}"
    with _LOCK:
        lock = _LOADING.setdefault(at, threading.Lock())
    try:
        with lock:
            with _LOCK:
                hit = _LOADED.get(at)
            compiled = hit[1]() if hit is not None and hit[0] == _stamp(path) else None
            if compiled is None:
                compiled = _read_program(where, program, devices)
                stamp = _stamp(path)  # after the read, which marks the file used
                with _LOCK:
                    for dead in [k for k, (_s, ref) in _LOADED.items() if ref() is None]:
                        del _LOADED[dead]
                    if compiled is not None and stamp is not None:
                        _LOADED[at] = (stamp, weakref.ref(compiled))
                    else:
                        _LOADED.pop(at, None)
            return compiled
    finally:
        with _LOCK:
            _LOADING.pop(at, None)


def _read_program(where: Path, program: str, devices: list) -> Any:
    """:func:`_load_program`'s program read from its file and loaded; None when there is none."""
    record = _read(where / f"{program}{PROGRAM}")
    try:
        # machine code: checked whole before it is loaded, not just unpickled
        if record is None or hashlib.sha256(record["executable"]).digest() != record["sha256"]:
            return None
        return _load(record["executable"], devices)
    except Exception:  # damaged, or not loadable here after all: compiled again, and replaced
        return None


def _load(blob: bytes, devices: list) -> Any:
    """A serialised program (:func:`_compile_program`) loaded onto ``devices``."""
    executable, in_tree, out_tree = pickle.loads(blob)
    return serialize_executable.deserialize_and_load(
        executable, in_tree, out_tree, backend=devices[0].client, execution_devices=devices
    )


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
        _prune(path.parent, path.suffix)
    except OSError:  # a read-only or full cache folder costs the next run a trace, nothing more
        pass


def _prune(where: Path, suffix: str) -> None:
    """Delete the least recently used modules beyond :data:`MAX_MODULES`, or programs
    beyond :data:`MAX_PROGRAMS`."""
    limit = MAX_PROGRAMS if suffix == PROGRAM else MAX_MODULES
    stamps = []
    for f in where.glob(f"*{suffix}"):
        with contextlib.suppress(OSError):  # another process may prune at the same time
            stamps.append((f.stat().st_mtime_ns, f))
    stamps.sort()
    for _stamp, f in stamps[: max(len(stamps) - limit, 0)]:
        f.unlink(missing_ok=True)
