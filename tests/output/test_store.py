"""The Parquet store (sweep/output/store.py): the manifest, a Parquet file with no rows, and its
text; file names; files written whole or not at all."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sweep.cli.main import cli
from sweep.errors import InputError
from sweep.output import store
from sweep.output.ownership import foreign_files
from tests.cli.test_cli import assert_one_line_error
from tests.runs import manifest

SCHEMA = pa.schema([pa.field("p", pa.int32()), pa.field("t_epoch_s", pa.float32())])


def test_the_manifest_round_trips_through_an_empty_parquet_file(tmp_path):
    doc = {"format": 1, "rows": 12, "complete": False, "jobs": [{"axes": {"p": [1, 2]}}]}
    store.write_manifest(tmp_path / store.MANIFEST, json.dumps(doc), SCHEMA)
    assert store.read_manifest(tmp_path) == doc
    assert pq.read_metadata(tmp_path / store.MANIFEST).num_rows == 0
    assert pq.read_schema(tmp_path / store.MANIFEST).equals(SCHEMA, check_metadata=False)
    assert [f.name for f in tmp_path.iterdir()] == [store.MANIFEST], "no temporary left"


def test_no_manifest_is_none_and_a_bad_one_is_one_line(tmp_path):
    assert store.read_manifest(tmp_path) is None
    (tmp_path / store.MANIFEST).write_text("{}")
    with pytest.raises(InputError, match="unreadable manifest"):
        store.read_manifest(tmp_path)
    pq.write_table(SCHEMA.empty_table(), tmp_path / store.MANIFEST)
    with pytest.raises(InputError, match="not a manifest"):
        store.read_manifest(tmp_path)


def test_names_of_shard_manifests():
    assert store.manifest_name() == "_manifest.parquet"
    assert store.manifest_name(store.shard_tag(3, 16)) == "_manifest-s0003of0016.parquet"
    assert store.SHARD_MANIFEST.fullmatch("_manifest-s0003of0016.parquet")


@pytest.mark.parametrize("tag", [None, "s0000of0002"])
def test_a_folder_of_an_earlier_version_is_refused_by_name(tmp_path, tag):
    (tmp_path / "_manifest.json").write_text('{"complete": false}')
    part = f"part-{tag}-j0000-c000000000.parquet" if tag else "part-j0000-c000000000.parquet"
    (tmp_path / part).write_bytes(b"")
    with pytest.raises(InputError, match=r"earlier version of paradl-sweep \(_manifest.json\)"):
        store.prepare_folder(tmp_path, resume=True, overwrite=False, run_key={}, tag=tag)


def test_overwrite_removes_an_earlier_versions_manifests(tmp_path):
    (tmp_path / "_manifest.json").write_text("{}")
    (tmp_path / "_manifest-s0000of0002.json").write_text("{}")
    assert store.prepare_folder(tmp_path, resume=False, overwrite=True, run_key={}) is None
    assert list(tmp_path.iterdir()) == []


def test_manifest_text_is_json_dumps_as_the_values_change(paper32):
    """The manifest is written as ``json.dumps(doc, indent=1)`` would write it, with the fixed
    keys' text reused from the first call while the other keys change."""
    doc = manifest(paper32.out)
    text = store.ManifestText(k for k in doc if k not in ("done", "rows", "complete"))
    assert text(doc) == json.dumps(doc, indent=1)
    doc.update(done={"0": 7, "3": 1}, rows=12345, complete=False, added={"a": [1.5, "x\ny"], "b": {}})
    assert text(doc) == json.dumps(doc, indent=1)
    assert text({}) == json.dumps({}, indent=1)


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=12,
        ),
        max_size=6,
    )
)
def test_manifest_text_equals_json_dumps_for_any_document(doc):
    text = store.ManifestText(list(doc)[::2])
    assert text(doc) == text(doc) == json.dumps(doc, indent=1)


def test_written_is_whole_or_absent(tmp_path):
    """store.written: the file appears only on success; an OS error is one InputError naming the path."""
    out = tmp_path / "a.csv"
    with store.written(out) as tmp:
        tmp.write_text("x\n")
        assert not out.exists()
    assert out.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]
    with pytest.raises(RuntimeError), store.written(out) as tmp:  # a failing writer keeps the old file
        tmp.write_text("half")
        raise RuntimeError
    assert out.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]
    blocked = store.written(out / "b.png", keep_suffix=True)
    with pytest.raises(InputError, match=r"a\.csv/b\.png: cannot write: Not a directory$"), blocked as tmp:
        assert tmp.name == ".b.tmp.png"
        tmp.write_text("never")
    with pytest.raises(InputError, match=r"a\.csv: cannot write in the output folder: File exists$"):
        store.writable_folder(out)


# --- categorical columns: written as names, read back as codes ---------------------------------


def test_categorical_columns_are_written_as_names():
    from kernels.strategies.registry import RECOMPUTE

    schema = store.Schema(
        ["m"], ["x"], ["data+tensor+pipeline"], ("p", "recompute", "memory_model"), ("t_epoch_s",),
        pa.float32(), axis_values={"memory_model": np.array([1.0, 0.0])},  # the spec's order: paradl, training
    ).categorical()  # fmt: skip
    assert schema.categories == {"recompute": RECOMPUTE, "memory_model": ("training", "paradl")}
    ints = np.array([[8, 8, 16], [2, 0, 1], [0, 1, 0]], np.int32)  # memory_model: axis digits
    table = schema.table(("m", "x", "data+tensor+pipeline"), ints, np.ones((1, 3), np.float32), np.zeros(3))
    assert table.column("recompute").to_pylist() == ["full", "none", "selective"]
    # digit 0 is the spec's first value, paradl (code 1)
    assert table.column("memory_model").to_pylist() == ["paradl", "training", "paradl"]
    assert table.schema.field("recompute").type == pa.dictionary(pa.int32(), pa.string())
    # index = code: the dictionary is the names in code order, the indices the codes
    assert table.column("memory_model").chunk(0).indices.to_pylist() == [1, 0, 1]
    assert list(store.category_codes("memory_model", table.column("memory_model"))) == [1, 0, 1]
    assert list(store.category_codes("recompute", pa.array(["full", "none"]))) == [2, 0]
    assert list(store.category_codes("p", table.column("p"))) == [8, 8, 16]
    again = store.Schema.from_json(schema.to_json())
    assert again.categories == schema.categories and again.arrow() == schema.arrow()


def test_a_schema_stored_before_categories_writes_codes():
    doc = store.Schema(["m"], ["x"], ["s"], ("recompute",), ("t_epoch_s",), pa.float32()).to_json()
    del doc["categories"]
    assert store.Schema.from_json(doc).arrow().field("recompute").type == pa.int32()


def test_unknown_name_is_one_line():
    with pytest.raises(InputError, match="column 'recompute': 'most' is not one of none, selective, full"):
        store.category_codes("recompute", pa.array(["most"]).dictionary_encode())


def test_machine_choices_agree_with_the_kernels_codes():
    from kernels.collectives import ALLREDUCE_ALGOS
    from kernels.names import MACHINE_CHOICES, MEMORY_MODELS

    for names, codes in (
        (MACHINE_CHOICES["memory_model"], MEMORY_MODELS),
        (MACHINE_CHOICES["allreduce_algo"], ALLREDUCE_ALGOS),
    ):
        assert {n: i for i, n in enumerate(names)} == codes


TINY_SPEC = 'name = "tiny"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n[axes]\np = [1, 2]\nb = [32]\n'


def _run_into(tmp_path, out: str, monkeypatch):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_SPEC)
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(cli, ["run", str(spec), "-o", out])


@pytest.mark.parametrize("flag", [None, "--overwrite"])
def test_a_folder_holding_other_files_is_refused_as_an_output(tmp_path, monkeypatch, flag):
    """Issue 34, defect 3: a run wrote into a folder of other files, after which no reader
    took the folder as a dataset. Now: one line naming the files, exit 2, nothing written."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes\n")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_SPEC)
    args = ["run", str(spec), "-o", str(folder), *([flag] if flag else [])]
    result = CliRunner().invoke(cli, args)
    assert_one_line_error(result, str(folder), "notes.txt", "not a sweep's")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_the_current_folder_is_refused_unless_empty(tmp_path, monkeypatch):
    result = _run_into(tmp_path, ".", monkeypatch)  # holds tiny.toml
    assert_one_line_error(result, "tiny.toml", "not a sweep's")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "tiny.toml"), "-o", "."])
    assert result.exit_code == 0, result.output
    assert (empty / store.MANIFEST).is_file()


def test_foreign_files_are_what_a_run_did_not_write(tmp_path):
    for name in [
        store.MANIFEST,
        store.manifest_name("s0001of0004"),
        store.part_name(0, 3),
        store.part_name(1, 2, "s0001of0004"),
        store.KEEP_PART,
        store.state_name(None, 12),
        store.state_name("s0001of0004"),
        store.spill_name(store.spill_prefix(), 3),
        store.temporary(tmp_path / store.MANIFEST).name,
        store.OLD_MANIFEST,
    ]:
        (tmp_path / name).write_text("")
    assert foreign_files(tmp_path) == []
    (tmp_path / "plot.png").write_text("")
    (tmp_path / "sub").mkdir()
    assert foreign_files(tmp_path) == ["plot.png", "sub"]
