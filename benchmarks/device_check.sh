#!/usr/bin/env bash
# The GPU checks in one call, for a lent GPU machine with JAX (CUDA) and this project's
# dependencies installed; run from the repository root:
#
#     OUT=/tmp/out bash benchmarks/device_check.sh
#
# Stages, each under its own time limit, each logged to $OUT/<stage>.log, so that what a
# stage stopped at its limit printed still comes back:
#   env    the machine, Python, JAX and its devices;
#   same   the README's main sweep and the CosmoFlow sweep on the GPU in float32 against the
#          CPU in float64, every row and column compared (docs/performance.md#same-bits-on-every-path: float32 within 1e-5 relative);
#   a20    benchmarks.bench section (a) at sweep run's chunk sizes (2^18 / 2^20);
#   a22    section (a) at 2^22 both (the largest chunk decoded in float32);
#   a22q   the same, reducing, with calls queued back to back as a run queues them (--queued);
#   a24    reducing chunks of 2^24 points (int32 decoding), queued;
#   a26    the same at 2^26, the largest chunk (--chunk's limit);
#   bc     sections (b) and (c): sweep run end to end, cold and warm;
#   c24    section (c)'s runs with --chunk 2^24 (spreading a GPU's fixed cost per call);
#   e      section (e): start-up;
#   timings  the bench's tied grid, --keep pareto, a cold run then two warm ones with
#          `sweep run --timings`: where a warm run's time goes (main thread, other threads);
#   tests  the test suite on the GPU (pytest-xdist, 8 workers), one line per test.
# By default env, same, a24, bc, e and tests (about 5 minutes on an H200 in 2026-12; the
# limits add up to 600 s, one call's most). Not by default (STAGES="a20 a22 a22q a26 c24 d
# census" ...): d, section (d), peak RSS; timings; census, what each compiled program is made of
# (on a GPU a fusion is a kernel launched, a conditional a wait for the host).
set -u
OUT=${OUT:-/tmp/device-check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PY:-python3}
STAGES=${STAGES:-"env same a24 bc e tests"}

stage() {
    local name=$1 limit=$2
    shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local start=$SECONDS
    echo "== $name (limit ${limit} s)"
    timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "   exit $? after $((SECONDS - start)) s"
}

env_info() {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    "$PY" --version
    "$PY" -c "import jax, jaxlib, numpy, pyarrow, click; print('jax', jax.__version__, 'jaxlib',
jaxlib.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__); print(jax.devices())"
    nproc
}

same_bits() {
    local tmp
    tmp=$(mktemp -d)
    for spec in paper-resnet50-vgg16 cosmoflow-data-spatial; do
        "$PY" -m sweep.cli run "$spec" -o "$tmp/gpu-$spec" || return 1
        JAX_PLATFORMS=cpu "$PY" -m sweep.cli run "$spec" -o "$tmp/cpu-$spec" --x64 || return 1
        "$PY" - "$tmp/gpu-$spec" "$tmp/cpu-$spec" <<'EOF' || return 1
import sys

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

gpu, cpu = (ds.dataset(p, format="parquet").to_table() for p in sys.argv[1:3])
assert gpu.num_rows == cpu.num_rows, (gpu.num_rows, cpu.num_rows)
keys = [f.name for f in cpu.schema if not pa.types.is_floating(f.type)]
plain = [f.name for f in cpu.schema if not pa.types.is_dictionary(f.type) and f.name in keys]
order = [(k, "ascending") for k in plain]
gpu, cpu = gpu.sort_by(order), cpu.sort_by(order)
worst = ("", 0.0)
for name in cpu.column_names:
    a = np.asarray(gpu.column(name).to_pylist() if name in keys else gpu.column(name).to_numpy())
    b = np.asarray(cpu.column(name).to_pylist() if name in keys else cpu.column(name).to_numpy())
    if name in keys:
        assert (a == b).all(), f"{name}: the rows' configurations differ"
        continue
    a, b = a.astype(np.float64), b.astype(np.float64)
    assert (np.isfinite(a) == np.isfinite(b)).all(), f"{name}: finite in one run only"
    fin = np.isfinite(b)
    rel = np.abs(a[fin] - b[fin]) / np.maximum(np.abs(b[fin]), 1e-300)
    if rel.size and rel.max() > worst[1]:
        worst = (name, float(rel.max()))
print(f"{sys.argv[1]}: {cpu.num_rows} rows, GPU float32 against CPU float64: largest relative difference"
      f" {worst[1]:.2e} ({worst[0]})")
assert worst[1] <= 1e-5, "over 1e-5"
EOF
    done
}

timings() {
    local tmp
    tmp=$(mktemp -d)
    "$PY" -c "import sys; from pathlib import Path; from benchmarks.bench import STRATEGIES, write_spec
write_spec(Path(sys.argv[1]), 'tied', list(STRATEGIES), 100, 1000)" "$tmp" || return 1
    for run in cold warm warm; do
        echo "-- $run"
        SWEEP_JAX_CACHE=$tmp/cache "$PY" -m sweep.cli run "$tmp/tied.toml" -o "$tmp/out" --overwrite \
            --keep pareto:t_epoch_s,p --timings | tail -n 2 || return 1
    done
}

export PY
export -f env_info same_bits timings
stage env 20 bash -c env_info
stage same 80 bash -c same_bits
stage a20 90 "$PY" -m benchmarks.bench --sections a
stage a22 90 "$PY" -m benchmarks.bench --sections a --chunk-log2 22 --reduce-chunk-log2 22
stage a22q 90 "$PY" -m benchmarks.bench --sections a --chunk-log2 20 --reduce-chunk-log2 22 --queued
stage a24 150 "$PY" -m benchmarks.bench --sections a --chunk-log2 20 --reduce-chunk-log2 24 --queued
stage a26 120 "$PY" -m benchmarks.bench --sections a --chunk-log2 20 --reduce-chunk-log2 26 --queued
stage bc 160 "$PY" -m benchmarks.bench --sections bc
stage c24 160 "$PY" -m benchmarks.bench --sections c --run-chunk-log2 24
stage e 30 "$PY" -m benchmarks.bench --sections e
stage timings 90 bash -c timings
stage d 75 "$PY" -m benchmarks.bench --sections d
# pytest-benchmark, if installed, warns under xdist, and the project's filterwarnings makes that an error
stage tests 140 "$PY" -m pytest -p no:cacheprovider -p no:benchmark -n 8 -v --timeout 120 -o addopts=""
stage census 60 "$PY" -m benchmarks.bench --quick --sections a --census

# the end of each log: the reply shows only the last 12,000 characters of the output
for name in $STAGES; do
    [ -f "$OUT/$name.log" ] || continue
    echo "---- $name"
    case $name in
        tests) grep -E "FAILED|ERROR|passed|failed" "$OUT/$name.log" | tail -n 40 ;;
        census) grep -E "census (data|serial) " "$OUT/$name.log" ;;
        *) tail -n 16 "$OUT/$name.log" ;;
    esac
done
