"""Memory terms of data+tensor+pipeline beyond the states and the kept activations
(docs/model.md §20): the attention scores a fused attention never keeps, the loss's logits,
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

#: Bytes per logit the loss adds while it runs, beyond the output layer's 16-bit logits (its
#: output, already among its activations: a layer outside the blocks keeps x + y). PyTorch's
#: unfused cross-entropy on logits cast to FP32, as torchtitan calls it, holds at most 12 bytes
#: per logit: in the forward pass the 16-bit logits (2), their FP32 copy (4) and the FP32
#: log-probabilities it keeps (4), 10; in the backward pass, after the training step has freed
#: the 16-bit logits, the log-probabilities, their gradient (4, the negative log-likelihood's)
#: and the FP32 logits' gradient (4) that log-softmax's backward writes, 12. Beyond the 2
#: counted, 10. Megatron-LM's fused vocabulary-parallel cross-entropy holds less; the term takes
#: the unfused loss for both.
LOGIT_BYTES = 10.0


#: Bytes per weight of the gradients FSDP accumulates unsharded over a pipeline's micro-batches:
#: FP32, its reduce dtype (FSDP2 accumulates in the reduce dtype while gradient sync is off;
#: torchtitan reduces in FP32).
GRAD_ACCUM_BYTES = 4.0


def pipelined_fsdp_bytes(w_stage, delta):
    """ZeRO-3 under a pipeline (pp > 1), as PyTorch's pipeline schedules run FSDP2 (torchtitan's
    default): each stage keeps its weights gathered from the first micro-batch's forward to the
    step (no resharding after the forward, nor after a backward but the last) and accumulates
    its gradients unsharded, in FP32, over the micro-batches, reduce-scattering them once after
    the last backward: ``(delta + 4) w_stage`` bytes beside the shards."""
    return (delta + GRAD_ACCUM_BYTES) * w_stage


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
