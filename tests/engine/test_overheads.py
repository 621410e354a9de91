"""Machine files with ``[overheads.<strategy>]`` and ``[measured]`` tables, written and read back,
and the overheads applied by ``point_fn`` (calibrated profiles, docs/trust.md)."""

from __future__ import annotations

import dataclasses
import json
import tomllib

import jax
import numpy as np
import pytest

import grids
from kernels.network import KINDS
from sweep.engine.evaluate import estimate, point_fn
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machine_toml import to_toml
from sweep.inputs.machines import builtin_names, load_machine, parse_machine
from sweep.inputs.models import load_model
from tests.helpers import config

ABCI_TEXT = (grids.MACHINES / "abci.toml").read_text()


def with_tables(extra: str) -> dict:
    return tomllib.loads(ABCI_TEXT + "\n" + extra)


def test_overheads_and_measured_tables_are_read_and_described():
    doc = with_tables(
        '[measured]\nmachine = "abci"\nrate_flops = 7.8e12\n'
        '[overheads."data+spatial"]\ncompute = 2\nhalo = 0.5\n[overheads.data]\nallreduce = 1.5\n'
    )
    doc["name"] = "abci-cal"
    profile = parse_machine(doc, "m.toml")
    assert profile.overheads == {"data+spatial": {"compute": 2.0, "halo": 0.5}, "data": {"allreduce": 1.5}}
    assert (profile.measured_key, profile.ref_rate_flops) == ("abci", 7.8e12)
    described = json.loads(json.dumps(profile.describe()))
    assert described["overheads"]["data+spatial"]["compute"] == 2.0
    assert described["measured"] == {"machine": "abci", "rate_flops": 7.8e12}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("[overheads.tensor]\ncompute = 2\n", "key 'overheads.tensor': unknown strategy"),
        ("[overheads.data]\ndisk = 2\n", "key 'overheads.data.disk': unknown term"),
        ("[overheads.data]\ncompute = 0\n", "key 'overheads.data.compute': must be > 0"),
        ("[overheads.data]\nper_iter_s = -0.1\n", "key 'overheads.data.per_iter_s': must be >= 0 seconds"),
        ('[overheads.data]\nper_sample_s = "1ms"\n', "key 'overheads.data.per_sample_s': must be a number"),
        (
            "[overheads.data]\nper_epoch_s = 1\n",
            "unknown term (known: compute, allreduce, allgather, halo, p2p, per_iter_s, per_sample_s, per_input_s)",
        ),
        ("[overheads.data]\ncompute = -1.5\n", "must be > 0"),
        ('[overheads.data]\ncompute = "x"\n', "must be a number"),
        ("[overheads]\ndata = 3\n", "key 'overheads.data': must be a table of compute, allreduce"),
        ('[measured]\nmachine = "abci"\n', "key 'measured.rate_flops': missing required key"),
        ('[measured]\nmachine = "abci"\nrate_flops = -1\n', "key 'measured.rate_flops': must be > 0"),
        ("[measured]\nrate_flops = 1e12\n", "key 'measured.machine'"),
        ('[measured]\nmachine = "abci"\nrate_flops = 1e12\nextra = 1\n', "key 'measured.extra': unknown key"),
    ],
)
def test_bad_tables_are_one_line_errors_naming_the_key(extra, needle):
    with pytest.raises(InputError) as err:
        parse_machine(with_tables(extra), "m.toml")
    assert needle in str(err.value) and str(err.value).startswith("m.toml: ")


def test_overheads_must_be_a_table():
    doc = with_tables("")
    doc["overheads"] = 3
    with pytest.raises(InputError, match=r"^m\.toml: key 'overheads': must be a table"):
        parse_machine(doc, "m.toml")


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_round_trips_through_to_toml(name):
    profile = load_machine(name)
    again = parse_machine(tomllib.loads(to_toml(profile, ("comment",))), profile.source)
    assert again == dataclasses.replace(profile, description=profile.description)


def test_overrides_and_fitted_values_are_written_in():
    profile = load_machine("abci").with_overrides({"inter_alpha_s": 1e-5, "wu_passes": 0})
    baked = parse_machine(tomllib.loads(to_toml(profile)), "x")
    assert baked.overrides == {} and baked.params["wu_passes"] == 0
    assert baked.inter_alpha_s == pytest.approx((1e-5, 1e-5 + 0.18e-6, 1e-5 + 0.67e-6), rel=1e-12)


def test_additive_overheads_are_read_and_round_trip():
    doc = with_tables('[overheads."data+spatial"]\ncompute = 0.25\nper_sample_s = 4.45e-3\nper_iter_s = 0\n')
    profile = parse_machine(doc, "m.toml")
    assert profile.overheads == {
        "data+spatial": {"compute": 0.25, "per_sample_s": 4.45e-3, "per_iter_s": 0.0}
    }
    again = parse_machine(tomllib.loads(to_toml(profile)), "m.toml")
    assert again.overheads == profile.overheads


def test_point_fn_applies_additive_overheads(small_net, small_machine):
    cfg = config(4, 8, p2=2)
    plain = jax.jit(point_fn("data+spatial", ()))(small_net, small_machine, cfg, ())
    table = {"data+spatial": {"per_iter_s": 0.5, "per_sample_s": 0.01}}
    added = jax.jit(point_fn("data+spatial", (), overheads=table))(small_net, small_machine, cfg, ())
    its = float(plain[0].iterations)
    assert float(added[0].t_comp_s) == pytest.approx(
        float(plain[0].t_comp_s) + its * (0.5 + 0.01 * 8), rel=1e-12
    )
    assert float(added[1].t_iter_s) == pytest.approx(float(plain[1].t_iter_s) + 0.58, rel=1e-12)
    assert float(added[0].t_allreduce_s) == float(plain[0].t_allreduce_s)


def test_point_fn_applies_the_overheads_of_its_strategy(small_net, small_machine):
    cfg = config(4, 8, p2=2)
    plain = jax.jit(point_fn("data+spatial", ()))(small_net, small_machine, cfg, ())[0]
    table = {"data+spatial": {"compute": 2.0, "halo": 3.0}, "data": {"compute": 100.0}}
    scaled = jax.jit(point_fn("data+spatial", (), overheads=table))(small_net, small_machine, cfg, ())[0]
    assert float(scaled.t_comp_s) == pytest.approx(2 * float(plain.t_comp_s), rel=1e-14)
    assert float(scaled.t_halo_s) == pytest.approx(3 * float(plain.t_halo_s), rel=1e-14)
    assert float(scaled.t_allreduce_s) == float(plain.t_allreduce_s)  # not named: unchanged


def test_estimate_uses_the_profiles_overheads_and_measured_time(tmp_path):
    text = ABCI_TEXT.replace('name = "abci"', 'name = "abci-slow"')
    text += '\n[measured]\nmachine = "abci"\nrate_flops = 7.8e12\n[overheads.data]\ncompute = 2\n'
    path = tmp_path / "slow.toml"
    path.write_text(text)
    model = load_model("resnet50")
    base = estimate(Bound.of(model, load_machine("abci")), "data", 4, 32)
    slow = estimate(Bound.of(model, load_machine(str(path))), "data", 4, 32)
    assert slow["machine"] == "abci-slow"
    assert slow["t_comp_s"] == pytest.approx(2 * base["t_comp_s"], rel=1e-12)  # measured time kept
    assert slow["t_allreduce_s"] == pytest.approx(base["t_allreduce_s"], rel=1e-12)
    # without [measured], a renamed abci falls back to FLOPs: a different compute time
    path.write_text(ABCI_TEXT.replace('name = "abci"', 'name = "abci-slow"'))
    flops = estimate(Bound.of(model, load_machine(str(path))), "data", 4, 32)
    assert flops["t_comp_s"] != pytest.approx(base["t_comp_s"], rel=1e-3)


# --------------------------------------------------------- measured compute, keyed by machine name


def per_sample_compute_s(model, machine: str) -> float:
    """``t_comp = D sum(t) + I sum(u)`` (docs/model.md §10.2, data with p = 1), solved for ``sum(t)``."""
    row = estimate(Bound.of(model, load_machine(machine)), "data", 1, 64)
    params = load_machine(machine).params
    update_s = (
        params["wu_passes"]
        * params["bytes_per_element"]
        * model.describe()["weights"]
        / params["gpu_mem_bw_Bps"]
    )
    return (row["t_comp_s"] - row["iterations"] * update_s) / model.dataset_samples


def test_measured_per_sample_time_applies_on_its_machine_only():
    from kernels.network import forward_flops
    from sweep.inputs.layers import to_arrays

    model = load_model("resnet50")
    # abci: ParaDL's measured 3.119502 ms per sample (docs/model.md §3)
    assert per_sample_compute_s(model, "abci") == pytest.approx(3.119502e-3, rel=1e-9)
    # elsewhere: from FLOPs, the profile's per-kind roofline (docs/model.md §3), summed here
    # kind by kind from the layers, not from the kernels' tables
    a = to_arrays(model)
    per_layer = 3 * forward_flops(a.kind, a.x, a.w, a.y)
    flops = per_layer.sum()
    traffic = np.prod(a.x, axis=1) + np.prod(a.y, axis=1)
    a100 = load_machine("dgx-a100").params
    roofline = sum(
        max(
            per_layer[a.kind == k].sum()
            / (a100["gpu_flops"] * a100["efficiency"] * a100[f"efficiency_{kind}"]),
            a100["mem_passes"]
            * a100["bytes_per_element"]
            * traffic[a.kind == k].sum()
            / a100["gpu_mem_bw_Bps"],
        )
        for k, kind in enumerate(KINDS)
    )
    assert per_sample_compute_s(model, "dgx-a100") == pytest.approx(roofline, rel=1e-9)
    # a model measured on dgx-a100 uses that time there, and FLOPs on abci
    measured = dataclasses.replace(model, measured_s={"dgx-a100": 1e-3})
    assert per_sample_compute_s(measured, "dgx-a100") == pytest.approx(1e-3, rel=1e-9)
    abci = load_machine("abci")
    abci_rate = abci.params["gpu_flops"] * abci.params["efficiency"]
    assert per_sample_compute_s(measured, "abci") == pytest.approx(flops / abci_rate, rel=1e-9)


def test_sweep_run_applies_additive_overheads(tmp_path, monkeypatch):
    """The engine evaluates a calibrated profile's additive overheads as ``estimate`` does."""
    import pyarrow.dataset as ds
    from click.testing import CliRunner

    from sweep.cli.main import cli

    monkeypatch.setenv("SWEEP_JAX_CACHE", "")
    text = ABCI_TEXT.replace('name = "abci"', 'name = "abci-add"')
    text += '\n[measured]\nmachine = "abci"\nrate_flops = 7.8e12\n'
    text += '[overheads."data+spatial"]\ncompute = 0.5\nper_iter_s = 0.125\nper_sample_s = 4e-3\n'
    (tmp_path / "add.toml").write_text(text)
    (tmp_path / "spec.toml").write_text(
        'name = "add"\nmodel = "alexnet"\nmachine = "add.toml"\nstrategies = ["data+spatial"]\n'
        "[axes]\np = [8, 64]\nb = [32, 512]\np2 = [4]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "spec.toml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = ds.dataset(tmp_path / "out", format="parquet").to_table().to_pylist()
    assert len(rows) == 4
    plain = Bound.of(load_model("alexnet"), load_machine("abci"))
    for row in rows:
        want = estimate(plain, "data+spatial", row["p"], row["b"], 4)
        added = 0.5 * want["t_comp_s"] + want["iterations"] * (0.125 + 4e-3 * row["b"])
        assert row["t_comp_s"] == pytest.approx(added, rel=1e-5)  # float32 sweep
