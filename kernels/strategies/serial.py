"""Serial training on one GPU (docs/model.md §10.1)."""

from __future__ import annotations

import jax.numpy as jnp

from kernels import terms
from kernels.machine import Machine
from kernels.network import Net
from kernels.terms import Config, Cost


def serial(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Serial, docs/model.md §10.1: comp ``D sum(t) + I sum(u)``, comm 0, mem ``2 delta A(B) + 2W``.

    p is 1 whatever the configuration says; B = b.
    """
    one = jnp.ones_like(cfg.b)
    big_b = cfg.b
    its = terms.iterations(net.dataset_samples, big_b)
    comp = net.dataset_samples * terms.net_sample_s(net, machine) + its * terms.update_s(machine, net.w_elems)
    mem = terms.replica_memory(machine, net, big_b, net.w_elems)
    zero = terms.zeros_like(comp)
    return Cost(
        p=one,
        p1=one,
        p2=one,
        b=cfg.b,
        B=big_b,
        S=one,
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=zero,
        t_allgather_s=zero,
        t_halo_s=zero,
        t_p2p_s=zero,
        mem_bytes=mem,
        limit=terms.limit_code(machine, mem, False, big_b < 1, terms.over_dataset(net, big_b)),
    )
