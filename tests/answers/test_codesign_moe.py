"""The tutorial's mixture-of-experts question (docs/tutorial-codesign.md, "DeepSeek-V3 on 1,024
H100s"): how large an NVLink domain keeps DeepSeek-V3's ep-64 all-to-all below its compute.
Each property is checked without reading the answer's own arithmetic: the links an all-to-all
uses are found by perturbing one link's bandwidth, and the co-design answer by estimating the
run at the answered domain size and the one below it."""

from __future__ import annotations

from typing import Any

import pytest

import sweep

#: NVIDIA's published DeepSeek-V3 split on 1,024 H100s (grids/measurements/published_h100_public.csv):
#: tp 2, pp 8, vp 4, ep 64, FP8, 8,192 sequences an iteration, micro-batches of one sequence.
SPLIT: dict[str, Any] = dict(p=1024, global_batch=8192, tp=2, pp=8, ep=64, vp=4, sp=1, precision="fp8", recompute="full",
             zero=1, micro_batch=1)  # fmt: skip


def _estimate(machine: str, **sets: float) -> dict:
    return sweep.estimate("deepseek-v3", machine, "data+tensor+pipeline", **SPLIT, set=sets or None)


@pytest.mark.parametrize(
    ("machine", "on_nic"),
    [("gb200-nvl72", False), ("dgx-b200", True)],
)
def test_ep64_alltoall_stays_on_nvlink_only_inside_a_72_gpu_domain(machine, on_nic):
    """An ep group of 64 fits GB200 NVL72's 72-GPU NVLink domain, so its all-to-all does not
    depend on the NIC (halving the inter-node bandwidth leaves it unchanged) and does depend on
    NVLink; on DGX B200 (8 GPUs a node) 56 of the 64 members are off-node, and the NIC sets it."""
    base = _estimate(machine)
    # both profiles: 900 GB/s of NVLink5 per direction, one 50 GB/s NIC per GPU; each halved
    nic = _estimate(machine, inter_bandwidth_Bps=25e9)
    nvlink = _estimate(machine, intra_bandwidth_Bps=450e9)
    assert base["t_alltoall_s"] > 0
    if on_nic:
        assert nic["t_alltoall_s"] > 1.5 * base["t_alltoall_s"]
        assert nvlink["t_alltoall_s"] == pytest.approx(base["t_alltoall_s"], rel=1e-12)
    else:
        assert nic["t_alltoall_s"] == pytest.approx(base["t_alltoall_s"], rel=1e-12)
        assert nvlink["t_alltoall_s"] > 1.5 * base["t_alltoall_s"]


def test_nvlink_domain_that_puts_the_alltoall_below_the_compute():
    """``gpus_per_node`` is answered on its whole numbers: at the answer the split's all-to-all
    takes no longer than its compute (the compute does not depend on the domain), one GPU
    below it takes longer; a domain holding the whole ep group of 64 is at or above the
    answer, and DGX H100's own 8 is below it (there the all-to-all outlasts the compute)."""
    compute = _estimate("dgx-h100")["t_comp_s"]
    [a] = sweep.codesign(
        "deepseek-v3", "dgx-h100", "data+tensor+pipeline", "gpus_per_node",
        target=f"t_alltoall_s <= {compute!r}",
        **{k: v if k in ("p", "global_batch") else [v] for k, v in SPLIT.items()}, cp=[1],
    )  # fmt: skip
    n = a.threshold
    assert n == int(n) and 8 < n <= 64
    at = _estimate("dgx-h100", gpus_per_node=n)
    below = _estimate("dgx-h100", gpus_per_node=n - 1)
    assert at["t_comp_s"] == pytest.approx(compute, rel=1e-12)
    assert at["t_alltoall_s"] <= compute < below["t_alltoall_s"]
    assert _estimate("dgx-h100")["t_alltoall_s"] > compute
    assert _estimate("dgx-h100", gpus_per_node=64)["t_alltoall_s"] <= compute
