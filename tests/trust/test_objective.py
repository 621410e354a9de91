"""The MAP fit (sweep.trust.objective, problem, intervals, structure, rankings): weights, priors and
robust losses move the fit in the documented direction, the fit recovers known parameters from
noisy synthetic runs with intervals that cover them, one outlier cannot move a shared parameter,
and the rankings and flags count as defined."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from sweep.errors import InputError
from sweep.inputs.machine_toml import to_toml
from sweep.inputs.machines import load_machine, parse_machine
from sweep.inputs.measured import read_measurements
from sweep.trust.calibrate import fitted_profile
from sweep.trust.fit import fit
from sweep.trust.intervals import covariance, spread, z_of
from sweep.trust.objective import Settings, parse_quality, run_weights
from sweep.trust.problem import Problem, make_param
from sweep.trust.rankings import pooled, rankings
from sweep.trust.structure import flags
from sweep.trust.validation import predict

#: Known parameters of the synthetic runs: a model's compute scale, the inter-node bandwidth shared
#: by every strategy, and data+spatial's implementation overheads (a factor, seconds per sample).
TRUTH = {
    "model.alexnet.compute": 1.3,
    "inter_bandwidth_Bps": 6e9,
    "overheads.data+spatial.compute": 3.0,
    "overheads.data+spatial.per_sample_s": 1e-3,
}
SHARED = ("model.alexnet.compute", "inter_bandwidth_Bps")
NOISE = 0.05  # log-normal noise of the synthetic measurements
HEADER = "model,strategy,p,b,p2,machine,iter_time_s,quality"


@pytest.fixture(scope="module")
def abci():
    return load_machine("abci")


def _rows() -> list[str]:
    rows = [f"alexnet,data,{p},{b},,abci" for p in (1, 2, 4, 8, 16, 64, 256) for b in (32, 128)]
    return rows + [f"alexnet,data+spatial,{p},{b},4,abci" for p in (4, 8, 32, 128) for b in (32, 128)]


def _write(path: Path, rows: list[str], times, quality: list[str] | None = None) -> Path:
    quality = quality or ["good"] * len(rows)
    body = [f"{r},{float(t)!r},{q}" for r, t, q in zip(rows, times, quality, strict=True)]
    path.write_text(HEADER + "\n" + "\n".join(body) + "\n")
    return path


@pytest.fixture(scope="module")
def truth_times(tmp_path_factory, abci):
    """The 22 runs' times as the model gives them at :data:`TRUTH` (the validation path)."""
    rows = _rows()
    path = _write(tmp_path_factory.mktemp("truth") / "runs.csv", rows, np.ones(len(rows)))
    truth = fitted_profile(abci, TRUTH, transfer=False)
    return rows, predict(read_measurements(path, machine=truth)).t_iter_s


def _problem(tmp_path, abci, rows, times, labels=None, **settings) -> Problem:
    meas = read_measurements(_write(tmp_path / "runs.csv", rows, times, labels), machine=abci)
    return Problem(meas, abci, [make_param(n, abci) for n in TRUTH], Settings(**settings))


def _noisy(truth_times, seed=1):
    rows, times = truth_times
    return rows, times * np.exp(NOISE * np.random.default_rng(seed).standard_normal(len(times)))


# --------------------------------------------------------------------------------------- weights


def test_run_weights_follow_quality_and_spread(tmp_path, abci):
    path = tmp_path / "w.csv"
    path.write_text(
        "model,strategy,p,b,machine,iter_time_s,iter_time_std_s,quality\n"
        "resnet50,data,8,64,abci,0.2,,good\n"
        "resnet50,data,8,64,abci,0.2,,fair\n"  # the same configuration measured twice: both kept
        "resnet50,data,8,64,abci,0.2,0.04,good\n"  # spread 0.2 = SPREAD_REF: half weight
        "resnet50,data,8,64,abci,0.2,,\n"
    )
    meas = read_measurements(path, machine=abci)
    np.testing.assert_allclose(run_weights(meas, Settings()), [1.0, 0.1, 0.5, 1.0])
    heavier = Settings(quality=parse_quality("fair=0.5"))
    np.testing.assert_allclose(run_weights(meas, heavier), [1.0, 0.5, 0.5, 1.0])
    with pytest.raises(InputError, match="QUALITY=WEIGHT"):
        parse_quality("fair")
    with pytest.raises(InputError, match=r"^loss: unknown loss"):
        Settings(loss="cubic")


# -------------------------------------------------------------------------------------- recovery


def test_the_fit_recovers_known_parameters_from_noisy_runs_and_its_intervals_cover_them(
    tmp_path, abci, truth_times
):
    """Gaussian noise of 5 % and the matching loss (l2, scale 0.05): the MAP fit lands near the
    truth and the Laplace 99 % interval of every parameter covers it."""
    rows, times = _noisy(truth_times)
    problem = _problem(tmp_path, abci, rows, times, loss="l2", scale=NOISE)
    result = fit(problem)
    assert result.converged
    cov = covariance(problem, result, problem.weights)
    sd = np.sqrt(np.diag(cov))
    truth = np.log(np.array(list(TRUTH.values())) + problem.floor)
    fitted = problem.values(result.logv)
    for i, name in enumerate(TRUTH):
        assert abs(result.logv[i] - truth[i]) <= z_of(0.99) * sd[i], (name, fitted[name], sd[i])
    for name in SHARED:
        assert fitted[name] == pytest.approx(TRUTH[name], rel=0.1)


def test_the_hessian_by_differences_of_the_gradient_equals_jax_hessian(tmp_path, abci, truth_times):
    rows, times = _noisy(truth_times)
    problem = _problem(tmp_path, abci, rows, times)
    result = fit(problem)
    args = (result.logv, problem.weights, result.free, result.prior.center, result.prior.width)
    np.testing.assert_allclose(
        problem.hessian(*args), problem.hessian(*args, exact=True), rtol=1e-5, atol=1e-6
    )


# -------------------------------------------------------------------------------- priors, weights


def test_narrower_priors_keep_the_fit_nearer_the_profile(tmp_path, abci, truth_times):
    rows, times = _noisy(truth_times)
    problem = _problem(tmp_path, abci, rows, times)
    wide, narrow = fit(problem, prior_scale=1.0), fit(problem, prior_scale=0.05)
    for i, p in enumerate(problem.params):
        if p.additive:  # half-normal around 0: the value itself shrinks
            assert problem.values(narrow.logv)[p.name] < problem.values(wide.logv)[p.name]
        else:
            assert abs(narrow.logv[i] - problem.log_start[i]) < abs(wide.logv[i] - problem.log_start[i])


def test_a_heavier_weight_pulls_the_fit_toward_those_runs(tmp_path, abci, truth_times):
    """Each data-parallel run measured twice: a `good` log at the model's time and a `fair` one 3x
    slower. The fair runs pull AlexNet's compute scale up, more when they weigh more."""
    rows, times = truth_times
    data = [i for i, r in enumerate(rows) if ",data," in r]
    all_rows = rows + [rows[i] for i in data]
    all_times = np.concatenate([times, 3.0 * times[data]])
    quality = ["good"] * len(rows) + ["fair"] * len(data)
    scale = {}
    for w in (0.1, 1.0):
        problem = _problem(tmp_path, abci, all_rows, all_times, quality, quality={"good": 1.0, "fair": w})
        scale[w] = problem.values(fit(problem).logv)["model.alexnet.compute"]
    assert TRUTH["model.alexnet.compute"] <= scale[0.1] < scale[1.0]


# ---------------------------------------------------------------------------------------- outlier

#: A run 10x its configuration's time moves no shared parameter by more than this (relative).
OUTLIER_BOUND = 0.05


def test_a_10x_outlier_run_moves_no_shared_parameter_beyond_the_bound(tmp_path, abci, truth_times):
    rows, times = _noisy(truth_times)
    bad = times.copy()
    bad[rows.index("alexnet,data,16,128,,abci")] *= 10.0
    moved = {}
    for loss in ("cauchy", "l2"):
        clean = _problem(tmp_path, abci, rows, times, loss=loss)
        a = clean.values(fit(clean).logv)
        b = _problem(tmp_path, abci, rows, bad, loss=loss)
        b_vals = b.values(fit(b).logv)
        moved[loss] = max(abs(b_vals[n] / a[n] - 1) for n in SHARED)
    assert moved["cauchy"] < OUTLIER_BOUND < moved["l2"]  # the robust loss is what bounds it


# --------------------------------------------------------------------------------------- intervals


def test_the_spread_holds_its_level_of_the_residuals():
    r = np.linspace(-1, 1, 101)
    s = spread(r, 0.8)
    assert np.mean(np.abs(r) <= z_of(0.8) * s + 1e-12) == pytest.approx(0.8, abs=0.01)
    assert z_of(0.8) == pytest.approx(1.2816, abs=1e-4)


def test_a_calibration_table_with_a_wrong_covariance_is_refused(abci):
    doc = tomllib.loads(to_toml(abci))
    doc["calibration"] = {
        "structure": "s", "cv": "model", "cv_accuracy": 0.5, "spread_log": 0.3,
        "params": ["gpu_flops", "inter_alpha_s"], "log_values": [1.0, 2.0], "floors": [0.0, 0.0],
        "covariance": [[1.0, 0.0]],
    }  # fmt: skip
    with pytest.raises(InputError, match=r"x\.toml.*calibration\.covariance.*2 rows of 2"):
        parse_machine(doc, "x.toml")
    doc["calibration"]["covariance"] = [[1.0, 0.0], [0.0, 1.0]]
    profile = parse_machine(doc, "x.toml")
    assert profile.posterior is not None and profile.posterior.params == ("gpu_flops", "inter_alpha_s")
    again = parse_machine(tomllib.loads(to_toml(profile)), "y.toml")  # written and read back
    assert again.posterior == profile.posterior


# ---------------------------------------------------------------------------------- rankings, flags


def _three_strategies(tmp_path, abci):
    path = tmp_path / "r.csv"
    path.write_text(
        "model,strategy,p,b,p2,machine,iter_time_s\n"
        "resnet50,data,8,64,,abci,0.25\n"  # B = 512: 4.9e-4 s per sample
        "resnet50,data+spatial,8,64,4,abci,0.25\n"  # B = 128: 1.95e-3
        "resnet50,data+filter,8,64,4,abci,2.75\n"  # B = 128: 2.1e-2
        "resnet50,data,16,64,,abci,0.3\n"  # alone at p = 16: no ranking
    )
    return read_measurements(path, machine=abci)


def test_rankings_count_the_fastest_and_kendalls_tau_by_hand(tmp_path, abci):
    meas = _three_strategies(tmp_path, abci)
    same = rankings(meas, [0.2, 0.1, 0.3, 1.0])  # per sample 3.9e-4, 7.8e-4, 2.3e-3: same order
    assert len(same) == 1 and same[0].hit and same[0].tau == 1.0
    # data+spatial predicted fastest (7.8e-5 per sample): a miss; pairs (data, d+s) discordant,
    # (data, d+f) and (d+s, d+f) concordant: tau = (2 - 1) / 3
    swapped = rankings(meas, [0.2, 0.01, 0.3, 1.0])
    assert not swapped[0].hit and swapped[0].tau == pytest.approx(1 / 3)
    assert pooled(same + swapped) == (1, 2, pytest.approx((3 + 2 - 1) / 6))


def test_flags_name_held_out_groups_worse_than_nothing_whose_strategy_was_trained(tmp_path, abci):
    path = tmp_path / "f.csv"
    path.write_text(
        "model,strategy,p,b,p2,machine,iter_time_s\n"
        "resnet50,data,8,64,,abci,1.0\n"
        "alexnet,data,8,64,,abci,1.0\n"
        "alexnet,pipeline,4,64,4,abci,1.0\n"
    )
    meas = read_measurements(path, machine=abci)
    folds = [np.array([True, False, False]), np.array([False, True, True])]
    uncal = np.array([1.0, 1.0, 1.0])
    held = np.array([1.0, 2.0, 2.0])  # both AlexNet groups held out at half their accuracy
    # data was trained on (ResNet-50's runs): flagged; pipeline only AlexNet measured: not
    assert flags(meas, folds, held, uncal) == [("alexnet", "data", 0.5, 1.0)]


# ------------------------------------------------------------------------- calibrated machine files


def test_a_cost_per_input_element_is_a_cost_per_sample_of_each_models_input(abci):
    """per_input_s times the model's input elements (AlexNet 3x224x224 = 150,528; CosmoFlow-512
    4x512^3 = 536,870,912) is the per_sample_s the model gets."""
    from sweep.api import estimate

    per_input = fitted_profile(abci, {"overheads.data+spatial.per_input_s": 2e-8}, transfer=False)
    for model, elems in (("alexnet", 150_528), ("cosmoflow-512", 536_870_912)):
        per_sample = fitted_profile(
            abci, {"overheads.data+spatial.per_sample_s": 2e-8 * elems}, transfer=False
        )
        a = estimate(model, per_input, "data+spatial", p=8, b=2)["t_iter_s"]
        b = estimate(model, per_sample, "data+spatial", p=8, b=2)["t_iter_s"]
        assert a == pytest.approx(b, rel=1e-12)
        base = estimate(model, abci, "data+spatial", p=8, b=2)["t_iter_s"]
        assert a - base == pytest.approx(2 * 2e-8 * elems, rel=1e-6)  # b = 2 samples per group


def test_a_models_compute_scale_multiplies_its_compute_only(abci):
    from sweep.api import estimate

    scaled = fitted_profile(abci, {"model.alexnet.compute": 1.5}, transfer=False)
    assert scaled.compute_scale == {"alexnet": 1.5}
    one = estimate("alexnet", abci, "data", p=1, b=64)
    assert estimate("alexnet", scaled, "data", p=1, b=64)["t_comp_s"] == pytest.approx(
        1.5 * one["t_comp_s"],
        rel=0.05,  # the weight update (not per sample) is not scaled
    )
    other = estimate("resnet50", scaled, "data", p=8, b=64)
    assert other.pop("machine") == "abci-calibrated"
    assert other == {k: v for k, v in estimate("resnet50", abci, "data", p=8, b=64).items() if k != "machine"}
