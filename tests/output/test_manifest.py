"""The typed manifest (sweep/output/manifest.py): the JSON document round-trips, key order included."""

from __future__ import annotations

import json

from sweep.output.manifest import Manifest

JOB = {"index": 0, "model": "m", "machine": "abci", "strategy": "data", "axes": {"p": [4]}, "points": 1}

#: A shard's manifest while its reduction runs, keys in the order a run writes them.
SHARD = {
    "format": 1,
    "name": "tiny",
    "spec_path": None,
    "run_key": {"spec": "...", "chunk": 8, "keep": "top:1:t_epoch_s", "shards": 2},
    "versions": {"python": "3.11"},
    "jobs": [{**JOB, "range": [0, 1], "chunks": 1}],
    "done": {"0": 1},
    "done_extra": {},
    "rows": 0,
    "complete": False,
    "compression": "zstd",
    "schema": {"models": ["m"]},
    "devices": "1 CPU",
    "shard": {"k": 1, "n": 2},
    "keep_spill": [],
    "keep_state": "_keep-s0001of0002-000001.parquet",
    "keep_seq": 1,
}

#: A merged manifest: ``shards`` before ``done``, no per-run fields.
MERGED = {
    "format": 1,
    "name": "tiny",
    "spec_path": "tiny.toml",
    "run_key": {"spec": "...", "keep": "all", "shards": 2},
    "versions": {"python": "3.11"},
    "jobs": [{**JOB, "range": [0, 1], "chunks": 1}],
    "shards": 2,
    "done": {"s0000of0002": {"0": 1}, "s0001of0002": {}},
    "rows": 1,
    "complete": True,
    "schema": {"models": ["m"]},
}


def test_documents_round_trip_with_their_key_order():
    for doc in (SHARD, MERGED):
        back = Manifest.from_json(json.loads(json.dumps(doc))).to_json()
        assert json.dumps(back, indent=1) == json.dumps(doc, indent=1)


def test_fields_read_typed_and_missing_keys_are_none():
    m = Manifest.from_json(MERGED)
    assert (m.shards, m.rows, m.complete, m.keep_state, m.devices) == (2, 1, True, None, None)
    s = Manifest.from_json(SHARD)
    assert s.shard == {"k": 1, "n": 2} and s.keep_seq == 1 and s.run_key["shards"] == 2


def test_unknown_keys_are_ignored_and_spec_path_is_always_written():
    m = Manifest.from_json({**MERGED, "spec_path": None, "future": 1})
    doc = m.to_json()
    assert "future" not in doc and doc["spec_path"] is None
