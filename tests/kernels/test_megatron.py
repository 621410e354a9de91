"""data+tensor+pipeline (kernels/strategies/megatron.py, docs/model.md §16): a worked example by
hand, the cases where it coincides with data and pipeline, and its misfits."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from kernels.machine import Machine
from kernels.names import BATCH, DIVIDES, HEADS, KINDS, MAX_P, MEMORY_MODELS, OK, PRECISION
from sweep.inputs.layers import to_arrays
from sweep.inputs.transformers import gpt

f64 = np.float64
TENSOR = jax.jit(kernels.STRATEGIES["data+tensor+pipeline"])
#: mem_bytes's workspace beside states and activations (docs/model.md §20): the machine default,
#: cuBLAS's eight 4 MiB chunks, 8 * 4 * 2^20 = 33,554,432 bytes
WORKSPACE = 8 * 4 * 2**20
#: the tiny GPTs' loss on the last stage (docs/model.md §20): the output's s V = 2 * 8 = 16 logits
#: per sample, 10 bytes each while the loss runs, over tp = 2: 80 bytes per sample, times the
#: micro-batch of 2 samples
LOGITS_TP2 = 80 * 2
DATA = jax.jit(kernels.STRATEGIES["data"])
PIPELINE = jax.jit(kernels.STRATEGIES["pipeline"])


def machine(gpus_per_node=4.0, **changes) -> Machine:
    """Round numbers: 1,000 FLOP/s, intra and inter links of 1 ms and 1,000 B/s, 2-byte elements."""
    values = {
        "gpu_flops": 1e3,
        "efficiency": 1.0,
        "gpu_mem_bytes": 1e12,
        "gpu_mem_bw_Bps": 1e3,
        "gpus_per_node": gpus_per_node,
        "nics_per_node": 1.0,
        "bytes_per_element": 2.0,
        "wu_passes": 1.0,
        "intra_alpha_s": 1e-3,
        "intra_bandwidth_Bps": 1e3,
        "allreduce_algo": 0.0,
        "memory_model": MEMORY_MODELS["paradl"],
        "optimizer_states": 1.0,
        "mem_passes": 0.0,  # the paper's compute: FLOPs at gpu_flops * efficiency
    } | changes
    levels = {
        "inter_span_nodes": [np.inf],
        "inter_alpha_s": [1e-3],
        "inter_bandwidth_Bps": [1e3],
        "kind_efficiency": np.ones(len(KINDS)),
    }
    return Machine(**{k: f64(v) for k, v in values.items()}, **{k: np.asarray(v) for k, v in levels.items()})


def tiny(samples=16):
    """GPT of one block, hidden 4, 2 heads, sequence 2, vocabulary 8 (docs/model.md §16's example)."""
    return kernels.build_net(to_arrays(gpt("tiny", 1, 4, 2, 2, vocab=8)), samples)


def cfg(p, b, S, tp=1, pp=1, recompute=0, zero=0):
    return kernels.Config(*(f64(v) for v in (p, b, 1, S, tp, pp, recompute, zero)))


def test_worked_example_tp2_dp2():
    """docs/model.md §16's worked example, by hand.

    Forward FLOPs per sample: embed 0, ln1 4*8 = 32, qkv 2*4*12*2 = 192, attention 4*4*2^2 = 64,
    proj 2*4*4*2 = 64, add 8, ln2 32, up 2*4*16*2 = 256, gelu 32, down 2*16*4*2 = 256, add 8,
    ln_f 32, out 2*4*8*2 = 128: 1,104, training 3 * 1,104 = 3,312. Split over tp: qkv, attention,
    proj, up, gelu, down, out = 992 (training 2,976). tp = 2: 3,312 - 2,976 / 2 = 1,824 per sample.
    Weights 40 + 8 + 48 + 16 + 8 + 64 + 64 + 8 = 256, of which embed, qkv, proj, up, down = 232
    split: 256 - 232 / 2 = 140 per GPU.
    p = 4, tp = 2: dp = 2; b = 4, S = 2 (micro-batch 2); B = 8, D = 16: I = 2.
    """
    c = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2))
    assert (float(c.p1), float(c.p2), float(c.B), float(c.iterations)) == (2, 2, 8, 2)
    # D/dp (S+pp-1)/S stage / rate + I wu delta w / bw = 8 * 1 * 1.824 + 2 * 2 * 140 / 1000
    assert float(c.t_comp_s) == pytest.approx(14.592 + 0.56, rel=1e-12)
    # tp: per micro-batch 6 allreduces (forward: embed, proj, down; backward: qkv, up, out) of
    # 8 elements per sample: 6 * 2(2-1)(1e-3 + 2*2*8 / 2 / 1000) = 0.204 s, times S + pp - 1 = 2,
    # per iteration; dp: ring of 2 over 2 * 140 bytes: 2(1e-3 + 140 / 1000) = 0.282; times I = 2
    assert float(c.t_allreduce_s) == pytest.approx(2 * (2 * 0.204 + 0.282), rel=1e-12)
    assert float(c.t_p2p_s) == 0
    # (2 delta + 12) * 140 = 2,240 bytes of weights and optimizer state; activations per sample in
    # 16-bit elements: the block's as Korthikanti et al. count them, s h (34 + 5 a s / h) / 2 =
    # 17 * 8 + 2.5 * 2 * 4 = 156, of which (24 s h + 5 a s^2) / 2 = 116 split; embed x + y = 10;
    # ln_f 16; out 8 + 16 = 24, its 16 split: 206, 132 split: 206 - 66 = 140;
    # delta * micro * min(pp, S) * 140 = 560; with one stage, the loss's logits too
    assert float(c.mem_bytes) == pytest.approx(2240 + 560 + LOGITS_TP2 + WORKSPACE, rel=1e-12)
    assert int(c.limit) == OK
    # ZeRO-1 shards the 12 bytes of optimizer state over dp = 2: (4 + 6) * 140 = 1,400
    z = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, zero=1))
    assert float(z.mem_bytes) == pytest.approx(1400 + 560 + LOGITS_TP2 + WORKSPACE, rel=1e-12)


def test_worked_example_pp2_dp2():
    """pp = 2 on a GPT of two blocks (hidden 4, 2 heads, sequence 2, vocabulary 8): stages are cut
    between blocks only (docs/model.md §16). Training FLOPs per block: ln1 96, qkv 576, attention
    192, proj 192, add 24, ln2 96, up 768, gelu 96, down 768, add 24 = 2,832; embed 0, ln_f 96,
    out 384. Stages {embed, block 0} = 2,832 and {block 1, ln_f, out} = 3,312. Weights: embed
    (8 + 2) * 4 = 40, a block 8 + 48 + 16 + 8 + 64 + 64 = 208, ln_f 8, out 0 (tied): 248 and 216.
    The boundary is block 0's last add, 4 * 2 = 8 elements per sample.
    p = 4, pp = 2, dp = 2, b = 4, S = 2 (micro-batch 2), D = 16: B = 8, I = 2."""
    net = kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)
    c = TENSOR(net, machine(), cfg(4, 4, 2, pp=2))
    # D/dp (S+pp-1)/S stage / rate + I wu delta w / bw = 8 * 3/2 * 3.312 + 2 * 2 * 248 / 1000
    assert float(c.t_comp_s) == pytest.approx(39.744 + 0.992, rel=1e-12)
    # 2 I (pp + S - 2) hops of 1e-3 + 2 * 2 * 8 / 1000 = 0.033 s
    assert float(c.t_p2p_s) == pytest.approx(2 * 2 * 2 * 0.033, rel=1e-12)
    # dp ring of 2 over 2 * 248 bytes: 2(1e-3 + 0.248) = 0.498 per iteration
    assert float(c.t_allreduce_s) == pytest.approx(2 * 0.498, rel=1e-12)
    # activations per sample (16-bit elements): embed x + y = 10, a block (17 s h + 2.5 a s^2 =
    # 136 + 20) 156, ln_f 16, out 8 + 16: stages 166 and 196. The rank that holds the most: the
    # first stage's min(pp, S) = 2 micro-batches in flight, 2 * 166 = 332 > the last's 196 with its
    # logits (2 * 8 = 16 per sample, 10 bytes each: 80 elements of 2 bytes), 276.
    # (2 delta + 12) * 248 + delta * micro * 332
    assert float(c.mem_bytes) == pytest.approx(16 * 248 + 2 * 2 * 2 * 166 + WORKSPACE, rel=1e-12)
    assert float(c.mem_states_bytes) == pytest.approx(16 * 248, rel=1e-12)
    assert float(c.mem_activations_bytes) == pytest.approx(2 * 2 * 2 * 166, rel=1e-12)
    assert int(c.limit) == OK
    # the tiny GPT of one block has one stage only
    assert int(TENSOR(tiny(), machine(), cfg(4, 4, 2, pp=2)).limit) == MAX_P


def test_recompute_adds_forward_work():
    """Full recomputation is 4/3 of the compute (a forward pass more); selective adds the attention
    core's forward, 64 FLOPs per sample here, split over tp like the attention."""
    base, sel, full = (TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, recompute=r)) for r in (0, 1, 2))
    update = 0.56
    assert float(full.t_comp_s) - update == pytest.approx((float(base.t_comp_s) - update) * 4 / 3, rel=1e-12)
    # 8 samples per GPU-replica per epoch (D/dp) * 64/2 FLOPs / 1000 FLOP/s
    assert float(sel.t_comp_s) - float(base.t_comp_s) == pytest.approx(8 * 32 / 1e3, rel=1e-12)
    assert float(sel.mem_bytes) < float(base.mem_bytes)
    # full keeps each block's input (8 per sample here) plus one block's activations while it is
    # recomputed (Korthikanti's 156, 116 split: 98 at tp = 2): 2 * 2 * (8 + 98) = 424 bytes; the
    # layers outside the block keep theirs (x + y: embedding 2 + 8, ln_f 8 + 8, out 8 + 16 with
    # its 16 split, 16 - 8 at tp = 2): 2 * 2 * (10 + 16 + 16) = 168 bytes; and the loss's logits
    assert float(full.mem_bytes) == pytest.approx(2240 + 424 + 168 + LOGITS_TP2 + WORKSPACE, rel=1e-12)
    deep = [TENSOR(GPT, machine(), cfg(8, 8, 8, tp=2, pp=2, recompute=r)) for r in (0, 1, 2)]
    assert float(deep[2].mem_bytes) < float(deep[1].mem_bytes) < float(deep[0].mem_bytes)


def test_op_latency_host_bound():
    """op_latency_s (docs/model.md §16): the host issues each operation in lambda; a micro-batch slot
    takes the longer of the host's issue time and the GPU's work, so I (S + pp - 1) max(0, host - gpu)
    is added to the compute. Operations per micro-batch (transformer.OPS_PER_KIND, forward +
    backward): embed 4 + 3, attention 5 + 7, the other 11 layers (ln1, qkv, proj, add1, ln2, up, gelu,
    down, add2, ln_f, out) 1 + 2 each: 7 + 12 + 33 = 52. Selective recomputes the attention's 5
    forward ops: 57; full every layer's forward again, 4 + 5 + 11 = 20 more: 72. A tensor-parallel
    allreduce is a call inside its layer's, not an operation of its own.

    The worked example's GPU work per micro-batch (m = 2): stage 1,824 FLOPs per sample at 1,000
    FLOP/s, 3.648 s, plus 6 allreduces of 0.034 s, 0.204 s: 3.852 s. Selective: stage 1,856 (the
    attention's 64 forward FLOPs again, split), 3.712 + 0.204; full: 4/3 of 1,824 = 2,432, 4.864 +
    9 * 0.034 = 5.17. I = 2, S + pp - 1 = 2."""
    # lambda = 1 ms: the host's 52 ms is hidden under the GPU's 3.852 s
    small = machine(op_latency_s=1e-3)
    for r in (0, 1, 2):
        base = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, recompute=r))
        assert float(TENSOR(tiny(), small, cfg(4, 4, 2, tp=2, recompute=r)).t_comp_s) == float(base.t_comp_s)
    # lambda = 1 s: 2 * 2 * (52 - 3.852), (57 - 3.916), (72 - 5.17) exposed
    big = machine(op_latency_s=1.0)
    for r, exposed in ((0, 52 - 3.852), (1, 57 - 3.916), (2, 72 - 5.17)):
        base = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, recompute=r))
        c = TENSOR(tiny(), big, cfg(4, 4, 2, tp=2, recompute=r))
        assert float(c.t_comp_s) - float(base.t_comp_s) == pytest.approx(2 * 2 * exposed, rel=1e-12)
        assert float(c.t_allreduce_s) == float(base.t_allreduce_s)
    # a GPU of unbounded speed, pp = 2 on two blocks (a block: 12 + 9 * 3 = 39 operations), tp = 1:
    # the first stage (embed and block 0) issues 7 + 39 = 46, the last (block 1, ln_f, out) 45;
    # I = 2, S + pp - 1 = 3: 2 * 3 * 46 ms exposed, nothing to hide it
    fast = {"gpu_flops": 1e30, "gpu_mem_bw_Bps": 1e30}
    two = kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)
    base = TENSOR(two, machine(**fast), cfg(4, 4, 2, pp=2))
    c = TENSOR(two, machine(op_latency_s=1e-3, **fast), cfg(4, 4, 2, pp=2))
    assert float(c.t_comp_s) - float(base.t_comp_s) == pytest.approx(2 * 3 * 46e-3, rel=1e-9)


def test_memory_bound_traffic():
    """eltwise_traffic (docs/model.md §16): the memory-bound kernels' activation traffic at the
    memory bandwidth. Forward elements per sample (x + y; attention + 6 passes over its a s^2 = 8
    scores), GEMMs none: embed 2 + 8, ln1 8 + 8, attention 24 + 8 + 48, add1 8 + 8, ln2 8 + 8,
    gelu 32 + 32, add2 8 + 8, ln_f 8 + 8: 234, of which attention 80 and gelu 64 split over tp.
    Forward once, backward twice: 702 - 432 z; selective: + 80 - 80 z; full: 936 - 576 z.
    tp = 2 (z = 1/2), pp = 1, S = 2: D/dp (S+pp-1)/S delta traffic / bw = 8 * 1 * 2 * traffic / 1000."""
    on = machine(eltwise_traffic=1.0)
    for r, traffic in ((0, 702 - 216), (1, 782 - 256), (2, 936 - 288)):
        base = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, recompute=r))
        c = TENSOR(tiny(), on, cfg(4, 4, 2, tp=2, recompute=r))
        assert float(c.t_comp_s) - float(base.t_comp_s) == pytest.approx(16 * traffic / 1e3, rel=1e-12)


def test_groups_crossing_nodes_share_every_nic():
    """A ring leaving a node runs over all its NICs, shared by the groups crossing at once
    (docs/model.md §16). Nodes of 2 GPUs with 2 NICs of 1,000 B/s, links of 1 ms."""
    two = machine(gpus_per_node=2.0, nics_per_node=2.0)
    # tp = pp = 1, p = 4: one dp ring over 2 nodes, alone on each node's 2 NICs (2,000 B/s);
    # B = 16, I = 1; ring of 4 over 2 * 256 bytes: 2(4-1)(1e-3 + 512/4 / 2000) = 0.39
    c = TENSOR(tiny(), two, cfg(4, 4, 1))
    assert float(c.t_allreduce_s) == pytest.approx(0.39, rel=1e-12)
    # tp = 2, dp = 2: the two dp rings of a node share its 2 NICs, 1,000 B/s each: the worked
    # example's 2 * (2 * 0.204 + 0.282), as on one NIC per ring
    c = TENSOR(tiny(), two, cfg(4, 4, 2, tp=2))
    assert float(c.t_allreduce_s) == pytest.approx(2 * (2 * 0.204 + 0.282), rel=1e-12)
    # tp = 2 over nodes of one GPU with 2 NICs: the tp ring alone on them, 2,000 B/s: each of 6
    # allreduces per micro-batch 2(2-1)(1e-3 + 2*2*8/2 / 2000) = 0.018; dp = 1, B = 4, I = 4;
    # 4 * (S + pp - 1 = 2) * 6 * 0.018
    c = TENSOR(tiny(), machine(gpus_per_node=1.0, nics_per_node=2.0), cfg(2, 4, 2, tp=2))
    assert float(c.t_allreduce_s) == pytest.approx(4 * 2 * 6 * 0.018, rel=1e-12)


GPT = kernels.build_net(to_arrays(gpt("g", 4, 64, 4, 32, vocab=100)), 10_000)
CNN_SHAPES = st.sampled_from(["gpt", "cnn"])


def _net(kind):
    if kind == "gpt":
        return GPT
    from tests.helpers import small_net_of

    return small_net_of()


@settings(deadline=None, max_examples=25)
@given(kind=CNN_SHAPES, p=st.integers(1, 64), b=st.integers(1, 64), gpn=st.sampled_from([1.0, 4.0, 8.0]))
def test_tp_pp_1_is_data(kind, p, b, gpn):
    """tp = pp = 1, S = 1, no recomputation: every time term, the iterations and the batch are the
    data strategy's, to the last bit (memory is the mixed-precision model's, not ParaDL's)."""
    net, m = _net(kind), machine(gpus_per_node=gpn)
    mine = TENSOR(net, m, cfg(p, b, 1))
    data = DATA(net, m, kernels.Config(*(f64(v) for v in (p, b, 1, 1))))
    for field in (
        "t_comp_s",
        "t_allreduce_s",
        "t_allgather_s",
        "t_halo_s",
        "t_p2p_s",
        "iterations",
        "B",
        "p1",
    ):
        assert float(getattr(mine, field)) == float(getattr(data, field)), field


@settings(deadline=None, max_examples=25)
@given(
    kind=CNN_SHAPES,
    pp=st.integers(2, 8),
    S=st.integers(1, 8),
    k=st.integers(1, 8),
    gpn=st.sampled_from([1.0, 4.0]),
)
def test_dp_tp_1_is_pipeline(kind, pp, S, k, gpn):
    """tp = dp = 1, pp >= 2 stages, S micro-batches dividing b: compute, point-to-point, allreduce (none)
    and iterations are the pipeline strategy's with p = pp, to the last bit; the 1F1B bubble
    (pp - 1)/S is GPipe's. pp = 1 is not the pipeline's p = 1 (that one sums its single group
    in another order) but the data strategy's (test above)."""
    net, m = _net(kind), machine(gpus_per_node=gpn)
    b = S * k
    mine = TENSOR(net, m, cfg(pp, b, S, pp=pp))
    pipe = PIPELINE(net, m, kernels.Config(*(f64(v) for v in (pp, b, pp, S))))
    for field in ("t_comp_s", "t_allreduce_s", "t_p2p_s", "iterations", "B"):
        assert float(getattr(mine, field)) == float(getattr(pipe, field)), field


@pytest.mark.parametrize(
    ("p", "b", "S", "tp", "pp", "reason"),
    [
        (6, 4, 2, 4, 1, DIVIDES),  # tp * pp = 4 does not divide p = 6
        (8, 4, 2, 8, 1, HEADS),  # tp = 8 does not divide the 4 heads
        (8, 4, 3, 2, 2, BATCH),  # S = 3 does not divide b = 4
        (8, 4, 4, 2, 2, OK),
        (8, 4, 4, 1, 8, MAX_P),  # pp = 8 exceeds the 4 blocks (40 layer entries)
        (8, 4, 4, 2, 4, OK),
    ],
)
def test_misfits_are_infeasible(p, b, S, tp, pp, reason):
    c = TENSOR(GPT, machine(), cfg(p, b, S, tp=tp, pp=pp))
    assert int(c.limit) == reason
    assert all(float(getattr(c, f)) >= 0 for f in kernels.Cost._fields)


def test_evaluation_cost_does_not_grow_with_the_network():
    """The tables are per stage count; a kernel reads a few envelope lines, not the layers
    (at most 6 for GPT-3 175B's 963 layers)."""
    big = kernels.build_net(to_arrays(gpt("g", 24, 64, 4, 32, vocab=100)), 10_000)
    for table in (GPT.transformer, big.transformer):
        assert table.flops.shape[2] <= 6 and table.act.shape[2] <= 6 and table.w.shape[1] <= 6


def test_scatter_gather_sends():
    """scatter_gather (docs/model.md §16) on the two-block GPT, tp = 2, pp = 2, dp = 1, b = 4, S = 2:
    the boundary is 8 elements per sample, 2 * 2 * 8 = 32 bytes per micro-batch; I = 16 / 4 = 4,
    2 I (pp + S - 2) = 16 hops. Nodes of 2 GPUs with one NIC: the two GPUs of a node send at once
    (NIC bandwidth halved). Whole: 1e-3 + 32 * 2 / 1000 = 0.065 per hop. Scattered: 1e-3 + 16 * 2
    / 1000 = 0.033 over the NIC, then an all-gather of 32 bytes over the tp pair on the intra link,
    (2 - 1)(1e-3 + 16 / 1000) = 0.017: 0.05 per hop."""
    two = kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)
    on = TENSOR(two, machine(gpus_per_node=2.0), cfg(4, 4, 2, tp=2, pp=2))
    off = TENSOR(two, machine(gpus_per_node=2.0, scatter_gather=0.0), cfg(4, 4, 2, tp=2, pp=2))
    assert float(off.t_p2p_s) == pytest.approx(16 * 0.065, rel=1e-12)
    assert float(on.t_p2p_s) == pytest.approx(16 * 0.05, rel=1e-12)
    # tp = 1: nothing to scatter, the whole boundary either way
    one = [TENSOR(two, machine(gpus_per_node=2.0, scatter_gather=v), cfg(4, 4, 2, pp=2)) for v in (0.0, 1.0)]
    assert float(one[0].t_p2p_s) == float(one[1].t_p2p_s)


def test_gemms_by_shape_at_unit_tiles_are_the_plain_rate():
    """gpu_sms > 0 times the linear layers and attention cores by their GEMMs' shapes; with one SM,
    1 x 1 tiles and an unbounded memory bandwidth every GEMM takes its FLOPs at the plain rate, so
    the compute is the worked example's 15.152 s (docs/model.md §16)."""
    m = machine(gpu_sms=1.0, gemm_tile_m=1.0, gemm_tile_n=1.0, gpu_mem_bw_Bps=1e30)
    c = TENSOR(tiny(), m, cfg(4, 4, 2, tp=2))
    assert float(c.t_comp_s) == pytest.approx(
        14.592, rel=1e-12
    )  # the update's 0.56 s is gone with the bandwidth
    # with 3 x 3 tiles the GEMMs of 4 rows (2 samples of 2 positions) waste a third of a tile: slower
    tiles = machine(gpu_sms=1.0, gemm_tile_m=3.0, gemm_tile_n=3.0, gpu_mem_bw_Bps=1e30)
    assert float(TENSOR(tiny(), tiles, cfg(4, 4, 2, tp=2)).t_comp_s) > 14.592


FOUR = kernels.build_net(to_arrays(gpt("tiny4", 4, 4, 2, 2, vocab=8)), 16)


def cfg7(p, b, S, tp=1, pp=1, recompute=0, vp=1, sp=0):
    return kernels.Config(*(f64(v) for v in (p, b, 1, S, tp, pp, recompute, 0, vp, sp, 0)))


def test_interleaved_schedule():
    """vp = 2 chunks per GPU (docs/model.md §16): the bubble (pp - 1)/(vp S), so with pp = 2, S = 2
    the compute's factor (S + (pp - 1)/vp)/S = 1.25 instead of 1.5; vp times the messages; the
    first stage's in-flight activations (1 + (pp - 1)/(pp vp)) = 1.25 times."""
    m = machine()
    plain, inter = TENSOR(FOUR, m, cfg7(2, 4, 2, pp=2)), TENSOR(FOUR, m, cfg7(2, 4, 2, pp=2, vp=2))
    # compute without the weight update (an unbounded memory bandwidth), which has no bubble
    base = TENSOR(FOUR, m._replace(gpu_mem_bw_Bps=f64(1e30)), cfg7(2, 4, 2, pp=2))
    fast = TENSOR(FOUR, m._replace(gpu_mem_bw_Bps=f64(1e30)), cfg7(2, 4, 2, pp=2, vp=2))
    assert float(fast.t_comp_s) == pytest.approx(float(base.t_comp_s) * 1.25 / 1.5, rel=1e-12)
    assert float(inter.t_p2p_s) == pytest.approx(2 * float(plain.t_p2p_s), rel=1e-12)
    assert int(inter.limit) == OK
    # S = 3 is not a multiple of pp = 2: batch; 2 stages of 5 chunks are 10 chunks, which divide
    # neither the 4 blocks nor the 5 or 6 layers with the embedding and the loss counted: max_p
    assert int(TENSOR(FOUR, m, cfg7(2, 6, 3, pp=2, vp=2)).limit) == BATCH
    assert int(TENSOR(FOUR, m, cfg7(2, 4, 2, pp=2, vp=5)).limit) == MAX_P
    # 2 stages of 3 chunks place the 4 blocks with the embedding and the loss as layers (6 chunks
    # of one layer, as Megatron-LM's account_for_*_in_pipeline_split does): no limit
    assert int(TENSOR(FOUR, m, cfg7(2, 4, 2, pp=2, vp=3)).limit) == OK


def test_sequence_parallel_splits_every_activation():
    """sp = 1 with tp = 2 (docs/model.md §16): the worked example's activations all split, 206 / 2
    = 103 per sample instead of 140: 2 * 2 * 103 = 412 bytes with the 2,240 of weights; the
    tensor-parallel allreduces become reduce-scatters and all-gathers of the same time."""
    c = TENSOR(tiny(), machine(), cfg7(4, 4, 2, tp=2, sp=1))
    assert float(c.mem_bytes) == pytest.approx(2240 + 412 + LOGITS_TP2 + WORKSPACE, rel=1e-12)
    plain = TENSOR(tiny(), machine(), cfg7(4, 4, 2, tp=2))
    assert float(c.t_allreduce_s) == float(plain.t_allreduce_s)
    # compute: every layer's FLOPs split, 3,312 / 2 = 1,656 per sample: 8 * 1.656 + 0.56
    assert float(c.t_comp_s) == pytest.approx(8 * 1.656 + 0.56, rel=1e-12)


def test_flash_attention_keeps_no_scores():
    """attention = flash: the none mode keeps no a s^2 scores, as selective recomputation (the
    worked example: 206 - 20 = 186 per sample, 132 - 20 = 112 split: 186 - 56 = 130)."""
    c = TENSOR(tiny(), machine(attention=1.0), cfg(4, 4, 2, tp=2))
    assert float(c.mem_bytes) == pytest.approx(2240 + 2 * 2 * 130 + LOGITS_TP2 + WORKSPACE, rel=1e-12)


def test_flash_attention_moves_no_scores():
    """attention = flash with eltwise_traffic = 1: the memory-bound traffic leaves out the 6 passes
    over the a s^2 = 8 scores per sample (48 forward; the worked example's attention traffic was
    24 + 8 + 6 * 8): forward once and backward twice, 144, all split over tp = 2: 72 per sample,
    D/dp (S + pp - 1)/S delta 72 / 1000 = 8 * 1 * 2 * 72 / 1000 = 1.152 s less. Selective and full
    recomputation pass over them once more: 192, 96 split, 1.536 s."""
    on = {"eltwise_traffic": 1.0}
    for r, less in ((0, 1.152), (1, 1.536), (2, 1.536)):
        standard = TENSOR(tiny(), machine(**on), cfg(4, 4, 2, tp=2, recompute=r))
        flash = TENSOR(tiny(), machine(attention=1.0, **on), cfg(4, 4, 2, tp=2, recompute=r))
        assert float(standard.t_comp_s) - float(flash.t_comp_s) == pytest.approx(less, rel=1e-12)
    # without the traffic term nothing changes in time
    assert float(TENSOR(tiny(), machine(attention=1.0), cfg(4, 4, 2, tp=2)).t_comp_s) == float(
        TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2)).t_comp_s
    )


def test_fp8_runs_the_linear_layers_at_the_fp8_peak():
    """precision = fp8 on a GPU of 2,000 FP8 FLOP/s (twice its 16-bit 1,000): the worked example's
    linear layers (qkv 576, proj 192, up 768, down 768, out 384 training FLOPs per sample, all
    split: 2,688 / 2 = 1,344 at tp = 2) take half as long: 8 * 0.672 s less, less the casts to
    FP8 (docs/model.md §19): 4 bytes an element of the linear layers' |x| + |y| (qkv 8 + 24,
    proj 8 + 8, up 8 + 32, down 32 + 8, out 8 + 16 = 152 per sample, split: 76 at tp = 2) at
    1,000 B/s, 8 * 0.304 s, and of the 140 weights once an iteration, 2 * 0.56 s; an 8-bit copy
    of each of the 140 weights, 140 bytes more. Without an FP8 peak: the registry's precision
    rule."""
    c16 = TENSOR(tiny(), machine(gpu_flops_fp8=2e3), cfg(4, 4, 2, tp=2))
    c8 = TENSOR(tiny(), machine(gpu_flops_fp8=2e3), cfg(4, 4, 2, tp=2)._replace(precision=f64(1)))
    assert float(c16.t_comp_s) - float(c8.t_comp_s) == pytest.approx(
        8 * 0.672 - 8 * 0.304 - 2 * 0.56, rel=1e-6
    )
    assert float(c8.mem_bytes) - float(c16.mem_bytes) == pytest.approx(140, rel=1e-12)
    none = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2)._replace(precision=f64(1)))
    assert int(none.limit) == PRECISION


def test_overlapped_gradient_allreduce():
    """overlap_grad_reduce = 1: the dp allreduce (the worked example's 0.282 s per iteration) hides
    behind the last micro-batch's backward pass, 2/3 of 2 samples * 1.824 s = 2.432 s: nothing is
    exposed; the tp allreduces stay (2 * 2 * 0.204)."""
    c = TENSOR(tiny(), machine(overlap_grad_reduce=1.0), cfg(4, 4, 2, tp=2))
    assert float(c.t_allreduce_s) == pytest.approx(2 * 2 * 0.204, rel=1e-12)


def test_the_kernel_names_the_rule_check_names():
    """The kernel's limit code is the first broken rule of the registry entry, the rule
    ``check`` names for one configuration (docs/model.md §2): every (p, b, S, tp, pp, vp) of a
    small grid on the 4-block, 4-head GPT, on a GPU without an FP8 rate for fp8."""
    import itertools

    from kernels.names import LIMITS
    from kernels.strategies.registry import entry

    tensor = entry("data+tensor+pipeline")
    m = machine()
    grid = itertools.product((4, 6, 8), (4, 6), (1, 2, 3), (1, 2, 3), (1, 2, 8), (1, 2), (0, 1))
    named = set()
    for p, b, s, tp, pp, vp, prec in grid:
        c = cfg7(p, b, s, tp, pp, vp=vp)._replace(precision=f64(prec))
        found = tensor.broken(
            FOUR, {"p": p, "b": b, "S": s, "tp": tp, "pp": pp, "vp": vp, "precision": prec}, m
        )
        code = int(TENSOR(FOUR, m, c).limit)
        if found is None:
            assert LIMITS[code] in ("", "memory", "dataset"), (p, b, s, tp, pp, vp, prec, LIMITS[code])
        else:
            assert LIMITS[code] == found.rule.reason, (p, b, s, tp, pp, vp, prec, found.message)
            named.add(found.rule.reason)
    assert named == {"heads", "divides", "max_p", "schedule", "batch", "precision"}
