"""A notebook user's loop: ``sweep.estimate`` called again and again on one model and machine.

    python -m benchmarks.bench_estimate            # GPT-3 175B on selene, every split of 1,024 GPUs
    python -m benchmarks.bench_estimate --rounds 9

Each round calls ``sweep.estimate`` once per (tp, pp, micro-batch) split of GPT-3 175B on 1,024
GPUs at a global batch of 1,536 whose tp divides the 96 heads and tp x pp divides 1,024, with
micro-batches of 1 to 12 sequences (the count is printed), by name, as a notebook does. It prints calls per second, the median of the rounds, warm
(the bound model and compiled evaluator kept by the process, :mod:`sweep.inputs.kept`) and with
the kept bound models dropped before every call (each call loads and tabulates the model again,
the compiled program stays), and their ratio, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import sweep
from sweep.inputs import kept

MODEL, MACHINE, STRATEGY = "gpt3-175b", "selene", "data+tensor+pipeline"


def splits() -> list[dict[str, int]]:
    """The configurations of one round."""
    out = []
    for tp in (1, 2, 4, 8, 16, 32):
        for pp in (1, 2, 4, 8, 16, 32, 64, 96):
            if 96 % tp or 1024 % (tp * pp) or pp > 96:
                continue
            for micro in (1, 2, 3, 4, 6, 8, 12):
                out.append({"tp": tp, "pp": pp, "micro_batch": micro})
    return out


def rate(configs: list[dict[str, int]], drop: bool) -> float:
    """Calls per second of one round (``drop``: forget the kept bound models before each call)."""
    start = time.perf_counter()
    for c in configs:
        if drop:
            kept.clear()
        # a split the rules refuse (the batch does not divide) is refused as fast as answered
        with contextlib.suppress(sweep.InputError):
            sweep.estimate(MODEL, MACHINE, STRATEGY, p=1024, global_batch=1536, **c)
    return len(configs) / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each kind (median reported)")
    args = ap.parse_args()
    configs = splits()
    rate(configs[:3], drop=False)  # compile once
    warm, cold = [], []
    for _ in range(args.rounds):
        warm.append(rate(configs, drop=False))
        cold.append(rate(configs[:24], drop=True))
    w, c = statistics.median(warm), statistics.median(cold)
    print(f"sweep.estimate, {MODEL} on {MACHINE}, {len(configs)} splits a round, {args.rounds} rounds")
    print(f"  warm (bound model kept):   {w:9.0f} calls/s")
    print(f"  bound again every call:    {c:9.0f} calls/s")
    print(f"  ratio warm / bound again:  {w / c:9.1f}")


if __name__ == "__main__":
    main()
