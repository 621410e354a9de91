"""Predicted against measured iteration times: the oracle's projection accuracy.

For every measured run the model predicts ``t_iter_s`` (docs/model.md §12, the
kernels' ``t_epoch_s / iterations``) on the run's machine, in float64 when
JAX's x64 mode is on. Two figures per run:

.. math::
    r = \\frac{t_{pred}}{t_{meas}}, \\qquad
    a = \\frac{\\min(t_{pred}, t_{meas})}{\\max(t_{pred}, t_{meas})} \\in (0, 1]

``r`` is what the paper calls projection accuracy (Kahira et al., HPDC '21,
section 6: 86.74 % mean, 97.57 % for data parallelism); ``a`` is its
symmetric form, which punishes over- and under-prediction alike and whose
mean is the accuracy reported here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from kernels import Config, Net
from sweep.engine.evaluate import Evaluator, Inputs
from sweep.errors import InputError
from sweep.inputs.configs import frozen_overheads
from sweep.inputs.machines import MachineProfile
from sweep.inputs.measured import Measurements
from sweep.output import store

#: Columns added to the input columns in a validation table.
ADDED_COLUMNS: tuple[str, ...] = ("pred_iter_s", "ratio", "accuracy")
#: Added before them where a run did not publish a setting: the values taken (``recompute=full``).
CHOSEN = "chosen"


@dataclass(frozen=True)
class Group:
    """The runs of one (machine, model, strategy): the kernels' inputs for a vmapped call."""

    machine: str  # machine key (see :class:`~sweep.measured.Measurements`)
    model: str
    strategy: str
    profile: MachineProfile
    net: Net
    cfg: Config  # float64 arrays [k]
    index: np.ndarray  # positions of the runs in ``Measurements.runs``


def groups(meas: Measurements) -> list[Group]:
    """Runs grouped by (machine, model, strategy), in order of first appearance."""
    found: dict[tuple[str, str, str], list[int]] = {}
    for i, run in enumerate(meas.runs):
        found.setdefault((meas.machine_of[run.machine], run.model, run.strategy), []).append(i)
    out = []
    for (machine, model, strategy), index in found.items():
        bound = meas.bounds[(machine, model)]
        runs = [meas.runs[i] for i in index]
        cfg = Config(
            *(np.asarray([getattr(r, k) for r in runs], np.float64) for k in ("p", "b", "p2", "S")),
            *np.asarray([r.own for r in runs], np.float64).T,  # the strategies' own axes (registry)
        )
        out.append(Group(machine, model, strategy, bound.profile, bound.net, cfg, np.asarray(index)))
    return out


@dataclass(frozen=True)
class Predictions:
    """Per run, in the order of ``Measurements.runs``."""

    t_iter_s: np.ndarray
    t_comp_s: np.ndarray  # per iteration
    t_comm_s: np.ndarray  # per iteration
    limit_reason: tuple[
        str | None, ...
    ]  # the column ``limit_reason``: None when the model finds the run feasible


@functools.lru_cache(maxsize=64)
def _vmapped(ev: Evaluator):
    """``jit(vmap(ev))`` over configurations, once per evaluator and process: a second validation
    of the same file traces nothing."""
    return jax.jit(jax.vmap(ev, in_axes=(None, 0)))


def predict(meas: Measurements) -> Predictions:
    """The model's iteration time of every run, on its machine with its overrides and overheads.

    One ``jit(vmap(...))`` per evaluator (strategy, overrides, overheads), kept by the process,
    called once per model.
    """
    n = len(meas.runs)
    t_iter, t_comp, t_comm = np.empty(n), np.empty(n), np.empty(n)
    limit: list[str | None] = [None] * n
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    for g in groups(meas):
        # the evaluator keys the compile: machine overrides and a bound model's own overheads
        ev = Evaluator(g.strategy, (), tuple(g.profile.overrides), frozen_overheads(g.profile))
        net, machine = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), (g.net, g.profile.pytree()))
        inputs = Inputs(
            net, machine, tuple(jnp.asarray(v) for v in g.profile.override_values(dtype).values())
        )
        cfg = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), g.cfg)
        cost, derived = _vmapped(ev)(inputs, cfg)
        its = np.asarray(cost.iterations, np.float64)
        t_iter[g.index] = np.asarray(derived.t_iter_s, np.float64)
        t_comp[g.index] = np.asarray(cost.t_comp_s, np.float64) / its
        t_comm[g.index] = np.asarray(derived.t_comm_s, np.float64) / its
        for i, code in zip(g.index, np.asarray(cost.limit), strict=True):
            limit[i] = store.limit_reason(int(code))
    return Predictions(t_iter, t_comp, t_comm, tuple(limit))


def symmetric_accuracy(pred, meas):
    """``min(pred, meas) / max(pred, meas)``: 1 is exact, 0.5 is a factor of two either way."""
    pred, meas = np.asarray(pred, np.float64), np.asarray(meas, np.float64)
    return np.minimum(pred, meas) / np.maximum(pred, meas)


@dataclass(frozen=True)
class Summary:
    """Accuracy of a set of runs: count, mean ratio, symmetric accuracy min, max and mean."""

    model: str
    strategy: str
    n: int
    mean_ratio: float
    acc_min: float
    acc_max: float
    acc_mean: float

    @classmethod
    def of(cls, model: str, strategy: str, pred, meas) -> Summary:
        pred, meas = np.asarray(pred, np.float64), np.asarray(meas, np.float64)
        ok = np.isfinite(pred)
        if not ok.any():
            nan = math.nan
            return cls(model, strategy, 0, nan, nan, nan, nan)
        acc = symmetric_accuracy(pred[ok], meas[ok])
        return cls(
            model,
            strategy,
            int(ok.sum()),
            float(np.mean(pred[ok] / meas[ok])),
            float(acc.min()),
            float(acc.max()),
            float(acc.mean()),
        )


def summarize(meas: Measurements, pred_s: Sequence[float] | np.ndarray) -> list[Summary]:
    """One :class:`Summary` per (model, strategy) in order of appearance, then ``all`` runs.

    Runs whose prediction is NaN (none could be made) are left out of the figures.
    """
    pred = np.asarray(pred_s, np.float64)
    t = np.asarray([r.iter_time_s for r in meas.runs])
    keys: dict[tuple[str, str], list[int]] = {}
    for i, run in enumerate(meas.runs):
        keys.setdefault((run.model, run.strategy), []).append(i)
    out = [Summary.of(m, s, pred[idx], t[idx]) for (m, s), idx in keys.items()]
    out.append(Summary.of("all", "all", pred, t))
    return out


def summary_lines(rows: Sequence[Summary], extra: Mapping[str, Sequence[float]] | None = None) -> list[str]:
    """A text table of summaries; ``extra`` adds columns of mean accuracies (one per summary)."""
    extra = extra or {}
    m = max([14, *(len(s.model) for s in rows)])  # as wide as the longest name: aligned columns
    w = max([13, *(len(s.strategy) for s in rows)])
    head = (
        f"{'model':<{m}} {'strategy':<{w}} {'n':>4} {'mean ratio':>10} {'acc min':>8} {'acc max':>8} "
        f"{'acc mean':>8}" + "".join(f" {k:>{max(8, len(k))}}" for k in extra)
    )
    lines = [head]
    for i, s in enumerate(rows):
        cells = "".join(f" {_fmt(v[i]):>{max(8, len(k))}}" for k, v in extra.items())
        lines.append(
            f"{s.model:<{m}} {s.strategy:<{w}} {s.n:>4} {_fmt(s.mean_ratio, 4):>10} {_fmt(s.acc_min):>8} "
            f"{_fmt(s.acc_max):>8} {_fmt(s.acc_mean):>8}{cells}"
        )
    return lines


def _fmt(value: float, digits: int = 3) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def table_columns(meas: Measurements, pred_s: Sequence[float] | np.ndarray) -> dict[str, list]:
    """Every input column (as written) plus ``pred_iter_s``, ``ratio`` and ``accuracy``, per run;
    where a run did not publish a setting, :data:`CHOSEN` before them."""
    pred = np.asarray(pred_s, np.float64)
    t = np.asarray([r.iter_time_s for r in meas.runs])
    out: dict[str, list] = {
        c: [r.fields[c] for r in meas.runs] for c in meas.columns if c not in (*ADDED_COLUMNS, CHOSEN)
    }
    if any(r.unpublished for r in meas.runs):  # the values taken for settings not published
        out[CHOSEN] = [" ".join(f"{a}={r.fields[a]}" for a in r.unpublished) for r in meas.runs]
    out["pred_iter_s"] = pred.tolist()
    out["ratio"] = (pred / t).tolist()
    out["accuracy"] = symmetric_accuracy(pred, t).tolist()
    return out


def _typed(values: list[str]):
    """A text column as integers or floats when every non-empty cell parses, else as text."""
    cells = [v for v in values if v != ""]
    for kind in (int, float):
        try:
            parsed = [kind(v) for v in cells]
        except ValueError:
            continue
        it = iter(parsed)
        return [next(it) if v != "" else None for v in values]
    return values


def write_table(meas: Measurements, pred_s: Sequence[float] | np.ndarray, out: str | Path) -> Path:
    """Write the validation table to ``.csv`` or ``.parquet``, atomically (a temporary file renamed)."""
    out = Path(out)
    if out.suffix not in (".csv", ".parquet"):
        raise InputError("the output must end in .csv or .parquet", str(out))
    columns = table_columns(meas, pred_s)
    if not out.parent.is_dir():
        raise InputError("no such folder", str(out.parent))
    with store.written(out) as tmp:
        if out.suffix == ".csv":
            import csv

            with tmp.open("w", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(columns)
                for row in zip(*columns.values(), strict=True):
                    writer.writerow(repr(v) if isinstance(v, float) else v for v in row)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            arrays = {k: (v if k in (*ADDED_COLUMNS, CHOSEN) else _typed(v)) for k, v in columns.items()}
            pq.write_table(pa.table(arrays), tmp)
    return out


def plot(meas: Measurements, pred_s: Sequence[float] | np.ndarray, out: str | Path, title: str = "") -> Path:
    """Predicted against measured iteration time, log-log, one colour per strategy, one marker per model.

    The diagonal is exact; the band is +-10 %. Needs matplotlib (the ``plot`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plotting needs matplotlib: pip install 'paradl-sweep[plot]'") from None
    out = Path(out)
    if not out.parent.is_dir():
        raise InputError("no such folder", str(out.parent))
    pred = np.asarray(pred_s, np.float64)
    t = np.asarray([r.iter_time_s for r in meas.runs])
    strategies = list(dict.fromkeys(r.strategy for r in meas.runs))
    models = list(dict.fromkeys(r.model for r in meas.runs))
    markers = "osD^v<>Pp*hX"
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    ok = np.isfinite(pred)
    for si, strategy in enumerate(strategies):
        for mi, model in enumerate(models):
            sel = np.asarray([r.strategy == strategy and r.model == model for r in meas.runs]) & ok
            if sel.any():
                ax.scatter(
                    t[sel],
                    pred[sel],
                    color=colours(si % 10),
                    marker=markers[mi % len(markers)],
                    label=f"{strategy} / {model}",
                    alpha=0.8,
                    edgecolors="none",
                )
    both = np.concatenate([t[ok], pred[ok]])
    lo, hi = both.min() / 1.5, both.max() * 1.5
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="black", linewidth=0.8, label="predicted = measured")
    ax.fill_between(line, line / 1.1, line * 1.1, color="grey", alpha=0.2, linewidth=0, label="±10 %")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), aspect="equal")
    ax.set_xlabel("measured iteration time (s)")
    ax.set_ylabel("predicted iteration time (s)")
    acc = symmetric_accuracy(pred[ok], t[ok]).mean() if ok.any() else math.nan
    ax.set_title(title or f"{Path(meas.path).name}: mean symmetric accuracy {acc:.3f}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    fig.tight_layout()
    try:
        with store.written(out, keep_suffix=True) as tmp:
            fig.savefig(tmp, dpi=120)
    finally:
        plt.close(fig)
    return out
