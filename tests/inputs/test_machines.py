"""Machine profiles (docs/inputs.md#machines): built-in files, validation errors, topology lookups."""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grids
from kernels.machine import first_inter_link, link, nic_share, with_params
from kernels.network import KINDS
from sweep.errors import InputError
from sweep.inputs.machines import POSITIVE, MachineProfile, builtin_names, load_machine

# float64 JAX comes from tests/conftest.py (STYLE: x64 on in tests); the exact-value checks need it.

NEW_PROFILES = ("dgx-a100", "dgx-h100", "dgx-h200")


def one_line_error(err: pytest.ExceptionInfo, *patterns: str) -> str:
    """The error's text, checked to be one line that matches every regex in ``patterns``."""
    text = str(err.value)
    assert "\n" not in text and "\r" not in text, text
    for pattern in patterns:
        assert re.search(pattern, text), f"{pattern!r} not in {text!r}"
    return text


# ---------------------------------------------------------------------------------------------
# Built-in profiles
# ---------------------------------------------------------------------------------------------


def test_builtin_names_lists_abci_and_the_dgx_profiles():
    names = builtin_names()
    assert names == sorted(names)
    assert {"abci", *NEW_PROFILES} <= set(names)


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_loads_and_is_well_formed(name):
    profile = load_machine(name)
    assert profile.name == name
    assert profile.description
    spans = profile.inter_span_nodes
    assert all(a < b for a, b in itertools.pairwise(spans))
    assert spans[-1] == math.inf
    assert len(spans) == len(profile.inter_alpha_s) == len(profile.inter_bandwidth_Bps)
    machine = profile.pytree()
    for field, value in machine._asdict().items():
        assert np.all(np.isfinite(value) | (field == "inter_span_nodes")), field
    json.dumps(profile.describe())  # Parquet metadata must be JSON-able


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_new_profiles_cite_their_sources(name):
    doc = tomllib.loads((grids.MACHINES / f"{name}.toml").read_text())
    assert doc["name"] == name
    sources = doc["sources"]
    assert isinstance(sources, list) and len(sources) >= 3
    assert all(isinstance(s, str) and s for s in sources)
    assert any("nvidia.com" in s for s in sources)


def test_abci_matches_spec_section_3():
    """Values typed from the ParaDL paper's machine (docs/model.md §8), not copied from the file."""
    profile = load_machine("abci")
    assert profile.name == "abci"
    assert profile.params == {
        "gpu_flops": 7.8e12,
        "efficiency": 1.0,  # not in the paper: the default, 1
        "gpu_mem_bytes": 16e9,
        "gpu_mem_bw_Bps": 900e9,
        "gpus_per_node": 4.0,
        "nics_per_node": 2.0,
        "bytes_per_element": 4.0,
        "wu_passes": 3.0,
        "allreduce_algo": 0.0,  # ring, the default
        "memory_model": 0.0,  # training (docs/model.md §6.2), every built-in's
        "optimizer_states": 1.0,  # not in the paper: the default, SGD with momentum
        "mem_passes": 0.0,  # the paper's compute: no memory roofline (docs/model.md §3)
        **{f"efficiency_{kind}": 1.0 for kind in KINDS},  # and no per-kind efficiency
        "intra_alpha_s": 9.0e-6,
        "intra_bandwidth_Bps": 50e9,
        "op_latency_s": 0.0,  # data+tensor+pipeline's launch cost, docs/model.md §16: unset, 0
        "eltwise_traffic": 0.0,  # and its memory-bound traffic: unset, 0
        # its GEMMs by shape (unset: off) and Megatron's scatter/gather sends (default on)
        "gpu_sms": 0.0,
        "gemm_tile_m": 128.0,
        "gemm_tile_n": 128.0,
        "scatter_gather": 1.0,
        "attention": 0.0,  # standard (a code of kernels.names.ATTENTIONS)
        "gpu_flops_fp8": 0.0,  # no FP8 peak
        "overlap_grad_reduce": 0.0,
        "gpu_flops_mxfp8": 0.0,  # no MXFP8 or NVFP4 rate
        "efficiency_linear_lowp": 0.0,  # the low-precision GEMMs at efficiency_linear
        "gpu_flops_fp4": 0.0,
        "gpu_power_w": 0.0,  # power and price not stated
        "pue": 1.0,
        "usd_per_gpu_hour": 0.0,
        "moe_imbalance": 1.0,  # no mixture of experts in the paper: balanced routing, the default
        "mem_workspace_bytes": 8 * 4 * 2**20,  # the default: cuBLAS's eight 4 MiB chunks
        "selective_recompute": 0.0,  # Megatron-LM's attention policy, the default
    }
    assert profile.inter_span_nodes == (17.0, 34.0, math.inf)
    assert profile.inter_alpha_s == (40.31e-6, 40.49e-6, 40.98e-6)
    assert profile.inter_bandwidth_Bps == (12.5e9, 12.5e9, 12.5e9)


@pytest.mark.parametrize(
    ("name", "flops", "mem_bytes", "mem_bw", "intra_bw", "nic_bw", "spans"),
    [
        # vendor figures: dense BF16 peak, HBM capacity and bandwidth, NVLink per direction, IB per port
        ("dgx-a100", 312e12, 80e9, 2.039e12, 300e9, 25e9, (20.0, 140.0, math.inf)),
        ("dgx-h100", 989e12, 80e9, 3.35e12, 450e9, 50e9, (32.0, 256.0, math.inf)),
        ("dgx-h200", 989e12, 141e9, 4.8e12, 450e9, 50e9, (32.0, 256.0, math.inf)),
    ],
)
def test_dgx_profiles_use_the_vendor_figures(name, flops, mem_bytes, mem_bw, intra_bw, nic_bw, spans):
    p = load_machine(name)
    assert p.params["gpu_flops"] == flops
    assert p.params["gpu_mem_bytes"] == mem_bytes
    assert p.params["gpu_mem_bw_Bps"] == mem_bw
    assert p.params["intra_bandwidth_Bps"] == intra_bw
    assert p.inter_bandwidth_Bps == (nic_bw,) * 3
    assert p.inter_span_nodes == spans
    assert p.params["gpus_per_node"] == 8 and p.params["nics_per_node"] == 8
    assert p.params["bytes_per_element"] == 2
    # compute is a per-kind roofline (docs/model.md §3), not one global efficiency
    assert p.params["efficiency"] == 1.0
    assert (
        0.3 <= p.params["efficiency_conv"] <= 0.7 and p.params["efficiency_fc"] == p.params["efficiency_conv"]
    )
    assert p.params["mem_passes"] == 3


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_dgx_profiles_are_physically_plausible(name):
    p = load_machine(name)
    # NVLink is faster and lower-latency than any InfiniBand level
    assert p.params["intra_bandwidth_Bps"] > max(p.inter_bandwidth_Bps)
    assert p.params["intra_alpha_s"] < min(p.inter_alpha_s)
    # deeper fat-tree levels cost more switch hops, never less
    assert all(a < b for a, b in itertools.pairwise(p.inter_alpha_s))
    # microseconds, not milliseconds or nanoseconds
    assert all(1e-6 <= a <= 20e-6 for a in (p.params["intra_alpha_s"], *p.inter_alpha_s))


def test_h200_is_an_h100_with_more_and_faster_memory():
    h100, h200 = load_machine("dgx-h100"), load_machine("dgx-h200")
    memory = {"gpu_mem_bytes", "gpu_mem_bw_Bps"}
    price = {"usd_per_gpu_hour"}  # what a GPU-hour costs is no property of the GPU
    assert {k: v for k, v in h100.params.items() if k not in memory | price} == {
        k: v for k, v in h200.params.items() if k not in memory | price
    }
    assert (h100.inter_span_nodes, h100.inter_alpha_s, h100.inter_bandwidth_Bps) == (
        h200.inter_span_nodes,
        h200.inter_alpha_s,
        h200.inter_bandwidth_Bps,
    )
    assert all(h200.params[k] > h100.params[k] for k in memory)


# ---------------------------------------------------------------------------------------------
# Bad machine files: one InputError, one line, naming the file and the key (or line)
# ---------------------------------------------------------------------------------------------

GOOD = """\
name = "toy"
gpu_flops = 1e12
efficiency = 0.5
gpu_mem_bytes = 16e9
gpu_mem_bw_Bps = 900e9
gpus_per_node = 4
nics_per_node = 2

[intra]
alpha_s = 9e-6
bandwidth_Bps = 50e9

[[inter]]
span_nodes = 17
alpha_s = 40e-6
bandwidth_Bps = 12.5e9

[[inter]]
span_nodes = 34
alpha_s = 41e-6
bandwidth_Bps = 12.5e9

[[inter]]
alpha_s = 42e-6
bandwidth_Bps = 12.5e9
"""

INTRA_TABLE = "[intra]\nalpha_s = 9e-6\nbandwidth_Bps = 50e9\n"


def edit(old: str, new: str, count: int = 1) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, count)


BAD_FILES = {
    # name: (file text, regex that must name the key)
    "zero intra bandwidth": (edit("bandwidth_Bps = 50e9", "bandwidth_Bps = 0"), r"intra[._]bandwidth_Bps"),
    "zero inter bandwidth": (
        edit("bandwidth_Bps = 12.5e9", "bandwidth_Bps = 0.0"),
        r"inter\[0\].*bandwidth_Bps",
    ),
    "negative intra latency": (edit("alpha_s = 9e-6", "alpha_s = -9e-6"), r"intra[._]alpha_s"),
    "negative inter latency": (edit("alpha_s = 41e-6", "alpha_s = -41e-6"), r"inter\[1\].*alpha_s"),
    "zero gpu_flops": (edit("gpu_flops = 1e12", "gpu_flops = 0"), r"gpu_flops"),
    "negative memory": (edit("gpu_mem_bytes = 16e9", "gpu_mem_bytes = -16e9"), r"gpu_mem_bytes"),
    "efficiency 1.5": (edit("efficiency = 0.5", "efficiency = 1.5"), r"efficiency"),
    "efficiency 0": (edit("efficiency = 0.5", "efficiency = 0"), r"efficiency"),
    "unknown key": (edit('name = "toy"\n', 'name = "toy"\ngpu_flopz = 1e12\n'), r"gpu_flopz"),
    "unknown intra key": (edit("[intra]\n", "[intra]\nlatency_s = 1e-6\n"), r"intra\.latency_s"),
    "unknown level key": (edit("span_nodes = 17\n", "span_nodes = 17\nspan = 3\n"), r"inter\[0\]\.span"),
    "missing required key": (edit("gpu_flops = 1e12\n", ""), r"gpu_flops"),
    "missing [intra]": (edit(INTRA_TABLE, ""), r"intra"),
    "missing intra bandwidth": (edit("bandwidth_Bps = 50e9\n", ""), r"intra[._]bandwidth_Bps"),
    "no inter level": (GOOD.split("[[inter]]")[0], r"inter"),
    "equal span_nodes": (edit("span_nodes = 34", "span_nodes = 17"), r"inter\[1\]\.span_nodes"),
    "decreasing span_nodes": (edit("span_nodes = 34", "span_nodes = 5"), r"inter\[1\]\.span_nodes"),
    "zero span_nodes": (edit("span_nodes = 17", "span_nodes = 0"), r"inter\[0\]\.span_nodes"),
    "fractional span_nodes": (edit("span_nodes = 17", "span_nodes = 16.5"), r"inter\[0\]\.span_nodes"),
    "span missing before last": (edit("span_nodes = 17\n", ""), r"inter\[0\]\.span_nodes"),
    "text for a number": (edit("gpus_per_node = 4", 'gpus_per_node = "four"'), r"gpus_per_node"),
    "fractional gpus_per_node": (edit("gpus_per_node = 4", "gpus_per_node = 4.5"), r"gpus_per_node"),
    "bool for a number": (edit("gpu_flops = 1e12", "gpu_flops = true"), r"gpu_flops"),
    "infinite bandwidth": (edit("bandwidth_Bps = 50e9", "bandwidth_Bps = inf"), r"intra[._]bandwidth_Bps"),
    "negative wu_passes": (edit("nics_per_node = 2", "nics_per_node = 2\nwu_passes = -1"), r"wu_passes"),
    "unknown allreduce_algo": (
        edit("nics_per_node = 2", 'nics_per_node = 2\nallreduce_algo = "x"'),
        r"allreduce_algo",
    ),
}


def test_the_good_file_loads(tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text(GOOD)
    profile = load_machine(str(path))
    assert profile.name == "toy"
    assert profile.inter_span_nodes == (17.0, 34.0, math.inf)
    assert profile.params["wu_passes"] == 3.0  # default
    assert profile.params["bytes_per_element"] == 4.0  # default


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_machine_file_is_one_line_naming_file_and_key(tmp_path, case):
    text, key = BAD_FILES[case]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_machine(str(path))
    one_line_error(err, re.escape(str(path)), key)


def test_relative_path_is_resolved_against_base(tmp_path):
    (tmp_path / "bad.toml").write_text(edit("gpu_flops = 1e12", "gpu_flops = 0"))
    with pytest.raises(InputError) as err:
        load_machine("bad.toml", base=tmp_path)
    one_line_error(err, re.escape(str(tmp_path / "bad.toml")), r"gpu_flops")


def test_malformed_toml_names_the_line(tmp_path):
    lines = GOOD.splitlines()
    lines[4] = "gpu_mem_bw_Bps = = 900e9"  # line 5 of the file
    path = tmp_path / "broken.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        load_machine(str(path))
    one_line_error(err, re.escape(str(path)), r"(line 5\b|broken\.toml:5\b)")


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.toml"
    with pytest.raises(InputError) as err:
        load_machine(str(path))
    one_line_error(err, re.escape(str(path)))


def test_unknown_name_that_is_not_a_toml_file():
    with pytest.raises(InputError) as err:
        load_machine("no-such-machine")
    one_line_error(err, r"no-such-machine", r"abci")


# ---------------------------------------------------------------------------------------------
# Overrides (--set and sweep axes)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def abci() -> MachineProfile:
    return load_machine("abci")


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"inter_bandwidth_Bps": 0}, "inter_bandwidth_Bps"),
        ({"intra_alpha_s": -1e-6}, "intra_alpha_s"),
        ({"efficiency": 1.5}, "efficiency"),
        ({"gpus_per_node": 2.5}, "gpus_per_node"),
        ({"gpu_flops": float("nan")}, "gpu_flops"),
        ({"allreduce_algo": "butterfly"}, "allreduce_algo"),
        ({"no_such_param": 1.0}, "no_such_param"),
        ({"inter_span_nodes": 8}, "inter_span_nodes"),  # levels are not a scalar parameter
    ],
)
def test_bad_override_is_one_line_naming_the_key(abci, values, key):
    with pytest.raises(InputError) as err:
        abci.with_overrides(values)
    one_line_error(err, r"^set: ", re.escape(key))
    assert err.value.param == ("set",)  # the CLI writes it --set


@given(key=st.sampled_from(sorted(POSITIVE)), value=st.floats(max_value=0.0, allow_nan=False))
@settings(deadline=None, max_examples=60)
def test_non_positive_values_of_positive_params_are_rejected(key, value):
    with pytest.raises(InputError) as err:
        load_machine("abci").with_overrides({key: value})
    one_line_error(err, re.escape(key))


def test_good_overrides_are_kept_and_do_not_touch_the_profile(abci):
    over = abci.with_overrides({"inter_alpha_s": 10e-6, "allreduce_algo": "tree"})
    assert over.overrides == {"inter_alpha_s": 10e-6, "allreduce_algo": 1.0}
    assert over.value("inter_alpha_s") == 10e-6
    assert over.value("inter_bandwidth_Bps") == 12.5e9  # first level when not overridden
    assert abci.overrides == {} and abci.value("inter_alpha_s") == 40.31e-6
    assert over.ref_rate_flops == abci.ref_rate_flops == 7.8e12


# ---------------------------------------------------------------------------------------------
# kernels.machine: link, with_params, nic_share
# ---------------------------------------------------------------------------------------------

_link = jax.jit(link)
_link_many = jax.jit(jax.vmap(link, in_axes=(None, 0, None)))


def expected_link(profile: MachineProfile, n: int, share: float = 1.0) -> tuple[float, float]:
    """docs/model.md §8 by hand: intra inside a node, else the first level spanning ceil(n/gpn) nodes."""
    gpn = profile.params["gpus_per_node"]
    if n <= gpn:
        return profile.params["intra_alpha_s"], 1.0 / profile.params["intra_bandwidth_Bps"]
    nodes = math.ceil(n / gpn)
    level = next(i for i, span in enumerate(profile.inter_span_nodes) if span >= nodes)
    return profile.inter_alpha_s[level], share / profile.inter_bandwidth_Bps[level]


INTRA = (9.0e-6, 1 / 50e9)
LEAF = (40.31e-6, 1 / 12.5e9)
RACK = (40.49e-6, 1 / 12.5e9)
ACROSS = (40.98e-6, 1 / 12.5e9)


@pytest.mark.parametrize(
    ("n", "want"),
    [
        # 4 GPUs per node: n <= 4 stays on NVLink
        (1, INTRA),
        (4, INTRA),
        # 5..68 GPUs: ceil(n/4) = 2..17 nodes <= 17, one leaf switch
        (5, LEAF),
        (8, LEAF),
        (68, LEAF),  # ceil(68/4) = 17
        # 69..136 GPUs: 18..34 nodes, one rack
        (69, RACK),  # ceil(69/4) = 18
        (136, RACK),  # ceil(136/4) = 34
        # 137 GPUs and more: 35+ nodes, across racks
        (137, ACROSS),  # ceil(137/4) = 35
        (4096, ACROSS),
    ],
)
def test_abci_link_by_group_size(abci, n, want):
    alpha, beta = _link(abci.pytree(), n, 1.0)
    assert float(alpha) == pytest.approx(want[0], rel=1e-15)
    assert float(beta) == pytest.approx(want[1], rel=1e-15)


def test_abci_link_changes_exactly_at_the_hand_computed_boundaries(abci):
    n = jnp.arange(1, 301)
    alpha = np.asarray(_link_many(abci.pytree(), n, 1.0).alpha_s)
    last_before_change = np.asarray(n)[:-1][np.diff(alpha) != 0]
    assert last_before_change.tolist() == [4, 68, 136]


@st.composite
def profile_and_group(draw) -> tuple[str, int]:
    """A built-in and a group size, often one on either side of a node or level boundary."""
    name = draw(st.sampled_from(builtin_names()))
    profile = load_machine(name)
    gpn = int(profile.params["gpus_per_node"])
    edges = [gpn] + [gpn * int(s) for s in profile.inter_span_nodes if math.isfinite(s)]
    near_edge = st.sampled_from(edges).flatmap(lambda e: st.sampled_from([e, e + 1]))
    return name, draw(st.one_of(near_edge, st.integers(min_value=1, max_value=200_000)))


@given(case=profile_and_group(), talkers=st.integers(min_value=1, max_value=16))
@settings(deadline=None, max_examples=100)
def test_link_matches_spec_for_every_builtin(case, talkers):
    name, n = case
    profile = load_machine(name)
    machine = profile.pytree()
    share = max(1.0, talkers / profile.params["nics_per_node"])
    assert float(nic_share(machine, talkers)) == share
    alpha, beta = _link(machine, n, share)
    want_alpha, want_beta = expected_link(profile, n, share)
    assert float(alpha) == pytest.approx(want_alpha, rel=1e-15)
    assert float(beta) == pytest.approx(want_beta, rel=1e-15)


def test_inter_bandwidth_override_sets_every_level(abci):
    m = with_params(abci.pytree(), inter_bandwidth_Bps=25e9)
    np.testing.assert_array_equal(m.inter_bandwidth_Bps, [25e9, 25e9, 25e9])
    np.testing.assert_array_equal(m.inter_alpha_s, [40.31e-6, 40.49e-6, 40.98e-6])  # untouched
    for n in (8, 100, 1000):
        assert float(_link(m, n, 1.0).beta_s_per_byte) == pytest.approx(1 / 25e9, rel=1e-15)


def test_inter_alpha_override_keeps_deeper_levels_extra_latency(abci):
    m = with_params(abci.pytree(), inter_alpha_s=10e-6)
    # extra latency over the leaf: rack +0.18 us, across racks +0.67 us
    np.testing.assert_allclose(m.inter_alpha_s, [10e-6, 10.18e-6, 10.67e-6], rtol=1e-12)
    np.testing.assert_array_equal(m.inter_bandwidth_Bps, [12.5e9] * 3)  # untouched
    assert float(_link(m, 100, 1.0).alpha_s) == pytest.approx(10.18e-6, rel=1e-12)


def test_overrides_are_traceable_for_vmapped_sweeps(abci):
    machine = abci.pytree()
    alphas = jax.jit(jax.vmap(lambda a: with_params(machine, inter_alpha_s=a).inter_alpha_s))(
        jnp.array([1e-6, 10e-6])
    )
    np.testing.assert_allclose(alphas, [[1e-6, 1.18e-6, 1.67e-6], [10e-6, 10.18e-6, 10.67e-6]], rtol=1e-12)
    betas = jax.vmap(lambda b: link(with_params(machine, inter_bandwidth_Bps=b), 100).beta_s_per_byte)(
        jnp.array([12.5e9, 50e9])
    )
    np.testing.assert_allclose(betas, [1 / 12.5e9, 1 / 50e9], rtol=1e-15)


def test_scalar_overrides_move_node_boundaries_and_intra_link(abci):
    m = with_params(abci.pytree(), gpus_per_node=8, intra_bandwidth_Bps=100e9)
    # 8 GPUs per node: n <= 8 intra; 17 nodes = 136 GPUs on one leaf; 137 GPUs = 18 nodes
    assert tuple(map(float, _link(m, 8, 1.0))) == pytest.approx((9e-6, 1 / 100e9), rel=1e-15)
    assert float(_link(m, 9, 1.0).alpha_s) == pytest.approx(40.31e-6, rel=1e-15)
    assert float(_link(m, 136, 1.0).alpha_s) == pytest.approx(40.31e-6, rel=1e-15)
    assert float(_link(m, 137, 1.0).alpha_s) == pytest.approx(40.49e-6, rel=1e-15)


def test_with_params_rejects_unknown_names(abci):
    with pytest.raises(KeyError):
        with_params(abci.pytree(), no_such_param=1.0)


def test_nic_share_divides_inter_bandwidth_only(abci):
    m = abci.pytree()  # 2 NICs per node
    assert [float(nic_share(m, k)) for k in (1, 2, 3, 4)] == [1.0, 1.0, 1.5, 2.0]
    # 4 GPUs of a node talking off-node at once over 2 NICs: half the bandwidth each
    assert float(_link(m, 8, nic_share(m, 4)).beta_s_per_byte) == pytest.approx(2 / 12.5e9, rel=1e-15)
    assert float(_link(m, 8, nic_share(m, 4)).alpha_s) == pytest.approx(40.31e-6, rel=1e-15)
    # the share never touches the NVLink link
    assert float(_link(m, 4, 2.0).beta_s_per_byte) == pytest.approx(1 / 50e9, rel=1e-15)
    first = first_inter_link(m, 2.0)
    assert (float(first.alpha_s), float(first.beta_s_per_byte)) == pytest.approx((40.31e-6, 2 / 12.5e9))


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_dgx_has_one_nic_per_gpu(name):
    m = load_machine(name).pytree()
    assert float(nic_share(m, 8)) == 1.0  # all 8 GPUs talking off-node: each still has its own port
    assert float(nic_share(m, 16)) == 2.0


def test_float64_is_on():
    assert load_machine("abci").pytree().gpu_flops.dtype == np.float64
    assert jnp.asarray(1.0).dtype == jnp.float64


@pytest.mark.parametrize("name", ["training", "paradl"])
def test_a_spec_sets_the_memory_model_by_name(tmp_path, name):
    """A spec's ``[set] memory_model = "paradl"`` (issue 34, defect 1: refused, as the value
    was checked twice and the second check saw its numeric code) gives the rows of the CLI's
    ``--set memory_model=paradl``."""
    import sweep

    spec = tmp_path / "memory.toml"
    spec.write_text(
        'name = "memory"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n'
        f'[axes]\np = [8]\nb = [32]\n[set]\nmemory_model = "{name}"\n'
    )
    (row,) = sweep.evaluate(str(spec), x64=True).to_pylist()
    want = sweep.estimate("resnet50", "abci", "data", p=8, b=32, set={"memory_model": name})
    assert row["mem_bytes"] == want["mem_bytes"]
    other = "paradl" if name == "training" else "training"
    assert (
        row["mem_bytes"]
        != sweep.estimate("resnet50", "abci", "data", p=8, b=32, set={"memory_model": other})["mem_bytes"]
    )
