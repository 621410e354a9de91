"""The transformer tables' activation count (kernels/transformer.py, docs/model.md §16) against
Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Table 2,
by hand."""

from __future__ import annotations

import numpy as np

from kernels import transformer
from kernels.names import KINDS
from sweep.inputs.layers import to_arrays
from sweep.inputs.transformers import gpt


def test_block_activations_are_korthikantis_table_2():
    """h = 64, a = 4 heads, s = 32, b = 1, t = 4: s b h = 2,048 and 5 a s / h = 10. Table 2, bytes
    per layer: none s b h (34 + 5 a s / h) = 90,112; tensor parallel s b h (10 + 24/t + 5 a s /
    (h t)) = 2,048 * 18.5 = 37,888; with sequence parallelism s b h / t (34 + 5 a s / h) = 22,528;
    selective s b h (10 + 24/t) = 32,768; selective with sequence parallelism 34 s b h / t =
    17,408. In 16-bit elements, half of each."""
    arrays = to_arrays(gpt("k", 2, 64, 4, 32, vocab=10))
    names = np.array(KINDS)[arrays.kind]
    # the first block's layers, ln1_0 .. add2_0 (the embedding is layer 0)
    first = np.zeros(len(names), dtype=bool)
    first[1:11] = True
    total, split, sel, sel_split = (
        v[first].sum() for v in transformer.korthikanti(names, arrays.x, arrays.w, arrays.y, arrays.role)
    )
    z, t = 1 - 1 / 4, 4
    assert total == 90_112 / 2
    assert total - split * z == 37_888 / 2
    assert total / t == 22_528 / 2
    assert sel - sel_split * z == 32_768 / 2
    assert sel / t == 17_408 / 2


def test_block_mask_covers_each_block():
    """embed | 2 x (ln1 .. add2) | ln_f, out: the 20 block layers, not the embedding or the head."""
    names = np.array(KINDS)[to_arrays(gpt("k", 2, 8, 2, 4, vocab=10)).kind]
    mask = transformer.block_mask(names)
    assert mask.sum() == 20 and not mask[0] and not mask[-2:].any() and mask[1:21].all()
    one = np.array(KINDS)[to_arrays(gpt("k", 1, 8, 2, 4, vocab=10)).kind]
    assert transformer.block_mask(one).sum() == 10


def test_block_activations_come_from_each_layers_kind_and_role():
    """Korthikanti et al. 2022 §4.1 per layer (h = 64, s = 32, a = 4; 16-bit elements, so bytes
    / 2): layernorm input s h = 2,048; QKV input s h (replicated: column-parallel); attention Q,
    K, V 3 s h = 6,144 plus 5 a s^2 / 2 = 10,240 scores; projection input s h (split: row);
    add the 1-byte dropout mask s h / 2 = 1,024; GeLU and MLP-down inputs 4 s h = 8,192 each
    (split)."""
    arrays = to_arrays(gpt("k", 1, 64, 4, 32, vocab=10))
    names = np.array(KINDS)[arrays.kind]
    total, split, sel, _ = transformer.korthikanti(names, arrays.x, arrays.w, arrays.y, arrays.role)
    block = slice(1, 11)  # ln1 qkv attn proj add1 ln2 up gelu down add2
    assert total[block].tolist() == [2048, 2048, 6144 + 10240, 2048, 1024, 2048, 2048, 8192, 8192, 1024]
    assert split[block].tolist() == [0, 0, 6144 + 10240, 2048, 0, 0, 0, 8192, 8192, 0]
    assert sel[3] == 6144  # selective recomputation drops the scores
