"""Figures from a sweep's Parquet output: scaling curves, time breakdowns, Pareto fronts, regime maps.

matplotlib is an optional extra (``pip install 'paradl-sweep[plot]'``),
imported only when a figure is drawn, with the Agg backend (no display).
Every figure is computed by the streaming queries of :mod:`sweep.answers.query`
(best row per (strategy, x), Pareto fronts), so it works on datasets far
larger than memory. The file type follows the suffix: ``.png`` (150 dpi),
``.svg`` or ``.pdf``.

* :func:`scaling`: the best feasible ``metric`` of each strategy against
  ``x`` (default the GPU count p), log-log, as in the paper's scaling plots;
  ``vline`` marks a value (e.g. a co-design threshold). One line per model,
  machine and strategy: the best is never taken across models or machines.
* :func:`breakdown`: the epoch time of each strategy's best configuration
  per p, stacked as compute, allreduce, allgather, halo and point-to-point
  (the paper's Figure 2), one panel per strategy.
* :func:`pareto_front`: the front of two objectives, coloured by strategy,
  over a thinned sample of the feasible points.
* :func:`regime`: which strategy is fastest over two swept axes (e.g. p x
  inter_bandwidth_Bps), one coloured cell per pair.

The last three draw one model on one machine: on data of several they
refuse, naming the ``--where`` that picks one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sweep.answers.query import Source, as_sweep, best, pareto, split_names
from sweep.errors import InputError
from sweep.output import store

FORMATS = (".png", ".svg", ".pdf")
#: Components of t_comm_s plus compute, in stacking order, with their colours.
BREAKDOWN = (
    ("t_comp_s", "compute", "#4C72B0"),
    ("t_allreduce_s", "allreduce", "#DD8452"),
    ("t_allgather_s", "allgather", "#55A868"),
    ("t_halo_s", "halo", "#C44E52"),
    ("t_p2p_s", "p2p", "#8172B3"),
    ("t_alltoall_s", "alltoall", "#937860"),
)
#: A fixed colour per strategy, so every figure agrees.
STRATEGY_COLORS = {
    "serial": "#7f7f7f",
    "data": "#1f77b4",
    "spatial": "#2ca02c",
    "pipeline": "#9467bd",
    "filter": "#ff7f0e",
    "channel": "#8c564b",
    "data+filter": "#d62728",
    "data+spatial": "#17becf",
}
UNITS = {
    "t_epoch_s": "s",
    "t_iter_s": "s",
    "t_comp_s": "s",
    "t_comm_s": "s",
    "gpu_hours": "GPU-h",
    "mem_bytes": "B",
    "inter_bandwidth_Bps": "B/s",
    "intra_bandwidth_Bps": "B/s",
    "gpu_mem_bw_Bps": "B/s",
    "gpu_mem_bytes": "B",
    "gpu_flops": "FLOP/s",
    "inter_alpha_s": "s",
    "intra_alpha_s": "s",
}


def _pyplot():
    """matplotlib.pyplot with the Agg backend, or a one-line error naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("plots need matplotlib: pip install 'paradl-sweep[plot]' (or matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_out(path: str | Path) -> Path:
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise InputError(
            f"out: unknown image type '{out.suffix or out.name}' (use {', '.join(FORMATS)})", param="out"
        )
    if not out.parent.exists():
        raise InputError(f"out: folder does not exist: {out.parent}", param="out")
    return out


def _save(fig, out: Path) -> Path:
    import matplotlib.pyplot as plt

    try:
        with store.written(out, keep_suffix=True) as tmp:
            fig.savefig(tmp, dpi=150, bbox_inches="tight", metadata=_metadata(out))
    finally:
        plt.close(fig)
    return out


def _metadata(out: Path) -> dict:
    # reproducible files: no creation date in SVG/PDF, no software stamp churn in PNG
    suffix = out.suffix.lower()
    if suffix == ".svg":
        return {"Date": None}
    if suffix == ".pdf":
        return {"CreationDate": None}
    return {"Software": None}


def _label(col: str) -> str:
    unit = UNITS.get(col)
    return f"{col} [{unit}]" if unit else col


def _color(strategy: str, i: int) -> str:
    return STRATEGY_COLORS.get(strategy, f"C{i % 10}")


#: Line styles of the models and machines of a scaling plot (colours are the strategies').
LINE_STYLES = ("-", "--", ":", "-.")


def _title(table: pa.Table, where: str | None, what: str) -> str:
    models = _distinct(table, "model")
    machines = _distinct(table, "machine")
    head = " / ".join(x for x in (", ".join(models), ", ".join(machines)) if x)
    return (
        f"{what}: {head}" + (f"\n{where}" if where else "")
        if head
        else what + (f"\n{where}" if where else "")
    )


def _distinct(table: pa.Table, column: str) -> list[str]:
    """The distinct values of a label column of a result, sorted ([] without the column)."""
    if column not in table.column_names:
        return []
    return sorted(str(v) for v in set(table.column(column).to_pylist()) if v is not None)


def _one_model_and_machine(table: pa.Table, what: str) -> None:
    """Refuse a result of several models or machines: ``what`` draws one of each."""
    for column in ("model", "machine"):
        names = _distinct(table, column)
        if len(names) > 1:
            raise InputError(
                f"a {what} shows one {column}, and the data holds {len(names)} ({', '.join(names)}): "
                f"pick one with where \"{column} == '{names[0]}'\"",
                param="where",
            )


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def scaling(
    source: Source,
    out: str | Path,
    *,
    x: str = "p",
    metric: str = "t_epoch_s",
    where: str | None = None,
    vline: float | None = None,
    logx: bool = True,
    logy: bool = True,
) -> Path:
    """Best feasible ``metric`` per strategy against ``x`` (log-log by default)."""
    out = _check_out(out)
    sw = as_sweep(source)
    plt = _pyplot()
    table = best(sw, per=["strategy", x], by=metric, where=where, columns=["strategy", x, metric])
    if table.num_rows == 0:
        raise InputError("no feasible rows to plot (check where)", param="where")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, style, color, xs, ys in _scaling_lines(table, x, metric):
        order = np.argsort(xs)
        marker = "o" if len(xs) <= 30 else None
        ax.plot(xs[order], ys[order], marker=marker, ms=3.5, lw=1.6, ls=style, label=label, color=color)
    if vline is not None:
        ax.axvline(vline, color="k", ls="--", lw=1)
        ax.annotate(
            f"{vline:.4g}",
            (vline, 1),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            fontsize=8,
        )
    if logx:
        ax.set_xscale("log", base=2 if x == "p" else 10)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(f"best feasible {_label(metric)}")
    ax.set_title(_title(table, where, f"{metric} vs {x}"), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return _save(fig, out)


def _scaling_lines(table: pa.Table, x: str, metric: str):
    """(label, line style, colour, xs, ys) of each (model, machine, strategy) of a best-per-x
    table: colour by strategy, line style by model and machine; the labels name the model and
    machine only where the table holds several."""
    ids = [c for c in ("model", "machine") if c in table.column_names]
    keys = list(zip(*(_column(table, c).tolist() for c in [*ids, "strategy"]), strict=True))
    identities = list(dict.fromkeys(k[:-1] for k in keys))
    varying = [j for j, c in enumerate(ids) if len(_distinct(table, c)) > 1]
    strategies = list(dict.fromkeys(k[-1] for k in keys))
    for key in dict.fromkeys(keys):
        sel = np.fromiter((k == key for k in keys), dtype=bool, count=len(keys))
        *who, strategy = key
        named = ", ".join(str(who[j]) for j in varying)
        label = f"{strategy} ({named})" if named else strategy
        style = LINE_STYLES[identities.index(tuple(who)) % len(LINE_STYLES)]
        color = _color(strategy, strategies.index(strategy))
        yield (
            label,
            style,
            color,
            _column(table, x)[sel].astype(float),
            _column(table, metric)[sel].astype(float),
        )


def breakdown(
    source: Source,
    out: str | Path,
    *,
    where: str | None = None,
    x: str = "p",
    by: str = "t_epoch_s",
) -> Path:
    """Stacked compute/allreduce/allgather/halo/p2p/alltoall of each strategy's best configuration per ``x``."""
    out = _check_out(out)
    sw = as_sweep(source)
    # t_alltoall_s is newer than the other terms: a folder written before it has none
    parts = [t for t in BREAKDOWN if t[0] in sw.schema.names]
    missing = [c for c, _, _ in BREAKDOWN if c not in sw.schema.names and c != "t_alltoall_s"]
    if missing:
        raise InputError(f"the data lacks column '{missing[0]}' for a time breakdown")
    plt = _pyplot()
    cols = ["strategy", x, by, *[c for c, _, _ in parts]]
    table = best(sw, per=["strategy", x], by=by, where=where, columns=list(dict.fromkeys(cols)))
    if table.num_rows == 0:
        raise InputError("no feasible rows to plot (check where)", param="where")
    _one_model_and_machine(table, "time breakdown")
    strategies = list(dict.fromkeys(_column(table, "strategy").tolist()))
    n = len(strategies)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.9 * nrows), squeeze=False)
    for k, s in enumerate(strategies):
        ax = axes[k // ncols][k % ncols]
        sel = _column(table, "strategy") == s
        xs = _column(table, x)[sel]
        order = np.argsort(xs)
        pos = np.arange(len(xs))
        bottom = np.zeros(len(xs))
        for col, name, color in parts:
            h = _column(table, col)[sel][order].astype(float)
            ax.bar(pos, h, bottom=bottom, color=color, label=name, width=0.75)
            bottom += h
        ax.set_xticks(pos, [_short(v) for v in xs[order]], fontsize=7, rotation=90 if len(xs) > 8 else 0)
        ax.set_title(s, fontsize=9)
        ax.set_xlabel(x, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        if k % ncols == 0:
            ax.set_ylabel("time per epoch [s]", fontsize=8)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0, 1, 0.86 if nrows == 1 else 0.92))
    fig.suptitle(_title(table, where, "time per epoch by component"), fontsize=10, y=1.0)
    fig.legend(
        handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.9 if nrows == 1 else 0.95),
        ncol=len(parts), fontsize=8, frameon=False,
    )  # fmt: skip
    return _save(fig, out)


def _short(v: Any) -> str:
    if isinstance(v, (int, np.integer)):
        return f"{int(v)}"
    f = float(v)
    return f"{f:.3g}"


def pareto_front(
    source: Source,
    out: str | Path,
    *,
    minimize: Sequence[str] | str = ("t_epoch_s", "p"),
    maximize: Sequence[str] | str = (),
    where: str | None = None,
    sample: int = 20_000,
    logx: bool = True,
    logy: bool = True,
) -> Path:
    """The front of two objectives over a thinned sample of the feasible points, coloured by strategy."""
    out = _check_out(out)
    sw = as_sweep(source)
    mins, maxs = split_names(minimize), split_names(maximize)
    objs = [*mins, *maxs]
    if len(objs) != 2:
        raise InputError(f"a Pareto plot takes exactly two objectives, got {len(objs)}")
    plt = _pyplot()
    has_strategy = "strategy" in sw.schema.names
    cols = [*objs, *(["strategy"] if has_strategy else [])]
    front = pareto(sw, mins, maxs, where=where, columns=cols)
    _one_model_and_machine(front, "Pareto plot")
    cloud = _sample(sw, cols, where, sample)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    labels = _column(cloud, "strategy") if has_strategy else np.full(cloud.num_rows, "")
    for i, s in enumerate(dict.fromkeys(labels.tolist())):
        sel = labels == s
        ax.scatter(
            _column(cloud, objs[0])[sel], _column(cloud, objs[1])[sel], s=4, alpha=0.25,
            color=_color(s, i), label=s or None, linewidths=0,
        )  # fmt: skip
    fx, fy = _column(front, objs[0]).astype(float), _column(front, objs[1]).astype(float)
    order = np.lexsort((fy, fx))
    ax.step(fx[order], fy[order], where="post", color="k", lw=1.2, label="Pareto front")
    f_labels = _column(front, "strategy") if has_strategy else np.full(front.num_rows, "")
    for i, s in enumerate(dict.fromkeys(f_labels.tolist())):
        sel = f_labels == s
        ax.scatter(fx[sel], fy[sel], s=22, color=_color(s, i), edgecolors="k", linewidths=0.6, zorder=3)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(_label(objs[0]) + (" (maximised)" if objs[0] in maxs else ""))
    ax.set_ylabel(_label(objs[1]) + (" (maximised)" if objs[1] in maxs else ""))
    ax.set_title(_title(front, where, f"Pareto front ({front.num_rows:,} rows)"), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, frameon=False, markerscale=3)
    return _save(fig, out)


def _sample(sw, cols: Sequence[str], where: str | None, n: int) -> pa.Table:
    """About ``n`` feasible rows spread over the data, streamed (a fixed stride over matching rows)."""
    import pyarrow.compute as pc

    from sweep.answers.where import combine

    expr = combine(
        [sw.filter(where), pc.field("feasible") == True if "feasible" in sw.schema.names else None]  # noqa: E712
    )
    total = sw.dataset.count_rows(filter=expr) if expr is not None else sw.dataset.count_rows()
    stride = max(1, total // max(n, 1))
    pieces, seen = [], 0
    for batch in sw.dataset.to_batches(columns=list(cols), filter=expr):
        first = (-seen) % stride
        idx = np.arange(first, batch.num_rows, stride)
        seen += batch.num_rows
        if len(idx):
            pieces.append(pa.Table.from_batches([batch.take(pa.array(idx))]))
    if not pieces:
        return pa.schema([sw.schema.field(c) for c in cols]).empty_table()
    return pa.concat_tables(pieces)


def regime(
    source: Source,
    out: str | Path,
    *,
    x: str = "p",
    y: str = "inter_bandwidth_Bps",
    metric: str = "t_epoch_s",
    where: str | None = None,
) -> Path:
    """Which strategy has the best feasible ``metric`` in each (x, y) cell of two swept axes."""
    out = _check_out(out)
    sw = as_sweep(source)
    for c in (x, y):
        if c not in sw.schema.names:
            raise InputError(f"unknown column '{c}' (known: {', '.join(sw.schema.names)})")
    if x == y:
        raise InputError("x and y must differ", param=("x", "y"))
    plt = _pyplot()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    table = best(sw, per=[x, y], by=metric, where=where, columns=[x, y, "strategy", metric])
    if table.num_rows == 0:
        raise InputError("no feasible rows to plot (check where)", param="where")
    _one_model_and_machine(table, "regime map")
    xs, ys = _distinct_values(sw, [x, y], where)  # every cell, feasible or not
    strategies = sorted(
        set(_column(table, "strategy").tolist()),
        key=lambda s: list(STRATEGY_COLORS).index(s) if s in STRATEGY_COLORS else 99,
    )
    code = {s: i for i, s in enumerate(strategies)}
    grid = np.full((len(ys), len(xs)), np.nan)
    xi = np.searchsorted(xs, _column(table, x))
    yi = np.searchsorted(ys, _column(table, y))
    grid[yi, xi] = [code[s] for s in _column(table, "strategy").tolist()]
    cmap = ListedColormap([_color(s, i) for i, s in enumerate(strategies)]).with_extremes(bad="#eeeeee")
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    ax.pcolormesh(
        _edges(xs, x == "p"), _edges(ys, False), np.ma.masked_invalid(grid), cmap=cmap,
        vmin=-0.5, vmax=len(strategies) - 0.5, shading="flat",
    )  # fmt: skip
    if _positive(xs):
        ax.set_xscale("log", base=2 if x == "p" else 10)
    if _positive(ys) and ys.max() / ys.min() > 20:
        ax.set_yscale("log")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    ax.set_title(_title(table, where, f"fastest strategy ({metric})"), fontsize=10)
    handles = [Patch(color=_color(s, i), label=s) for i, s in enumerate(strategies)]
    if np.isnan(grid).any():
        handles.append(Patch(color="#eeeeee", label="none feasible"))
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, out)


def _distinct_values(sw, cols: Sequence[str], where: str | None) -> list[np.ndarray]:
    """Sorted distinct values of each column among the rows ``where`` selects, streamed."""
    import pyarrow.compute as pc

    seen: list[set] = [set() for _ in cols]
    for batch in sw.dataset.to_batches(columns=list(cols), filter=sw.filter(where)):
        for i, c in enumerate(cols):
            seen[i].update(pc.unique(batch.column(c)).to_pylist())
    return [np.asarray(sorted(v for v in s if v is not None)) for s in seen]


def _positive(v: np.ndarray) -> bool:
    return bool(len(v)) and bool(np.all(v.astype(float) > 0))


def _edges(centres: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted centres (geometric midpoints on a log axis)."""
    c = centres.astype(float)
    if len(c) == 1:
        return (
            np.asarray([c[0] / 1.5, c[0] * 1.5]) if log or c[0] > 0 else np.asarray([c[0] - 0.5, c[0] + 0.5])
        )
    use_log = log or (np.all(c > 0) and c.max() / c.min() > 20)
    if use_log:
        lc = np.log(c)
        mids = np.exp((lc[1:] + lc[:-1]) / 2)
        return np.concatenate([[c[0] ** 2 / mids[0]], mids, [c[-1] ** 2 / mids[-1]]])
    mids = (c[1:] + c[:-1]) / 2
    return np.concatenate([[2 * c[0] - mids[0]], mids, [2 * c[-1] - mids[-1]]])


KINDS = {"scaling": scaling, "breakdown": breakdown, "pareto": pareto_front, "regime": regime}
