"""``sweep validate`` and ``sweep calibrate``: the model against measured runs (docs/trust.md).

Registered on :data:`sweep.cli.cli` when :mod:`sweep.cli` imports this module.
"""

from __future__ import annotations

from pathlib import Path

import click

from sweep.cli.options import enable_x64, handle_errors, parse_set, setup_jax
from sweep.errors import InputError
from sweep.output import store

_strict = click.option(
    "--strict", is_flag=True, help="Stop at the first bad row (default: skip bad rows, with a warning each)."
)
_sets = click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a machine parameter."
)


def _warn(text: str) -> None:
    click.echo(f"warning: {text}", err=True)


def _read(csv_path: str, machine_spec: str | None, sets: tuple[str, ...], strict: bool):
    from sweep.inputs.machines import load_machine
    from sweep.inputs.measured import read_measurements

    profile = None
    if machine_spec is not None:
        profile = load_machine(machine_spec).with_overrides(parse_set(sets))
    elif sets:
        raise InputError("--set needs --machine")
    meas = read_measurements(csv_path, machine=profile, strict=strict)
    for message in meas.messages():
        _warn(f"{message} (row skipped)")
    if meas.skipped:
        _warn(f"{len(meas.skipped)} bad rows skipped; --strict makes them errors")
    if profile is not None:
        names = {profile.name, profile.measured_key}
        other = sorted({r.machine for r in meas.runs if r.machine and r.machine not in names})
        if other:
            _warn(f"runs measured on {', '.join(other)} are predicted on '{profile.name}' (--machine)")
    return meas, profile


def _row_lines(meas, pred) -> list[str]:
    from sweep.trust.validation import symmetric_accuracy

    lines = [
        f"{'line':>5} {'model':<14} {'strategy':<13} {'p':>5} {'b':>5} {'p2':>3} {'S':>5} "
        f"{'measured_s':>11} {'predicted_s':>11} {'ratio':>7} {'accuracy':>8}  limit"
    ]
    for run, t_pred, limit in zip(meas.runs, pred.t_iter_s, pred.limit, strict=True):
        acc = float(symmetric_accuracy(t_pred, run.iter_time_s))
        lines.append(
            f"{run.line:>5} {run.model:<14} {run.strategy:<13} {run.p:>5} {run.b:>5} {run.p2:>3} {run.S:>5} "
            f"{run.iter_time_s:>11.5g} {t_pred:>11.5g} {t_pred / run.iter_time_s:>7.3f} {acc:>8.3f}  "
            f"{limit or '-'}"
        )
    return lines


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
    profile, or on --machine for all. In float64.

    \b
    Example:
      sweep validate grids/measurements/abci_chainer_public.csv
      sweep validate runs.csv --machine fitted.toml -o checked.parquet --plot checked.png
    """
    enable_x64()
    setup_jax()
    from sweep.trust.validation import plot as make_plot
    from sweep.trust.validation import predict, summarize, summary_lines, write_table

    if out is not None and Path(out).suffix not in (".csv", ".parquet"):
        raise InputError("-o must end in .csv or .parquet", out)
    if plot_path is not None and Path(plot_path).suffix not in (".png", ".pdf", ".svg"):
        raise InputError("--plot must end in .png, .pdf or .svg", plot_path)
    meas, _ = _read(csv_path, machine_spec, sets, strict)
    pred = predict(meas)
    if not summary_only:
        for line in _row_lines(meas, pred):
            click.echo(line)
        click.echo("")
    for line in summary_lines(summarize(meas, pred.t_iter_s)):
        click.echo(line)
    infeasible = sum(1 for x in pred.limit if x)
    if infeasible:
        click.echo(
            f"({infeasible} of {len(meas.runs)} runs are infeasible in the model, e.g. over its "
            "conservative memory estimate; their times are predicted all the same)"
        )
    if out is not None:
        click.echo(f"wrote {write_table(meas, pred.t_iter_s, out)}")
    if plot_path is not None:
        click.echo(f"wrote {make_plot(meas, pred.t_iter_s, plot_path)}")


def _base_comments(profile) -> list[str]:
    """The leading ``#`` lines of the base machine file, if it can be read."""
    import grids
    from sweep.inputs.machines import builtin_names

    path = grids.MACHINES / f"{profile.source}.toml" if profile.source in builtin_names() else None
    if path is None:
        path = Path(profile.source)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line.lstrip("#").strip())
    return out


@click.command()
@click.argument("csv_path", metavar="MEASURED.csv", type=click.Path(dir_okay=False))
@click.option("--machine", "machine_spec", required=True, help="Machine to calibrate (built-in or .toml).")
@click.option(
    "--fit",
    "fit_items",
    multiple=True,
    metavar="PARAMS",
    help="NAME[=LO:HI],...: machine parameters (inter_bandwidth_Bps, efficiency, ...) and "
    "overheads.<strategy>.<compute|allreduce|allgather|halo|p2p|comm|all> (factors) and "
    "overheads.<strategy>.<per_iter_s|per_sample_s> (additive seconds). "
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
@_sets
@_strict
@handle_errors
def calibrate(csv_path, machine_spec, fit_items, out, name, cv, transfer, sets, strict) -> None:
    """Fit machine parameters and per-strategy overheads (factors and additive seconds) to measured
    iteration times.

    Minimises the mean squared log error of iteration time by L-BFGS, with
    gradients from jax.grad through the sweep kernels, in float64. Prints
    the fitted values, the accuracy on the runs fitted (train) and under
    cross-validation, and writes a machine file that estimate, run and
    validate accept.

    \b
    Example:
      sweep calibrate grids/measurements/abci_chainer_public.csv --machine abci -o abci-fit.toml
      sweep calibrate runs.csv --machine abci --cv model \\
          --fit inter_bandwidth_Bps=1e9:1e11,overheads.data+filter.all -o fitted.toml
    """
    enable_x64()
    setup_jax()
    import numpy as np

    from sweep.inputs.machines import to_toml
    from sweep.trust.calibrate import calibrate as run_calibration
    from sweep.trust.calibrate import parse_fit, transferred
    from sweep.trust.validation import summarize, summary_lines

    cv_value: str | int = cv.strip()
    if cv_value != "model":
        try:
            cv_value = int(cv_value)
        except ValueError:
            raise InputError(f"--cv must be a number of folds, 'model' or 0, got '{cv}'") from None
        if cv_value < 0 or cv_value == 1:
            raise InputError(f"--cv needs 0 (none) or at least 2 folds, got {cv_value}")
    if out is not None and Path(out).suffix != ".toml":
        raise InputError("-o must end in .toml", out)
    if out is not None and not Path(out).parent.is_dir():
        raise InputError("no such folder", str(Path(out).parent))
    meas, profile = _read(csv_path, machine_spec, sets, strict)
    params = parse_fit(fit_items, profile) if fit_items else None
    cal = run_calibration(meas, profile, params, cv_value)
    problem, result = cal.problem, cal.fit

    click.echo(f"calibrating '{profile.name}' on {len(meas.runs)} runs of {csv_path}")
    click.echo(f"{'parameter':<36} {'start':>11} {'fitted':>11} {'bounds':>21}")
    values = problem.values(result.logv)
    for i, p in enumerate(problem.params):
        if not result.free[i]:
            continue
        value = values[p.name]
        edge = "  at a bound" if result.at_bound[i] else ""
        click.echo(f"{p.name:<36} {p.start:>11.4g} {value:>11.4g} {f'[{p.lo:.3g}, {p.hi:.3g}]':>21}{edge}")
    if cal.selection is not None:
        by_reason: dict[str, list[str]] = {}
        for pname, reason in cal.selection.reasons.items():
            by_reason.setdefault(reason, []).append(pname)
        for reason, names in by_reason.items():
            click.echo(f"not fitted, {reason}: {', '.join(names)}")
    fitted = cal.profile(name, transfer)
    if fitted.overheads:
        click.echo("overheads per term (factors; per_iter_s and per_sample_s in seconds):")
        for strategy, terms in fitted.overheads.items():
            cells = "  ".join(f"{t} {v:.4g}" for t, v in terms.items())
            click.echo(f"  {strategy:<13} {cells}")
    state = "converged" if result.converged else "stopped at the iteration limit"
    click.echo(f"mean squared log error {result.loss:.4g} after {result.iterations} L-BFGS steps ({state})")
    click.echo("")
    uncal = summarize(meas, cal.uncalibrated_s)
    extra = {"calibrated": [s.acc_mean for s in summarize(meas, cal.train_s)]}
    cv_label = {"model": "cv-model"}.get(cal.cv, f"cv-{cal.cv}fold")
    if cal.cv_s is not None:
        extra[cv_label] = [s.acc_mean for s in summarize(meas, cal.cv_s)]
    click.echo("symmetric accuracy (acc columns: uncalibrated; then calibrated on every run, and held out)")
    for line in summary_lines(uncal, extra):
        click.echo(line)
    train_acc = extra["calibrated"][-1]
    text = f"train accuracy {train_acc:.4f}"
    if cal.cv_s is not None:
        held = int(np.isfinite(cal.cv_s).sum())
        what = "leave-one-model-out" if cal.cv == "model" else f"{cal.cv}-fold"
        text += f"; {what} cross-validated accuracy {extra[cv_label][-1]:.4f} ({held} runs held out)"
        if held < len(meas.runs):
            text += f"; {len(meas.runs) - held} runs could not be predicted (too few training runs)"
    click.echo(text + " (mean symmetric accuracy)")
    moved = transferred(profile, cal.fitted) if transfer else {}
    for pure, hybrid in moved.items():
        click.echo(f"note: {pure} takes the overheads fitted for {hybrid} (--no-transfer to leave it out)")
    if out is None:
        click.echo("(no -o: no machine file written)")
        return
    comments = [
        f"{fitted.name}: '{profile.name}' calibrated by `sweep calibrate` on {len(meas.runs)} measured runs",
        f"of {csv_path}; fitted: {', '.join(cal.fitted)}.",
        f"Train accuracy (mean symmetric, fitted runs): {train_acc:.4f}.",
    ]
    if cal.cv_s is not None:
        comments.append(f"Cross-validated accuracy ({cal.cv} folds, held out): {extra[cv_label][-1]:.4f}.")
    for pure, hybrid in moved.items():
        comments.append(f"[overheads.{pure}] are those fitted for {hybrid} (not measured).")
    base_notes = _base_comments(profile)
    if base_notes:
        comments += ["", f"Base profile {profile.source}:", *base_notes]
    comments.append("")
    path = Path(out)
    with store.written(path) as tmp:
        tmp.write_text(to_toml(fitted, tuple(comments)))
    click.echo(f"wrote {path} (machine '{fitted.name}')")


COMMANDS = (validate, calibrate)
