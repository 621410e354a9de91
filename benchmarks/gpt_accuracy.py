"""Accuracy of data+tensor+pipeline on the measured GPT runs (docs/trust.md#gpt-models-on-a100-megatron).

    python -m benchmarks.gpt_accuracy            # the tables of docs/trust.md, about ten minutes

Prints, as Markdown: the uncalibrated mean symmetric accuracy per model and per (tp, pp)
shape; for each (model, p, global batch) how often the predicted fastest (tp, pp, S) is the
measured fastest or within 5 % of it; the held-out experiment: ``sweep calibrate`` on the
single-node runs only, with default options and fitting the physics alone (:data:`PHYSICS`),
then the 41 multi-node runs predicted; and the default calibration on every run, train and
5-fold cross-validated accuracy.

    python -m benchmarks.gpt_accuracy --set op_latency_s=0    # a machine parameter changed
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import sweep

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "grids" / "measurements" / "a100_megatron_public.csv"


def table(path: Path, machine=None, sets=None) -> pd.DataFrame:
    """Every run of ``path`` with its prediction (``sweep validate``)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "v.csv"
        sweep.validate(path, machine or ("a100-ib800" if sets else None), out=out, set=sets)
        frame = pd.read_csv(out)
    frame["mb"] = frame.b / frame.S
    frame["B"] = frame.b * frame.p // (frame.tp * frame.pp)
    return frame


def summary(frame: pd.DataFrame, by: list[str]) -> str:
    g = frame.groupby(by).agg(n=("accuracy", "size"), ratio=("ratio", "mean"), acc=("accuracy", "mean"))
    lines = [f"| {' | '.join(by)} | runs | mean ratio | mean accuracy |", "|" + "---|" * (len(by) + 3)]
    for key, row in g.iterrows():
        keys = key if isinstance(key, tuple) else (key,)
        lines.append(f"| {' | '.join(map(str, keys))} | {row.n} | {row.ratio:.3f} | {row.acc:.3f} |")
    return "\n".join(lines)


def best_split(frame: pd.DataFrame) -> str:
    """Per (model, p, global batch) with two or more runs: is the predicted fastest run the
    measured fastest, or within 5 % of it?"""
    hits = within = groups = 0
    for _, g in frame.groupby(["model", "p", "B"]):
        if len(g) < 2:
            continue
        groups += 1
        measured_best = g.iter_time_s.min()
        pick = g.loc[g.pred_iter_s.idxmin()]
        hits += pick.iter_time_s == measured_best
        within += pick.iter_time_s <= 1.05 * measured_best
    return (
        f"{groups} (model, p, global batch) groups of two or more runs: the predicted fastest is the "
        f"measured fastest in {hits} ({hits / groups:.0%}), within 5 % of it in {within} ({within / groups:.0%})"
    )


#: The physics a single-node run can inform: the GEMM rate, the host's cost per operation, the
#: intra-node link (``--fit``; the held-out experiment's second fit).
PHYSICS = "gpu_flops,op_latency_s,intra_bandwidth_Bps,intra_alpha_s"


def held_out(sets=None, fit=None) -> tuple[str, pd.DataFrame]:
    """Calibrate on the single-node runs (p <= 8), with default options or ``fit``'s parameters;
    predict the others."""
    rows = list(csv.DictReader(MEASURED.read_text().splitlines()))
    with tempfile.TemporaryDirectory() as d:
        paths = {k: Path(d) / f"{k}.csv" for k in ("single", "multi")}
        for key, keep in (("single", lambda r: int(r["p"]) <= 8), ("multi", lambda r: int(r["p"]) > 8)):
            with paths[key].open("w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(r for r in rows if keep(r))
        fitted = sweep.calibrate(paths["single"], "a100-ib800", set=sets, fit=fit, cv=5 if fit is None else 0)
        return "\n".join(fitted.lines()), table(paths["multi"], fitted.profile)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE machine override")
    ap.add_argument("--skip-calibration", action="store_true")
    args = ap.parse_args(argv)
    sets = dict(kv.split("=", 1) for kv in args.set) or None
    sets = {k: float(v) for k, v in sets.items()} if sets else None
    frame = table(MEASURED, sets=sets)
    print("## Uncalibrated, per model\n")
    print(summary(frame, ["model"]))
    print(f"\nall {len(frame)} runs: mean accuracy {frame.accuracy.mean():.3f}\n")
    for name, part in (("single-node", frame[frame.p <= 8]), ("multi-node", frame[frame.p > 8])):
        print(f"{name}: {len(part)} runs, mean accuracy {part.accuracy.mean():.3f}")
    # the runs a100-ib800's op_latency_s was measured on (grids/machines/a100-ib800.toml), and the rest
    floor = (frame.p <= 8) & (frame.tp == 1) & (frame.pp == 1) & (frame.b == frame.S)
    print(
        f"the {floor.sum()} runs op_latency_s was measured on (single node, tp = pp = 1, one sample per "
        f"micro-batch): {frame[floor].accuracy.mean():.3f}; the other {(~floor).sum()}: "
        f"{frame[~floor].accuracy.mean():.3f}"
    )
    print("\n## Uncalibrated, per (tp, pp)\n")
    print(summary(frame, ["tp", "pp"]))
    print("\n## Uncalibrated, per (nodes, tp, pp)\n")
    print(summary(frame.assign(nodes=np.where(frame.p <= 8, "single", "multi")), ["nodes", "tp", "pp"]))
    print("\n## Uncalibrated, per micro-batch size (samples)\n")
    print(summary(frame, ["mb"]))
    print("\n## Best split\n")
    print(best_split(frame))
    if args.skip_calibration:
        return
    for title, fit in (("default options", None), (f"--fit {PHYSICS}", PHYSICS)):
        report, multi = held_out(sets, fit)
        print(f"\n## Held out: calibrated on the 1,440 single-node runs, {title}\n")
        print(report)
        print()
        print(summary(multi, ["model"]))
        err = np.abs(multi.pred_iter_s / multi.iter_time_s - 1)
        print(
            f"\n41 multi-node runs: mean accuracy {multi.accuracy.mean():.3f}, mean absolute error "
            f"{err.mean():.1%}"
        )
        base = frame[frame.p > 8]
        print(f"uncalibrated on the same runs: mean accuracy {base.accuracy.mean():.3f}")
    print("\n## Default calibration on every run (train and 5-fold)\n")
    print("\n".join(sweep.calibrate(MEASURED, "a100-ib800", set=sets).lines()))


if __name__ == "__main__":
    main()
