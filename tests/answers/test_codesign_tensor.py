"""Co-design with data+tensor+pipeline's software re-optimised at every parameter value: exact
against a brute force over the same lists, one configuration at a time through ``estimate``."""

from __future__ import annotations

import functools
import itertools
import json

import pytest

from sweep import api
from sweep.answers.codesign import Question
from sweep.answers.splits import candidates
from sweep.engine import backend
from sweep.engine.evaluate import estimate
from sweep.errors import InputError
from sweep.inputs.configs import Bound, Request, complete
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

MODEL = "gpt-l4-h256-a8-s128"  # 4 blocks, hidden 256, 8 heads, sequence 128
MACHINE = "a100-ib800"
P, B = 16, 32
PARAM = "inter_bandwidth_Bps"


@functools.cache
def _bound(theta: float | None = None) -> Bound:
    profile = load_machine(MACHINE)
    if theta is not None:
        profile = profile.with_overrides({PARAM: theta})
    return Bound.of(load_model(MODEL), profile)


def _legal() -> list[tuple[int, int, int, int, int, int]]:
    """Every (tp, pp, micro_batch, recompute, zero, cp) the question's defaults must hold, written
    out independently: tp divides the 8 heads and p = 16, pp <= 4 blocks, tp pp cp | 16, cp cuts
    the 128-token sequence into 2 cp equal chunks (every divisor of 16 does), the micro-batch
    divides b = 32 / (16 / (tp pp cp))."""
    out = []
    for tp, pp, cp in itertools.product((1, 2, 4, 8), (1, 2, 3, 4), (1, 2, 4, 8, 16)):
        if P % (tp * pp * cp) or B % (P // (tp * pp * cp)) or 128 % (2 * cp):
            continue
        b = B // (P // (tp * pp * cp))
        for mb, r, z in itertools.product(range(1, b + 1), (0, 1, 2), (0, 1)):
            if b % mb == 0:
                out.append((tp, pp, mb, r, z, cp))
    return out


@functools.cache  # a test asks the same theta twice (the threshold's sides, then their splits)
def _brute(theta: float, metric: str = "t_iter_s") -> tuple[float, tuple]:
    """The best feasible ``metric`` at ``theta`` over :func:`_legal`, one ``estimate`` each."""
    best: tuple[float, tuple] = (float("inf"), ())
    with backend.settings(jax_enable_x64=True):
        for tp, pp, mb, r, z, cp in _legal():
            b = B // (P // (tp * pp * cp))
            row = estimate(
                _bound(theta),
                "data+tensor+pipeline",
                P,
                b,
                S=b // mb,
                own={"tp": tp, "pp": pp, "recompute": r, "zero": z, "cp": cp},
            )
            if row["feasible"] and row[metric] < best[0]:
                best = (row[metric], (tp, pp, mb, r, z, cp))
    return best


def test_default_lists_are_every_legal_split():
    q = Question(("data+tensor+pipeline",), PARAM, P, B=(B,))
    c = candidates(_bound(), "data+tensor+pipeline", q)
    got = {
        (int(r[c.columns.index("tp")]), int(r[c.columns.index("pp")]), int(r[1] // r[3]),
         int(r[c.columns.index("recompute")]), int(r[c.columns.index("zero")]), int(r[c.columns.index("cp")]))
        for r in c.rows
    }  # fmt: skip
    assert c.valid.all()
    assert got == set(_legal())


def test_the_batch_split_marks_what_does_not_divide():
    """A fixed global batch through the request's one completion (what candidates read): b = B / p1,
    S = b / micro_batch, ``fits`` false where either is not whole."""

    def split(p, tp, pp, micro):
        own = {"tp": tp, "pp": pp}
        r = complete(Request.of("data+tensor+pipeline", p, global_batch=1536, micro_batch=micro, own=own), 8)
        return r.b, r.config[3], bool(r.fits)

    assert split(1024, 8, 16, 1) == (192, 192, True)  # 8 replicas of 192, 192 micro-batches
    assert split(1024, 8, 16, 5)[2] is False  # 5 does not divide 192
    assert split(1024, 1, 1, None)[2] is False  # 1,536 over 1,024 replicas
    assert split(1024, 3, 1, None)[2] is False  # 1,536 over 1,024 // 3 = 341 replicas


def test_threshold_and_best_split_agree_with_brute_force():
    want, _ = _brute(10e9)
    [a] = api.codesign(
        MODEL, MACHINE, "data+tensor+pipeline", PARAM, p=P, global_batch=B, target=f"t_iter_s <= {want!r}",
        range=(1e9, 1e11), grid=256,
    )  # fmt: skip
    assert a.threshold is not None and len(a.crossings) == 1
    # on the holding side the brute force meets the target, on the other it does not
    assert _brute(a.at)[0] <= want < _brute(a.other_at)[0]
    assert a.threshold == pytest.approx(10e9, rel=1e-9)
    for side, theta in ((a.best, a.at), (a.other, a.other_at)):
        value, split = _brute(theta)
        [row] = side
        assert row["t_iter_s"] == value
        assert (row["tp"], row["pp"], row["micro_batch"], row["cp"]) == (*split[:3], split[5])


def test_given_lists_restrict_the_choice_and_bad_values_are_refused():
    [a] = api.codesign(
        MODEL, MACHINE, "data+tensor+pipeline", PARAM, p=P, global_batch=B, tp=2, pp=2, micro_batch=(1, 3),
        recompute="full", zero=0, target="t_iter_s <= 1e9", range=(1e9, 1e11), grid=16,
    )  # fmt: skip
    [row] = a.best
    assert (row["tp"], row["pp"], row["micro_batch"], row["recompute"], row["zero"]) == (2, 2, 1, "full", 0)
    with pytest.raises(InputError, match="recompute") as err:
        api.codesign(
            MODEL, MACHINE, "data+tensor+pipeline", PARAM, p=P, B=B, recompute="most", target="t_iter_s <= 1"
        )
    assert err.value.param == ("recompute",) and "--" not in str(err.value)
    with pytest.raises(InputError, match="no configuration"):
        api.codesign(
            MODEL,
            MACHINE,
            "data+tensor+pipeline",
            PARAM,
            p=P,
            B=B,
            micro_batch=5,
            tp=1,
            pp=1,
            target="t_iter_s <= 1",
        )
    with pytest.raises(InputError, match="tp: no strategy") as err:
        api.codesign(MODEL, MACHINE, "data", PARAM, p=P, B=B, tp=2, target="t_iter_s <= 1")
    assert err.value.param == ("tp",)


def test_a_question_no_configuration_can_answer_is_refused():
    """Issue 38, defect 3: fp8 on an A100 (no FP8 rate) runs no configuration at any value of the
    parameter: an InputError naming the rule and the parameter, not an infeasible "best"."""
    with pytest.raises(InputError, match=r"\(precision\)$") as err:
        api.codesign(
            MODEL, MACHINE, "data+tensor+pipeline", PARAM, p=P, B=B, precision="fp8", target="t_iter_s <= 1e9"
        )
    assert err.value.param == ("precision",)
    # tp 3 divides neither the 8 heads nor p = 16: the first rule broken is named
    with pytest.raises(InputError, match=r"\(heads\)$"):
        api.codesign(MODEL, MACHINE, "data+tensor+pipeline", PARAM, p=P, B=B, tp=3, target="t_iter_s <= 1e9")


def test_cli_lists_and_the_B_alias():
    from click.testing import CliRunner

    from sweep.cli.main import cli

    args = ["codesign", "--model", MODEL, "--machine", MACHINE, "--strategy", "data+tensor+pipeline",
            "--param", PARAM, "--p", str(P), "--target", "t_iter_s <= 1e9", "--grid", "8", "--tp", "2",
            "--pp", "2", "--micro-batch", "1,2", "--recompute", "full,none", "--zero", "0", "--json"]  # fmt: skip
    runner = CliRunner()
    one = runner.invoke(cli, [*args, "--global-batch", str(B)])
    assert one.exit_code == 0, one.output
    [row] = json.loads(one.stdout)["best"]
    assert (row["tp"], row["pp"], row["zero"], row["global_batch"]) == (2, 2, 0, B)
    assert row["micro_batch"] in (1, 2) and row["recompute"] in ("full", "none")
    assert runner.invoke(cli, [*args, "--B", str(B)]).stdout == one.stdout
    bad = runner.invoke(cli, [*args[:-3], "--zero", "4", "--B", str(B)])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output


def test_every_own_axis_of_the_registry_is_a_list_co_design_chooses_from():
    """vp, sp and precision (axes the registry does not mark searched) stay at their defaults
    unless listed, and once listed co-design picks the best of them, as a brute force through
    ``sweep.estimate`` at the same parameter value does; the CLI has an option for each."""
    import sweep

    fixed = {"tp": 2, "pp": 2, "micro_batch": 1, "recompute": "selective", "zero": 0}
    common = dict(p=P, global_batch=B, target="t_iter_s <= 1e9", range=(1e9, 1e11), grid=16)
    [plain] = api.codesign(MODEL, "dgx-h100", "data+tensor+pipeline", PARAM, **common, **fixed)
    [row] = plain.best
    assert (row["vp"], row["sp"], row["precision"]) == (1, 0, "bf16")
    lists = {"vp": (1, 2), "sp": (0, 1), "precision": ("bf16", "fp8")}
    [a] = api.codesign(MODEL, "dgx-h100", "data+tensor+pipeline", PARAM, **common, **fixed, **lists)
    [row] = a.best
    brute = min(
        (
            sweep.estimate(
                MODEL, "dgx-h100", "data+tensor+pipeline", p=P, global_batch=B, set={PARAM: a.at},
                vp=vp, sp=sp, precision=prec, **fixed,
            )["t_iter_s"],
            vp, sp, prec,
        )
        for vp, sp, prec in itertools.product(*lists.values())
    )  # fmt: skip
    assert (row["t_iter_s"], row["vp"], row["sp"], row["precision"]) == pytest.approx(brute)
    from click.testing import CliRunner

    from sweep.cli.main import cli

    help_text = CliRunner().invoke(cli, ["codesign", "--help"]).output
    assert all(
        f"--{name} LIST" in help_text for name in ("tp", "pp", "recompute", "zero", "vp", "sp", "precision")
    )
