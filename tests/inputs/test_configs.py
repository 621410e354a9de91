"""sweep.inputs.configs: configurations read from the strategy registry. An own axis of an entry
is a spec axis, an API keyword, a CLI option, a measured-file column and an output column with
no other edit; the batch as users set it; rows that cannot exist."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kernels.strategies.registry import OWN_AXES, REGISTRY
from kernels.strategies.registry import values as registry_values
from kernels.terms import Config
from sweep.cli.main import cli
from sweep.cli.options import flag, flagged
from sweep.errors import InputError
from sweep.inputs.configs import CONFIG_AXES, NO_OWN, Bound, Own, batch_from, impossible, resolve, uses, whole
from sweep.inputs.grid import parse_spec, plan
from sweep.inputs.machines import load_machine
from sweep.inputs.measured import OPTIONAL, read_measurements
from sweep.inputs.models import load_model

GPT = "gpt-l2-h64-a4-s32-v100"  # 2 blocks, 4 heads


def test_the_record_is_the_kernels_config():
    """Own carries every own axis of the registry, in Config's order, at the axes' defaults."""
    assert Own._fields == Config._fields[4:] == tuple(OWN_AXES)
    assert tuple(a.default for a in OWN_AXES.values()) == NO_OWN


@pytest.mark.parametrize("name", list(OWN_AXES))
def test_every_own_axis_reaches_every_input(name):
    """Spec axis, CLI option of estimate, measured-file column, output column of a plan with
    the strategy: all from the registry entry."""
    axis = OWN_AXES[name]
    owner = next(s for s in REGISTRY.values() if any(a.name == name for a in s.own))
    assert name in CONFIG_AXES and name in OPTIONAL and uses(owner.name, name)
    option = next(o for o in cli.commands["estimate"].params if o.name == name)
    assert option.opts == [flag(name)]
    value = axis.choices[-1] if axis.choices else axis.default
    doc = {"model": GPT, "machine": "a100-ib800", "strategies": [owner.name, "data"]}
    spec = parse_spec({**doc, "axes": {"p": [8], "b": [8], name: [value]}}, "s.toml", Path("."))
    jobs = plan(spec).jobs
    assert all(name in job.extra_columns for job in jobs)
    assert name in jobs[0].axes and name not in jobs[1].axes  # only the owner multiplies by it


def test_an_axis_no_strategy_uses_is_an_error():
    doc = {"model": "resnet50", "machine": "abci", "strategies": ["data", "filter"]}
    for axis in ("tp", "p2", "S", "micro_batch", "precision"):
        with pytest.raises(
            InputError, match=rf"s.toml: key 'axes.{axis}': no strategy of the spec uses axis"
        ):
            parse_spec({**doc, "axes": {"p": [8], "b": [8], axis: [1]}}, "s.toml", Path("."))


def test_both_forms_of_a_batch_are_an_error():
    doc = {"model": GPT, "machine": "a100-ib800", "strategies": ["data+tensor+pipeline"]}
    for axes, message in (
        ({"p": [8], "b": [8], "global_batch": [64]}, "give axis 'b' or 'global_batch', not both"),
        ({"p": [8], "b": [8], "S": [1], "micro_batch": [1]}, "give axis 'S' or 'micro_batch', not both"),
        ({"p": [8]}, "missing axis 'b'"),
    ):
        with pytest.raises(InputError, match=message):
            parse_spec({**doc, "axes": axes}, "s.toml", Path("."))


def test_categorical_axes_by_name_in_a_spec():
    doc = {"model": GPT, "machine": "a100-ib800", "strategies": ["data+tensor+pipeline"]}
    axes = {"p": [8], "b": [8], "recompute": ["full", "none"], "precision": ["fp8"]}
    spec = parse_spec({**doc, "axes": axes}, "s.toml", Path("."))
    assert list(spec.axes["recompute"]) == [2, 0] and list(spec.axes["precision"]) == [1]
    with pytest.raises(InputError, match="precision must be one of bf16, fp8, mxfp8, nvfp4, got 'fp4'"):
        parse_spec({**doc, "axes": {**axes, "precision": ["fp4"]}}, "s.toml", Path("."))


@pytest.mark.parametrize(
    ("value", "ok"),
    [(8, True), (8.0, True), (8.5, False), ("8", False), (True, False), (0, False), (None, False)],
)
def test_whole(value, ok):
    if ok:
        assert whole("p", value) == 8
    else:
        with pytest.raises(InputError, match="p must be a whole number >= 1") as err:
            whole("p", value)
        assert err.value.param == ("p",)


def test_batch_from():
    # p1 = 4: global batch 24 gives b = 6, micro-batch 2 gives S = 3
    assert batch_from(4, None, None, 24, 2) == (6, 3, True)
    assert batch_from(4, None, None, 26, None)[2] is False  # 6.5
    assert batch_from(8, None, None, 4, None)[2] is False  # b = 0.5 < 1
    assert batch_from(4, 6, 1, None, 4)[2] is False  # S = 1.5
    assert batch_from(4, 6, 1, None, None) == (6, 1, True)


def test_resolve_the_batch_as_users_set_it():
    profile = load_machine("a100-ib800")
    # data+tensor+pipeline p = 16, tp = pp = 2: p1 = 4; 1536 / 4 = 384; S = 384 / 4 = 96
    r = resolve(profile, "data+tensor+pipeline", 16, global_batch=1536, micro_batch=4, own={"tp": 2, "pp": 2})
    assert (r.p, r.b, r.p2, r.S, r.p1, r.B, r.fits) == (16, 384, 4, 96, 4, 1536, True)
    assert r.config == (
        16,
        384,
        profile.value("gpus_per_node"),
        96,
        2,
        2,
        0,
        0,
        1,
        0,
        0,
        1,
        0,
        1,
        1,
        1,
    )  # cp = ep = etp = 1
    assert not resolve(profile, "data+tensor+pipeline", 16, global_batch=1538, own={"tp": 2, "pp": 2}).fits
    with pytest.raises(InputError) as err:
        resolve(profile, "data", 16, 8, global_batch=128)
    assert err.value.param == ("b", "global_batch")


def test_the_cli_writes_flags_for_parameters():
    assert flag("global_batch") == "--global-batch" and flag("S") == "--S"
    assert flagged("p2 3 must divide p 8: data+filter runs p/p2 groups", ("p2", "p")) == (
        "--p2 3 must divide --p 8: data+filter runs p/p2 groups"
    )
    runner = CliRunner()
    args = ["estimate", "--model", "resnet50", "--machine", "abci", "--strategy", "data", "--p", "8"]
    result = runner.invoke(cli, [*args, "--b", "32", "--global-batch", "256"])
    assert result.exit_code == 2 and result.stderr == "error: give --b or --global-batch, not both\n"
    result = runner.invoke(cli, [*args, "--b", "0"])
    assert result.exit_code == 2 and result.stderr == "error: --b must be a whole number >= 1, got 0\n"


def test_rows_that_cannot_exist():
    """The registry's rules of data+tensor+pipeline on a GPT of 4 heads and 2 blocks, each message
    naming its limit reason (docs/model.md §2)."""
    net = Bound.of(load_model(GPT), load_machine("a100-ib800")).net
    own = NO_OWN._replace
    s = "data+tensor+pipeline"
    assert impossible(s, net, 8, 8, 1, own(tp=2, pp=2)) is None
    assert impossible(s, net, 6, 8, 1, own(tp=2, pp=2)) == "tp x pp = 4 does not divide p 6 (divides)"
    assert (
        impossible(s, net, 24, 8, 1, own(tp=3))
        == "tp 3 does not divide the model's 4 key/value heads (heads)"
    )
    assert impossible(s, net, 64, 8, 1, own(pp=64)) == "pp 64 is more than the model's 2 blocks (max_p)"
    # issue 34, defect 6: stages are whole blocks, so 2 blocks allow pp <= 2 (not one per layer entry)
    assert impossible(s, net, 2, 8, 2, own(pp=2)) is None
    assert impossible(s, net, 3, 9, 3, own(pp=3)) == "pp 3 is more than the model's 2 blocks (max_p)"
    # interleaving: every one of the pp x vp chunks holds a layer of the 2 blocks, the embedding
    # or the loss (Megatron-Core's pipeline layout): 2 x 2 = 4 chunks place 4 layers; 2 x 3 = 6
    # chunks are more than the 4
    assert impossible(s, net, 2, 8, 2, own(pp=2, vp=2)) is None
    assert impossible(s, net, 2, 8, 2, own(pp=2, vp=3)) == (
        "pp x vp = 6 model chunks are more than the model's 2 blocks with the embedding and the loss (max_p)"
    )
    # issue 38, defect 7: vp > 1 without pipeline stages is refused (Megatron-LM refuses it)
    assert impossible(s, net, 1, 8, 1, own(pp=1, vp=2)).endswith("(schedule)")
    assert impossible(s, net, 8, 8, 3, NO_OWN) == "S 3 micro-batches do not divide b 8 (batch)"
    assert impossible("data", net, 6, 8, 1, NO_OWN) is None  # data has no tp, pp nor S


def test_the_precision_rule_reads_the_machine():
    """fp8 on a GPU without an FP8 rate breaks the precision rule; without a machine it holds."""
    bound = Bound.of(load_model(GPT), load_machine("a100-ib800"))
    entry = REGISTRY["data+tensor+pipeline"]
    cfg = {"p": 8, "b": 8, "S": 1, "tp": 2, "precision": 1}
    assert float(bound.profile.value("gpu_flops_fp8")) == 0  # an A100: no FP8 rate
    machine = bound.profile.pytree(np.float64)
    assert entry.check(bound.net, cfg, machine) == (
        "precision fp8 needs a GPU with an FP8 rate (the machine's gpu_flops_fp8 is 0) (precision)"
    )
    assert entry.broken(bound.net, cfg, machine).rule.params == ("precision",)
    assert entry.check(bound.net, cfg) is None


def test_legal_values_of_an_axis():
    """legal(net, p, axis): tp dividing the 4 heads and p; pp up to the 2 blocks and dividing p;
    every recomputation mode; an axis not searched (vp) its default."""
    net = Bound.of(load_model(GPT), load_machine("a100-ib800")).net
    entry = REGISTRY["data+tensor+pipeline"]
    assert entry.legal(net, 8, "tp") == (1, 2, 4)
    assert entry.legal(net, 6, "tp") == (1, 2)
    assert entry.legal(net, 8, "pp") == (1, 2)
    assert entry.legal(net, 3, "pp") == (1,)
    assert entry.legal(net, 8, "recompute") == (0, 1, 2)
    assert entry.legal(net, 8, "zero") == (0, 1)  # ZeRO-2/3 where a question lists them
    assert entry.legal(net, 8, "vp") == (1,)


def test_the_kernel_and_check_share_the_rules():
    """The kernel's limit code is the first broken rule's (registry ``limit`` on arrays), the
    one :meth:`check` names on scalars."""
    from kernels.names import LIMITS

    entry = REGISTRY["data+tensor+pipeline"]
    net = Bound.of(load_model(GPT), load_machine("a100-ib800")).net
    v = registry_values(
        entry,
        net,
        {"p": np.array([8, 6, 24, 8]), "b": 8, "S": np.array([1, 1, 1, 3]), "tp": np.array([2, 4, 3, 1])},
    )
    assert [LIMITS[c] for c in entry.limit(v)] == ["", "divides", "heads", "batch"]


def test_measured_rows_that_cannot_exist_are_skipped(tmp_path):
    """Issue 34, defect 8: skipped with FILE:LINE: reason, not counted; all bad says why."""
    path = tmp_path / "runs.csv"
    head = "model,strategy,p,tp,pp,b,S,machine,iter_time_s\n"
    bad = (
        f"{GPT},data+tensor+pipeline,6,2,2,8,1,a100-ib800,0.2\n"  # 4 does not divide 6
        f"{GPT},data+tensor+pipeline,24,3,1,8,1,a100-ib800,0.2\n"  # 3 does not divide 4 heads
        f"{GPT},data+tensor+pipeline,64,1,64,8,1,a100-ib800,0.2\n"  # 64 stages
        f"{GPT},data+tensor+pipeline,8,2,2,8,3,a100-ib800,0.2\n"  # S = 3 does not divide 8
    )
    path.write_text(head + bad + f"{GPT},data+tensor+pipeline,8,2,2,8,2,a100-ib800,0.2\n")
    meas = read_measurements(path)
    assert len(meas.runs) == 1 and meas.runs[0].line == 6
    assert [s.line for s in meas.skipped] == [2, 3, 4, 5]
    assert meas.messages()[0] == f"{path}:2: no such configuration: tp x pp = 4 does not divide p 6 (divides)"
    path.write_text(head + bad)
    with pytest.raises(InputError) as err:
        read_measurements(path)
    text = str(err.value)
    assert "no usable rows (4 skipped)" in text and "line 5: no such configuration: S 3" in text


def test_measured_rows_read_every_own_axis(tmp_path):
    gpt = "gpt-l4-h64-a4-s32-v100"  # 4 blocks: pp 2 x vp 2 chunks of one block each
    path = tmp_path / "runs.csv"
    path.write_text(
        "model,strategy,p,tp,pp,b,S,recompute,zero,sp,vp,precision,machine,iter_time_s\n"
        f"{gpt},data+tensor+pipeline,8,2,2,8,2,selective,1,1,2,fp8,a100-ib800,0.2\n"
        f"{gpt},data+tensor+pipeline,8,2,2,8,2,,,,,,a100-ib800,0.2\n"
        f"{gpt},data+tensor+pipeline,8,2,2,8,2,full,0,0,1,fp16,a100-ib800,0.2\n"
    )
    meas = read_measurements(path)
    # (tp, pp, recompute, zero, vp, sp, precision, reshard, dp_shard, cp, ep, etp)
    assert [r.own for r in meas.runs] == [
        (2, 2, 1, 1, 2, 1, 1, 1, 0, 1, 1, 1),
        (2, 2, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1),
    ]
    assert "precision must be one of bf16, fp8, mxfp8, nvfp4, got 'fp16'" in meas.skipped[0].reason


def test_the_glossary_lists_the_registry_axes():
    """docs/model.md §2's table of own axes is the registry's: name, default, legal values."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text()
    section = text[text.index("## 2. Glossary") : text.index("## 3.")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {line.split("|")[1].strip().strip("`"): line for line in rows}
    for name, axis in OWN_AXES.items():
        line = listed[name]
        default = axis.choices[axis.default] if axis.choices else axis.default
        assert f"| {'`' + str(default) + '`' if axis.choices else default} |" in line, line
        assert all(f"`{c}`" in line for c in axis.choices), line
