"""Each modern built-in profile against a published ResNet-50 training throughput (docs/model.md §3).

The figures are typed from the MLPerf Training logs that each profile file cites
(NVIDIA's closed-division single-node MXNet runs, the ``throughput`` /
``imgs_sec`` of steady epochs, 8 GPUs): images per second of the whole node,
divided by its 8 GPUs here. The profiles are uncalibrated: their compute is the
per-kind roofline of docs/model.md §3 with the efficiencies and memory passes
written in the file, not fitted to these numbers.
"""

from __future__ import annotations

import pytest

#: machine -> images/s of one 8-GPU node, as logged (MLPerf Training v2.0, v3.0, v4.0).
PUBLISHED_NODE_IMAGES_S = {
    "dgx-a100": 27_180.0,  # training_results_v2.0 NVIDIA/results/dgxa100_ngc22.04_mxnet/resnet/result_0.txt
    "dgx-h100": 56_080.0,  # training_results_v3.0 NVIDIA/results/dgxh100_ngc23.04_mxnet/resnet/result_0.txt
    "dgx-h200": 63_650.0,  # training_results_v4.0 NVIDIA/results/h200_ngc24.04_mxnet/resnet/result_0.txt
}
TOLERANCE = 0.25


@pytest.mark.parametrize("machine", sorted(PUBLISHED_NODE_IMAGES_S))
def test_resnet50_data_parallel_throughput_is_within_25_percent(machine):
    import sweep

    published = PUBLISHED_NODE_IMAGES_S[machine] / 8  # per GPU
    row = sweep.estimate("resnet50", machine, "data", p=8, b=256)
    assert row["feasible"]
    modelled = 256 / row["t_iter_s"]  # images per second per GPU
    assert abs(modelled / published - 1) <= TOLERANCE, (machine, modelled, published)


def test_the_profiles_do_not_use_one_global_efficiency():
    """The check above passes through per-kind efficiencies and the memory roofline: the
    global efficiency is 1, conv and fc have their own, and memory-bound kinds are limited
    by gpu_mem_bw_Bps (mem_passes > 0)."""
    from sweep.inputs.machines import load_machine

    for machine in PUBLISHED_NODE_IMAGES_S:
        params = load_machine(machine).params
        assert params["efficiency"] == 1.0
        assert params["efficiency_conv"] < 1.0 and params["efficiency_fc"] < 1.0
        assert params["mem_passes"] > 0


def test_the_roofline_moves_with_memory_bandwidth():
    """H200 differs from H100 only in memory: the roofline makes it faster, as published
    (63,650 / 56,080 = 1.135 per node), where one global efficiency would make them equal."""
    import sweep

    h100 = sweep.estimate("resnet50", "dgx-h100", "data", p=8, b=256)["t_iter_s"]
    h200 = sweep.estimate("resnet50", "dgx-h200", "data", p=8, b=256)["t_iter_s"]
    assert 1.05 < h100 / h200 < 1.43  # 4.8 / 3.35 = 1.43 would be fully memory-bound
