"""Does the model order strategies as the measurements do? Fastest-strategy hits and Kendall's tau.

For each (model, p) where two or more strategies were measured, strategies
are ranked by time per sample, ``t_iter / B`` (``B`` the global batch: ``p b``
for data parallelism, ``(p / p2) b`` for the hybrids, ``b`` for the pure
model-parallel strategies and pipelining), which orders them as their epoch
times do; a strategy measured several times at that ``p`` (other batches, or
twice) counts with the geometric mean of its runs, measured and predicted
alike. Per (model, p): whether the predicted fastest is the measured fastest,
and Kendall's tau-a between the two orders,

.. math::
    \\tau = \\frac{C - D}{n (n - 1) / 2}

(``C`` concordant, ``D`` discordant pairs). Pooled over a model's ``p`` (or
every model): ``(sum C - sum D) / sum pairs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweep.inputs.configs import own_values
from sweep.inputs.measured import Measurements, Run


def global_batch(run: Run) -> int:
    """Samples per iteration over all GPUs (see the module docstring)."""
    return int(own_values(run.strategy, run.p, run.b, run.p2, run.S, run.own).B)


@dataclass(frozen=True)
class Ranking:
    """One (model, p): strategies by measured and predicted time per sample."""

    model: str
    p: int
    strategies: tuple[str, ...]
    measured: np.ndarray  # geometric mean time per sample per strategy
    predicted: np.ndarray

    @property
    def pairs(self) -> tuple[int, int, int]:
        """(concordant, discordant, pairs)."""
        c = d = 0
        n = len(self.strategies)
        for i in range(n):
            for j in range(i + 1, n):
                s = np.sign(self.measured[i] - self.measured[j]) * np.sign(
                    self.predicted[i] - self.predicted[j]
                )
                c += s > 0
                d += s < 0
        return int(c), int(d), n * (n - 1) // 2

    @property
    def tau(self) -> float:
        c, d, n = self.pairs
        return (c - d) / n

    @property
    def hit(self) -> bool:
        """The predicted fastest is the measured fastest."""
        return int(np.argmin(self.measured)) == int(np.argmin(self.predicted))


def rankings(meas: Measurements, pred_s: Sequence[float] | np.ndarray) -> list[Ranking]:
    """Every (model, p) with two or more strategies measured, in order of first appearance."""
    pred = np.asarray(pred_s, np.float64)
    per: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = {}
    for run, t in zip(meas.runs, pred, strict=True):
        if not np.isfinite(t):
            continue
        batch = global_batch(run)
        per.setdefault((run.model, run.p), {}).setdefault(run.strategy, []).append(
            (run.iter_time_s / batch, float(t) / batch)
        )
    out = []
    for (model, p), by in per.items():
        if len(by) < 2:
            continue
        names = tuple(by)
        m = np.array([np.exp(np.mean(np.log([x for x, _ in by[s]]))) for s in names])
        q = np.array([np.exp(np.mean(np.log([y for _, y in by[s]]))) for s in names])
        out.append(Ranking(model, p, names, m, q))
    return out


def pooled(rows: Sequence[Ranking]) -> tuple[int, int, float]:
    """(hits, cases, pooled tau) over ``rows``."""
    c = d = n = 0
    for r in rows:
        a, b, k = r.pairs
        c, d, n = c + a, d + b, n + k
    return sum(r.hit for r in rows), len(rows), (c - d) / n if n else float("nan")


def ranking_lines(rows: Sequence[Ranking]) -> list[str]:
    """Per (model, p), then per model and overall: fastest hit and Kendall's tau."""
    if not rows:
        return ["rankings: no (model, p) with two or more strategies measured"]
    out = ["rankings (time per sample; strategies measured at the same model and p):"]
    out.append(f"{'model':<14} {'p':>5} {'fastest measured':<17} {'fastest predicted':<17} {'tau':>6}")
    for r in rows:
        out.append(
            f"{r.model:<14} {r.p:>5} {r.strategies[int(np.argmin(r.measured))]:<17} "
            f"{r.strategies[int(np.argmin(r.predicted))]:<17} {r.tau:>6.2f}"
        )
    for model in dict.fromkeys(r.model for r in rows):
        hits, cases, tau = pooled([r for r in rows if r.model == model])
        out.append(f"{model:<14} {'all':>5} fastest right {hits}/{cases}, Kendall tau {tau:.2f}")
    hits, cases, tau = pooled(rows)
    out.append(f"{'all':<14} {'all':>5} fastest right {hits}/{cases}, Kendall tau {tau:.2f}")
    return out
