"""``sweep estimate | plan | run | merge | models | machines``: configurations and sweeps on the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sweep.cli.options import enable_x64, handle_errors, parse_set, setup_jax
from sweep.errors import InputError


@click.command()
@click.option("--model", "model_spec", required=True, help="Built-in name, or a .toml/.net/.net_sc path.")
@click.option("--lc", type=click.Path(dir_okay=False), help="ParaDL .lc layer-config file for a .net model.")
@click.option("--machine", "machine_spec", required=True, help="Built-in name or a .toml path.")
@click.option(
    "--strategy",
    required=True,
    help="serial, data, spatial, pipeline, filter, channel, data+filter, data+spatial.",
)
@click.option("--p", "p", type=int, required=True, help="Total number of GPUs.")
@click.option("--b", "b", type=int, required=True, help="Samples per data-parallel replica.")
@click.option("--p2", "p2", type=int, default=None, help="GPUs per group of the hybrids [gpus_per_node].")
@click.option("--S", "S", type=int, default=None, help="Pipeline micro-batches [p].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def estimate(model_spec, lc, machine_spec, strategy, p, b, p2, S, sets, as_json) -> None:
    """Every output column for one configuration (docs/output-format.md#columns), in float64.

    \b
    Example:
      sweep estimate --model resnet50 --machine abci --strategy data+filter \\
          --p 1024 --b 32 --set inter_bandwidth_Bps=25e9
    """
    enable_x64()
    setup_jax()
    from sweep.engine.evaluate import estimate as run_estimate
    from sweep.inputs.configs import Bound, check_strategy
    from sweep.inputs.machines import load_machine
    from sweep.inputs.models import load_model

    check_strategy(strategy)
    profile = load_machine(machine_spec).with_overrides(parse_set(sets))
    bound = Bound.of(load_model(model_spec, lc=lc), profile)
    row = run_estimate(bound, strategy, p, b, p2, S)
    if as_json:
        click.echo(json.dumps(row))
        return
    width = max(map(len, row))
    for key, value in row.items():
        click.echo(f"{key:<{width}}  {_fmt(value)}")


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@handle_errors
def plan(spec_path) -> None:
    """Grid size per strategy, estimated run time and output size, before anything runs.

    \b
    Example:
      sweep plan grids/sweeps/paper-resnet50-vgg16.toml
    """
    from sweep.inputs.grid import load_spec
    from sweep.inputs.grid import plan as make_plan

    p = make_plan(load_spec(spec_path))
    click.echo(f"sweep '{p.spec.name}': {len(p.jobs)} jobs, {p.size:,} points")
    for job in p.jobs:
        axes = " x ".join(f"{k}[{len(v)}]" for k, v in job.axes.items())
        click.echo(
            f"  {job.bound.model.name:<16} {job.bound.profile.name:<10} {job.strategy:<13} {job.size:>16,}  {axes}"
        )
    # Measured on the 2-core machine (docs/performance.md), warm: 7.6-10 M rows/s writing every row,
    # 36-157 M configurations/s under --keep pareto; cold, 0.3-3 s of compiling per job. 2.4
    # and 3.6 bytes a row in the shipped co-design outputs (zstd, byte-stream-split floats),
    # so 8 leaves room for grids that compress less.
    rate, keep_rate, row_bytes = 8e6, 5e7, 8
    click.echo(
        f"estimate: ~{_seconds(p.size / rate)} writing every row ({rate:,.0f} rows/s, "
        f"~{p.size * row_bytes / 1e9:,.2f} GB of Parquet); ~{_seconds(p.size / keep_rate)} with --keep "
        f"({keep_rate:,.0f} configurations/s); less with --only-feasible"
    )
    click.echo(
        f"a first run of the spec also compiles {len(p.jobs)} kernel(s), 0.3-3 s each on 2 cores;"
        " later runs load them from the cache"
    )


def _seconds(s: float) -> str:
    return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("-o", "--out", type=click.Path(file_okay=False), help="Output folder [outputs/<spec name>].")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in the same folder.")
@click.option(
    "--overwrite", is_flag=True, help="Replace an existing sweep (with --shard: that shard) in the folder."
)
@click.option("--x64", is_flag=True, help="Compute and write in float64 (default float32).")
@click.option("--only-feasible", is_flag=True, help="Write only feasible rows.")
@click.option("--columns", help="Comma-separated columns to write (default all).")
@click.option("--keep", "keep_text", help="In-stream reduction: pareto:COL,COL or top:K:COL.")
@click.option(
    "--chunk",
    type=int,
    help="Points per device chunk [default: 2^20 with --keep (2^24 on a GPU), else 2^18; with --resume, "
    "the run's own; at most 2^26].",
)
@click.option(
    "--shard",
    "shard_text",
    metavar="K/N",
    help="Run only the K-th (0-based) of N equal parts of the grid into the folder; resumes itself "
    "when rerun. Seal the N shards with 'sweep merge DIR'.",
)
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    help="Evaluate and write chunks on Dask workers: a scheduler address (tcp://host:8786) or "
    "local:N for a local cluster of N worker processes. Needs paradl-sweep[dask].",
)
@click.option("--yes", is_flag=True, help=f"Run grids over {10**12:.0e} points.")
@click.option("--timings", is_flag=True, help="Print where the run's time went (main thread, other threads).")
@handle_errors
def run(
    spec_path,
    out,
    resume,
    overwrite,
    x64,
    only_feasible,
    columns,
    keep_text,
    chunk,
    shard_text,
    dask_address,
    yes,
    timings,
) -> None:
    """Run a sweep and stream its rows to a Parquet dataset folder.

    Each chunk is spread over every local device (several GPUs, or CPU
    devices forced with XLA_FLAGS=--xla_force_host_platform_device_count=N).

    \b
    Example:
      sweep run grids/sweeps/paper-resnet50-vgg16.toml -o outputs/paper
      sweep run grids/sweeps/codesign-resnet50.toml --keep pareto:t_epoch_s,p
      sweep run my.toml -o out/my --shard $SLURM_ARRAY_TASK_ID/16   # then: sweep merge out/my
      sweep run my.toml -o out/my --dask local:4                    # or --dask tcp://host:8786
    """
    import time

    if x64:
        enable_x64()
    setup_jax()
    from sweep.engine import index
    from sweep.engine.run import run_sweep, tty_progress
    from sweep.engine.runstate import Interrupted, RunOptions, parse_shard
    from sweep.inputs.grid import CONFIRM_POINTS, load_spec
    from sweep.inputs.grid import plan as make_plan
    from sweep.reduce.keep import parse_keep

    if resume and overwrite:
        raise InputError("give --resume (continue the folder's run) or --overwrite (start over), not both")
    if chunk is not None and not 1 <= chunk <= index.MAX_CHUNK:
        raise InputError(f"--chunk must be in 1..{index.MAX_CHUNK}, got {chunk}")
    shard = parse_shard(shard_text) if shard_text is not None else None
    if dask_address is not None and not dask_address.strip():
        raise InputError("--dask needs a scheduler address or local:N")
    p = make_plan(load_spec(spec_path))
    if p.size > CONFIRM_POINTS and not yes:
        raise InputError(f"{p.size:.3g} points is over {CONFIRM_POINTS:.0e}: pass --yes to run it")
    keep = parse_keep(keep_text, index.numeric_columns(p.jobs[0]))
    folder = Path(out) if out else Path("outputs") / p.spec.name
    cols = None
    if columns is not None:
        cols = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not cols:
            raise InputError(f"--columns names no column, got '{columns}'")
    opts = RunOptions(
        out=folder,
        chunk=chunk or 0,
        x64=x64,
        keep=keep,
        only_feasible=only_feasible,
        columns=cols,
        resume=resume,
        overwrite=overwrite,
        shard=shard,
        dask=dask_address,
    )
    started = time.perf_counter()
    try:
        summary = run_sweep(p, opts, tty_progress())
    except Interrupted as err:
        click.echo(f"\n{err}", err=True)
        sys.exit(130)
    if sys.stderr.isatty():
        click.echo("", err=True)
    wall = time.perf_counter() - started
    what = f"shard {shard}: " if shard else ""
    kept = "kept (this shard's front or top-k) in" if shard and keep.reduces else "written to"
    click.echo(
        f"{what}{summary.rows:,} rows {kept} {summary.folder} ({summary.points:,} points evaluated "
        f"in {wall:.2f} s, {summary.points / wall if wall else 0:,.0f} points/s; "
        f"{summary.points_per_s:,.0f} points/s after start-up; on {summary.devices})"
    )
    if shard:
        click.echo(f"when all {shard.n} shards are done: sweep merge {summary.folder}")
    if timings:
        said = summary.timings.describe() if summary.timings else "none (a Dask run, or nothing left to run)"
        click.echo(f"timings: {said}")


@click.command()
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
@handle_errors
def merge(folder) -> None:
    """Check that every shard of a --shard run finished and seal the dataset folder.

    Verifies the N shard manifests (all present, same run, complete, part
    files in place), reduces the shards' results for --keep runs into
    part-keep.parquet, and writes _manifest.json with complete = true.
    Missing or unfinished shards are named in a one-line error (exit 2).

    \b
    Example:
      sweep merge outputs/codesign-resnet50
    """
    from sweep.reduce.merge import merge as merge_shards

    summary = merge_shards(Path(folder))
    what = "rows" if summary.keep == "all" else f"rows ({summary.keep})"
    click.echo(f"{summary.shards} shard(s) complete: {summary.rows:,} {what} in {summary.folder}")


def _fmt(value) -> str:
    if isinstance(value, (bool, str)):
        return str(value) if value != "" else "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.6g}"


@click.command()
@handle_errors
def models() -> None:
    """List the built-in models.

    \b
    Example:
      sweep models
    """
    from kernels.network import forward_flops
    from sweep.inputs.architectures import BUILTIN
    from sweep.inputs.layers import to_arrays

    click.echo(
        f"{'name':<15} {'dataset':<10} {'samples':>10} {'layers':>6} {'weights':>12} {'GFLOP/sample':>12}  measured"
    )
    for name, build in BUILTIN.items():
        model = build()
        arrays = to_arrays(model)
        gflop = 3 * forward_flops(arrays.kind, arrays.x, arrays.w, arrays.y).sum() / 1e9
        info = model.describe()
        measured = ", ".join(f"{k} {v * 1e3:.6g} ms" for k, v in model.measured_s.items()) or "-"
        click.echo(
            f"{name:<15} {model.dataset:<10} {model.dataset_samples:>10,} {info['layers']:>6} "
            f"{info['weights']:>12,} {gflop:>12.2f}  {measured}"
        )


@click.command()
@handle_errors
def machines() -> None:
    """List the built-in machine profiles.

    \b
    Example:
      sweep machines
    """
    from sweep.inputs.machines import builtin_names, load_machine

    for name in builtin_names():
        profile = load_machine(name)
        click.echo(f"{name:<12} {profile.description}")


COMMANDS = (estimate, plan, run, merge, models, machines)
