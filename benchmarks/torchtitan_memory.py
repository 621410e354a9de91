"""Peak memory per GPU against torchtitan's published Llama 3.1 runs (docs/trust.md).

    python -m benchmarks.torchtitan_memory       # one line per row, a few seconds

Reads grids/measurements/torchtitan_llama3_public.csv (FSDP2 with tp, pp and cp, Llama 3.1 8B to
405B, sequences to 262,144 tokens, on Grand Teton H100s) and prints each row's predicted
``mem_bytes`` (states, activations and the workspace; uncalibrated, on the row's machine
profile) beside the published ``peak_mem_gib`` (the largest rank's, as PyTorch's allocator
reports it), with their ratio.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from typing import NamedTuple

import sweep

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "grids" / "measurements" / "torchtitan_llama3_public.csv"
GIB = 2.0**30
AXES = ("p", "global_batch", "micro_batch", "tp", "pp", "cp", "zero", "sp", "vp")


class Row(NamedTuple):
    """One row: its label, the predicted memory and its parts, the published peak, in GiB."""

    label: str
    mem: float
    states: float
    activations: float
    peak: float
    limit: str

    @property
    def ratio(self) -> float:
        return self.mem / self.peak


def rows() -> list[Row]:
    """Every row of the file, predicted by ``sweep.estimate``."""
    out = []
    for r in csv.DictReader(ROWS.read_text().splitlines()):
        ints = {k: int(r[k]) for k in AXES}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = sweep.estimate(
                r["model"],
                r["machine"],
                r["strategy"],
                recompute=r["recompute"],
                precision=r["precision"],
                **ints,
            )
        label = f"{r['model']} p{ints['p']} tp{ints['tp']} pp{ints['pp']} cp{ints['cp']} vp{ints['vp']} {r['recompute']} {r['precision']}"
        out.append(
            Row(
                label,
                row["mem_bytes"] / GIB,
                row["mem_states_bytes"] / GIB,
                row["mem_activations_bytes"] / GIB,
                float(r["peak_mem_gib"]),
                row["limit_reason"] or "",
            )
        )
    return out


def main() -> None:
    print("| run | mem GiB (states + activations) | published peak GiB | ratio | limit |")
    print("|---|---|---|---|---|")
    for r in rows():
        print(
            f"| {r.label} | {r.mem:.1f} ({r.states:.1f} + {r.activations:.1f}) | {r.peak:.1f} "
            f"| {r.ratio:.2f} | {r.limit or '-'} |"
        )


if __name__ == "__main__":
    main()
