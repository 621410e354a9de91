"""Built-in dense transformers (docs/inputs.md#transformer-models): Llama 2, 3 and 3.1 as
:class:`~sweep.inputs.blocks.Block` records with their published shapes.

Shapes: Hugging Face ``config.json`` of each model (``num_hidden_layers``, ``hidden_size``,
``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size``, ``vocab_size``), as
``../shared/models/PRESETS.md`` lists them; every one uses RMSNorm, rotary positions, untied
embeddings and a SwiGLU FFN. The sequence is the one NVIDIA's published H100 runs train at
(4,096 for Llama 2, 8,192 for Llama 3 and 3.1); ``NAME-s<N>`` sets another. The training set
is the model's published one: Llama 2 2.0T tokens (Touvron et al. 2023, "Llama 2", §2.1),
Llama 3 and 3.1 15T (Meta 2024, "The Llama 3 Herd of Models", §3.1: "about 15T").

Mixtures of experts (docs/model.md §17), shapes from the same files (``num_local_experts`` or
``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``): Mixtral 8x7B and 8x22B
(every block 8 experts, 2 per token, untied embeddings; Mistral AI has not published their
training set: the presets keep the GPT names' 300B tokens), Qwen3-30B-A3B and Qwen3-235B-A22B
(every block 128 experts, 8 per token, no shared expert, a query width ``a d`` twice the hidden
size; 36T tokens, Qwen3 Technical Report 2025, §3). Sequence 4,096, NVIDIA's published runs'.

DeepSeek-V3 (deepseek-ai/DeepSeek-V3 ``config.json``; DeepSeek-AI 2024, "DeepSeek-V3 Technical
Report", arXiv 2412.19437, §2 and §4.2): multi-head latent attention (``q_lora_rank`` 1,536,
``kv_lora_rank`` 512, ``qk_nope_head_dim`` 128, ``qk_rope_head_dim`` 64, ``v_head_dim`` 128;
docs/model.md §18), the first 3 of 61 blocks dense (``first_k_dense_replace``, f 18,432), the
other 58 with 256 routed experts of 2,048 (8 per token) and one shared expert of 2,048; 14.8T
tokens; its multi-token-prediction module is not in the preset (nor in the 671B). gpt-oss-120b
(openai/gpt-oss-120b ``config.json``; OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv
2508.10925): 64 query heads and 8 key/value heads of 64, 128-token sliding windows on the even
blocks from block 0 (``sliding_window``, ``layer_types``), 128 experts of 2,880 (4 per token) in
every block; no published training set (the GPT names' 300B tokens, as Mixtral). Biases (its
attention projections', router's and experts') and its attention sinks are not counted, as for
every preset: 1,114,112 weights a block, 40.1M in all, 0.03 % of its 116.8B.
"""

from __future__ import annotations

import re

from sweep.errors import InputError
from sweep.inputs.blocks import Block, model
from sweep.inputs.layers import Model

LLAMA2_TOKENS = 2_000_000_000_000
LLAMA3_TOKENS = 15_000_000_000_000


def _llama(
    layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, seq: int, tokens: int
) -> Block:
    return Block(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv,
        head_dim=128,
        ffn=ffn,
        ffn_kind="swiglu",
        norm="rmsnorm",
        positions="rope",
        tied=False,
        vocab=vocab,
        seq=seq,
        tokens=tokens,
    )


QWEN3_TOKENS = 36_000_000_000_000
MIXTRAL_TOKENS = 300_000_000_000


def _moe(
    dims: tuple[int, int, int, int], ffn: int, experts: int, top_k: int, vocab: int, tokens: int
) -> Block:
    """An MoE preset: (layers, hidden, heads, key/value heads) of 128, every block's FFN
    ``experts`` SwiGLU experts of width ``ffn``, ``top_k`` per token."""
    dense = _llama(*dims, ffn, vocab, 4096, tokens)
    return Block(**{**dense.__dict__, "experts": experts, "top_k": top_k})


_L2, _L3 = (32_000, 4_096, LLAMA2_TOKENS), (128_256, 8_192, LLAMA3_TOKENS)
#: name -> (block, source)
PRESETS: dict[str, tuple[Block, str]] = {
    "llama2-7b": (_llama(32, 4096, 32, 32, 11008, *_L2), "meta-llama/Llama-2-7b-hf config.json"),
    "llama2-13b": (_llama(40, 5120, 40, 40, 13824, *_L2), "meta-llama/Llama-2-13b-hf config.json"),
    "llama2-70b": (_llama(80, 8192, 64, 8, 28672, *_L2), "meta-llama/Llama-2-70b-hf config.json"),
    "llama3-8b": (_llama(32, 4096, 32, 8, 14336, *_L3), "meta-llama/Meta-Llama-3-8B config.json"),
    "llama3-70b": (_llama(80, 8192, 64, 8, 28672, *_L3), "meta-llama/Meta-Llama-3-70B config.json"),
    "llama3.1-8b": (_llama(32, 4096, 32, 8, 14336, *_L3), "meta-llama/Llama-3.1-8B config.json"),
    "llama3.1-70b": (_llama(80, 8192, 64, 8, 28672, *_L3), "meta-llama/Llama-3.1-70B config.json"),
    "llama3.1-405b": (_llama(126, 16384, 128, 8, 53248, *_L3), "meta-llama/Llama-3.1-405B config.json"),
    "mixtral-8x7b": (
        _moe((32, 4096, 32, 8), 14336, 8, 2, 32_000, MIXTRAL_TOKENS),
        "mistralai/Mixtral-8x7B-v0.1 config.json",
    ),
    "mixtral-8x22b": (
        _moe((56, 6144, 48, 8), 16384, 8, 2, 32_768, MIXTRAL_TOKENS),
        "mistralai/Mixtral-8x22B-v0.1 config.json",
    ),
    "qwen3-30b-a3b": (
        _moe((48, 2048, 32, 4), 768, 128, 8, 151_936, QWEN3_TOKENS),
        "Qwen/Qwen3-30B-A3B config.json",
    ),
    "qwen3-235b-a22b": (
        _moe((94, 4096, 64, 4), 1536, 128, 8, 151_936, QWEN3_TOKENS),
        "Qwen/Qwen3-235B-A22B config.json",
    ),
}
PRESETS["deepseek-v3"] = (
    Block(
        layers=61, hidden=7168, heads=128, seq=4096, vocab=129_280, ffn=18_432, ffn_kind="swiglu",
        norm="rmsnorm", positions="rope", tied=False, tokens=14_800_000_000_000, q_rank=1536,
        kv_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_dim=128, experts=256, top_k=8,
        expert_ffn=2048, shared_experts=1, shared_ffn=2048, dense_layers=3,
    ),
    "deepseek-ai/DeepSeek-V3 config.json",
)  # fmt: skip
PRESETS["gpt-oss-120b"] = (
    Block(
        layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, seq=4096, vocab=201_088,
        ffn=2880, ffn_kind="swiglu", norm="rmsnorm", positions="rope", tied=False, experts=128,
        top_k=4, window=128, window_pattern=(1, 0), tokens=MIXTRAL_TOKENS,
    ),
    "openai/gpt-oss-120b config.json",
)  # fmt: skip
#: ``NAME[-s<sequence>]``
PATTERN = re.compile(r"(?P<name>[a-z0-9.-]+?)(?:-s(?P<seq>\d+))?")


def is_preset(name: str) -> bool:
    """Whether ``name`` is a preset, with or without ``-s<N>``."""
    found = PATTERN.fullmatch(name)
    return found is not None and found.group("name") in PRESETS


def block_of(name: str) -> Block:
    """The :class:`Block` of a preset name (``-s<N>`` sets its sequence)."""
    found = PATTERN.fullmatch(name)
    if found is None or found.group("name") not in PRESETS:
        raise InputError(f"'{name}' is not a preset ({', '.join(PRESETS)}), optionally with -s<sequence>")
    spec = PRESETS[found.group("name")][0]
    if found.group("seq"):
        spec = Block(**{**spec.__dict__, "seq": int(found.group("seq"))})
    return spec


def load_preset(name: str) -> Model:
    """A preset as a :class:`Model` (its layer list, ``tokens / s`` sequences)."""
    spec = block_of(name)
    source = PRESETS[PATTERN.fullmatch(name).group("name")][1]  # type: ignore[union-attr]
    return model(spec, name, f"built-in: {source} (docs/inputs.md#transformer-models)")
