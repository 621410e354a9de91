"""The layer-by-layer plain-Python evaluation (:mod:`tests.oracles.layerwise`) agrees with the reference.

:mod:`tests.oracles.reference` uses :func:`kernels.build_net`'s precomputed sums
and tables (spatial prefix table, filter/channel sums, pipeline memory
envelope); :mod:`tests.oracles.layerwise` adds every term up layer by layer for
each configuration, from the layer shapes. Equal terms (relative 1e-9) and
the same ``limit`` on random configurations check those tables against the
equations as docs/model.md §10 writes them. The models cover the default active
sets (ResNet-50, VGG16 with its fc layers, 3-D CosmoFlow, the tiny TOML CNN)
and ParaDL's ``.lc`` overrides; docs/model.md §15's worked examples are checked
directly.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernels
from tests.helpers import paradl_dir
from tests.oracles import layerwise, reference
from tests.test_reference import SECTION_8, TERMS  # docs/model.md §15 rows, checked on both

FOLDER = paradl_dir()
ROOT = Path(__file__).resolve().parents[1]
MODELS = (
    "resnet50",
    "vgg16",
    "cosmoflow-128",
    "tiny-cnn",
    "paradl-resnet50:spatial_resnet.lc",
    "paradl-resnet50:filter_resnet.lc",
    "paradl-resnet50:channel_resnet.lc",
)
MACHINES = ("abci", "dgx-h100", "abci@eff0.6")


@cache
def _model(key: str):
    from sweep.inputs.models import load_model

    if key == "tiny-cnn":
        return load_model(ROOT / "grids" / "models" / "tiny-cnn.toml")
    if not key.startswith("paradl-"):
        return load_model(key)
    if FOLDER is None:
        pytest.skip("ParaDL example files not found")
    return load_model(FOLDER / "RESNET50_ImageNet_profall.net_sc", lc=FOLDER / key.split(":")[1])


@cache
def _case(model_key: str, machine_key: str):
    """(reference, layerwise) of a model on a machine, built once."""
    from sweep.inputs.layers import bind, to_arrays
    from sweep.inputs.machines import load_machine

    model = _model(model_key)
    profile = load_machine(machine_key.split("@")[0])
    # the oracles evaluate ParaDL's memory equation (docs/model.md §6.1) and the paper's compute,
    # FLOPs over gpu_flops * efficiency (no per-kind roofline, §3)
    machine = profile.pytree(np.float64)._replace(
        memory_model=np.float64(kernels.MEMORY_MODELS["paradl"]),
        mem_passes=np.float64(0.0),
        kind_efficiency=np.ones(len(kernels.KINDS)),
    )
    if machine_key.endswith("@eff0.6"):
        machine = machine._replace(efficiency=np.float64(0.6))
    net = bind(model, profile.name, profile.ref_rate_flops)
    layers = layerwise.prepare(
        to_arrays(model), model.dataset_samples, machine, float(net.t_measured_s), float(net.ref_rate_flops)
    )
    return reference.prepare(net, machine), layers


def _check(name, model_key, machine_key, p, b, p2, S):
    ref, layers = _case(model_key, machine_key)
    want = reference.evaluate(ref, name, p, b, p2, S)
    got = layerwise.evaluate(layers, name, p, b, p2, S)
    where = f"{name} {model_key} {machine_key} p={p} b={b} p2={p2} S={S}"
    for term in TERMS:
        assert math.isclose(got[term], want[term], rel_tol=1e-9, abs_tol=0.0), (
            f"{where}: {term} layerwise {got[term]!r} reference {want[term]!r}"
        )
    assert got["limit"] == want["limit"], where


@pytest.mark.parametrize("name", list(layerwise.STRATEGIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model_key=st.sampled_from(MODELS),
    machine_key=st.sampled_from(MACHINES),
    p=st.integers(1, 4096),
    b=st.integers(1, 256),
    p2=st.sampled_from([1, 2, 4, 8, 16]),
    S=st.integers(1, 64),
)
def test_layerwise_matches_reference(name, model_key, machine_key, p, b, p2, S):
    _check(name, model_key, machine_key, p, b, p2, S)


@pytest.mark.parametrize("name", list(layerwise.STRATEGIES))
@pytest.mark.parametrize("model_key", MODELS)
def test_layerwise_matches_reference_edges(name, model_key):
    """Fixed corners: one GPU, a node, spatial groups at and past layer extents, p = G and G + 1."""
    G = len(_case(model_key, "abci")[1].layers)
    for p, b, p2, S in [
        (1, 1, 1, 1),
        (2, 1, 2, 2),
        (4, 32, 4, 4),
        (7, 64, 7, 8),
        (56, 16, 56, 1),
        (57, 16, 57, 2),
        (224, 256, 8, 64),
        (G, 256, 4, 64),
        (G + 1, 256, 4, 3),
        (6, 7, 4, 8),
    ]:
        _check(name, model_key, "abci", p, b, p2, S)


@pytest.mark.skipif(FOLDER is None, reason="ParaDL example files not found")
@pytest.mark.parametrize("row", SECTION_8, ids=[row[0] for row in SECTION_8])
def test_layerwise_spec_section_8(row):
    name, lc, p, b, p2, *columns = row
    _, layers = _case(f"paradl-resnet50:{lc}", "abci")
    got = layerwise.evaluate(layers, name, p, b, p2, p)  # default S = p
    assert got["limit"] == ""
    for term, want in zip(TERMS[:6], columns, strict=True):
        assert got[term] == pytest.approx(want, rel=1e-5, abs=0), term


def test_layerwise_unknown_strategy():
    _, layers = _case("tiny-cnn", "abci")
    with pytest.raises(ValueError, match="unknown strategy 'hybrid'"):
        layerwise.evaluate(layers, "hybrid", 4, 8)


@st.composite
def _networks(draw):
    """Random small networks as :class:`kernels.LayerArrays`: any kinds, shapes and active overrides.

    Shapes need not chain (nothing in the equations needs them to), so the
    largest output, halo or extent may sit anywhere, the last layer included.
    """
    from kernels import ACTIVE_FAMILIES, KINDS, LayerArrays

    g = draw(st.integers(1, 9))
    dim = st.integers(1, 64)
    # the oracle's (CNN) kinds; the transformer kinds are checked in tests/kernels/test_megatron.py
    cnn = KINDS[: KINDS.index("dropout") + 1]
    kind = np.array([KINDS.index(draw(st.sampled_from(cnn))) for _ in range(g)], dtype=np.int64)
    x, w, y = np.ones((g, 4)), np.ones((g, 5)), np.ones((g, 4))
    for i in range(g):
        name = KINDS[kind[i]]
        c, f, k = draw(dim), draw(dim), draw(st.sampled_from([1, 2, 3, 5, 7]))
        x[i, :3] = (c, draw(dim), draw(dim))
        y[i, :3] = (f if name in ("conv", "fc") else c, draw(dim), draw(dim))
        if name == "conv":
            w[i, :4] = (c, f, k, k)
        elif name == "fc":
            w[i, :2] = (c, f)
            y[i, 1:] = 1
        elif name.startswith("pool"):
            w[i, :4] = (0, 0, k, k)
        else:
            w[i, :4] = (c, c, 0, 0)
    overridden = np.array([draw(st.booleans()) for _ in ACTIVE_FAMILIES])
    active = np.array([[draw(st.booleans()) for _ in range(g)] for _ in ACTIVE_FAMILIES])
    return LayerArrays(kind, x, w, y, active, overridden)


@settings(max_examples=300, deadline=None)
@given(
    arrays=_networks(),
    samples=st.integers(1, 10**6),
    measured=st.sampled_from([0.0, 1e-3]),
    name=st.sampled_from(list(layerwise.STRATEGIES)),
    p=st.integers(1, 80),
    b=st.integers(1, 64),
    p2=st.sampled_from([1, 2, 4, 8]),
    S=st.integers(1, 16),
)
def test_layerwise_matches_reference_on_random_networks(arrays, samples, measured, name, p, b, p2, S):
    """build_net's sums and tables equal the per-layer sums on any network, not just the shipped ones."""
    from kernels import build_net
    from sweep.inputs.machines import load_machine

    profile = load_machine("abci")
    machine = profile.pytree(np.float64)
    rate = profile.ref_rate_flops if measured else 1.0
    ref = reference.prepare(build_net(arrays, samples, measured, rate), machine)
    layers = layerwise.prepare(arrays, samples, machine, measured, rate)
    want = reference.evaluate(ref, name, p, b, p2, S)
    got = layerwise.evaluate(layers, name, p, b, p2, S)
    for term in TERMS:
        assert math.isclose(got[term], want[term], rel_tol=1e-9, abs_tol=1e-300), (term, got, want)
    assert got["limit"] == want["limit"], (got, want)
