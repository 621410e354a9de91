"""Pipeline (layer) parallelism, GPipe style (docs/model.md §10.4)."""

from __future__ import annotations

import jax.numpy as jnp

from kernels import collectives, terms
from kernels import machine as mach
from kernels.machine import Link, Machine
from kernels.network import Net
from kernels.terms import Config, Cost


def pipeline(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Pipeline parallel, docs/model.md §10.4: p stages of a min-max contiguous partition, S micro-batches.

    .. math::
        T_{comp} = D\\,\\tfrac{p+S-1}{S}\\,t_{max} + I\\,u_{max},\\quad
        T_{p2p} = I\\cdot 2(p+S-2)\\max_{i<p}(\\alpha + \\tfrac{B}{S}\\delta y_{last(g_i)}\\beta),\\quad
        M = \\max_i 2\\delta(B\\textstyle\\sum_{g_i}(x+y) + \\sum_{g_i} w)

    (ParaDL's memory; the training memory of §6.2 keeps every micro-batch's
    saved activations and one micro-batch's workspace).

    B = b. The partition (per p) is precomputed in :func:`kernels.network.build_net`.
    The boundary link is intra when p <= gpus_per_node, else the first inter
    level. Needs p <= P (the layers G, a transformer's blocks) and S <= B.
    """
    p, s = cfg.p, cfg.S
    big_b = cfg.b
    its = terms.iterations(net.dataset_samples, big_b)
    table = net.pipeline
    row = jnp.clip(p, 1, table.flops_max.shape[-1] - 1).astype(jnp.int32)
    tmax = terms.sample_s(
        net, machine, table.flops_max[row], table.flops_kind_max[row], table.traffic_kind_max[row]
    )
    umax = terms.update_s(machine, table.w_max[row])
    comp = net.dataset_samples * (p + s - 1) / s * tmax + its * umax
    inter = mach.first_inter_link(machine)
    inside = p <= machine.gpus_per_node
    lk = Link(
        jnp.where(inside, machine.intra_alpha_s, inter.alpha_s),
        jnp.where(inside, 1.0 / machine.intra_bandwidth_Bps, inter.beta_s_per_byte),
    )
    hop = collectives.p2p_s(big_b / s * machine.bytes_per_element * table.y_boundary_max[row], *lk)
    p2p = jnp.where(p > 1, its * 2.0 * (p + s - 2) * hop, 0.0)
    delta = machine.bytes_per_element
    paradl = jnp.max(2.0 * delta * (big_b * table.mem_act[row] + table.mem_w[row]), axis=-1)
    weights = (2.0 + machine.optimizer_states) * table.keep_w[row]
    kept = jnp.max(delta * (big_b * table.keep_act[row] + weights), axis=-1)
    training = kept + delta * big_b / s * net.work_elems
    mem = terms.choose_memory(machine, paradl, training)
    zero = terms.zeros_like(comp)
    one = jnp.ones_like(p)
    return Cost(
        p=p,
        p1=one,
        p2=p,
        b=cfg.b,
        B=big_b,
        S=s,
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=zero,
        t_allgather_s=zero,
        t_halo_s=zero,
        t_p2p_s=p2p,
        mem_bytes=mem,
        limit=terms.limit_code(
            machine, mem, (p > net.n_stages) | (p < 1), (s > big_b) | (s < 1), terms.over_dataset(net, big_b)
        ),
    )
