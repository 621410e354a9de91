"""A run's dataset folder explains itself (docs/output-format.md): part files carry the spec,
models, machines and versions; the manifest counts the rows; labels are dictionary-encoded,
compression is zstd; no temporary is left."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.output import store
from tests.runs import PAPER_SPEC, count_rows, manifest, temporaries


def test_part_file_explains_itself(paper32):
    part = sorted(paper32.out.glob("part-*.parquet"))[0]
    meta = json.loads(pq.read_schema(part).metadata[store.META_KEY])
    for key in ("versions", "spec", "models", "machines"):
        assert key in meta, key
    assert meta["spec"] == PAPER_SPEC.read_text()
    assert set(meta["models"]) == {"resnet50", "vgg16"}
    assert set(meta["machines"]) == {"abci"}
    assert meta["machines"]["abci"]["params"]["gpus_per_node"] == 4
    assert meta["models"]["resnet50"]["weights"] == 25_502_912
    assert {"jax", "numpy", "pyarrow", "paradl-sweep"} <= set(meta["versions"])


def test_manifest_is_complete_and_counts_rows(paper32, grid):
    for run in (paper32, grid):
        m = manifest(run.out)
        assert m["complete"] is True
        assert m["rows"] == count_rows(run.out) == len(run.rows)


def test_labels_are_dictionary_encoded_and_compression_is_zstd(paper32):
    part = sorted(paper32.out.glob("part-*.parquet"))[0]
    pf = pq.ParquetFile(part)
    schema = pf.schema_arrow
    meta = pf.metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    for name in ("model", "machine", "strategy", "limit_reason"):
        assert pa.types.is_dictionary(schema.field(name).type), name
        encodings = meta.row_group(0).column(names.index(name)).encodings
        assert any("DICTIONARY" in e for e in encodings), (name, encodings)
    for i in range(meta.num_columns):
        assert meta.row_group(0).column(i).compression == "ZSTD", names[i]
    for name in ("p", "p1", "p2", "b", "global_batch", "S", "iterations"):
        assert pa.types.is_integer(schema.field(name).type), name
    # min/max where a --where can use them (configuration), none where it cannot (results)
    group = meta.row_group(0)
    assert group.column(names.index("p")).is_stats_set
    assert group.column(names.index("strategy")).is_stats_set
    assert not group.column(names.index("t_epoch_s")).is_stats_set
    assert schema.field("feasible").type == pa.bool_()


def test_no_temporaries_after_success(grid, paper32):
    assert temporaries(grid.out) == []
    assert temporaries(paper32.out) == []
