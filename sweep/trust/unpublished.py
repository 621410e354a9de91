"""Settings a measured run does not publish: predicted with the fastest feasible legal value.

A measured-run file's empty own-axis cell (``recompute`` of NeMo's published H100 runs, say)
means the setting was not published (:attr:`sweep.inputs.measured.Run.unpublished`). Published
runs were tuned by the people who ran them, so the run is predicted with the value of each such
setting, among its legal values (the ones co-design chooses from), that the model finds fastest
and feasible on the run's machine, the published settings held as given (docs/trust.md). Every
combination of the unpublished axes' legal values is one candidate run; the candidates of all
runs are predicted together (:func:`sweep.trust.validation.predict`, one compiled call per
machine, model and strategy) and each run takes its fastest feasible candidate, the first in
the legal values' order on a tie. A run none of whose candidates is feasible is skipped with
its reason. The choice is made once, on the machine as given: calibration keeps it while it
fits the machine's parameters.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from kernels.strategies import registry
from sweep.inputs.configs import Bound, Own
from sweep.inputs.configs import labels as own_labels
from sweep.inputs.measured import Measurements, Run, Skipped, configured


def legal(bound: Bound, strategy: str, p: int, axis: str) -> tuple[int, ...]:
    """The legal values (codes) of one own axis of ``strategy`` on the bound model at ``p``:
    the values co-design chooses from (:meth:`kernels.strategies.registry.Strategy.legal`)."""
    return registry.entry(strategy).legal(bound.net, p, axis)


def candidates(run: Run, bound: Bound) -> tuple[list[Run], list[str]]:
    """Every configuration ``run`` may have been, its unpublished axes over their legal values
    (:func:`legal`), and why each of the others cannot exist."""
    lists = [legal(bound, run.strategy, run.p, axis) for axis in run.unpublished]
    out, why = [], []
    for values in itertools.product(*lists):
        own = Own(**{**run.own._asdict(), **dict(zip(run.unpublished, values, strict=True))})
        settled = configured(run, own, bound)
        if isinstance(settled, str):
            why.append(settled)
        else:
            out.append(settled)
    return out, why


def chosen(run: Run) -> str:
    """``axis=value`` of each value taken for an unpublished setting (``""`` for none)."""
    named = own_labels(run.own)
    return " ".join(f"{axis}={named[axis]}" for axis in run.unpublished)


def fill(meas: Measurements, strict: bool = False) -> Measurements:
    """``meas`` with every unpublished setting set to its fastest feasible legal value (the
    module docstring); ``fields`` show the value taken. Runs with none feasible are skipped
    (an :class:`~sweep.errors.InputError` with ``strict``). Needs JAX (call it inside
    :func:`sweep.engine.backend.computation`)."""
    from sweep.errors import InputError, where
    from sweep.trust.validation import predict

    todo = [i for i, run in enumerate(meas.runs) if run.unpublished]
    if not todo:
        return meas
    tried: list[Run] = []
    owner: list[int] = []
    reasons: dict[int, list[str]] = {}
    for i in todo:
        found, reasons[i] = candidates(meas.runs[i], meas.bound(meas.runs[i]))
        tried += found
        owner += [i] * len(found)
    pred = predict(replace(meas, runs=tried, skipped=[])) if tried else None
    runs, skipped = list(meas.runs), list(meas.skipped)
    for i in todo:
        run = meas.runs[i]
        at = [j for j, o in enumerate(owner) if o == i]
        ok = [j for j in at if pred is not None and pred.limit_reason[j] is None]
        ok = [j for j in ok if pred is not None and np.isfinite(pred.t_iter_s[j])]
        if not ok:
            limits = sorted({str(pred.limit_reason[j]) for j in at}) if pred is not None else []
            why = "; ".join(dict.fromkeys([*reasons[i][:1], *(f"limit {x}" for x in limits)]))
            message = f"no legal value of the unpublished {', '.join(run.unpublished)} is feasible ({why})"
            if strict:
                raise InputError(message, where(meas.path, run.line))
            skipped.append(Skipped(run.line, message))
            runs[i] = None  # type: ignore[call-overload]
            continue
        best = tried[min(ok, key=lambda j: (pred.t_iter_s[j], j))]  # type: ignore[union-attr]
        taken = own_labels(best.own)
        fields = {**best.fields, **{axis: str(taken[axis]) for axis in run.unpublished}}
        runs[i] = replace(best, fields=fields)
    skipped.sort(key=lambda s: s.line)
    return replace(meas, runs=[r for r in runs if r is not None], skipped=skipped)
