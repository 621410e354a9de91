"""Calibration (sweep.calibrate): gradients, recovery of known parameters, honest cross-validation,
fitted machine files, and the ``sweep calibrate`` command."""

from __future__ import annotations

import dataclasses
import itertools
import json
import tomllib
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

import grids
from sweep.cli.main import cli
from sweep.errors import InputError
from sweep.inputs.machine_toml import to_toml
from sweep.inputs.machines import load_machine, parse_machine
from sweep.inputs.measured import read_measurements
from sweep.trust.calibrate import (
    Objective,
    Problem,
    calibrate,
    cross_validate,
    fit,
    fitted_profile,
    make_folds,
    parse_fit,
)
from sweep.trust.intervals import predictive
from sweep.trust.structure import candidate_params, fit_procedure, parameter_groups
from sweep.trust.validation import predict, summarize, symmetric_accuracy
from tests.helpers import trust_doc

PUBLIC = grids.MEASUREMENTS / "abci_chainer_public.csv"
#: A prior scale that makes every prior flat: the fit is then maximum likelihood.
FLAT = 1e8
#: Known parameters of the synthetic runs: a machine bandwidth, efficiency, two overhead factors
#: and two additive overheads (seconds per iteration, per sample).
TRUTH = {
    "inter_bandwidth_Bps": 8e9,
    "efficiency": 0.8,
    "overheads.data+spatial.compute": 3.0,
    "overheads.data.allreduce": 1.5,
    "overheads.data.per_iter_s": 0.05,
    "overheads.data+spatial.per_sample_s": 2e-3,
}


@pytest.fixture(scope="module")
def abci():
    return load_machine("abci")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory, abci):
    """22 AlexNet runs (data and data+spatial) whose times the model gives at :data:`TRUTH`.

    The times come from the validation path (a fitted machine profile, overheads applied by
    ``point_fn``); the fit goes through :class:`Problem` (``with_params`` and traced overheads).
    """
    rows = [f"alexnet,data,{p},{b},,abci,1.0" for p in (1, 2, 4, 8, 16, 64, 256) for b in (32, 128)]
    rows += [f"alexnet,data+spatial,{p},{b},4,abci,1.0" for p in (4, 8, 32, 128) for b in (32, 128)]
    path = tmp_path_factory.mktemp("synthetic") / "runs.csv"
    path.write_text("model,strategy,p,b,p2,machine,iter_time_s\n" + "\n".join(rows) + "\n")
    truth = fitted_profile(abci, TRUTH, transfer=False)
    times = predict(read_measurements(path, machine=truth)).t_iter_s
    path.write_text(
        "model,strategy,p,b,p2,machine,iter_time_s\n"
        + "\n".join(r.replace(",1.0", f",{float(t)!r}") for r, t in zip(rows, times, strict=True))
        + "\n"
    )
    meas = read_measurements(path, machine=abci)
    problem = Problem(meas, abci, parse_fit(",".join(TRUTH), abci))
    return meas, problem


# ------------------------------------------------------------------------------------ gradients


def _objective_args(problem, free=None):
    k = len(problem.params)
    on = np.ones(k) if free is None else np.asarray(free, np.float64)
    return (jnp.asarray(problem.weights), jnp.asarray(problem.log_meas), jnp.asarray(on),
            jnp.asarray(problem.log_start), jnp.asarray(problem.width))  # fmt: skip


def test_gradient_equals_central_differences(synthetic):
    """The negative log posterior (robust loss, weights, priors): jax.grad against differences."""
    _, problem = synthetic
    args = _objective_args(problem)
    logv = problem.log_start + np.array([0.3, -0.2, 0.5, 0.1, 8.0, 7.0])  # away from the minimum
    value, grad = problem.objective_and_grad(jnp.asarray(logv), *args)
    assert float(value) > 1e-3
    h = 1e-5
    for i in range(len(logv)):
        step = np.zeros_like(logv)
        step[i] = h
        up = float(problem.objective_and_grad(jnp.asarray(logv + step), *args)[0])
        down = float(problem.objective_and_grad(jnp.asarray(logv - step), *args)[0])
        assert float(grad[i]) == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9)


def test_gradient_in_the_bounded_parameters_equals_central_differences(synthetic):
    _, problem = synthetic
    free = np.array([True, True, False, True, True, True])
    obj = Objective(
        problem, free, problem.weights, problem.log_start.copy(), problem.log_start, problem.width
    )
    theta = obj.theta0() + np.array([0.4, -0.3, 0.2, 3.0, 2.0])
    _, grad = obj.fg(theta)
    h = 1e-5
    for i in range(len(theta)):
        step = np.zeros_like(theta)
        step[i] = h
        numeric = (obj.fg(theta + step)[0] - obj.fg(theta - step)[0]) / (2 * h)
        assert grad[i] == pytest.approx(numeric, rel=1e-6, abs=1e-9)
    assert obj.to_logv(theta)[2] == problem.log_start[2]  # a fixed parameter stays put


# ------------------------------------------------------------------------------------- recovery


@pytest.mark.parametrize("perturb", [(1.7, 0.7, 0.5, 2.0, 0.1, 3.0), (0.4, 0.95, 3.0, 0.6, 4.0, 0.2)])
def test_calibration_recovers_known_parameters(synthetic, perturb):
    _, problem = synthetic
    truth = np.array(list(TRUTH.values()))
    start = np.log(truth * np.array(perturb) + problem.floor)
    result = fit(problem, start=start, prior_scale=FLAT)
    assert result.converged and not result.at_bound.any()
    fitted = problem.values(result.logv)
    np.testing.assert_allclose(list(fitted.values()), truth, rtol=1e-3)
    assert result.loss < 1e-9


def test_additive_overheads_start_at_zero_and_are_recovered_from_it(synthetic):
    """From the default start (additive overheads at 0, factors at 1), the fit still finds them."""
    _, problem = synthetic
    assert problem.values(problem.log_start)["overheads.data.per_iter_s"] == 0.0
    result = fit(problem, prior_scale=FLAT)
    assert result.converged and result.loss < 1e-9
    np.testing.assert_allclose(list(problem.values(result.logv).values()), list(TRUTH.values()), rtol=1e-3)


def test_the_default_start_is_the_profiles_values(synthetic, abci):
    _, problem = synthetic
    assert problem.values(problem.log_start) == pytest.approx(
        {
            "inter_bandwidth_Bps": 12.5e9,
            "efficiency": 1.0,
            "overheads.data+spatial.compute": 1.0,
            "overheads.data.allreduce": 1.0,
            "overheads.data.per_iter_s": 0.0,
            "overheads.data+spatial.per_sample_s": 0.0,
        }
    )


# ----------------------------------------------------------------------------- parameter names


def test_parse_fit_names_and_bounds(abci):
    params = parse_fit(["inter_bandwidth_Bps=1e9:1e11,efficiency", "overheads.data+filter.comm"], abci)
    assert [(p.name, p.lo, p.hi, p.start) for p in params] == [
        ("inter_bandwidth_Bps", 1e9, 1e11, 12.5e9),
        ("efficiency", 0.01, 1.0, 1.0),
        ("overheads.data+filter.comm", 0.1, 1000.0, 1.0),
    ]
    assert params[2].overhead == ("data+filter", ("allreduce", "allgather", "halo", "p2p"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("warp_speed", "unknown parameter"),
        ("gpus_per_node", "cannot be fitted"),
        ("gpu_mem_bytes", "cannot be fitted"),
        ("allreduce_algo", "cannot be fitted"),
        ("overheads.tensor.compute", "unknown strategy 'tensor'"),
        ("overheads.data.disk", "unknown term 'disk'"),
        ("overheads.data.per_epoch_s", "per_iter_s, per_sample_s"),
        ("efficiency=0.1:2", "bounds must lie in (0, 1]"),
        ("inter_bandwidth_Bps=5e9:1e9", "bounds must be 0 < LO < HI"),
        ("inter_bandwidth_Bps=fast", "NAME or NAME=LO:HI"),
        ("efficiency,efficiency", "named twice"),
        (",", "names no parameter"),
    ],
)
def test_parse_fit_refuses_bad_names(abci, text, needle):
    with pytest.raises(InputError) as err:
        parse_fit(text, abci)
    assert needle in str(err.value)


# ------------------------------------------------------------------- the public file, calibrated


@pytest.fixture(scope="module")
def public(abci):
    meas = read_measurements(PUBLIC, machine=abci)
    return meas, calibrate(meas, abci, None, cv=5)


def test_default_calibration_chooses_a_structure_never_worse_than_nothing(public):
    meas, cal = public
    chosen = cal.chosen
    assert chosen is not None and chosen.structure == cal.structure
    assert not chosen.flagged  # no held-out group below its uncalibrated accuracy
    assert chosen.accuracy == max(c.accuracy for c in cal.candidates if not c.flagged)
    labels = [c.structure.label for c in cal.candidates]
    assert labels[0] == "uncalibrated" and len(set(labels)) == len(labels)
    t = np.array([r.iter_time_s for r in meas.runs])
    assert chosen.accuracy > symmetric_accuracy(cal.uncalibrated_s, t).mean()
    assert cal.fit.converged or cal.fit.iterations == 2000
    # shared, physical parameters at physical values: none at a bound (additive seconds may sit at 0)
    for p, free, edge in zip(cal.problem.params, cal.fit.free, cal.fit.at_bound, strict=True):
        if free and not p.additive:
            assert not edge, p.name
    # AlexNet's single-GPU runs take 1.5x to 1.9x its profiled time: its compute scale is above 1,
    # fitted on them first
    assert cal.fitted["model.alexnet.compute"] > 1


def test_calibration_improves_the_fitted_runs_and_cross_validates(public):
    meas, cal = public
    t = np.array([r.iter_time_s for r in meas.runs])
    uncal = symmetric_accuracy(cal.uncalibrated_s, t).mean()
    train = symmetric_accuracy(cal.train_s, t).mean()
    assert uncal < 0.35 < 0.5 < train  # the hybrids are far slower than the ideal model
    assert np.isfinite(cal.cv_s).all()
    assert 0.4 < symmetric_accuracy(cal.cv_s, t).mean() <= train + 0.05
    assert 0.7 <= cal.cv_intervals.coverage <= 0.95


def test_uncalibrated_equals_the_validation_path(public, public_uncalibrated):
    _, cal = public
    np.testing.assert_allclose(cal.uncalibrated_s, public_uncalibrated[1].t_iter_s, rtol=1e-12)


def test_fitted_machine_file_reproduces_the_calibrated_predictions(public, abci, tmp_path):
    _meas, cal = public
    profile = cal.profile("abci-fit")
    path = tmp_path / "abci-fit.toml"
    path.write_text(to_toml(profile, ("a comment",)))
    loaded = load_machine(str(path))
    assert loaded.name == "abci-fit" and loaded.measured_key == "abci"
    assert loaded.ref_rate_flops == abci.ref_rate_flops
    assert loaded.overheads == profile.overheads
    assert loaded.compute_scale == profile.compute_scale and "alexnet" in loaded.compute_scale
    assert loaded.posterior is not None and loaded.posterior.params == profile.posterior.params
    again = read_measurements(PUBLIC, machine=loaded)
    np.testing.assert_allclose(predict(again).t_iter_s, cal.train_s, rtol=1e-10)
    # the intervals the file reproduces: the same from the file (covariance to 6 digits) as in memory
    keep = [i for i, r in enumerate(again.runs) if (r.model, r.strategy) == ("resnet50", "data")]
    t, lo, hi = predictive(again.subset(keep), loaded)
    _, lo0, hi0 = predictive(read_measurements(PUBLIC, machine=profile).subset(keep), profile)
    np.testing.assert_allclose(t, cal.train_s[keep], rtol=1e-10)
    np.testing.assert_allclose(lo, lo0, rtol=1e-4)
    np.testing.assert_allclose(hi, hi0, rtol=1e-4)
    assert (lo < t).all() and (t < hi).all()


def test_leave_one_model_out_never_sees_the_rows_it_predicts(public):
    meas, cal = public
    problem = cal.problem
    folds = make_folds(meas, "model")
    assert len(folds) == 4  # alexnet, vgg16, resnet50, cosmoflow-512
    masks = candidate_params(meas, cal.problem.profile, parameter_groups(meas))[1]

    def fitter(w):
        return fit_procedure(problem, masks, cal.structure, w)

    held_out = cross_validate(problem, folds, fitter)[0]
    alexnet = np.array([r.model == "alexnet" for r in meas.runs])
    saved = problem.log_meas.copy()
    try:  # change the measured times of the held-out model: its predictions must not move
        problem.log_meas = saved + np.where(alexnet, 1.0, 0.0)
        moved = cross_validate(problem, folds, fitter)[0]
    finally:
        problem.log_meas = saved
    np.testing.assert_allclose(moved[alexnet], held_out[alexnet], rtol=1e-12)
    assert not np.allclose(moved[~alexnet], held_out[~alexnet])


def test_folds_are_deterministic_and_cover_every_run(public):
    meas, _ = public
    a, b = make_folds(meas, 5), make_folds(meas, 5)
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert (np.sum(a, axis=0) == 1).all()
    with pytest.raises(InputError, match="at least 2 folds"):
        make_folds(meas, 1)


def test_overheads_are_fitted_on_top_of_the_profiles_own(abci):
    base = fitted_profile(
        abci, {"overheads.data.compute": 3.0, "overheads.data.per_iter_s": 0.25}, transfer=False
    )
    param = parse_fit("overheads.data.compute", base)[0]
    assert (param.start, param.lo, param.hi) == (1.0, 0.1, 1000.0)
    additive = parse_fit("overheads.data.per_iter_s", base)[0]
    assert (additive.start, additive.lo, additive.hi, additive.floor) == (0.0, 0.0, 100.0, 1e-5)
    fitted = {"overheads.data.compute": 2.0, "overheads.data.per_iter_s": 0.5, "inter_alpha_s": 1e-5}
    again = fitted_profile(base, fitted)
    assert again.overheads == {"data": {"compute": 6.0, "per_iter_s": 0.75}}  # factors multiply, seconds add
    assert again.measured_key == "abci" and again.inter_alpha_s[0] == 1e-5


def test_additive_overhead_names_and_bounds(abci):
    params = parse_fit("overheads.data+spatial.per_sample_s,overheads.data.per_iter_s=0.01:2", abci)
    assert [(p.name, p.lo, p.hi, p.start, p.additive) for p in params] == [
        ("overheads.data+spatial.per_sample_s", 0.0, 1.0, 0.0, True),
        ("overheads.data.per_iter_s", 0.01, 2.0, 0.0, True),
    ]
    assert params[0].overhead == ("data+spatial", ("per_sample_s",))
    assert not parse_fit("overheads.data.all", abci)[0].additive
    with pytest.raises(InputError, match="bounds must be 0 <= LO < HI seconds"):
        parse_fit("overheads.data.per_iter_s=-1:2", abci)


def test_a_strategy_fitted_on_its_own_transfers_only_when_asked(abci):
    fitted = {
        "overheads.data+filter.all": 10.0,
        "overheads.filter.compute": 2.0,
        "overheads.data+spatial.halo": 3.0,
    }
    on = fitted_profile(abci, fitted)
    assert on.overheads["filter"] == {"compute": 2.0}  # fitted itself: not overwritten
    assert on.overheads["spatial"] == {"halo": 3.0}
    assert "spatial" not in fitted_profile(abci, fitted, transfer=False).overheads


def test_the_documented_accuracy_table_is_what_the_code_computes(public, public_uncalibrated):
    """docs/trust.md's table: uncalibrated, leave-one-model-out and 5-fold held-out accuracies."""
    meas, cal = public
    lomo = cal.chosen.held_out_s
    columns = {
        "uncalibrated": summarize(meas, public_uncalibrated[1].t_iter_s),
        "lomo": summarize(meas, lomo),
        "5-fold": summarize(meas, cal.cv_s),
    }
    table = {}
    for line in trust_doc().splitlines():
        cells = [c.replace("**", "").strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[2].isdigit():
            table[(cells[0], cells[1])] = cells
    # a row per (model, strategy) group of the file, 6 + 3 + 6 + 1 = 16 (AlexNet, VGG16, ResNet-50,
    # CosmoFlow-512; test_measured), and the overall row
    assert len(table) == 16 + 1
    for i, summary in enumerate(columns["uncalibrated"]):
        row = table[(summary.model, summary.strategy)]
        assert int(row[2]) == summary.n
        assert row[3] == f"{summary.acc_mean:.3f} ({summary.mean_ratio:.3f})"
        assert row[4] == f"{columns['lomo'][i].acc_mean:.3f}"
        assert row[5] == f"{columns['5-fold'][i].acc_mean:.3f}"


# ------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    monkeypatch.setenv("SWEEP_JAX_CACHE", "")
    return CliRunner()


def small_csv(tmp_path: Path, runs: int | None = None) -> Path:
    """The public file's ResNet-50 data-parallel runs (18), or the first ``runs`` of them."""
    lines = PUBLIC.read_text().splitlines()
    path = tmp_path / "data.csv"
    rows = [x for x in lines if x.startswith("resnet50,data,")][:runs]
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    return path


def test_cli_calibrate_writes_a_machine_the_other_commands_accept(runner, tmp_path):
    csv_path = small_csv(tmp_path)
    out = tmp_path / "fit.toml"
    result = runner.invoke(
        cli, ["calibrate", str(csv_path), "--machine", "abci", "--fit", "overheads.data.compute,overheads.data.comm",
              "--cv", "5", "-o", str(out), "--name", "abci-data"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "overheads.data.compute" in result.stdout and "5-fold cross-validated accuracy" in result.stdout
    train = float(result.stdout.split("train accuracy ")[1].split(";")[0])
    doc = tomllib.loads(out.read_text())
    assert doc["name"] == "abci-data" and set(doc["overheads"]) == {"data"}
    assert f"Train accuracy (mean symmetric, fitted runs): {train:.4f}" in out.read_text()
    assert parse_machine(doc, str(out)).overheads["data"]["compute"] > 0

    est = runner.invoke(cli, ["estimate", "--model", "resnet50", "--machine", str(out), "--strategy", "data",
                              "--p", "1", "--b", "64", "--json"])  # fmt: skip
    assert est.exit_code == 0, est.output
    row = json.loads(est.stdout)
    assert row["machine"] == "abci-data"
    assert row["t_iter_s"] == pytest.approx(0.2 * doc["overheads"]["data"]["compute"], rel=0.01)

    val = runner.invoke(cli, ["validate", str(csv_path), "--machine", str(out), "--summary"])
    assert val.exit_code == 0, val.output
    overall = next(x for x in val.stdout.splitlines() if x.startswith("all ")).split()
    assert overall[:2] == ["all", "all"] and float(overall[-1]) == pytest.approx(train, abs=5e-4)
    assert "80% intervals cover" in val.stdout  # a calibrated file carries its intervals
    assert row["t_iter_s_lo"] < row["t_iter_s"] < row["t_iter_s_hi"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--fit", "warp_speed"], "unknown parameter"),
        (["--cv", "one"], "--cv must be"),
        (["--cv", "1"], "--cv needs 0"),
        (["-o", "fit.json"], "-o must end in .toml"),
        (["--cv", "model"], "at least two models"),
    ],
)
def test_cli_calibrate_errors_are_one_line(runner, tmp_path, args, needle):
    result = runner.invoke(cli, ["calibrate", str(small_csv(tmp_path)), "--machine", "abci", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], result.stderr


def test_cli_calibrate_needs_a_machine(runner, tmp_path):
    result = runner.invoke(cli, ["calibrate", str(small_csv(tmp_path))])
    assert result.exit_code == 2 and "--machine" in result.output


@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_help_has_an_example(runner, command):
    result = runner.invoke(cli, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_every_strategy_pair_has_a_fit_name(abci):
    names = [
        f"overheads.{s}.{t}" for s, t in itertools.product(("data", "pipeline"), ("compute", "p2p", "all"))
    ]
    assert [p.name for p in parse_fit(names, abci)] == names
    assert dataclasses.asdict(parse_fit("overheads.pipeline.p2p=0.5:4", abci)[0])["lo"] == 0.5


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--loss", "cubic"], "cubic"),
        (["--loss-scale", "0"], "--loss-scale must be a number > 0"),
        (["--prior-scale", "-1"], "--prior-scale must be a number > 0"),
        (["--quality-weight", "fair"], "QUALITY=WEIGHT"),
    ],
)
def test_cli_calibrate_refuses_bad_objective_options(runner, tmp_path, args, needle):
    result = runner.invoke(cli, ["calibrate", str(small_csv(tmp_path)), "--machine", "abci", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output + result.stderr


def test_runs_inside_one_node_leave_the_collective_factors_out(tmp_path, abci):
    """A default fit on runs that never leave a node (p <= gpus_per_node = 4 on abci) moves the
    intra-node link but fits no factor on a collective's whole time (collective.<kind>,
    overheads.<strategy>.comm): such a factor would be carried to the inter-node collectives of
    larger runs that it never saw (docs/trust.md). One run across nodes brings them back."""
    head = "model,strategy,p,b,machine,iter_time_s\n"
    inside = [f"alexnet,data,{p},32,abci,0.1" for p in (1, 2, 4)]
    path = tmp_path / "one_node.csv"
    path.write_text(head + "\n".join(inside) + "\n")
    groups = parameter_groups(read_measurements(path, machine=abci))
    assert groups["collectives"] == []
    assert groups["factors"] == ["overheads.data.compute"]
    assert "intra_bandwidth_Bps" in groups["network"]
    path.write_text(head + "\n".join([*inside, "alexnet,data,8,32,abci,0.1"]) + "\n")
    groups = parameter_groups(read_measurements(path, machine=abci))
    assert "collective.allreduce" in groups["collectives"]
    assert groups["factors"] == ["overheads.data.compute", "overheads.data.comm"]
