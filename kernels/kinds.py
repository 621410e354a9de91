"""The layer kinds, one record each (docs/model.md §1, §3, §6.2, §12, §16).

A :class:`Kind` says everything the kernels do differently for a layer of that kind: its
forward FLOPs, what it keeps for the backward pass, whether it works in place, its
tensor-parallel role in Megatron's block, whether its time is memory-bound, whether the
model-FLOPs utilisation counts it, the operations the host launches for it per micro-batch,
and which input, weight and output shapes it may have. :data:`TABLE` lists them in code
order (``LayerArrays.kind`` indexes it; :data:`kernels.names.KINDS` is its names): a new kind
is one record, appended.

Shapes: ``x = [C, X...]``, ``w = [C, F, K...]`` (all zero: no weights), ``y = [F, Y...]``;
the FLOPs rules take the rows of the layers of one kind, padded to three spatial extents.
Numpy only, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

#: Tensor-parallel roles (docs/model.md §16), ``role`` codes index this tuple: replicated (every
#: rank holds all of it), column-parallel linear (output features split), row-parallel linear
#: (input features split, output allreduced forward), attention core (heads split), vocabulary-
#: parallel embedding (table split, output allreduced forward), split element-wise (works on the
#: split activations between a column- and a row-parallel linear: a GeLU, a SwiGLU product), and
#: an expert layer of a mixture of experts (docs/model.md §17: its work and activations split over
#: tp, each rank routing its own tokens; its weights split over the expert-parallel group instead).
ROLES: tuple[str, ...] = ("replicated", "column", "row", "core", "vocab", "split", "expert")
REPLICATED, COLUMN, ROW, CORE, VOCAB, SPLIT, EXPERT = range(len(ROLES))

Dims = Sequence[int]


def _any(x: Dims, w: Dims, y: Dims) -> str | None:
    return None


class Kind(NamedTuple):
    """One layer kind's rules (module docstring); a record states only what differs from the
    defaults (a replicated, memory-bound layer that keeps its input)."""

    name: str
    #: forward FLOPs per sample of the rows ``x [n, 4]``, ``w [n, 5]``, ``y [n, 4]`` (§3)
    flops: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    #: what it keeps for its backward pass (§6.2): its input "x", its output "y", or nothing ""
    saves: str = "x"
    #: works in place: no activations of its own (§6)
    in_place: bool = False
    #: its tensor-parallel role in Megatron's block (:data:`ROLES`, §16); a "column" linear
    #: reading split activations is "row", a "split" kind reading whole ones "replicated"
    role: str = "replicated"
    #: its time is memory-bound: it reads and writes its x + y (and attention its scores) at
    #: the memory bandwidth; the others (GEMMs) are timed by their FLOPs (§16)
    memory_bound: bool = True
    #: the model-FLOPs utilisation counts its FLOPs (a matrix multiply, §12)
    model_flops: bool = False
    #: operations the host launches per micro-batch, forward and backward (§16)
    ops: tuple[int, int] = (1, 1)
    #: the shape rule: the rule its (unpadded) x, w, y break, or None (docs/inputs.md#model-files)
    check: Callable[[Dims, Dims, Dims], str | None] = _any
    #: filter and channel parallelism split it by default (§9)
    filter_channel: bool = False
    #: a GEMM timed by its shape when the machine gives ``gpu_sms`` (§16)
    by_shape: bool = False
    #: runs at the FP8 peak with ``precision = fp8`` (Transformer Engine's linear layers, §16)
    fp8: bool = False
    #: inside a transformer block, the 16-bit elements per sample it keeps for its backward
    #: pass as Korthikanti et al. 2022 count them (§16; none for a kind their count omits), and
    #: the attention scores' part, which selective recomputation and a fused attention drop
    block_kept: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    block_scores: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    #: a transformer block's normalisation (layernorm, RMSNorm): where a pre-norm block begins,
    #: the block input full recomputation keeps (§16)
    norm: bool = False

    @property
    def roles(self) -> tuple[str, ...]:
        """The tensor-parallel roles a layer of this kind may state (docs/model.md §16)."""
        return _roles(self.role)


def _kprod(w: np.ndarray) -> np.ndarray:
    return np.prod(w[:, 2:], axis=1)


def _yprod(y: np.ndarray) -> np.ndarray:
    return np.prod(y[:, 1:], axis=1)


def _x(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.prod(x, axis=1)


def _same(x: Dims, w: Dims, y: Dims) -> str | None:
    return (
        None
        if tuple(x) == tuple(y)
        else f"needs y = x (an element-wise layer), got x {_dims(x)}, y {_dims(y)}"
    )


def _dims(d: Dims) -> str:
    return "[" + ", ".join(map(str, d)) + "]"


def _linear(x: Dims, w: Dims, y: Dims) -> str | None:
    if tuple(x[1:]) != tuple(y[1:]):
        return "needs y[1:] = x[1:] (the same positions)"
    if any(w) and (w[0] != x[0] or w[1] != y[0] or any(k != 1 for k in w[2:])):
        return f"needs w = [{x[0]}, {y[0]}, 1...] (x[0], y[0]) or all zeros (tied)"
    return None


def _attention(x: Dims, w: Dims, y: Dims) -> str | None:
    three = f"needs x = [3h, s...] for y = [h, s...] (queries, keys, values), x[0] = {3 * y[0]}"
    if tuple(x[1:]) != tuple(y[1:]):
        return three
    if not 3 <= len(w) <= 5 or w[0] != 0 or w[1] < 1 or y[0] % w[1] or any(k < 1 for k in w[3:]):
        return (
            f"needs w = [0, heads, 1...] or [0, heads, 1, d_qk, window] (each >= 1) with heads "
            f"dividing y[0] = {y[0]}"
        )
    if len(w) == 5 and w[2] != 1:
        return "needs w[2] = 1 (w = [0, heads, 1, d_qk, window])"
    qk = w[3] if len(w) > 3 else 1
    if kv_heads(x[0], w[1], y[0], qk) is None:
        return (
            f"{three}, or [a d_qk + g (d_qk + d_v), s...] for g key/value heads dividing the "
            f"a = {w[1]} heads (d_v = y[0] / a; d_qk = w[3], else d_v)"
        )
    return None


def kv_heads(width: float, heads: float, out: float, qk: float = 1) -> int | None:
    """The key/value heads g of an attention layer whose input is ``width`` features (queries,
    keys, values: ``a d_qk + g (d_qk + d_v)``) for ``out = a d_v`` output features of
    ``heads = a`` heads, with query/key heads ``qk = d_qk`` wide (1, the default: ``d_v``); None
    unless g is a whole number >= 1 dividing a (grouped-query attention; g = a multi-head)."""
    a, out, width = int(heads), int(out), int(width)
    if a < 1 or out < a or out % a:
        return None
    dv = out // a
    dqk = int(qk) if qk > 1 else dv
    rest = width - a * dqk
    if rest <= 0 or rest % (dqk + dv):
        return None
    g = rest // (dqk + dv)
    return g if a % g == 0 else None


def attention_widths(w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of attention layers ``w [n, 5]``, ``y [n, 4]``: the query/key width of all heads
    ``a d_qk`` (``y[0] = a d_v`` unless ``w[3] > 1``), the positions ``s = prod(Y)`` and the keys
    each query attends to, ``min(W, s)`` for a sliding window ``W = w[4] > 1``, else ``s``."""
    s = _yprod(y)
    if w.shape[1] < 5:  # w [0, a, 1]: the defaults
        return y[:, 0], s, s
    qk = np.where(w[:, 3] > 1, w[:, 1] * w[:, 3], y[:, 0])
    keys = np.where(w[:, 4] > 1, np.minimum(w[:, 4], s), s)
    return qk, s, keys


def _attention_flops(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``2 s k a d_qk`` for QK^T and ``2 s k a d_v`` for the weighted sum, ``k`` the keys per
    query (:func:`attention_widths`): ``4 a d s^2`` when d_qk = d_v and no window."""
    qk, s, keys = attention_widths(w, y)
    return 2.0 * (qk + y[:, 0]) * (s * keys)


def _attention_scores(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Korthikanti's ``5 a s^2 / 2`` with ``s k`` scores per head, ``k`` the keys per query."""
    _, s, keys = attention_widths(w, y)
    return 5.0 * w[:, 1] * s * keys / 2.0


def _experts(x: Dims, w: Dims, y: Dims) -> str | None:
    if tuple(x[1:]) != tuple(y[1:]):
        return "needs y[1:] = x[1:] (the same dispatched tokens)"
    if len(w) < 3 or w[0] != x[0] or w[1] != y[0] or w[2] < 1 or any(k != 1 for k in w[3:]):
        return f"needs w = [{x[0]}, {y[0]}, experts] (x[0], y[0], the experts)"
    return None


def _embedding(x: Dims, w: Dims, y: Dims) -> str | None:
    if x[0] != 1 or tuple(x[1:]) != tuple(y[1:]):
        return "needs x = [1, s...] (token ids) and y = [h, s...] at the same positions"
    if w[1] != y[0]:
        return f"needs w = [rows, {y[0]}, 1...] (y[0] features per row)"
    return None


def _gated(x: Dims, w: Dims, y: Dims) -> str | None:
    if x[0] != 2 * y[0] or tuple(x[1:]) != tuple(y[1:]):
        return f"needs x = [2f, s...] (gate and up) for y = [f, s...], x[0] = {2 * y[0]}"
    return None


#: The layer kinds in code order (:data:`kernels.names.KINDS`); new kinds go at the end.
TABLE: tuple[Kind, ...] = (
    # conv 2 C F prod(K) prod(Y)
    Kind("conv", lambda x, w, y: 2.0 * w[:, 0] * w[:, 1] * _kprod(w) * _yprod(y),
         memory_bound=False, model_flops=True, filter_channel=True),
    # fc 2 C F prod(K)
    Kind("fc", lambda x, w, y: 2.0 * w[:, 0] * w[:, 1] * _kprod(w),
         memory_bound=False, model_flops=True, filter_channel=True),
    # pooling C prod(K) prod(Y), C = x[0]; max pooling keeps its argmax (its output's shape)
    Kind("pool_max", lambda x, w, y: x[:, 0] * _kprod(w) * _yprod(y), saves="y"),
    Kind("pool_avg", lambda x, w, y: x[:, 0] * _kprod(w) * _yprod(y), saves=""),
    # element-wise |y|; relu keeps its mask (its output's shape)
    Kind("relu", lambda x, w, y: np.prod(y, axis=1), saves="y", in_place=True, role="split", check=_same),
    # batch norm 4|x|
    Kind("bnorm", lambda x, w, y: 4.0 * np.prod(x, axis=1), in_place=True, check=_same),
    # a residual add: the fused bias-dropout-add, its gradient and the bias' gradient backward
    Kind("add", lambda x, w, y: np.prod(y, axis=1), saves="", ops=(1, 2), check=_same,
         block_kept=lambda x, w, y: np.prod(y, axis=1) / 2.0),  # its dropout's 1-byte mask
    Kind("dropout", lambda x, w, y: np.prod(y, axis=1), saves="y", role="split", check=_same),
    # transformer kinds (docs/model.md §16), appended so the CNN kinds keep their codes
    # linear 2 C F prod(Y), C = x[0], F = y[0] (from the activations: a tied layer counts too);
    # one GEMM forward, the data- and weight-gradient GEMMs backward
    Kind("linear", lambda x, w, y: 2.0 * x[:, 0] * y[:, 0] * _yprod(y), role="column",
         memory_bound=False, model_flops=True, ops=(1, 2), check=_linear, by_shape=True, fp8=True,
         block_kept=_x),
    # attention (docs/model.md §16, §18): w = [0, a, 1, d_qk, W] (1: the default), a heads,
    # query/key heads d_qk wide (1: d_v = y[0] / a; multi-head latent attention's no-position
    # plus rotary widths), a sliding window of W keys per query (1: none, every one of the s
    # positions); y = [a d_v, s]. FLOPs 2 s k (a d_qk + a d_v), k = min(W, s) keys per query:
    # QK^T, softmax, dropout, the weighted sum, permute (4 a d s^2 for d_qk = d_v, no window);
    # kept: Q, K and V (its input, a d_qk + g (d_qk + d_v) wide with g key/value heads), and
    # 5 a s k / 2 for the a heads' s x k scores: softmax output, dropout mask (1 byte) and
    # dropout output
    Kind("attention", _attention_flops, role="core",
         model_flops=True, ops=(5, 7), check=_attention, by_shape=True,
         block_kept=_x, block_scores=_attention_scores),
    # a fused layernorm: one kernel forward, the input and weight gradients backward
    Kind("layernorm", lambda x, w, y: 4.0 * np.prod(x, axis=1), ops=(1, 2), check=_same, block_kept=_x,
         norm=True),
    # embedding 0 (a table lookup): vocabulary-parallel lookup (mask, lookup, zero the foreign
    # rows), the position lookup and their sum
    Kind("embedding", lambda x, w, y: np.zeros(len(x)), role="vocab", ops=(4, 3), check=_embedding),
    # bias-gelu, one fused kernel, its gradient and the bias' gradient backward
    Kind("gelu", lambda x, w, y: np.prod(y, axis=1), role="split", ops=(1, 2), check=_same, block_kept=_x),
    # RMSNorm 3|x| (layernorm's 4|x| without the mean): the squares' sum, the scale by its root
    # and by the weight; fused as the layernorm (one kernel forward, two backward); keeps its input
    Kind("rmsnorm", lambda x, w, y: 3.0 * np.prod(x, axis=1), ops=(1, 2), check=_same, block_kept=_x,
         norm=True),
    # SwiGLU's gate, silu(gate) * up, on the split output [2f, s] of the fused gate-and-up
    # projection: |x| (one per input element, as gelu's |y|), one fused kernel each way (Megatron's
    # bias_swiglu); keeps its input, both halves (docs/model.md §16)
    Kind("swiglu", lambda x, w, y: np.prod(x, axis=1), role="split", check=_gated, block_kept=_x),
    # a mixture of experts' grouped expert GEMM (docs/model.md §17): x [C, k s], the k copies of
    # each token dispatched to its experts, w [C, F, E] the E experts' weights, y [F, k s];
    # 2 C F k s, as a linear on the dispatched tokens; keeps its input
    Kind("experts", lambda x, w, y: 2.0 * x[:, 0] * y[:, 0] * _yprod(y), role="expert",
         memory_bound=False, model_flops=True, ops=(1, 2), check=_experts, by_shape=True, fp8=True,
         block_kept=_x),
    # the router of a mixture of experts, a linear h -> E whose logits pick each token's top-k
    # experts: 2 C F prod(Y); replicated, not counted in the model FLOPs (Megatron-LM's count
    # leaves it out), timed by its FLOPs (docs/model.md §17)
    Kind("router", lambda x, w, y: 2.0 * x[:, 0] * y[:, 0] * _yprod(y), memory_bound=False,
         ops=(1, 2), check=_linear, block_kept=_x),
)  # fmt: skip

BY_NAME: dict[str, Kind] = {k.name: k for k in TABLE}
#: The normalisation kinds (:attr:`Kind.norm`): where a transformer's pre-norm block begins.
NORMS: tuple[str, ...] = tuple(k.name for k in TABLE if k.norm)


def _roles(role: str) -> tuple[str, ...]:
    """The roles a kind of default ``role`` may state: a linear column- or row-parallel, an
    attention core, embedding or expert GEMM its own, an element-wise kind split (or inside
    the experts: "expert") or not; any replicated."""
    return {"column": ("column", "row"), "split": ("split", "expert")}.get(role, (role,)) + (
        "replicated",
    ) * (role != "replicated")


def check_shapes(kind: str, x: Dims, w: Dims, y: Dims) -> str | None:
    """The shape rule a layer of ``kind`` breaks (docs/inputs.md#model-files), or None."""
    return BY_NAME[kind].check(x, w, y)
