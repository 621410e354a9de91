"""The model against measured runs, as data and as the text ``sweep validate`` and ``sweep
calibrate`` print: what :func:`sweep.validate` and :func:`sweep.calibrate` return.

:func:`read_runs` reads a measured-run CSV and collects its warnings (rows
skipped, runs predicted on another machine) instead of printing them;
:class:`Validation` and :class:`Calibrated` hold a result with its report
(``lines()``) and, for a calibration, the machine file (``toml()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sweep.errors import InputError
from sweep.inputs.machine_toml import to_toml
from sweep.inputs.machines import MachineProfile, load_machine
from sweep.inputs.measured import Measurements, read_measurements
from sweep.output import store
from sweep.trust.calibrate import Calibration, transferred
from sweep.trust.rankings import ranking_lines, rankings
from sweep.trust.unpublished import chosen
from sweep.trust.validation import Predictions, Summary, summarize, summary_lines, symmetric_accuracy


def read_runs(
    path: str | Path,
    machine: str | Path | MachineProfile | None = None,
    sets: Mapping[str, float | str] | None = None,
    strict: bool = False,
) -> tuple[Measurements, MachineProfile | None, list[str]]:
    """The runs of a measured-run CSV, the machine they are all predicted on (None: each run's
    own), and the warnings a reader should see (bad rows skipped, runs of another machine).
    Settings a run does not publish (empty cells) take their fastest feasible legal value
    (:func:`sweep.trust.unpublished.fill`)."""
    profile = None
    if machine is not None:
        base = machine if isinstance(machine, MachineProfile) else load_machine(machine)
        profile = base.with_overrides(dict(sets or {}))
    elif sets:
        raise InputError("set needs machine", param=("set", "machine"))
    meas = read_measurements(path, machine=profile, strict=strict)
    if any(run.unpublished for run in meas.runs):
        from sweep.engine import backend
        from sweep.trust.unpublished import fill

        with backend.computation(x64=True):
            meas = fill(meas, strict)
    warnings = [f"{message} (row skipped)" for message in meas.messages()]
    if meas.skipped:
        warnings.append(f"{len(meas.skipped)} bad rows skipped; strict=True makes them errors")
    if profile is not None:
        names = {profile.name, profile.measured_key}
        other = sorted({r.machine for r in meas.runs if r.machine and r.machine not in names})
        if other:
            warnings.append(
                f"runs measured on {', '.join(other)} are predicted on '{profile.name}' (machine)"
            )
    return meas, profile, warnings


@dataclass
class Validation:
    """Predicted against measured iteration time of every run (``sweep validate``)."""

    measurements: Measurements
    predictions: Predictions
    #: Per (model, strategy), then ``all``.
    summaries: list[Summary]
    warnings: list[str] = field(default_factory=list)
    #: Files written (the table, the plot), in that order.
    written: list[Path] = field(default_factory=list)
    #: On a calibrated machine: each run's 80 % interval (lo, hi), seconds.
    interval: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def coverage(self) -> float | None:
        """The fraction of runs inside their interval (None without intervals)."""
        if self.interval is None:
            return None
        t = np.array([r.iter_time_s for r in self.measurements.runs])
        return float(((self.interval[0] <= t) & (t <= self.interval[1])).mean())

    def lines(self, rows: bool = True) -> list[str]:
        """The report: with ``rows``, one line per run and the strategy rankings; the summary
        table; the intervals' coverage (on a calibrated machine)."""
        out = []
        if rows:
            out += [*self.row_lines(), ""]
            out += [*ranking_lines(rankings(self.measurements, self.predictions.t_iter_s)), ""]
        out += summary_lines(self.summaries)
        if self.coverage is not None:
            out.append(
                f"80% intervals cover {self.coverage:.1%} of these runs (held out if the calibration "
                "did not see them)"
            )
        infeasible = sum(1 for x in self.predictions.limit_reason if x)
        if infeasible:
            out.append(
                f"({infeasible} of {len(self.measurements.runs)} runs are infeasible in the model, e.g. over "
                "its conservative memory estimate; their times are predicted all the same)"
            )
        return out

    def row_lines(self) -> list[str]:
        """A header, then per run: measured and predicted time, ratio and symmetric accuracy."""
        head = "   80% interval, s  " if self.interval is not None else ""
        runs = self.measurements.runs
        m = max([14, *(len(r.model) for r in runs)])
        s = max([13, *(len(r.strategy) for r in runs)])
        taken = [chosen(r) for r in runs]
        tail = "  chosen (not published)" if any(taken) else ""
        lines = [
            f"{'line':>5} {'model':<{m}} {'strategy':<{s}} {'p':>5} {'b':>5} {'p2':>3} {'S':>5} "
            f"{'measured_s':>11} {'predicted_s':>11} {head}{'ratio':>7} {'accuracy':>8}  limit_reason{tail}"
        ]
        pred = self.predictions
        width = max(len("limit_reason"), *(len(x or "-") for x in pred.limit_reason))
        for i, (run, t_pred, limit) in enumerate(zip(runs, pred.t_iter_s, pred.limit_reason, strict=True)):
            acc = float(symmetric_accuracy(t_pred, run.iter_time_s))
            iv = f" [{self.interval[0][i]:>8.4g}, {self.interval[1][i]:>8.4g}]" if self.interval else ""
            end = f"{limit or '-':<{width}}  {taken[i]}" if tail else f"{limit or '-'}"
            lines.append(
                f"{run.line:>5} {run.model:<{m}} {run.strategy:<{s}} {run.p:>5} {run.b:>5} {run.p2:>3} "
                f"{run.S:>5} {run.iter_time_s:>11.5g} {t_pred:>11.5g}{iv} {t_pred / run.iter_time_s:>7.3f} "
                f"{acc:>8.3f}  {end.rstrip()}"
            )
        return lines


@dataclass
class Calibrated:
    """A calibration (``sweep calibrate``) with what its report and machine file need."""

    calibration: Calibration
    measurements: Measurements
    #: The profile calibrated (with any ``--set`` overrides).
    base: MachineProfile
    #: The measured-run file, as named.
    source: str
    name: str | None = None
    transfer: bool = True
    warnings: list[str] = field(default_factory=list)
    #: The machine file written, if any.
    written: Path | None = None

    @property
    def profile(self) -> MachineProfile:
        """The calibrated machine profile (what the machine file holds)."""
        return self.calibration.profile(self.name, self.transfer)

    @property
    def moved(self) -> dict[str, str]:
        """``pure -> hybrid``: pure strategies given a hybrid's fitted overheads."""
        return transferred(self.base, self.calibration.fitted) if self.transfer else {}

    def accuracies(self) -> dict[str, list[float]]:
        """Mean symmetric accuracy per (model, strategy) then ``all``: calibrated on every run,
        and held out (``cv-...``) when cross-validated."""
        cal, meas = self.calibration, self.measurements
        out = {"calibrated": [s.acc_mean for s in summarize(meas, cal.train_s)]}
        if cal.cv_s is not None:
            out[self.cv_label] = [s.acc_mean for s in summarize(meas, cal.cv_s)]
        return out

    @property
    def cv_label(self) -> str:
        return {"model": "cv-model"}.get(self.calibration.cv, f"cv-{self.calibration.cv}fold")

    def lines(self) -> list[str]:
        """The report: the structure chosen, fitted values and how far they moved from their
        priors, overheads, accuracy before and after, held-out intervals and rankings."""
        cal, meas = self.calibration, self.measurements
        out = [f"calibrating '{self.base.name}' on {len(meas.runs)} runs of {self.source}"]
        out += self.structure_lines()
        out += self.parameter_lines()
        fitted = self.profile
        if fitted.compute_scale:
            scales = "  ".join(f"{m} {v:.4g}" for m, v in fitted.compute_scale.items())
            out.append(f"compute scale per model: {scales}")
        if fitted.overheads:
            out.append("overheads per term (factors; per_iter_s and per_sample_s in seconds):")
            for strategy, terms in fitted.overheads.items():
                out.append(f"  {strategy:<13} " + "  ".join(f"{t} {v:.4g}" for t, v in terms.items()))
        result = cal.fit
        state = "converged" if result.converged else "stopped at the iteration limit"
        settings = cal.problem.settings
        out.append(
            f"negative log posterior {result.loss:.4g} after {result.iterations} L-BFGS steps ({state}); "
            f"{settings.loss} loss, scale {settings.scale:g}"
        )
        out.append("")
        out.append(
            "symmetric accuracy (acc columns: uncalibrated; then calibrated on every run, and held out)"
        )
        out += summary_lines(summarize(meas, cal.uncalibrated_s), self.accuracies())
        out.append(self.accuracy_sentence())
        if cal.cv_intervals is not None:
            iv = cal.cv_intervals
            out.append(
                f"held-out {iv.level:.0%} intervals cover {iv.coverage:.1%} of the runs "
                f"({int(iv.covered.sum())} of {int(np.isfinite(iv.lo_s).sum())})"
            )
        if cal.cv_s is not None:
            out += ["", *ranking_lines(rankings(meas, cal.cv_s))]
        out += [
            f"note: {pure} takes the overheads fitted for {hybrid} (transfer=False leaves it out)"
            for pure, hybrid in self.moved.items()
        ]
        return out

    def structure_lines(self) -> list[str]:
        """The candidate structures' leave-one-model-out accuracy and flags, and the one chosen."""
        cal = self.calibration
        if cal.candidates is None:
            return [f"structure: the parameters named (fit), priors x{cal.problem.settings.prior_scale:g}"]
        out = ["candidate structures, leave one model out (mean symmetric accuracy, held out):"]
        for c in cal.candidates:
            mark = "  <- chosen" if c is cal.chosen else ""
            worse = f"  worse than uncalibrated on {len(c.flagged)} groups" if c.flagged else ""
            out.append(f"  {c.structure.label:<40} {c.accuracy:.4f}{worse}{mark}")
        for model, strategy, a, b in cal.chosen.flagged if cal.chosen else []:
            out.append(f"  finding: {model} {strategy} held out {a:.3f} < uncalibrated {b:.3f}")
        return out

    def parameter_lines(self) -> list[str]:
        """Fitted values, prior centre and width, how many widths moved, bounds reached."""
        cal = self.calibration
        problem, result = cal.problem, cal.fit
        out = [f"{'parameter':<36} {'prior':>10} {'width':>7} {'fitted':>11} {'moved':>7}"]
        values, z = problem.values(result.logv), cal.prior_z
        center = problem.values(result.prior.center) if result.prior is not None else {}
        width = result.prior.width if result.prior is not None else problem.width
        for i, p in enumerate(problem.params):
            if not result.free[i]:
                continue
            unit = "s" if p.additive else "x"
            edge = f"  finding: at a bound [{p.lo:.3g}, {p.hi:.3g}]" if result.at_bound[i] else ""
            if p.additive and p.lo == 0 and values[p.name] < p.floor:
                edge = "  (at 0, its prior's centre)"
            out.append(
                f"{p.name:<36} {p.start if p.additive else center.get(p.name, p.start):>10.4g} {width[i]:>6.3g}{unit} "
                f"{values[p.name]:>11.4g} {z[i]:>+7.2f}{edge}"
            )
        out.append(
            "(moved: prior widths from the prior's centre; widths are log-normal sigmas (x) or seconds (s))"
        )
        return out

    def accuracy_sentence(self) -> str:
        cal, n = self.calibration, len(self.measurements.runs)
        acc = self.accuracies()
        text = f"train accuracy {acc['calibrated'][-1]:.4f}"
        if cal.cv_s is not None:
            held = int(np.isfinite(cal.cv_s).sum())
            what = "leave-one-model-out" if cal.cv == "model" else f"{cal.cv}-fold"
            text += f"; {what} cross-validated accuracy {acc[self.cv_label][-1]:.4f} ({held} runs held out)"
            if held < n:
                text += f"; {n - held} runs could not be predicted (too few training runs)"
        return text + " (mean symmetric accuracy)"

    def toml(self) -> str:
        """The calibrated machine file, its comments saying how it was made."""
        cal, fitted = self.calibration, self.profile
        acc = self.accuracies()
        comments = [
            f"{fitted.name}: '{self.base.name}' calibrated by `sweep calibrate` on "
            f"{len(self.measurements.runs)} measured runs",
            f"of {self.source}; structure: {cal.structure.label}; fitted: {', '.join(cal.fitted)}.",
            f"Train accuracy (mean symmetric, fitted runs): {acc['calibrated'][-1]:.4f}.",
        ]
        if cal.chosen is not None:
            comments.append(
                f"Leave-one-model-out accuracy of the structure (held out): {cal.chosen.accuracy:.4f}."
            )
        if cal.cv_s is not None:
            comments.append(
                f"Cross-validated accuracy ({cal.cv} folds, held out): {acc[self.cv_label][-1]:.4f}."
            )
        for pure, hybrid in self.moved.items():
            comments.append(f"[overheads.{pure}] are those fitted for {hybrid} (not measured).")
        notes = base_comments(self.base)
        if notes:
            comments += ["", f"Base profile {self.base.source}:", *notes]
        comments.append("")
        return to_toml(fitted, tuple(comments))

    def write(self, path: str | Path) -> Path:
        """Write :meth:`toml` to ``path`` (a ``.toml``), atomically."""
        path = Path(path)
        check_toml_path(path)
        with store.written(path) as tmp:
            tmp.write_text(self.toml())
        self.written = path
        return path


def check_toml_path(path: str | Path) -> None:
    """A machine file to write: a ``.toml`` in a folder that exists."""
    path = Path(path)
    if path.suffix != ".toml":
        raise InputError(f"out must end in .toml, got '{path}'", param="out")
    if not path.parent.is_dir():
        raise InputError("no such folder", str(path.parent))


def base_comments(profile: MachineProfile) -> list[str]:
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
