"""The low-precision GEMMs' casts (kernels/lowp.py, docs/model.md §19), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import lowp
from tests.kernels.test_megatron import TENSOR, cfg, f64, machine, tiny


@pytest.mark.parametrize(("precision", "per_element"), [(0, 0.0), (1, 4.0), (2, 4.0), (3, 3.0)])
def test_a_cast_reads_16_bits_and_writes_the_copy_and_its_transpose(precision, per_element):
    """bf16 casts nothing; fp8 and mxfp8 read 2 bytes and write 1 + 1 (the copy and its
    transpose); nvfp4 2 + 0.5 + 0.5. 1e9 elements at 2e12 B/s."""
    m = machine(bytes_per_element=2.0, gpu_mem_bw_Bps=2e12)
    assert float(lowp.cast_s(m, f64(precision), 1e9)) == pytest.approx(per_element * 1e9 / 2e12, rel=1e-12)


def test_only_the_low_precision_kinds_are_cast():
    """Per-kind traffic of 10 elements in every kind: only the linear kind's are cast."""
    m = machine(bytes_per_element=2.0, gpu_mem_bw_Bps=1e3)
    tk = np.full(len(lowp.LOWP_KINDS), 10.0)
    assert float(lowp.activation_cast_s(m, f64(1), tk)) == pytest.approx(lowp.LOWP_KINDS.sum() * 10 * 4 / 1e3)
    assert lowp.LOWP_KINDS.sum() >= 1


def test_nvfp4_on_the_worked_example():
    """nvfp4 at 4,000 FLOP/s (four times the 16-bit rate): the linear layers' 1,344 FLOPs per
    sample at tp = 2 take a quarter, 8 * 1.008 s less, less the casts at 3 bytes an element:
    8 * 76 * 3 / 1000 (activations) and 2 * 140 * 3 / 1000 (the weights, once an iteration)."""
    m = machine(gpu_flops_fp8=2e3, gpu_flops_fp4=4e3)
    c16 = TENSOR(tiny(), m, cfg(4, 4, 2, tp=2))
    c4 = TENSOR(tiny(), m, cfg(4, 4, 2, tp=2)._replace(precision=f64(3)))
    saved = 8 * 1.008 - 8 * 76 * 3 / 1e3 - 2 * 140 * 3 / 1e3
    assert float(c16.t_comp_s) - float(c4.t_comp_s) == pytest.approx(saved, rel=1e-6)
