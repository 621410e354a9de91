"""Mixtures of experts beside dense transformers: the speed figures of docs/performance.md's
"Mixtures of experts" section.

    python -m benchmarks.bench_moe              # all three sections, a few minutes on 2 cores
    python -m benchmarks.bench_moe --sections c # the 671B estimate alone

(m) ``sweep run`` end to end, every row written to Parquet: Qwen3-235B-A22B's tp x pp x ep x
    micro-batch grid over five GPU counts (2,560 splits) x 391 inter-node bandwidths
    (1,000,960 points) against GPT-3 175B's grid of the same size (no ep: 320 splits x 3,128
    bandwidths), both on dgx-h100. Each run is a fresh process with a persistent compilation
    cache warmed by one run of each first; then the two alternate, ``--runs`` times each, and
    the medians of configurations/s (the run's own time, as ``sweep run`` prints it, after the
    spec and the model's tables are built) and their ratio are printed, with the median wall
    time of the whole process.
(k) the ``data`` kernel beside ``data+tensor+pipeline`` on Qwen3-235B-A22B, with the new axes
    (ep, cp) in the grid, and the same on GPT-3 175B (cp, no ep), configurations/s in one
    process, materialised (every column to the host) and top-1 (reduced on the device), at
    ``sweep run``'s chunk sizes, and the ratios: each model's data+tensor+pipeline over its data,
    and the MoE's rates over the dense model's.
(c) ``sweep estimate`` of DeepSeek-V3 (671B) in a fresh process: wall time, the median of
    three after one run that fills the persistent compilation cache, beside a process that
    only imports the CLI and starts JAX (the start-up part of it), and one run with an empty
    cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax

from benchmarks.bench import KERNEL_SPEC, SUMMARY, job_timers, kernel_alphas, median_rate
from sweep.engine.runstate import REDUCE_CHUNK, ROWS_CHUNK

MOE, DENSE, MACHINE = "qwen3-235b-a22b", "gpt3-175b", "dgx-h100"

RUN_SPEC = """name = "{name}"
model = "{model}"
machine = "{machine}"
strategies = ["data+tensor+pipeline"]
[axes]
p = [256, 512, 1024, 2048, 4096]
global_batch = [2048]
tp = [1, 2, 4, 8]
pp = [1, 2, 4, 8]
micro_batch = [1, 2, 4, 8]
{ep}inter_bandwidth_Bps = {{ linspace = [5e9, 400e9, {n_bw}] }}
"""

ESTIMATE = [
    "estimate", "--model", "deepseek-v3", "--machine", "dgx-h100", "--strategy", "data+tensor+pipeline",
    "--p", "1024", "--global-batch", "8192", "--tp", "2", "--pp", "8", "--ep", "64", "--vp", "4",
    "--sp", "1", "--precision", "fp8", "--recompute", "full", "--zero", "1",
]  # fmt: skip


def sweep_run(spec: Path, out: Path, cache: Path) -> tuple[int, float, float]:
    """One ``sweep run`` in a fresh process: (points, the run's own seconds, process seconds)."""
    command = [sys.executable, "-m", "sweep.cli", "run", str(spec), "-o", str(out), "--overwrite"]
    t = time.perf_counter()
    res = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "SWEEP_JAX_CACHE": str(cache)}
    )
    wall = time.perf_counter() - t
    found = SUMMARY.search(res.stdout)
    if found is None:
        raise RuntimeError(f"no summary in the output of {' '.join(command)}:\n{res.stdout}{res.stderr}")
    return int(found.group(2).replace(",", "")), float(found.group(3)), wall


def run_section(tmp: Path, runs: int) -> None:
    specs = {}
    for label, model, ep, n_bw in (
        ("MoE", MOE, "ep = [1, 2, 4, 8, 16, 32, 64, 128]\n", 391),
        ("dense", DENSE, "", 3128),
    ):
        path = tmp / f"{label}.toml"
        path.write_text(
            RUN_SPEC.format(name=f"bench-{label}", model=model, machine=MACHINE, ep=ep, n_bw=n_bw)
        )
        specs[label] = (model, path)
    print(f"\n(m) sweep run, every row written, fresh processes (median of {runs}, alternating, warm cache)")
    cache = tmp / "jax-cache"
    rates: dict[str, list[float]] = {k: [] for k in specs}
    walls: dict[str, list[float]] = {k: [] for k in specs}
    points = {}
    for label, (_, path) in specs.items():
        points[label], _, _ = sweep_run(path, tmp / label, cache)  # fills the compilation cache
    for _ in range(runs):
        for label, (_, path) in specs.items():
            n, own, wall = sweep_run(path, tmp / label, cache)
            rates[label].append(n / own)
            walls[label].append(wall)
    print(f"{'grid':<28} {'points':>10} {'configs/s':>12} {'process s':>10}")
    for label, (model, _) in specs.items():
        rate, wall = statistics.median(rates[label]), statistics.median(walls[label])
        print(f"{label + ' ' + model:<28} {points[label]:>10,} {rate:>12,.0f} {wall:>10.1f}")
    ratio = statistics.median(rates["MoE"]) / statistics.median(rates["dense"])
    print(f"{'ratio MoE / dense':<28} {'':>10} {ratio:>12.2f}")


def kernel_timers(tmp: Path, model: str, ep: str) -> dict[str, tuple[int, list]]:
    """Each strategy's compiled chunk programs on ``model``'s kernel grid (bench.job_timers)."""
    path = tmp / f"kernel-{model}.toml"
    n_alpha = kernel_alphas(ROWS_CHUNK, REDUCE_CHUNK)
    spec = dict(name="moe-kernel", model=model, machine=MACHINE, extra=ep + "cp = [1, 2]\n", n_alpha=n_alpha)
    path.write_text(KERNEL_SPEC.format(**spec))
    return job_timers(path, ROWS_CHUNK, REDUCE_CHUNK)


def kernel_section(tmp: Path, reps: int) -> None:
    """Section (k): both models' kernels compiled first, then timed in ``reps`` rounds that
    alternate the models (the order swapped every round), so that the machine's load falls on
    both alike; each rate the median over the rounds."""
    print(
        f"\n(k) kernels on {MACHINE}, configurations/s;"
        f" chunk 2^{ROWS_CHUNK.bit_length() - 1} materialised, 2^{REDUCE_CHUNK.bit_length() - 1} reducing;"
        f" the models alternated, {reps} rounds"
    )
    print(f"{'model':<16} {'strategy':<22} {'materialised':>14} {'top-1':>14}")
    timers = {MOE: kernel_timers(tmp, MOE, "ep = [1, 2, 4, 8]\n"), DENSE: kernel_timers(tmp, DENSE, "")}
    runs: dict[tuple[str, str], list[list[float]]] = {}
    for r in range(reps):
        for model in (MOE, DENSE) if r % 2 == 0 else (DENSE, MOE):
            for strategy, (_, jobs) in timers[model].items():
                rates = [median_rate(fn, calls, n, 1) for fn, calls, n in jobs]
                runs.setdefault((model, strategy), []).append(rates)
    rate = {k: [statistics.median(r[i] for r in v) for i in (0, 1)] for k, v in runs.items()}
    for (model, strategy), (a, b) in rate.items():
        print(f"{model:<16} {strategy:<22} {a:>14,.0f} {b:>14,.0f}")
    dtp, data = "data+tensor+pipeline", "data"
    for label, (a, b) in (
        (f"{MOE}: data+tensor+pipeline / data", (rate[MOE, dtp], rate[MOE, data])),
        (f"{DENSE}: data+tensor+pipeline / data", (rate[DENSE, dtp], rate[DENSE, data])),
        ("data+tensor+pipeline: MoE / dense", (rate[MOE, dtp], rate[DENSE, dtp])),
        ("data: MoE / dense", (rate[MOE, data], rate[DENSE, data])),
    ):
        print(f"{label:<39} {a[0] / b[0]:>14.2f} {a[1] / b[1]:>14.2f}")


def timed(command: list[str], cache: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "SWEEP_JAX_CACHE": str(cache)}
    )
    return time.perf_counter() - t


def estimate_section(tmp: Path) -> None:
    estimate = [sys.executable, "-m", "sweep.cli", *ESTIMATE]
    start = [
        sys.executable,
        "-c",
        "import sweep.cli.main, jax.numpy as jnp; jnp.zeros(1).block_until_ready()",
    ]
    cold = timed(estimate, tmp / "empty-cache")
    cache = tmp / "estimate-cache"
    timed(estimate, cache)
    warm = statistics.median(timed(estimate, cache) for _ in range(3))
    imports = statistics.median(timed(start, cache) for _ in range(3))
    print("\n(c) sweep estimate, deepseek-v3 (671B) on dgx-h100, ep 64, in a fresh process")
    print(f"  warm compilation cache (median of 3) {warm:6.2f} s")
    print(f"  of which imports and JAX start-up    {imports:6.2f} s")
    print(f"  empty compilation cache              {cold:6.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default="mkc", help="the sections to run, of m, k, c")
    ap.add_argument("--runs", type=int, default=3, help="section (m): runs of each grid (median)")
    ap.add_argument("--reps", type=int, default=3, help="section (k): timed calls of each chunk (median)")
    args = ap.parse_args()
    print(f"JAX {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-moe-") as name:
        tmp = Path(name)
        if "m" in args.sections:
            run_section(tmp, args.runs)
        if "k" in args.sections:
            kernel_section(tmp, args.reps)
        if "c" in args.sections:
            estimate_section(tmp)


if __name__ == "__main__":
    main()
