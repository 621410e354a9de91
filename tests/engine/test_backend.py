"""Sizing XLA's CPU thread pool (sweep.backend): the setting, and what start() leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweep.cli.main import cli
from sweep.engine import backend
from sweep.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("cpus", "want"), [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8), (64, 32)])
def test_default_is_half_the_cpus_and_at_least_one(cpus, want):
    assert backend.default_threads(cpus) == want


@pytest.mark.parametrize(
    ("flags", "cpus", "want"),
    [
        ("", 16, 8),
        ("--xla_force_host_platform_device_count=2", 2, 2),  # a thread per device
        ("--xla_force_host_platform_device_count=4", 2, 2),  # but no more than the CPUs
        ("--xla_force_host_platform_device_count=4 --xla_force_host_platform_device_count=3", 16, 8),
        ("--xla_cpu_max_isa=AVX --xla_force_host_platform_device_count=12", 16, 12),
    ],
)
def test_forced_cpu_devices_get_a_thread_each(monkeypatch, flags, cpus, want):
    monkeypatch.setenv("XLA_FLAGS", flags)
    monkeypatch.delenv(backend.THREADS_ENV, raising=False)
    assert backend.threads_wanted(cpus) == want


def test_the_environment_sets_the_threads(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv(backend.THREADS_ENV, " 3 ")
    assert backend.threads_wanted(16) == 3
    monkeypatch.setenv(backend.THREADS_ENV, "")
    assert backend.threads_wanted(16) == 8


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_bad_setting_is_one_line_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv(backend.THREADS_ENV, text)
    with pytest.raises(InputError, match=rf"SWEEP_CPU_THREADS: .*'{text}'"):
        backend.threads_wanted(2)


def test_a_bad_setting_exits_2_from_the_cli(monkeypatch):
    monkeypatch.setenv(backend.THREADS_ENV, "many")
    result = CliRunner().invoke(
        cli,
        [
            "estimate",
            "--model",
            "resnet50",
            "--machine",
            "abci",
            "--strategy",
            "data",
            "--p",
            "4",
            "--b",
            "8",
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: SWEEP_CPU_THREADS: expected a positive whole number of threads, got 'many'"
    ]


START = """
import json, os, sys
from sweep.engine import backend
cpus = os.sched_getaffinity(0)
first = backend.start()
import jax
x = float(jax.numpy.arange(4.0).sum())  # the backend runs
masks = {int(t): sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
print(json.dumps({"cpus": sorted(cpus), "first": first, "again": backend.start(), "x": x, "masks": list(masks.values())}))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity calls on this system")
def test_start_sizes_the_pool_once_and_leaves_no_thread_pinned():
    env = {**os.environ, backend.THREADS_ENV: "1", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run(
        [sys.executable, "-c", START], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    out = json.loads(res.stdout.strip().splitlines()[-1])
    # one thread asked for: set where there is more than one CPU; the backend then exists
    assert out["first"] == (1 if len(out["cpus"]) > 1 else None)
    assert out["again"] is None
    assert out["x"] == 6.0
    # every thread, XLA's pool included, may run on every CPU the process had
    assert out["masks"] and all(mask == out["cpus"] for mask in out["masks"])
