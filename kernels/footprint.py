"""Memory terms of data+tensor+pipeline beyond the states and the kept activations
(docs/model.md §17): the attention scores a fused attention never keeps, the loss's logits,
and the workspace every rank holds besides.

Per sample, in 16-bit elements as :mod:`kernels.transformer`'s tables count them, read from the
GEMM classes' shapes (``[C, 4]``: role, then (C, F, s) of a linear or (h, a, s) of an attention
core), so that no table changes.
"""

from __future__ import annotations

import jax.numpy as jnp

from kernels.machine import Machine
from kernels.network import Net
from kernels.transformer import CORE

#: Bytes per logit alive at once while the loss runs: the 16-bit logits (2), their FP32 copy (4)
#: and the FP32 log-probabilities the loss keeps for its backward pass (4): PyTorch's unfused
#: cross-entropy on logits cast to FP32, as torchtitan calls it (its training step frees the
#: logits only before the backward pass). Megatron-LM's fused vocabulary-parallel cross-entropy
#: holds less; the term takes the unfused loss for both.
LOGIT_BYTES = 10.0


def block_scores(net: Net):
    """One attention core's kept scores per sample, ``5 a s^2 / 2`` elements (Korthikanti et
    al.'s count, :data:`kernels.kinds.TABLE`'s attention), the largest over the cores; the part
    of full recomputation's block that a fused (flash) attention never writes. 0 without
    attention."""
    shape = net.transformer.gemm_shape
    return jnp.max(jnp.where(shape[:, 0] == CORE, 2.5 * shape[:, 2] * shape[:, 3] ** 2, 0.0))


def logits_bytes(net: Net, tp):
    """Bytes per sample of the loss's logits at its peak on the last stage: ``10 s V / tp`` for
    the output layer's ``s V`` logits (:attr:`kernels.transformer.TransformerTable.logits`), split
    over tp by the vocabulary-parallel loss; 0 where the network does not end in a linear layer.
    One micro-batch's at a time: the last stage runs each micro-batch's backward right after its
    loss."""
    return LOGIT_BYTES * net.transformer.logits / tp


def workspace_bytes(machine: Machine):
    """What a rank holds besides states and activations: the machine's ``mem_workspace_bytes``
    (cuBLAS and NCCL buffers, the caching allocator's blocks it keeps but cannot reuse)."""
    return machine.mem_workspace_bytes
