"""The machine-parameter records (kernels/params.py) and what the built-in profiles state by them
(docs/inputs.md#machines, docs/model.md §8).

Regenerate the two documentation tables from the records with
``PYTHONPATH=. python -m tests.inputs.test_profiles --write``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import sweep
from kernels import collectives
from kernels.machine import Machine
from kernels.names import MACHINE_CHOICES, PARAMS, SCALAR_PARAMS
from kernels.params import CHOICE, CONTINUOUS, SWITCH, WHOLE
from sweep.answers import sensitivity
from sweep.answers.codesign import NOT_CONTINUOUS, REFUSED
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machines import OPTIONAL_KEYS, builtin_names, check_param, load_machine
from sweep.inputs.models import load_model

DOCS = Path(__file__).resolve().parents[2] / "docs"

# ---------------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------------


def test_every_parameter_has_one_complete_record():
    assert tuple(PARAMS) == SCALAR_PARAMS
    for name, p in PARAMS.items():
        assert p.name == name and p.help and p.kind in (CONTINUOUS, WHOLE, SWITCH, CHOICE)
        assert (p.kind == CHOICE) == bool(p.choices), name
        if p.kind in (CONTINUOUS, WHOLE):
            assert p.unit, f"{name} has no unit"
        if p.default is not None:  # a default is itself legal
            assert check_param(name, p.default, "record", warn=False) == p.default


def test_machine_defaults_and_choices_come_from_the_records():
    for name, default in Machine._field_defaults.items():
        assert default == PARAMS[name].default, name
    assert MACHINE_CHOICES == {"allreduce_algo": ("ring", "tree", "auto", "hierarchical"),
                               "memory_model": ("training", "paradl"),
                               "attention": ("standard", "flash"),
                               "selective_recompute": ("attention", "op")}  # fmt: skip
    assert PARAMS["allreduce_algo"].codes == collectives.ALLREDUCE_ALGOS


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("gpu_flops", 0, r"must be > 0, got 0"),
        ("wu_passes", -1, r"must be >= 0, got -1"),
        ("efficiency_linear", 1.5, r"must be in \(0, 1\], got 1.5"),
        ("scatter_gather", 0.5, r"must be 0 or 1, got 0.5"),
        ("gpu_sms", 107.5, r"must be a whole number, got 107.5"),
        ("attention", "fused", r"must be one of standard, flash"),
        ("overlap_grad_reduce", True, r"must be a number"),
    ],
)
def test_check_param_follows_the_record(name, value, message):
    with pytest.raises(InputError, match=message):
        check_param(name, value, "f.toml")


def test_a_sweep_tries_a_switch_at_0_and_1_and_a_choice_at_each_code():
    assert PARAMS["scatter_gather"].values == (0.0, 1.0)
    assert PARAMS["allreduce_algo"].values == (0.0, 1.0, 2.0, 3.0)
    assert PARAMS["gpu_sms"].values is None and PARAMS["gpu_flops"].values is None  # any value in bounds


def test_choices_take_a_name_or_its_code():
    assert check_param("attention", "flash", "f") == 1.0 == check_param("attention", 1, "f")
    assert check_param("allreduce_algo", "hierarchical", "f") == 3.0


# ---------------------------------------------------------------------------------------------
# Co-design and sensitivity vary continuous parameters only
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("param", "kind"),
    [
        ("attention", r"a choice \(standard, flash\)"),
        ("scatter_gather", r"a switch \(0 or 1\)"),
        ("overlap_grad_reduce", r"a switch \(0 or 1\)"),
    ],
)
def test_codesign_refuses_a_switch_or_a_choice(param, kind):
    """Before, ``attention`` was answered over [0, 1] and ``scatter_gather`` over [1/64, 64]. A
    whole number (``gpu_sms``, ``gpus_per_node``) is answered on its whole numbers
    (tests/answers/test_codesign_nvl72.py)."""
    with pytest.raises(InputError) as err:
        sweep.codesign("gpt3-1.3b", "selene", "data+tensor+pipeline", param, p=8, B=8, target="t_iter_s <= 1")
    text = str(err.value)
    assert "\n" not in text and re.search(
        rf"^param {param} is {kind}: co-design varies a number over a range", text
    )
    assert err.value.param == ("param",)


def test_codesign_and_sensitivity_vary_exactly_the_continuous_parameters():
    """Sensitivity differentiates the continuous parameters only; co-design also answers on a
    whole number's whole numbers and refuses exactly the switches and choices."""
    fixed = {n for n, p in PARAMS.items() if p.kind != CONTINUOUS}
    assert set(NOT_CONTINUOUS) == fixed == set(sensitivity.SKIPPED)
    assert set(REFUSED) == {n for n, p in PARAMS.items() if p.kind in (SWITCH, CHOICE)}
    assert set(sensitivity.PARAMS) == set(SCALAR_PARAMS) - fixed
    assert {"attention", "scatter_gather", "overlap_grad_reduce", "gpu_sms"} <= fixed


# ---------------------------------------------------------------------------------------------
# Profiles state what a model family needs
# ---------------------------------------------------------------------------------------------

GPT_NEEDS = {n for n, p in PARAMS.items() if "transformer" in p.needed_by}


def test_gpt_needs_the_gemm_by_shape_parameters_and_cnns_need_none():
    assert {"gpu_sms", "gemm_tile_m", "gemm_tile_n", "efficiency_linear", "efficiency_attention",
            "op_latency_s", "eltwise_traffic", "attention", "gpu_flops_fp8"} <= GPT_NEEDS  # fmt: skip
    assert set(OPTIONAL_KEYS) >= GPT_NEEDS
    assert not any("cnn" in p.needed_by for p in PARAMS.values())


def test_a_profile_without_them_refuses_gpt_models_in_one_line_but_runs_cnns():
    abci = load_machine("abci")  # the ParaDL paper's V100 machine: no GEMM rate by shape
    with pytest.raises(InputError) as err:
        Bound.of(load_model("gpt3-1.3b"), abci)
    text = str(err.value)
    assert "\n" not in text and err.value.param == ("machine",)
    assert "cannot run transformer model 'gpt3-1.3b'" in text and "gpu_sms" in text
    Bound.of(load_model("resnet50"), abci)  # CNNs need none of them
    # stating them, here by override, lets it through
    Bound.of(load_model("gpt3-1.3b"), abci.with_overrides({n: PARAMS[n].default for n in GPT_NEEDS}))


def test_every_builtin_profile_states_what_each_family_it_accepts_needs():
    for name in builtin_names():
        profile = load_machine(name)
        assert profile.unstated("transformer") in ((), tuple(sorted(GPT_NEEDS, key=SCALAR_PARAMS.index))), (
            name
        )
    assert load_machine("abci").unstated("transformer")  # V100: refuses GPT models


def test_base_supplies_what_a_profile_does_not_give(tmp_path):
    (tmp_path / "mine.toml").write_text('name = "mine"\nbase = "dgx-a100"\ngpu_mem_bytes = 40e9\n')
    mine = load_machine(tmp_path / "mine.toml")
    a100 = load_machine("dgx-a100")
    assert mine.params == {**a100.params, "gpu_mem_bytes": 40e9}
    assert mine.inter_alpha_s == a100.inter_alpha_s and mine.stated == a100.stated
    (tmp_path / "child.toml").write_text('base = "mine.toml"\nwu_passes = 2\n')
    child = load_machine(tmp_path / "child.toml")
    assert child.params["gpu_mem_bytes"] == 40e9 and child.params["wu_passes"] == 2
    (tmp_path / "a.toml").write_text('base = "b.toml"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    with pytest.raises(InputError, match="inherit in a circle"):
        load_machine(tmp_path / "a.toml")
    (tmp_path / "c.toml").write_text('base = "nowhere"\n')
    with pytest.raises(InputError, match="no machine 'nowhere'"):
        load_machine(tmp_path / "c.toml")


#: One GPT split (GPT-3 175B on 1,024 GPUs, Megatron-LM's layout of Narayanan et al. SC'21).
SPLIT = dict(p=1024, global_batch=1536, micro_batch=1, tp=4, pp=8, vp=4, sp=1, recompute="selective", zero=1)
#: The reference profile of each GPU, by its dense BF16 peak: the A100's Selene (checked against
#: Megatron-LM's published runs), the H100's dgx-h100 (the H200 is the same die).
REFERENCE = {312e12: "selene", 989e12: "dgx-h100"}


@pytest.fixture(scope="module")
def mfu():
    cache: dict[str, float] = {}

    def of(name: str) -> float:
        if name not in cache:
            cache[name] = sweep.estimate("gpt3-175b", name, "data+tensor+pipeline", **SPLIT)["mfu"]
        return cache[name]

    return of


@pytest.mark.parametrize("name", builtin_names())
def test_each_a100_h100_h200_profile_agrees_with_its_reference_on_one_gpt_split(name, mfu):
    """Within 15 % MFU of the same GPU's reference profile. dgx-a100 without its GEMM rate by
    shape gave 0.83 against selene's 0.56 (+49 %): every GEMM at 100 % of peak."""
    gpu_flops = load_machine(name).params["gpu_flops"]
    if gpu_flops not in REFERENCE:
        pytest.skip(f"{name}: no A100, H100 or H200")
    mine, ref = mfu(name), mfu(REFERENCE[gpu_flops])
    assert 0.2 < ref < 0.7  # a plausible Megatron-LM MFU, so the comparison means something
    assert abs(mine / ref - 1) <= 0.15, (name, mine, REFERENCE[gpu_flops], ref)


# ---------------------------------------------------------------------------------------------
# The documentation's tables are the records'
# ---------------------------------------------------------------------------------------------


def _default(p) -> str:
    if p.default is None:
        return "required"
    if p.kind == CHOICE:
        return f'`"{p.choices[int(p.default)]}"`'
    return f"`{p.default:g}`"


def inputs_table() -> str:
    """docs/inputs.md's table of machine-file keys."""
    rows = [
        "| key | unit | kind | default | legal | GPT needs it | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in PARAMS.values():
        gpt = "yes" if "transformer" in p.needed_by else ""
        rows.append(
            f"| `{p.key}` | {p.unit} | {p.kind} | {_default(p)} | {p.bounds_text()} | {gpt} | {p.help} |"
        )
    return "\n".join(rows)


def model_table() -> str:
    """docs/model.md §8's table: each parameter's unit and how co-design and sensitivity vary it."""
    rows = ["| parameter | unit | kind | co-design, sensitivity |", "|---|---|---|---|"]
    for p in PARAMS.values():
        varied = "a range; elasticity" if p.varied else f"refused; skipped ({p.fixed_why})"
        if p.kind == WHOLE:
            varied = f"its whole numbers in a range; skipped ({p.fixed_why})"
        rows.append(f"| `{p.name}` | {p.unit} | {p.kind} | {varied} |")
    return "\n".join(rows)


TABLES = {"inputs.md": ("machine-keys", inputs_table), "model.md": ("machine-params", model_table)}


def _block(text: str, marker: str) -> str:
    match = re.search(rf"<!-- {marker}:begin -->\n(.*?)\n<!-- {marker}:end -->", text, re.S)
    assert match, f"no {marker} block"
    return match.group(1)


@pytest.mark.parametrize("doc", sorted(TABLES))
def test_the_docs_list_every_parameter_with_its_unit_as_the_records_say(doc):
    marker, table = TABLES[doc]
    block = _block((DOCS / doc).read_text(), marker)
    assert block == table(), f"regenerate: python -m tests.inputs.test_profiles --write ({doc})"
    for p in PARAMS.values():
        assert re.search(
            rf"\| `{re.escape(p.key if doc == 'inputs.md' else p.name)}` \| {re.escape(p.unit)} \|", block
        )


def _write() -> None:
    for doc, (marker, table) in TABLES.items():
        path = DOCS / doc
        begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
        text = path.read_text()
        head, rest = text.split(begin, 1)
        path.write_text(head + begin + table() + "\n" + end + rest.split(end, 1)[1])


# ---------------------------------------------------------------------------------------------
# Blackwell profiles and precisions, by hand from the datasheets
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "bf16", "fp8", "fp4", "mem", "bw", "nvlink", "per_node", "watts"),
    [
        # DGX B200: 72 PFLOPS FP8 sparse / 8 GPUs / 2 = 4.5 dense; BF16 half of it; FP4 72 dense / 8;
        # 1,440 GB and 64 TB/s HBM3e / 8; NVLink5 1.8 TB/s total = 900 GB/s each way; 1,000 W
        ("dgx-b200", 2.25e15, 4.5e15, 9e15, 180e9, 8e12, 900e9, 8, 1000),
        # GB200 NVL72 rack: 360 / 720 / 1,440 PFLOPS sparse BF16 / FP8 / FP4, 13.4 TB, 576 TB/s,
        # 130 TB/s NVLink, each / 72 GPUs (and / 2 for dense); one NVLink domain of 72; 1,200 W
        ("gb200-nvl72", 360e15 / 72 / 2, 720e15 / 72 / 2, 1440e15 / 72 / 2, 186e9, 576e12 / 72, 130e12 / 72 / 2, 72, 1200),
    ],
)  # fmt: skip
def test_blackwell_profiles_give_the_datasheet_rates(name, bf16, fp8, fp4, mem, bw, nvlink, per_node, watts):
    params = load_machine(name).params
    assert params["gpu_flops"] == pytest.approx(bf16, rel=1e-12)
    assert params["gpu_flops_fp8"] == pytest.approx(fp8, rel=1e-12)
    assert params["gpu_flops_mxfp8"] == pytest.approx(fp8, rel=1e-12)  # MX formats at the FP8 rate
    assert params["gpu_flops_fp4"] == pytest.approx(fp4, rel=1e-12)
    assert params["gpu_mem_bytes"] == pytest.approx(mem, rel=0.01)  # 13.4 TB / 72 = 186.1 GB
    assert params["gpu_mem_bw_Bps"] == pytest.approx(bw, rel=1e-12)
    assert load_machine(name).pytree().intra_bandwidth_Bps == pytest.approx(nvlink, rel=0.01)
    assert params["gpus_per_node"] == per_node
    assert params["gpu_power_w"] == watts


def test_grand_teton_is_the_torchtitan_h100():
    """96 GB HBM2e at 2.4 TB/s and a 500 W cap (measurements README, torchtitan's paper); the
    rest an H100's (dgx-h100, its base); 1:7 oversubscription above a 3,072-GPU pod."""
    profile = load_machine("grand-teton-h100")
    assert (profile.params["gpu_mem_bytes"], profile.params["gpu_mem_bw_Bps"]) == (96e9, 2.4e12)
    assert profile.params["gpu_power_w"] == 500
    assert profile.params["gpu_flops"] == load_machine("dgx-h100").params["gpu_flops"]
    assert profile.inter_span_nodes[:2] == (2.0, 384.0)  # 16 GPUs a rack, 3,072 a pod
    assert profile.inter_bandwidth_Bps[-1] == pytest.approx(50e9 / 7)


def test_a_precision_the_gpu_has_no_rate_for_is_refused_in_one_line():
    """mxfp8 and nvfp4 need Blackwell's block-scaled rates: an H100 refuses them (rule precision)."""
    with pytest.raises(
        InputError, match=r"precision nvfp4 needs a GPU with an NVFP4 rate .*gpu_flops_fp4 is 0"
    ):
        sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", precision="nvfp4", **SPLIT)
    with pytest.raises(InputError, match=r"precision mxfp8 .*gpu_flops_mxfp8 is 0"):
        sweep.estimate("gpt3-175b", "selene", "data+tensor+pipeline", precision="mxfp8", **SPLIT)


def test_fp8_gemms_at_their_own_fraction_of_the_fp8_peak():
    """dgx-h100's linear GEMMs in FP8 at efficiency_linear_lowp = 0.70 of 1,979 TFLOP/s instead
    of 0.77 of it: the FP8 run is slower than with the BF16 fraction, and unset (0) gives the
    BF16 fraction, the same as stating 0.77."""
    fp8 = dict(SPLIT, precision="fp8")
    own = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", **fp8)["t_iter_s"]
    unset = sweep.estimate(
        "gpt3-175b", "dgx-h100", "data+tensor+pipeline", set={"efficiency_linear_lowp": 0}, **fp8
    )["t_iter_s"]
    same = sweep.estimate(
        "gpt3-175b", "dgx-h100", "data+tensor+pipeline", set={"efficiency_linear_lowp": 0.77}, **fp8
    )["t_iter_s"]
    assert unset == pytest.approx(same, rel=1e-12)
    # the linear GEMMs take 0.77 / 0.70 = 1.1 times as long; they are most of the iteration
    assert 1.03 < own / unset < 0.77 / 0.70
    bf16 = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", **SPLIT)["t_iter_s"]
    assert 1.0 < bf16 / own < 2.0


def test_energy_and_cost_of_a_run_by_hand():
    """energy_kwh = gpu_power_w x p x t_epoch_s x pue / 3.6e6, cost_usd = gpu_hours x price;
    dgx-h100: 700 W, PUE 1 (the default), $98.32 / 8 = $12.29 per GPU-hour."""
    row = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", **SPLIT)
    assert row["gpu_hours"] == pytest.approx(1024 * row["t_epoch_s"] / 3600, rel=1e-12)
    assert row["energy_kwh"] == pytest.approx(700 * 1024 * row["t_epoch_s"] * 1.0 / 3.6e6, rel=1e-12)
    assert row["cost_usd"] == pytest.approx(row["gpu_hours"] * 12.29, rel=1e-12)
    pue = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", set={"pue": 1.5}, **SPLIT)
    assert pue["energy_kwh"] == pytest.approx(1.5 * row["energy_kwh"], rel=1e-12)
    # a profile that states no power or price: empty, not 0
    none = sweep.estimate("gpt3-175b", "selene", "data+tensor+pipeline", **SPLIT)
    assert none["energy_kwh"] is None and none["cost_usd"] is None


if __name__ == "__main__" and "--write" in sys.argv:
    _write()
