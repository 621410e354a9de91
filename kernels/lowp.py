"""Low-precision GEMMs' casts (docs/model.md §19): the memory-bound passes that put a linear
layer's operands into FP8 (or MXFP8, NVFP4) before its GEMMs.

Transformer Engine runs an FP8 linear layer's GEMMs on FP8 copies of its operands. Each is
made by one fused cast-transpose kernel (``fp8_cast_transpose_fused`` in
``transformer_engine/pytorch/module/linear.py``; ``nvte_cast_transpose``): it reads the 16-bit
tensor, writes the low-precision copy and its transpose (Hopper's FP8 GEMMs take only the
TN layout, so the backward's weight-gradient GEMM reads the transposed copies) and updates
the tensor's amax for the scaling in the same pass. The forward casts the layer's input, the
backward its output gradient; the weights are cast once per iteration (the FP8 weight cache
Megatron-LM enables with ``is_first_microbatch``). Per element: ``delta`` bytes read and twice
the format's bytes written, at the memory bandwidth. Pure: jax only.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from kernels import kinds
from kernels.machine import Machine

#: Bytes per element of each precision's copy, by code (bf16, fp8, mxfp8, nvfp4): bf16 casts
#: nothing. The block scales (one byte per 32 elements for mxfp8, per 16 for nvfp4) are not
#: counted.
CAST_BYTES = (0.0, 1.0, 1.0, 0.5)
#: The kinds whose GEMMs run in the low precision (:attr:`kernels.kinds.Kind.fp8`).
LOWP_KINDS = np.array([k.fp8 for k in kinds.TABLE], dtype=np.float64)


def cast_s(machine: Machine, precision, elems):
    """Seconds to cast ``elems`` 16-bit elements to ``precision`` (a code of the ``precision``
    axis): read ``delta`` bytes and write the copy and its transpose, ``delta + 2 c`` bytes an
    element (``c`` of :data:`CAST_BYTES`) at ``gpu_mem_bw_Bps``; 0 for bf16."""
    c = jnp.asarray(CAST_BYTES)[jnp.asarray(precision, jnp.int32)]
    per_element = jnp.where(c > 0, machine.bytes_per_element + 2.0 * c, 0.0)
    return per_element * elems / machine.gpu_mem_bw_Bps


def activation_cast_s(machine: Machine, precision, traffic_kind):
    """Per sample, the casts of the low-precision layers' inputs (forward) and output gradients
    (backward): their ``|x| + |y|`` elements, the per-kind traffic the roofline counts for the
    stage (with full recomputation's forward again), on the kinds of :data:`LOWP_KINDS`."""
    return cast_s(machine, precision, jnp.sum(traffic_kind * jnp.asarray(LOWP_KINDS, traffic_kind.dtype)))
