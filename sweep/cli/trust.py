"""``sweep validate`` and ``sweep calibrate``: the model against measured runs (docs/trust.md).

Thin layers over :func:`sweep.api.validate` and :func:`sweep.api.calibrate`; the reports
are built by :mod:`sweep.trust.report`.
"""

from __future__ import annotations

import click

from sweep.cli.options import REPORT_PARAMS, flagged, handle_errors, parse_set

_strict = click.option(
    "--strict", is_flag=True, help="Stop at the first bad row (default: skip bad rows, with a warning each)."
)
_sets = click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter."
)


def _warn(warnings: list[str]) -> None:
    for text in warnings:
        click.echo(f"warning: {flagged(text, REPORT_PARAMS)}", err=True)


@click.command()
@click.argument("csv_path", metavar="MEASURED.csv", type=click.Path(dir_okay=False))
@click.option("--machine", "machine_spec", help="Predict every row on this machine (built-in or .toml).")
@_sets
@_strict
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="Write the table to FILE.csv or .parquet.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), help="Predicted vs measured, to a .png."
)
@click.option("--summary", "summary_only", is_flag=True, help="Print only the per-(model, strategy) summary.")
@handle_errors
def validate(csv_path, machine_spec, sets, strict, out, plot_path, summary_only) -> None:
    """Predicted against measured iteration time for every row of a measured-run CSV.

    Prints each row's ratio predicted/measured (the paper's projection
    accuracy) and symmetric accuracy min/max, then their mean per (model,
    strategy) and overall. Each row is predicted on its `machine` column's
    profile, or on --machine for all. In float64. A setting left empty (not
    published) is predicted with its fastest feasible legal value, shown in
    the table (docs/trust.md).

    \b
    Example:
      sweep validate grids/measurements/abci_chainer_public.csv
      sweep validate runs.csv --machine fitted.toml -o checked.parquet --plot checked.png
    """
    from sweep import api

    result = api.validate(csv_path, machine_spec, set=parse_set(sets), strict=strict, out=out, plot=plot_path)
    _warn(result.warnings)
    for line in result.lines(rows=not summary_only):
        click.echo(flagged(line, REPORT_PARAMS))
    for path in result.written:
        click.echo(f"wrote {path}")


@click.command()
@click.argument("csv_path", metavar="MEASURED.csv", type=click.Path(dir_okay=False))
@click.option("--machine", "machine_spec", required=True, help="Machine to calibrate (built-in or .toml).")
@click.option(
    "--fit",
    "fit_items",
    multiple=True,
    metavar="PARAMS",
    help="NAME[=LO:HI],...: machine parameters (inter_bandwidth_Bps, efficiency, ...), "
    "overheads.STRATEGY.TERM factors (TERM: compute, allreduce, allgather, halo, p2p, comm or all) "
    "and overheads.STRATEGY.per_iter_s or .per_sample_s (additive seconds). "
    "Default: the overheads these runs can identify.",
)
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="Write the calibrated machine .toml.")
@click.option("--name", help="Name of the calibrated machine [<machine>-calibrated].")
@click.option(
    "--cv",
    default="5",
    show_default=True,
    help="Cross-validation: a number of folds, 'model' (leave one model out), or 0 for none.",
)
@click.option(
    "--transfer/--no-transfer",
    default=True,
    show_default=True,
    help="Give spatial and filter the overheads fitted for data+spatial and data+filter.",
)
@click.option(
    "--loss",
    type=click.Choice(["cauchy", "huber", "l2"]),
    default="cauchy",
    show_default=True,
    help="Robust loss on each run's log(predicted/measured).",
)
@click.option(
    "--loss-scale", type=float, default=0.2, show_default=True, help="Scale of the loss, log units."
)
@click.option(
    "--prior-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply every prior width (smaller: stay nearer the profile).",
)
@click.option(
    "--quality-weight",
    "quality",
    multiple=True,
    metavar="QUALITY=W",
    help="Weight of runs by their quality column [fair=0.1, good=1; others 1].",
)
@_sets
@_strict
@handle_errors
def calibrate(
    csv_path, machine_spec, fit_items, out, name, cv, transfer, loss, loss_scale, prior_scale, quality, sets,
    strict,
) -> None:  # fmt: skip
    """Fit machine parameters, per-model compute scales and per-strategy overheads to measured
    iteration times.

    A MAP fit: a robust loss on each run's log(predicted/measured), weighted
    by its quality and spread, plus a prior on every parameter around the
    profile's value; L-BFGS with gradients from jax.grad through the sweep
    kernels, in float64. Without --fit, candidate structures (shared physics,
    then per-strategy overheads) are compared leaving one model out and the
    best one never worse than uncalibrated is fitted. Prints the fitted
    values and how many prior widths they moved, the accuracy on the runs
    fitted (train) and under cross-validation, the held-out intervals'
    coverage and the strategy rankings, and writes a machine file that
    estimate, run and validate accept (with what its intervals need).

    \b
    Example:
      sweep calibrate grids/measurements/abci_chainer_public.csv --machine abci -o abci-fit.toml
      sweep calibrate runs.csv --machine abci --cv model \\
          --fit inter_bandwidth_Bps=1e9:1e11,overheads.data+filter.all -o fitted.toml
    """
    from sweep import api

    result = api.calibrate(
        csv_path, machine_spec, fit=fit_items or None, cv=cv, name=name, transfer=transfer,
        set=parse_set(sets), strict=strict, out=out, loss=loss, loss_scale=loss_scale,
        prior_scale=prior_scale, quality=quality or None,
    )  # fmt: skip
    _warn(result.warnings)
    for line in result.lines():
        click.echo(flagged(line, REPORT_PARAMS))
    if result.written is None:
        click.echo("(no -o: no machine file written)")
    else:
        click.echo(f"wrote {result.written} (machine '{result.profile.name}')")


COMMANDS = (validate, calibrate)
