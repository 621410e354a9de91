"""``sweep pareto | top | best | codesign | sensitivity | plot``: answers from sweeps, on the command line.

Thin click layers over :mod:`sweep.api` (codesign, sensitivity), :mod:`sweep.answers.query`
(the queries, which need no JAX) and :mod:`sweep.answers.plot`. Results go to the
terminal as a table (the query's statistics on stderr), or to a file with ``-o``
(``.parquet``, ``.csv``, ``.json``, ``.jsonl``).
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click

from sweep.cli.options import (
    configuration_list_options,
    configuration_options,
    handle_errors,
    parse_ints,
    parse_list,
    parse_set,
)
from sweep.errors import InputError

SOURCE = click.argument("source", metavar="DIR|FILE", type=click.Path())


def _arrow_errors(fn):
    """Arrow failures while reading data (a corrupt or foreign file) also end in one line, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import pyarrow as pa

        try:
            return fn(*args, **kwargs)
        except pa.ArrowException as err:
            text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InputError(f"reading the data failed: {text}") from None

    return wrapper


def _where_option(fn):
    return click.option(
        "--where", "where", metavar="EXPR", help="Filter rows, e.g. \"p >= 256 and strategy == 'data'\"."
    )(fn)


def _output_options(fn):
    fn = click.option("-o", "--out", metavar="FILE", help="Write .parquet, .csv, .json or .jsonl instead.")(
        fn
    )
    fn = click.option("--columns", metavar="COLS", help="Comma-separated output columns [all].")(fn)
    fn = click.option("-n", "--limit", type=int, help="Show at most N rows on the terminal.")(fn)
    return fn


def _emit(table, out, limit, extra=(), stats=None, chosen=False) -> None:
    """Write or print a query's rows: every column of ``table`` when ``--columns`` chose them
    (``chosen``), else a readable subset for the terminal."""
    from sweep.answers.query import display_columns, format_table, write_table

    if out:
        path = write_table(table, out)
        click.echo(f"{table.num_rows:,} rows written to {path}")
    elif table.num_rows:
        click.echo(format_table(table, None if chosen else display_columns(table, extra), limit))
    if stats is not None:
        sys.stdout.flush()
        click.echo(f"{table.num_rows:,} rows; {stats.describe()}", err=True)


def _names(values) -> list[str]:
    from sweep.answers.query import split_names

    return split_names(values)


# ----------------------------------------------------------------------------- queries


@click.command()
@SOURCE
@click.option(
    "--min", "mins", multiple=True, metavar="COL", help="Objective to minimise (repeat, or COL,COL)."
)
@click.option("--max", "maxs", multiple=True, metavar="COL", help="Objective to maximise.")
@_where_option
@click.option("--per", metavar="COLS", help="One front per group of these columns, e.g. strategy.")
@click.option("--all", "include_infeasible", is_flag=True, help="Include infeasible rows.")
@click.option("--all-ties", is_flag=True, help="Keep every row tied on the front, not one per optimum.")
@_output_options
@handle_errors
@_arrow_errors
def pareto(source, mins, maxs, where, per, include_infeasible, all_ties, out, columns, limit) -> None:
    """Non-dominated feasible rows (Pareto front), streamed over any size of data.

    A row is dominated when another is at least as good in every objective and
    better in one; rows with a NaN objective never enter the front. Rows tied in
    every objective give one row, the earliest (least grid index), with a
    'tied' column counting them (--all-ties keeps them all). Exact: a running
    front per row group, merged (O(n log n) for two objectives).

    \b
    Example:
      sweep pareto outputs/paper-resnet50-vgg16 --min t_epoch_s --min gpu_hours
      sweep pareto outputs/codesign --min t_epoch_s --max p --per strategy \\
          --where "inter_bandwidth_Bps == 25e9" -o front.parquet
    """
    from sweep.answers.query import ScanStats
    from sweep.answers.query import pareto as run

    stats = ScanStats()
    mins_l, maxs_l = _names(mins), _names(maxs)
    table = run(
        source, mins_l, maxs_l, where=where, per=_names(per), columns=_names(columns) or None,
        feasible_only=not include_infeasible, stats=stats, all=all_ties,
    )  # fmt: skip
    _emit(table, out, limit, [*mins_l, *maxs_l], stats, chosen=bool(columns))


@click.command()
@SOURCE
@click.option("--by", required=True, metavar="COL", help="Rank by this column (smallest first).")
@click.option("-k", "k", type=int, default=10, show_default=True, help="Rows per group.")
@click.option("--desc", is_flag=True, help="Largest first.")
@click.option("--per", metavar="COLS", help="Top k per group of these columns.")
@_where_option
@click.option("--all", "include_infeasible", is_flag=True, help="Include infeasible rows.")
@_output_options
@handle_errors
@_arrow_errors
def top(source, by, k, desc, per, where, include_infeasible, out, columns, limit) -> None:
    """The k feasible rows with the smallest (or largest) value of a column, per group.

    Ties go to the row that comes first in the data; NaN counts as +inf.

    \b
    Example:
      sweep top outputs/paper-resnet50-vgg16 --by t_epoch_s -k 5 --per strategy --where "p == 1024"
    """
    from sweep.answers.query import ScanStats
    from sweep.answers.query import top as run

    stats = ScanStats()
    table = run(
        source, by, k, descending=desc, where=where, per=_names(per), columns=_names(columns) or None,
        feasible_only=not include_infeasible, stats=stats,
    )  # fmt: skip
    _emit(table, out, limit, [by], stats, chosen=bool(columns))


@click.command()
@SOURCE
@click.option("--per", default="p", show_default=True, metavar="COLS", help="One winner per group.")
@click.option("--by", default="t_epoch_s", show_default=True, metavar="COL", help="Column to minimise.")
@click.option("--rank", is_flag=True, help="Rank every strategy's best within each group.")
@_where_option
@_output_options
@handle_errors
@_arrow_errors
def best(source, per, by, rank, where, out, columns, limit) -> None:
    """The fastest feasible configuration per group (per GPU count by default).

    With --rank, the best configuration of every strategy in each group,
    ranked 1, 2, ... as in the paper's ranking tables.

    \b
    Example:
      sweep best outputs/paper-resnet50-vgg16 --per p --where "model == 'resnet50'"
      sweep best outputs/paper-resnet50-vgg16 --per model,p --rank
    """
    from sweep.answers.query import ScanStats
    from sweep.answers.query import best as run

    stats = ScanStats()
    table = run(
        source, per=_names(per), by=by, rank=rank, where=where, columns=_names(columns) or None, stats=stats
    )
    _emit(table, out, limit, [by], stats, chosen=bool(columns))


# ----------------------------------------------------------------------------- co-design


@click.command()
@click.option("--model", "model_spec", required=True, help="Built-in name, or a .toml/.net/.net_sc path.")
@click.option("--lc", type=click.Path(dir_okay=False), help="ParaDL .lc file for a .net model.")
@click.option("--machine", "machine_spec", required=True, help="Built-in name or a .toml path.")
@click.option(
    "--param",
    required=True,
    help="Machine parameter to solve for, e.g. inter_bandwidth_Bps; a whole number (gpus_per_node) on its whole numbers.",
)
@click.option("--strategy", "strategies", multiple=True, required=True, help="Strategy (repeat, or S,S).")
@click.option("--beats", metavar="STRATEGY", help="Predicate: the strategies beat this one.")
@click.option(
    "--target",
    metavar="EXPR",
    help="Predicate on the best configuration: e.g. 't_epoch_s <= 10', 'mfu >= 0.4' (the greatest), "
    "or 'feasible' (one fits).",
)
@click.option("--metric", default="t_epoch_s", show_default=True, help="Column compared by --beats.")
@click.option("--p", "p_text", required=True, metavar="N[,N]", help="GPU count(s); one answer each.")
@click.option("--b", "b_text", metavar="LIST", help="Samples per replica to choose from, e.g. 16,32,64.")
@click.option(
    "--global-batch", "--B", "B_text", metavar="LIST", help="Or: fixed global batch(es); b = B / replicas."
)
@click.option("--p2", "p2_text", metavar="LIST", help="Group sizes of the hybrids [gpus_per_node].")
@click.option(
    "--S",
    "S_text",
    metavar="LIST",
    help="Micro-batches [p for pipeline, every divisor of b for data+tensor+pipeline].",
)
@click.option(
    "--micro-batch",
    "mb_text",
    metavar="LIST",
    help="Or: micro-batch sizes, S = b / size [every divisor of b].",
)
@configuration_list_options
@click.option("--range", "range_text", metavar="LO:HI", help="Search range [value/64 : value*64].")
@click.option("--grid", type=int, default=4096, show_default=True, help="Dense grid size before bisection.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per answer.")
@handle_errors
def codesign(
    model_spec, lc, machine_spec, param, strategies, beats, target, metric, p_text, b_text, B_text,
    p2_text, S_text, mb_text, range_text, grid, sets, as_json, **own_text,
) -> None:  # fmt: skip
    """Smallest (or largest) value of a machine parameter at which a target holds.

    The predicate is evaluated by the cost kernels on a dense grid of the
    parameter (log-spaced) and every crossing refined by bisection to float64
    precision. It is --beats (the best configuration of the strategies is
    faster than the rival's best) and/or --target (the best configuration
    meets e.g. t_epoch_s <= 10), over the given b (or global batch B), p2, S.
    data+tensor+pipeline's software is re-optimised at every value: the best
    feasible split over --tp, --pp, --micro-batch, --recompute, --zero (every
    legal value by default) and --vp, --sp, --precision (their defaults unless
    listed) is chosen there, and the answer shows it on each side of the
    threshold.

    \b
    Example:
      sweep codesign --model resnet50 --machine abci --param inter_bandwidth_Bps \\
          --strategy data+filter --beats data --p 1024 --B 8192
      sweep codesign --model resnet50 --machine abci --param gpu_mem_bytes \\
          --strategy data,data+filter --p 1024 --b 16,32,64,128 --target "t_epoch_s <= 6"
      sweep codesign --model gpt3-175b --machine a100-ib800 --strategy data+tensor+pipeline \\
          --p 1024 --global-batch 1536 --param inter_bandwidth_Bps --target "t_iter_s <= 27"
    """
    from sweep import api
    from sweep.answers.codesign import format_answer

    own: dict[str, Any] = {name: parse_list(name, text) for name, text in own_text.items()}
    answers = api.codesign(
        model_spec, machine_spec, _names(strategies), param, p=parse_ints(p_text, "--p") or (),
        b=parse_ints(b_text, "--b"), B=parse_ints(B_text, "--global-batch"), p2=parse_ints(p2_text, "--p2"),
        S=parse_ints(S_text, "--S"), micro_batch=parse_ints(mb_text, "--micro-batch"), **own, target=target,
        beats=beats, metric=metric, range=_range(range_text), grid=grid, set=parse_set(sets), lc=lc,
    )  # fmt: skip
    for i, a in enumerate(answers):
        if as_json:
            click.echo(json.dumps(a.to_json()))
        else:
            click.echo(("\n" if i else "") + format_answer(a))


def _range(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    a, sep, b = text.partition(":")
    try:
        lo, hi = float(a), float(b)
    except ValueError:
        raise InputError(f"--range takes LO:HI numbers, got '{text}'") from None
    if not sep:
        raise InputError(f"--range takes LO:HI, got '{text}'")
    return lo, hi


# ----------------------------------------------------------------------------- sensitivity


@click.command()
@click.argument("source", metavar="[DIR|FILE]", required=False, type=click.Path())
@click.option("--model", "model_spec", help="Built-in name, or a .toml/.net/.net_sc path.")
@click.option("--lc", type=click.Path(dir_okay=False), help="ParaDL .lc file for a .net model.")
@click.option("--machine", "machine_spec", help="Built-in name or a .toml path.")
@click.option("--strategy", help="Strategy of the configuration.")
@click.option("--p", "p", type=int, help="Total number of GPUs.")
@click.option("--b", "b", type=int, help="Samples per data-parallel replica.")
@click.option("--p2", "p2", type=int, help="GPUs per group of the hybrids [gpus_per_node].")
@click.option(
    "--S", "S", type=int, help="Micro-batches [p for pipeline; b / --micro-batch for data+tensor+pipeline]."
)
@configuration_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter.")
@click.option("--of", "metric", default="t_epoch_s", show_default=True, help="Column to differentiate.")
@_where_option
@click.option("--max-rows", type=int, default=10_000, show_default=True, help="Most rows taken from DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per row).")
@_output_options
@handle_errors
@_arrow_errors
def sensitivity(
    source, model_spec, lc, machine_spec, strategy, p, b, p2, S, sets, metric, where, max_rows, as_json, out,
    columns, limit, global_batch, micro_batch, **own,
) -> None:  # fmt: skip
    """Elasticities d ln t_epoch / d ln X for every machine parameter X, by jax.grad.

    For one configuration (--model, --machine, --strategy, --p, --b), or for
    every row of a small sweep result (DIR, optionally --where). +1% of X
    changes t_epoch_s by about e %; the knob with the largest |e| pays off
    most. Integer settings (gpus_per_node, nics_per_node, gpu_sms, the GEMM
    tiles), switches and choices have no derivative and are left out. The
    options after --S are the strategy's own settings (the strategy registry).

    \b
    Example:
      sweep sensitivity --model resnet50 --machine abci --strategy data+filter --p 1024 --b 32
      sweep sensitivity --model gpt3-175b --machine a100-ib800 --strategy data+tensor+pipeline \\
          --p 1024 --global-batch 1536 --micro-batch 1 --tp 8 --pp 16 --recompute selective
      sweep sensitivity outputs/paper-resnet50-vgg16 --where "p == 1024 and b == 32" -o e.csv
    """
    from sweep import api
    from sweep.answers.sensitivity import format_sensitivity

    table = api.sensitivity(
        source, model=model_spec, machine=machine_spec, strategy=strategy, p=p, b=b, p2=p2, S=S,
        global_batch=global_batch, micro_batch=micro_batch, set=parse_set(sets), lc=lc, of=metric, where=where,
        max_rows=max_rows, **own,
    )  # fmt: skip
    if source is None:
        if out:
            _emit(table, out, limit)
        else:
            click.echo(
                json.dumps(_clean(table.to_pylist()[0])) if as_json else format_sensitivity(table, metric)
            )
        return
    if columns:
        table = table.select(_names(columns))
    if out:
        _emit(table, out, limit)
    elif as_json:
        for row in table.to_pylist():
            click.echo(json.dumps(_clean(row)))
        return
    elif table.num_rows:
        from sweep.answers.sensitivity import display_columns

        click.echo(_format(table, display_columns(table, metric), limit))
    if table.num_rows:
        from sweep.answers.sensitivity import lever_over

        sys.stdout.flush()
        click.echo(f"{table.num_rows:,} rows; {lever_over(table)}", err=True)


def _format(table, columns, limit) -> str:
    from sweep.answers.query import format_table

    return format_table(table, columns, limit)


def _clean(row: dict) -> dict:
    import math

    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


# ----------------------------------------------------------------------------- plots


@click.group()
def plot() -> None:
    """Figures from a sweep (PNG, SVG or PDF by the -o suffix; needs matplotlib).

    \b
    Example:
      sweep plot scaling outputs/paper-resnet50-vgg16 --where "model == 'resnet50'" -o scaling.png
      sweep plot regime outputs/codesign-resnet50-1024 --x p --y inter_bandwidth_Bps -o regime.svg
    """


def _plot_out(fn):
    return click.option("-o", "--out", required=True, metavar="FILE", help="Image file: .png, .svg or .pdf.")(
        fn
    )


@plot.command("scaling")
@SOURCE
@_plot_out
@click.option("--x", "x", default="p", show_default=True, help="Column on the x axis.")
@click.option("--metric", default="t_epoch_s", show_default=True, help="Column on the y axis (best per x).")
@_where_option
@click.option("--vline", type=float, help="Mark this x value (e.g. a co-design threshold).")
@click.option("--linear-x", is_flag=True, help="Linear x axis.")
@click.option("--linear-y", is_flag=True, help="Linear y axis.")
@handle_errors
@_arrow_errors
def plot_scaling(source, out, x, metric, where, vline, linear_x, linear_y) -> None:
    """Best feasible t_epoch_s of each strategy against p (or another column), log axes.

    \b
    Example:
      sweep plot scaling outputs/paper-resnet50-vgg16 --where "model == 'resnet50'" -o scaling.png
      sweep plot scaling outputs/codesign-resnet50-1024 --x inter_bandwidth_Bps \\
          --where "p == 1024 and global_batch == 8192" --vline 1.8e10 --linear-y -o crossover.png
    """
    from sweep.answers import plot as plots

    path = plots.scaling(
        source, out, x=x, metric=metric, where=where, vline=vline, logx=not linear_x, logy=not linear_y
    )
    click.echo(f"wrote {path}")


@plot.command("breakdown")
@SOURCE
@_plot_out
@click.option("--x", "x", default="p", show_default=True, help="Column on the x axis.")
@click.option("--by", default="t_epoch_s", show_default=True, help="Pick each bar's configuration by this.")
@_where_option
@handle_errors
@_arrow_errors
def plot_breakdown(source, out, x, by, where) -> None:
    """Stacked compute / allreduce / allgather / halo / p2p per strategy and p (paper Figure 2).

    \b
    Example:
      sweep plot breakdown outputs/paper-resnet50-vgg16 --where "model == 'resnet50' and b == 32" -o fig2.png
    """
    from sweep.answers import plot as plots

    click.echo(f"wrote {plots.breakdown(source, out, where=where, x=x, by=by)}")


@plot.command("pareto")
@SOURCE
@_plot_out
@click.option("--min", "mins", multiple=True, metavar="COL", help="Objective to minimise [t_epoch_s, p].")
@click.option("--max", "maxs", multiple=True, metavar="COL", help="Objective to maximise.")
@_where_option
@click.option("--linear", is_flag=True, help="Linear axes.")
@handle_errors
@_arrow_errors
def plot_pareto(source, out, mins, maxs, where, linear) -> None:
    """The Pareto front of two objectives over a sample of the feasible points.

    \b
    Example:
      sweep plot pareto outputs/paper-resnet50-vgg16 --min t_epoch_s --min gpu_hours -o front.png
    """
    from sweep.answers import plot as plots

    mins_l, maxs_l = _names(mins), _names(maxs)
    if not mins_l and not maxs_l:
        mins_l = ["t_epoch_s", "p"]
    path = plots.pareto_front(
        source, out, minimize=mins_l, maximize=maxs_l, where=where, logx=not linear, logy=not linear
    )
    click.echo(f"wrote {path}")


@plot.command("regime")
@SOURCE
@_plot_out
@click.option("--x", "x", default="p", show_default=True, help="First swept axis.")
@click.option("--y", "y", default="inter_bandwidth_Bps", show_default=True, help="Second swept axis.")
@click.option("--metric", default="t_epoch_s", show_default=True, help="Which strategy is best by this.")
@_where_option
@handle_errors
@_arrow_errors
def plot_regime(source, out, x, y, metric, where) -> None:
    """Which strategy is fastest over two swept axes (e.g. p x inter-node bandwidth).

    \b
    Example:
      sweep plot regime outputs/codesign-resnet50-1024 --x p --y inter_bandwidth_Bps \\
          --where "global_batch == 8192" -o regime.png
    """
    from sweep.answers import plot as plots

    click.echo(f"wrote {plots.regime(source, out, x=x, y=y, metric=metric, where=where)}")


COMMANDS = (pareto, top, best, codesign, sensitivity, plot)
