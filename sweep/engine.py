"""The vectorized sweep engine: chunks of a job's flat index space through ``jit(vmap(kernel))``.

A chunk is a contiguous range ``[start, start + C)`` of flat indices. The
host decodes the chunk start into mixed-radix digits (Python integers, so
grids beyond 2**31 points work in int32 on the device); the device adds the
local offset with carries, gathers the axis values, evaluates the strategy
kernel for every point, and returns one float matrix of columns plus the
limit codes and a validity mask. The last chunk is padded to C, so each job
compiles once. JAX dispatches asynchronously: chunk i+1 is queued before
chunk i is copied back, so transfers overlap computation.

In-stream reductions (``--keep``) run on the device: a 2-objective Pareto
mask by sort and running minimum, or ``lax.top_k``; only survivors come back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import Config, with_params
from sweep.evaluate import CONFIG_COLUMNS, RESULT_COLUMNS, point_fn
from sweep.grid import CONFIG_AXES, Job

_BIG = 1 << 23  # strides above this use the carry-by-threshold form
#: Largest chunk: offsets and digits stay exact integers in float32 (< 2**24).
MAX_CHUNK = 1 << 22
#: Survivors a reducing chunk returns compacted; more fall back to a full copy.
COMPACT_ROWS = 4096
#: Number of traces (compilations) per (job index, strategy), for tests.
TRACES: dict[tuple[int, str], int] = {}


@dataclass(frozen=True)
class Keep:
    """An in-stream reduction: ``pareto`` over minimised columns, or ``top`` K by one column."""

    kind: str  # "all", "pareto", "top"
    columns: tuple[str, ...] = ()
    k: int = 0

    @property
    def reduces(self) -> bool:
        return self.kind != "all"

    def describe(self) -> str:
        if self.kind == "pareto":
            return "pareto:" + ",".join(self.columns)
        if self.kind == "top":
            return f"top:{self.k}:{self.columns[0]}"
        return "all"


def int_columns(job: Job) -> tuple[str, ...]:
    """Rows of a chunk's int32 matrix: configuration columns, then swept machine parameters (digits)."""
    return (*CONFIG_COLUMNS, *job.machine_axes)


def numeric_columns(job: Job) -> tuple[str, ...]:
    """Every numeric output column of a job, in output order."""
    return (*int_columns(job), *RESULT_COLUMNS)


def decode_info(job: Job, start: int, chunk: int) -> np.ndarray:
    """Per-axis ``[q mod r, m, R, threshold, big]`` for the chunk starting at ``start`` (int32)."""
    radices = [len(v) for v in job.axes.values()]
    rows = []
    for j in range(len(radices)):
        stride = math.prod(radices[j + 1 :])
        q, m = divmod(start, stride)
        big = stride > _BIG
        rows.append(
            [
                q % radices[j],
                0 if big else m,
                1 if big else stride,
                min(stride - m, _BIG) if big else 0,
                int(big),
            ]
        )
    return np.asarray(rows, dtype=np.int32).reshape(len(radices), 5)


def chunk_starts(job: Job, chunk: int) -> Iterator[tuple[int, int]]:
    """(chunk number, start index) over a job."""
    yield from enumerate(range(0, job.size, chunk))


def n_chunks(job: Job, chunk: int) -> int:
    return -(-job.size // chunk)


def _pareto_mask_2d(o1, o2, ok):
    """Non-dominated rows for two minimised objectives (ties: equal rows all survive)."""
    inf = jnp.asarray(jnp.inf, o1.dtype)
    o1 = jnp.where(ok, o1, inf)
    o2 = jnp.where(ok, o2, inf)
    order = jnp.lexsort((o2, o1))
    s1, s2 = o1[order], o2[order]
    cm = jax.lax.cummin(s2)
    cm_excl = jnp.concatenate([jnp.full((1,), inf, s2.dtype), cm[:-1]])
    idx = jnp.arange(s1.shape[0])
    head = jnp.concatenate([jnp.ones((1,), bool), (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])])
    head_idx = jax.lax.cummax(jnp.where(head, idx, 0))
    survive_sorted = (cm_excl[head_idx] > s2) & ok[order]
    return jnp.zeros_like(ok).at[order].set(survive_sorted)


def _floor_div(a, d):
    """``floor(a / d)`` for whole numbers below 2**24 held as floats, exact (one correction step)."""
    q = jnp.floor(a / d)
    return jnp.where(q * d > a, q - 1, q)


class ChunkOut(NamedTuple):
    """What a chunk returns. Column matrices are ``[columns, rows]`` so each column is contiguous.

    ``ints`` holds the configuration columns and, for swept machine parameters,
    the axis digit (the host maps it to the exact float64 value); ``floats``
    the result columns. A reduction also returns its candidates compacted to
    ``K`` rows (``sel`` their local indices, ``count`` how many are real);
    when ``count > K`` the host reads the full arrays at ``mask`` instead.
    """

    floats: jax.Array
    ints: jax.Array
    limit: jax.Array
    mask: jax.Array
    # reductions only: candidates compacted to K rows (the full arrays above stay on the device)
    c_floats: Any = None
    c_ints: Any = None
    c_limit: Any = None
    sel: Any = None
    count: Any = None


def build_chunk_fn(job: Job, chunk: int, keep: Keep, dtype):
    """A jitted ``f(net, machine, values, info, n_real) -> ChunkOut`` and its compaction size.

    ``mask`` marks the rows to keep: real (not padding), a configuration the
    strategy can take (hybrids skip p2 not dividing p), and, for a ``keep``
    reduction, a candidate.
    """
    axis_names = tuple(job.axes)
    machine_axes = job.machine_axes
    point = point_fn(job.strategy, machine_axes)
    icols = int_columns(job)
    hybrid = "p2" in axis_names
    fixed = dict(job.bound.profile.overrides)

    def one(net, machine, values, digits):
        by_name = {name: values[i][digits[i]] for i, name in enumerate(axis_names)}
        if fixed:
            machine = with_params(machine, **{k: jnp.asarray(v, dtype) for k, v in fixed.items()})
        swept = tuple(by_name[k].astype(dtype) for k in machine_axes)
        m_eff = (
            with_params(machine, **dict(zip(machine_axes, swept, strict=True))) if machine_axes else machine
        )
        p = by_name["p"].astype(dtype) if "p" in by_name else jnp.asarray(1, dtype)
        b = by_name["b"].astype(dtype)
        p2 = by_name["p2"].astype(dtype) if "p2" in by_name else m_eff.gpus_per_node.astype(dtype)
        s = by_name["S"].astype(dtype) if "S" in by_name else p
        cost, derived = point(net, machine, Config(p, b, p2, s), swept)
        # Materialise the terms once: without the barrier XLA's CPU fusion recomputes
        # shared subexpressions for every output column (measured 2-4x slower).
        cost, derived = jax.lax.optimization_barrier((cost, derived))
        merged = {**cost._asdict(), **derived._asdict()}
        floats = jnp.stack([jnp.asarray(merged[c], dtype) for c in RESULT_COLUMNS])
        ints = jnp.stack(
            [jnp.round(merged[c]).astype(jnp.int32) for c in CONFIG_COLUMNS]
            + [digits[axis_names.index(k)] for k in machine_axes]
        )
        fits = jnp.ones((), bool)
        if hybrid:
            fits = (p >= p2) & (jnp.round(p / p2) * p2 == p)
        return floats, ints, cost.limit.astype(jnp.int8), fits

    vone = jax.vmap(one, in_axes=(None, None, None, 0))
    radix = np.asarray([len(v) for v in job.axes.values()], np.float32)[:, None]

    def column(floats, ints, name):
        if name in RESULT_COLUMNS:
            return floats[RESULT_COLUMNS.index(name)]
        return ints[icols.index(name)].astype(dtype)

    def run(net, machine, values, info, n_real):
        # Mixed-radix decode in exact small-integer float arithmetic (vectorises on
        # CPUs, where integer division does not): digit = (q + carry) mod r.
        fi = info.astype(jnp.float32)
        k = jnp.arange(chunk, dtype=jnp.float32)
        carry = jnp.where(
            info[:, 4:5] == 1,
            (k[None, :] >= fi[:, 3:4]).astype(jnp.float32),
            _floor_div(fi[:, 1:2] + k[None, :], fi[:, 2:3]),
        )
        total = fi[:, 0:1] + carry
        digits = (total - radix * _floor_div(total, radix)).astype(jnp.int32)
        floats, ints, limit, fits = vone(net, machine, values, digits.T)
        floats, ints = floats.T, ints.T
        mask = (k < n_real) & fits
        if keep.kind == "pareto":
            ok = mask & (limit == 0)
            cols = [column(floats, ints, c) for c in keep.columns]
            # two objectives reduce on the device; more are reduced exactly on the host
            mask = _pareto_mask_2d(cols[0], cols[1], ok) if len(cols) == 2 else ok
        elif keep.kind == "top":
            ok = mask & (limit == 0)
            score = jnp.where(ok, column(floats, ints, keep.columns[0]), jnp.inf)
            kth = -jax.lax.top_k(-score, min(keep.k, chunk))[0][-1]
            mask = ok & (score <= kth)  # every row tied with the k-th; the host breaks ties
        if not keep.reduces:
            return ChunkOut(floats, ints, limit, mask)
        count = jnp.sum(mask)
        (idx,) = jnp.nonzero(mask, size=compact, fill_value=0)
        return ChunkOut(
            floats, ints, limit, mask, floats[:, idx], ints[:, idx], limit[idx], idx.astype(jnp.int32), count
        )

    compact = min(chunk, max(COMPACT_ROWS, keep.k))
    TRACES[(job.index, job.strategy)] = 0

    def counted(*args):
        TRACES[(job.index, job.strategy)] += 1  # runs at trace time only
        return run(*args)

    return jax.jit(counted), compact


def device_inputs(job: Job, dtype):
    """The job's net, base machine and axis value arrays as device arrays."""
    net = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), job.bound.net)
    machine = job.bound.profile.pytree(np.float64)
    machine = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), machine)
    values = tuple(
        jnp.asarray(v, jnp.int32) if name in CONFIG_AXES else jnp.asarray(v, dtype)
        for name, v in job.axes.items()
    )
    return net, machine, values
