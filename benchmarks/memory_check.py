"""Memory per GPU of data+tensor+pipeline against Korthikanti et al. 2022, Figure 1 (docs/trust.md).

    python -m benchmarks.memory_check            # one line per row, a few seconds

Reads grids/measurements/megatron_memory_public.csv (the paper's Figure 1: the weights and
optimizer state, and the activations, per GPU of the first pipeline stage, in GiB, for the 22B,
175B, 530B and 1T GPTs without recomputation and with selective recomputation plus sequence
parallelism) and prints each row's predicted ``mem_states_bytes`` and ``mem_activations_bytes``
(uncalibrated, on the row's machine profile) beside the measured figures, with their ratios.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

import sweep

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "grids" / "measurements" / "megatron_memory_public.csv"
GIB = 2.0**30


class Row(NamedTuple):
    """One row: its label and the predicted and published states and activations, in GiB."""

    label: str
    states: float
    states_paper: float
    activations: float
    activations_paper: float


def rows() -> list[Row]:
    """Every row of the file, predicted by ``sweep.estimate``."""
    out = []
    for r in csv.DictReader(ROWS.read_text().splitlines()):
        ints = {k: int(r[k]) for k in ("p", "global_batch", "micro_batch", "tp", "pp", "sp", "vp")}
        row = sweep.estimate(
            r["model"],
            r["machine"],
            r["strategy"],
            p=ints["p"],
            global_batch=ints["global_batch"],
            micro_batch=ints["micro_batch"],
            tp=ints["tp"],
            pp=ints["pp"],
            sp=ints["sp"],
            vp=ints["vp"],
            recompute=r["recompute"],
            precision=r["precision"],
        )
        out.append(
            Row(
                f"{r['model']} {r['recompute']}",
                row["mem_states_bytes"] / GIB,
                float(r["mem_states_gib"]),
                row["mem_activations_bytes"] / GIB,
                float(r["mem_activations_gib"]),
            )
        )
    return out


def main() -> None:
    print("| run | states GiB (paper) | ratio | activations GiB (paper) | ratio |")
    print("|---|---|---|---|---|")
    for r in rows():
        print(
            f"| {r.label} | {r.states:.2f} ({r.states_paper:.2f}) | {r.states / r.states_paper:.3f} "
            f"| {r.activations:.2f} ({r.activations_paper:.2f}) | {r.activations / r.activations_paper:.3f} |"
        )


if __name__ == "__main__":
    main()
