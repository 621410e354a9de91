r"""GPT models as layer lists (docs/inputs.md#gpt-models, docs/model.md §16).

A GPT of ``L`` blocks, hidden size ``h``, ``a`` heads, sequence ``s`` and
vocabulary ``V`` is, per sample (one sequence; shapes ``[features, s]``)::

    embed      embedding  x [1, s]    w [V+s, h, 1]   y [h, s]    token and position tables
    L x (
      ln1      layernorm  x [h, s]    w [2, h, 1]     y [h, s]    scale and shift
      qkv      linear     x [h, s]    w [h, 3h, 1]    y [3h, s]
      attn     attention  x [3h, s]   w [0, a, 1]     y [h, s]    no weights; a heads
      proj     linear     x [h, s]    w [h, h, 1]     y [h, s]
      add1     add
      ln2      layernorm
      up       linear     x [h, s]    w [h, 4h, 1]    y [4h, s]
      gelu     gelu       x [4h, s]                   y [4h, s]
      down     linear     x [4h, s]   w [4h, h, 1]    y [h, s]
      add2     add )
    ln_f       layernorm
    out        linear     x [h, s]    w [0, 0, 0]     y [V, s]    tied to the embedding

Each layer states its tensor-parallel role (:data:`kernels.kinds.ROLES`): the embedding
vocabulary-parallel, qkv and up column-parallel, attn the attention core, gelu split, proj and
down row-parallel, out column-parallel, the rest replicated.

Biases are not counted (as for the CNNs), so the weights are
``12 L h^2 + (V + s) h + (4 L + 2) h``; GPT-3 175B comes to 174.6e9 against the
paper's 175.0e9.

Names: ``gpt-l<L>-h<h>-a<a>-s<s>[-v<V>]`` (V = 50,257, GPT-2/3's BPE vocabulary,
when absent), and the built-ins of :data:`GPT3` with the shapes of Brown et al.
2020, "Language Models are Few-Shot Learners", Table 2.1.

Data set: every GPT model trains on :data:`TOKENS` = 300e9 tokens, GPT-3's
training run (Brown et al. 2020, section 2.2 and Table 2.2), as ``300e9 / s``
sequences (146,484,375 at s = 2,048). An epoch is that run; ``t_iter_s`` is what
the measured files compare.
"""

from __future__ import annotations

import re
from dataclasses import replace

from sweep.errors import InputError
from sweep.inputs.layers import Layer, Model

#: GPT-2/3's byte-pair vocabulary (Radford et al. 2019), the default of a ``gpt-...`` name.
VOCAB = 50_257
#: Tokens of GPT-3's training run (Brown et al. 2020, Table 2.2): the data set of every GPT model.
TOKENS = 300_000_000_000
#: ``gpt-l<layers>-h<hidden>-a<heads>-s<sequence>[-v<vocab>]``.
PATTERN = re.compile(r"gpt-l(\d+)-h(\d+)-a(\d+)-s(\d+)(?:-v(\d+))?")
#: GPT-3 shapes (layers, hidden, heads, sequence) of Brown et al. 2020, Table 2.1. Two of its
#: rows do not multiply out (heads x d_head != d_model): for 1.3B (24 heads of 128 for
#: d_model 2,048) we keep d_model and d_head = 128, so 16 heads; for 13B (40 heads of 128 for
#: d_model 5,140) we keep the heads and d_head, so hidden 5,120, as Megatron-LM's GPT-3 13B
#: configuration does. Both keep the table's parameter counts (1.3e9, 13e9).
GPT3: dict[str, tuple[int, int, int, int]] = {
    "gpt3-1.3b": (24, 2048, 16, 2048),
    "gpt3-13b": (40, 5120, 40, 2048),
    "gpt3-175b": (96, 12288, 96, 2048),
}
SOURCE = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1"
#: The most blocks a GPT may have: the pipeline tables hold a row per stage count up to the blocks,
#: and their min-max partitions grow as blocks^2 (docs/model.md §16). Published GPTs have at most
#: a few hundred blocks (GPT-3 175B 96, Megatron's 1T 128).
MAX_BLOCKS = 1_024


def is_gpt(name: str) -> bool:
    """Whether ``name`` is a GPT model name (a built-in of :data:`GPT3` or the family's pattern)."""
    return name in GPT3 or PATTERN.fullmatch(name) is not None


def block(i: int, h: int, a: int, s: int) -> list[Layer]:
    """Block ``i`` of a GPT: pre-layernorm attention and MLP with residual adds, each layer's
    tensor-parallel role as Megatron-LM splits it (docs/model.md §16): column-parallel QKV and
    MLP-up, the attention core's heads, row-parallel output projection and MLP-down, the GeLU on
    the split activations between them, the layernorms and adds replicated."""
    hs, none = (h, s), (h, h, 0)
    return [
        Layer(f"ln1_{i}", "layernorm", hs, (2, h, 1), hs, role="replicated"),
        Layer(f"qkv_{i}", "linear", hs, (h, 3 * h, 1), (3 * h, s), role="column"),
        Layer(f"attn_{i}", "attention", (3 * h, s), (0, a, 1), hs, role="core"),
        Layer(f"proj_{i}", "linear", hs, (h, h, 1), hs, role="row"),
        Layer(f"add1_{i}", "add", hs, none, hs, role="replicated"),
        Layer(f"ln2_{i}", "layernorm", hs, (2, h, 1), hs, role="replicated"),
        Layer(f"up_{i}", "linear", hs, (h, 4 * h, 1), (4 * h, s), role="column"),
        Layer(f"gelu_{i}", "gelu", (4 * h, s), (4 * h, 4 * h, 0), (4 * h, s), role="split"),
        Layer(f"down_{i}", "linear", (4 * h, s), (4 * h, h, 1), hs, role="row"),
        Layer(f"add2_{i}", "add", hs, none, hs, role="replicated"),
    ]


def gpt(
    name: str, layers: int, hidden: int, heads: int, seq: int, vocab: int = VOCAB, source: str = ""
) -> Model:
    """The GPT of the module docstring; ``heads`` must divide ``hidden``."""
    if min(layers, hidden, heads, seq, vocab) < 1:
        raise InputError(f"model '{name}': layers, hidden, heads, sequence and vocabulary must be >= 1")
    if hidden % heads:
        raise InputError(f"model '{name}': {heads} heads do not divide hidden size {hidden}")
    if layers > MAX_BLOCKS:
        raise InputError(f"model '{name}': {layers:,} blocks, more than the {MAX_BLOCKS:,} a GPT may have")
    hs = (hidden, seq)
    out = [Layer("embed", "embedding", (1, seq), (vocab + seq, hidden, 1), hs, role="vocab")]
    for i in range(layers):
        out.extend(block(i, hidden, heads, seq))
    out.append(Layer("ln_f", "layernorm", hs, (2, hidden, 1), hs, role="replicated"))
    # the output layer, column-parallel over the vocabulary (its logits split over tp)
    out.append(Layer("out", "linear", hs, (0, 0, 0), (vocab, seq), role="column"))
    return Model(
        name=name,
        dataset_samples=TOKENS // seq,
        layers=out,
        dataset=f"{TOKENS // 10**9}B tokens",
        source=source or "built-in: GPT (Radford et al. 2019; Brown et al. 2020), docs/inputs.md#gpt-models",
        notes=f"{layers} blocks, hidden {hidden}, {heads} heads, sequence {seq}, vocabulary {vocab}",
    )


def load_gpt(name: str) -> Model:
    """A GPT model by name: a built-in of :data:`GPT3` or ``gpt-l<L>-h<h>-a<a>-s<s>[-v<V>]``."""
    if name in GPT3:
        return gpt(name, *GPT3[name], source=f"built-in: {SOURCE}")
    found = PATTERN.fullmatch(name)
    if found is None:
        raise InputError(f"'{name}' is not a GPT name like gpt-l24-h2048-a16-s1024[-v50257]")
    layers, hidden, heads, seq = (int(v) for v in found.groups()[:4])
    vocab = int(found.group(5)) if found.group(5) else VOCAB
    return gpt(name, layers, hidden, heads, seq, vocab)


def sequence(model: Model) -> int | None:
    """Tokens per sample of ``model``: the positions of its first embedding's input (a GPT's
    sequence ``s``, docs/model.md §12), or None for a model without an embedding (a CNN)."""
    embedding = next((layer for layer in model.layers if layer.kind == "embedding"), None)
    if embedding is None:
        return None
    seq = 1
    for n in embedding.x[1:]:
        seq *= n
    return seq


def samples_of(model: Model, tokens: float) -> int:
    """The samples of ``model`` that make ``tokens`` tokens: ``round(tokens / s)`` sequences of
    ``s`` tokens (:func:`sequence`). A model without an embedding (a CNN) has no tokens, and a
    budget under half a sequence makes no sample: each an :class:`InputError` naming ``tokens``."""
    seq = sequence(model)
    if seq is None:
        raise InputError(
            f"model {model.name} has no embedding, so no tokens: tokens applies to transformer models",
            param="tokens",
        )
    samples = round(float(tokens) / seq)
    if samples < 1:
        raise InputError(f"must be at least one sequence of {seq} tokens, got {tokens:g}", param="tokens")
    return samples


def with_tokens(model: Model, tokens: float) -> Model:
    """``model`` trained on ``tokens`` tokens instead of its data set: :func:`samples_of` samples.
    The run's time (``t_epoch_s``), GPU-hours, energy and cost are then those of training on
    ``tokens``."""
    return replace(model, dataset_samples=samples_of(model, tokens))
