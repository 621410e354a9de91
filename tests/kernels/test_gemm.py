"""A GEMM's time by shape (kernels/gemm.py, docs/model.md §16): tile and wave quantization and the
memory bound, by hand; large GEMMs keep the plain rate."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import gemm
from tests.kernels.test_megatron import machine


def test_small_gemm_by_hand():
    """2 SMs, tiles of 2 x 2, 1,000 FLOP/s, 1,000 B/s, 2-byte elements. (3 x 4)(4 x 2): tiles
    ceil(3/2) ceil(2/2) = 2, one wave of 2 tiles of 2 * 2 * 2 * 4 = 32 FLOPs each at 500 FLOP/s
    per SM: 0.064 s (the FLOPs alone, 48, take 0.048 s); memory 2 * (12 + 8 + 6) / 1000 = 0.052."""
    m = machine(gpu_sms=2.0, gemm_tile_m=2.0, gemm_tile_n=2.0)
    assert float(gemm.gemm_s(m, 3.0, 2.0, 4.0, 1.0, 1e3)) == pytest.approx(0.064, rel=1e-12)
    # k = 1: compute one wave of 2 * 2 * 2 * 1 * 2 / 1000 = 0.016; memory 2 * (3 + 2 + 6) / 1000 = 0.022
    assert float(gemm.gemm_s(m, 3.0, 2.0, 1.0, 1.0, 1e3)) == pytest.approx(0.022, rel=1e-12)
    # 3 of them: 6 tiles, 3 waves
    assert float(gemm.gemm_s(m, 3.0, 2.0, 4.0, 3.0, 1e3)) == pytest.approx(3 * 0.064, rel=1e-12)


def test_large_gemm_keeps_the_plain_rate():
    """(64 x 64)(64 x 64) in 1,024 tiles, 512 full waves: 2 * 64^3 / 1000 s exactly."""
    m = machine(gpu_sms=2.0, gemm_tile_m=2.0, gemm_tile_n=2.0)
    assert float(gemm.gemm_s(m, 64.0, 64.0, 64.0, 1.0, 1e3)) == pytest.approx(2 * 64**3 / 1e3, rel=1e-12)


def test_slowdown_of_a_linear_and_an_attention_core():
    """A column-parallel linear [C=4, s=2] -> [F=8, s], micro-batch 1, tp = 2, 2 SMs, tiles 2 x 2:
    forward (2 x 4)(4 x 4): 2 tiles, one wave, 2*2*2*4*2/1000 = 0.064 (ideal 0.064); data gradient
    (2 x 4)(4 x 4): the same; weight gradient (4 x 2)(2 x 4): 4 tiles, 2 waves of 2*2*2*2*2/1000:
    0.064 (ideal 0.064). Memory 2 * (8 + 16 + 8) / 1000 = 0.064 each: slowdown 1.
    An attention core of h = 4, a = 2 heads (d = 2), s = 2, micro-batch 1, tp = 2: 1 head;
    (2 x 2)(2 x 2): one tile: 2*2*2*2*2/1000 = 0.032 (ideal 0.016); memory 2 * 12 / 1000 = 0.024:
    every one of the six GEMMs 0.032: slowdown 2."""
    m = machine(gpu_sms=2.0, gemm_tile_m=2.0, gemm_tile_n=2.0)
    shapes = np.array([[0.0, 4.0, 8.0, 2.0], [2.0, 4.0, 2.0, 2.0]])
    np.testing.assert_allclose(gemm.slowdown(m, shapes, 1.0, 2.0, 1e3), [1.0, 2.0], rtol=1e-12)
