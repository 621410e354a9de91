"""The configurations a co-design question chooses from (docs/model.md §2, §16).

For one strategy at a GPU count: its p, b, p2 and S and its own axes
(data+tensor+pipeline's tp, pp, recompute, zero, ...), every legal value of
an own axis unless the question lists them (the registry's ``legal``), a fixed
global batch split into samples per replica and micro-batches by the
configuration request's one completion (:func:`sweep.inputs.configs.complete`),
configurations where it does not split kept and marked (limit ``batch``).
:class:`Candidates` holds them as one float64 matrix, which co-design vmaps
its evaluator over.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from kernels import Config
from kernels.strategies import registry
from sweep.errors import InputError
from sweep.inputs.configs import Bound, Request, complete, default_p2, p2_fits


class Question(Protocol):
    """What :func:`candidates` reads of a question (:class:`sweep.answers.codesign.Question`)."""

    @property
    def p(self) -> int: ...
    @property
    def b(self) -> tuple[int, ...] | None: ...
    @property
    def B(self) -> tuple[int, ...] | None: ...
    @property
    def p2(self) -> tuple[int, ...] | None: ...
    @property
    def S(self) -> tuple[int, ...] | None: ...
    @property
    def micro_batch(self) -> tuple[int, ...] | None: ...
    @property
    def own(self) -> tuple[tuple[str, tuple[int, ...]], ...]: ...


class Candidates(NamedTuple):
    """The configurations of one strategy a question chooses from: ``rows[n, len(columns)]``
    (float64 values of the :class:`kernels.Config` fields ``columns``) and ``valid[n]``, false
    where the global batch does not split (limit ``batch``)."""

    rows: np.ndarray
    valid: np.ndarray
    columns: tuple[str, ...]


def _refused(entry: registry.Strategy, net, p: int, values: dict, given: Container[str]) -> bool:
    """Whether a combination of own values breaks a rule of the registry that reads only p and
    own axes none of which the question lists (tp x pp not dividing p when both come from the
    default lists): the default lists hold only combinations that can run. A listed value is
    kept, for the kernel to mark infeasible."""
    v = registry.values(entry, net, {"p": p, "b": 1, "S": 1, **values})
    batch = {"b", "S", "micro_batch"}
    return any(
        bool(rule.broken(v))
        for rule in entry.rules
        if not batch & set(rule.params) and not any(x in given for x in rule.params)
    )


def candidates(bound: Bound, strategy: str, q: Question) -> Candidates:
    """The configurations of one strategy at ``q.p``: each a :class:`~sweep.inputs.configs.Request`
    completed by :func:`~sweep.inputs.configs.complete` (p2 and S defaults, b = B / p1 from a fixed
    global batch, ``valid`` false where it does not split: b and S then rounded down, at least 1,
    so that the row still evaluates); hybrids keep p2 | p; a strategy's own axes take ``q.own``'s
    lists, else the registry's legal values (:meth:`~kernels.strategies.registry.Strategy.legal`;
    a combination of them that breaks a rule, tp x pp not dividing p, is left out); data+tensor+pipeline's micro-batch sizes are
    ``q.micro_batch``, else every divisor of b (S = b / size) unless ``q.S`` lists S."""
    entry = registry.entry(strategy)
    gpn = default_p2(bound.profile)
    p = q.p
    given = dict(q.own)
    names = tuple(a.name for a in entry.own)
    lists = [given[n] if n in given else entry.legal(bound.net, p, n) for n in names]
    uses_S = entry.uses("S")
    p2s = (q.p2 or (None,)) if entry.uses("p2") else (None,)
    Ss = (q.S or (None,)) if uses_S and not q.micro_batch else (None,)
    batches = [(None, big) for big in q.B] if q.B else [(b, None) for b in q.b or ()]
    rows: dict[tuple, bool] = {}
    for own in itertools.product(*lists):
        values = dict(zip(names, own, strict=True))
        if _refused(entry, bound.net, p, values, given):
            continue
        for given_p2, given_S, (b_given, big) in itertools.product(p2s, Ss, batches):
            request = Request(strategy, p, b_given, given_p2, given_S, big, None, tuple(values.items()))
            done = complete(request, gpn)
            p2 = done.config[2]
            if entry.uses("p2") and not p2_fits(p, p2):
                continue
            b, ok_b = max(int(done.b), 1), big is None or bool(done.fits)
            if not ok_b and not entry.own:
                continue  # a paper strategy's batch that does not split is left out
            if q.micro_batch and uses_S:
                sizes: Sequence[int | None] = q.micro_batch
            elif uses_S and entry.own and not q.S:
                sizes = [m for m in range(1, b + 1) if b % m == 0]  # every legal micro-batch
            else:
                sizes = [None]
            for mb in sizes:
                S = done.config[3] if mb is None else max(b // mb, 1)
                ok = ok_b and (mb is None or b % mb == 0)
                key = (p, b, p2, S, *own)
                rows[key] = rows.get(key, False) or ok
    keys = sorted(rows)
    columns = ("p", "b", "p2", "S", *names)
    array = np.asarray(keys, dtype=np.float64).reshape(-1, len(columns))
    return Candidates(array, np.asarray([rows[k] for k in keys], bool), columns)


def broken_rows(bound: Bound, strategy: str, c: Candidates, machine=None) -> np.ndarray:
    """The limit code of the first rule of the strategy's registry entry each candidate breaks
    (:meth:`~kernels.strategies.registry.Strategy.limit`, on ``machine``: None, the rules
    reading the machine hold), 0 where it breaks none."""
    entry = registry.entry(strategy)
    given = {name: c.rows[:, i] for i, name in enumerate(c.columns)}
    codes = entry.limit(registry.values(entry, bound.net, given, machine))
    return np.broadcast_to(np.asarray(codes, np.int64), c.valid.shape)


def refuse_unanswerable(bound: Bound, strategy: str, c: Candidates, p: int, machine=None) -> None:
    """An :class:`InputError` when no candidate of ``strategy`` can run because of a rule of its
    registry entry (each breaks one, or has a global batch that does not split while the first
    candidate breaks one): it names the rule of the first valid candidate (else the first) and
    its parameters. Co-design's question has no answer at any value of its parameter."""
    codes = broken_rows(bound, strategy, c, machine)
    if not len(codes) or (c.valid & (codes == 0)).any():
        return
    i = int(np.argmax(c.valid)) if c.valid.any() else 0
    found = registry.entry(strategy).broken(
        bound.net, dict(zip(c.columns, c.rows[i].tolist(), strict=True)), machine
    )
    if found is not None:
        raise InputError(
            f"strategy {strategy} has no configuration at p = {p} that can run: {found.message}",
            param=found.rule.params,
        )


def configurations(bound: Bound, strategy: str, q: Question) -> np.ndarray:
    """``[n, 4 + own axes]`` float64 rows (p, b, p2, S, then the strategy's own axes) of the valid
    configurations of one strategy at ``q.p`` (:func:`candidates`)."""
    c = candidates(bound, strategy, q)
    return c.rows[c.valid]


def config_columns(strategy: str) -> tuple[str, ...]:
    """The :class:`kernels.Config` fields of a strategy's :class:`Candidates` rows."""
    return ("p", "b", "p2", "S", *(a.name for a in registry.entry(strategy).own))


def row_config(strategy: str, row) -> Config:
    """The :class:`kernels.Config` of one :class:`Candidates` row of ``strategy`` (or of a batch
    of rows, under vmap)."""
    return Config(**{c: row[i] for i, c in enumerate(config_columns(strategy))})


def check_lists(q: Question, strategies: Sequence[str]) -> None:
    """An :class:`InputError` unless the question's own-axis lists name axes of ``strategies``
    with legal values, and it gives S or micro-batch sizes, not both."""
    entries = [registry.entry(s) for s in strategies]
    for name, values in q.own:
        owners = [e for e in entries if any(a.name == name for a in e.own)]
        if not owners:
            raise InputError(f"{name}: no strategy of the question has this axis", param=name)
        for v in values:
            try:
                owners[0].axis(name).code(v)
            except ValueError as err:
                raise InputError(str(err), param=name) from None
    if q.micro_batch and q.S:
        raise InputError("give S or micro_batch, not both", param=("S", "micro_batch"))


def codes(name: str, values) -> tuple[int, ...]:
    """A list of an own axis's values as codes (a categorical axis takes its names)."""
    if name not in registry.OWN_AXES:
        raise InputError(f"unknown axis '{name}' (strategies' own axes: {', '.join(registry.OWN_AXES)})")
    axis = registry.OWN_AXES[name]
    items = [values] if isinstance(values, int | str) else list(values)
    if not items:
        raise InputError(f"{name} is empty", param=name)
    try:
        return tuple(axis.code(v) for v in items)
    except ValueError as err:
        raise InputError(str(err), param=name) from None
