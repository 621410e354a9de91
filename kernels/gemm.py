"""A GEMM's time from its shape: tile and wave quantization and a memory bound (docs/model.md §16).

NVIDIA's "Matrix Multiplication Background" guide (Deep Learning Performance
documentation): a GEMM of ``M x K`` by ``K x N`` is computed in output tiles of
``tile_m x tile_n``, one thread block per tile, the tiles spread over the
GPU's streaming multiprocessors in waves. The last wave of a GEMM whose tiles
do not fill every SM runs as long as a full one (wave quantization), and a
tile at the edge of the output costs a whole tile's work (tile
quantization). A GEMM whose arithmetic intensity is below the GPU's
FLOP-per-byte ratio is bound by reading its operands and writing its result.

Pure JAX, no I/O.
"""

from __future__ import annotations

import jax.numpy as jnp

from kernels.machine import Machine


def gemm_s(machine: Machine, m, n, k, batch, rate):
    """Seconds of ``batch`` GEMMs ``(m x k)(k x n)`` at ``rate`` FLOP/s for the large ones.

    .. math::
        t = \\max\\Big(\\Big\\lceil \\frac{b\\,\\lceil m/t_m\\rceil \\lceil n/t_n\\rceil}{N_{SM}}
            \\Big\\rceil \\frac{2\\,t_m t_n k\\,N_{SM}}{R},\\;
            \\frac{\\delta\\,b\\,(mk + kn + mn)}{BW}\\Big)

    with ``N_SM = gpu_sms``, ``t_m, t_n = gemm_tile_m, gemm_tile_n``, ``R = rate``: each wave
    runs one tile per SM at ``R / N_SM``. A GEMM of many full waves takes ``2 b m n k / R``.
    """
    sms = machine.gpu_sms
    tm, tn = machine.gemm_tile_m, machine.gemm_tile_n
    tiles = batch * jnp.ceil(m / tm) * jnp.ceil(n / tn)
    waves = jnp.ceil(tiles / sms)
    compute = waves * 2.0 * tm * tn * k * sms / rate
    memory = machine.bytes_per_element * batch * (m * k + k * n + m * n) / machine.gpu_mem_bw_Bps
    return jnp.maximum(compute, memory)


def slowdown(machine: Machine, shape, micro, tp, rate, group=1.0, etp=1.0):
    """How much longer a GEMM class's training GEMMs take than their FLOPs at ``rate``
    (docs/model.md §16), for ``micro`` samples per micro-batch over ``tp`` GPUs.

    ``shape`` is ``[..., 6]`` (role, then C, F, s, C, s or h, a, s, a d_qk, k;
    :func:`kernels.transformer.gemm_classes`; ``[..., 4]`` leaves the last two at C, s and h, s).
    A linear layer's forward GEMM is ``(micro s) x C`` by ``C x F``, F divided by tp for a
    column-parallel layer, C for a row-parallel one; its backward the data gradient
    ``(micro s) x F`` by ``F x C`` and the weight gradient ``C x (micro s)`` by ``(micro s) x F``.
    An attention core of ``a`` heads, query/key heads ``d_qk`` wide and value heads ``d_v = h /
    a``, each query attending to ``k`` keys (``s``, or a sliding window), is ``micro a / tp``
    batched products in (m, n, k) of six: forward ``QK^T`` (s, k, d_qk) and the weighted sum
    (s, d_v, k); backward the scores' gradient (s, k, d_v), the values' (s, d_v, k), the
    queries' and the keys' (s, d_qk, k) each. With d_qk = d_v = d and k = s: 2 of
    ``(s, s, d)`` and 4 of ``(s, d, s)``.

    A grouped expert GEMM (role 3, ``s`` its rows per expert and sample, docs/model.md §17) is a
    linear one of ``micro s group / tp`` token rows (the tokens the ``group = ep etp`` GPUs route
    to one expert) by ``C x F / etp``.
    """
    role, c, f, s = (shape[..., i] for i in range(4))
    qk, keys = (shape[..., 4], shape[..., 5]) if shape.shape[-1] > 4 else (c, s)
    expert = role == 3
    tokens = jnp.where(expert, micro * s * group / tp, micro * s)
    col = role == 0
    k_in = jnp.where(col | expert, c, c / tp)
    n_out = jnp.where(col, f / tp, jnp.where(expert, f / etp, f))
    linear = (
        gemm_s(machine, tokens, n_out, k_in, 1.0, rate)
        + gemm_s(machine, tokens, k_in, n_out, 1.0, rate)
        + gemm_s(machine, k_in, n_out, tokens, 1.0, rate)
    ) / (3.0 * 2.0 * tokens * n_out * k_in / rate)
    d_v = c / jnp.maximum(f, 1.0)
    d_qk = qk / jnp.maximum(f, 1.0)
    heads = micro * f / tp
    # the sums in this order are 2 (s, s, d) + 4 (s, d, s) to the bit when d_qk = d_v, k = s
    scores = gemm_s(machine, s, keys, d_qk, heads, rate) + gemm_s(machine, s, keys, d_v, heads, rate)
    weighted = 2.0 * gemm_s(machine, s, d_v, keys, heads, rate) + 2.0 * gemm_s(
        machine, s, d_qk, keys, heads, rate
    )
    core = (scores + weighted) / (6.0 * 2.0 * heads * s * keys * ((d_qk + d_v) / 2.0) / rate)
    return jnp.where(role == 2, core, linear)
