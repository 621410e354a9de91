"""GPT models by name, the transformer layer kinds, and data+tensor+pipeline's inputs: sweep
axes, measured-run columns, ``sweep estimate`` options (docs/inputs.md#gpt-models)."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from sweep.errors import InputError
from sweep.inputs.grid import parse_spec, plan
from sweep.inputs.layers import to_arrays
from sweep.inputs.measured import read_measurements
from sweep.inputs.models import load_model
from sweep.inputs.transformers import VOCAB


def weights(model) -> int:
    return int(np.prod(to_arrays(model).w, axis=1).sum())


def test_gpt_name_builds_the_block_list():
    m = load_model("gpt-l2-h64-a4-s32-v100")
    # embed, 2 x 10 block layers, ln_f, out
    assert len(m.layers) == 1 + 2 * 10 + 2
    assert [layer.kind for layer in m.layers[1:11]] == [
        "layernorm", "linear", "attention", "linear", "add", "layernorm", "linear", "gelu", "linear", "add",
    ]  # fmt: skip
    # 12 L h^2 + (V + s) h + 2h (2L + 1) = 12*2*4096 + 132*64 + 128*5 = 98,304 + 8,448 + 640
    assert weights(m) == 107_392
    assert m.dataset_samples == 300_000_000_000 // 32


def test_gpt3_175b_has_the_papers_shape():
    m = load_model("gpt3-175b")
    # 12 * 96 * 12288^2 + (50257 + 2048) * 12288 + 2 * 12288 * 193 = 173,946,175,488 + 642,723,840
    # + 4,743,168: 174.6e9 (Brown et al. 2020: 175.0e9 with biases)
    assert weights(m) == 174_593_642_496
    assert m.dataset_samples == 146_484_375  # 300e9 tokens / 2,048


def test_gpt_flops_per_sample_by_hand():
    """Per block forward: linears 2 s h (3h + h + 4h + 4h) = 24 s h^2, attention 4 s^2 h,
    layernorms 2 * 4 s h, adds 2 s h, gelu 4 s h; plus ln_f 4 s h and the output 2 s h V."""
    L, h, s, V = 2, 64, 32, 100
    net = kernels.build_net(to_arrays(load_model(f"gpt-l{L}-h{h}-a4-s{s}-v{V}")), 1000)
    block = 24 * s * h * h + 4 * s * s * h + 8 * s * h + 2 * s * h + 4 * s * h
    assert float(net.flops) == 3 * (L * block + 4 * s * h + 2 * s * h * V)
    assert float(net.transformer.heads) == 4


def test_default_vocabulary_and_bad_names():
    assert load_model("gpt-l1-h8-a2-s4").layers[-1].y == (VOCAB, 4)
    with pytest.raises(InputError, match="3 heads do not divide hidden size 8"):
        load_model("gpt-l1-h8-a3-s4")
    with pytest.raises(InputError, match="GPT name"):
        load_model("gpt-l1-h8")


def spec(**axes):
    doc = {
        "model": "gpt-l2-h64-a4-s32-v100",
        "machine": "a100-ib800",
        "strategies": ["data", "data+tensor+pipeline"],
        "axes": {"p": [8], "b": [8], **axes},
    }
    return parse_spec(doc, "spec.toml", base=__import__("pathlib").Path("."))


def test_spec_axes_of_data_tensor_pipeline():
    p = plan(spec(tp=[1, 2], pp=[1, 2], S=[1, 4], recompute=["none", "full"], zero=[0, 1]))
    data, tensor = p.jobs
    assert list(data.axes) == ["p", "b"]
    assert list(tensor.axes) == ["p", "b", "S", "tp", "pp", "recompute", "zero"]
    assert list(tensor.axes["recompute"]) == [0, 2]
    # every own axis of the registry entry, swept or not, then the samples per micro-batch
    # (issue 38, defect 6: a column of every data+tensor+pipeline row)
    assert (
        data.extra_columns
        == tensor.extra_columns
        == ("tp", "pp", "recompute", "zero", "vp", "sp", "precision", "micro_batch")
    )


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({"recompute": ["some"]}, "recompute must be one of"),
        ({"zero": [2]}, "zero must be >= 0 and <= 1, got 2"),
    ],
)
def test_bad_tensor_axes(axes, message):
    with pytest.raises(InputError, match=message):
        spec(**axes)


def test_paper_sweeps_are_unchanged():
    """A spec without data+tensor+pipeline has no extra columns, and one without ``strategies``
    runs the paper's eight."""
    doc = {"model": "resnet50", "machine": "abci", "axes": {"p": [8], "b": [8]}}
    p = plan(parse_spec(doc, "spec.toml", base=__import__("pathlib").Path(".")))
    assert len(p.jobs) == 8 and all(job.extra_columns == () for job in p.jobs)


def test_measured_rows_read_the_tensor_columns(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text(
        "model,strategy,p,tp,pp,b,S,recompute,machine,iter_time_s\n"
        "gpt-l2-h64-a4-s32-v100,data+tensor+pipeline,8,2,2,16,4,full,a100-ib800,0.2\n"
        "gpt-l2-h64-a4-s32-v100,data+tensor+pipeline,8,2,2,16,,,a100-ib800,0.2\n"
        "gpt-l2-h64-a4-s32-v100,data+tensor+pipeline,8,2,2,16,4,half,a100-ib800,0.2\n"
        "gpt-l2-h64-a4-s32-v100,data,8,2,2,16,4,full,a100-ib800,0.2\n"
    )
    meas = read_measurements(path)
    first, second, data = meas.runs
    # own = (tp, pp, recompute, zero, vp, sp, precision): the registry's defaults where not given
    assert (first.own, first.p2, first.S) == ((2, 2, 2, 0, 1, 0, 0), 4, 4)
    assert (second.own, second.S) == ((2, 2, 0, 0, 1, 0, 0), 1)  # S defaults to 1, recompute to none
    assert data.own == (1, 1, 0, 0, 1, 0, 0) and data.p2 == 1  # other strategies ignore the columns
    assert [s.line for s in meas.skipped] == [4] and "recompute must be one of" in meas.skipped[0].reason


def test_shipped_measurements_validate():
    """Every row of the shipped GPT file reads, on its own machine, and is predicted feasible."""
    import sweep

    v = sweep.validate("grids/measurements/a100_megatron_public.csv")
    assert not v.warnings
    assert sum(s.n for s in v.summaries[:-1]) == 1481
    assert not any(v.predictions.limit_reason)


def test_absurd_gpt_is_one_line_error_before_building():
    """A GPT of more blocks than the tables hold is refused by name, before any array is built."""
    with pytest.raises(InputError, match=r"gpt-l100000-h100000-a1000-s100000'.*100,000 blocks"):
        load_model("gpt-l100000-h100000-a1000-s100000")
    assert len(load_model("gpt-l1024-h8-a2-s4").layers) == 1 + 1024 * 10 + 2


def test_absurd_gpt_through_the_cli():
    """``sweep estimate`` on it: exit status 2, one ``error:`` line naming the model."""
    from click.testing import CliRunner

    from sweep.cli.main import cli

    result = CliRunner().invoke(
        cli,
        ["estimate", "--model", "gpt-l100000-h100000-a1000-s100000", "--machine", "a100-ib800",
         "--strategy", "data+tensor+pipeline", "--p", "1024", "--b", "1536", "--tp", "8", "--pp", "16",
         "--S", "1536"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "gpt-l100000-h100000-a1000-s100000" in lines[0] and "Traceback" not in result.output
