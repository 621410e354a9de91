"""Figures (sweep.plot): every kind renders to a valid, non-empty PNG and SVG from a real sweep,
through the library and the CLI; a missing matplotlib is a one-line error."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from sweep.answers import plot
from sweep.cli.main import cli
from sweep.errors import InputError
from tests.answers.query_data import small_sweep, two_model_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    pytest.importorskip("matplotlib")
    return small_sweep(tmp_path_factory)


def _valid(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000, path
    if path.suffix == ".png":
        assert data.startswith(PNG_MAGIC)
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"


KINDS = {
    "scaling": {"where": "b == 32 and inter_bandwidth_Bps == 25e9"},
    "scaling-bandwidth": {"x": "inter_bandwidth_Bps", "where": "p == 32", "vline": 2e10, "logy": False},
    "breakdown": {"where": "b == 32 and inter_bandwidth_Bps == 25e9"},
    "pareto": {"minimize": ["t_epoch_s", "gpu_hours"]},
    "regime": {"x": "p", "y": "inter_bandwidth_Bps"},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_figure_renders(small, tmp_path, kind, suffix):
    fn = plot.KINDS[kind.split("-")[0]]
    out = fn(small, tmp_path / f"{kind}{suffix}", **KINDS[kind])
    assert out == tmp_path / f"{kind}{suffix}"
    _valid(out)
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_cli_plots(small, tmp_path):
    runner = CliRunner()
    for args in (
        ["scaling", str(small), "--where", "b == 16"],
        ["breakdown", str(small)],
        ["pareto", str(small), "--min", "t_epoch_s", "--max", "p"],
        ["regime", str(small), "--y", "b", "--where", "inter_bandwidth_Bps == 12.5e9"],
    ):
        out = tmp_path / f"{args[0]}.png"
        r = runner.invoke(cli, ["plot", *args, "-o", str(out)])
        assert r.exit_code == 0, r.output
        _valid(out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scaling", "{d}", "-o", "{t}/x.gif"], "unknown image type"),
        (["scaling", "{d}", "-o", "{t}/x.png", "--where", "p > 10000"], "no feasible rows"),
        (["pareto", "{d}", "-o", "{t}/x.png", "--min", "t_epoch_s"], "exactly two objectives"),
        (["regime", "{d}", "-o", "{t}/x.png", "--y", "nope"], "unknown column 'nope'"),
        (["scaling", "{d}", "-o", "{t}/missing/x.png"], "folder does not exist"),
    ],
)
def test_cli_plot_errors(small, tmp_path, args, message):
    r = CliRunner().invoke(cli, ["plot", *(a.format(d=small, t=tmp_path) for a in args)])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and message in r.stderr and len(r.stderr.splitlines()) == 1


def test_missing_matplotlib_is_one_line(small, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    with pytest.raises(InputError, match=r"pip install 'paradl-sweep\[plot\]'"):
        plot.scaling(small, tmp_path / "x.png")


def test_cli_plot_that_cannot_be_written_is_one_line(small, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    out = blocker / "x.png"
    r = CliRunner().invoke(cli, ["plot", "scaling", str(small), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert r.stderr == f"error: {out}: cannot write: Not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


# ----------------------------------------------------------------------------- models and machines


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> Path:
    pytest.importorskip("matplotlib")
    return two_model_sweep(tmp_path_factory)


def test_scaling_draws_each_model_apart(two, tmp_path):
    """The best per p is each model's own: one line per model and strategy, never a minimum
    over ResNet-50 and VGG16 together."""
    rows = [r for r in ds.dataset(two, format="parquet").to_table().to_pylist() if r["feasible"]]
    table = plot.best(two, per=["strategy", "p"], columns=["strategy", "p", "t_epoch_s"])
    lines = list(plot._scaling_lines(table, "p", "t_epoch_s"))
    labels = [label for label, *_ in lines]
    assert sorted(labels) == ["data (resnet50)", "data (vgg16)", "filter (resnet50)", "filter (vgg16)"]
    for label, style, _color, xs, ys in lines:
        strategy, model = label.rstrip(")").split(" (")
        assert style == ("-" if model == "resnet50" else "--")
        for x, y in zip(xs, ys, strict=True):
            mine = [
                r["t_epoch_s"] for r in rows if (r["model"], r["strategy"], r["p"]) == (model, strategy, x)
            ]
            assert y == np.float32(min(mine)), (label, x)
    _valid(plot.scaling(two, tmp_path / "scaling.png"))
    one = plot.best(
        two, per=["strategy", "p"], where="model == 'vgg16'", columns=["strategy", "p", "t_epoch_s"]
    )
    assert sorted(label for label, *_ in plot._scaling_lines(one, "p", "t_epoch_s")) == ["data", "filter"]


@pytest.mark.parametrize(
    ("kind", "options"),
    [("breakdown", {}), ("pareto", {"minimize": ["t_epoch_s", "p"]}), ("regime", {"x": "p", "y": "b"})],
)
def test_one_model_figures_refuse_two_models_until_a_where_picks_one(two, tmp_path, kind, options):
    with pytest.raises(
        InputError, match=r"data holds 2 \(resnet50, vgg16\): pick one with where \"model == 'resnet50'\"$"
    ):
        plot.KINDS[kind](two, tmp_path / "x.png", **options)
    _valid(plot.KINDS[kind](two, tmp_path / "x.png", where="model == 'resnet50'", **options))
