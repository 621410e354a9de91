#!/usr/bin/env bash
# Warm `sweep run` of one spec by two versions of the code, alternated, in fresh processes,
# with the medians: the way this project compares versions on a shared, noisy host (a warm
# run alone moved by half within an hour). Run from the repository root:
#
#     bash benchmarks/alternate.sh REV SPEC [RUNS] [-- sweep run options]
#
# e.g. `bash benchmarks/alternate.sh 7315ad4 grids/sweeps/codesign-resnet50-large.toml 5 --
# --keep pareto:t_epoch_s,p`. REV is checked out in a worktree under $TMPDIR; the other
# version is this working tree. Each version has its own compilation cache, warmed by one
# run first; then RUNS (default 5) pairs, the order swapped every pair. The times are the
# runs' own, as `sweep run` prints them (after start-up). Uses this tree's Python
# ($PY, default .venv/bin/python) for both, so both must run on the same dependencies.
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
rev=$1 spec=$(realpath "$2")
shift 2
runs=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    runs=$1
    shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
here=$PWD
py=${PY:-$here/.venv/bin/python}
work=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$work/base" >/dev/null 2>&1; rm -rf "$work"' EXIT
git -C "$here" worktree add --detach "$work/base" "$rev" >/dev/null 2>&1

once() { # version [sweep run options] -> seconds
    local v=$1 root=$here
    shift
    [ "$v" = base ] && root=$work/base
    (cd "$work" && SWEEP_JAX_CACHE="$work/cache-$v" PYTHONPATH="$root" "$py" -m sweep.cli run "$spec" \
        -o "$work/out-$v" --overwrite "$@") | sed -n 's/.* evaluated in \([0-9.]*\) s.*/\1/p'
}

once base "$@" >/dev/null
once this "$@" >/dev/null
declare -A times=([base]="" [this]="")
for i in $(seq "$runs"); do
    order="base this"
    [ $((i % 2)) -eq 0 ] && order="this base"
    for v in $order; do
        times[$v]+="$(once "$v" "$@") "
    done
done
for v in base this; do
    median=$(printf '%s\n' ${times[$v]} | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
    label=$rev
    [ "$v" = this ] && label="working tree"
    echo "$label: median $median s of: ${times[$v]}"
done
