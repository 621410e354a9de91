r"""Dense transformers as data (docs/inputs.md#transformer-models, docs/model.md §16, §18).

A :class:`Block` states a decoder-only transformer: ``L`` blocks of hidden size ``h``;
attention with ``a`` query heads, ``g`` key/value heads (grouped-query attention; ``g = a`` is
multi-head) of dimension ``d`` (the query width ``a d`` need not be ``h``); an FFN of width
``f``, ``gelu`` (two matrices) or ``swiglu`` (three: gate, up and down); a ``layernorm`` or an
``rmsnorm``; ``learned`` positions (a table of ``s`` rows) or ``rope`` (none); tied or untied
input and output embeddings; vocabulary ``V``, sequence ``s`` and the training set in tokens.
The attention may instead be multi-head latent attention (``kv_rank > 0``) and may attend
through a sliding window (``window``) in the blocks ``window_pattern`` marks: its layers (from
``qkv`` to ``proj`` below) are :func:`sweep.inputs.attention.attention_layers`'.
:func:`layers` turns it into the layer list, each layer stating its tensor-parallel role::

    embed    embedding  x [1, s]          w [V (+ s), h, 1]    y [h, s]          vocab
    L x (
      ln1    <norm>     x [h, s]          w [2 or 1, h, 1]     y [h, s]          replicated
      qkv    linear     x [h, s]          w [h, (a+2g)d, 1]    y [(a+2g)d, s]    column
      attn   attention  x [(a+2g)d, s]    w [0, a, 1]          y [ad, s]         core
      proj   linear     x [ad, s]         w [ad, h, 1]         y [h, s]          row
      add1   add                                                                 replicated
      ln2    <norm>                                                              replicated
      up     linear     x [h, s]          w [h, f or 2f, 1]    y [f or 2f, s]    column
      gelu   gelu       x [f, s]                               y [f, s]          split
        or swiglu       x [2f, s]                              y [f, s]          split
      down   linear     x [f, s]          w [f, h, 1]          y [h, s]          row
      add2   add )                                                               replicated
    ln_f     <norm>
    out      linear     x [h, s]          w [0, 0, 0] (tied) or [h, V, 1]   y [V, s]   column

SwiGLU's gate and up projections are one column-parallel GEMM of width ``2f`` (Megatron-LM's
``linear_fc1`` with a gated linear unit: each rank holds ``f / tp`` of each), the ``swiglu``
layer ``silu(gate) * up`` on its split output, the down projection row-parallel. With ``gelu``,
``layernorm``, ``learned`` positions, tied embeddings, ``g = a`` and ``a d = h`` the list is
:func:`sweep.inputs.transformers.block`'s GPT, layer for layer.

Counts (biases not counted, as for the GPTs): :func:`params` (the layer list's weights),
:func:`flops_per_token` (Megatron-LM's ``num_floating_point_operations`` per token).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sweep.errors import InputError, where
from sweep.inputs.attention import (
    ZERO_OK,
    attention_check,
    attention_flops,
    attention_layers,
    attention_note,
    attention_params,
    latent,
)
from sweep.inputs.layers import Layer, Model
from sweep.inputs.moe import (
    MATRICES,
    dense_ffn,
    expert_ffn,
    moe_check,
    moe_ffn,
    moe_params,
    moe_width,
    shared_ffn,
)
from sweep.inputs.transformers import MAX_BLOCKS

FFN_KINDS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope")
#: Matrices of the FFN per kind, over two: SwiGLU's gate, up and down against GeLU's up and down
#: (Megatron-LM's ``gated_linear_multiplier``).
FFN_MULTIPLIER = {"gelu": Fraction(1), "swiglu": Fraction(3, 2)}


@dataclass(frozen=True)
class Block:
    """A dense decoder-only transformer (module docstring)."""

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int
    kv_heads: int = 0  # 0: heads (multi-head attention)
    head_dim: int = 0  # 0: hidden / heads
    ffn_kind: str = "gelu"
    norm: str = "layernorm"
    positions: str = "learned"
    tied: bool = True
    tokens: int = 300_000_000_000
    # multi-head latent attention and sliding windows (sweep/inputs/attention.py, docs/model.md §18)
    q_rank: int = 0  # 0: no query bottleneck
    kv_rank: int = 0  # > 0: multi-head latent attention
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_dim: int = 0
    window: int = 0  # 0: every query attends to the whole sequence
    window_pattern: tuple[int, ...] = ()  # cycled over the blocks, 1 windowed; (): every block
    # a mixture of experts (sweep/inputs/moe.py, docs/model.md §17): 0 experts is a dense FFN
    experts: int = 0
    top_k: int = 1
    expert_ffn: int = 0  # 0: ffn
    shared_experts: int = 0
    shared_ffn: int = 0  # 0: expert_ffn
    dense_layers: int = 0  # the first blocks keep a dense FFN of width ffn

    @property
    def g(self) -> int:
        """Key/value heads."""
        return self.kv_heads or self.heads

    @property
    def d(self) -> int:
        """Head dimension."""
        return self.head_dim or self.hidden // self.heads

    def moe(self, i: int) -> bool:
        """Whether block ``i``'s FFN is a mixture of experts."""
        return self.experts > 0 and i >= self.dense_layers

    def check(self, name: str) -> None:
        """An :class:`InputError` naming the first field out of range (its key in a model file)."""
        for key in ("layers", "hidden", "heads", "seq", "vocab", "ffn", "tokens"):
            if getattr(self, key) < 1:
                raise InputError(f"model '{name}': {key} must be >= 1", param=key)
        moe_check(self, name)
        if self.kv_heads < 0 or self.g > self.heads or self.heads % self.g:
            raise InputError(
                f"model '{name}': {self.g} key/value heads do not divide the {self.heads} heads",
                param="kv_heads",
            )
        attention_check(self, name)
        if self.head_dim < 0 or (not self.head_dim and not latent(self) and self.hidden % self.heads):
            raise InputError(
                f"model '{name}': {self.heads} heads do not divide hidden size {self.hidden} "
                "(state head_dim)",
                param="head_dim",
            )
        for key, legal in (("ffn_kind", FFN_KINDS), ("norm", NORMS), ("positions", POSITIONS)):
            if getattr(self, key) not in legal:
                raise InputError(f"model '{name}': {key} must be one of {', '.join(legal)}", param=key)
        if self.layers > MAX_BLOCKS:
            raise InputError(
                f"model '{name}': {self.layers:,} blocks, more than the {MAX_BLOCKS:,} a transformer may have",
                param="layers",
            )


def _norm(spec: Block, name: str) -> Layer:
    h, s = spec.hidden, spec.seq
    return Layer(
        name, spec.norm, (h, s), (2 if spec.norm == "layernorm" else 1, h, 1), (h, s), role="replicated"
    )


def block(spec: Block, i: int) -> list[Layer]:
    """Block ``i``: pre-norm attention and FFN with residual adds, each layer's tensor-parallel
    role as Megatron-LM splits it (module docstring)."""
    h, s = spec.hidden, spec.seq
    hs, none = (h, s), (h, h, 0)
    ffn = moe_ffn(spec, i) if spec.moe(i) else dense_ffn(spec, i, spec.ffn)
    return [
        _norm(spec, f"ln1_{i}"),
        *attention_layers(spec, i),
        Layer(f"add1_{i}", "add", hs, none, hs, role="replicated"),
        _norm(spec, f"ln2_{i}"),
        *ffn,
        Layer(f"add2_{i}", "add", hs, none, hs, role="replicated"),
    ]


def layers(spec: Block) -> list[Layer]:
    """The layer list of ``spec`` (module docstring)."""
    h, s, v = spec.hidden, spec.seq, spec.vocab
    rows = v + (s if spec.positions == "learned" else 0)
    out = [Layer("embed", "embedding", (1, s), (rows, h, 1), (h, s), role="vocab")]
    for i in range(spec.layers):
        out.extend(block(spec, i))
    out.append(_norm(spec, "ln_f"))
    # the output layer, column-parallel over the vocabulary (its logits split over tp)
    out.append(Layer("out", "linear", (h, s), (0, 0, 0) if spec.tied else (h, v, 1), (v, s), role="column"))
    return out


def params(spec: Block) -> int:
    """Weights (biases not counted): per block the norms, ``h (a + 2g) d`` for Q, K and V,
    ``a d h`` for the output projection (multi-head latent attention's projections and norms:
    :func:`sweep.inputs.attention.attention_params`), ``2 h f`` (GeLU) or ``3 h f`` (SwiGLU); the embedding
    ``V h`` (and ``s h`` learned positions), the final norm, ``h V`` more when untied. The
    weights of :func:`layers`' list."""
    h, f = spec.hidden, spec.ffn
    norm = (2 if spec.norm == "layernorm" else 1) * h
    per_block = 2 * norm + attention_params(spec)
    moe = sum(spec.moe(i) for i in range(spec.layers))
    ffn = (spec.layers - moe) * MATRICES[spec.ffn_kind] * h * f + moe * moe_params(spec)[0]
    embed = (spec.vocab + (spec.seq if spec.positions == "learned" else 0)) * h
    return spec.layers * per_block + ffn + embed + norm + (0 if spec.tied else h * spec.vocab)


def active_params(spec: Block) -> int:
    """The weights each token works with: :func:`params` with a mixture of experts' routed
    experts counted ``top_k`` times rather than ``experts`` times (all of them in a dense block)."""
    moe = sum(spec.moe(i) for i in range(spec.layers))
    total, active = moe_params(spec)
    return params(spec) - moe * (total - active)


def flops_per_token(spec: Block) -> float:
    """Model FLOPs per token of a training step as Megatron-LM's ``num_floating_point_operations``
    counts them (docs/model.md §12): ``12 L h^2 [(1 + g/a + s/h)(a d / h) + (f/h) m + V / (2 L h)]``,
    m = 3/2 for SwiGLU and 1 for GeLU; forward and backward, full ``s^2`` attention, no
    recomputation; multi-head latent attention and sliding windows by the same rule on their real
    widths and keys (:func:`sweep.inputs.attention.attention_flops`). For a dense list it equals the linear layers' and attention cores' training
    FLOPs of :func:`layers` per token."""
    el, h = spec.layers, spec.hidden
    # the attention on its real widths and keys (sweep/inputs/attention.py): exactly
    # (1 + g/a + s/h)(a d / h) of 12 L h^2 for grouped-query attention without a window
    attention = Fraction(attention_flops(spec), 12 * el * h * h)
    # per block, its FFN's width: f dense, k f_expert + f_shared in a mixture of experts
    widths = sum(moe_width(spec) if spec.moe(i) else spec.ffn for i in range(el))
    ffn = Fraction(widths, el * h) * FFN_MULTIPLIER[spec.ffn_kind]
    # in exact arithmetic, then rounded once: the layer list's sum of integers to the bit
    return float(12 * el * h * h * (attention + ffn + Fraction(spec.vocab, 2 * el * h)))


def model(spec: Block, name: str, source: str, dataset: str = "") -> Model:
    """The :class:`Model` of ``spec``: its layer list and ``tokens / s`` sequences."""
    spec.check(name)
    moe = _moe_note(spec)
    return Model(
        name=name,
        dataset_samples=spec.tokens // spec.seq,
        layers=layers(spec),
        dataset=dataset or _tokens(spec.tokens),
        source=source,
        notes=(
            f"{spec.layers} blocks, hidden {spec.hidden}, {attention_note(spec)}, "
            f"{spec.ffn_kind} FFN {spec.ffn}{moe}, {spec.norm}, {spec.positions} positions, "
            f"{'tied' if spec.tied else 'untied'} embeddings, sequence {spec.seq}, vocabulary {spec.vocab}"
        ),
    )


def _moe_note(spec: Block) -> str:
    """A mixture of experts as the notes say it ("" for a dense block)."""
    if not spec.experts:
        return ""
    shared = (
        f" + {spec.shared_experts} shared of {shared_ffn(spec) // spec.shared_experts}"
        if spec.shared_experts
        else ""
    )
    dense = f", the first {spec.dense_layers} blocks dense" if spec.dense_layers else ""
    return f" ({spec.experts} experts of {expert_ffn(spec)}, top-{spec.top_k}{shared}{dense})"


def _tokens(tokens: int) -> str:
    """A token budget as people write it: 300B tokens, 2T tokens, 15T tokens."""
    for unit, scale in (("T", 10**12), ("B", 10**9)):
        if tokens >= scale:
            return f"{tokens / scale:g}{unit} tokens"
    return f"{tokens:,} tokens"


#: The keys of a model file's ``[transformer]`` table: the :class:`Block` field each sets.
TOML_KEYS: dict[str, str] = {
    "layers": "layers",
    "hidden": "hidden",
    "heads": "heads",
    "kv_heads": "kv_heads",
    "head_dim": "head_dim",
    "ffn": "ffn",
    "ffn_kind": "ffn_kind",
    "norm": "norm",
    "positions": "positions",
    "tied_embeddings": "tied",
    "vocab": "vocab",
    "seq": "seq",
    "tokens": "tokens",
    **{key: key for key in ZERO_OK},
    "window_pattern": "window_pattern",
    "experts": "experts",
    "top_k": "top_k",
    "expert_ffn": "expert_ffn",
    "shared_experts": "shared_experts",
    "shared_ffn": "shared_ffn",
    "dense_layers": "dense_layers",
}
_STRINGS = {"ffn_kind", "norm", "positions"}
#: Keys whose 0 means "none" or "the default": integers >= 0.
_ZERO_OK = {"experts", "expert_ffn", "shared_experts", "shared_ffn", "dense_layers", *ZERO_OK}


def from_toml(table: dict, path) -> Block:
    """The :class:`Block` of a model file's ``[transformer]`` table (docs/inputs.md#transformer-models):
    ``layers``, ``hidden``, ``heads``, ``seq`` and ``vocab`` required; ``ffn`` 4 h unless stated,
    the rest :class:`Block`'s defaults. A key of the wrong type is an error naming it."""
    if not isinstance(table, dict):
        raise InputError("must be a table", where(path, key="transformer"))
    unknown = set(table) - set(TOML_KEYS)
    if unknown:
        raise InputError("unknown key", where(path, key=f"transformer.{sorted(unknown)[0]}"))
    fields: dict = {}
    for key, value in table.items():
        place = where(path, key=f"transformer.{key}")
        if key == "tied_embeddings":
            if not isinstance(value, bool):
                raise InputError("must be true or false", place)
        elif key in _STRINGS:
            if not isinstance(value, str):
                raise InputError("must be a string", place)
        elif key == "window_pattern":
            if (
                not isinstance(value, list)
                or not value
                or any(v not in (0, 1) or isinstance(v, bool) for v in value)
            ):
                raise InputError("must be a list of 1 (windowed) and 0 (full), one per block, cycled", place)
            value = tuple(value)
        elif not isinstance(value, int) or isinstance(value, bool) or value < (key not in _ZERO_OK):
            raise InputError(f"must be an integer >= {int(key not in _ZERO_OK)}", place)
        fields[TOML_KEYS[key]] = value
    missing = [k for k in ("layers", "hidden", "heads", "seq", "vocab") if k not in fields]
    if missing:
        raise InputError(f"missing key '{missing[0]}'", where(path, key="transformer"))
    fields.setdefault("ffn", 4 * fields["hidden"])
    return Block(**fields)


def load_toml(doc: dict, path) -> Model:
    """A model file with a ``[transformer]`` table: the block it states, named by ``[model]``'s
    optional ``name`` (else the file's), ``source`` and ``notes``."""
    head = doc.get("model", {})
    if not isinstance(head, dict):
        raise InputError("must be a table", where(path, key="model"))
    unknown = set(head) - {"name", "source", "notes"}
    if unknown:
        raise InputError(
            "unknown key (a [transformer] model states its data set as transformer.tokens)",
            where(path, key=f"model.{sorted(unknown)[0]}"),
        )
    unknown_tables = set(doc) - {"model", "transformer"}
    if unknown_tables:
        raise InputError("unknown table beside [transformer]", where(path, key=sorted(unknown_tables)[0]))
    spec = from_toml(doc["transformer"], path)
    name = str(head.get("name", getattr(path, "stem", path)))
    try:
        built = model(spec, name, str(head.get("source", path)))
    except InputError as err:
        key = err.param[0] if err.param else ""
        field = next((k for k, v in TOML_KEYS.items() if v == key), key)
        raise InputError(str(err), where(path, key=f"transformer.{field}"), param=err.param) from None
    if "notes" in head:
        built.notes = str(head["notes"])
    return built
