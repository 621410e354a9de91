"""Every strategy of docs/model.md §10, every term, pinned to values computed by hand.

Network and machine: tests/helpers.py. In short, per sample the training FLOPs
are conv 5184, relu 144, fc 1440 (sum 6768) at 1e12 FLOP/s; weights conv 54,
fc 240 (W = 294 elements = 1176 bytes); non-in-place activations x+y conv 80,
fc 53 (relu is in place); outputs y: conv 48, relu 48, fc 5. D = 1000.
Weight update u(w) = wu_passes * delta * w / gpu_mem_bw = 3 * 4 * w / 1e9:
u(294) = 3.528e-6 s, u(240) = 2.88e-6 s, u(174) = 2.088e-6 s, u(147) = 1.764e-6 s.
Links: intra (1e-6 s, 1e-10 s/B); 3-4 GPUs = 2 nodes: level 0 (1e-5 s, 1e-9 s/B);
5+ GPUs: level 1 (2e-5 s, 2e-9 s/B). 2 GPUs and 1 NIC per node. Memory 1e5 bytes.

Recurring pieces (s):
  T_ar(2, 1176) intra   = 2 * (1e-6 + 588e-10)          = 2.1176e-6
  T_ar(4, 1176) level 0 = 6 * (1e-5 + 294e-9)           = 6.1764e-5
  T_ag(2, 8*4*48=1536) intra = 1e-6 + 768e-10           = 1.0768e-6
  spatial halo of the conv (h = 1), B = 8 samples, per iteration:
      halo_x = C h X2 = 2*1*4 = 8, halo_dy = F h Y2 = 3*1*4 = 12
      intra:   2 * [(1e-6 + 8*4*8*1e-10) + (1e-6 + 8*4*12*1e-10)] = 4.128e-6
      level 0: 2 * [(1e-5 + 8*4*8*1e-9) + (1e-5 + 8*4*12*1e-9)]   = 4.128e-5
"""

from __future__ import annotations

import pytest

import kernels
from kernels.names import LIMITS
from kernels.strategies import PAPER_STRATEGIES
from tests.helpers import assert_terms, config, small_machine_of, small_net_of

TERMS = ("t_comp_s", "t_allreduce_s", "t_allgather_s", "t_halo_s", "t_p2p_s", "mem_bytes")

NETS = {
    "small": lambda: small_net_of(),
    # measured per-sample training time T = 1 us on a machine of the same rate (1e12):
    # t_l = T * flops_l / 6768.
    "measured": lambda: small_net_of(t_measured_s=1e-6, ref_rate_flops=1e12),
    # spatial override: the relu alone is active.
    "spatial_relu": lambda: small_net_of({"spatial": [False, True, False]}),
    # channel override: conv and fc active (the default leaves the first layer out).
    "channel_conv_fc": lambda: small_net_of({"channel": [True, False, True]}),
}


def case(strategy, cfg, want, net="small", limit="", machine=None, id=None):
    return pytest.param(strategy, net, machine or {}, cfg, limit, want, id=id)


# fmt: off
CASES = [
    # ------------------------------------------------------------------ serial
    # B = b = 8, I = ceil(1000/8) = 125.
    # comp = D sum(t) + I sum(u) = 1000 * 6768e-12 + 125 * 3.528e-6 = 6.768e-6 + 4.41e-4
    # mem = 2 delta (B * 133) + 2 delta W = 8 * (1064 + 294) = 10864
    case(
        "serial",
        config(1, 8),
        dict(
            p=1, p1=1, p2=1, b=8, B=8, S=1, iterations=125,
            t_comp_s=4.47768e-4, t_allreduce_s=0, t_allgather_s=0, t_halo_s=0, t_p2p_s=0,
            mem_bytes=10864,
        ),
        id="serial-b8",
    ),
    # cfg.p is ignored: serial is p = 1. B = 24, I = ceil(41.67) = 42.
    # comp = 6.768e-6 + 42 * 3.528e-6 = 1.54944e-4; mem = 8 * (24*133 + 294) = 27888
    case(
        "serial",
        config(4, 24),
        dict(p=1, p1=1, p2=1, B=24, iterations=42, t_comp_s=1.54944e-4, mem_bytes=27888),
        id="serial-b24-ceil",
    ),
    # efficiency 0.5 doubles the FLOPs-based time: 2 * 6.768e-6 + 4.41e-4 = 4.54536e-4
    case("serial", config(1, 8), dict(t_comp_s=4.54536e-4), machine=dict(efficiency=0.5), id="serial-eff"),
    # wu_passes = 0 turns the update off: comp = 6.768e-6
    case("serial", config(1, 8), dict(t_comp_s=6.768e-6), machine=dict(wu_passes=0), id="serial-wu0"),
    # measured: comp = D T + I sum(u) = 1000 * 1e-6 + 4.41e-4 = 1.441e-3
    case("serial", config(1, 8), dict(t_comp_s=1.441e-3), net="measured", id="serial-measured"),
    # memory: b = 100 -> 8 * (100*133 + 294) = 108752 > 1e5; b = 91 -> 8 * 12397 = 99176 fits.
    case("serial", config(1, 100), dict(mem_bytes=108752), limit="memory", id="serial-memory"),
    case("serial", config(1, 91), dict(mem_bytes=99176), id="serial-fits"),
    # ------------------------------------------------------------------ data
    # p = 2 (one node), b = 8: B = 16, I = ceil(62.5) = 63.
    # comp = (D/p) sum(t) + I sum(u) = 500 * 6.768e-9 + 63 * 3.528e-6 = 3.384e-6 + 2.22264e-4
    # allreduce = I T_ar(2, 1176) intra = 63 * 2.1176e-6 = 1.334088e-4
    # mem = 2 delta A(b) + 2W = 8 * (8*133 + 294) = 10864
    case(
        "data",
        config(2, 8),
        dict(
            p=2, p1=2, p2=1, b=8, B=16, S=1, iterations=63,
            t_comp_s=2.25648e-4, t_allreduce_s=1.334088e-4, t_allgather_s=0, t_halo_s=0, t_p2p_s=0,
            mem_bytes=10864,
        ),
        id="data-p2",
    ),
    # p = 4 (2 nodes, level 0, bandwidth undivided: pure strategy): B = 32, I = ceil(31.25) = 32
    # comp = 250 * 6.768e-9 + 32 * 3.528e-6 = 1.692e-6 + 1.12896e-4 = 1.14588e-4
    # allreduce = 32 * T_ar(4, 1176) = 32 * 6.1764e-5 = 1.976448e-3
    case(
        "data",
        config(4, 8),
        dict(p1=4, B=32, iterations=32, t_comp_s=1.14588e-4, t_allreduce_s=1.976448e-3, mem_bytes=10864),
        id="data-p4-level0",
    ),
    # p = 6 (3 nodes, level 1): B = 48, I = ceil(20.83) = 21
    # comp = (1000/6) * 6.768e-9 + 21 * 3.528e-6 = 1.128e-6 + 7.4088e-5 = 7.5216e-5
    # allreduce = 21 * 10 * (2e-5 + 196 * 2e-9) = 21 * 2.0392e-4 = 4.28232e-3
    case(
        "data",
        config(6, 8),
        dict(B=48, iterations=21, t_comp_s=7.5216e-5, t_allreduce_s=4.28232e-3),
        id="data-p6-level1",
    ),
    # measured: comp = 500 * 1e-6 + 2.22264e-4 = 7.22264e-4
    case("data", config(2, 8), dict(t_comp_s=7.22264e-4), net="measured", id="data-measured"),
    # memory: b = 100 -> 108752 > 1e5
    case("data", config(2, 100), dict(mem_bytes=108752), limit="memory", id="data-memory"),
    # batch: p <= B needed; b = 0.5, p = 4 -> B = 2
    case("data", config(4, 0.5), dict(B=2), limit="batch", id="data-batch"),
    # ------------------------------------------------------------------ spatial
    # Default prefix for n <= 4: conv and relu (extents 4, 4), stopping before the fc.
    # p = 2, B = b = 8, I = 125.
    # comp = D (sum_a t/p + sum_i t) + I sum(u) = 1000 * (5328/2 + 1440)e-12 + 4.41e-4
    #      = 4.104e-6 + 4.41e-4 = 4.45104e-4
    # halo = 125 * 4.128e-6 = 5.16e-4
    # allgather = I * 2 T_ag(2, B delta y_relu = 1536) = 125 * 2 * 1.0768e-6 = 2.692e-4
    # allreduce = 125 * 2.1176e-6 = 2.647e-4
    # mem = 2 delta (B * 80/2 + B * 53) + 2W = 8 * (320 + 424 + 294) = 8304
    case(
        "spatial",
        config(2, 8),
        dict(
            p=2, p1=1, p2=2, B=8, S=1, iterations=125,
            t_comp_s=4.45104e-4, t_allreduce_s=2.647e-4, t_allgather_s=2.692e-4, t_halo_s=5.16e-4,
            t_p2p_s=0, mem_bytes=8304,
        ),
        id="spatial-p2",
    ),
    # p = 4 (2 nodes, level 0): comp = 1000 * (5328/4 + 1440)e-12 + 4.41e-4 = 4.43772e-4
    # halo = 125 * 4.128e-5 = 5.16e-3
    # allgather = 125 * 2 * 3 * (1e-5 + 384e-9) = 125 * 6.2304e-5 = 7.788e-3
    # allreduce = 125 * 6.1764e-5 = 7.7205e-3
    # mem = 8 * (8*80/4 + 424 + 294) = 8 * 878 = 7024
    case(
        "spatial",
        config(4, 8),
        dict(
            t_comp_s=4.43772e-4, t_allreduce_s=7.7205e-3, t_allgather_s=7.788e-3, t_halo_s=5.16e-3,
            mem_bytes=7024,
        ),
        id="spatial-p4-level0",
    ),
    # p = 6 > every extent (4): no layer can be split.
    case("spatial", config(6, 8), {}, limit="max_p", id="spatial-max_p"),
    # measured: comp = 1000 * 1e-6 * 4104/6768 + 4.41e-4
    case("spatial", config(2, 8), dict(t_comp_s=1e-3 * 4104 / 6768 + 4.41e-4), net="measured",
         id="spatial-measured"),
    # override: only the relu is active (no kernel -> no halo; in place -> no activations).
    # comp = 1000 * (5184 + 144/2 + 1440)e-12 + 4.41e-4 = 6.696e-6 + 4.41e-4 = 4.47696e-4
    # allgather of the relu's output: 2.692e-4 as above; allreduce 2.647e-4
    # mem = 8 * (8*133 + 294) = 10864
    case(
        "spatial",
        config(2, 8),
        dict(
            t_comp_s=4.47696e-4, t_allreduce_s=2.647e-4, t_allgather_s=2.692e-4, t_halo_s=0,
            mem_bytes=10864,
        ),
        net="spatial_relu",
        id="spatial-override",
    ),
    # the override's extent (relu: 4) still bounds p
    case("spatial", config(4, 8), {}, net="spatial_relu", id="spatial-override-p4"),
    case("spatial", config(5, 8), {}, net="spatial_relu", limit="max_p", id="spatial-override-max_p"),
    # ------------------------------------------------------------------ pipeline
    # p = 2: stages {conv} {relu, fc} (t* = 5184 FLOPs); S = 2, B = 8, I = 125.
    # comp = D (p+S-1)/S tmax + I umax = 1000 * 1.5 * 5.184e-9 + 125 * u(240)
    #      = 7.776e-6 + 3.6e-4 = 3.67776e-4
    # p2p = I * 2(p+S-2) * (alpha + (B/S) delta y_conv beta), intra (p <= 2):
    #     = 125 * 4 * (1e-6 + 4*4*48*1e-10) = 125 * 4 * 1.0768e-6 = 5.384e-4
    # mem = max(8 * (8*80 + 54), 8 * (8*53 + 240)) = max(5552, 5312) = 5552
    case(
        "pipeline",
        config(2, 8, S=2),
        dict(
            p=2, p1=1, p2=2, B=8, S=2, iterations=125,
            t_comp_s=3.67776e-4, t_allreduce_s=0, t_allgather_s=0, t_halo_s=0, t_p2p_s=5.384e-4,
            mem_bytes=5552,
        ),
        id="pipeline-p2",
    ),
    # p = 2, S = 4: comp = 1000 * 5/4 * 5.184e-9 + 3.6e-4 = 3.6648e-4
    # p2p = 125 * 2*4 * (1e-6 + 2*4*48*1e-10) = 125 * 8 * 1.0384e-6 = 1.0384e-3
    case("pipeline", config(2, 8, S=4), dict(S=4, t_comp_s=3.6648e-4, t_p2p_s=1.0384e-3, mem_bytes=5552),
         id="pipeline-p2-S4"),
    # p = 3 > gpus_per_node: boundaries on the first inter level (1e-5 s, 1e-9 s/B); one layer
    # per stage, default S = p = 3.
    # comp = 1000 * 5/3 * 5.184e-9 + 125 * 2.88e-6 = 8.64e-6 + 3.6e-4 = 3.6864e-4
    # p2p = 125 * 2*4 * (1e-5 + (8/3)*4*48*1e-9) = 125 * 8 * 1.0512e-5 = 1.0512e-2
    # mem = max(5552, 0 (relu: in place, no weights), 5312) = 5552
    case("pipeline", config(3, 8), dict(S=3, t_comp_s=3.6864e-4, t_p2p_s=1.0512e-2, mem_bytes=5552),
         id="pipeline-p3-inter"),
    # p = 1, S = 1: serial compute, no messages.
    case("pipeline", config(1, 8), dict(t_comp_s=4.47768e-4, t_p2p_s=0, mem_bytes=10864), id="pipeline-p1"),
    # measured: comp = 1000 * 1.5 * 1e-6 * 5184/6768 + 3.6e-4
    case("pipeline", config(2, 8, S=2), dict(t_comp_s=1.5e-3 * 5184 / 6768 + 3.6e-4), net="measured",
         id="pipeline-measured"),
    case("pipeline", config(4, 8), {}, limit="max_p", id="pipeline-max_p-p>G"),
    case("pipeline", config(2, 8, S=16), {}, limit="batch", id="pipeline-batch-S>B"),
    case("pipeline", config(2, 8, S=2), dict(mem_bytes=5552), machine=dict(gpu_mem_bytes=5000),
         limit="memory", id="pipeline-memory"),
    # ------------------------------------------------------------------ filter
    # active: conv, fc (F = 3, 5); exchange after the conv only (fc is layer G).
    # p = 2, B = 8, I = 125.
    # comp = 1000 * (6624/2 + 144)e-12 + 125 * u(294/2 = 147) = 3.456e-6 + 2.205e-4 = 2.23956e-4
    # allgather = 125 * T_ag(2, 1536) = 125 * 1.0768e-6 = 1.346e-4
    # allreduce = 125 * T_ar(2, 1536) = 125 * 2.1536e-6 = 2.692e-4
    # mem = 2 delta A(B) + 2 delta (147) = 8 * (1064 + 147) = 9688
    case(
        "filter",
        config(2, 8),
        dict(
            p=2, p1=1, p2=2, B=8, S=1, iterations=125,
            t_comp_s=2.23956e-4, t_allreduce_s=2.692e-4, t_allgather_s=1.346e-4, t_halo_s=0, t_p2p_s=0,
            mem_bytes=9688,
        ),
        id="filter-p2",
    ),
    # p = 3 (2 nodes, level 0): comp = 1000 * (2208 + 144)e-12 + 125 * u(98)
    #      = 2.352e-6 + 125 * 1.176e-6 = 1.49352e-4
    # allgather = 125 * 2 * (1e-5 + 512e-9) = 2.628e-3; allreduce twice that = 5.256e-3
    # mem = 8 * (1064 + 98) = 9296
    case(
        "filter",
        config(3, 8),
        dict(t_comp_s=1.49352e-4, t_allreduce_s=5.256e-3, t_allgather_s=2.628e-3, mem_bytes=9296),
        id="filter-p3-level0",
    ),
    # measured: comp = 1e-3 * 3456/6768 + 2.205e-4
    case("filter", config(2, 8), dict(t_comp_s=1e-3 * 3456 / 6768 + 2.205e-4), net="measured",
         id="filter-measured"),
    case("filter", config(4, 8), {}, limit="max_p", id="filter-max_p"),  # min F = 3
    # ------------------------------------------------------------------ channel
    # default active: fc only (layer 0 excluded), which is the last layer: no exchange.
    # p = 2: comp = 1000 * (1440/2 + 5184 + 144)e-12 + 125 * u(120 + 54 = 174)
    #      = 6.048e-6 + 2.61e-4 = 2.67048e-4; mem = 8 * (1064 + 174) = 9904
    case(
        "channel",
        config(2, 8),
        dict(
            p=2, p1=1, p2=2, B=8, S=1, iterations=125,
            t_comp_s=2.67048e-4, t_allreduce_s=0, t_allgather_s=0, t_halo_s=0, t_p2p_s=0,
            mem_bytes=9904,
        ),
        id="channel-p2",
    ),
    # p = 3 = C of the fc: comp = 1000 * (480 + 5328)e-12 + 125 * u(80 + 54) = 5.808e-6 + 2.01e-4
    # mem = 8 * (1064 + 134) = 9584
    case("channel", config(3, 8), dict(t_comp_s=2.06808e-4, mem_bytes=9584), id="channel-p3"),
    case("channel", config(4, 8), {}, limit="max_p", id="channel-max_p"),
    # measured: comp = 1e-3 * 6048/6768 + 2.61e-4
    case("channel", config(2, 8), dict(t_comp_s=1e-3 * 6048 / 6768 + 2.61e-4), net="measured",
         id="channel-measured"),
    # override conv + fc: same sums as filter p = 2 (same active set, same 3(p-1)(...) traffic).
    case(
        "channel",
        config(2, 8),
        dict(t_comp_s=2.23956e-4, t_allreduce_s=2.692e-4, t_allgather_s=1.346e-4, mem_bytes=9688),
        net="channel_conv_fc",
        id="channel-override",
    ),
    # p = 3 stays feasible: the first layer's C = 2 does not bound p, the fc's C = 3 does.
    case(
        "channel",
        config(3, 8),
        dict(t_comp_s=1.49352e-4, t_allreduce_s=5.256e-3, t_allgather_s=2.628e-3, mem_bytes=9296),
        net="channel_conv_fc",
        id="channel-override-p3",
    ),
    # ------------------------------------------------------------------ data+filter
    # p = 4, p2 = 2 (one node), p1 = 2: B = 16, I = 63.
    # comp = (D/p1)(sum_a t/p2 + sum_i t) + I u(147) = 500 * 3456e-12 + 63 * 1.764e-6
    #      = 1.728e-6 + 1.11132e-4 = 1.1286e-4
    # intra (p2 = 2, b = 8): T_ag(2, 8*4*48) = 1.0768e-6, T_ar(2, 1536) = 2.1536e-6
    # inter: T_ar(p1 = 2, delta * 147 = 588), link of p = 4 GPUs (level 0), bandwidth divided by
    #        max(1, gpus_per_node / nics = 2/1) = 2 -> beta 2e-9:
    #        2 * (1e-5 + 294 * 2e-9) = 2.1176e-5
    # allreduce = 63 * (2.1536e-6 + 2.1176e-5) = 63 * 2.33296e-5 = 1.4697648e-3
    # allgather = 63 * 1.0768e-6 = 6.78384e-5
    # mem = 2 delta A(b) + 2 delta 147 = 8 * (1064 + 147) = 9688
    case(
        "data+filter",
        config(4, 8, p2=2),
        dict(
            p=4, p1=2, p2=2, b=8, B=16, S=1, iterations=63,
            t_comp_s=1.1286e-4, t_allreduce_s=1.4697648e-3, t_allgather_s=6.78384e-5, t_halo_s=0,
            t_p2p_s=0, mem_bytes=9688,
        ),
        id="data+filter-p4-nic",
    ),
    # p = 6, p2 = 2: p1 = 3, B = 24, I = 42; link of 6 GPUs = level 1, beta 2e-9 * 2 = 4e-9.
    # comp = (1000/3) * 3456e-12 + 42 * 1.764e-6 = 1.152e-6 + 7.4088e-5 = 7.524e-5
    # inter T_ar(3, 588) = 4 * (2e-5 + 196 * 4e-9) = 8.3136e-5
    # allreduce = 42 * (2.1536e-6 + 8.3136e-5) = 42 * 8.52896e-5 = 3.5821632e-3
    # allgather = 42 * 1.0768e-6 = 4.52256e-5
    case(
        "data+filter",
        config(6, 8, p2=2),
        dict(p1=3, B=24, iterations=42, t_comp_s=7.524e-5, t_allreduce_s=3.5821632e-3,
             t_allgather_s=4.52256e-5, mem_bytes=9688),
        id="data+filter-p6-level1",
    ),
    # p = p2 = 2: p1 = 1, no inter-group allreduce; equal to filter p = 2.
    case(
        "data+filter",
        config(2, 8, p2=2),
        dict(p1=1, B=8, iterations=125, t_comp_s=2.23956e-4, t_allreduce_s=2.692e-4,
             t_allgather_s=1.346e-4, mem_bytes=9688),
        id="data+filter-p1=1",
    ),
    # measured: comp = 500 * 1e-6 * 3456/6768 + 1.11132e-4
    case("data+filter", config(4, 8, p2=2), dict(t_comp_s=5e-4 * 3456 / 6768 + 1.11132e-4),
         net="measured", id="data+filter-measured"),
    case("data+filter", config(5, 8, p2=2), {}, limit="max_p", id="data+filter-p2-not-dividing"),
    case("data+filter", config(2, 8, p2=3), {}, limit="max_p", id="data+filter-p<p2"),
    case("data+filter", config(8, 8, p2=4), {}, limit="max_p", id="data+filter-p2>minF"),
    # ------------------------------------------------------------------ data+spatial
    # p = 4, p2 = 2, p1 = 2: B = 16, I = 63; active prefix for 2: conv, relu.
    # comp = 500 * (5328/2 + 1440)e-12 + 63 * 3.528e-6 = 2.052e-6 + 2.22264e-4 = 2.24316e-4
    # halo (b = 8, intra) = 63 * 4.128e-6 = 2.60064e-4
    # allgather = 63 * 2 * 1.0768e-6 = 1.356768e-4
    # allreduce = 63 * [T_ar(2, 1176) intra + T_ar(p1 = 2, 1176) on the link of 4 GPUs
    #   (level 0), k = max(1, 2/2) = 1 leader per node -> bandwidth undivided]
    #   = 63 * (2.1176e-6 + 2 * (1e-5 + 588e-9)) = 63 * 2.32936e-5 = 1.4674968e-3
    # mem = 8 * (8*80/2 + 8*53 + 294) = 8304
    case(
        "data+spatial",
        config(4, 8, p2=2),
        dict(
            p=4, p1=2, p2=2, b=8, B=16, S=1, iterations=63,
            t_comp_s=2.24316e-4, t_allreduce_s=1.4674968e-3, t_allgather_s=1.356768e-4,
            t_halo_s=2.60064e-4, t_p2p_s=0, mem_bytes=8304,
        ),
        id="data+spatial-p4",
    ),
    # p = 4, p2 = 1: no spatial split (no halo, no gather); k = max(1, 2/1) = 2 leaders per node
    # share 1 NIC -> beta 2e-9 on level 0. p1 = 4, B = 32, I = 32.
    # comp = 250 * 6768e-12 + 32 * 3.528e-6 = 1.14588e-4
    # allreduce = 32 * 6 * (1e-5 + 294 * 2e-9) = 32 * 6.3528e-5 = 2.032896e-3
    # mem = 8 * (8*80 + 8*53 + 294) = 10864
    case(
        "data+spatial",
        config(4, 8, p2=1),
        dict(p1=4, p2=1, B=32, iterations=32, t_comp_s=1.14588e-4, t_allreduce_s=2.032896e-3,
             t_allgather_s=0, t_halo_s=0, mem_bytes=10864),
        id="data+spatial-p2=1-nic",
    ),
    # measured: comp = 500 * 1e-6 * 4104/6768 + 2.22264e-4
    case("data+spatial", config(4, 8, p2=2), dict(t_comp_s=5e-4 * 4104 / 6768 + 2.22264e-4),
         net="measured", id="data+spatial-measured"),
    case("data+spatial", config(6, 8, p2=4), {}, limit="max_p", id="data+spatial-p2-not-dividing"),
    case("data+spatial", config(8, 8, p2=8), {}, limit="max_p", id="data+spatial-group>extent"),
    # b = 200: mem = 8 * (200*80/2 + 200*53 + 294) = 8 * 18894 = 151152 > 1e5
    case("data+spatial", config(4, 200, p2=2), dict(mem_bytes=151152), limit="memory",
         id="data+spatial-memory"),
    # ------------------------------------------------------------------ dataset (B > D = 1000)
    # data: B = 2 * 501 = 1002 > 1000 (mem 8 * (501*133 + 294) = 535416 > 1e5 too: dataset first)
    case("data", config(2, 501), dict(B=1002, iterations=1), limit="dataset", id="data-dataset"),
    # B = 1000 = D exactly is one iteration, not over the data set (memory still fails)
    case("data", config(2, 500), dict(B=1000, iterations=1), limit="memory", id="data-B=D"),
    case("serial", config(1, 1001), dict(B=1001), limit="dataset", id="serial-dataset"),
    case("filter", config(2, 1001), dict(B=1001), limit="dataset", id="filter-dataset"),
    case("spatial", config(2, 1001), dict(B=1001), limit="dataset", id="spatial-dataset"),
    case("data+filter", config(4, 501, p2=2), dict(B=1002), limit="dataset", id="data+filter-dataset"),
    case("data+spatial", config(4, 501, p2=2), dict(B=1002), limit="dataset", id="data+spatial-dataset"),
    case("pipeline", config(2, 1001, S=2), dict(B=1001), limit="dataset", id="pipeline-dataset"),
    # batch and max_p come before dataset: S > B, and p > G
    case("pipeline", config(2, 1001, S=2000), {}, limit="batch", id="pipeline-batch-before-dataset"),
    case("pipeline", config(4, 1001), {}, limit="max_p", id="pipeline-max_p-before-dataset"),
]
# fmt: on


@pytest.fixture(scope="module")
def nets():
    return {name: build() for name, build in NETS.items()}


@pytest.mark.parametrize(("strategy", "net", "machine", "cfg", "limit", "want"), CASES)
def test_hand_values(nets, strategy, net, machine, cfg, limit, want):
    cost = kernels.STRATEGIES[strategy](nets[net], small_machine_of(**machine), cfg)
    assert LIMITS[int(cost.limit)] == limit
    assert_terms(cost, **want)


def test_every_strategy_and_term_is_pinned():
    """The table above gives every paper strategy all six terms in at least one row
    (data+tensor+pipeline is pinned by tests/kernels/test_megatron.py)."""
    for name in PAPER_STRATEGIES:
        rows = [want for (strategy, *_, want) in (c.values for c in CASES) if strategy == name]
        assert rows, name
        assert any(all(t in want for t in TERMS) for want in rows), name


def test_measured_time_scales_with_the_machine_rate():
    """Beyond docs/model.md §3 (documented in kernels.terms.sec_per_flop): a measured time is
    scaled by ref_rate / (gpu_flops * efficiency). On a 2e12 FLOP/s machine with T measured
    at 1e12: serial comp = 1000 * 1e-6 / 2 + 4.41e-4 = 9.41e-4."""
    net = small_net_of(t_measured_s=1e-6, ref_rate_flops=1e12)
    cost = kernels.STRATEGIES["serial"](net, small_machine_of(gpu_flops=2e12), config(1, 8))
    assert_terms(cost, t_comp_s=9.41e-4)
