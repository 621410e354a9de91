"""Configuration, result type, and the compute and memory terms (docs/model.md §3-§6, §11-§13).

The strategy modules compose these with :mod:`kernels.collectives` and
:mod:`kernels.machine`; no formula is written twice.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from kernels._types import Array
from kernels.machine import Machine
from kernels.names import BATCH, DATASET, MAX_P, MEMORY, MEMORY_MODELS, OK
from kernels.network import Net


class Config(NamedTuple):
    """One configuration: GPUs p, samples per data-parallel replica b, group size p2, micro-batches S.

    The fields after S are strategies' own axes, one per name of
    :data:`kernels.strategies.registry.OWN_AXES` (data+tensor+pipeline's ``tp``,
    ``pp``, ``recompute``, ``zero``, ``vp``, ``sp``, ``precision``, ``reshard``, ``dp_shard``, docs/model.md
    §16; ``cp``, §20; ``ep``, ``etp``, §17); a strategy ignores the axes its registry entry does not own. None (no
    pytree leaf, so a vmap over a configuration of four arrays still works)
    means the axis's default.
    """

    p: Array
    b: Array
    p2: Array
    S: Array
    tp: Array | None = None
    pp: Array | None = None
    recompute: Array | None = None
    zero: Array | None = None
    vp: Array | None = None
    sp: Array | None = None
    precision: Array | None = None
    reshard: Array | None = None
    dp_shard: Array | None = None
    cp: Array | None = None
    ep: Array | None = None
    etp: Array | None = None


class Cost(NamedTuple):
    """Per-epoch cost of one configuration (docs/model.md §10). One field = one column."""

    p: Array
    p1: Array
    p2: Array
    b: Array
    B: Array
    S: Array
    iterations: Array
    t_comp_s: Array
    t_allreduce_s: Array
    t_allgather_s: Array
    t_halo_s: Array
    t_p2p_s: Array
    mem_bytes: Array
    limit: Array  # int32 index into LIMITS; checked in order batch, max_p, dataset, memory
    # memory per GPU split (docs/model.md §16): NaN where a strategy does not split it (the CNNs)
    mem_states_bytes: Array = float("nan")
    mem_activations_bytes: Array = float("nan")
    # a mixture of experts' token dispatch and combine (docs/model.md §17): 0 where a strategy has none
    t_alltoall_s: Array = 0.0


class Derived(NamedTuple):
    """Columns that follow from a :class:`Cost` (docs/model.md §12)."""

    t_comm_s: Array
    t_epoch_s: Array
    t_iter_s: Array
    feasible: Array
    gpu_hours: Array
    samples_per_s: Array
    tokens_per_s: Array
    mfu: Array
    params: Array
    active_params: Array
    flops_per_token: Array

    energy_kwh: Array
    cost_usd: Array


def derive(cost: Cost, net: Net | None = None, machine: Machine | None = None) -> Derived:
    """The derived columns of docs/model.md §12.

    .. math::
        T_{comm} = T_{ar} + T_{ag} + T_{halo} + T_{p2p} + T_{a2a},\\quad
        T_{epoch} = T_{comp} + T_{comm},\\quad T_{iter} = T_{epoch} \\cdot (1 / I),\\quad
        \\text{gpu\\_hours} = p\\,T_{epoch} / 3600

    and the throughput columns users of LLM tools read:

    .. math::
        \\text{samples\\_per\\_s} = B / T_{iter},\\quad
        \\text{tokens\\_per\\_s} = s \\cdot \\text{samples\\_per\\_s},\\quad
        \\text{mfu} = \\frac{F_{model}\\, B}{T_{iter}\\; p\\; R}

    with ``B`` the global batch, ``s = net.tokens`` a sample's tokens (NaN for
    a network without an embedding: a CNN), ``F_model = net.model_flops`` the
    training FLOPs per sample of the matrix multiplies (forward and backward,
    no recomputation; Korthikanti et al. 2022 count ``72 B L s h^2 (1 + s/6h
    + V/12hL)`` for a GPT, the same terms) and ``R = machine.gpu_flops`` the
    peak dense rate. Without ``net`` and ``machine``, ``tokens_per_s`` and
    ``mfu`` are NaN.

    The model's own columns: ``params`` its weights (``net.w_elems``; biases not counted),
    ``active_params`` those each token works with (all of them in a dense network; a mixture of
    experts' routed experts ``k`` of ``E`` times, docs/model.md §17),
    ``flops_per_token = F_model / s`` (NaN without tokens), so that
    ``mfu = flops_per_token · tokens_per_s / (p R)``; NaN without ``net``.
    """
    t_comm = cost.t_allreduce_s + cost.t_allgather_s + cost.t_halo_s + cost.t_p2p_s + cost.t_alltoall_s
    t_epoch = cost.t_comp_s + t_comm
    # a product by 1 / I, not a quotient: XLA rewrites a quotient by a broadcast I (in a
    # sweep, where I is broadcast over the axes vmapped after b) into this product, and only
    # in some chunk layouts, so the quotient came out a last bit apart between them
    t_iter = t_epoch * (1.0 / cost.iterations)
    # products by reciprocals too (t_iter, p may be broadcast over a chunk's inner axes)
    samples_per_s = cost.B * (1.0 / t_iter)
    if net is None or machine is None:
        tokens_per_s = mfu = jnp.full_like(samples_per_s, jnp.nan)
    else:
        tokens_per_s = jnp.where(net.tokens > 0, samples_per_s * net.tokens, jnp.nan)
        mfu = net.model_flops * samples_per_s * (1.0 / (cost.p * machine.gpu_flops))
    if net is None:
        params = active_params = flops_per_token = jnp.full_like(samples_per_s, jnp.nan)
    else:
        params = jnp.full_like(samples_per_s, net.w_elems)
        # a mixture of experts' token uses k of its E experts (docs/model.md §17)
        active_params = jnp.full_like(samples_per_s, net.w_elems - net.transformer.moe.inactive)
        per_token = jnp.where(net.tokens > 0, net.model_flops / jnp.maximum(net.tokens, 1.0), jnp.nan)
        flops_per_token = jnp.full_like(samples_per_s, per_token)

    gpu_hours = cost.p * t_epoch / 3600.0
    if machine is None:
        energy_kwh = cost_usd = jnp.full_like(samples_per_s, jnp.nan)
    else:
        # board power x GPUs x time x PUE, J -> kWh (3.6e6 J); price x GPU-hours
        energy = machine.gpu_power_w * cost.p * t_epoch * machine.pue / 3.6e6
        energy_kwh = jnp.where(machine.gpu_power_w > 0, energy, jnp.nan)
        cost_usd = jnp.where(machine.usd_per_gpu_hour > 0, gpu_hours * machine.usd_per_gpu_hour, jnp.nan)
    return Derived(
        t_comm_s=t_comm,
        t_epoch_s=t_epoch,
        t_iter_s=t_iter,
        feasible=cost.limit == OK,
        gpu_hours=gpu_hours,
        samples_per_s=samples_per_s,
        tokens_per_s=tokens_per_s,
        mfu=mfu,
        params=params,
        active_params=active_params,
        flops_per_token=flops_per_token,
        energy_kwh=energy_kwh,
        cost_usd=cost_usd,
    )


#: Terms that :func:`scale_terms` scales: compute and each communication term (docs/model.md §13).
OVERHEAD_TERMS: tuple[str, ...] = ("compute", "allreduce", "allgather", "halo", "p2p")
#: Additive overheads of :func:`scale_terms`, in seconds: per iteration, and per sample of ``b`` per iteration.
ADDITIVE_TERMS: tuple[str, ...] = ("per_iter_s", "per_sample_s")


def memory_parts(cost: Cost) -> Cost:
    """``cost`` with its memory parts in ``mem_bytes``'s shape: a strategy that does not split
    its memory leaves them NaN (a Python float), which becomes NaN at every point; likewise
    ``t_alltoall_s``, 0 (a Python float) where a strategy has no all-to-all."""
    nan = jnp.full_like(cost.mem_bytes, jnp.nan)
    return cost._replace(
        t_alltoall_s=jnp.zeros_like(cost.t_comp_s) + cost.t_alltoall_s,
        mem_states_bytes=jnp.where(jnp.isnan(cost.mem_states_bytes), nan, cost.mem_states_bytes),
        mem_activations_bytes=jnp.where(
            jnp.isnan(cost.mem_activations_bytes), nan, cost.mem_activations_bytes
        ),
    )


def scale_terms(
    cost: Cost,
    compute=1.0,
    allreduce=1.0,
    allgather=1.0,
    halo=1.0,
    p2p=1.0,
    per_iter_s=0.0,
    per_sample_s=0.0,
) -> Cost:
    """Per-strategy overheads on a strategy's terms, docs/model.md §13 (calibration; beyond the paper).

    Multiplicative factors on each term, then an additive cost per iteration
    on compute:

    .. math::
        T'_{comp} = o_{comp} T_{comp} + I\\,(c_{iter} + c_{sample}\\, b),\\quad
        T'_{ar} = o_{ar} T_{ar},\\quad T'_{ag} = o_{ag} T_{ag},
        \\quad T'_{halo} = o_{halo} T_{halo},\\quad T'_{p2p} = o_{p2p} T_{p2p}

    with ``I`` the iterations per epoch and ``b`` the samples per
    data-parallel replica (per GPU for data, per group of ``p2`` GPUs for the
    hybrids, the whole batch ``B`` for the pure model-parallel strategies).
    An implementation slower than the ideal model (collectives through MPI, a
    spatial convolution barely faster than an unsplit one) shows as factors
    above 1; a cost that does not scale with the model's own terms (scattering
    each input sample over the group, framework work per iteration) as
    ``c_iter = per_iter_s`` seconds per iteration and ``c_sample = per_sample_s``
    seconds per sample of ``b``. The additive cost is charged to compute: it is
    time the replica spends outside the modelled collectives, and the four
    communication terms keep the paper's meaning. The factor ``o_comp`` does not
    scale it. Memory, limits and the configuration are unchanged; the defaults
    (factors 1, additive 0) leave the cost exactly as it was.
    """
    t_comp = cost.t_comp_s * compute
    if not (_is_zero(per_iter_s) and _is_zero(per_sample_s)):
        t_comp = t_comp + cost.iterations * (per_iter_s + per_sample_s * cost.b)
    return cost._replace(
        t_comp_s=t_comp,
        t_allreduce_s=cost.t_allreduce_s * allreduce,
        t_allgather_s=cost.t_allgather_s * allgather,
        t_halo_s=cost.t_halo_s * halo,
        t_p2p_s=cost.t_p2p_s * p2p,
    )


def _is_zero(value) -> bool:
    """True for a plain Python number equal to 0 (not for a traced array: calibration fits it)."""
    return isinstance(value, int | float) and value == 0


def iterations(dataset_samples, batch):
    """Iterations per epoch, ``I = ceil(D / B)`` (docs/model.md §5), exact for D < 2**24 in float32."""
    q = jnp.ceil(dataset_samples / batch)
    q = jnp.where((q - 1) * batch >= dataset_samples, q - 1, q)
    return jnp.where(q * batch < dataset_samples, q + 1, q)


def sec_per_flop(net: Net, machine: Machine):
    """Seconds per training FLOP, docs/model.md §3.

    From FLOPs, ``1 / (gpu_flops * efficiency)`` (the strategies take
    :func:`sample_s`, which uses the per-kind roofline there). With a measured per-sample
    time T, ``t_l = T * flops_l / sum(flops)``, scaled by how much faster the
    machine's ``gpu_flops * efficiency`` is than the rate the measurement
    belongs to (a ratio of exactly 1 on the measured machine).
    """
    rate = machine.gpu_flops * machine.efficiency
    measured = net.t_measured_s / net.flops * net.ref_rate_flops / rate
    return jnp.where(net.t_measured_s > 0, measured, 1.0 / rate)


def roofline_s(machine: Machine, flops_kind, traffic_kind):
    """Per-sample time of a set of layers from FLOPs, a per-kind roofline (docs/model.md §3).

    .. math:: t = \\sum_k \\max\\Big(\\frac{F_k}{R\\,e\\,e_k},\\;
              \\frac{n_{pass}\\,\\delta\\,Q_k}{BW}\\Big)

    with ``F_k`` the set's training FLOPs of layer kind k, ``Q_k`` its
    ``|x|+|y|`` elements, ``R e e_k = gpu_flops * efficiency * kind_efficiency[k]``,
    ``n_pass = mem_passes`` and ``BW = gpu_mem_bw_Bps``. ``mem_passes = 0``
    and every ``e_k = 1`` is the paper's ``sum(F) / (gpu_flops * efficiency)``.
    """
    rate = machine.gpu_flops * machine.efficiency * machine.kind_efficiency
    memory = machine.mem_passes * machine.bytes_per_element * traffic_kind / machine.gpu_mem_bw_Bps
    return jnp.sum(jnp.maximum(flops_kind / rate, memory), axis=-1)


def sample_s(net: Net, machine: Machine, flops, flops_kind, traffic_kind):
    """Per-sample training time of a set of layers, docs/model.md §3: the measured time's
    share of the set's ``flops`` (:func:`sec_per_flop`), else :func:`roofline_s`."""
    measured = flops * sec_per_flop(net, machine)
    return jnp.where(net.t_measured_s > 0, measured, roofline_s(machine, flops_kind, traffic_kind))


def split_sample_s(net: Net, machine: Machine, flops, flops_kind, traffic_kind, parts):
    """Per-sample time of one of ``parts`` GPUs that split the given (active) layers and run
    the others whole, docs/model.md §3: ``t(active) / parts + t(inactive)``."""
    measured = split_sum(flops, net.flops, parts) * sec_per_flop(net, machine)
    rest = roofline_s(machine, net.flops_kind - flops_kind, net.traffic_kind - traffic_kind)
    roofline = roofline_s(machine, flops_kind, traffic_kind) / parts + rest
    return jnp.where(net.t_measured_s > 0, measured, roofline)


def net_sample_s(net: Net, machine: Machine):
    """Per-sample training time of the whole network (:func:`sample_s` of every layer)."""
    return sample_s(net, machine, net.flops, net.flops_kind, net.traffic_kind)


def update_s(machine: Machine, w_elems):
    """Weight-update time per iteration, docs/model.md §4: ``wu_passes * delta * w / gpu_mem_bw``."""
    return machine.wu_passes * machine.bytes_per_element * w_elems / machine.gpu_mem_bw_Bps


def split_sum(active, total, parts):
    """``sum_active / parts + sum_inactive``: the share one of ``parts`` GPUs holds."""
    return active / parts + (total - active)


def memory_bytes(machine: Machine, act_elems, w_elems):
    """ParaDL's conservative memory, docs/model.md §6.1: ``2 delta (activations + weights)``."""
    return 2.0 * machine.bytes_per_element * (act_elems + w_elems)


def training_memory_bytes(machine: Machine, saved_elems, work_elems, w_elems):
    """What training keeps, docs/model.md §6.2.

    .. math:: M = \\delta\\,(A_{saved} + A_{work} + (2 + n_{opt})\\,W)

    activations kept for the backward pass, the largest layer's input and
    output (or their gradients) alive at one moment, and the weights, their
    gradients and ``optimizer_states`` copies of optimizer state.
    """
    weights = (2.0 + machine.optimizer_states) * w_elems
    return machine.bytes_per_element * (saved_elems + work_elems + weights)


def choose_memory(machine: Machine, paradl_bytes, training_bytes):
    """The memory of the machine's ``memory_model`` (docs/model.md §6)."""
    return jnp.where(machine.memory_model == MEMORY_MODELS["paradl"], paradl_bytes, training_bytes)


def replica_memory(machine: Machine, net: Net, batch, w_elems):
    """Memory of a GPU that holds every layer's activations for ``batch`` samples and
    ``w_elems`` weights (serial, data, filter, channel, data+filter), docs/model.md §6."""
    return choose_memory(
        machine,
        memory_bytes(machine, batch * net.act_elems, w_elems),
        training_memory_bytes(machine, batch * net.saved_elems, batch * net.work_elems, w_elems),
    )


def over_dataset(net: Net, global_batch):
    """True when one iteration would need more samples than the data set holds, ``B > D``
    (docs/model.md §11)."""
    return global_batch > net.dataset_samples


def limit_code(machine: Machine, mem_bytes, over_max_p, over_batch, over_data, rule=0):
    """First failing reason in the order rule, batch, max_p, dataset, memory (docs/model.md §11).

    ``over_data`` is :func:`over_dataset` of the strategy's global batch; ``rule`` the code of
    the first legality rule of the strategy's registry entry the configuration breaks
    (:meth:`kernels.strategies.registry.Strategy.limit`: ``heads``, ``divides``, ...; 0 none).
    """
    return jnp.select(
        [rule > 0, over_batch, over_max_p, over_data, mem_bytes > machine.gpu_mem_bytes],
        [rule, BATCH, MAX_P, DATASET, MEMORY],
        OK,
    ).astype(jnp.int32)


def zeros_like(x):
    """A zero of ``x``'s shape and dtype, for terms a strategy does not have."""
    return jnp.zeros_like(x)
