"""Throughput benchmarks of the sweep engine; prints a table of figures.

    python -m benchmarks.bench            # all sections, a few minutes on 2 cores
    python -m benchmarks.bench --quick    # smaller grids
    python -m benchmarks.bench --big      # adds the 1e9-point --keep pareto RSS run

(a) kernel throughput per strategy and for all eight on ResNet-50 (174 layers),
    beside two plain-Python per-configuration evaluations of the same equations:
    tests/oracles/reference.py, from the network's per-layer sums prepared once,
    and tests/oracles/layerwise.py, which adds the terms up layer by layer for every
    configuration, as docs/model.md §10 writes them and the original oracle runs.
    The ratios (top-1 over each) are the figure. "materialised" returns every column to the host like a sweep
    writing all rows; "top-1" and "pareto" reduce on the device (the --keep
    paths: --keep top:1:t_epoch_s, --keep pareto:t_epoch_s,p). Four chunks spread
    over each job, the median of repeated runs of each, at the chunk size sweep run
    uses: 2^18 writing every row, 2^20 reducing.
(b) end-to-end ``sweep run`` to Parquet, every row written, rows/s, cold and warm cache,
    each in a fresh process (see :func:`cold_warm`).
(c) the same grid with ``--keep pareto:t_epoch_s,p``, configurations/s; and with p >= 8
    (below 8 GPUs every network setting ties, and ties all stay on the front); with
    p >= 8, without serial (all p = 1) and 4x the latencies (1.68e8 points, a front of
    10 rows); and the shipped co-design grid (grids/sweeps/codesign-resnet50-large.toml,
    1.02e8 points).
(d) peak resident memory of ``--keep pareto`` runs of growing size, each in a
    fresh process: it must not grow with the grid.
(e) start-up: wall time of a tiny ``sweep run`` in a fresh process, first and
    second time (the second finds the persistent compilation cache).
(t) data+tensor+pipeline beside data on GPT-3 175B (963 layers) on a100-ib800, in one
    run, top-1 and materialised, and their ratio: the machine is shared and noisy, so the
    ratio is the figure (not in the default sections: ``--sections t``).

``--sections`` picks sections (``--sections a`` for the kernels alone);
``--chunk-log2`` and ``--reduce-chunk-log2`` set section (a)'s chunk sizes
(a GPU wants larger chunks than ``sweep run``'s defaults, up to 2^26), and
``--run-chunk-log2`` the ``--chunk`` of sections (b) and (c)'s runs. On a GPU
the same script runs unchanged: JAX's preallocation of device memory is off
(``XLA_PYTHON_CLIENT_PREALLOCATE``), so the ``sweep run`` processes it starts
find memory free, and "materialised" copies every column to the host.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# before JAX starts: this process and the sweep runs it starts share one GPU
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import numpy as np

from kernels.strategies import PAPER_STRATEGIES as STRATEGIES
from sweep.engine import backend
from sweep.engine.filters import known_front
from sweep.engine.index import MAX_CHUNK, decode_info
from sweep.engine.program import build_chunk_fn, device_inputs
from sweep.engine.runstate import REDUCE_CHUNK, ROWS_CHUNK
from sweep.inputs.configs import uses
from sweep.inputs.grid import load_spec, plan
from sweep.reduce.keep import Keep

ROOT = Path(__file__).resolve().parents[1]


def write_spec(
    folder: Path, name: str, strategies: list[str], n_bw: int, n_alpha: int, p_log2_from: int = 0
) -> Path:
    path = folder / f"{name}.toml"
    # p2 and S only where a strategy uses them: an axis no strategy of a spec uses is an error
    p2 = "p2 = [4]\n" if any(uses(s, "p2") for s in strategies) else ""
    S = "S = [8]\n" if any(uses(s, "S") for s in strategies) else ""
    path.write_text(
        f"""name = "{name}"
model = "resnet50"
machine = "abci"
strategies = {json.dumps(strategies)}
[axes]
p = {{ log2 = [{p_log2_from}, 12] }}
b = [8, 16, 32, 64, 128, 256]
{p2}{S}inter_bandwidth_Bps = {{ linspace = [12.5e9, 400e9, {n_bw}] }}
inter_alpha_s = {{ linspace = [1e-6, 50e-6, {n_alpha}] }}
"""
    )
    return path


#: Warm runs of each grid in sections (b) and (c), after the cold one; their median is given.
WARM_RUNS = 3
#: Sections (b) and (c) pass ``--chunk`` this (``--run-chunk-log2``; 0: ``sweep run``'s default).
RUN_CHUNK = 0
#: Section (a) prints what each compiled program is made of (``--census``).
CENSUS = False
#: Section (a) times calls queued back to back (``--queued``) rather than one at a time.
QUEUED = False


def median_rate(fn, calls: list[tuple], points: int, reps: int) -> float:
    """Configurations/s over several chunks: ``points`` per call, the median of ``reps`` runs of each;
    with :data:`QUEUED`, the median of ``reps`` runs of all the calls, each queued before the
    last finished (as a run queues chunks), four times over."""
    if QUEUED:
        jax.block_until_ready([fn(*args) for args in calls])
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready([fn(*args) for args in calls * 4])
            times.append(time.perf_counter() - t)
        return points * len(calls) * 4 / statistics.median(times)
    total = 0.0
    for args in calls:
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t)
        total += statistics.median(times)
    return points * len(calls) / total


def kernel_section(
    tmp: Path, chunk: int, reduce_chunk: int, reps: int
) -> list[tuple[str, float, float, float, float, float]]:
    """Each kernel at the chunk size a run gives it: ``chunk`` writing every row,
    ``reduce_chunk`` reducing (``sweep run``'s defaults, ROWS_CHUNK and REDUCE_CHUNK)."""
    from sweep.inputs.layers import to_arrays
    from tests.oracles import layerwise, reference

    # 3.2e6 points per job (64 x 640 x 13 x 6), more where three chunks of the larger size need
    # it (the H200 runs of 2026-12-04 asked for four: 841 latencies at 2^20, 3,361 at 2^22;
    # on 2 CPU cores 841 read half the top-1 rate of 640, other chunks being measured)
    n_alpha = max(640, -(-3 * max(chunk, reduce_chunk) // (64 * 13 * 6)))
    spec = write_spec(tmp, "kernel", list(STRATEGIES), 64, n_alpha)
    p = plan(load_spec(spec))
    rows = []
    totals = {"mat": 0.0, "fused": 0.0, "pareto": 0.0, "py": 0.0, "layers": 0.0}
    rng = random.Random(0)

    def calls(job, net, machine, values, size: int) -> tuple[list[tuple], int]:
        # four chunks spread over the job (its first one alone is all p = 1, where every
        # network setting ties: the hardest case for the Pareto reduction)
        last = max(job.size // size - 1, 0)  # the last full chunk
        n = min(size, job.size)
        starts = sorted({round(last * f) * size for f in (0, 1 / 3, 2 / 3, 1)})
        args = [
            (
                net,
                machine,
                values,
                decode_info(job, a, size),
                np.int32(n),
                known_front(None, np.float32),
            )
            for a in starts
        ]
        return args, n

    for job in p.jobs:
        net, machine, values = device_inputs(job, np.float32)
        # a job smaller than the chunk (serial) runs in one chunk of the next power of two
        small = min(reduce_chunk, 1 << (job.size - 1).bit_length())
        every, n_every = calls(job, net, machine, values, chunk)
        reducing, n_reducing = calls(job, net, machine, values, small)
        mat, _ = build_chunk_fn(job, chunk, Keep("all"), np.float32)
        fused, _ = build_chunk_fn(job, small, Keep("top", ("t_epoch_s",), 1), np.float32)
        front, _ = build_chunk_fn(job, small, Keep("pareto", ("t_epoch_s", "p")), np.float32)
        if CENSUS:
            for what, f, a in (
                ("all", mat, every[0]),
                ("top-1", fused, reducing[0]),
                ("pareto", front, reducing[0]),
            ):
                census(job.strategy, what, f, a)
        # every column to the host, as a sweep that writes every row reads them (on a CPU
        # np.asarray shares the buffers; on a GPU it copies them)
        r_mat = median_rate(lambda *a, f=mat: jax.tree.map(np.asarray, f(*a)), every, n_every, reps)
        r_fused = median_rate(lambda *a, f=fused: f(*a).count, reducing, n_reducing, reps)
        r_front = median_rate(lambda *a, f=front: f(*a).count, reducing, n_reducing, reps)
        ref = reference.prepare(job.bound.net, job.bound.profile.pytree())
        configs = [
            (rng.choice([1, 4, 16, 64, 256, 1024]), rng.choice([8, 32, 128]), 4, 8) for _ in range(2000)
        ]
        t = time.perf_counter()
        for cfg in configs:
            reference.evaluate(ref, job.strategy, *cfg)
        r_py = len(configs) / (time.perf_counter() - t)
        net = job.bound.net
        model = job.bound.model
        by_layer = layerwise.prepare(
            to_arrays(model),
            model.dataset_samples,
            job.bound.profile.pytree(),
            float(net.t_measured_s),
            float(net.ref_rate_flops),
        )
        t = time.perf_counter()
        for cfg in configs[:500]:
            layerwise.evaluate(by_layer, job.strategy, *cfg)
        r_layers = 500 / (time.perf_counter() - t)
        rows.append((job.strategy, r_mat, r_fused, r_front, r_py, r_layers))
        for key, r in (
            ("mat", r_mat),
            ("fused", r_fused),
            ("pareto", r_front),
            ("py", r_py),
            ("layers", r_layers),
        ):
            totals[key] += 1.0 / r
    # the same number of configurations through each of the eight kernels: rows/s overall
    n = len(p.jobs)
    mat, fused, front, py, layers = (n / totals[k] for k in ("mat", "fused", "pareto", "py", "layers"))
    rows.append(("all eight", mat, fused, front, py, layers))
    return rows


def census(strategy: str, what: str, fn, args: tuple) -> None:
    """Instruction counts of the compiled program (on a GPU, fusions are kernels launched)."""
    text = fn.lower(*args).compile().as_text()
    kinds = re.findall(r"= \S+ (fusion|conditional|while|custom-call|sort|scatter|copy)\(", text)
    counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    print(f"    census {strategy:<13} {what:<7} {len(text.splitlines()):>6} lines {counts}", flush=True)


def run_section(
    tmp: Path,
    n_bw: int,
    n_alpha: int,
    keep: str | None,
    p_log2_from: int = 0,
    strategies: tuple[str, ...] = tuple(STRATEGIES),
) -> tuple[int, int, float, float, float]:
    """``sweep run`` of a bench grid twice (see :func:`cold_warm`)."""
    name = f"e2e-{keep or 'all'}-p{p_log2_from}-{len(strategies)}-{n_alpha}".replace(":", "-").replace(
        ",", "-"
    )
    return cold_warm(tmp, name, write_spec(tmp, name, list(strategies), n_bw, n_alpha, p_log2_from), keep)


#: What ``sweep run`` prints last: rows, points and the run's wall time (after start-up).
SUMMARY = re.compile(r"([\d,]+) rows written to .* \(([\d,]+) points evaluated in ([\d.]+) s")


def cold_warm(
    tmp: Path, name: str, spec_path: Path, keep: str | None
) -> tuple[int, int, float, float, float]:
    """``sweep run`` of one grid, each time in a fresh process, as a user would:
    (points, rows, cold s, warm s, warm process s).

    Cold compiles every kernel (into a fresh persistent cache); warm is the
    same command again, which loads what the first run kept, :data:`WARM_RUNS`
    times: the medians are given. The times are the run's own, as ``sweep run``
    prints them (after Python's start-up and imports); the warm process's
    whole wall time comes last. A run in a process that had just run the grid
    cold was slower (the bench's tied grid 2.3-3.0 s against 1.7-2.4 s), and is
    not what a second ``sweep run`` is. One warm run alone moved by half
    between runs of the bench on a busy host (the tied grid 1.09-1.53 s).
    """
    command = [sys.executable, "-m", "sweep.cli", "run", str(spec_path), "-o", str(tmp / name), "--overwrite"]
    if keep:
        command += ["--keep", keep]
    if RUN_CHUNK:
        command += ["--chunk", str(RUN_CHUNK)]
    env = {**os.environ, "SWEEP_JAX_CACHE": str(tmp / f"jax-cache-{name}")}
    walls, processes, rows, points = [], [], 0, 0
    for _ in range(1 + WARM_RUNS):
        t = time.perf_counter()
        res = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        processes.append(time.perf_counter() - t)
        found = SUMMARY.search(res.stdout)
        if found is None:
            raise RuntimeError(f"no summary in the output of {' '.join(command)}:\n{res.stdout}{res.stderr}")
        rows, points = (int(x.replace(",", "")) for x in found.groups()[:2])
        walls.append(float(found.group(3)))
    return points, rows, walls[0], statistics.median(walls[1:]), statistics.median(processes[1:])


def rss_section(tmp: Path, sizes: list[int]) -> list[tuple[int, float, float]]:
    out = []
    for size in sizes:
        n_alpha = max(1, size // (13 * 6 * 100 * 8))
        spec = write_spec(tmp, f"rss{size}", list(STRATEGIES), 100, n_alpha)
        points = plan(load_spec(spec)).size
        code = (
            "import resource, sys;from sweep.cli.main import main;"
            f"sys.argv=['sweep','run',{str(spec)!r},'-o',{str(tmp / f'rss{size}')!r},'--overwrite',"
            "'--keep','pareto:t_epoch_s,p'];\ntry:\n main()\nexcept SystemExit:\n pass\n"
            # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child of this
            # (large) process would report this process's peak
            "hwm=[l for l in open('/proc/self/status') if l.startswith('VmHWM')] if sys.platform=='linux' else []\n"
            "print('RSS', int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        )
        t = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        rss_kb = int(res.stdout.strip().split("RSS")[-1])
        out.append((points, rss_kb / 1024, wall))
    return out


def startup_section(tmp: Path) -> list[float]:
    spec = write_spec(tmp, "startup", ["data"], 2, 1)
    cache = tmp / "jax-cache"
    walls = []
    for i in range(2):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "sweep.cli", "run", str(spec), "-o", str(tmp / f"start{i}")],
            check=True,
            capture_output=True,
            env={**os.environ, "SWEEP_JAX_CACHE": str(cache)},
        )
        walls.append(time.perf_counter() - t)
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller grids")
    ap.add_argument("--big", action="store_true", help="add the 1e9-point RSS run")
    ap.add_argument("--sections", default="abcde", help="the sections to run, of a, b (with c), d, e, t")
    ap.add_argument("--chunk-log2", type=int, help="section (a): points per chunk writing every row, log2")
    ap.add_argument("--reduce-chunk-log2", type=int, help="section (a): points per reducing chunk, log2")
    ap.add_argument("--queued", action="store_true", help="section (a): time calls queued back to back")
    ap.add_argument("--run-chunk-log2", type=int, help="sections (b), (c): sweep run --chunk, log2")
    ap.add_argument(
        "--census", action="store_true", help="section (a): count the operations of each compiled program"
    )
    args = ap.parse_args()
    global QUEUED, CENSUS, RUN_CHUNK
    QUEUED, CENSUS = args.queued, args.census
    RUN_CHUNK = 1 << args.run_chunk_log2 if args.run_chunk_log2 is not None else 0
    limit = MAX_CHUNK.bit_length() - 1
    for given in (args.chunk_log2, args.reduce_chunk_log2, args.run_chunk_log2):
        if given is not None and not 0 <= given <= limit:
            ap.error(f"chunk sizes are 2^0 to 2^{limit} (MAX_CHUNK), got 2^{given}")
    threads = backend.start()  # as sweep run sizes XLA's CPU pool (sweep.backend)
    print(
        f"device: {jax.devices()[0].platform} x{len(jax.devices())} ({jax.devices()[0].device_kind}),"
        f" {os.cpu_count()} CPUs, XLA CPU threads: {threads or 'all'} ({backend.THREADS_ENV} sets it),"
        f" JAX {jax.__version__}"
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        chunk = ROWS_CHUNK >> 2 if args.quick else ROWS_CHUNK
        reduce_chunk = REDUCE_CHUNK >> 2 if args.quick else REDUCE_CHUNK
        if args.chunk_log2 is not None:
            chunk = 1 << args.chunk_log2
        if args.reduce_chunk_log2 is not None:
            reduce_chunk = 1 << args.reduce_chunk_log2
        if "a" in args.sections:
            kernel_table(tmp, chunk, reduce_chunk)
        if "b" in args.sections or "c" in args.sections:
            run_table(tmp, args.quick, "b" in args.sections, "c" in args.sections)
        if "d" in args.sections:
            sizes = [10**6, 10**7] if args.quick else [10**6, 10**7, 10**8]
            if args.big:
                sizes.append(10**9)
            print("\n(d) peak RSS of --keep pareto runs (fresh process each)")
            for points, rss_mb, wall in rss_section(tmp, sizes):
                print(f"    {points:>14,} points  peak RSS {rss_mb:8.0f} MB  wall {wall:7.1f} s")
        if "t" in args.sections:
            transformer_table(tmp, chunk, reduce_chunk)
        if "e" in args.sections:
            first, second = startup_section(tmp)
            print(
                f"\n(e) tiny sweep run in a fresh process: first {first:.2f} s, second {second:.2f} s"
                " (persistent cache)"
            )
    print(f"\npeak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


#: The kernel benchmarks' grid (section (t), bench_moe's section (k)): a spec named ``name`` of
#: ``model`` on ``machine``, its configuration axes (``extra``: more, one line each), 64
#: bandwidths and ``n_alpha`` latencies (:func:`kernel_alphas`).
KERNEL_SPEC = """name = "{name}"
model = "{model}"
machine = "{machine}"
strategies = ["data", "data+tensor+pipeline"]
[axes]
p = {{ log2 = [0, 12] }}
b = [8, 16, 32, 64, 128, 256]
S = [1, 2, 4, 8]
tp = [1, 2, 4, 8]
pp = [1, 2, 4, 8]
{extra}recompute = ["none", "selective", "full"]
zero = [0, 1]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 400e9, 64] }}
inter_alpha_s = {{ linspace = [1e-6, 50e-6, {n_alpha}] }}
"""


def kernel_alphas(chunk: int, reduce_chunk: int) -> int:
    """Latencies of :data:`KERNEL_SPEC`'s grid: enough that each job spans three of the larger
    chunk (13 GPU counts x 6 b x 64 bandwidths a latency), at least 640."""
    return max(640, -(-3 * max(chunk, reduce_chunk) // (64 * 13 * 6)))


def job_timers(path: Path, chunk: int, reduce_chunk: int) -> dict[str, tuple[int, list]]:
    """Per job of spec ``path``, its points and its two compiled chunk programs (``chunk``
    returning every column to the host, ``reduce_chunk`` reduced to the top 1 on the device), each
    with four chunks spread over the job: ``(fn, calls, points per call)``, ready for
    :func:`median_rate`."""
    timers = {}
    for job in plan(load_spec(path)).jobs:
        net, machine, values = device_inputs(job, np.float32)
        out = []
        for size, keep in ((chunk, Keep("all")), (reduce_chunk, Keep("top", ("t_epoch_s",), 1))):
            n = min(size, job.size)
            last = max(job.size // size - 1, 0)
            starts = sorted({round(last * f) * size for f in (0, 1 / 3, 2 / 3, 1)})
            calls = [
                (net, machine, values, decode_info(job, a, size), np.int32(n), known_front(None, np.float32))
                for a in starts
            ]
            fn, _ = build_chunk_fn(job, size, keep, np.float32)
            if keep.kind == "all":
                out.append((lambda *a, f=fn: jax.tree.map(np.asarray, f(*a)), calls, n))
            else:
                out.append((lambda *a, f=fn: f(*a).count, calls, n))
        timers[job.strategy] = (job.size, out)
    return timers


def job_rates(path: Path, chunk: int, reduce_chunk: int, reps: int, label) -> dict[str, list[float]]:
    """Each job's (materialised, top-1) configurations/s on spec ``path`` (:func:`job_timers`), the
    median of ``reps`` runs of each chunk; a line per job, ``label(job strategy, rates)`` first."""
    rates = {}
    for strategy, (size, timers) in job_timers(path, chunk, reduce_chunk).items():
        out = [median_rate(fn, calls, n, reps) for fn, calls, n in timers]
        rates[strategy] = out
        print(f"{label(strategy, out)} {out[0]:>14,.0f} {out[1]:>14,.0f}  ({size:,} points)", flush=True)
    return rates


def transformer_table(tmp: Path, chunk: int, reduce_chunk: int, reps: int = 5) -> None:
    """Section (t): data+tensor+pipeline beside data on GPT-3 175B, configurations/s, in one run,
    on section (a)'s grid shape (64 bandwidths x 640 latencies inside the configuration axes)."""
    print(
        "\n(t) GPT-3 175B (963 layers) on a100-ib800, configurations/s;"
        f" chunk 2^{chunk.bit_length() - 1} materialised, 2^{reduce_chunk.bit_length() - 1} reducing"
    )
    print(f"{'strategy':<22} {'materialised':>14} {'top-1':>14}")
    path = tmp / "gpt-kernel.toml"
    path.write_text(
        KERNEL_SPEC.format(
            name="gpt-kernel",
            model="gpt3-175b",
            machine="a100-ib800",
            extra="",
            n_alpha=kernel_alphas(chunk, reduce_chunk),
        )
    )
    rates = job_rates(path, chunk, reduce_chunk, reps, lambda strategy, out: f"{strategy:<22}")
    mine, data = rates["data+tensor+pipeline"], rates["data"]
    print(f"{'ratio to data':<22} {mine[0] / data[0]:>14.2f} {mine[1] / data[1]:>14.2f}")


def kernel_table(tmp: Path, chunk: int, reduce_chunk: int) -> None:
    print(
        "\n(a) kernel throughput, ResNet-50 (174 layers) on abci, configurations/s;"
        f" chunk 2^{chunk.bit_length() - 1} materialised, 2^{reduce_chunk.bit_length() - 1} reducing"
    )
    print(
        f"{'strategy':<14} {'materialised':>14} {'top-1':>14} {'pareto':>14}"
        f" {'Python, sums':>14} {'ratio':>8} {'Python, layers':>14} {'ratio':>8}"
    )
    for name, r_mat, r_top, r_front, r_py, r_layers in kernel_section(tmp, chunk, reduce_chunk, 5):
        print(
            f"{name:<14} {r_mat:>14,.0f} {r_top:>14,.0f} {r_front:>14,.0f}"
            f" {r_py:>14,.0f} {r_top / r_py:>7,.0f}x {r_layers:>14,.0f} {r_top / r_layers:>7,.0f}x",
            flush=True,
        )


def run_table(tmp: Path, quick: bool, every_row: bool = True, reducing: bool = True) -> None:
    """Section (b), every row written, and section (c), ``--keep pareto`` runs."""
    n_alpha = 100 if quick else 1000
    print(
        "\n(b, c) sweep run, eight strategies, 100 bandwidths x",
        n_alpha,
        f"latencies; fresh processes, cold / warm cache (median of {WARM_RUNS}; warm process with start-up)",
    )
    no_serial = tuple(s for s in STRATEGIES if s != "serial")
    for keep, p_from, alphas, strategies, what in (
        (None, 0, n_alpha, tuple(STRATEGIES), "every row to Parquet"),
        ("pareto:t_epoch_s,p", 0, n_alpha, tuple(STRATEGIES), "--keep pareto:t_epoch_s,p"),
        ("pareto:t_epoch_s,p", 3, n_alpha, tuple(STRATEGIES), "--keep pareto:t_epoch_s,p, p >= 8"),
        # no ties on the front: p >= 8 and no serial (all p = 1), 4x the latencies
        ("pareto:t_epoch_s,p", 3, 4 * n_alpha, no_serial, "... p >= 8, no serial, 4x latencies"),
    ):
        if not (reducing if keep else every_row):
            continue
        size, rows, cold, warm, process = run_section(tmp, 100, alphas, keep, p_from, strategies)
        print(
            f"    {what:<36} {size:>13,} points {rows:>12,} rows  {cold:6.2f} s / {warm:6.2f} s"
            f" ({process:5.2f} s)  = {size / warm:>12,.0f} points/s, {rows / warm:>12,.0f} rows/s (warm)",
            flush=True,
        )
    if reducing and not quick:
        codesign = ROOT / "grids" / "sweeps" / "codesign-resnet50-large.toml"
        size, rows, cold, warm, process = cold_warm(tmp, "codesign", codesign, "pareto:t_epoch_s,p")
        what = "codesign-resnet50-large, --keep pareto"
        print(
            f"    {what:<36} {size:>13,} points {rows:>12,} rows  {cold:6.2f} s / {warm:6.2f} s"
            f" ({process:5.2f} s)  = {size / warm:>12,.0f} points/s (warm)",
            flush=True,
        )


if __name__ == "__main__":
    main()
