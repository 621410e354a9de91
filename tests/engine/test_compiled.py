"""Traced kernels kept between runs (:mod:`sweep.engine.compiled`).

A second process that finds the stored modules must trace nothing and
write exactly the rows a run without any cache writes; the key must change
with anything the trace reads; a damaged module costs a trace, not a wrong
answer or an error.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import pickle
import tomllib
from pathlib import Path

import jax
import numpy as np
import pyarrow.dataset as ds
import pytest

from sweep.engine import compiled as traced
from sweep.engine.devices import local_devices
from sweep.engine.filters import known_front
from sweep.engine.index import decode_info
from sweep.engine.program import POINT_ROWS, build_chunk_fn, build_points_fn, compile_chunk_fn, device_inputs
from sweep.inputs.grid import parse_spec, plan
from sweep.reduce.keep import Keep
from tests.helpers import python_on_cpu_devices

ROOT = Path(__file__).resolve().parents[2]

# Below 8 GPUs every network setting ties: the reducing run's first 16,384-point chunk holds
# 12,288 rows with p < 8, all on the front, more than it compacts (4,096 per device), so its
# candidates are evaluated again by the per-point kernel (Again), which is kept too.
SPEC = """name = "kept"
model = "resnet50"
machine = "abci"
strategies = ["data", "data+filter"]
[axes]
p = [1, 2, 4, 8, 16]
b = [32]
p2 = [2]
inter_bandwidth_Bps = { linspace = [10e9, 100e9, 64] }
inter_alpha_s = { linspace = [1e-6, 20e-6, 64] }
[set]
wu_passes = 2
"""

# Runs the spec, writing every row (chunks of 4,096) and keeping the Pareto front with its ties (chunks
# of 16,384), into OUT/<label>-all and OUT/<label>-pareto, once per label: "none" with no
# cache folder, any other label with CACHE as JAX's cache folder. Prints the kernels traced.
SCRIPT = """
import json, sys
from pathlib import Path
import jax
from sweep.engine import program
from sweep.engine.index import numeric_columns
from sweep.inputs.grid import load_spec, plan
from sweep.engine.run import run_sweep
from sweep.engine.runstate import RunOptions
from sweep.reduce.keep import parse_keep

spec, out, cache = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
p = plan(load_spec(spec))
cols = numeric_columns(p.jobs[0])
built = []
for name in ("build_chunk_fn", "build_points_fn"):  # called only to trace a kernel
    def counted(*args, _fn=getattr(program, name), **kwargs):
        built.append(1)
        return _fn(*args, **kwargs)
    setattr(program, name, counted)
traces = {}
for label in sys.argv[4:]:
    jax.config.update("jax_compilation_cache_dir", None if label == "none" else cache)
    built.clear()
    for keep, chunk in (("all", 4096), ("pareto:t_epoch_s,p:all", 16384)):
        name = f"{label}-{keep.split(':')[0]}"
        run_sweep(p, RunOptions(out=out / name, chunk=chunk, keep=parse_keep(keep, cols)))
    traces[label] = len(built)
print(json.dumps(traces))
"""


def run_script(tmp: Path, devices: int, *labels: str) -> dict:
    out = python_on_cpu_devices(
        SCRIPT, tmp / "kept.toml", tmp / "out", tmp / "cache", *labels, devices=devices
    )
    return json.loads(out.strip().splitlines()[-1])


def rows(folder: Path) -> list[tuple[str, ...]]:
    """Every row of a dataset folder as the repr of each value (floats bit for bit), sorted."""
    return sorted(
        tuple(map(repr, r.values())) for r in ds.dataset(folder, format="parquet").to_table().to_pylist()
    )


def modules(tmp: Path) -> dict[str, int]:
    """The stored modules' inode numbers: a rewrite renames a new file onto the name."""
    return {m.name: m.stat().st_ino for m in (tmp / "cache" / traced.FOLDER).glob(f"*{traced.SUFFIX}")}


@pytest.mark.parametrize("devices", [1, 2])
def test_a_second_process_traces_nothing_and_writes_the_same_rows(tmp_path, devices):
    """On one device the rows are also those of a run with no cache folder; on two (forced
    host devices, sharded kernels), those of the first run (a sharded run's rows are checked
    against one device's elsewhere)."""
    (tmp_path / "kept.toml").write_text(SPEC)
    # two jobs x (every row, pareto) chunk kernels, and each job's per-point kernel
    assert run_script(tmp_path, devices, "cold") == {"cold": 6}
    stored = modules(tmp_path)
    assert len(stored) == 6
    # the second process finds every kernel stored: no trace
    more = ("none",) if devices == 1 else ()
    assert run_script(tmp_path, devices, "warm", *more) == {"warm": 0} | {m: 6 for m in more}
    assert modules(tmp_path) == stored  # read, not rewritten
    for keep in ("all", "pareto"):
        want = rows(tmp_path / "out" / f"cold-{keep}")
        # every row: data 5 x 64 x 64 = 20,480, data+filter 4 x 4,096 (p2 = 2 skips p = 1)
        assert len(want) == 36_864 if keep == "all" else len(want) > 4_096
        assert rows(tmp_path / "out" / f"warm-{keep}") == want
        if more:
            assert rows(tmp_path / "out" / f"none-{keep}") == want


def small_job(text: str = ""):
    text = (
        'name = "small"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n'
        "[axes]\np = [1, 2, 4]\nb = [8, 16]\n" + text
    )
    return plan(parse_spec(tomllib.loads(text), "small.toml", ROOT, text)).jobs[0]


def test_the_key_follows_what_the_trace_reads():
    job = small_job()
    devices = local_devices()
    base = traced.key(job, ("chunk", 64), devices)
    assert (
        traced.key(dataclasses.replace(job, index=5), ("chunk", 64), devices) == base
    )  # the index is not read
    assert traced.key(small_job(), ("chunk", 64), devices) == base  # nor the object's identity
    others = [
        traced.key(job, ("chunk", 128), devices),
        traced.key(small_job("[set]\nwu_passes = 2\n"), ("chunk", 64), devices),
        traced.key(dataclasses.replace(job, strategy="spatial"), ("chunk", 64), devices),
        traced.key(
            dataclasses.replace(job, axes={**job.axes, "b": np.array([8, 32])}), ("chunk", 64), devices
        ),
        traced.key(job, ("chunk", 64), devices * 2),
    ]
    assert len({base, *others}) == 1 + len(others)


def points_case(tmp_path, monkeypatch):
    """A small job's per-point kernel, kept in ``tmp_path``: (call, builds, path, args, want)."""
    monkeypatch.setattr(traced, "folder", lambda: tmp_path)
    job = small_job()
    static = ("points", POINT_ROWS, "float32")
    devices = local_devices()[:1]
    inputs = device_inputs(job, np.float32, local_devices()[:1])
    digits = np.zeros((len(job.axes), POINT_ROWS), np.int32)
    digits[:, :6] = [[0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]]
    args = (*inputs, digits)
    builds = []

    def build():
        builds.append(1)
        return build_points_fn(job, np.float32)

    def call():
        fn = traced.compile_kept(job, static, devices, build, args)
        for got, w in zip(fn(*args), want, strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(w))

    want = build_points_fn(job, np.float32)(*args)
    return call, builds, tmp_path / f"{traced.key(job, static, devices)}{traced.SUFFIX}"


def test_a_damaged_module_is_traced_again_and_replaced(tmp_path, monkeypatch):
    call, builds, path = points_case(tmp_path, monkeypatch)
    path.write_bytes(b"not a module")
    for _ in range(2):  # the damaged file is traced again; the second call reads its replacement
        call()
        os.utime(path, ns=(0, 0))
    assert builds == [1]
    call()
    assert path.stat().st_mtime_ns > 0  # a module read is marked used (pruning goes by it)
    assert path.stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_program_is_compiled_again_and_replaced(tmp_path, monkeypatch):
    call, builds, _path = points_case(tmp_path, monkeypatch)
    call()
    (program,) = tmp_path.glob(f"*{traced.PROGRAM}")
    good = program.read_bytes()
    real, loaded = traced._load, []
    monkeypatch.setattr(traced, "_load", lambda blob, devices: loaded.append(blob) or real(blob, devices))
    flipped = good[:-300] + bytes([good[-300] ^ 1]) + good[-299:]
    bad = pickle.loads(flipped)["executable"]  # it still unpickles: only the checksum tells
    assert bad != pickle.loads(good)["executable"]
    for damaged in (flipped, b"not a program"):
        program.write_bytes(damaged)
        loaded.clear()
        call()  # the module is read (no trace), its program compiled again and kept
        assert builds == [1]
        # loaded: only what was compiled again, for its check; never the damaged program
        assert loaded
        assert bad not in loaded
        assert program.read_bytes() != damaged
        assert program.stat().st_size > 10_000
    call()


def test_a_program_that_loads_with_other_answers_is_not_kept(tmp_path, monkeypatch):
    """A program is kept only when, loaded back, it gives the compiled one's outputs bit
    for bit; the kernel is right either way."""
    call, builds, path = points_case(tmp_path, monkeypatch)
    real = traced._load

    def off_by_one(blob, devices):
        fn = real(blob, devices)
        return lambda *a: jax.tree_util.tree_map(lambda x: x + 1, fn(*a))

    monkeypatch.setattr(traced, "_load", off_by_one)
    call()
    assert path.exists()
    assert not list(tmp_path.glob(f"*{traced.PROGRAM}"))
    monkeypatch.setattr(traced, "_load", real)
    call()
    assert builds == [1]
    assert len(list(tmp_path.glob(f"*{traced.PROGRAM}"))) == 1


# Compiles a small job's Pareto chunk kernel through compile_kept with JAX's cache folder
# CACHE, and prints whether it answers as the traced kernel does, and the programs kept.
# "plain" compiles it as a jit call does (without traced.FRESH), so XLA's cache may serve it.
FRESH_SCRIPT = """
import json, sys
from pathlib import Path
import jax, numpy as np
from sweep.engine import compiled as traced
from sweep.engine.devices import local_devices
from sweep.engine.filters import known_front
from sweep.engine.index import decode_info
from sweep.engine.program import build_chunk_fn, device_inputs
from sweep.reduce.keep import Keep
from tests.engine.test_compiled import small_job

cache, mode = sys.argv[1], sys.argv[2]
jax.config.update("jax_compilation_cache_dir", cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
if mode == "plain":
    traced.FRESH = None
job, keep = small_job(), Keep("pareto", ("t_epoch_s", "p"))
args = (*device_inputs(job, np.float32), decode_info(job, 0, 64), np.int32(job.size), known_front(None, np.float32))
fn = traced.compile_kept(
    job, ("chunk", 64), local_devices(), lambda: build_chunk_fn(job, 64, keep, np.float32)[0], args
)
same = traced.digest(fn(*args)) == traced.digest(build_chunk_fn(job, 64, keep, np.float32)[0](*args))
print(json.dumps({"same": same, "programs": len(list((Path(cache) / traced.FOLDER).glob("*.program")))}))
"""


def test_a_program_served_by_xla_cache_is_compiled_before_it_is_kept(tmp_path):
    """JAX 0.10's executable loaded from XLA's persistent cache serialises into one that fails
    when run ("Function wrapped_iota not found"): kept, it broke every later run."""
    cache = tmp_path / "cache"

    def run(mode: str) -> dict:
        return json.loads(python_on_cpu_devices(FRESH_SCRIPT, cache, mode).strip().splitlines()[-1])

    assert run("plain") == {"same": True, "programs": 1}  # compiled here, and kept
    for program in (cache / traced.FOLDER).glob(f"*{traced.PROGRAM}"):
        program.unlink()
    # XLA's cache serves the program now: right answers, and no broken program kept (with
    # JAX 0.10 the one serialised from it fails its check; the retry under a random key is kept)
    assert run("plain")["same"]
    # compiled with traced.FRESH, not served: kept; the last run loads it
    assert run("fresh") == {"same": True, "programs": 1}
    assert run("fresh") == {"same": True, "programs": 1}


def test_a_module_that_does_not_fit_is_not_used(tmp_path, monkeypatch):
    """A readable module of another program under the key (it cannot take these arguments):
    each call traces the kernel itself, and the answers are right."""
    call, builds, path = points_case(tmp_path, monkeypatch)
    other = jax.export.export(jax.jit(lambda x: (x + 1,)))(np.zeros(3, np.float32))
    record = {
        "module": bytes(other.serialize()),
        "out_tree": jax.tree_util.tree_structure((0,)),
        "used": (0,),
    }
    traced._write(path, record)
    call()
    call()
    assert builds == [1, 1]


def test_an_unwritable_cache_folder_costs_only_the_trace(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setattr(traced, "folder", lambda: blocker / traced.FOLDER)
    job = small_job()
    inputs = device_inputs(job, np.float32, local_devices()[:1])
    digits = np.zeros((len(job.axes), POINT_ROWS), np.int32)
    fn = traced.compile_kept(
        job,
        ("points",),
        local_devices()[:1],
        lambda: build_points_fn(job, np.float32),
        (*inputs, digits),
    )
    floats, _ints, _limit = fn(*inputs, digits)
    assert np.isfinite(np.asarray(floats)[:, 0]).any()


def test_the_least_recently_used_modules_go_beyond_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(traced, "MAX_MODULES", 2)
    paths = [tmp_path / f"m{i}{traced.SUFFIX}" for i in range(3)]
    for i, path in enumerate(paths[:2]):
        traced._write(path, {"module": b"", "out_tree": None})
        os.utime(path, ns=(i * 10**9, i * 10**9))  # m0 older than m1
    os.utime(paths[0])  # m0 used just now: m1 is the least recently used
    traced._write(paths[2], {"module": b"", "out_tree": None})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m0.module", "m2.module"]


def test_jobs_whose_programs_were_one_still_compile_to_one():
    """Filter and channel read different inputs but compute alike: jit's programs are the same
    (XLA's cache holds one), and so are those of their kept modules' calls."""
    text = 'name = "two"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["filter", "channel"]\n'
    text += "[axes]\np = [4, 8]\nb = [32]\ninter_bandwidth_Bps = [10e9, 20e9]\n"
    programs, kept, plain = [], [], []
    for job in plan(parse_spec(tomllib.loads(text), "two.toml", ROOT, text)).jobs:
        inputs = device_inputs(job, np.float32)
        args = (*inputs, decode_info(job, 0, 64), np.int32(0), known_front(None, np.float32))
        fn, _ = build_chunk_fn(job, 64, Keep("all"), np.float32)
        leaves, in_tree = jax.tree_util.tree_flatten(args)
        plain.append(fn.lower(*args).as_text(debug_info=False))

        def flat(*leaves, fn=fn, in_tree=in_tree):
            return tuple(jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_unflatten(in_tree, leaves))))

        exported, used = traced._export(flat, leaves)
        kept.append(used)
        programs.append(jax.jit(exported.call).lower(*(leaves[i] for i in used)).as_text(debug_info=False))
    assert plain[0] == plain[1]
    assert kept[0] != kept[1]  # the two read different inputs
    assert programs[0] == programs[1]


def test_jobs_whose_kernels_lower_alike_share_one_kept_program(tmp_path, monkeypatch):
    monkeypatch.setattr(traced, "folder", lambda: tmp_path)
    text = 'name = "two"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["filter", "channel"]\n'
    text += "[axes]\np = [4, 8]\nb = [32]\ninter_bandwidth_Bps = [10e9, 20e9]\n"
    for job in plan(parse_spec(tomllib.loads(text), "two.toml", ROOT, text)).jobs:
        inputs = device_inputs(job, np.float32)
        fn = compile_chunk_fn(job, 64, Keep("all"), np.float32, inputs)
        out = fn(*inputs, decode_info(job, 0, 64), np.int32(job.size), known_front(None, np.float32))
        assert np.isfinite(np.asarray(out.floats)[0][np.asarray(out.mask)]).all()
    assert len(list(tmp_path.glob(f"*{traced.SUFFIX}"))) == 2
    assert len(list(tmp_path.glob(f"*{traced.PROGRAM}"))) == 1


def test_a_loaded_program_is_loaded_once_while_in_use_and_its_file_unchanged(tmp_path, monkeypatch):
    """Kernels that share a program (two jobs', or one compiled again) take the program
    loaded first while a kernel still holds it; a program file changed since is read and
    loaded again, and one no kernel holds any more is not kept."""
    monkeypatch.setattr(traced, "folder", lambda: tmp_path)
    job = small_job()
    static, devices = ("points", POINT_ROWS, "float32"), local_devices()[:1]
    args = (
        *device_inputs(job, np.float32, devices),
        np.zeros((len(job.axes), POINT_ROWS), np.int32),
    )
    want = build_points_fn(job, np.float32)(*args)

    def kernel():
        fn = traced.compile_kept(job, static, devices, lambda: build_points_fn(job, np.float32), args)
        for got, w in zip(fn(*args), want, strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
        return fn

    kernel()  # traced, compiled and kept
    reads: list[str] = []
    real = traced._read_program
    monkeypatch.setattr(
        traced, "_read_program", lambda where, name, d: reads.append(name) or real(where, name, d)
    )
    held = kernel()  # the module names the program: read from its file
    assert len(reads) == 1
    more = [kernel(), kernel()]
    assert len(reads) == 1  # taken as loaded, while ``held`` holds it
    (program,) = tmp_path.glob(f"*{traced.PROGRAM}")
    os.utime(program, ns=(1, 1))  # the file changed (here only its time): read again
    more.append(kernel())
    assert len(reads) == 2
    del held, more
    gc.collect()
    kernel()  # no kernel held it: read again
    assert len(reads) == 3


def test_the_code_digest_reads_every_source_file_of_both_packages():
    """A kept kernel is named by the code that traced it: every .py file of kernels/ and sweep/,
    whatever module of the engine computes the digest (a wrong root read no file at all)."""
    files = {p.relative_to(traced.SOURCE_ROOT).as_posix() for p in traced.source_files()}
    assert {"kernels/strategies/hybrid.py", "sweep/engine/program.py", "sweep/inputs/configs.py"} <= files
    assert len(files) == len(list(traced.SOURCE_ROOT.glob("kernels/**/*.py"))) + len(
        list(traced.SOURCE_ROOT.glob("sweep/**/*.py"))
    )


KEY_SCRIPT = """
import tomllib
from pathlib import Path
from sweep.engine import compiled
from sweep.engine.devices import local_devices
from sweep.inputs.grid import parse_spec, plan
text = 'name = "k"\\nmodel = "gpt3-175b"\\nmachine = "dgx-h100"\\nstrategies = ["data"]\\n[axes]\\np = [8]\\nb = [8]\\n'
job = plan(parse_spec(tomllib.loads(text), "k.toml", Path.cwd(), text)).jobs[0]
print(len(job.bound.profile.stated), compiled.key(job, ("chunk", 64), local_devices()))
"""


def test_the_key_is_the_same_in_every_process():
    """A machine profile holds a frozenset of the parameters its file states, whose order
    follows the process's string hash seed: the key must not, or a warm run traces again."""
    out = {tuple(python_on_cpu_devices(KEY_SCRIPT, PYTHONHASHSEED=seed).split()) for seed in ("1", "2", "3")}
    assert len(out) == 1
    stated, _ = out.pop()
    assert int(stated) > 1  # a set whose order can differ
