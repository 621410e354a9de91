"""Data+tensor+pipeline parallelism, Megatron style (docs/model.md §16).

p = tp * pp * cp * dp: tensor parallelism over ``tp`` consecutive GPUs, a 1F1B
pipeline of ``pp`` stages, context parallelism over ``cp`` ranks splitting each
sequence (:mod:`kernels.context`), data parallelism over the ``dp`` replicas;
``b`` samples per replica per iteration in ``S`` micro-batches of ``b / S``. The
per-stage quantities come from :mod:`kernels.transformer`'s tables, so an
evaluation is O(1) in the network's size.

Ranks are ordered tp fastest, then cp, then dp, then pp (Megatron-Core's
``tp-cp-ep-dp-pp``): a tp group is contiguous, the gradient group (dp replicas'
cp ranks) spans ``tp * cp * dp`` consecutive GPUs, and pipeline neighbours are
``tp * cp * dp`` GPUs apart.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import collectives, context, footprint, kinds, lowp, terms
from kernels import gemm as gemm_mod
from kernels import machine as mach
from kernels._types import Array
from kernels.machine import Link, Machine
from kernels.names import ATTENTIONS, KINDS, SELECTIVE_POLICIES
from kernels.network import Net
from kernels.strategies import moe, registry
from kernels.terms import Config, Cost
from kernels.transformer import CORE, EXPERT, FULL, OP, SELECTIVE, StageMisc

_LINEAR, _ATTENTION = KINDS.index("linear"), KINDS.index("attention")
#: The grouped expert GEMMs' kind, whose time moe_imbalance stretches (docs/model.md §17).
_EXPERTS = KINDS.index("experts")
#: The kinds whose FLOPs are GEMMs timed by shape when ``gpu_sms > 0`` (docs/model.md §16).
_GEMM_KINDS_MASK = np.array([k.by_shape for k in kinds.TABLE], dtype=np.float64)
#: The kinds that run at the FP8 peak with precision fp8 (docs/model.md §16).
_LINEAR_MASK = np.array([k.fp8 for k in kinds.TABLE], dtype=np.float64)
#: Bytes per weight of the 8-bit copy Transformer Engine keeps of each FP8 layer's weights.
FP8_WEIGHT_BYTES = 1.0
#: Bytes per weight of the optimizer state kept in 32 bits: master weights and Adam's two moments.
OPTIMIZER_BYTES = 12.0


def _at(lines, z):
    """The largest stage's value ``max_h (total_h - split_h z)`` of envelope lines ``[H, 2]``."""
    return jnp.max(lines[..., 0] - lines[..., 1] * z, axis=-1)


#: The strategy's registry entry: its own axes' defaults and its legality rules (docs/model.md §2).
_ENTRY = registry.entry("data+tensor+pipeline")
#: A :class:`Config` whose own axes are all given (:meth:`registry.Strategy.filled`), no None.
Own = Any


def _split(p, own: Own):
    """dp = p / (tp pp cp), at least 1: a row that breaks a rule of the registry (tp pp cp not
    dividing p, ...) is infeasible, its terms kept non-negative."""
    return jnp.maximum(p / (own.tp * own.pp * own.cp), 1.0)


def _value(lines, z, tp, sp):
    """A line ``total - split z`` of the largest stage; with sequence parallelism every part of
    it is split over tp: ``total / tp`` (docs/model.md §16)."""
    return jnp.where(sp > 0, lines[..., 0] / tp, lines[..., 0] - lines[..., 1] * z)


def data_tensor_pipeline(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Data+tensor+pipeline, docs/model.md §16.

    .. math::
        T_{comp} = \\tfrac{D}{dp}\\,\\tfrac{S+pp-1}{S}\\,t_{stage}(tp, r) + I\\,u_{stage}(tp)
                 + I\\,(S+pp-1)\\max(0,\\,k\\lambda - g)

        T_{ar} = I\\,[(S+pp-1)\\,n\\,T_{ar}(tp, \\tfrac{b}{S}\\delta e/n)
                 + T_{ar}(dp, \\delta w_{stage}(tp))]

        T_{p2p} = I\\cdot 2(S+pp-2)(\\alpha + \\tfrac{b}{S}\\delta y_{boundary}\\beta)

        M = (2\\delta + 12/z)\\,w_{stage}(tp)
          + \\delta\\tfrac{b}{S}(\\max(\\min(pp, S)\\,a_{first}(tp, r), a_{stage}(tp, r)) + [r=full]\\,a_{block})

    with B = b dp, n tensor-parallel allreduces of e elements per sample on the
    largest stage, z = dp with ZeRO-1 else 1, k the operations the host issues per
    micro-batch at lambda = op_latency_s each, g the GPU's work of one
    micro-batch; ZeRO-2/3, resharding and HSDP change the gradient reduction, add all-gathers
    and shard the states (:func:`_sharded`, :func:`_memory`). A mixture of experts adds its expert
    weights' states (split over ep x etp), their gradients' reduction over the expert-data-parallel
    replicas and the token all-to-alls (:mod:`kernels.strategies.moe`, docs/model.md §17); context
    parallelism divides every per-sample term by cp and adds ring attention's exposed sends to
    T_p2p, and M gains the loss's logits and the workspace (docs/model.md §20). Where the strategy
    coincides with data (tp = pp = 1, S = 1, no
    recomputation) or pipeline (tp = dp = 1, pp >= 2) every time term is that strategy's,
    to the last bit; memory is the mixed-precision model's.
    """
    own = _ENTRY.filled(cfg)  # the axes not given at their registry defaults
    s = cfg.S
    dp = _split(cfg.p, own)
    big_b = cfg.b * dp
    its = terms.iterations(net.dataset_samples, big_b)
    st = _stage(net, machine, own, cfg)
    # context parallelism (docs/model.md §20): a rank works on 1/cp of each sample (st.micro is
    # its share of a micro-batch), and the cp ranks of the dp replicas reduce the gradients
    grads = context.gradient_group(dp, own.cp)
    comp, traffic_s = _compute(net, machine, st, own, s, grads, its)
    # a mixture of experts' gradients, reduced over the expert-data-parallel replicas (§17)
    experts = moe.gradient_s(machine, cfg.p, own, st.delta * st.w_expert)
    grad, per_micro, hidden = _allreduces(machine, st, own, grads, experts)
    # ZeRO-2/3 (FSDP): a reduce-scatter (and, HSDP, an all-reduce across groups) instead of the
    # all-reduce, and the gathers of the weights
    reduce, gather = _sharded(net, machine, st, own, grads, s)
    grad = jnp.where(own.zero >= 2, reduce + jnp.maximum(experts - hidden, 0.0), grad)
    tensor = st.slots * per_micro
    # the experts' token dispatch and combine, per micro-batch (§17)
    # (OP runs the experts' forward, dispatch included, again: full recomputation's count)
    a2a_mode = jnp.where(st.mode == OP, FULL, st.mode)
    alltoall = moe.alltoall_s(machine, net, a2a_mode, st.row, own, st.micro * st.delta)
    comp = comp + its * st.slots * _host_exposed(machine, st, traffic_s, per_micro + alltoall)
    p2p = _p2p(machine, cfg.p, own, s, grads, its, st.micro * st.delta * st.misc.y_boundary)
    # ring attention's exposed sends, each micro-batch slot, with the pipeline's in t_p2p_s
    ring = context.ring_s(net, machine, own, st.row, st.z, st.micro, st.delta, st.mode)
    p2p = p2p + its * st.slots * ring
    states, activations = _memory(net, machine, st, own, s, grads)
    # beside them, the libraries' workspace (docs/model.md §20)
    mem = states + activations + footprint.workspace_bytes(machine)
    # the first legality rule of the registry the configuration breaks (heads, divides, ...)
    rule = _ENTRY.limit(registry.values(_ENTRY, net, own._asdict(), machine))
    return Cost(
        p=cfg.p,
        p1=dp,
        p2=own.tp * own.pp * own.cp,
        b=cfg.b,
        B=big_b,
        S=s,
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=its * grad + its * tensor,
        t_allgather_s=its * gather,
        t_halo_s=terms.zeros_like(comp),
        t_p2p_s=p2p,
        mem_bytes=mem,
        limit=terms.limit_code(machine, mem, False, False, terms.over_dataset(net, big_b), rule),
        mem_states_bytes=states,
        mem_activations_bytes=activations,
        t_alltoall_s=its * st.slots * alltoall,
    )


class _Stage(NamedTuple):
    """What every term reads of one configuration's largest stage: the recomputation mode and
    stage-count row of the tables, their scalars, z = 1 - 1/tp, the stage's per-sample time and
    weights, the schedule's micro-batch slots, a rank's share of one micro-batch's samples
    (``b / (S cp)``: context parallelism splits each sample), the bytes per element,
    and whether attention is fused (flash)."""

    mode: Array
    row: Array
    misc: StageMisc
    z: Array
    stage_s: Array
    w_stage: Array
    slots: Array
    micro: Array
    delta: Array
    flash: Array
    w_expert: Array
    expert_replicas: Array


def _stage(net: Net, machine: Machine, own: Own, cfg: Config) -> _Stage:
    """The largest stage of a configuration (docs/model.md §16)."""
    table = net.transformer
    tp, pp, s, vp = own.tp, own.pp, cfg.S, own.vp
    row = jnp.clip(pp, 1, table.w.shape[0] - 1).astype(jnp.int32)
    mode = jnp.clip(own.recompute, 0, 2).astype(jnp.int32)
    # selective recomputation under torchtitan's per-operation policy: the tables' OP rows (§21)
    op = (mode == SELECTIVE) & (machine.selective_recompute == SELECTIVE_POLICIES["op"])
    mode = jnp.where(op, OP, mode).astype(jnp.int32)
    z = 1.0 - 1.0 / tp
    micro = context.share(cfg.b / s, own.cp)
    stage_s = _stage_s(net, machine, mode, row, z, micro, own)
    # micro-batch slots of the schedule: 1F1B's S + pp - 1; interleaved, the bubble's pp - 1 in
    # slots of 1/vp of a stage (Narayanan et al. SC'21 §2.2)
    slots = jnp.where(vp > 1, s + (pp - 1) / vp, s + pp - 1)
    return _Stage(
        mode=mode,
        row=row,
        misc=StageMisc(*(v[mode, row] for v in table.misc)),
        z=z,
        stage_s=stage_s,
        w_stage=_at(table.w[row], z),
        slots=slots,
        micro=micro,
        delta=machine.bytes_per_element,
        # a fused (flash) attention never writes the a s^2 scores
        flash=machine.attention == ATTENTIONS["flash"],
        # a mixture of experts' weights, split over ep x etp rather than tp (§17)
        w_expert=moe.weights(net, row, own),
        expert_replicas=moe.replicas(cfg.p, own),
    )


def _compute(net: Net, machine: Machine, st: _Stage, own: Own, s, dp, its):
    """The compute term per epoch without the host's (the stages' work with the bubble, the
    weight update, the memory-bound kernels' traffic), and the traffic's time per sample."""
    tp, pp, vp, sp = own.tp, own.pp, own.vp, own.sp
    stage_s = st.stage_s
    # the data strategy's order of operations for one stage, the pipeline's for several
    one_stage = net.dataset_samples / dp * ((s + pp - 1) / s) * stage_s
    stages = net.dataset_samples * (pp + s - 1) / s * stage_s / dp
    comp = jnp.where(
        pp == 1, one_stage, jnp.where(vp > 1, net.dataset_samples * st.slots / s * stage_s / dp, stages)
    )
    comp = comp + its * terms.update_s(machine, st.w_stage + st.w_expert)
    # the weights to FP8 once an iteration, the rank's experts' too (docs/model.md §19)
    comp = comp + its * lowp.cast_s(machine, own.precision, st.w_stage + st.w_expert)
    # the memory-bound kernels' activation traffic, at the memory bandwidth, with the bubble
    misc, z = st.misc, st.z
    traffic = _value(jnp.stack([misc.traffic_total, misc.traffic_split]), z, tp, sp)
    # a fused (flash) attention never writes the a s^2 scores: their passes are not moved
    traffic = traffic - jnp.where(
        st.flash, _value(jnp.stack([misc.scores, misc.scores_split]), z, tp, sp), 0.0
    )
    traffic_s = machine.bytes_per_element * traffic * machine.eltwise_traffic / machine.gpu_mem_bw_Bps
    comp = comp + net.dataset_samples / dp * (st.slots / s) * traffic_s
    return comp, traffic_s


def _allreduces(machine: Machine, st: _Stage, own: Own, dp, experts):
    """The gradient allreduce per iteration with the expert weights' reduction ``experts``
    (overlapped as Megatron-LM overlaps it), one micro-batch's tensor-parallel allreduces, and
    the backward time that hides the gradients' reduction."""
    grad = _gradient_allreduce(machine, own, dp, st.delta * st.w_stage) + experts
    # overlapped with the last micro-batch's backward pass (Megatron-LM's bucketed
    # overlap_grad_reduce): only what that pass, 2/3 of the stage's work, cannot hide is exposed
    hidden = st.micro * 2.0 / 3.0 * st.stage_s
    grad = jnp.where(machine.overlap_grad_reduce > 0, jnp.maximum(grad - hidden, 0.0), grad)
    hidden = jnp.where(machine.overlap_grad_reduce > 0, hidden, 0.0)
    # with sequence parallelism each allreduce is a reduce-scatter and an all-gather: the same time
    return grad, _tensor_allreduce(machine, st.misc, own.tp, st.micro * st.delta), hidden


def _host_exposed(machine: Machine, st: _Stage, traffic_s, per_micro):
    """The host's time per micro-batch slot that the GPU's work does not hide: the busiest
    stage's operations cost op_latency_s each to issue (a tensor-parallel collective is one
    call inside its layer's, already counted); the GPU runs them as they come, so a slot takes
    the longer of the host's issue time and the GPU's work (docs/model.md §16)."""
    host = st.misc.ops * machine.op_latency_s
    gpu = st.micro * (st.stage_s + traffic_s) + per_micro
    return jnp.maximum(host - gpu, 0.0)


def _shard_group(own: Own, dp):
    """The ranks ZeRO shards over: the whole gradient group ``dp`` (every data-parallel
    replica's cp ranks), or HSDP's groups of ``dp_shard`` replicas' cp ranks each."""
    return jnp.where(own.dp_shard > 0, jnp.minimum(own.dp_shard * own.cp, dp), dp)


def _layers(net: Net, own: Own):
    """Transformer blocks on the largest stage (ceil(blocks / pp)), at least 1."""
    return jnp.maximum(jnp.ceil(net.n_stages / own.pp), 1.0)


def _sharded(net: Net, machine: Machine, st: _Stage, own: Own, dp, s):
    """ZeRO-2/3's collectives per iteration (docs/model.md §16): the gradients' exposed
    reduction and the weights' exposed all-gathers, each on the links its group spans.

    The shard group is ``n`` (:func:`_shard_group`) replicas, ``tp n`` consecutive GPUs; HSDP's
    ``dp / n`` groups then all-reduce their shard across (stride ``tp n``, spanning ``tp dp``
    GPUs). ZeRO-2 (DeepSpeed's stage 2; Megatron-LM's distributed optimizer likewise):
    a reduce-scatter of the stage's gradients, overlapped with the backward as the all-reduce
    is, then an all-gather of the updated weights after the step, exposed. ZeRO-3 (FSDP): per
    micro-batch each block's weights are all-gathered in the forward and, with ``reshard``,
    again in the backward, and its gradients reduce-scattered; the gather of block i+1 is
    prefetched under block i's compute, so a block exposes only what its collectives outlast
    its compute (forward 1/3, backward 2/3 of the stage's work), plus the first gather and the
    last reduce-scatter. Without a pipeline FSDP reduce-scatters each micro-batch's gradients
    (PyTorch FSDP2 without ``set_requires_gradient_sync(False)``); under one (pp > 1) PyTorch's
    schedules gather the stage once, in the first micro-batch's forward, and reduce-scatter its
    FP32 gradients once after the last backward (:func:`kernels.footprint.pipelined_fsdp_bytes`)."""
    n = _shard_group(own, dp)
    w_bytes = st.delta * st.w_stage
    # the dp group's NIC share as the all-reduce's; HSDP's cross-group ring, every GPU of a node
    share = jnp.minimum(own.tp, machine.gpus_per_node) / machine.nics_per_node
    shard = mach.link(machine, own.tp * n, share)
    across_share = jnp.minimum(own.tp * n, machine.gpus_per_node) / machine.nics_per_node
    across = collectives.allreduce_s(
        machine.allreduce_algo, dp / n, w_bytes / n, *mach.link(machine, own.tp * dp, across_share)
    )
    hidden = jnp.where(machine.overlap_grad_reduce > 0, st.micro * 2.0 / 3.0 * st.stage_s, 0.0)
    two = jnp.maximum(collectives.ring_reduce_scatter_s(n, w_bytes, *shard) + across - hidden, 0.0)
    gather2 = collectives.ring_allgather_s(n, w_bytes, *shard)
    # ZeRO-3, per block of the stage, each micro-batch
    layers = _layers(net, own)
    ag = collectives.ring_allgather_s(n, w_bytes / layers, *shard)
    rs = collectives.ring_reduce_scatter_s(n, w_bytes / layers, *shard)
    block_s = st.micro * st.stage_s / layers
    # the first block's gather and the last reduce-scatter have no compute to hide behind
    forward = ag + (layers - 1.0) * jnp.maximum(ag - block_s / 3.0, 0.0)
    backward = rs + (layers - 1.0) * jnp.maximum(own.reshard * ag + rs - 2.0 * block_s / 3.0, 0.0)
    three = s * backward + jnp.maximum(across - hidden, 0.0)
    # under a pipeline (PyTorch's schedules, footprint.pipelined_fsdp_bytes): the first micro-batch
    # gathers the stage, the FP32 gradients are reduce-scattered once after the last backward
    once = collectives.ring_reduce_scatter_s(n, footprint.GRAD_ACCUM_BYTES * st.w_stage, *shard)
    piped = own.pp > 1
    three = jnp.where(piped, once + jnp.maximum(across - hidden, 0.0), three)
    reduce = jnp.where(own.zero >= 3, three, two)
    gather3 = jnp.where(piped, forward, s * forward)
    return reduce, jnp.where(own.zero >= 3, gather3, jnp.where(own.zero >= 2, gather2, 0.0))


def _memory(net: Net, machine: Machine, st: _Stage, own: Own, s, dp):
    """Memory per GPU as (states, activations): weights, gradients and optimizer state of the
    largest stage after ZeRO's sharding; the activations of the micro-batches in flight, full
    recomputation's block, the loss's logits and ZeRO-3's gathered weights (docs/model.md §16,
    §20)."""
    table, z, tp, pp, vp, sp = net.transformer, st.z, own.tp, own.pp, own.vp, own.sp
    # activations: the recomputation mode's lines; a fused (flash) attention keeps no scores,
    # as selective recomputation (docs/model.md §16)
    act_mode = jnp.where(st.flash & (st.mode == 0), 1, st.mode)
    act = jnp.max(_value(table.act[act_mode, st.row], z, tp, sp), axis=-1)
    first = _value(table.act_first[act_mode, st.row], z, tp, sp)
    # full recomputation's block at work; a fused attention writes no scores in it (§20)
    scores = jnp.where(st.flash & ((st.mode == FULL) | (st.mode == OP)), footprint.block_scores(net), 0.0)
    work = _value(jnp.stack([st.misc.work_total - scores, st.misc.work_split - scores]), z, tp, sp)
    n = _shard_group(own, dp)
    shards = jnp.where(own.zero > 0, n, 1.0)
    # micro-batches in flight on the first stage; interleaved, (1 + (pp - 1)/(pp vp)) times more
    # (Korthikanti et al. 2022 §4.2.3)
    flight = jnp.minimum(pp, s) * jnp.where(vp > 1, 1.0 + (pp - 1) / (pp * vp), 1.0)
    # FP8 (Transformer Engine): an 8-bit copy of each weight beside the 16-bit one
    fp8_copy = jnp.where(own.precision > 0, FP8_WEIGHT_BYTES, 0.0)
    per_weight = _per_weight(own, st.delta, fp8_copy, n, shards)
    # a mixture of experts' weights: sharded over the expert-data-parallel replicas (§17)
    n_e = st.expert_replicas
    per_expert = _per_weight(own, st.delta, fp8_copy, n_e, jnp.where(own.zero > 0, n_e, 1.0))
    delta = st.delta
    # the rank that holds the most: the first stage's micro-batches in flight, or the largest
    # stage's one (a last stage with the logits); with one stage both are the stage's
    # the last stage also keeps one micro-batch's log-probabilities for the loss (FP32, §20)
    logits = footprint.logits_bytes(net, tp) / delta
    activations = delta * st.micro * (jnp.maximum(flight * first, act + logits) + work)
    # ZeRO-3's gathered blocks: resharding, the block computing and the one prefetched, plus one
    # block's unsharded gradients; without, the stage's weights stay gathered from the forward
    # to the backward (and one block's gradients)
    layers = _layers(net, own)
    block = st.w_stage / layers
    gathered = jnp.where(own.reshard > 0, jnp.minimum(layers, 2.0) * block, st.w_stage) + block
    # under a pipeline the stage stays gathered, with its FP32 gradients accumulated unsharded
    piped = footprint.pipelined_fsdp_bytes(st.w_stage, delta)
    activations = activations + jnp.where(own.zero >= 3, jnp.where(pp > 1, piped, delta * gathered), 0.0)
    return per_weight * st.w_stage + per_expert * st.w_expert, activations


def _per_weight(own: Own, delta, fp8_copy, n, shards):
    """Bytes per weight of the states (weights, FP8 copy, gradients, optimizer) sharded by ZeRO
    over ``n`` replicas (the optimizer state over ``shards``, n with ZeRO, else 1)."""
    # ZeRO-2 shards the gradients too, ZeRO-3 the weights (and their FP8 copy) as well
    sharded = jnp.where(own.zero >= 3, (delta + fp8_copy) / n, delta + fp8_copy) + delta / n
    return jnp.where(
        own.zero >= 2, sharded + OPTIMIZER_BYTES / shards, 2.0 * delta + fp8_copy + OPTIMIZER_BYTES / shards
    )


def _stage_s(net: Net, machine: Machine, mode, row, z, micro, own: Own):
    """Per-sample training time of the largest stage (the envelope's largest line at ``z``):
    :func:`kernels.terms.sample_s` of its FLOPs and per-kind FLOPs and traffic, as the data
    strategy times the network and the pipeline its slowest stage (docs/model.md §3). With
    ``gpu_sms > 0`` the linear layers and attention cores take their GEMMs' time by shape
    instead (:func:`kernels.gemm.slowdown` of each GEMM class, docs/model.md §16). With sequence
    parallelism every layer's work is split over tp. A mixture of experts' grouped GEMMs take
    ``moe_imbalance`` times their time, by their own shapes (:func:`kernels.gemm.slowdown`)."""
    tp, sp, precision = own.tp, own.sp, own.precision
    table = net.transformer
    values = _value(table.flops[mode, row], z, tp, sp)
    h = jnp.argmax(values)

    def largest(kinds):  # the per-kind line of stage h at z (total and split on the second-last axis)
        k = kinds[mode, row, h]
        return jnp.where(sp > 0, k[0] / tp, k[0] - k[1] * z)

    fk, tk = largest(table.flops_kind), largest(table.traffic_kind)
    speedup = _low_precision_speedup(machine, precision)
    # the masks in the kernel's own precision (a float32 sweep runs with x64 on)
    linear_mask, gemm = (jnp.asarray(m, fk.dtype) for m in (_LINEAR_MASK, _GEMM_KINDS_MASK))
    fk = fk / (1.0 + (speedup - 1.0) * linear_mask)
    # the per-kind sums in a computation of their own, as the data and pipeline strategies take
    # them: fused with the lines above, the compiler orders the sum over kinds differently (a
    # last bit apart from the strategies it coincides with)
    plain = terms.sample_s(net, machine, *jax.lax.optimization_barrier((values[h], fk, tk)))
    # the busiest expert's extra tokens, on the expert GEMMs' time by FLOPs (after the sum over
    # kinds: a factor inside it would reorder that sum)
    rate_experts = machine.gpu_flops * machine.efficiency * machine.kind_efficiency[_EXPERTS]
    plain = plain + (machine.moe_imbalance - 1.0) * fk[_EXPERTS] / rate_experts
    rest = terms.roofline_s(machine, fk * (1.0 - gemm), tk * (1.0 - gemm))
    shape = table.gemm_shape
    kind_eff = jnp.where(
        shape[:, 0] == CORE, machine.kind_efficiency[_ATTENTION], machine.kind_efficiency[_LINEAR]
    )
    rate = machine.gpu_flops * machine.efficiency * kind_eff * jnp.where(shape[:, 0] == CORE, 1.0, speedup)
    # a grouped expert GEMM's tokens are its ep etp GPUs', stretched by moe_imbalance (§17)
    slow = gemm_mod.slowdown(machine, shape, micro, tp, rate, moe.group(own), own.etp)
    slow = slow * jnp.where(shape[:, 0] == EXPERT, machine.moe_imbalance, 1.0)
    by_shape = jnp.sum(largest(table.gemm_flops) / rate * slow)
    # the low-precision operands' casts, memory-bound passes of their own (docs/model.md §19)
    return jnp.where(
        (machine.gpu_sms > 0) & (net.t_measured_s <= 0), rest + by_shape, plain
    ) + lowp.activation_cast_s(machine, precision, tk)


def _low_precision_speedup(machine: Machine, precision):
    """The linear layers' GEMM rate in the configuration's precision over their BF16 rate: the
    format's peak over gpu_flops (FP8, MXFP8 or NVFP4; Transformer Engine keeps attention's
    batched GEMMs and the logits in 16 bits), times ``efficiency_linear_lowp / efficiency_linear``
    where a profile states the fraction of the low-precision peak its GEMMs reach (unset, 0: the
    BF16 fraction). 1 for bf16 and for a format the GPU has no rate for (docs/model.md §16)."""
    rate = jnp.where(
        precision == 1,
        machine.gpu_flops_fp8,
        jnp.where(
            precision == 2, machine.gpu_flops_mxfp8, jnp.where(precision == 3, machine.gpu_flops_fp4, 0.0)
        ),
    )
    low = (precision > 0) & (rate > 0)
    eff = machine.efficiency_linear_lowp
    lin = machine.kind_efficiency[_LINEAR]
    own = jnp.where(low & (eff > 0), eff / jnp.where(lin > 0, lin, 1.0), 1.0)
    return jnp.where(low, rate / machine.gpu_flops * own, 1.0)


def _gradient_allreduce(machine: Machine, own: Own, dp, msg_bytes):
    """The dp group's gradient allreduce of one stage's shard, per iteration.

    The group spans tp * dp consecutive GPUs. When it leaves a node, NCCL runs
    one ring per channel and spreads the channels over every NIC of the node, so
    the ``min(tp, gpus_per_node)`` dp groups with members on a node share its
    ``nics_per_node`` NICs: each ring crosses at ``nics / min(tp, gpus_per_node)``
    NICs' bandwidth, more than one NIC's when fewer groups than NICs cross
    (docs/model.md §16). With tp = pp = 1 this is the data strategy's inside a
    node or with one NIC per node.
    """
    share = jnp.minimum(own.tp, machine.gpus_per_node) / machine.nics_per_node
    lk = mach.link(machine, own.tp * dp, share)
    flat = collectives.allreduce_s(machine.allreduce_algo, dp, msg_bytes, *lk)
    return jnp.where(own.tp * own.pp == 1, mach.gradient_allreduce_s(machine, dp, msg_bytes, lk), flat)


def _tensor_allreduce(machine: Machine, misc: StageMisc, tp, micro_bytes):
    """One micro-batch's tensor-parallel allreduces on the largest stage, on the tp group's link:
    ``n`` ring allreduces of ``micro_bytes * e / n`` bytes each (zero for tp = 1). A tp group
    wider than a node is the only group crossing each of its nodes: its rings use every NIC."""
    count, elems = misc.ar_count, misc.ar_elems
    lk = mach.link(machine, tp, 1.0 / machine.nics_per_node)
    each = collectives.ring_allreduce_s(tp, micro_bytes * elems / jnp.maximum(count, 1.0), *lk)
    return count * each


def _p2p(machine: Machine, p, own: Own, s, dp, its, msg_bytes):
    """1F1B's point-to-point traffic per epoch: 2(S + pp - 2) messages of one micro-batch's
    boundary activations on the critical path (the pipeline strategy's, docs/model.md §10.4).
    Inter-node when the p GPUs span nodes, the NICs shared by the ``min(tp dp, gpus_per_node)``
    GPUs of a node sending at once. With ``scatter_gather`` and tp > 1, as Megatron-LM sends
    them (Narayanan et al. SC'21 §4.1): each tensor-parallel rank sends 1/tp of the boundary and
    the receiving tp group all-gathers it on its own link (docs/model.md §16)."""
    pp, tp = own.pp, own.tp
    share = mach.nic_share(machine, jnp.minimum(tp * dp, machine.gpus_per_node))
    inter = mach.first_inter_link(machine, share)
    inside = p <= machine.gpus_per_node
    lk = Link(
        jnp.where(inside, machine.intra_alpha_s, inter.alpha_s),
        jnp.where(inside, 1.0 / machine.intra_bandwidth_Bps, inter.beta_s_per_byte),
    )
    whole = collectives.p2p_s(msg_bytes, *lk)
    group = mach.link(machine, tp, 1.0 / machine.nics_per_node)
    part = collectives.p2p_s(msg_bytes / tp, *lk)
    scattered = part + collectives.ring_allgather_s(tp, msg_bytes, *group)
    hop = jnp.where((machine.scatter_gather > 0) & (tp > 1), scattered, whole)
    # sequence parallel: the boundary is already split over tp, each rank sends its part
    hop = jnp.where(own.sp > 0, part, hop)
    # interleaved: vp times the messages (Narayanan et al. SC'21 §2.2)
    return jnp.where(pp > 1, its * 2.0 * (pp + s - 2) * own.vp * hop, 0.0)
