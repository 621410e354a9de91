"""Starting JAX's CPU backend with the number of threads a sweep wants.

XLA's CPU client runs every computation on a thread pool whose size it
reads from the CPUs this process may run on (its affinity mask) when the
client is created; JAX offers no other knob. A sweep's kernels are many
small fused loops, which a pool of fewer threads than CPUs runs faster, as
the host also needs CPUs to encode and reduce (docs/performance.md#threads).

So :func:`start` creates the client while this thread may run on only
``threads`` CPUs, then gives every thread (the pool's included) back the
CPUs it had: the pool keeps its size, not the pinning. The default is half
the CPUs (at least one, and one per forced CPU device), leaving the rest to
the writer and prepare threads. ``SWEEP_CPU_THREADS=N`` sets it.

:func:`start` also caps XLA's x86 CPU code at AVX, without FMA, while it creates
the client (:func:`same_bits_in_every_program`), and puts ``XLA_FLAGS`` back after.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from sweep.errors import InputError

THREADS_ENV = "SWEEP_CPU_THREADS"


def default_threads(cpus: int, devices: int = 1) -> int:
    """Half the CPUs, at least one, and at least one per CPU device (forced with
    ``--xla_force_host_platform_device_count``: a chunk split over N devices has N
    parts to run at once)."""
    return max(1, cpus // 2, min(devices, cpus))


def forced_devices() -> int:
    """CPU devices asked for in ``XLA_FLAGS`` (the last setting counts), else 1."""
    found = re.findall(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(found[-1]) if found else 1


def threads_wanted(cpus: int) -> int:
    """``SWEEP_CPU_THREADS`` if set (a positive integer), else :func:`default_threads`."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return default_threads(cpus, forced_devices())
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(f"{THREADS_ENV}: expected a positive whole number of threads, got '{text}'")
    return n


def _initialized() -> bool:
    from jax._src import xla_bridge

    check = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(check()) if check is not None else False


@contextmanager
def same_bits_in_every_program() -> Iterator[None]:
    """While JAX creates its CPU client: cap XLA's x86 CPU code at AVX (no FMA), unless
    ``XLA_FLAGS`` already picks an ISA or ``SWEEP_CPU_FMA=1``; ``XLA_FLAGS`` is restored after.

    XLA contracts ``a * b + c`` into a fused multiply-add wherever the two
    operations land in one fusion, and the fusions differ between the
    programs a sweep compiles (every row kept, ``--keep``, a chunk evaluated
    again), so the same configuration could come out a last bit apart, and
    rows tied on a Pareto front could split depending on the path. Without
    FMA every program rounds every operation the same way; on this project's
    2-core AVX2 machine the kernels run as fast (docs/performance.md#same-bits-on-every-path).
    """
    flags = os.environ.get("XLA_FLAGS")
    cap = (
        os.environ.get("SWEEP_CPU_FMA") != "1"
        and "xla_cpu_max_isa" not in (flags or "")
        and platform.machine().lower() in ("x86_64", "amd64")
    )
    if cap:
        os.environ["XLA_FLAGS"] = f"{flags or ''} --xla_cpu_max_isa=AVX".strip()
    try:
        yield
    finally:
        if cap:
            if flags is None:
                os.environ.pop("XLA_FLAGS", None)
            else:
                os.environ["XLA_FLAGS"] = flags


def start(threads: int | None = None) -> int | None:
    """Create JAX's backends, the CPU client with a pool of ``threads`` threads
    (default :func:`threads_wanted`) and the flags of :func:`same_bits_in_every_program`;
    returns the pool size asked for, or None when it could not be set: backends already
    created, no affinity calls on this system (macOS), or ``threads`` not fewer than the CPUs."""
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
    else:
        cpus = list(range(os.cpu_count() or 1))
    n = threads if threads is not None else threads_wanted(len(cpus))  # a bad setting is an error anyway
    if _initialized():
        return None
    with same_bits_in_every_program():
        return _start_pinned(n, cpus)


def _start_pinned(n: int, cpus: list[int]) -> int | None:
    import jax

    if n >= len(cpus) or not hasattr(os, "sched_setaffinity"):
        jax.devices()
        return None

    tasks = "/proc/self/task"
    before = {}
    for tid in os.listdir(tasks):
        with suppress(OSError):
            before[int(tid)] = os.sched_getaffinity(int(tid))
    try:
        os.sched_setaffinity(0, cpus[:n])
        jax.devices()  # the CPU client sizes its pool now, from this thread's CPUs
    finally:
        # threads started meanwhile (the pool's) inherited the narrow set: all CPUs again
        for tid in os.listdir(tasks):
            with suppress(OSError):
                os.sched_setaffinity(int(tid), before.get(int(tid), cpus))
    return n


def cache_folder() -> str:
    """The persistent compilation cache's folder: ``SWEEP_JAX_CACHE``, empty for none."""
    return os.environ.get("SWEEP_JAX_CACHE", str(Path.home() / ".cache" / "paradl-sweep" / "jax"))


def configure() -> None:
    """JAX set up once for a computation: the persistent compilation cache, so a second run of
    the same spec skips compiling (``SWEEP_JAX_CACHE``: its folder, empty for none), and the
    backends created by :func:`start`. The settings stay; :func:`computation` puts them back."""
    import jax

    cache = cache_folder()
    # empty: no cache at all, also when an earlier command in this process set one
    jax.config.update("jax_compilation_cache_dir", cache or None)
    if cache:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    start()


#: The JAX settings :func:`computation` changes and puts back.
SETTINGS: tuple[str, ...] = (
    "jax_enable_x64",
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)


@contextmanager
def settings(**values: object) -> Iterator[None]:
    """JAX configuration ``values`` (``jax_enable_x64=True``, ...) for the duration of a block,
    then each option back to what it was.

    Process-wide, not per thread (:func:`jax.enable_x64` is per thread): a run traces
    kernels on several threads, which must all see the block's settings. Two blocks
    running at once on different threads with different values would see each other's.
    """
    import jax

    before = {name: getattr(jax.config, name) for name in values}
    try:
        for name, value in values.items():
            jax.config.update(name, value)
        yield
    finally:
        for name, value in before.items():
            jax.config.update(name, value)


@contextmanager
def computation(x64: bool = True) -> Iterator[None]:
    """What one library computation needs of JAX, for its duration: float64 (``x64``) or
    float32, the compilation cache and the backends (:func:`configure`). The JAX settings it
    changed (:data:`SETTINGS`) are put back after, so a call leaves the process's JAX
    configuration as it found it. The backends, once created, stay (JAX creates them once a
    process), as do compiled programs in JAX's own caches.
    """
    import jax

    with settings(**{name: getattr(jax.config, name) for name in SETTINGS}):
        jax.config.update("jax_enable_x64", x64)
        configure()
        yield
