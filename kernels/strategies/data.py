"""Data parallelism (docs/model.md §10.2)."""

from __future__ import annotations

import jax.numpy as jnp

from kernels import machine as mach
from kernels import terms
from kernels.machine import Machine
from kernels.network import Net
from kernels.terms import Config, Cost


def data(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Data parallel, docs/model.md §10.2.

    .. math::
        B = b p,\\quad
        T_{comp} = \\tfrac{D}{p}\\textstyle\\sum t + I \\sum u,\\quad
        T_{comm} = I\\, T_{ar}(p, W),\\quad
        M = 2\\delta A(b) + 2W

    with the allreduce on the link of all p GPUs. Needs p <= B.
    """
    p = cfg.p
    big_b = cfg.b * p
    its = terms.iterations(net.dataset_samples, big_b)
    comp = net.dataset_samples / p * terms.net_sample_s(net, machine) + its * terms.update_s(
        machine, net.w_elems
    )
    weight_bytes = machine.bytes_per_element * net.w_elems
    allreduce = its * mach.gradient_allreduce_s(machine, p, weight_bytes, mach.link(machine, p))
    mem = terms.replica_memory(machine, net, cfg.b, net.w_elems)
    zero = terms.zeros_like(comp)
    return Cost(
        p=p,
        p1=p,
        p2=jnp.ones_like(p),
        b=cfg.b,
        B=big_b,
        S=jnp.ones_like(p),
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=allreduce,
        t_allgather_s=zero,
        t_halo_s=zero,
        t_p2p_s=zero,
        mem_bytes=mem,
        limit=terms.limit_code(machine, mem, p < 1, big_b < p, terms.over_dataset(net, big_b)),
    )
