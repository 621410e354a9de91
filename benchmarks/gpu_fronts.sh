#!/usr/bin/env bash
# Fronts at 10^10 points on one GPU, in one call, for a lent GPU machine with JAX (CUDA) and this
# project's dependencies installed; run from the repository root:
#
#     OUT=benchmarks/results/h200-fronts bash benchmarks/gpu_fronts.sh
#
# Stages, each under its own time limit, each logged to $OUT/<stage>.log:
#   env    the machine, Python, JAX and its devices;
#   big    a 1.01e10-point ResNet-50 grid (the 9.2e8-point tied grid of benchmarks/bench_fronts.py
#          with 110 latencies), --keep pareto:t_epoch_s,p with JAX_PLATFORMS=cuda: one cold run,
#          then three warm ones (target: <= 10 s wall each, warm), `sweep run --timings`;
#   same   the 9.2e8-point grid on the GPU (float32) and on the CPU (float32, the machine's
#          cores): the two fronts must hold the same distinct optima (p equal, t_epoch_s within
#          1e-5 relative) and the same tied counts where no float32 rounding splits a tie.
# The limits add up to under 600 s, one call's most.
set -u
OUT=${OUT:-benchmarks/results/gpu-fronts}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PY:-python3}
STAGES=${STAGES:-"env big same"}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

stage() {
    local name=$1 limit=$2
    shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local start=$SECONDS
    echo "== $name (limit ${limit} s)"
    timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "   rc $? in $((SECONDS - start)) s: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ' | cut -c1-400)"
}

grid() { # name latencies -> spec path (the tied grid of benchmarks/bench_fronts.py)
    $PY -c "import sys; from benchmarks.bench_fronts import tied_spec; print(tied_spec(sys.argv[1], int(sys.argv[2])))" "$1" "$2" >"$WORK/$1.toml"
    echo "$WORK/$1.toml"
}

env_stage() {
    nvidia-smi || true
    $PY -c "import sys, jax; print(sys.version); print(jax.__version__, jax.devices())"
    git log --oneline -1 || true
}

big_stage() {
    local spec
    spec=$(grid big 110)
    $PY -m sweep.cli plan "$spec" | head -1
    for run in cold warm1 warm2 warm3; do
        echo "-- $run"
        /usr/bin/time -f "wall %e s, peak RSS %M KB" env JAX_PLATFORMS=cuda SWEEP_JAX_CACHE="$WORK/cache" \
            $PY -m sweep.cli run "$spec" -o "$WORK/big" --overwrite --keep pareto:t_epoch_s,p --timings
    done
}

same_stage() {
    local spec
    spec=$(grid same 10)
    JAX_PLATFORMS=cuda SWEEP_JAX_CACHE="$WORK/cache" $PY -m sweep.cli run "$spec" -o "$WORK/gpu" \
        --overwrite --keep pareto:t_epoch_s,p --timings
    JAX_PLATFORMS=cpu SWEEP_JAX_CACHE="$WORK/cache-cpu" $PY -m sweep.cli run "$spec" -o "$WORK/cpu" \
        --overwrite --keep pareto:t_epoch_s,p --timings
    $PY - "$WORK/gpu" "$WORK/cpu" <<'EOF'
import sys

import numpy as np
import pyarrow.parquet as pq

gpu, cpu = (pq.read_table(f"{d}/part-keep.parquet").sort_by([("p", "ascending"), ("t_epoch_s", "ascending")])
            for d in sys.argv[1:])
print(f"gpu: {gpu.num_rows} optima, {sum(gpu['tied'].to_pylist()):,} configurations;"
      f" cpu: {cpu.num_rows} optima, {sum(cpu['tied'].to_pylist()):,} configurations")
assert gpu.num_rows == cpu.num_rows, "a different number of distinct optima"
assert gpu["p"].to_pylist() == cpu["p"].to_pylist(), "different optima"
t_g, t_c = (np.asarray(t["t_epoch_s"].to_numpy(), np.float64) for t in (gpu, cpu))
worst = float(np.max(np.abs(t_g - t_c) / t_c))
print(f"t_epoch_s: worst relative difference {worst:.3g}")
assert worst <= 1e-5, "objectives beyond float32 tolerance"
same = [g == c for g, c in zip(gpu["tied"].to_pylist(), cpu["tied"].to_pylist())]
print(f"tied counts equal on {sum(same)} of {len(same)} optima")
for name in ("strategy", "b"):
    print(f"{name} equal on {sum(a == b for a, b in zip(gpu[name].to_pylist(), cpu[name].to_pylist()))}"
          f" of {len(same)} optima (the least grid index among ties)")
print("same front: yes")
EOF
}

stage env 60 env_stage
stage big 300 big_stage
stage same 200 same_stage
