"""The dataset folder's manifest (sweep/output/store.py): a Parquet file with no rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.errors import InputError
from sweep.output import store

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
