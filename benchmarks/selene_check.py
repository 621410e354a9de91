"""data+tensor+pipeline on Korthikanti et al.'s Selene runs, built directly (docs/trust.md#gpt-models-on-selene).

    python -m benchmarks.selene_check            # the two tables of docs/trust.md, a minute

Reads grids/measurements/megatron_selene_public.csv (8 end-to-end iterations, with their sp, vp
and zero) and megatron_layer_22b_public.csv (one 22B layer's forward and backward, Table 4), and
prints predicted against measured for each row. The configurations are built here, not through
``sweep validate``, until the measured-file reader carries sp and vp.

One layer's times come from the model as differences: with ``wu_passes = 0`` and one replica, a
GPT of two blocks minus one of one block is one block's step; full recomputation minus none is its
forward; the step minus the forward is its backward (recomputation included).

    python -m benchmarks.selene_check --set gpu_sms=0     # a machine parameter changed
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import jax
import numpy as np

import kernels
from kernels.strategies.registry import PRECISION, RECOMPUTE
from sweep.inputs.layers import bind
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "grids" / "measurements" / "megatron_selene_public.csv"
LAYER = ROOT / "grids" / "measurements" / "megatron_layer_22b_public.csv"
KERNEL = jax.jit(kernels.STRATEGIES["data+tensor+pipeline"])


def machine(sets: dict[str, float], **more):
    profile = load_machine("selene").with_overrides({**sets, **more})
    return kernels.with_params(profile.pytree(), **profile.overrides), profile.ref_rate_flops


def iteration_s(model: str, mach, rate, p, b, S, tp, pp, recompute, zero=0, vp=1, sp=0, precision="bf16"):
    net = bind(load_model(model), "selene", rate)
    cfg = kernels.Config(
        *(np.float64(v) for v in (p, b, 1, S, tp, pp, RECOMPUTE.index(recompute), zero, vp, sp)),
        precision=np.float64(PRECISION.index(precision)),
    )
    cost = KERNEL(net, mach, cfg)
    return float(kernels.derive(cost).t_iter_s), kernels.LIMITS[int(cost.limit)] or "-"


def runs(sets) -> list[str]:
    mach, rate = machine(sets)
    lines = [
        "| model | recompute | sp | vp | measured s | predicted s | ratio | accuracy | limit |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    accs = []
    for r in csv.DictReader(RUNS.read_text().splitlines()):
        ints = {k: int(r[k]) for k in ("p", "b", "S", "tp", "pp", "zero", "vp", "sp")}
        pred, limit = iteration_s(r["model"], mach, rate, recompute=r["recompute"], **ints)
        meas = float(r["iter_time_s"])
        acc = min(pred, meas) / max(pred, meas)
        accs.append(acc)
        lines.append(
            f"| {r['model']} | {r['recompute']} | {ints['sp']} | {ints['vp']} | {meas:.2f} | {pred:.2f} | "
            f"{pred / meas:.3f} | {acc:.3f} | {limit} |"
        )
    lines.append(f"\n{len(accs)} runs: mean symmetric accuracy {np.mean(accs):.3f}")
    return lines


def layer(sets) -> list[str]:
    mach, rate = machine(sets, wu_passes=0.0)
    lines = [
        "| recompute | sp | forward ms (measured, predicted) | backward ms (measured, predicted) |",
        "|---|--:|--:|--:|",
    ]
    for r in csv.DictReader(LAYER.read_text().splitlines()):
        h = r["model"].split("-")
        one, two = (f"gpt-l{n}-{'-'.join(h[2:])}" for n in (1, 2))
        tp, mb, sp = int(r["tp"]), int(r["micro_batch"]), int(r["sp"])

        def step(recompute, tp=tp, mb=mb, sp=sp, one=one, two=two):
            t = [
                iteration_s(m, mach, rate, p=tp, b=mb, S=1, tp=tp, pp=1, recompute=recompute, sp=sp)[0]
                for m in (one, two)
            ]
            return 1e3 * (t[1] - t[0])

        forward = step("full") - step("none")
        backward = step(r["recompute"]) - forward
        lines.append(
            f"| {r['recompute']} | {sp} | {float(r['forward_ms']):.1f}, {forward:.1f} | "
            f"{float(r['backward_ms']):.1f}, {backward:.1f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE machine override")
    args = ap.parse_args(argv)
    sets = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    print("## Korthikanti et al. 2022 on selene\n")
    print("\n".join(runs(sets)))
    print("\n## One layer of the 22B model (Table 4)\n")
    print("\n".join(layer(sets)))


if __name__ == "__main__":
    main()
