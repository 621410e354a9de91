"""``sweep estimate | plan | run | merge | models | machines``: configurations and sweeps on the command line.

Thin click layers over :mod:`sweep.api` (estimate, plan, run), :func:`sweep.reduce.merge.merge`
and the built-in model and machine lists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kernels.strategies.registry import REGISTRY
from sweep.cli.options import REPORT_PARAMS, configuration_options, flagged, handle_errors, parse_set


@click.command()
@click.option("--model", "model_spec", required=True, help="Built-in name, or a .toml/.net/.net_sc path.")
@click.option("--lc", type=click.Path(dir_okay=False), help="ParaDL .lc layer-config file for a .net model.")
@click.option("--machine", "machine_spec", required=True, help="Built-in name or a .toml path.")
@click.option(
    "--strategy",
    required=True,
    help=", ".join(REGISTRY) + ".",
)
@click.option("--p", "p", type=int, default=None, help="Total number of GPUs (serial: 1).")
@click.option(
    "--b", "b", type=int, default=None, help="Samples per data-parallel replica (or --global-batch)."
)
@click.option("--p2", "p2", type=int, default=None, help="GPUs per group of the hybrids [gpus_per_node].")
@click.option(
    "--S",
    "S",
    type=int,
    default=None,
    help="Micro-batches [p for pipeline; b / --micro-batch for data+tensor+pipeline].",
)
@configuration_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter.")
@click.option(
    "--tokens",
    type=float,
    default=None,
    help="Tokens a transformer trains on [its data set: 300e9 for a GPT name]; t_epoch_s is that run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def estimate(model_spec, lc, machine_spec, strategy, p, b, p2, S, sets, tokens, as_json, **settings) -> None:
    """Every output column for one configuration (docs/output-format.md#columns), in float64.

    The options after --S are the strategies' settings (the strategy registry, docs/model.md §2);
    one a strategy does not use draws a warning. A configuration that cannot run (tp not dividing
    the heads, tp x pp not dividing p, a global batch the replicas x micro-batch do not divide,
    fp8 on a GPU without an FP8 rate, --vp above 1 at --pp 1) is an error naming the rule.

    \b
    Example:
      sweep estimate --model resnet50 --machine abci --strategy data+filter \\
          --p 1024 --b 32 --set inter_bandwidth_Bps=25e9
      sweep estimate --model gpt3-175b --machine a100-ib800 --strategy data+tensor+pipeline \\
          --p 1024 --global-batch 1536 --tp 8 --pp 16 --micro-batch 1 --recompute full
    """
    from sweep import api

    row = api.estimate(
        model_spec,
        machine_spec,
        strategy,
        p=p,
        b=b,
        p2=p2,
        S=S,
        set=parse_set(sets),
        lc=lc,
        tokens=tokens,
        **settings,
    )
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
    from sweep import api
    from sweep.engine.runstate import describe_plan

    for line in describe_plan(api.plan(spec_path)):
        click.echo(flagged(line, ("keep", "only_feasible")))  # the options it names, as flags


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
@click.option(
    "--keep",
    "keep_text",
    help="In-stream reduction: pareto:COL,COL (one row per distinct optimum, with a 'tied' count; "
    "pareto:COL,COL:all keeps every tied row) or top:K:COL.",
)
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
@click.option(
    "--interval",
    type=float,
    metavar="LEVEL",
    help="Add t_epoch_s_lo and t_epoch_s_hi, the prediction interval of t_epoch_s at LEVEL (e.g. 0.8), "
    "to every written row; needs calibrated machines (docs/trust.md).",
)
@click.option("--yes", is_flag=True, help=f"Run grids over {10**12:.0e} points.")
@click.option(
    "--no-space-check",
    is_flag=True,
    help="Write every row even where the disk has less free space than sweep plan estimates.",
)
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
    interval,
    yes,
    no_space_check,
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
      sweep run my.toml --interval 0.8    # machines calibrated by sweep calibrate: t_epoch_s_lo, _hi
    """
    from sweep import api
    from sweep.engine.run import tty_progress
    from sweep.engine.runstate import Interrupted

    try:
        summary = api.run(
            spec_path, out, keep=keep_text, resume=resume, overwrite=overwrite, x64=x64,
            only_feasible=only_feasible, columns=columns, chunk=chunk, shard=shard_text,
            dask=dask_address, confirm=yes, progress=tty_progress(), interval=interval,
            space_check=not no_space_check,
        )  # fmt: skip
    except Interrupted as err:
        click.echo(f"\n{flagged(str(err), REPORT_PARAMS)}", err=True)
        sys.exit(130)
    if sys.stderr.isatty():
        click.echo("", err=True)
    for line in summary.lines(timings):
        click.echo(line)
    if interval is not None:
        click.echo(f"t_epoch_s_lo, t_epoch_s_hi: the {100 * interval:g} % prediction interval of t_epoch_s")


@click.command()
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
@handle_errors
def merge(folder) -> None:
    """Check that every shard of a --shard run finished and seal the dataset folder.

    Verifies the N shard manifests (all present, same run, complete, part
    files in place), reduces the shards' results for --keep runs into
    part-keep.parquet, and writes _manifest.parquet with complete = true.
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
    if value is None or value == "":
        return "-"
    if isinstance(value, (bool, str)):
        return str(value)
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
    from sweep.inputs.transformers import GPT3, load_gpt

    click.echo(
        f"{'name':<15} {'dataset':<12} {'samples':>13} {'layers':>6} {'weights':>15} {'GFLOP/sample':>12}  measured"
    )
    from sweep.inputs.presets import PRESETS, load_preset

    gpt3 = {name: (lambda n=name: load_gpt(n)) for name in GPT3}
    llms = {name: (lambda n=name: load_preset(n)) for name in PRESETS}
    for name, build in {**BUILTIN, **gpt3, **llms}.items():
        model = build()
        arrays = to_arrays(model)
        gflop = 3 * forward_flops(arrays.kind, arrays.x, arrays.w, arrays.y).sum() / 1e9
        info = model.describe()
        measured = ", ".join(f"{k} {v * 1e3:.6g} ms" for k, v in model.measured_s.items()) or "-"
        click.echo(
            f"{name:<15} {model.dataset:<12} {model.dataset_samples:>13,} {info['layers']:>6} "
            f"{info['weights']:>15,} {gflop:>12.2f}  {measured}"
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
