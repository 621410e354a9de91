"""A chunk's program: a job's flat index range through ``jit(vmap(kernel))``, compiled once per job.

A chunk is a contiguous range ``[start, start + C)`` of flat indices. The
host decodes the chunk start into mixed-radix digits (Python integers, so
grids beyond 2**31 points work in int32 on the device); the device adds the
local offset with carries, gathers the axis values, evaluates the strategy
kernel for every point, and returns one float matrix of columns plus the
limit codes and a validity mask. The last chunk is padded to C, so each job
compiles once. JAX dispatches asynchronously: chunk i+1 is queued before
chunk i is copied back, so transfers overlap computation.

In-stream reductions (``--keep``) run on the device: a Pareto pre-filter or a
top-k (:mod:`sweep.engine.filters`); only survivors come back.

With several local devices (GPUs, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) each chunk is split
over all of them with ``shard_map`` on a 1-D mesh: device d takes the
``chunk / N`` consecutive points from offset ``d * chunk / N`` and reduces
its own share; :func:`sweep.engine.survivors.survivors` gathers the candidates on the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from kernels import Config
from kernels.machine import Machine
from kernels.names import PARAMS
from kernels.params import CHOICE, SWITCH
from sweep.engine import compiled as traced
from sweep.engine import index
from sweep.engine.devices import AXIS, device_mesh, local_devices
from sweep.engine.evaluate import CONFIG_FIELDS, RESULT_COLUMNS, Evaluator, Inputs, batch_fit
from sweep.engine.filters import (
    compact_indices,
    follows_candidate,
    follows_previous,
    known_front,
    pareto_2d,
    pareto_kd,
    run_counts,
    top_k_candidates,
)
from sweep.engine.index import axis_ranks, decode_info, inner_split, int_columns, outer_digits, row_digits
from sweep.inputs.configs import NO_OWN, Request, complete, frozen_overheads, p2_fits, uses
from sweep.inputs.grid import CONFIG_AXES, Job
from sweep.reduce.keep import Keep

#: Largest job a reduction evaluates whole and reduces on the host (:func:`prepare`). Without
#: a cap a large ``--chunk`` sends whole jobs of millions of points to the host's reduction,
#: several times slower than the device's.
HOST_REDUCE_MAX = 1 << 20

#: Survivors a reducing chunk returns compacted (see :func:`survivors`).
COMPACT_ROWS = 4096
#: Candidates evaluated again per call when a chunk has more than it compacts (:class:`Again`).
POINT_ROWS = 1 << 16
#: Number of traces (compilations) per (job index, strategy), for tests.
TRACES: dict[tuple[int, str], int] = {}


class ChunkOut(NamedTuple):
    """What a chunk returns. Column matrices are ``[columns, rows]`` so each column is contiguous.

    The device evaluates whole inner boxes, so arrays span a few more rows
    than the chunk: ``mask`` marks the rows that are the chunk's (and, for a
    reduction, candidates), in chunk order; the row at position ``i`` of a
    device's block is the chunk's point ``i - lead``. ``ints`` holds the
    configuration columns and, for swept machine parameters, the axis digit
    (the host maps it to the exact float64 value); ``floats`` the result
    columns. A reduction returns no full columns, only its candidates
    compacted to ``K`` rows (``sel`` their chunk offsets, ``count`` how many
    are real); when ``count > K`` a Pareto chunk leaves the block unfilled
    and :func:`survivors` evaluates the candidates at ``mask`` again.
    """

    floats: Any
    ints: Any
    limit: Any
    mask: Any  # arrays, or PartitionSpecs when describing shard_map outputs
    lead: Any
    # reductions only: candidates compacted to K rows
    c_floats: Any = None
    c_ints: Any = None
    c_limit: Any = None
    sel: Any = None
    count: Any = None
    # a front of distinct optima: how many tied candidates each compacted one stands for
    tied: Any = None


# The reductions jitted on their own: traced and lowered once per chunk width and
# reused by every job of a run (tracing them is a large part of a warm start).
pareto_2d_jit = jax.jit(pareto_2d, static_argnums=(3, 5))
pareto_kd_jit = jax.jit(pareto_kd)
follows_previous_jit = jax.jit(follows_previous)
follows_candidate_jit = jax.jit(follows_candidate)
run_counts_jit = jax.jit(run_counts)
top_k_candidates_jit = jax.jit(top_k_candidates, static_argnums=(2, 3))
compact_indices_jit = jax.jit(compact_indices, static_argnums=(1, 2))


def _configuration_fn(job: Job, dtype) -> Callable:
    """``one(net, machine, at) -> (floats, ints, limit, fits)``: every column of one
    configuration of ``job``; ``at`` maps each axis to (value, digit)."""
    machine_axes, params = job.machine_axes, job.param_axes
    fixed = job.bound.profile.override_values(dtype, skip=params)
    ev = Evaluator(job.strategy, params, tuple(fixed), frozen_overheads(job.bound.profile))
    static = _static_choices(job, dtype, skip={*params, *fixed})
    hybrid = uses(job.strategy, "p2")
    # the request's axes: the job's shared axes and batch as users set it (a micro-batch where
    # the strategy has micro-batches)
    names = ("p", "b", "p2", "S", "global_batch", "micro_batch")
    given = [k for k in names if k in job.axes and (k != "micro_batch" or uses(job.strategy, k))]

    def one(net, machine, at):
        swept = tuple(at[k][0].astype(dtype) for k in params)
        if "tokens" in at:  # the training set: its samples (Job.axis_inputs)
            net = net._replace(dataset_samples=at["tokens"][0].astype(dtype))
        # the profile's overrides and the swept values, applied once
        machine = ev.machine(Inputs(net, machine, tuple(fixed.values())), swept)._replace(**static)
        value = {k: at[k][0].astype(dtype) for k in given}
        value.setdefault("p", jnp.asarray(1, dtype))
        own = {
            k: at[k][0].astype(dtype) if k in at else jnp.asarray(d, dtype)
            for k, d in NO_OWN._asdict().items()
        }
        request = Request.of(job.strategy, **value, own=own)
        config = complete(request, machine.gpus_per_node.astype(dtype))
        cost, derived = ev.on(net, machine, Config(*config.config))
        cost, derived = batch_fit(cost, derived, config.fits)
        # Materialise the terms once: without the barrier XLA's CPU fusion recomputes
        # shared subexpressions for every output column, several times slower.
        cost, derived = jax.lax.optimization_barrier((cost, derived))
        merged = {**cost._asdict(), **derived._asdict()}
        floats = tuple(jnp.asarray(merged[c], dtype) for c in RESULT_COLUMNS)
        ints = (
            tuple(jnp.round(merged[c]).astype(jnp.int32) for c in CONFIG_FIELDS)
            + tuple(_extra(c, own, cost).astype(jnp.int32) for c in job.extra_columns)
            + tuple(at[k][1] for k in machine_axes)
        )
        p, p2 = config.config[0], config.config[2]
        fits = p2_fits(p, p2) if hybrid else jnp.ones((), bool)
        return floats, ints, cost.limit.astype(jnp.int8), fits

    return one


def _static_choices(job: Job, dtype, skip) -> dict[str, np.ndarray]:
    """The profile's choices and switches (an all-reduce's algorithm, a fused attention, ...)
    that the job does not sweep, as constants of the program rather than its inputs: XLA then
    drops every branch they rule out, where a traced code kept each computed at every point
    and selected (docs/performance.md). A job's kernel is compiled for its own profile."""
    base = job.bound.profile.pytree(np.float64)
    return {
        name: np.asarray(getattr(base, name), dtype)
        for name, param in PARAMS.items()
        if param.kind in (CHOICE, SWITCH) and name not in skip and name in Machine._fields
    }


def _extra(column: str, own: dict, cost):
    """An extra configuration column's value: an own axis, or ``micro_batch`` = b / S (the
    samples per micro-batch of the row's b and S, rounded as they are)."""
    return own[column] if column in own else jnp.round(cost.b / cost.S)


def build_chunk_fn(job: Job, chunk: int, keep: Keep, dtype, devices=None):
    """A jitted ``f(net, machine, values, info, n_real, known) -> ChunkOut`` and its compaction size.

    ``mask`` marks the rows to keep: real (not padding), a configuration the
    strategy can take (a hybrid's p2 must fit p: :func:`~sweep.inputs.configs.p2_fits`),
    and, for a ``keep`` reduction, a candidate. ``known`` (:func:`known_front`) is read by a Pareto
    reduction of two objectives only: points of a front found before, which
    drop the rows they dominate (see :func:`pareto_2d`).

    With several ``devices`` (default: every local device) the chunk is
    padded to a multiple of their number N and split with ``shard_map`` over
    a 1-D mesh: device d evaluates the ``chunk / N`` consecutive points from
    offset ``d * chunk / N`` and compacts its own candidates, so outputs are
    ``N`` blocks side by side and ``count`` has one entry per device (see
    :func:`survivors`); the compaction size is per device.
    """
    n_dev = len(devices) if devices is not None else len(local_devices())
    per = -(-chunk // n_dev)  # points per device; the chunk is padded to n_dev * per
    # top-k rarely has more than k candidates (see :func:`top_k_candidates`), and every compacted
    # row costs each result column once more
    compact = min(per, keep.k if keep.kind == "top" else max(COMPACT_ROWS, keep.k))
    run = _window_fn(job, chunk, keep, dtype, compact)
    TRACES[(job.index, job.strategy)] = 0

    if n_dev == 1:

        def single(net, machine, values, info, n_real, known):
            TRACES[(job.index, job.strategy)] += 1  # runs at trace time only
            return run(net, machine, values, info, n_real, known, jnp.int32(0), chunk)

        return jax.jit(single), compact

    sharded = _shard_over(run, per, keep, device_mesh(devices))

    def multi(net, machine, values, info, n_real, known):
        TRACES[(job.index, job.strategy)] += 1  # runs at trace time only
        return sharded(net, machine, values, info, n_real, known)

    return jax.jit(multi), compact


def _shard_over(run: Callable, per: int, keep: Keep, mesh) -> Callable:
    """``run`` over ``per`` points on each device of ``mesh``, with ``shard_map``: outputs are
    the devices' blocks side by side, and ``lead`` and ``count`` one entry per device."""

    def part(net, machine, values, info, n_real, known):
        offset = (jax.lax.axis_index(AXIS) * per).astype(jnp.int32)
        out = run(net, machine, values, info, n_real, known, offset, per)
        out = out._replace(lead=out.lead.reshape(1))
        return out if out.count is None else out._replace(count=out.count.reshape(1))

    cols, rows = P(None, AXIS), P(AXIS)  # [columns, points] blocks side by side; [points]
    if keep.reduces:
        specs = ChunkOut(
            None, None, None, rows, rows, cols, cols, rows, rows, rows, rows if keep.distinct else None
        )
    else:
        specs = ChunkOut(cols, cols, rows, rows, rows)
    return jax.shard_map(part, mesh=mesh, in_specs=P(), out_specs=specs)


def _window_fn(job: Job, chunk: int, keep: Keep, dtype, compact: int) -> Callable:
    """``run(net, machine, values, info, n_real, known, offset, size) -> ChunkOut``: ``size``
    points at local offsets ``offset + arange(size)`` of the chunk (``offset`` int32).

    The points lie in ``n_box`` consecutive inner boxes from outer index
    ``o + q``; every point of those boxes is evaluated and the window of
    ``size`` points cut out (reductions never copy the window out).
    """
    radices = [len(v) for v in job.axes.values()]
    n_outer = inner_split(radices, chunk)
    box = math.prod(radices[n_outer:])
    outer_point = _box_fn(job, n_outer, dtype)
    radix = np.asarray(radices[:n_outer], np.float32)[:, None]
    by_floats = chunk <= index.FLOAT_CHUNK

    def run(net, machine, values, info, n_real, known, offset, size):
        n_box = (size - 1) // box + 2 if box > 1 else size
        digits, window, at = outer_digits(info, offset, n_outer, box, n_box, radix, by_floats)
        # Columns over the whole boxes, [column, n_box * box]; the chunk's points are
        # the window [window, window + size).
        width = n_box * box
        pos = jnp.arange(width, dtype=jnp.int32) - window  # offset from this device's first point
        if by_floats:
            k = at + pos.astype(jnp.float32)
            inside = (pos >= 0) & (pos < size) & (k < n_real)
        else:
            inside = (pos >= 0) & (pos < size) & (offset + pos < n_real)
        lead = window - offset  # output position minus chunk offset

        def evaluate(_):
            floats, ints, limit, fits = jax.vmap(outer_point, in_axes=(None, None, None, 0))(
                net, machine, values, digits.T
            )
            return floats, ints, limit.reshape(-1), inside & fits.reshape(-1)

        if keep.kind == "top":
            return _top_chunk(
                job, keep, dtype, compact, n_outer, inside, lead, (net, machine, values, digits)
            )
        floats, ints, limit, mask = evaluate(None)
        if not keep.reduces:
            # stacked in the columns' own shape, then flattened: a stack of flattened columns
            # indexed every element back into the boxes by division (slower on a CPU)
            stack = lambda cols: jnp.stack(cols).reshape(len(cols), -1)  # noqa: E731
            return ChunkOut(stack(floats), stack(ints), limit, mask, lead)
        return _candidates(job, keep, dtype, compact, floats, ints, limit, mask, lead, known)

    return run


def _top_chunk(job: Job, keep: Keep, dtype, compact: int, n_outer: int, inside, lead, args):
    """A top-k chunk's :class:`ChunkOut` (the axes after the first ``n_outer`` lie in a box), in
    three passes.

    1. Each configuration's limit and fit (a rule, memory, the batch), which depend on the
       configuration alone, so their terms cost once a box: most chunks of a grid of
       model-parallel splits hold no feasible row and return no candidate after it.
    2. Where a row can be a candidate, the objective alone at every point of the boxes, and
       the top-k rows picked from it.
    3. Every column of the picked rows, by the per-point kernel, whose values are an
       every-column chunk's to the bit (docs/performance.md).

    Rows that are not candidates never enter the reduction, so the candidates are an
    every-column chunk's.
    """
    net, machine, values, digits = args

    def over_boxes(pick):
        fn = _box_fn(job, n_outer, dtype, pick)
        return jax.vmap(fn, in_axes=(None, None, None, 0))(net, machine, values, digits.T)

    # in the boxes' shape: reduced flattened, the broadcast of each configuration's values
    # over its box would cost a division per point for its position
    limit, fits = over_boxes(lambda floats, ints, limit, fits: (limit, fits))
    any_ok = jnp.any(inside.reshape(limit.shape) & fits & (limit == 0))

    (column,) = keep.columns
    value = _objective_fn(job, column, dtype)

    def objective(_):
        objective, limit, fits = over_boxes(
            lambda floats, ints, limit, fits: (value(floats, ints), limit, fits)
        )
        return objective, fits & (limit == 0)

    def no_objective(_):  # zeros from ``lead``: under shard_map they vary over the devices
        zero = lead * 0
        return jnp.broadcast_to(zero.astype(dtype), limit.shape), jnp.broadcast_to(zero > 0, limit.shape)

    def found(_):
        # The objective is a conditional's output, so XLA writes it out in the boxes' shape:
        # fused into a reduction that reads it flattened, every point would work out its
        # box coordinates by division, ten times slower on a CPU (docs/performance.md).
        objective_, good = jax.lax.cond(any_ok, objective, no_objective, None)
        ok = inside & good.reshape(-1)
        mask, count, idx = top_k_candidates_jit(objective_.reshape(-1), ok, keep.k, compact)
        floats, ints, limit = _points_fn(job, dtype)(
            net, machine, values, row_digits(digits, idx, job, n_outer)
        )
        return ChunkOut(None, None, None, mask, lead, floats, ints, limit, idx - lead, count)

    shapes = jax.eval_shape(found, None)

    def none(_):  # no candidate: count 0, the compacted rows unread (:func:`survivors`)
        # zeros from ``lead``, which under shard_map varies over the devices as ``found``'s do
        zero = lead * 0
        return jax.tree.map(lambda s: jnp.broadcast_to(zero.astype(s.dtype), s.shape), shapes)._replace(
            lead=lead
        )

    return jax.lax.cond(any_ok, found, none, None)


def _objective_fn(job: Job, column: str, dtype) -> Callable:
    """``f(floats, ints)``: a reduction's objective ``column`` from columns in
    :data:`RESULT_COLUMNS` and :func:`int_columns` order (a configuration's, or a chunk's
    flattened); a swept machine parameter by its rank."""
    if column in RESULT_COLUMNS:
        i = RESULT_COLUMNS.index(column)
        return lambda floats, ints: floats[i].astype(dtype)
    i = int_columns(job).index(column)
    if column in job.machine_axes:
        rank = jnp.asarray(axis_ranks(job, column), dtype)
        return lambda floats, ints: rank[ints[i]]
    return lambda floats, ints: ints[i].astype(dtype)


def _box_fn(job: Job, n_outer: int, dtype, pick: Callable | None = None) -> Callable:
    """``outer_point(net, machine, values, digits)``: every column over the inner box of the
    outer axes' ``digits``, one vmap per inner axis, so a term is computed once per value of
    the axes it depends on (vmap batches only what varies); with ``pick``, what ``pick`` takes
    of a configuration's ``(floats, ints, limit, fits)``."""
    axis_names = tuple(job.axes)
    radices = [len(v) for v in job.axes.values()]
    every = _configuration_fn(job, dtype)
    one = every if pick is None else lambda net, machine, at: pick(*every(net, machine, at))

    def nest(net, machine, values, at, i):
        if i == len(axis_names):
            return one(net, machine, at)
        name = axis_names[i]

        def inner(value, digit):
            return nest(net, machine, values, {**at, name: (value, digit)}, i + 1)

        return jax.vmap(inner)(values[i], jnp.arange(radices[i], dtype=jnp.int32))

    def outer_point(net, machine, values, digits):
        at = {axis_names[i]: (values[i][digits[i]], digits[i]) for i in range(n_outer)}
        return nest(net, machine, values, at, n_outer)

    return outer_point


def _candidates(job: Job, keep: Keep, dtype, compact: int, floats, ints, limit, mask, lead, known):
    """A reducing chunk's :class:`ChunkOut`: its candidates' mask, and the first ``compact`` of
    them gathered (:func:`compact_indices`, or :func:`top_k_candidates`)."""
    icols = int_columns(job)
    flat_floats, flat_ints = tuple(c.reshape(-1) for c in floats), tuple(c.reshape(-1) for c in ints)
    flat = dict(zip(RESULT_COLUMNS, flat_floats, strict=True)) | dict(zip(icols, flat_ints, strict=True))
    ok = mask & (limit == 0)
    objective = [_objective_fn(job, c, dtype)(flat_floats, flat_ints) for c in keep.columns]
    tied = None
    if keep.kind == "pareto":
        # candidates on the device, a superset of the front; the host's reduction is exact
        if len(objective) == 2:
            # a configuration column (p) is cheap to read again; a result column is not
            found = pareto_2d_jit(
                objective[0], objective[1], ok, keep.columns[1] not in icols, known, keep.distinct
            )
        else:
            found = pareto_kd_jit(tuple(objective), ok)
            if keep.distinct:
                found = (found, follows_previous_jit(found, objective), *objective)
        # more than fit are read from ``mask`` (:func:`survivors`), and not compacted unless
        # they lie in few blocks (a prefix sum and a scatter over the chunk cost more than
        # the rest of a tied chunk)
        if keep.distinct:  # the first of each run of tied candidates, and the run's length
            mask, follows, *compared = found
            count, idx = compact_indices_jit(mask & ~follows, compact)
            follows, count, idx = _runs(follows, count, idx, mask, compared, compact)
            tied = run_counts_jit(follows, idx, count)
        else:
            mask = found
            count, idx = compact_indices_jit(mask, compact)
    else:
        mask, count, idx = top_k_candidates_jit(objective[0], ok, keep.k, compact)
    gather = lambda names: jnp.stack([flat[c][idx] for c in names])  # noqa: E731
    return ChunkOut(
        None,
        None,
        None,
        mask,
        lead,
        gather(RESULT_COLUMNS),
        gather(icols),
        limit[idx],
        idx - lead,
        count,
        tied,
    )


def _runs(follows, count, idx, mask, compared, compact: int):
    """``(follows, count, idx)`` of the runs of tied candidates: of neighbouring points, or,
    when their heads overflow the block, of neighbouring candidates across the points between
    them (:func:`sweep.engine.filters.follows_candidate`)."""

    def across(_):
        wide = follows_candidate_jit(mask, compared)
        return (wide, *compact_indices_jit(mask & ~wide, compact))

    return jax.lax.cond(count > compact, across, lambda _: (follows, count, idx), None)


def build_points_fn(job: Job, dtype) -> Any:
    """A jitted ``f(net, machine, values, digits[axes, POINT_ROWS]) -> (floats, ints, limit)``:
    every column of each configuration the digits name, laid out as :class:`ChunkOut`'s."""
    return jax.jit(_points_fn(job, dtype))


def _points_fn(job: Job, dtype) -> Callable:
    """:func:`build_points_fn`'s function, unjitted: one configuration per column of ``digits``,
    each evaluated on its own (the same bits as a chunk's boxes: docs/performance.md)."""
    one = _configuration_fn(job, dtype)
    names = tuple(job.axes)

    def points(net, machine, values, digits):
        def at(d):
            return one(net, machine, {name: (values[i][d[i]], d[i]) for i, name in enumerate(names)})

        floats, ints, limit, _fits = jax.vmap(at, in_axes=1)(digits)
        return jnp.stack(floats), jnp.stack(ints), limit

    return points


def prepare(job: Job, chunk: int, keep: Keep, dtype, devices=None) -> tuple[Callable, tuple, bool]:
    """The job's chunk function, compiled, its device inputs, and whether it returns every row.

    Tracing and lowering (or reading the module an earlier run kept, see
    :mod:`sweep.engine.compiled`) and compiling (or loading from the persistent
    cache) happen here rather than at the first call, so a run can prepare the next
    jobs' kernels on other threads while this one computes: tracing holds
    the GIL but XLA's compute threads do not need it, and XLA compiles
    without it. The result is called like :func:`build_chunk_fn`'s function.

    A reduction over a small job of one chunk gains little on the device and
    its program takes several times longer to compile than one returning every
    row, so such a job returns every row and the host
    picks the candidates (:func:`host_candidates`; :func:`reduced_on_host`
    says which jobs); the kept rows are the same.
    """
    whole = reduced_on_host(job, chunk, keep)
    inputs = device_inputs(job, dtype, devices)
    return compile_chunk_fn(job, chunk, Keep("all") if whole else keep, dtype, inputs, devices), inputs, whole


def reduced_on_host(job: Job, chunk: int, keep: Keep) -> bool:
    """Whether a reduction evaluates ``job`` whole, every row to the host (:func:`prepare`):
    a job of one chunk of at most :data:`HOST_REDUCE_MAX` points. The host's reduction runs
    at a few million rows a second, the device's at hundreds of millions and more."""
    return keep.reduces and job.size <= min(chunk, HOST_REDUCE_MAX)


def compile_chunk_fn(job: Job, chunk: int, keep: Keep, dtype, inputs: tuple, devices=None) -> Callable:
    """:func:`build_chunk_fn`'s function compiled for ``inputs`` (:func:`device_inputs`), from
    the module a run before this one kept when there is one (:mod:`sweep.engine.compiled`)."""
    devices = devices if devices is not None else local_devices()
    return traced.compile_kept(
        job,
        ("chunk", chunk, keep, np.dtype(dtype).name),
        devices,
        lambda: build_chunk_fn(job, chunk, keep, dtype, devices)[0],
        (*inputs, decode_info(job, 0, chunk), np.int32(0), known_front(None, dtype)),
    )


def prepare_points(job: Job, dtype) -> tuple[Callable, tuple]:
    """:func:`build_points_fn`'s function, compiled for one device, and its inputs on that
    device: what :meth:`Again.rows` calls, prepared ahead by a run once one of its jobs
    needed it (the inputs too, so the main thread does not make them again)."""
    devices = local_devices()[:1]
    inputs = device_inputs(job, dtype, devices)
    digits = np.zeros((len(job.axes), POINT_ROWS), np.int32)
    fn = traced.compile_kept(
        job,
        ("points", POINT_ROWS, np.dtype(dtype).name),
        devices,
        lambda: build_points_fn(job, dtype),
        (*inputs, digits),
    )
    return fn, inputs


def device_inputs(job: Job, dtype, devices=None):
    """The job's net, base machine and axis value arrays as device arrays.

    With several ``devices`` (default: every local device) they are
    replicated on each once, so a chunk call does not copy them again.
    """
    net = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), job.bound.net)
    machine = job.bound.profile.pytree(np.float64)
    machine = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), machine)
    values = tuple(
        np.asarray(v, np.int32) if name in CONFIG_AXES else np.asarray(job.axis_inputs(name), dtype)
        for name, v in job.axes.items()
    )
    inputs = (net, machine, values)
    devices = devices if devices is not None else local_devices()
    if len(devices) == 1:
        # device_put, not jnp.asarray: that applies a conversion primitive to each leaf,
        # which compiles (or looks up in the persistent cache) a program per new shape
        return jax.device_put(inputs)
    return jax.device_put(inputs, NamedSharding(device_mesh(devices), P()))
