"""Co-design with the software re-optimised: GPT-3 175B on 1,024 GPUs over every legal split.

    python -m benchmarks.bench_codesign            # ~1 minute on 2 cores

The question of docs/tutorial-codesign.md: what inter-node bandwidth does
GPT-3 175B on 1,024 A100s (a100-ib800) need for an iteration of at most
TARGET seconds at a global batch of 1,536 sequences, with the best
data+tensor+pipeline split (tp, pp, micro-batch, recompute, zero: every
legal value) chosen at every bandwidth. Prints the number of
configurations, the time to bind the model (its tables), the first answer
(compiling) and the median of three warm answers, each a fresh
``sweep.codesign`` call in this process (binding included) and the solve
alone on a bound model.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

import sweep
from sweep.answers.codesign import Question, candidates, parse_target, solve
from sweep.engine import backend
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

MODEL, MACHINE, STRATEGY, PARAM = "gpt3-175b", "a100-ib800", "data+tensor+pipeline", "inter_bandwidth_Bps"
P, GLOBAL_BATCH = 1024, 1536
TARGET = "t_epoch_s <= 2592000"  # 30 days: an epoch of gpt3-175b is its 300e9 training tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm answers timed [3]")
    args = parser.parse_args()
    t = time.perf_counter()
    bound = Bound.of(load_model(MODEL), load_machine(MACHINE))
    bind_s = time.perf_counter() - t
    q = Question((STRATEGY,), PARAM, P, B=(GLOBAL_BATCH,), target=parse_target(TARGET))
    n = int(candidates(bound, STRATEGY, q).valid.sum())

    def call():
        return sweep.codesign(MODEL, MACHINE, STRATEGY, PARAM, p=P, global_batch=GLOBAL_BATCH, target=TARGET)

    def solve_only():
        with backend.settings(jax_enable_x64=True):
            return solve(bound, q)

    t = time.perf_counter()
    [first] = call()
    cold = time.perf_counter() - t
    warm, alone = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        [answer] = call()
        warm.append(time.perf_counter() - t)
        t = time.perf_counter()
        solve_only()
        alone.append(time.perf_counter() - t)
    assert answer.threshold == first.threshold
    print(f"{MODEL} on {P:,} GPUs of {MACHINE}, global batch {GLOBAL_BATCH:,}, '{TARGET}' over {PARAM}")
    print(f"configurations (every legal tp, pp, micro-batch, recompute, zero): {n:,}")
    print(f"devices: {jax.device_count()} {jax.devices()[0].platform}")
    print(f"bind the model (tables):             {bind_s:6.2f} s")
    print(f"first answer (compiling):            {cold:6.2f} s")
    print(
        f"warm answer, median of {args.repeat}:           {statistics.median(warm):6.2f} s  (sweep.codesign)"
    )
    print(f"warm solve on a bound model, median: {statistics.median(alone):6.2f} s")
    print(f"threshold: {answer.threshold!r} B/s; verdict: {answer.verdict()}")


if __name__ == "__main__":
    main()
