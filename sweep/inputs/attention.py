r"""A transformer block's attention as layers (docs/inputs.md#transformer-models, docs/model.md
§16, §18): grouped-query attention, multi-head latent attention and sliding windows.

Grouped-query attention (``kv_rank = 0``): ``a`` query heads and ``g`` key/value heads of
dimension ``d``::

    qkv    linear     x [h, s]                    w [h, (a+2g)d, 1]       y [(a+2g)d, s]   column
    attn   attention  x [(a+2g)d, s]              w [0, a, 1(, 1, W)]     y [ad, s]        core
    proj   linear     x [ad, s]                   w [ad, h, 1]            y [h, s]         row

Multi-head latent attention (DeepSeek-V2 and V3, ``kv_rank = r_kv > 0``): the queries through
a rank ``r_q = q_rank`` bottleneck (none when 0), the keys and values through one of rank
``r_kv``; each of the ``a`` heads has ``n = qk_nope_dim`` query/key features without
positions and ``r = qk_rope_dim`` rotary ones (``d_qk = n + r``; the rotary key is one for all
heads, made by the down-projection) and ``v = v_dim`` value features::

    qkv_down  linear     x [h, s]      w [h, r_q + r_kv + r, 1]   y [r_q + r_kv + r, s]  replicated
    q_norm    <norm>     x [r_q, s]                                                      replicated
    q_up      linear     x [r_q, s]    w [r_q, a d_qk, 1]         y [a d_qk, s]          column
    kv_norm   <norm>     x [r_kv, s]                                                     replicated
    kv_up     linear     x [r_kv, s]   w [r_kv, a (n + v), 1]     y [a (n + v), s]       column
    attn      attention  x [a (2 d_qk + v), s]  w [0, a, 1, d_qk, W]  y [a v, s]         core
    proj      linear     x [a v, s]    w [a v, h, 1]              y [h, s]               row

As Megatron-Core's ``MLASelfAttention`` splits it over tp: the down-projections whole on every
rank (Transformer Engine's ``parallel_mode = "duplicated"``), one GEMM for both (its
``linear_qkv_down_proj``; they read the same normalised input, kept once), the up-projections
column-parallel (each rank its heads), the output projection row-parallel. Without a query
bottleneck (``q_rank = 0``) the queries are one column-parallel ``q`` linear ``h -> a d_qk``
and the keys and values' down-projection a replicated ``kv_down`` of its own (both keep the
block's normalised input: counted twice, ``s h`` elements per block over).

A sliding window (``window = W > 0``) bounds the keys each query attends to: the attention
layer's ``w[4] = W`` in the blocks ``window_pattern`` marks (cycled over the blocks, 1 windowed;
empty: every block), so its FLOPs and scores are ``s min(W, s)`` per head instead of ``s^2``.
"""

from __future__ import annotations

from typing import Protocol

from sweep.errors import InputError
from sweep.inputs.layers import Layer


class Block(Protocol):
    """The fields of :class:`sweep.inputs.blocks.Block` the attention reads (a protocol, so that
    this module, which blocks.py imports, imports nothing of it; read-only, as the frozen
    dataclass's)."""

    @property
    def layers(self) -> int: ...

    @property
    def hidden(self) -> int: ...

    @property
    def heads(self) -> int: ...

    @property
    def seq(self) -> int: ...

    @property
    def kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def norm(self) -> str: ...

    @property
    def q_rank(self) -> int: ...

    @property
    def kv_rank(self) -> int: ...

    @property
    def qk_nope_dim(self) -> int: ...

    @property
    def qk_rope_dim(self) -> int: ...

    @property
    def v_dim(self) -> int: ...

    @property
    def window(self) -> int: ...

    @property
    def window_pattern(self) -> tuple[int, ...]: ...

    @property
    def g(self) -> int: ...

    @property
    def d(self) -> int: ...


#: The attention fields of a :class:`~sweep.inputs.blocks.Block` whose 0 means "none" (and
#: their key in a model file's ``[transformer]`` table).
ZERO_OK = ("q_rank", "kv_rank", "qk_nope_dim", "qk_rope_dim", "v_dim", "window")


def latent(spec: Block) -> bool:
    """Whether ``spec``'s attention is multi-head latent attention (``kv_rank > 0``)."""
    return spec.kv_rank > 0


def d_qk(spec: Block) -> int:
    """A query/key head's width: ``qk_nope_dim + qk_rope_dim`` with latent attention, else ``d``."""
    return spec.qk_nope_dim + spec.qk_rope_dim if latent(spec) else spec.d


def d_v(spec: Block) -> int:
    """A value head's width: ``v_dim`` with latent attention, else ``d``."""
    return spec.v_dim if latent(spec) else spec.d


def windowed(spec: Block, i: int) -> bool:
    """Whether block ``i`` attends through the sliding window (``window_pattern`` cycled)."""
    pattern = spec.window_pattern
    return spec.window > 0 and (not pattern or pattern[i % len(pattern)] == 1)


def keys(spec: Block, i: int) -> int:
    """The keys each query of block ``i`` attends to: ``min(W, s)`` through a window, else ``s``."""
    return min(spec.window, spec.seq) if windowed(spec, i) else spec.seq


def attention_check(spec: Block, name: str) -> None:
    """An :class:`InputError` naming the first attention field out of range."""
    for key in ZERO_OK:
        if getattr(spec, key) < 0:
            raise InputError(f"model '{name}': {key} must be >= 0", param=key)
    if latent(spec):
        for key in ("qk_nope_dim", "v_dim"):
            if getattr(spec, key) < 1:
                raise InputError(
                    f"model '{name}': multi-head latent attention (kv_rank > 0) needs {key} >= 1",
                    param=key,
                )
        if spec.kv_heads not in (0, spec.heads) or spec.head_dim:
            key = "head_dim" if spec.head_dim else "kv_heads"
            raise InputError(
                f"model '{name}': multi-head latent attention states qk_nope_dim, qk_rope_dim "
                f"and v_dim, not {key}",
                param=key,
            )
    else:
        for key in ("q_rank", "qk_nope_dim", "qk_rope_dim", "v_dim"):
            if getattr(spec, key):
                raise InputError(
                    f"model '{name}': {key} is multi-head latent attention's: state kv_rank > 0",
                    param="kv_rank",
                )
    if any(v not in (0, 1) for v in spec.window_pattern):
        raise InputError(
            f"model '{name}': window_pattern holds 1 (windowed) or 0 (full)", param="window_pattern"
        )
    if spec.window_pattern and not spec.window:
        raise InputError(f"model '{name}': window_pattern needs a window > 0", param="window")


def attention_layers(spec: Block, i: int) -> list[Layer]:
    """Block ``i``'s attention from its normalised input to the output projection (module
    docstring), each layer with its tensor-parallel role."""
    h, s, a = spec.hidden, spec.seq, spec.heads
    out = a * d_v(spec)
    window = spec.window if windowed(spec, i) else 1
    if not latent(spec):
        qkv = (a + 2 * spec.g) * spec.d
        w = (0, a, 1) if window == 1 else (0, a, 1, 1, window)
        return [
            Layer(f"qkv_{i}", "linear", (h, s), (h, qkv, 1), (qkv, s), role="column"),
            Layer(f"attn_{i}", "attention", (qkv, s), w, (out, s), role="core"),
            Layer(f"proj_{i}", "linear", (out, s), (out, h, 1), (h, s), role="row"),
        ]
    q, kv, rope, qk = spec.q_rank, spec.kv_rank, spec.qk_rope_dim, a * d_qk(spec)
    up = a * (spec.qk_nope_dim + spec.v_dim)
    if q:
        down = q + kv + rope
        query = [
            Layer(f"qkv_down_{i}", "linear", (h, s), (h, down, 1), (down, s), role="replicated"),
            _norm(spec, f"q_norm_{i}", q),
            Layer(f"q_up_{i}", "linear", (q, s), (q, qk, 1), (qk, s), role="column"),
        ]
    else:
        query = [
            Layer(f"q_{i}", "linear", (h, s), (h, qk, 1), (qk, s), role="column"),
            Layer(f"kv_down_{i}", "linear", (h, s), (h, kv + rope, 1), (kv + rope, s), role="replicated"),
        ]
    core = 2 * qk + a * spec.v_dim
    return [
        *query,
        _norm(spec, f"kv_norm_{i}", kv),
        Layer(f"kv_up_{i}", "linear", (kv, s), (kv, up, 1), (up, s), role="column"),
        Layer(f"attn_{i}", "attention", (core, s), (0, a, 1, d_qk(spec), window), (out, s), role="core"),
        Layer(f"proj_{i}", "linear", (out, s), (out, h, 1), (h, s), role="row"),
    ]


def _norm(spec: Block, name: str, width: int) -> Layer:
    scale = 2 if spec.norm == "layernorm" else 1
    return Layer(name, spec.norm, (width, spec.seq), (scale, width, 1), (width, spec.seq), role="replicated")


def attention_linear(spec: Block) -> int:
    """The attention's linear weights per block (biases not counted): ``h (a + 2g) d + a d h``;
    with latent attention ``h (r_q + r_kv + r) + r_q a d_qk + r_kv a (n + v) + a v h`` (without a
    query bottleneck ``h a d_qk + h (r_kv + r) + r_kv a (n + v) + a v h``)."""
    h, a = spec.hidden, spec.heads
    if not latent(spec):
        return h * (a + 2 * spec.g) * spec.d + a * spec.d * h
    kv, rope, qk = spec.kv_rank, spec.qk_rope_dim, a * d_qk(spec)
    query = h * spec.q_rank + spec.q_rank * qk if spec.q_rank else h * qk
    return query + h * (kv + rope) + kv * a * (spec.qk_nope_dim + spec.v_dim) + a * spec.v_dim * h


def attention_params(spec: Block) -> int:
    """The attention's weights per block (:func:`attention_linear` and, with latent attention,
    the query and key/value norms: ``r_q + r_kv``, twice for a layernorm); the block's own norm
    is not here."""
    scale = 2 if spec.norm == "layernorm" else 1
    return attention_linear(spec) + (scale * (spec.q_rank + spec.kv_rank) if latent(spec) else 0)


def attention_flops(spec: Block) -> int:
    """The attention's training FLOPs per token over all blocks as Megatron-LM's
    ``num_floating_point_operations`` counts them, on the real widths: ``6`` per weight of
    :func:`attention_linear` (forward and backward) and ``6 a (d_qk + d_v) k`` for the core,
    ``k`` the keys per query (``s``, or a window's ``min(W, s)``; full, not causal: Megatron-LM's
    ``s^2``). ``12 L h^2 (1 + g/a + s/h)(a d / h)`` for grouped-query attention without a window.
    Megatron-LM counts its latent attention's norms too (``6 (r_q + r_kv)``), not here."""
    core = 6 * spec.heads * (d_qk(spec) + d_v(spec))
    return spec.layers * 6 * attention_linear(spec) + sum(core * keys(spec, i) for i in range(spec.layers))


def attention_note(spec: Block) -> str:
    """The attention as the notes say it."""
    if latent(spec):
        q = f"query rank {spec.q_rank}, " if spec.q_rank else ""
        text = (
            f"{spec.heads} heads of multi-head latent attention ({q}key/value rank {spec.kv_rank}, "
            f"query/key {spec.qk_nope_dim} + {spec.qk_rope_dim} rotary, value {spec.v_dim})"
        )
    else:
        g = f", {spec.g} key/value heads" if spec.g != spec.heads else ""
        text = f"{spec.heads} heads{g} of {spec.d}"
    if spec.window:
        which = "" if not spec.window_pattern else f" (pattern {list(spec.window_pattern)})"
        text += f", {spec.window}-token sliding window{which}"
    return text
