"""The running result of ``--keep``: a Pareto front or top-k over chunk survivors, on the host.

Rows carry their identity (job, flat index) and ties are broken by it, so
the result does not depend on the order chunks arrive in: local, Dask and
sharded runs keep the same rows.

A Pareto front can hold millions of rows that tie in every objective (a
configuration inside one node takes the same time at every network
setting). Whether a row is on the front depends only on its objective
vector, so once too many rows are kept in memory (:func:`spill_due`) they go to a
file in the output folder (a *spill*, sorted by identity), and only their
distinct objective vectors stay in memory (:attr:`Reducer.front`), where
later rows are reduced against them. Reading the result streams the spills
back, keeps the rows whose vector is still on the front, and merges them
with the rows in memory by identity. Memory is then bounded by the distinct
objective vectors of the front, not by its rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sweep.output import store
from sweep.reduce.keep import Keep, Survivors
from sweep.reduce.pareto import distinct_optima, dominated_2, front_2, pareto_mask, top_k_order

#: Buffered reduction candidates that trigger a reduction even when few rows are kept.
REDUCE_ROWS = 1 << 16
#: Rows of a Pareto front kept in memory before they spill to disk when the process is
#: large (about 100 bytes each, and about three times that while a reduction sorts them
#: with as many new candidates), where compiled kernels and the compiler's arenas already
#: hold much of the memory (docs/performance.md#memory).
SPILL_ROWS = 1 << 19
#: Rows kept before they spill whatever the process's size (about 100 MB, 300 MB while
#: reduced). Below :data:`SPILL_RSS` a front of this many rows is written in one pass,
#: faster than through spills.
SPILL_ROWS_MAX = 1 << 20
#: Resident bytes of the process above which a front spills at :data:`SPILL_ROWS` rows.
SPILL_RSS = 1 << 30


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def spill_due(rows: int) -> bool:
    """Whether a front of ``rows`` rows in memory goes to disk: at :data:`SPILL_ROWS_MAX`
    rows, or from :data:`SPILL_ROWS` when the process holds :data:`SPILL_RSS` or more (or
    its size cannot be read)."""
    if rows < max(SPILL_ROWS, 1):
        return False
    if rows >= SPILL_ROWS_MAX:
        return True
    rss = resident_bytes()
    return rss is None or rss >= SPILL_RSS


#: The label columns of a state file, dictionary-encoded.
LABELS = ("model", "machine", "strategy")
#: Rows per block when spills are read back (per spill at once, while merging).
BATCH_ROWS = 1 << 18

#: Rows held together: (ints [Fi, n] int32, floats [Ff, n] in the run's float type,
#: limit [n] int8, ids [n, 2] (job, flat index) int64, label codes [n] int32, tied [n]
#: int64: the configurations each row stands for).
Block = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: Arrays in a :data:`Block`.
BLOCK_ARRAYS = 6


def identity(ids: np.ndarray) -> np.ndarray:
    """One sortable key per row from its (job, flat index), the order ties are broken in."""
    return ids[:, 0] * (1 << 40) + ids[:, 1]


def _take(block: Block, sel) -> Block:
    ints, floats, limit, ids, codes, tied = block
    return ints[:, sel], floats[:, sel], limit[sel], ids[sel], codes[sel], tied[sel]


def _concat(blocks: list[Block]) -> Block:
    if len(blocks) == 1:
        return blocks[0]
    return tuple(  # type: ignore[return-value]
        np.concatenate([b[i] for b in blocks], axis=1 if i < 2 else 0) for i in range(BLOCK_ARRAYS)
    )


def _split(block: Block, size: int) -> Iterator[Block]:
    n = len(block[2])
    for lo in range(0, n, size):
        yield _take(block, slice(lo, lo + size))


def _nonempty(blocks: Iterator[Block]) -> Iterator[Block]:
    return (b for b in blocks if len(b[2]))


def merge_sorted(runs: Iterable[tuple[int, Iterator[Block]]]) -> Iterator[Block]:
    """Blocks of several runs, each sorted by :func:`identity`, merged into one sorted stream.

    Each run comes with a lower bound of its first key, and is opened only
    when the merge reaches it: runs that do not overlap (the spills of a
    local run) are read one after another. Every round emits the rows up to
    the least of the open runs' last buffered keys, which empties at least
    one buffer.
    """
    waiting = sorted(((first, i, _nonempty(it)) for i, (first, it) in enumerate(runs)), key=lambda w: w[:2])
    waiting.reverse()  # next to open at the end
    bufs: list[tuple[Block, Iterator[Block]]] = []

    def open_next() -> None:
        _first, _i, it = waiting.pop()
        block = next(it, None)
        if block is not None:
            bufs.append((block, it))

    while bufs or waiting:
        if not bufs:
            open_next()
            continue
        keys = [identity(b[3]) for b, _ in bufs]
        cut = min(int(k[-1]) for k in keys)
        if waiting and waiting[-1][0] <= cut:  # a run that may hold rows up to the cut
            open_next()
            continue
        pieces, left = [], []
        for (block, it), k in zip(bufs, keys, strict=True):
            n = int(np.searchsorted(k, cut, side="right"))
            if n:
                pieces.append(_take(block, slice(0, n)))
            if n < len(k):
                left.append((_take(block, slice(n, None)), it))
            elif (more := next(it, None)) is not None:
                left.append((more, it))
        bufs = left
        if len(pieces) == 1:
            yield pieces[0]
        else:
            joined = _concat(pieces)
            yield _take(joined, np.argsort(identity(joined[3]), kind="stable"))


def _distinct(objs: np.ndarray) -> np.ndarray:
    """The distinct rows of ``objs`` ``[n, k]`` (numeric equality: -0.0 equals 0.0)."""
    if len(objs) < 2:
        return objs
    s = objs[np.lexsort(objs.T[::-1])]
    head = np.ones(len(s), dtype=bool)
    head[1:] = (s[1:] != s[:-1]).any(axis=1)
    return s[head]


def _hash(objs: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of float64 ``objs``, equal for numerically equal rows."""
    bits = np.ascontiguousarray(objs + 0.0).view(np.uint64)  # + 0.0: -0.0 becomes 0.0
    h = np.zeros(len(objs), np.uint64)
    for j in range(objs.shape[1]):
        h = (h ^ bits[:, j]) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(31)
    return h


class Members:
    """Membership of objective vectors in a set of distinct vectors, exact (hash, then compare)."""

    def __init__(self, vectors: np.ndarray):
        h = _hash(vectors)
        order = np.argsort(h)
        self.h, self.vectors = h[order], vectors[order]

    def __call__(self, objs: np.ndarray) -> np.ndarray:
        out = np.zeros(len(objs), dtype=bool)
        if not len(self.h) or not len(objs):
            return out
        h = _hash(objs)
        lo = np.searchsorted(self.h, h, side="left")
        hi = np.searchsorted(self.h, h, side="right")
        one = np.flatnonzero(hi - lo == 1)
        out[one] = (self.vectors[lo[one]] == objs[one]).all(axis=1)
        for r in np.flatnonzero(hi - lo > 1):  # distinct vectors sharing a hash: compare each
            out[r] = (self.vectors[lo[r] : hi[r]] == objs[r]).all(axis=1).any()
        return out


class Reducer:
    """Running Pareto front or top-k over chunk survivors, with the identity (job, index) of each row.

    Candidates are buffered and reduced together once they outnumber the
    rows kept so far (or :data:`REDUCE_ROWS`), so a front of many tied rows
    is re-sorted O(log n) times, not once per chunk. Rows stay in the blocks
    they arrived in: a reduction sorts only the objective columns and copies
    a block only when it loses some rows, and rows are put in output order
    only when the result is read (:meth:`blocks`).

    With a ``folder``, a Pareto front spills there (files :func:`sweep.output.store.spill_name`
    in the state format of :meth:`state_table`) once :func:`spill_due` says its
    rows in memory are too many; see the module's docstring. :attr:`spills` names them,
    for a checkpoint's manifest (:meth:`adopt` takes them back on resume).
    """

    def __init__(
        self, keep: Keep, schema: store.Schema, folder: Path | None = None, prefix: str = store.spill_prefix()
    ):
        self.keep = keep
        self.schema = schema
        self.ni = len(schema.int_columns)
        self.names = (*schema.int_columns, *schema.float_columns)
        self.float_dtype = schema.float_dtype
        # where each objective is: (0, row of ints) or (1, row of floats)
        self.objectives = [self._at(c) for c in keep.columns]
        # a swept machine parameter is held as its axis digit: objective k's values by digit
        self.by_digit = [
            None if c not in schema.axis_values else np.asarray(schema.axis_values[c], np.float64)
            for c in keep.columns
        ]
        self.parts: list[Block] = []  # about 100 bytes a row in float32
        self.kept = 0  # rows in memory after the last reduction
        self.pending = 0  # rows added since
        self.label_codes: dict[tuple[str, str, str], int] = {}  # (model, machine, strategy) -> code
        # a front of distinct optima holds a row per distinct vector, as many as a spilled front
        # keeps in memory anyway (:attr:`front`): it never spills
        self.folder = folder if keep.kind == "pareto" and keep.ties else None
        self.prefix = prefix
        self.spills: list[str] = []
        self.spill_first: dict[str, int] = {}  # each spill's least identity
        self.spill_seq = 0
        # distinct objective vectors of spilled rows not dominated by any row seen
        self.front = np.zeros((0, len(keep.columns)))
        # of two objectives and no spill: the distinct vectors of the rows kept in memory (see
        # :meth:`_merge_2`); None when unknown
        self.vectors: np.ndarray | None = np.zeros((0, 2))

    def held(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The answer so far, reduced: the kept rows' objectives ``[n, k]`` (float64), identities
        ``[n, 2]`` (job, index) and ``tied`` counts, in no particular order. For a reduction
        that does not spill (no ``folder``): a spilled front's rows are on disk.

        A query over a written dataset (:mod:`sweep.answers.query`) feeds its batches to a
        reducer per group and screens the next batch with these objectives.
        """
        assert not self.spills, "held() of a spilled front"
        self._reduce()
        if not self.parts:
            return np.zeros((0, len(self.objectives))), np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
        block = _concat(self.parts) if len(self.parts) > 1 else self.parts[0]
        self.parts = [block]
        return self._objectives(block), block[3], block[5]

    def _at(self, column: str) -> tuple[int, int]:
        i = self.names.index(column)
        return (0, i) if i < self.ni else (1, i - self.ni)

    def add(self, job: int, labels: tuple[str, str, str], index: np.ndarray, found: Survivors) -> None:
        """Candidate rows of ``job`` at flat indices ``index``."""
        ids = np.stack([np.full(len(index), job, dtype=np.int64), index.astype(np.int64)], axis=1)
        code = self.label_codes.setdefault(tuple(labels), len(self.label_codes))  # type: ignore[arg-type]
        block: Block = (
            found.ints.astype(np.int32, copy=False),
            found.floats.astype(self.float_dtype, copy=False),
            found.limit.astype(np.int8),
            ids,
            np.full(len(index), code, np.int32),
            np.ones(len(index), np.int64) if found.tied is None else found.tied.astype(np.int64),
        )
        if self.keep.kind == "top":  # a NaN objective never qualifies; the device may pass some on
            kind, row = self.objectives[0]
            number = ~np.isnan(block[kind][row])
            if not number.all():
                block = _take(block, number)
        self._append(block)

    def _append(self, block: Block) -> None:
        if len(block[2]):
            self.parts.append(block)
        self.pending += len(block[2])
        due = max(self.kept + len(self.front), REDUCE_ROWS)
        if self.pending >= (min(due, SPILL_ROWS) if self.folder is not None else due):
            self._reduce()

    def _objectives(self, block: Block) -> np.ndarray:
        """``[n, k]`` float64 objectives of a block's rows."""
        return np.stack(
            [self._values(k, block[kind][row]) for k, (kind, row) in enumerate(self.objectives)], axis=1
        )

    def _objective(self, k: int) -> np.ndarray:
        """Objective ``k`` of every buffered row, as float64."""
        kind, row = self.objectives[k]
        return self._values(k, np.concatenate([p[kind][row] for p in self.parts]))

    def _values(self, k: int, column: np.ndarray) -> np.ndarray:
        """Objective ``k`` of rows as float64: a swept machine parameter's digits mapped to its values."""
        table = self.by_digit[k]
        return np.asarray(column, np.float64) if table is None else table[column]

    def _reduce(self) -> None:
        if self.pending == 0:
            return
        if self.keep.kind == "pareto" and len(self.objectives) == 2 and not len(self.front):
            kept = self._merge_2()
        elif self.keep.kind == "pareto":
            objs = np.stack([self._objective(k) for k in range(len(self.objectives))], axis=1)
            m = len(self.front)
            if m:  # the spilled rows' vectors take part: rows they dominate go, and they go when dominated
                mask = pareto_mask(np.concatenate([self.front, objs]))
                self.front, kept = self.front[mask[:m]], mask[m:]
            else:
                kept = pareto_mask(objs)
            del objs
            self.vectors = None
        else:  # the k best, ties by (job, index)
            ids = np.concatenate([p[3] for p in self.parts])
            kept = np.zeros(len(ids), dtype=bool)
            kept[top_k_order(self._objective(0), identity(ids), self.keep.k)] = True
        parts, first = [], 0
        for part in self.parts:
            mine = kept[first : first + len(part[2])]
            first += len(part[2])
            if mine.all():
                parts.append(part)
            elif mine.any():
                parts.append(_take(part, mine))
        self.parts = parts
        self.kept, self.pending = int(kept.sum()), 0
        if self.keep.distinct:
            self._collapse()
        if self.folder is not None and spill_due(self.kept):
            self._spill()

    def _collapse(self) -> None:
        """One row per distinct objective vector of the rows in memory (a front's):
        :func:`sweep.reduce.pareto.distinct_optima` by :func:`identity`. The rows stay in the
        order they arrived in."""
        if not self.parts:
            return
        block = _concat(self.parts)
        rows, tied = distinct_optima(self._objectives(block), identity(block[3]), block[5])
        if len(rows) < len(block[2]):
            block = (*_take(block, rows)[:5], tied)  # type: ignore[assignment]
        self.parts, self.kept = [block], len(rows)

    def _merge_2(self) -> np.ndarray:
        """The rows in memory that stay on a front of two objectives (a mask, in order).

        The rows kept by the last reduction are a front, and :attr:`vectors`
        holds its distinct vectors (few where its rows tie): a new row goes
        when one of them dominates it (:func:`sweep.reduce.pareto.dominated_2`), and
        only the rows left, with those vectors, are sorted; a kept row goes
        only when its vector does. Otherwise a front of many tied rows would
        have all of them sorted at every reduction.
        """
        a, b = self._objective(0), self._objective(1)
        old = self.kept
        if self.vectors is None:  # the spills' vectors were all dominated: every row once
            kept, self.vectors = front_2(a, b, ~(np.isnan(a) | np.isnan(b)))
            return kept
        vectors, new_a, new_b = self.vectors, a[old:], b[old:]
        fresh = ~(np.isnan(new_a) | np.isnan(new_b)) & ~dominated_2(vectors, new_a, new_b)
        both_a = np.concatenate([vectors[:, 0], new_a[fresh]])
        both_b = np.concatenate([vectors[:, 1], new_b[fresh]])
        mask, self.vectors = front_2(both_a, both_b, np.ones(len(both_a), dtype=bool))
        kept = np.zeros(len(a), dtype=bool)
        kept[old:][fresh] = mask[len(vectors) :]
        stays = mask[: len(vectors)]
        if stays.all():
            kept[:old] = True
        else:  # a kept row's vector is one of vectors, whose first objective is distinct
            kept[:old] = stays[np.searchsorted(vectors[:, 0], a[:old])]
        return kept

    def _ordered(self) -> Block:
        """Every row in memory, reduced, in output order: Pareto by identity, top-k best first."""
        self._reduce()
        if not self.parts:
            return (
                np.zeros((self.ni, 0), np.int32),
                np.zeros((len(self.names) - self.ni, 0), self.float_dtype),
                np.zeros(0, np.int8),
                np.zeros((0, 2), np.int64),
                np.zeros(0, np.int32),
                np.zeros(0, np.int64),
            )
        ids = np.concatenate([p[3] for p in self.parts])
        order: np.ndarray | None
        if self.keep.kind == "pareto":
            job, index = ids[:, 0], ids[:, 1]
            # a local run adds its chunks in order, and a reduction keeps the order of the
            # rows it keeps: then they are in order already (no sort, no gather of every column)
            rising = (job[1:] > job[:-1]) | ((job[1:] == job[:-1]) & (index[1:] > index[:-1]))
            order = None if rising.all() else np.lexsort((index, job))
            del job, index, rising
        else:  # the kept rows are the k best: ordering them all is ordering the top k
            order = top_k_order(self._objective(0), identity(ids), len(ids))
        del ids
        # one copy of the rows at a time: each column is joined and ordered, then its
        # blocks are released (a front can hold millions of tied rows)
        parts, self.parts = self.parts, []
        columns = [list(c) for c in zip(*parts, strict=True)]
        del parts
        joined = []
        for i in range(BLOCK_ARRAYS):
            whole = np.concatenate(columns[i], axis=1 if i < 2 else 0)
            columns[i] = []
            joined.append(whole if order is None else whole[..., order] if i < 2 else whole[order])
            del whole
        block: Block = tuple(joined)  # type: ignore[assignment]
        self.parts = [block]
        return block

    def _spill(self) -> None:
        """Write the rows in memory to a new spill and keep only their distinct objective vectors."""
        block = self._ordered()
        self.front = _distinct(np.concatenate([self.front, self._objectives(block)]))
        name = store.spill_name(self.prefix, self.spill_seq)
        self.spill_seq += 1
        write_state(self._path(name), [self._state_table(block)])
        self.spills.append(name)
        self.spill_first[name] = int(identity(block[3][:1])[0])
        self.parts, self.kept, self.vectors = [], 0, None

    def adopt(self, names: list[str]) -> None:
        """Take back the spills of an earlier run of this reduction (a checkpoint's, on resume),
        and delete any other spill of this prefix: written after the last checkpoint (its
        chunks are not recorded as done) or by a run that was killed."""
        if self.folder is not None:
            for f in self.folder.glob(store.spill_glob(self.prefix)):
                if f.name not in names:
                    f.unlink()
        assert self.folder is not None or not names
        columns = [f"v{row if kind == 0 else self.ni + row}" for kind, row in self.objectives]
        for name in names:
            for batch in pq.ParquetFile(self._path(name)).iter_batches(BATCH_ROWS, columns=columns):
                objs = np.stack(
                    [self._values(k, c.to_numpy(zero_copy_only=False)) for k, c in enumerate(batch.columns)],
                    axis=1,
                )
                self.front = _distinct(np.concatenate([self.front, objs]))
            self.spills.append(name)
            first = pq.ParquetFile(self._path(name)).read_row_group(0, columns=["job", "index"])
            self.spill_first[name] = int(first["job"][0].as_py()) * (1 << 40) + int(first["index"][0].as_py())
            self.spill_seq = max(self.spill_seq, store.spill_seq(self.prefix, name) + 1)
        if len(self.front):
            self.front = self.front[pareto_mask(self.front)]

    def _path(self, spill: str) -> Path:
        assert self.folder is not None
        return self.folder / spill

    def discard_spills(self) -> None:
        for name in self.spills:
            self._path(name).unlink(missing_ok=True)
        self.spills = []

    def blocks(self) -> Iterator[Block]:
        """Every kept row in output order, in blocks of at most :data:`BATCH_ROWS` rows."""
        memory = self._ordered()
        if not self.spills:
            if not len(memory[2]):
                yield memory  # an empty result is still one (empty) block
            yield from _split(memory, BATCH_ROWS)
            return
        member = Members(self.front)
        runs = [(self.spill_first[n], self._read(self._path(n), member)) for n in self.spills]
        first = int(identity(memory[3][:1])[0]) if len(memory[2]) else 0
        empty = True
        for block in merge_sorted([*runs, (first, _split(memory, BATCH_ROWS))]):
            empty = False
            yield block
        if empty:
            yield memory

    def _read(self, path: Path, member: Members | None = None) -> Iterator[Block]:
        """Blocks of a state file (a spill, checkpoint or shard's result); with ``member``,
        only the rows whose objective vector it holds."""
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            block = self._decode(batch)
            if member is not None:
                block = _take(block, member(self._objectives(block)))
            if len(block[2]):
                yield block

    def _decode(self, batch: pa.RecordBatch) -> Block:
        n = batch.num_rows
        ints = np.zeros((self.ni, n), np.int32)
        floats = np.zeros((len(self.names) - self.ni, n), self.float_dtype)
        for i in range(len(self.names)):
            col = batch.column(f"v{i}").to_numpy(zero_copy_only=False)
            if i < self.ni:
                ints[i] = np.rint(col)
            else:
                floats[i - self.ni] = col
        ids = np.stack([batch.column(c).to_numpy(zero_copy_only=False) for c in ("job", "index")], axis=1)
        # labels to this reducer's codes, through the batch's distinct (model, machine, strategy)
        positions, dictionaries = [], []
        for c in LABELS:
            col = batch.column(c)
            if not pa.types.is_dictionary(col.type):
                col = pc.dictionary_encode(col)
            positions.append(col.indices.to_numpy(zero_copy_only=False).astype(np.int64))
            dictionaries.append(col.dictionary.to_pylist())
        sizes = [max(len(d), 1) for d in dictionaries]
        key = (positions[0] * sizes[1] + positions[1]) * sizes[2] + positions[2]
        distinct, inverse = np.unique(key, return_inverse=True)
        lookup = np.zeros(len(distinct), np.int32)
        for j, k in enumerate(distinct.tolist()):
            trio = (
                dictionaries[0][k // (sizes[1] * sizes[2])],
                dictionaries[1][(k // sizes[2]) % sizes[1]],
                dictionaries[2][k % sizes[2]],
            )
            lookup[j] = self.label_codes.setdefault(trio, len(self.label_codes))
        limit = batch.column("limit").to_numpy(zero_copy_only=False).astype(np.int8)
        tied = (  # state files written before counts were kept hold one configuration a row
            batch.column(store.TIED).to_numpy(zero_copy_only=False).astype(np.int64)
            if store.TIED in batch.schema.names
            else np.ones(n, np.int64)
        )
        return ints, floats, limit, ids.astype(np.int64).reshape(n, 2), lookup[inverse.reshape(-1)], tied

    def load(self, path: Path) -> None:
        """Add the rows of a state file (a checkpoint, or a shard's result) and reduce."""
        for block in self._read(path):
            self._append(block)
        self._reduce()

    def _labels(self, codes: np.ndarray) -> np.ndarray:
        """``[n, 3]`` (model, machine, strategy) of label codes."""
        table = np.empty((max(len(self.label_codes), 1), 3), dtype=object)
        for labels, code in self.label_codes.items():
            table[code] = labels
        return table[codes].reshape(len(codes), 3)

    def tables(self) -> Iterator[pa.Table]:
        """The result as output tables (the schema's columns), in order, block by block."""
        for ints, floats, limit, _ids, codes, tied in self.blocks():
            # label codes -> (model, machine, strategy) positions in the schema's dictionaries
            lookup = np.zeros((max(len(self.label_codes), 1), 3), dtype=np.int32)
            for (model, machine, strategy), code in self.label_codes.items():
                lookup[code] = (
                    self.schema.models.index(model),
                    self.schema.machines.index(machine),
                    self.schema.strategies.index(strategy),
                )
            yield self.schema.table(lookup[codes], ints, floats, limit, tied)

    def table(self) -> pa.Table:
        """The whole result as one table (small results; :meth:`tables` streams)."""
        return pa.concat_tables(list(self.tables()))

    def state_table(self) -> pa.Table:
        """The rows in memory with their identities, for a checkpoint (the spills are listed apart)."""
        return self._state_table(self._ordered())

    def state_tables(self) -> Iterator[pa.Table]:
        """The whole result with row identities, block by block (a shard's result)."""
        for block in self.blocks():
            yield self._state_table(block)

    def _state_table(self, block: Block) -> pa.Table:
        """Columns ``v0, v1, ...`` are the values in :attr:`names` order (int32, then the run's
        float type; state files written before held float64), ``limit``, ``job``, ``index``,
        ``tied`` (the configurations each row stands for) and the three labels,
        dictionary-encoded."""
        ints, floats, limit, ids, codes, tied = block
        cols: dict[str, Any] = {f"v{i}": ints[i] for i in range(self.ni)}
        cols.update((f"v{self.ni + i}", floats[i]) for i in range(floats.shape[0]))
        cols["limit"] = limit
        cols["job"] = ids[:, 0]
        cols["index"] = ids[:, 1]
        cols[store.TIED] = tied
        names = self._labels(np.arange(len(self.label_codes), dtype=np.int32))
        for j, name in enumerate(LABELS):
            dictionary = pa.array([str(v) for v in names[:, j]], pa.string())
            cols[name] = pa.DictionaryArray.from_arrays(codes, dictionary)
        return pa.table(cols)


def write_state(path: Path, tables: Iterable[pa.Table]) -> int:
    """Write state tables to one file (temporary name, then rename); returns the rows written.

    Only the label columns are dictionary-encoded: building dictionaries of
    the numeric columns took most of a spill's time.
    """
    return store.write_parquet(path, tables, BATCH_ROWS, use_dictionary=list(LABELS))
