"""The Python API: every ``sweep`` command as a function that returns data and never prints.

Each function is re-exported by :mod:`sweep` on first use (``sweep.estimate``,
...), so ``import sweep`` stays quick and changes nothing in the process. The
command line (:mod:`sweep.cli`) parses its options, calls one of these and
prints the result. Bad input raises :class:`sweep.errors.InputError` (the CLI's
one-line ``error: ...``, exit 2).

Models and machines are given as a built-in name (``"resnet50"``, ``"abci"``),
a path (a model ``.toml``/``.net``/``.net_sc``, a machine ``.toml``), or an object
already loaded (:class:`~sweep.inputs.layers.Model`,
:class:`~sweep.inputs.machines.MachineProfile`). ``set`` overrides machine
parameters, as ``--set KEY=VALUE`` does: ``set={"inter_bandwidth_Bps": 25e9}``.

JAX: a function that computes configures JAX when it starts
(:func:`sweep.engine.backend.computation`: float64 or float32, the compilation
cache of ``SWEEP_JAX_CACHE``, the CPU thread pool) and puts every JAX setting
it changed back when it returns, so a call leaves ``jax_enable_x64`` as it found
it. What stays is what JAX keeps per process anyway: its backends, once
created, and compiled programs. Compiled programs this package keeps are
bounded and keyed by everything they depend on, so they change no result:
:data:`sweep.answers.codesign.PROGRAMS_KEPT` question shapes,
:data:`sweep.answers.sensitivity.COMPILED_KEPT` gradient signatures,
:data:`sweep.engine.cluster.CACHE_SIZE` chunk functions per Dask worker, and
the kept traced programs of :mod:`sweep.engine.compiled` (held weakly, and on
disk under the cache folder). Calls are not meant to run at once on several
threads of one process (the JAX settings are process-wide).

Examples (each function's docstring has more)::

    import sweep

    row = sweep.estimate("resnet50", "abci", "data", p=1024, b=32)
    row["t_epoch_s"]                       # 7.92... s, as `sweep estimate --json` prints

    table = sweep.evaluate("grids/sweeps/codesign-resnet50-1024.toml")   # a pyarrow.Table
    summary = sweep.run("my.toml", "outputs/my", keep="pareto:t_epoch_s,p")
    sw = sweep.open("outputs/my")
    sw.pareto(["t_epoch_s", "p"])
"""

from __future__ import annotations

import json
import math
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep.errors import InputError
from sweep.inputs.checks import arguments, column_list, cv_folds

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from sweep.answers.codesign import Answer, Target
    from sweep.answers.query import Sweep
    from sweep.engine.runstate import RunSummary, Shard
    from sweep.inputs.configs import Bound
    from sweep.inputs.grid import Plan, SweepSpec
    from sweep.inputs.layers import Model
    from sweep.inputs.machines import MachineProfile
    from sweep.trust.report import Calibrated, Validation

__all__ = [
    "MAX_EVALUATE_POINTS",
    "bind",
    "calibrate",
    "codesign",
    "estimate",
    "evaluate",
    "open",
    "plan",
    "run",
    "sensitivity",
    "validate",
]

#: The most points :func:`evaluate` holds in memory (about 1 GB of float32 rows).
MAX_EVALUATE_POINTS = 10_000_000

Sets = Mapping[str, float | str] | None


def bind(
    model: str | Path | Model,
    machine: str | Path | MachineProfile,
    *,
    set: Sets = None,
    lc: str | None = None,
) -> Bound:
    """A model bound to a machine (with ``set`` overrides), loaded by name or path if need be;
    the last few are kept per process (:mod:`sweep.inputs.kept`), so calling again is cheap.

    >>> bound = sweep.api.bind("resnet50", "abci", set={"inter_bandwidth_Bps": 25e9})
    """
    arguments(locals())
    from sweep.inputs import kept
    from sweep.inputs.configs import Bound
    from sweep.inputs.layers import Model
    from sweep.inputs.machines import MachineProfile, load_machine
    from sweep.inputs.models import load_model

    def make() -> Bound:
        base = machine if isinstance(machine, MachineProfile) else load_machine(machine)
        loaded = model if isinstance(model, Model) else load_model(model, lc=lc)
        return Bound.of(loaded, base.with_overrides(dict(set or {})))

    # kept per process (sweep.inputs.kept): a loop of calls on one model and machine binds once
    (m, held_m), (k, held_k) = kept.spec_key(model), kept.spec_key(machine)
    lc_key, _ = kept.spec_key(lc) if lc is not None else (None, ())
    return kept.bound((m, k, lc_key, kept.sets_key(set)), (*held_m, *held_k), make)


def estimate(
    model: str | Path | Model,
    machine: str | Path | MachineProfile,
    strategy: str,
    *,
    p: int | None = None,
    b: int | None = None,
    p2: int | None = None,
    S: int | None = None,
    global_batch: int | None = None,
    micro_batch: int | None = None,
    set: Sets = None,
    lc: str | None = None,
    tokens: float | None = None,
    **own: int | str,
) -> dict[str, Any]:
    """Every output column of one configuration, in float64: ``sweep estimate --json``'s object.

    ``p`` GPUs (serial: 1), ``b`` samples per data-parallel replica or ``global_batch``
    (``b = global_batch / p1``), ``p2`` a hybrid's group size (default gpus_per_node), ``S``
    micro-batches of pipeline and data+tensor+pipeline (default p for pipeline) or
    ``micro_batch`` (``S = b / micro_batch``; data+tensor+pipeline's default is 1, Megatron-LM's,
    so S = b). A configuration that cannot run is an :class:`~sweep.errors.InputError` naming the
    rule it breaks and its parameters (docs/model.md §2): tp not dividing the heads, tp x pp not
    dividing p, a global batch that the data-parallel replicas x micro-batch do not divide, a
    precision the GPU has no rate for, vp > 1 at pp 1, .... ``own`` are the
    strategy's own settings by name, one keyword per axis of its registry entry
    (:mod:`kernels.strategies.registry`; data+tensor+pipeline's ``tp``, ``pp``, ``recompute``
    = "none" | "selective" | "full", ``zero``, ``vp``, ``sp``, ``precision`` = "bf16" | "fp8" |
    "mxfp8" | "nvfp4", docs/model.md §16); a setting the strategy does not use is ignored with a warning.
    Every value is checked: a fraction, text for a number or an unknown name is an
    :class:`~sweep.errors.InputError` naming the parameter. On a calibrated machine file
    (one with a ``[calibration]`` table) the row also has ``t_iter_s_lo`` and ``t_iter_s_hi``,
    the 80 % prediction interval of ``t_iter_s`` (docs/trust.md). ``tokens``: a transformer
    trained on that many tokens instead of its data set (a GPT name's 300B), so that
    ``t_epoch_s``, ``gpu_hours``, ``energy_kwh`` and ``cost_usd`` are those of the whole run.

    >>> row = sweep.estimate("resnet50", "abci", "data", p=1024, b=32)
    >>> round(row["t_epoch_s"], 2), round(row["t_comp_s"], 2)   # an epoch: 3.9 s of it computing
    (7.92, 3.92)
    """
    arguments(locals())
    from sweep.engine import backend
    from sweep.engine.evaluate import estimate as one
    from sweep.inputs.configs import Request

    if not isinstance(strategy, str):
        raise InputError(f"strategy must be a name, got {strategy!r}", param="strategy")
    request = Request.of(strategy, p, b, p2, S, global_batch=global_batch, micro_batch=micro_batch, own=own)
    request.checked(warn=False)  # before loading anything: a bad value is a quick error
    if tokens is not None:
        from sweep.inputs.layers import Model
        from sweep.inputs.models import load_model
        from sweep.inputs.transformers import with_tokens

        model = with_tokens(model if isinstance(model, Model) else load_model(model, lc=lc), tokens)
    bound = bind(model, machine, set=set, lc=lc)
    with backend.computation(x64=True):
        row = one(bound, request, refuse=True)
        if bound.profile.posterior is not None:  # a calibrated file: t_iter_s's 80 % interval
            from sweep.trust.intervals import estimate_interval

            row["t_iter_s_lo"], row["t_iter_s_hi"] = estimate_interval(bound, row)
        return row


def load(spec: str | Path | Mapping | SweepSpec) -> SweepSpec:
    """A sweep spec from a path, a shipped sweep's name, a parsed TOML document, or as is.

    A document's relative paths resolve against the current folder.
    """
    from sweep.inputs.grid import SweepSpec, load_spec, parse_spec

    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        # as TOML text too: a run's metadata keeps the spec's text, from which queries and
        # sensitivities rebuild its models and machines
        text = "".join(f"{key} = {_toml(value)}\n" for key, value in spec.items())
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise InputError(f"the spec is not a TOML document: {err}", "<spec>") from None
        return parse_spec(doc, "<spec>", Path.cwd(), text)
    return load_spec(spec)


def _toml(value: Any) -> str:
    """A spec value as inline TOML: strings, numbers, booleans, lists and tables of them."""
    if hasattr(value, "tolist"):  # a NumPy array or scalar
        value = value.tolist()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, int | float):
        return (
            repr(value)
            if math.isfinite(value)
            else ("nan" if value != value else f"{'-' if value < 0 else ''}inf")
        )
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise InputError(
        f"a spec value must be text, a number or a list or table of them, got {value!r}", "<spec>"
    )


def plan(spec: str | Path | Mapping | SweepSpec) -> Plan:
    """The spec expanded into jobs, models and machines loaded: ``sweep plan``'s data.

    :func:`sweep.engine.runstate.describe_plan` gives its report.

    >>> p = sweep.plan("paper-resnet50-vgg16")
    >>> p.size, len(p.jobs)
    """
    arguments(locals())
    from sweep.inputs.grid import plan as make_plan

    return make_plan(load(spec))


def evaluate(
    spec: str | Path | Mapping | SweepSpec,
    *,
    x64: bool = False,
    only_feasible: bool = False,
    columns: Sequence[str] | None = None,
    chunk: int | None = None,
    max_points: int = MAX_EVALUATE_POINTS,
) -> pa.Table:
    """Every row of a small grid, evaluated in memory (no files): a :class:`pyarrow.Table` with
    the rows and columns ``sweep run`` would write with the same options, in its order.

    ``spec`` is a sweep file, a shipped sweep's name, or the spec as a dict (a parsed TOML
    document). Float32 unless ``x64``. Grids over ``max_points`` (default
    :data:`MAX_EVALUATE_POINTS`, 10 million) are refused: run them with :func:`run`.

    >>> t = sweep.evaluate({"model": "resnet50", "machine": "abci", "strategies": ["data"],
    ...                     "axes": {"p": [256, 1024], "b": [32]}})
    >>> t.num_rows, t.column("t_epoch_s")[1]
    """
    arguments(locals())
    from sweep.engine import backend, memory
    from sweep.engine.runstate import RunOptions

    size = _chunk(chunk)
    the_plan = plan(spec)
    memory.check_size(the_plan, max_points)  # before JAX starts
    opts = RunOptions(
        out=Path("."),
        chunk=size,
        x64=x64,
        only_feasible=only_feasible,
        columns=column_list(columns),
    )
    with backend.computation(x64=x64):
        return memory.evaluate_plan(the_plan, opts, max_points)


def run(
    spec: str | Path | Mapping | SweepSpec,
    out: str | Path | None = None,
    *,
    keep: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    x64: bool = False,
    only_feasible: bool = False,
    columns: Sequence[str] | None = None,
    chunk: int | None = None,
    shard: str | Shard | None = None,
    dask: Any = None,
    confirm: bool = False,
    progress: Callable[[int, int, float], None] | None = None,
    interval: float | None = None,
    space_check: bool = True,
) -> RunSummary:
    """Run a sweep into a Parquet dataset folder (``sweep run``); returns the run's summary.

    ``out`` defaults to ``outputs/<spec name>``. ``keep`` is ``--keep``'s text
    (``"pareto:t_epoch_s,p"``, ``"top:10:t_epoch_s"``); ``shard`` is ``"K/N"``; ``dask`` a
    scheduler address, ``"local:N"`` or a ``distributed.Client``. Grids over 10^12 points
    need ``confirm=True`` (``--yes``). ``progress(done, total, seconds)`` is called as
    chunks finish. :meth:`RunSummary.lines` gives the command's report. ``interval`` (a level in
    (0, 1), e.g. 0.8; the machines must be calibrated) adds ``t_epoch_s_lo`` and ``t_epoch_s_hi``
    to every written row, once the run is complete (:mod:`sweep.trust.annotate`). A run that
    writes every row first checks that its folder's disk has the space ``sweep plan`` estimates,
    unless ``space_check`` is false (``--no-space-check``).

    >>> summary = sweep.run("grids/sweeps/codesign-resnet50-1024.toml", "outputs/cd",
    ...                     keep="pareto:t_epoch_s,p", overwrite=True)
    >>> summary.rows, summary.folder
    """
    arguments(locals())
    from sweep.engine import backend, index
    from sweep.engine.run import run_sweep
    from sweep.engine.runstate import RunOptions, Shard, parse_shard
    from sweep.inputs.grid import CONFIRM_POINTS
    from sweep.reduce.keep import parse_keep

    if resume and overwrite:
        raise InputError("give resume or overwrite (start over), not both", param=("resume", "overwrite"))
    size = _chunk(chunk)
    parts = parse_shard(shard) if isinstance(shard, str) else shard
    if isinstance(dask, str) and not dask.strip():
        raise InputError("dask needs a scheduler address or local:N", param="dask")
    began = time.perf_counter()
    the_plan = plan(spec)
    prepare_s = time.perf_counter() - began
    if the_plan.size > CONFIRM_POINTS and not confirm:
        raise InputError(
            f"{the_plan.size:.3g} points is over {CONFIRM_POINTS:.0e}: pass confirm=True to run it",
            param="confirm=True",
        )
    opts = RunOptions(
        out=Path(out) if out else Path("outputs") / the_plan.spec.name,
        chunk=size,
        x64=x64,
        keep=parse_keep(keep, index.numeric_columns(the_plan.jobs[0])),
        only_feasible=only_feasible,
        columns=column_list(columns),
        resume=resume,
        overwrite=overwrite,
        shard=parts if isinstance(parts, Shard) else None,
        dask=dask,
        space_check=space_check,
    )
    if interval is not None:  # before anything is written
        from sweep.trust import annotate

        annotate.check(the_plan, interval, opts.columns, opts.shard is not None)
    with backend.computation(x64=x64):
        summary = run_sweep(the_plan, opts, progress)
    summary.prepare_s = prepare_s
    if interval is not None:
        with backend.computation(x64=True):
            annotate.annotate(summary.folder, the_plan, interval)
    return summary


def open(path: str | Path) -> Sweep:
    """Open a dataset folder written by ``sweep run`` (or one Parquet file) for queries; needs no JAX.

    The result has ``.pareto``, ``.top``, ``.best`` and ``.where`` (each returns a
    :class:`pyarrow.Table`), ``.count_rows``, ``.metadata`` and ``.dataset`` (a
    :class:`pyarrow.dataset.Dataset`) for anything else.

    >>> sw = sweep.open("outputs/paper-resnet50-vgg16")
    >>> sw.pareto(["t_epoch_s", "gpu_hours"], where="model == 'resnet50'")
    >>> sw.top("t_epoch_s", 5, per="strategy")
    >>> sw.best(per="p", rank=True)
    """
    from sweep.answers.query import open_sweep

    return open_sweep(path)


def codesign(
    model: str | Path | Model,
    machine: str | Path | MachineProfile,
    strategies: Sequence[str] | str,
    param: str,
    *,
    p: Sequence[int] | int,
    b: Sequence[int] | int | None = None,
    B: Sequence[int] | int | None = None,
    p2: Sequence[int] | int | None = None,
    S: Sequence[int] | int | None = None,
    global_batch: Sequence[int] | int | None = None,
    micro_batch: Sequence[int] | int | None = None,
    target: str | Target | None = None,
    beats: str | None = None,
    metric: str = "t_epoch_s",
    range: tuple[float, float] | None = None,
    grid: int | None = None,
    set: Sets = None,
    lc: str | None = None,
    **own: Sequence[int | str] | int | str | None,
) -> list[Answer]:
    """The value of machine parameter ``param`` at which a target starts to hold, one
    :class:`~sweep.answers.codesign.Answer` per GPU count in ``p`` (``sweep codesign``).

    ``beats``: the strategies' best configuration beats this rival's; ``target``: the best
    meets e.g. ``"t_epoch_s <= 10"``; both may be given. ``b`` or ``global_batch`` (alias ``B``)
    list the batches to choose from; ``micro_batch`` and the strategies' own axes by name, one
    keyword per axis of the registry (data+tensor+pipeline's ``tp``, ``pp``, ``recompute``,
    ``zero``, ``vp``, ``sp``, ``precision``), the values chosen from at every value of ``param``
    (default: every legal value of tp, pp, recompute and zero, the others at their default).
    ``Answer.threshold`` is the crossing,
    ``Answer.to_json()`` what ``--json`` prints, and
    :func:`sweep.answers.codesign.format_answer` the report.

    >>> [a] = sweep.codesign("resnet50", "abci", "data+filter", "inter_bandwidth_Bps",
    ...                      beats="data", p=1024, B=8192)
    >>> a.threshold                      # B/s of inter-node bandwidth where data+filter wins
    """
    arguments(locals())
    from sweep.answers import codesign as questions
    from sweep.engine import backend

    if B is not None and global_batch is not None:
        raise InputError("give global_batch or B (its alias), not both")
    with backend.computation(x64=True):
        return questions.codesign(
            model, machine, strategies, param, p=p, b=b, B=B if global_batch is None else global_batch,
            p2=p2, S=S, micro_batch=micro_batch, own=own, target=target, beats=beats, metric=metric,
            range=range, grid=grid or questions.GRID, lc=lc, set=set,
        )  # fmt: skip


def sensitivity(
    source: Any = None,
    *,
    model: str | Path | Model | None = None,
    machine: str | Path | MachineProfile | None = None,
    strategy: str | None = None,
    p: int | None = None,
    b: int | None = None,
    p2: int | None = None,
    S: int | None = None,
    global_batch: int | None = None,
    micro_batch: int | None = None,
    set: Sets = None,
    lc: str | None = None,
    of: str = "t_epoch_s",
    where: str | None = None,
    max_rows: int | None = None,
    **own: int | str | None,
) -> pa.Table:
    """Elasticities ``d ln t / d ln X`` of ``of`` (default t_epoch_s) for every machine
    parameter X, by :func:`jax.grad` (``sweep sensitivity``): a table, one row per configuration,
    with ``e_<X>`` columns and the ``lever`` that pays off most.

    Either one configuration (``model``, ``machine``, ``strategy``, ``p``, ``b`` or
    ``global_batch``; ``S`` or ``micro_batch``; the strategy's own settings by name, one keyword
    per axis of its registry entry, as :func:`estimate` takes them) or every
    row of a small sweep result ``source`` (a folder, a Parquet file, a :func:`open` result
    or a table from :func:`evaluate` saved to Parquet), filtered by ``where``.

    >>> t = sweep.sensitivity(model="resnet50", machine="abci", strategy="data", p=1024, b=32)
    >>> t.column("lever")[0], t.column("e_inter_bandwidth_Bps")[0]
    """
    arguments(locals())
    from sweep.answers import sensitivity as elasticities
    from sweep.engine import backend

    settings: dict[str, int | str] = {k: v for k, v in own.items() if v is not None}
    if source is None:
        batch = b if global_batch is None else global_batch
        given = {"model": model, "machine": machine, "strategy": strategy, "p": p, "b": batch}
        if missing := [k for k, v in given.items() if v is None]:  # "b" is no part of another name
            text = ", ".join(missing).replace("b", "b (or global_batch)")
            raise InputError(f"give DIR or a configuration: missing {text}", param=(*missing, "global_batch"))
        if where:
            raise InputError("where needs DIR", param="where")
        assert model is not None and machine is not None and strategy is not None and p is not None
        bound = bind(model, machine, set=set, lc=lc)
        with backend.computation(x64=True):
            return elasticities.sensitivity(
                bound, strategy, p, b, p2, S, of, settings, global_batch=global_batch, micro_batch=micro_batch
            )
    if model or machine or strategy or p or b or set or settings or global_batch or micro_batch:
        raise InputError("give DIR or a configuration (model ...), not both", param="model")
    with backend.computation(x64=True):
        return elasticities.sensitivities(
            source, where=where, max_rows=elasticities.MAX_ROWS if max_rows is None else max_rows, metric=of
        )


def validate(
    measured: str | Path,
    machine: str | Path | MachineProfile | None = None,
    *,
    set: Sets = None,
    strict: bool = False,
    out: str | Path | None = None,
    plot: str | Path | None = None,
) -> Validation:
    """Predicted against measured iteration time of every run of a measured-run CSV, in float64
    (``sweep validate``). Each run is predicted on its ``machine`` column's profile, or on
    ``machine`` for all. ``out`` writes the table (``.csv``/``.parquet``), ``plot`` a figure.

    The result's ``summaries`` hold the mean accuracy per (model, strategy) and overall
    (the last), ``lines()`` the report (with the strategy rankings, and on a calibrated
    machine each run's 80 % interval and their coverage), ``warnings`` the rows skipped.

    >>> v = sweep.validate("grids/measurements/abci_chainer_public.csv")
    >>> v.summaries[-1].acc_mean         # mean symmetric accuracy over every run
    """
    arguments(locals())
    from sweep.engine import backend
    from sweep.trust import validation
    from sweep.trust.report import Validation, read_runs

    if out is not None and Path(out).suffix not in (".csv", ".parquet"):
        raise InputError(f"out must end in .csv or .parquet, got '{out}'", param="out")
    if plot is not None and Path(plot).suffix not in (".png", ".pdf", ".svg"):
        raise InputError(f"plot must end in .png, .pdf or .svg, got '{plot}'", param="plot")
    meas, profile, warnings = read_runs(measured, machine, set, strict)
    with backend.computation(x64=True):
        pred = validation.predict(meas)
        interval = None
        if profile is not None and profile.posterior is not None:  # a calibrated file: 80 % intervals
            from sweep.trust.intervals import predictive

            _, lo, hi = predictive(meas, profile)
            interval = (lo, hi)
    result = Validation(meas, pred, validation.summarize(meas, pred.t_iter_s), warnings, interval=interval)
    if out is not None:
        result.written.append(validation.write_table(meas, pred.t_iter_s, out))
    if plot is not None:
        result.written.append(validation.plot(meas, pred.t_iter_s, plot))
    return result


def calibrate(
    measured: str | Path,
    machine: str | Path | MachineProfile,
    *,
    fit: str | Sequence[str] | None = None,
    cv: str | int = 5,
    name: str | None = None,
    transfer: bool = True,
    set: Sets = None,
    strict: bool = False,
    out: str | Path | None = None,
    loss: str = "cauchy",
    loss_scale: float = 0.2,
    prior_scale: float = 1.0,
    quality: str | Sequence[str] | None = None,
) -> Calibrated:
    """Fit machine parameters, per-model compute scales and per-strategy overheads to measured
    iteration times (``sweep calibrate``, docs/trust.md): a MAP fit (robust weighted loss on log
    ratios, priors on every parameter) by L-BFGS, gradients by :func:`jax.grad`, in float64.

    ``fit`` names the parameters (``"inter_bandwidth_Bps=1e9:1e11,overheads.data.all"``;
    default: the candidate structure that predicts best leaving one model out); ``cv`` is a
    number of folds, ``"model"`` (leave one model out) or 0. ``loss`` (``cauchy``, ``huber``,
    ``l2``) and ``loss_scale`` set the robust loss, ``prior_scale`` multiplies every prior
    width, ``quality`` (``"fair=0.1,good=1"``) the weight of a run by its ``quality`` column.
    ``out`` writes the calibrated machine ``.toml``. The result's ``profile`` is the
    calibrated machine (it goes wherever a machine does), ``lines()`` the report, ``toml()``
    the file.

    >>> c = sweep.calibrate("grids/measurements/abci_chainer_public.csv", "abci", cv=0)
    >>> sweep.estimate("resnet50", c.profile, "data", p=64, b=32)["t_iter_s"]
    """
    arguments(locals())
    from sweep.engine import backend
    from sweep.trust.calibrate import calibrate as fit_runs
    from sweep.trust.calibrate import parse_fit
    from sweep.trust.objective import Settings, parse_quality
    from sweep.trust.report import Calibrated, check_toml_path, read_runs

    folds = cv_folds(cv)
    settings = Settings(loss, float(loss_scale), parse_quality(quality), prior_scale=float(prior_scale))
    if out is not None:
        check_toml_path(out)
    meas, profile, warnings = read_runs(measured, machine, set, strict)
    assert profile is not None
    params = parse_fit(fit, profile) if fit else None
    with backend.computation(x64=True):
        cal = fit_runs(meas, profile, params, folds, settings)
    result = Calibrated(cal, meas, profile, str(measured), name, transfer, warnings)
    if out is not None:
        result.write(out)
    return result


def _chunk(chunk: int | None) -> int:
    from sweep.engine.index import MAX_CHUNK

    if chunk is not None and not 1 <= chunk <= MAX_CHUNK:
        raise InputError(f"chunk must be in 1..{MAX_CHUNK}, got {chunk}", param="chunk")
    return chunk or 0
