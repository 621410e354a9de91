"""The machine as a pytree of scalars and topology lookups (docs/model.md §8).

A :class:`Machine` holds SI-unit scalars (``gpu_flops``, ``inter_bandwidth_Bps``
...) and the inter-node levels as short arrays. Every field may be a traced
array, so a sweep can vmap over any machine parameter.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from kernels import collectives
from kernels._types import Array
from kernels.names import PARAMS
from kernels.network import KINDS

#: Each optional parameter's default, from its record (:mod:`kernels.params`).
_DEFAULT: dict[str, float] = {n: p.default for n, p in PARAMS.items() if p.default is not None}


class Machine(NamedTuple):
    """Machine parameters, SI units (docs/model.md §8; each one's record: :data:`kernels.names.PARAMS`).
    Levels are arrays of length L; the fields with a default are those a machine file may omit."""

    gpu_flops: Array
    efficiency: Array
    gpu_mem_bytes: Array
    gpu_mem_bw_Bps: Array
    gpus_per_node: Array
    nics_per_node: Array
    bytes_per_element: Array
    wu_passes: Array
    intra_alpha_s: Array
    intra_bandwidth_Bps: Array
    allreduce_algo: Array
    memory_model: Array  # a code of kernels.names.MEMORY_MODELS (docs/model.md §6)
    optimizer_states: Array  # optimizer state per weight, in weights (docs/model.md §6.2)
    mem_passes: Array  # passes over each layer's |x|+|y| in one training step; 0: no roofline (§3)
    kind_efficiency: Array  # [KINDS] fraction of gpu_flops*efficiency each layer kind reaches (§3)
    inter_span_nodes: Array  # [L]; the last level's span is unbounded (inf)
    inter_alpha_s: Array  # [L]
    inter_bandwidth_Bps: Array  # [L]
    #: seconds each operation a layer launches costs beyond its FLOPs (docs/model.md §16); 0 but in
    #: data+tensor+pipeline's profiles, and only that strategy reads it
    op_latency_s: Array = _DEFAULT["op_latency_s"]
    #: factor on the activation traffic of data+tensor+pipeline's memory-bound kernels (docs/model.md
    #: §16): 1 as counted, 0 (the default) none
    eltwise_traffic: Array = _DEFAULT["eltwise_traffic"]
    #: streaming multiprocessors a GEMM's tiles are spread over (docs/model.md §16); 0 (the default):
    #: every GEMM at gpu_flops*efficiency, no tile or wave quantization, no memory bound
    gpu_sms: Array = _DEFAULT["gpu_sms"]
    #: output tile of a GEMM's thread block, rows and columns (docs/model.md §16)
    gemm_tile_m: Array = _DEFAULT["gemm_tile_m"]
    gemm_tile_n: Array = _DEFAULT["gemm_tile_n"]
    #: 1: pipeline sends as Megatron's scatter/gather, 1/tp of the boundary per tensor-parallel rank
    #: and an all-gather inside the tp group; 0: the whole boundary from each rank (docs/model.md §16)
    scatter_gather: Array = _DEFAULT["scatter_gather"]
    #: a code of kernels.names.ATTENTIONS: 0 standard, 1 a fused (flash) attention (docs/model.md §16)
    attention: Array = _DEFAULT["attention"]
    #: dense FP8 peak FLOP/s, 0 for a GPU without one (docs/model.md §16)
    gpu_flops_fp8: Array = _DEFAULT["gpu_flops_fp8"]
    #: 1: the data-parallel gradient all-reduce overlapped with the backward pass (docs/model.md §16)
    overlap_grad_reduce: Array = _DEFAULT["overlap_grad_reduce"]
    #: dense MXFP8 and NVFP4 peak FLOP/s, 0 for a GPU without them (docs/model.md §16)
    gpu_flops_mxfp8: Array = _DEFAULT["gpu_flops_mxfp8"]
    #: fraction of the low-precision peak the linear layers' GEMMs reach; 0: efficiency_linear (§16)
    efficiency_linear_lowp: Array = _DEFAULT["efficiency_linear_lowp"]
    gpu_flops_fp4: Array = _DEFAULT["gpu_flops_fp4"]
    #: board power of one GPU (W; 0: not stated), the facility's PUE and the price of a GPU-hour
    #: (USD; 0: not stated): energy_kwh and cost_usd (docs/model.md §12)
    gpu_power_w: Array = _DEFAULT["gpu_power_w"]
    pue: Array = _DEFAULT["pue"]
    usd_per_gpu_hour: Array = _DEFAULT["usd_per_gpu_hour"]
    #: a mixture of experts' busiest expert's tokens over the mean (docs/model.md §17): 1 balanced
    moe_imbalance: Array = _DEFAULT["moe_imbalance"]
    #: memory per GPU beside states and activations (B): library workspaces (docs/model.md §20)
    mem_workspace_bytes: Array = _DEFAULT["mem_workspace_bytes"]
    #: a code of kernels.names.SELECTIVE_POLICIES: what selective recomputation runs again, 0 the
    #: attention core (Megatron-LM), 1 torchtitan's per-operation policy (docs/model.md §21)
    selective_recompute: Array = _DEFAULT["selective_recompute"]


#: The scalar parameters that set a machine's per-level inter-node arrays.
INTER_PARAMS = ("inter_alpha_s", "inter_bandwidth_Bps")
#: The scalar parameters that set one entry each of ``kind_efficiency``: ``efficiency_<kind>``.
KIND_EFFICIENCY_PARAMS: tuple[str, ...] = tuple(f"efficiency_{kind}" for kind in KINDS)


def kind_entry(name: str, value, vector):
    """``kind_efficiency`` with the entry of ``efficiency_<kind>`` set to ``value`` (docs/model.md §3).

    Plain array arithmetic, so numpy arrays (a profile) and traced arrays (a
    swept or fitted value) follow the same rule, and the result is
    differentiable in ``value``.
    """
    onehot = (np.arange(len(KINDS)) == KINDS.index(name.removeprefix("efficiency_"))).astype(np.float64)
    return vector * (1.0 - onehot) + value * onehot


def inter_levels(name: str, value, levels):
    """The per-level array of ``name`` after a scalar override (docs/model.md §8).

    ``inter_bandwidth_Bps`` sets every level; ``inter_alpha_s`` sets the first
    level and deeper levels keep their extra latency over it. Plain array
    arithmetic, so numpy arrays (a profile written back to a file) and traced
    arrays (a swept axis) follow the same rule.
    """
    if name == "inter_bandwidth_Bps":
        return levels * 0 + value
    return value + (levels - levels[..., :1])


def with_params(machine: Machine, **values) -> Machine:
    """Override scalar parameters, traceably (docs/model.md §8); the inter-level ones set
    the levels as :func:`inter_levels` says, ``efficiency_<kind>`` one entry of
    ``kind_efficiency`` (:func:`kind_entry`)."""
    out = machine._asdict()
    for name, value in values.items():
        if name in INTER_PARAMS:
            out[name] = inter_levels(name, value, out[name])
        elif name in KIND_EFFICIENCY_PARAMS:
            out["kind_efficiency"] = kind_entry(name, value, out["kind_efficiency"])
        elif name in out:
            out[name] = jnp.asarray(value)
        else:
            raise KeyError(name)
    return Machine(**out)


def param_value(machine: Machine, name: str):
    """The value of scalar parameter ``name`` in ``machine``, as :func:`with_params` sets it:
    the first level's latency for ``inter_alpha_s``, the levels' bandwidths for
    ``inter_bandwidth_Bps``, one entry of ``kind_efficiency`` for ``efficiency_<kind>``."""
    if name == "inter_alpha_s":
        return machine.inter_alpha_s[..., 0]
    if name in KIND_EFFICIENCY_PARAMS:
        return machine.kind_efficiency[..., KINDS.index(name.removeprefix("efficiency_"))]
    return getattr(machine, name)


class Link(NamedTuple):
    """Latency and inverse bandwidth seen by a collective."""

    alpha_s: Array
    beta_s_per_byte: Array


def nodes_spanned(machine: Machine, n):
    """Nodes covered by ``n`` contiguous GPUs: ``ceil(n / gpus_per_node)``."""
    return jnp.ceil(n / machine.gpus_per_node)


def inter_level(machine: Machine, nodes):
    """Index of the first inter level whose ``span_nodes`` >= ``nodes`` (docs/model.md §8)."""
    too_small = (machine.inter_span_nodes < nodes).astype(jnp.int32)
    return jnp.minimum(jnp.sum(too_small), machine.inter_span_nodes.shape[-1] - 1)


def first_inter_link(machine: Machine, bandwidth_share=1.0) -> Link:
    """The first inter level's link, bandwidth divided by ``bandwidth_share``."""
    return Link(machine.inter_alpha_s[0], bandwidth_share / machine.inter_bandwidth_Bps[0])


def link(machine: Machine, n, bandwidth_share=1.0) -> Link:
    """Link of a contiguous group of ``n`` GPUs: intra inside one node, else its level.

    ``bandwidth_share`` divides the inter-node bandwidth (NIC sharing, docs/model.md §8);
    it does not touch the intra link.
    """
    level = inter_level(machine, nodes_spanned(machine, n))
    inside = n <= machine.gpus_per_node
    alpha = jnp.where(inside, machine.intra_alpha_s, machine.inter_alpha_s[level])
    beta = jnp.where(
        inside,
        1.0 / machine.intra_bandwidth_Bps,
        bandwidth_share / machine.inter_bandwidth_Bps[level],
    )
    return Link(alpha, beta)


def nic_share(machine: Machine, talkers_per_node):
    """Bandwidth divisor when ``k`` GPUs of a node talk off-node at once: ``max(1, k/nics)``."""
    return jnp.maximum(1.0, talkers_per_node / machine.nics_per_node)


def gradient_allreduce_s(machine: Machine, p, msg_bytes, lk: Link):
    """Gradient allreduce over ``p`` GPUs with the machine's algorithm (docs/model.md §7).

    Ring (default, the paper's), tree, auto (cheaper of ring and tree) use the
    group's link ``lk``; hierarchical reduces inside nodes on the intra link
    and across nodes on ``lk``.
    """
    flat = collectives.allreduce_s(machine.allreduce_algo, p, msg_bytes, *lk)
    hier = collectives.hierarchical_allreduce_s(
        p,
        machine.gpus_per_node,
        msg_bytes,
        machine.intra_alpha_s,
        1.0 / machine.intra_bandwidth_Bps,
        *lk,
    )
    return jnp.where(machine.allreduce_algo == collectives.HIERARCHICAL, hier, flat)
