r"""Mixtures of experts in a :class:`~sweep.inputs.blocks.Block` (docs/inputs.md#transformer-models,
docs/model.md §17).

A block with ``experts = E > 0`` (from block ``dense_layers`` on; the blocks before keep a dense
FFN of width ``ffn``) replaces its FFN by ``E`` routed experts of width ``f_e = expert_ffn`` of
which each token uses ``k = top_k``, beside ``shared_experts`` always-used experts of width
``f_s = shared_ffn`` (one dense FFN ``n_s f_s`` wide, as Megatron-Core's shared expert)::

    [sh_up     linear   x [h, s]       w [h, n_s f_s (x2), 1]   column
     sh_<act>                                                  split
     sh_down   linear   x [n_s f_s, s] w [n_s f_s, h, 1]        row]
    router     router   x [h, s]       w [h, E, 1]          y [E, s]           replicated
    exp_up     experts  x [h, k s]     w [h, f_e (x2), E]   y [f_e (x2), k s]  expert
    exp_<act>  <act>    x [2 f_e, k s]                      y [f_e, k s]       expert
    exp_down   experts  x [f_e, k s]   w [f_e, h, E]        y [h, k s]         expert

The expert layers work on the ``k s`` dispatched copies of the ``s`` tokens (an all-to-all
before ``exp_up`` and after ``exp_down``, docs/model.md §17); the ``(x2)`` is SwiGLU's gate and
up, one GEMM as in the dense FFN.
"""

from __future__ import annotations

from typing import Any

from sweep.errors import InputError
from sweep.inputs.layers import Layer

#: A :class:`sweep.inputs.blocks.Block` (that module imports this one, so not by name).
Block = Any

#: Weight matrices of an FFN per kind: GeLU's up and down, SwiGLU's gate, up and down.
MATRICES = {"gelu": 2, "swiglu": 3}


def expert_ffn(spec: Block) -> int:
    """A routed expert's FFN width (``expert_ffn``, 0: ``ffn``)."""
    return spec.expert_ffn or spec.ffn


def shared_ffn(spec: Block) -> int:
    """The shared experts' FFN width together: ``shared_experts`` of ``shared_ffn`` (0: a routed
    expert's width) each."""
    return spec.shared_experts * (spec.shared_ffn or expert_ffn(spec))


def moe_width(spec: Block) -> int:
    """The FFN width one token goes through in an MoE block: ``k f_e + n_s f_s`` (the router
    not counted, as Megatron-LM's FLOPs count leaves it out)."""
    return spec.top_k * expert_ffn(spec) + shared_ffn(spec)


def moe_params(spec: Block) -> tuple[int, int]:
    """An MoE block's FFN weights (biases not counted) and those each token uses: the router's
    ``h E``, the routed experts' ``E m h f_e`` (``k m h f_e`` used) and the shared ones'
    ``m h n_s f_s``, m the matrices of the FFN kind."""
    h, m = spec.hidden, MATRICES[spec.ffn_kind]
    router, shared, one = h * spec.experts, m * h * shared_ffn(spec), m * h * expert_ffn(spec)
    return router + spec.experts * one + shared, router + spec.top_k * one + shared


def moe_check(spec: Block, name: str) -> None:
    """An :class:`InputError` naming the first MoE field out of range."""
    for key in ("experts", "expert_ffn", "shared_experts", "shared_ffn", "dense_layers"):
        if getattr(spec, key) < 0:
            raise InputError(f"model '{name}': {key} must be >= 0", param=key)
    if spec.experts and not 1 <= spec.top_k <= spec.experts:
        raise InputError(
            f"model '{name}': top_k {spec.top_k} must be between 1 and the {spec.experts} experts",
            param="top_k",
        )
    if spec.experts and spec.dense_layers >= spec.layers:
        raise InputError(
            f"model '{name}': dense_layers {spec.dense_layers} leaves none of the {spec.layers} blocks "
            "a mixture of experts",
            param="dense_layers",
        )


def dense_ffn(spec: Block, i: int, f: int, prefix: str = "") -> list[Layer]:
    """A dense FFN of width ``f``: the up projection column-parallel (``2f`` wide for SwiGLU's
    gate and up), the activation split, the down projection row-parallel."""
    h, s = spec.hidden, spec.seq
    up = 2 * f if spec.ffn_kind == "swiglu" else f
    return [
        Layer(f"{prefix}up_{i}", "linear", (h, s), (h, up, 1), (up, s), role="column"),
        Layer(f"{prefix}{spec.ffn_kind}_{i}", spec.ffn_kind, (up, s), (up, f, 0), (f, s), role="split"),
        Layer(f"{prefix}down_{i}", "linear", (f, s), (f, h, 1), (h, s), role="row"),
    ]


def moe_ffn(spec: Block, i: int) -> list[Layer]:
    """Block ``i``'s mixture of experts (module docstring): the shared experts, the router and
    the routed experts' grouped GEMMs on the ``k s`` dispatched tokens."""
    h, s, e, f = spec.hidden, spec.seq, spec.experts, expert_ffn(spec)
    ks = spec.top_k * s
    up = 2 * f if spec.ffn_kind == "swiglu" else f
    shared = dense_ffn(spec, i, shared_ffn(spec), "sh_") if spec.shared_experts else []
    return [
        *shared,
        Layer(f"router_{i}", "router", (h, s), (h, e, 1), (e, s), role="replicated"),
        Layer(f"exp_up_{i}", "experts", (h, ks), (h, up, e), (up, ks), role="expert"),
        Layer(f"exp_{spec.ffn_kind}_{i}", spec.ffn_kind, (up, ks), (up, f, 0), (f, ks), role="expert"),
        Layer(f"exp_down_{i}", "experts", (f, ks), (f, h, e), (h, ks), role="expert"),
    ]
