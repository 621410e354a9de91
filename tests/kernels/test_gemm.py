"""A GEMM's time by shape (kernels/gemm.py, docs/model.md §16): tile and wave quantization and the
memory bound, by hand; large GEMMs keep the plain rate."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import gemm
from sweep.inputs.machines import load_machine
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


def test_slowdown_of_latent_and_windowed_attention_cores():
    """2 SMs, tiles 2 x 2, 1,000 FLOP/s, 2-byte elements, 1,000 B/s; micro-batch 1, tp = 2: one of
    a = 2 heads. A latent core, s = 2, d_v = 4 / 2 = 2, d_qk = 8 / 2 = 4, k = 2 keys: QK^T (2, 2, 4)
    one tile, 2*2*2*4*2/1000 = 0.064 (memory 2 * 20 / 1000 = 0.040); the scores' gradient (2, 2, 2)
    0.032; the weighted sum and the values' gradient (2, 2, 2) 0.032 each; the queries' and keys'
    gradients (2, 4, 2) two tiles in one wave, compute 0.032, memory 2 * (4 + 8 + 8) / 1000 = 0.040
    each: 0.240 against 2 s k (3 d_qk + 3 d_v) = 144 FLOPs, 0.144: slowdown 5/3.
    A windowed core, s = 4, d = 2, k = 2 keys: all six (4, 2, 2): two tiles in one wave, compute
    0.032, memory 2 * (8 + 4 + 8) / 1000 = 0.040: 0.240 against 2 * 4 * 2 * 12 = 192 FLOPs:
    slowdown 1.25."""
    m = machine(gpu_sms=2.0, gemm_tile_m=2.0, gemm_tile_n=2.0)
    shapes = np.array([[2.0, 4.0, 2.0, 2.0, 8.0, 2.0], [2.0, 4.0, 2.0, 4.0, 4.0, 2.0]])
    np.testing.assert_allclose(gemm.slowdown(m, shapes, 1.0, 2.0, 1e3), [5 / 3, 1.25], rtol=1e-12)
    # with d_qk = d_v and every key, the six columns are the four's to the bit
    four = np.array([[0.0, 4.0, 8.0, 2.0], [2.0, 4.0, 2.0, 2.0]])
    six = np.concatenate([four, four[:, [1, 3]]], axis=1)
    assert np.array_equal(gemm.slowdown(m, six, 1.0, 2.0, 1e3), gemm.slowdown(m, four, 1.0, 2.0, 1e3))


@pytest.mark.parametrize(
    ("batch", "m", "n", "k", "measured_tflops"),
    [
        # OpenXLA's default matmul performance table, sm_90 ("NVIDIA H100 80GB HBM3"), BF16 x BF16 -> BF16
        # (xla/service/gpu/model/matmul_interpolator_data.h): FLOP/s of each (b, m, n, k)
        (1, 4096, 2048, 4096, 764.093),
        (2, 2048, 1024, 4096, 742.303),
        (1, 2048, 4096, 2048, 717.502),
    ],
)
def test_large_h100_gemms_against_measured_rates(batch, m, n, k, measured_tflops):
    """dgx-h100's GEMM model (132 SMs, 128 x 128 tiles, 0.77 * 989 = 761.53 TFLOP/s) against measured
    H100 GEMMs of two and more waves, within 5 %. By hand, (1, 4096, 2048, 4096): 32 * 16 = 512 tiles,
    4 waves of 132: 4 * 2 * 128^2 * 4096 * 132 / 761.53e12 = 93.06 us for 2 * 4096 * 2048 * 4096 =
    68.72e9 FLOPs, 738.4 TFLOP/s; (2, 2048, 1024, 4096): 256 tiles, 2 waves, the same 738.4;
    (1, 2048, 4096, 2048): 512 tiles, 4 waves of half the k, 738.4."""
    h100 = load_machine("dgx-h100").pytree()
    rate = 0.77 * 989e12
    seconds = float(gemm.gemm_s(h100, float(m), float(n), float(k), float(batch), rate))
    predicted = 2.0 * batch * m * n * k / seconds / 1e12
    assert predicted == pytest.approx(738.4, rel=1e-3)
    assert predicted == pytest.approx(measured_tflops, rel=0.05)
