"""Data shared by the query, plot and sensitivity tests: one real ``sweep run`` output and
synthetic Parquet folders written directly (fast, with ties, duplicates, NaN and several
row groups and part files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

#: A small real sweep: two strategies, five GPU counts, two b, three bandwidths (60 + 60 rows).
SMALL_SPEC = """
name = "small-query"
model = "resnet50"
machine = "abci"
strategies = ["data", "data+filter"]

[axes]
p = [4, 8, 16, 32, 64]
b = [16, 32]
inter_bandwidth_Bps = [12.5e9, 25e9, 50e9]
"""

_CACHE: dict[str, Path] = {}


def small_sweep(tmp_path_factory) -> Path:
    """The output folder of ``sweep run`` on :data:`SMALL_SPEC` (run once per session, in chunks
    of 16 points so the data has several part files and row groups)."""
    if "small" not in _CACHE:
        from sweep.cli.main import cli

        root = tmp_path_factory.mktemp("small-sweep")
        spec = root / "small.toml"
        spec.write_text(SMALL_SPEC)
        out = root / "out"
        result = CliRunner().invoke(cli, ["run", str(spec), "-o", str(out), "--chunk", "16"])
        assert result.exit_code == 0, result.output
        _CACHE["small"] = out
    return _CACHE["small"]


#: Two models on one machine (a small cut of grids/sweeps/paper-resnet50-vgg16.toml): 2 models
#: x 2 strategies x 4 GPU counts x 2 b = 32 rows.
TWO_MODELS_SPEC = """
name = "two-models"
models = ["resnet50", "vgg16"]
machine = "abci"
strategies = ["data", "filter"]

[axes]
p = [4, 8, 16, 32]
b = [16, 32]
"""


def two_model_sweep(tmp_path_factory) -> Path:
    """The output folder of ``sweep run`` on :data:`TWO_MODELS_SPEC` (run once per session)."""
    if "two" not in _CACHE:
        from sweep.cli.main import cli

        root = tmp_path_factory.mktemp("two-models")
        spec = root / "two.toml"
        spec.write_text(TWO_MODELS_SPEC)
        out = root / "out"
        result = CliRunner().invoke(cli, ["run", str(spec), "-o", str(out), "--chunk", "8"])
        assert result.exit_code == 0, result.output
        _CACHE["two"] = out
    return _CACHE["two"]


STRATEGY_NAMES = ["data", "filter", "data+filter"]


def write_synthetic(
    folder: Path,
    objs: np.ndarray,
    feasible: np.ndarray,
    strategy: np.ndarray,
    p: np.ndarray,
    files: int = 3,
    row_group: int = 5,
) -> Path:
    """Rows with ``rid`` = dataset position, split over ``files`` part files of ``row_group``-row groups.

    ``objs`` ``[n, k]`` become float64 columns ``o0, o1, ...`` (NaN kept).
    """
    folder.mkdir(parents=True, exist_ok=True)
    n = len(objs)
    cols: dict[str, pa.Array] = {"rid": pa.array(np.arange(n, dtype=np.int64))}
    for j in range(objs.shape[1]):
        cols[f"o{j}"] = pa.array(objs[:, j].astype(np.float64))
    cols["strategy"] = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(strategy, dtype=np.int32)), pa.array(STRATEGY_NAMES)
    )
    cols["p"] = pa.array(np.asarray(p, dtype=np.int64))
    cols["feasible"] = pa.array(np.asarray(feasible, dtype=bool))
    table = pa.table(cols)
    bounds = np.linspace(0, n, files + 1).astype(int)
    for i in range(files):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        pq.write_table(part, folder / f"part-{i:03d}.parquet", row_group_size=max(1, row_group))
    return folder
