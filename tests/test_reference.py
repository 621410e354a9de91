"""The plain-Python reference (:mod:`tests.oracles.reference`) agrees with the jitted kernels.

Random configurations (p in 1..4096, b in 1..256, p2 in {1, 2, 4, 8}, S in 1..64)
on ResNet-50 (the built-in ``resnet50`` and ParaDL's ``RESNET50_ImageNet_profall.net_sc``
with ``spatial_resnet.lc``) and the machines ``abci`` and ``dgx-h100``, plus abci
at efficiency 0.6 (a measured per-sample time scaled to another rate): every
term equal at relative 1e-9 and the same ``limit``. The reference also
reproduces the worked examples of docs/model.md §15.
"""

from __future__ import annotations

import math
from functools import cache

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernels
from kernels.strategies import PAPER_STRATEGIES
from tests.helpers import paradl_dir
from tests.oracles import reference

FOLDER = paradl_dir()
TERMS = ("t_comp_s", "t_allreduce_s", "t_allgather_s", "t_halo_s", "t_p2p_s", "mem_bytes", "iterations")
MODELS = ("resnet50", "paradl-resnet50")
MACHINES = ("abci", "dgx-h100", "abci@eff0.6")


@cache
def _jitted(name: str):
    return jax.jit(kernels.STRATEGIES[name])


@cache
def _model(key: str):
    from sweep.inputs.models import load_model

    if key == "resnet50":
        return load_model("resnet50")
    if FOLDER is None:
        pytest.skip("ParaDL example files not found")
    return load_model(FOLDER / "RESNET50_ImageNet_profall.net_sc", lc=FOLDER / "spatial_resnet.lc")


@cache
def _case(model_key: str, machine_key: str):
    """(net, machine, ref) of a model on a machine, built once."""
    from sweep.inputs.layers import bind
    from sweep.inputs.machines import load_machine

    profile = load_machine(machine_key.split("@")[0])
    net = bind(_model(model_key), profile.name, profile.ref_rate_flops)
    # the oracles evaluate ParaDL's memory equation (docs/model.md §6.1) and the paper's compute,
    # FLOPs over gpu_flops * efficiency (no per-kind roofline, §3)
    machine = profile.pytree(np.float64)._replace(
        memory_model=np.float64(kernels.MEMORY_MODELS["paradl"]),
        mem_passes=np.float64(0.0),
        kind_efficiency=np.ones(len(kernels.KINDS)),
    )
    if machine_key.endswith("@eff0.6"):
        machine = machine._replace(efficiency=np.float64(0.6))
    return net, machine, reference.prepare(net, machine)


def _check(name, model_key, machine_key, p, b, p2, S):
    net, machine, ref = _case(model_key, machine_key)
    f = np.float64
    cost = _jitted(name)(net, machine, kernels.Config(f(p), f(b), f(p2), f(S)))
    want = reference.evaluate(ref, name, p, b, p2, S)
    where = f"{name} {model_key} {machine_key} p={p} b={b} p2={p2} S={S}"
    for term in TERMS:
        got = float(getattr(cost, term))
        assert math.isclose(got, want[term], rel_tol=1e-9, abs_tol=0.0), (
            f"{where}: {term} kernel {got!r} reference {want[term]!r}"
        )
    assert kernels.LIMITS[int(cost.limit)] == want["limit"], where


@pytest.mark.parametrize("name", PAPER_STRATEGIES)  # §16 is pinned by tests/kernels/test_megatron.py
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model_key=st.sampled_from(MODELS),
    machine_key=st.sampled_from(MACHINES),
    p=st.integers(1, 4096),
    b=st.integers(1, 256),
    p2=st.sampled_from([1, 2, 4, 8]),
    S=st.integers(1, 64),
)
def test_reference_matches_kernel(name, model_key, machine_key, p, b, p2, S):
    _check(name, model_key, machine_key, p, b, p2, S)


@pytest.mark.parametrize("name", PAPER_STRATEGIES)  # §16 is pinned by tests/kernels/test_megatron.py
@pytest.mark.parametrize("model_key", MODELS)
@pytest.mark.parametrize("machine_key", MACHINES)
def test_reference_matches_kernel_edges(name, model_key, machine_key):
    """Fixed corners: one GPU, a node, powers of two across levels, small batches, p = G."""
    G = int(_case(model_key, machine_key)[0].n_layers)
    for p, b, p2, S in [
        (1, 1, 1, 1),
        (2, 1, 2, 2),
        (4, 32, 4, 4),
        (8, 64, 8, 8),
        (68, 16, 4, 1),
        (136, 256, 8, 64),
        (4096, 256, 8, 64),
        (G, 256, 4, 64),
        (G + 1, 256, 4, 3),
        (6, 7, 4, 8),
    ]:
        _check(name, model_key, machine_key, p, b, p2, S)


# docs/model.md §15: strategy, lc, p, b, p2, then t_comp, allreduce, allgather, halo, p2p, mem.
SECTION_8 = [
    ("data", "filter_resnet.lc", 64, 32, 4, 62.5795, 12.1259, 0, 0, 0, 7.80836e09),
    ("filter", "filter_resnet.lc", 16, 32, 4, 281.593, 9356.15, 4678.08, 0, 0, 7.65321e09),
    ("data+filter", "filter_resnet.lc", 32, 64, 4, 128.046, 202.889, 90.6316, 0, 0, 1.53107e10),
    ("pipeline", "filter_resnet.lc", 8, 64, 4, 1008.43, 0, 0, 0, 598.032, 4.62687e09),
    ("spatial", "spatial_resnet.lc", 4, 64, 4, 1028.5, 55.6416, 16.4941, 40.588, 0, 8.66536e09),
    ("data+spatial", "spatial_resnet.lc", 32, 64, 4, 128.563, 40.1937, 2.06176, 5.0735, 0, 8.66536e09),
]


@pytest.mark.skipif(FOLDER is None, reason="ParaDL example files not found")
@pytest.mark.parametrize("row", SECTION_8, ids=[row[0] for row in SECTION_8])
def test_reference_spec_section_8(row):
    from sweep.inputs.layers import bind
    from sweep.inputs.machines import load_machine
    from sweep.inputs.models import load_model

    name, lc, p, b, p2, *columns = row
    profile = load_machine("abci")
    model = load_model(FOLDER / "RESNET50_ImageNet_profall.net_sc", lc=FOLDER / lc)
    ref = reference.prepare(bind(model, "abci", profile.ref_rate_flops), profile.pytree())
    got = reference.evaluate(ref, name, p, b, p2, p)  # default S = p
    assert got["limit"] == ""
    for term, want in zip(TERMS[:6], columns, strict=True):
        assert got[term] == pytest.approx(want, rel=1e-5, abs=0), term


def test_reference_ring_only():
    net, machine, _ = _case("resnet50", "abci")
    ref = reference.prepare(net, machine._replace(allreduce_algo=np.float64(kernels.ALLREDUCE_ALGOS["tree"])))
    with pytest.raises(NotImplementedError):
        reference.evaluate(ref, "data", 8, 32, 1, 1)
