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
        == (
            "tp",
            "pp",
            "recompute",
            "zero",
            "vp",
            "sp",
            "precision",
            "reshard",
            "dp_shard",
            "cp",
            "ep",
            "etp",
            "micro_batch",
        )
    )


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({"recompute": ["some"]}, "recompute must be one of"),
        ({"zero": [4]}, "zero must be >= 0 and <= 3, got 4"),
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
    assert (first.own, first.p2, first.S) == ((2, 2, 2, 0, 1, 0, 0, 1, 0, 1, 1, 1), 4, 4)
    assert (second.own, second.S) == (
        (2, 2, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1),
        1,
    )  # S defaults to 1, recompute to none
    assert (
        data.own == (1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1) and data.p2 == 1
    )  # other strategies ignore the columns
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


# ---------------------------------------------------------------- shapes by kind, explicit roles


def _toml(tmp_path, layers: list[str], name: str = "m.toml"):
    """A model file of the given ``[[layer]]`` bodies (one inline line each)."""
    body = "".join(f"\n[[layer]]\n{layer}\n" for layer in layers)
    path = tmp_path / name
    path.write_text(f'[model]\nname = "m"\ndataset_samples = 100\n{body}')
    return path


_LN = 'name = "ln"\nkind = "layernorm"\nx = [8, 4]\nw = [2, 8, 1]\ny = [8, 4]'


@pytest.mark.parametrize(
    "layer, rule",
    [
        # gelu with x != y (issue 38, defect 8)
        ('name = "g"\nkind = "gelu"\nx = [8, 4]\nw = [0, 0, 0]\ny = [16, 4]', "needs y = x"),
        # attention whose input is not [3h, s] for y = [h, s]
        ('name = "a"\nkind = "attention"\nx = [8, 4]\nw = [0, 2, 1]\ny = [8, 4]', "x = [3h, s...]"),
        ('name = "a"\nkind = "attention"\nx = [24, 2]\nw = [0, 2, 1]\ny = [8, 4]', "x = [3h, s...]"),
        # a linear that changes the positions
        ('name = "l"\nkind = "linear"\nx = [8, 4]\nw = [8, 16, 1]\ny = [16, 2]', "same positions"),
        ('name = "n"\nkind = "layernorm"\nx = [8, 4]\nw = [2, 8, 1]\ny = [8, 2]', "needs y = x"),
        (
            'name = "r"\nkind = "linear"\nx = [8, 4]\nw = [8, 8, 1]\ny = [8, 4]\nrole = "core"',
            "cannot have role",
        ),
        (
            'name = "r"\nkind = "linear"\nx = [8, 4]\nw = [8, 8, 1]\ny = [8, 4]\nrole = "diagonal"',
            "role must be",
        ),
    ],
)
def test_model_file_shapes_are_checked_against_the_kind(tmp_path, layer, rule):
    path = _toml(tmp_path, [_LN, layer])
    with pytest.raises(InputError) as err:
        load_model(path)
    message = str(err.value)
    assert rule in message and "m.toml" in message and "layer[1]" in message and "\n" not in message


def test_an_embedding_fed_positions_that_differ_from_its_output_is_an_error(tmp_path):
    embed = 'name = "e"\nkind = "embedding"\nx = [1, 4]\nw = [100, 8, 1]\ny = [8, 2]'
    with pytest.raises(InputError, match=r"embedding layer 'e' needs x = \[1, s\.\.\.\]"):
        load_model(_toml(tmp_path, [embed]))


def test_stated_roles_replace_the_derived_ones(tmp_path):
    """A SwiGLU-like MLP: gate and up both column-parallel over the normed input, the product
    split, down row-parallel. Derived by the toggle rule, up would be read as row-parallel (its
    output allreduced) and down as column-parallel. Tensor-parallel allreduce elements per
    sample (h = 8, s = 4, ffn 16): stated, gate's and up's input gradients backward (8*4 each)
    and down's output forward (8*4) = 96; derived, gate backward 32, up's output forward 16*4 =
    64, down's input backward 16*4 = 64: 160."""
    mlp = [
        'name = "gate"\nkind = "linear"\nx = [8, 4]\nw = [8, 16, 1]\ny = [16, 4]',
        'name = "up"\nkind = "linear"\nx = [8, 4]\nw = [8, 16, 1]\ny = [16, 4]',
        'name = "act"\nkind = "gelu"\nx = [16, 4]\nw = [0, 0, 0]\ny = [16, 4]',
        'name = "down"\nkind = "linear"\nx = [16, 4]\nw = [16, 8, 1]\ny = [8, 4]',
    ]
    roles = ["column", "column", "split", "row"]
    stated = [f'{layer}\nrole = "{role}"' for layer, role in zip(mlp, roles, strict=True)]
    derived_model = load_model(_toml(tmp_path, [_LN, *mlp], "derived.toml"))
    stated_model = load_model(_toml(tmp_path, [_LN, *stated], "stated.toml"))
    codes = [kernels.kinds.ROLES.index(r) for r in ("replicated", *roles)]
    assert to_arrays(stated_model).role.tolist() == codes
    derived = [kernels.kinds.ROLES[c] for c in to_arrays(derived_model).role]
    assert derived == ["replicated", "column", "row", "replicated", "column"]

    def ar_elems(model):
        net = kernels.build_net(to_arrays(model), model.dataset_samples)
        return float(net.transformer.misc.ar_elems[0, 1])

    assert ar_elems(stated_model) == 96.0
    assert ar_elems(derived_model) == 160.0


def test_gpt_blocks_state_megatrons_roles():
    """The GPT builder states each role (docs/model.md §16), and they are the ones the toggle
    rule derives for the same layer list, so hand-written GPT files price the same."""
    m = load_model("gpt-l2-h64-a4-s32-v100")
    stated = [layer.role for layer in m.layers]
    assert stated[:11] == [
        "vocab", "replicated", "column", "core", "row", "replicated", "replicated", "column", "split", "row",
        "replicated",
    ]  # fmt: skip
    assert stated[-1] == "column"
    names = np.array([layer.kind for layer in m.layers])
    assert [kernels.kinds.ROLES[c] for c in kernels.transformer.derive_roles(names)] == stated


def test_a_paradl_net_file_layer_is_checked_against_its_kind(tmp_path):
    """A ReLU whose output differs from its input (same element count, so the chain check
    passes): line 3 of the file, named with the rule."""
    path = tmp_path / "bad.net"
    path.write_text(
        "Input|1000x3x32x32\nCONV_1|3x32x32|3x16x3x3|16x32x32\nRELU_1|16x32x32|16x16x0x0|32x16x32\n"
    )
    with pytest.raises(InputError, match=r"bad\.net:3: relu layer 'RELU_1' needs y = x"):
        load_model(path)
