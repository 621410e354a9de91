"""Helpers shared across test folders: a small network and machine checkable on paper (the
kernel tests), ParaDL's example files, subprocesses on forced CPU devices, the trust page.

The small network (docs/model.md §1 shapes, spatial extents padded with 1 to
three dimensions as :class:`kernels.LayerArrays` wants them):

=====  ======  ===========  ==============  ===========  ==============  =====  ==========
layer  kind    x [C,X1,X2]  w [C,F,K1,K2]   y [F,Y1,Y2]  fwd FLOPs       |w|    |x|+|y|
=====  ======  ===========  ==============  ===========  ==============  =====  ==========
0      conv    2x4x4        2x3x3x3         3x4x4        2*2*3*9*16=1728  54     32+48=80
1      relu    3x4x4        3x3x0x0         3x4x4        |y| = 48          0     in place
2      fc      3x4x4        3x5x4x4         5x1x1        2*3*5*16 = 480   240    48+5=53
=====  ======  ===========  ==============  ===========  ==============  =====  ==========

Training FLOPs (3 x forward): 5184, 144, 1440; total 6768.
Weights W = 294 elements (1176 bytes at 4 bytes); activations A(1) = 80 + 53 = 133.
D = 1000 samples.

The small machine: 2 GPUs and 1 NIC per node, 1 TFLOP/s, memory 1e5 bytes,
memory bandwidth 1e9 B/s, 4-byte elements, SGD weight update (wu_passes 3),
intra link alpha 1e-6 s / 1e10 B/s, inter levels
(span 2 nodes: alpha 1e-5 s, 1e9 B/s) and (unbounded: alpha 2e-5 s, 5e8 B/s).
So ``u = 3 * 4 * w / 1e9`` per iteration; all weights: ``u = 3528 / 1e9 = 3.528e-6 s``.
Memory is ParaDL's equation (``memory_model = "paradl"``, docs/model.md §6.1), so the hand
values of the paper's terms stay as they were; one optimizer state per weight for the
training memory (§6.2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import kernels
from kernels.names import MEMORY_MODELS
from kernels.network import KINDS

DATASET_SAMPLES = 1000


def kind_codes(*names: str) -> np.ndarray:
    """Indices into :data:`kernels.KINDS` for layer kind names."""
    return np.array([KINDS.index(n) for n in names], dtype=np.int64)


def layer_arrays(kinds, x, w, y, active=None, overridden=None) -> kernels.LayerArrays:
    """A :class:`kernels.LayerArrays` from short shapes, padded with 1 to 3 spatial dimensions.

    ``active`` maps a family of :data:`kernels.ACTIVE_FAMILIES` to a per-layer flag list
    and marks that family overridden.
    """
    g = len(kinds)

    def pad(shapes, width):
        out = np.ones((g, width))
        for i, s in enumerate(shapes):
            out[i, : len(s)] = s
        return out

    act = np.zeros((len(kernels.ACTIVE_FAMILIES), g), dtype=bool)
    over = np.zeros(len(kernels.ACTIVE_FAMILIES), dtype=bool)
    for family, flags in (active or {}).items():
        f = kernels.ACTIVE_FAMILIES.index(family)
        act[f] = flags
        over[f] = True
    if overridden is not None:
        over = np.asarray(overridden, dtype=bool)
    return kernels.LayerArrays(kind_codes(*kinds), pad(x, 4), pad(w, 5), pad(y, 4), act, over)


def small_layers(active=None) -> kernels.LayerArrays:
    """conv 3x3 -> relu -> fc on a 2x4x4 input (table in the module docstring)."""
    return layer_arrays(
        ("conv", "relu", "fc"),
        x=[(2, 4, 4), (3, 4, 4), (3, 4, 4)],
        w=[(2, 3, 3, 3), (3, 3, 0, 0), (3, 5, 4, 4)],
        y=[(3, 4, 4), (3, 4, 4), (5, 1, 1)],
        active=active,
    )


def small_net_of(active=None, t_measured_s: float = 0.0, ref_rate_flops: float = 1.0) -> kernels.Net:
    """The small network, optionally with fixed active flags or a measured per-sample time."""
    return kernels.build_net(small_layers(active), DATASET_SAMPLES, t_measured_s, ref_rate_flops)


def small_machine_of(**overrides) -> kernels.Machine:
    """The small machine of the module docstring; keyword arguments replace fields as given."""
    f = np.float64
    fields = dict(
        gpu_flops=f(1e12),
        efficiency=f(1.0),
        gpu_mem_bytes=f(1e5),
        gpu_mem_bw_Bps=f(1e9),
        gpus_per_node=f(2),
        nics_per_node=f(1),
        bytes_per_element=f(4),
        wu_passes=f(3),
        intra_alpha_s=f(1e-6),
        intra_bandwidth_Bps=f(1e10),
        allreduce_algo=f(kernels.ALLREDUCE_ALGOS["ring"]),
        memory_model=f(MEMORY_MODELS["paradl"]),
        optimizer_states=f(1),
        mem_passes=f(0),
        kind_efficiency=np.ones(len(KINDS)),
        inter_span_nodes=np.array([2.0, np.inf]),
        inter_alpha_s=np.array([1e-5, 2e-5]),
        inter_bandwidth_Bps=np.array([1e9, 5e8]),
    )
    fields.update({k: (f(v) if np.ndim(v) == 0 else np.asarray(v, dtype=f)) for k, v in overrides.items()})
    return kernels.Machine(**fields)


def config(p, b, p2=2, S=None) -> kernels.Config:
    """A :class:`kernels.Config` of float64 scalars; S defaults to p (docs/model.md §2)."""
    f = np.float64
    return kernels.Config(f(p), f(b), f(p2), f(p if S is None else S))


def assert_terms(cost, rel: float = 1e-12, **expected) -> None:
    """Each named field of ``cost`` equals its expected value (relative ``rel``; 0 exactly)."""
    for name, want in expected.items():
        got = float(getattr(cost, name))
        if want == 0:
            assert got == 0, f"{name}: got {got!r}, want 0"
        else:
            assert abs(got - want) <= rel * abs(want), f"{name}: got {got!r}, want {want!r}"


def paradl_dir() -> Path | None:
    """ParaDL's example files: the copy in ``tests/data/paradl`` (so CI never skips), else the
    shared folder beside the repository (``<repo>/../shared/paradl``); None when neither exists."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "data" / "paradl", here.parent / ".." / "shared" / "paradl"):
        if (candidate / "RESNET50_ImageNet_profall.net_sc").is_file():
            return candidate
    return None


def python_on_cpu_devices(script: str, *args, devices: int = 1, **env: str) -> str:
    """Stdout of ``python -c SCRIPT ARGS`` in the repository root, on ``devices`` forced host
    CPU devices (and ``env`` set); the script must succeed."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def trust_doc() -> str:
    """The measured-runs documentation: docs/trust.md."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "trust.md").read_text()
    head = "# Trust"
    assert text.startswith(head) and "leave one model out" in text, "docs/trust.md lost its Trust page"
    return text
