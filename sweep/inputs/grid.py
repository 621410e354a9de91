"""Sweep specs (docs/inputs.md#sweep-specs): TOML grid files, validated, and their mixed-radix index spaces.

A spec names models, machines, strategies and axes. :func:`plan` expands it
into :class:`Job` s, one per (model, machine, strategy), each with the axes
its strategy uses (its registry entry's: :func:`sweep.inputs.configs.uses`)
and its own flat index space. The last axis listed varies fastest; the
configuration axes come first, in :data:`~sweep.inputs.configs.CONFIG_AXES`
order (``p`` outermost, then ``b``, ``p2``, ``S``, ``global_batch``,
``micro_batch``, the strategies' own axes), then machine parameters and ``tokens`` (the
model's training set, :data:`MODEL_AXES`) in the order the spec gives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import grids
from kernels import SCALAR_PARAMS
from kernels.strategies.registry import OWN_AXES, REGISTRY
from sweep.errors import InputError, where
from sweep.inputs.configs import CONFIG_AXES, PAPER_STRATEGIES, Bound, users, uses
from sweep.inputs.layers import Model
from sweep.inputs.machines import MachineProfile, check_param, load_machine, warn_implausible
from sweep.inputs.models import load_model, read_toml
from sweep.inputs.transformers import samples_of

#: Above this many points a run needs ``--yes``.
CONFIRM_POINTS = 10**12
#: Longest axis: digits must stay exact in float32 on the device.
MAX_AXIS = 1 << 22
#: Largest p, b, p2, S: whole numbers stay exact in float32 up to 2**24.
MAX_CONFIG_VALUE = 1 << 24
#: Largest global batch B = b * p1: configuration columns are int32.
MAX_BATCH = (1 << 31) - 1
#: Axes of the model rather than the machine or the configuration: ``tokens``, the training
#: set in tokens (default the model's published one), so ``t_epoch_s`` is the time to train it.
MODEL_AXES: tuple[str, ...] = ("tokens",)


@dataclass(frozen=True)
class ModelRef:
    """A model entry of a spec: built-in name or path, with an optional ``.lc``."""

    spec: str
    lc: str | None = None


@dataclass
class SweepSpec:
    """A validated sweep file."""

    name: str
    models: list[ModelRef]
    machines: list[str]
    strategies: list[str]
    axes: dict[str, np.ndarray]
    sets: dict[str, float]
    base: Path
    text: str = ""
    path: str = ""


def _axis_values(name: str, raw, origin: str) -> np.ndarray:
    key = f"axes.{name}"
    if isinstance(raw, list):
        values = raw
    elif isinstance(raw, dict):
        kinds = set(raw) & {"log2", "linspace", "start"}
        if len(kinds) != 1:
            raise InputError(
                "a range is { start, stop, step }, { log2 = [a, b] } or { linspace = [a, b, n] }",
                where(origin, key=key),
            )
        kind = kinds.pop()
        if kind == "log2":
            lo_hi = raw["log2"]
            if set(raw) != {"log2"} or not _ints(lo_hi, 2):
                raise InputError("log2 takes two integer exponents [a, b]", where(origin, key=key))
            a, b = lo_hi
            if not -1074 <= a <= 1023 or not -1074 <= b <= 1023:
                raise InputError("log2 exponents must be in -1074..1023 (a float64)", where(origin, key=key))
            _check_length(b - a + 1, origin, key)
            values = [2**k for k in range(a, b + 1)]
        elif kind == "linspace":
            spec = raw["linspace"]
            if (
                set(raw) != {"linspace"}
                or not isinstance(spec, list)
                or len(spec) != 3
                or not _ints(spec[2:], 1)
            ):
                raise InputError("linspace takes [start, stop, count]", where(origin, key=key))
            if not all(_finite(v) for v in spec[:2]) or spec[2] < 1:
                raise InputError(
                    "linspace takes finite numbers [start, stop] and a count >= 1", where(origin, key=key)
                )
            _check_length(spec[2], origin, key)
            values = list(np.linspace(float(spec[0]), float(spec[1]), int(spec[2])))
        else:
            if set(raw) - {"start", "stop", "step"} or not {"start", "stop"} <= set(raw):
                raise InputError(
                    "a range needs start and stop (inclusive), optional step", where(origin, key=key)
                )
            start, stop, step = raw["start"], raw["stop"], raw.get("step", 1)
            if not all(_finite(v) for v in (start, stop, step)) or step <= 0:
                raise InputError(
                    "start, stop and step must be finite numbers, step > 0", where(origin, key=key)
                )
            span = (stop - start) / step
            _check_length(span + 1 if math.isfinite(span) else math.inf, origin, key)
            count = math.floor(span + 1e-9) + 1
            values = [start + i * step for i in range(max(count, 0))]
    else:
        values = [raw]
    if not values:
        raise InputError("axis is empty", where(origin, key=key))
    _check_length(len(values), origin, key)
    if name in OWN_AXES:
        return _own_values(name, values, origin, key)
    if name in MODEL_AXES:
        if not all(_finite(v) and v > 0 for v in values):
            bad = next(v for v in values if not (_finite(v) and v > 0))
            raise InputError(f"values must be numbers of tokens > 0, got {bad!r}", where(origin, key=key))
        return np.asarray(values, np.float64)
    if name in CONFIG_AXES:
        out = []
        for v in values:
            bad = isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
            if bad or v != int(v) or v < 1:
                raise InputError(f"values must be whole numbers >= 1, got {v!r}", where(origin, key=key))
            if v > MAX_CONFIG_VALUE:
                raise InputError(
                    f"value {v:,} is over {MAX_CONFIG_VALUE:,} (configuration values stay exact in float32)",
                    where(origin, key=key),
                )
            out.append(int(v))
        return np.asarray(out, dtype=np.int64)
    checked = np.asarray([check_param(name, v, f"{origin}: axes", warn=False) for v in values], np.float64)
    warn_implausible(name, checked, origin, key)
    return checked


def _own_values(name: str, values: list, origin: str, key: str) -> np.ndarray:
    """A strategy's own axis as codes: names of a categorical axis (``recompute = "full"``) or
    whole numbers in its registry range (:meth:`kernels.strategies.registry.Axis.code`)."""
    out = []
    for v in values:
        try:
            code = OWN_AXES[name].code(v)
        except ValueError as err:
            raise InputError(str(err), where(origin, key=key)) from None
        if code > MAX_CONFIG_VALUE:
            raise InputError(
                f"value {v:,} is over {MAX_CONFIG_VALUE:,} (configuration values stay exact in float32)",
                where(origin, key=key),
            )
        out.append(code)
    return np.asarray(out, dtype=np.int64)


def _ints(values, n: int) -> bool:
    return (
        isinstance(values, list)
        and len(values) == n
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    )


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _finite(v) -> bool:
    return _number(v) and math.isfinite(v)


def _check_length(count: float, origin: str, key: str) -> None:
    """Refuse an axis of more than MAX_AXIS values before building it (a range can ask for 1e12)."""
    if count > MAX_AXIS:
        many = f"{count:,.0f}" if count < 1e15 else f"{count:.3g}"
        raise InputError(f"axis has {many} values, more than {MAX_AXIS:,}", where(origin, key=key))


def _str_list(doc: dict, single: str, plural: str, origin: str) -> list:
    if single in doc and plural in doc:
        raise InputError(f"give '{single}' or '{plural}', not both", where(origin, key=plural))
    if single in doc:
        return [doc[single]]
    value = doc.get(plural)
    if value is None:
        raise InputError(f"missing '{single}' (or '{plural}')", where(origin, key=single))
    if not isinstance(value, list) or not value:
        raise InputError("must be a non-empty list", where(origin, key=plural))
    return value


def _parse_axes(doc: dict, strategies: list, origin: str) -> dict[str, np.ndarray]:
    """The spec's axes, checked: known, used by one of its strategies at least (the registry's
    :func:`~sweep.inputs.configs.uses`), one form of each batch, b (or global_batch) and p given."""
    raw_axes = doc.get("axes", {})
    if not isinstance(raw_axes, dict):
        raise InputError("must be a table", where(origin, key="axes"))
    axes: dict[str, np.ndarray] = {}
    for name in list(CONFIG_AXES) + [k for k in raw_axes if k not in CONFIG_AXES]:
        if name not in raw_axes:
            continue
        if name not in CONFIG_AXES and name not in SCALAR_PARAMS and name not in MODEL_AXES:
            known_axes = ", ".join((*CONFIG_AXES, *MODEL_AXES, *SCALAR_PARAMS))
            raise InputError(f"unknown axis (known: {known_axes})", where(origin, key=f"axes.{name}"))
        if not any(uses(s, name) for s in strategies):
            raise InputError(
                f"no strategy of the spec uses axis '{name}' (only {users(name)} do)",
                where(origin, key=f"axes.{name}"),
            )
        axes[name] = _axis_values(name, raw_axes[name], origin)
    for one, other in (("b", "global_batch"), ("S", "micro_batch")):
        if one in axes and other in axes:
            raise InputError(f"give axis '{one}' or '{other}', not both", where(origin, key=f"axes.{other}"))
    if "b" not in axes and "global_batch" not in axes:
        raise InputError(
            "missing axis 'b' (samples per data-parallel replica) or 'global_batch'",
            where(origin, key="axes.b"),
        )
    if "p" not in axes and any(uses(s, "p") for s in strategies):
        raise InputError("missing axis 'p' (number of GPUs)", where(origin, key="axes.p"))
    if "b" in axes and "p" in axes and int(axes["b"].max()) * int(axes["p"].max()) > MAX_BATCH:
        raise InputError(
            f"largest b x largest p = {int(axes['b'].max()) * int(axes['p'].max()):,} is over {MAX_BATCH:,}, "
            "the largest global batch B the int32 output columns hold",
            where(origin, key="axes.b"),
        )
    if "global_batch" in axes and int(axes["global_batch"].max()) > MAX_BATCH:
        raise InputError(
            f"is over {MAX_BATCH:,}, the largest global batch the int32 output columns hold",
            where(origin, key="axes.global_batch"),
        )
    return axes


def parse_spec(doc: dict, origin: str, base: Path, text: str = "") -> SweepSpec:
    """Validate a parsed sweep document (docs/inputs.md#sweep-specs)."""
    known = {
        "name",
        "model",
        "models",
        "lc",
        "machine",
        "machines",
        "strategies",
        "axes",
        "set",
        "description",
    }
    for key in doc:
        if key not in known:
            raise InputError("unknown key", where(origin, key=key))
    models = []
    for i, entry in enumerate(_str_list(doc, "model", "models", origin)):
        if isinstance(entry, str):
            models.append(ModelRef(entry, doc.get("lc")))
        elif (
            isinstance(entry, dict) and isinstance(entry.get("model"), str) and set(entry) <= {"model", "lc"}
        ):
            models.append(ModelRef(entry["model"], entry.get("lc", doc.get("lc"))))
        else:
            raise InputError(
                "a model is a name/path or { model = ..., lc = ... }", where(origin, key=f"models[{i}]")
            )
    machines = _str_list(doc, "machine", "machines", origin)
    if not all(isinstance(m, str) for m in machines):
        raise InputError("machines are names or paths", where(origin, key="machines"))
    strategies = doc.get("strategies", list(PAPER_STRATEGIES))
    if not isinstance(strategies, list) or not strategies:
        raise InputError("must be a non-empty list", where(origin, key="strategies"))
    for s in strategies:
        if s not in REGISTRY:
            raise InputError(
                f"unknown strategy '{s}' (known: {', '.join(REGISTRY)})", where(origin, key="strategies")
            )
    if len(set(strategies)) != len(strategies):
        raise InputError("a strategy is listed twice", where(origin, key="strategies"))
    axes = _parse_axes(doc, strategies, origin)
    raw_set = doc.get("set", {})
    if not isinstance(raw_set, dict):
        raise InputError("must be a table", where(origin, key="set"))
    sets = {k: check_param(k, v, f"{origin}: set") for k, v in raw_set.items()}
    for k in sets:
        if k in axes:
            raise InputError("is both an axis and a [set] value", where(origin, key=f"set.{k}"))
    name = doc.get("name", Path(origin).stem)
    if not isinstance(name, str) or not name or "/" in name:
        raise InputError("must be a non-empty name without '/'", where(origin, key="name"))
    return SweepSpec(name, models, machines, strategies, axes, sets, base, text, origin)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep TOML file; relative paths resolve against its folder.

    A name that is not a file but names a shipped sweep (``grids/sweeps/NAME.toml``) loads that.
    """
    path = Path(path)
    if not path.exists() and path.suffix != ".toml" and (grids.SWEEPS / f"{path}.toml").exists():
        path = grids.SWEEPS / f"{path}.toml"
    doc = read_toml(path)
    return parse_spec(doc, str(path), path.resolve().parent, path.read_text(encoding="utf-8-sig"))


@dataclass
class Job:
    """One (model, machine, strategy) with its own mixed-radix index space."""

    index: int
    bound: Bound
    strategy: str
    axes: dict[str, np.ndarray]  # outermost first
    #: configuration columns beyond the paper's: the own axes of the plan's strategies (registry
    #: order), then ``micro_batch`` (b / S) where one of them has a micro-batch, in every job of the plan
    extra_columns: tuple[str, ...] = ()
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = math.prod(len(v) for v in self.axes.values())

    @property
    def machine_axes(self) -> tuple[str, ...]:
        """The swept axes that are not configuration axes, in spec order: machine parameters and
        ``tokens`` (:data:`MODEL_AXES`). Each is a float column whose rows carry its digit."""
        return tuple(k for k in self.axes if k not in CONFIG_AXES)

    @property
    def param_axes(self) -> tuple[str, ...]:
        """The swept machine parameters: :attr:`machine_axes` without ``tokens``."""
        return tuple(k for k in self.machine_axes if k not in MODEL_AXES)

    def axis_inputs(self, name: str) -> np.ndarray:
        """The values of axis ``name`` as the kernels read them: ``tokens`` as the model's samples
        (:func:`~sweep.inputs.transformers.samples_of`, exact on the host), any other as it is."""
        values = self.axes[name]
        if name == "tokens":
            return np.asarray([samples_of(self.bound.model, t) for t in values], np.float64)
        return values


@dataclass
class Plan:
    """A spec expanded into jobs."""

    spec: SweepSpec
    jobs: list[Job]
    models: dict[str, Model]
    machines: dict[str, MachineProfile]

    @property
    def size(self) -> int:
        return sum(j.size for j in self.jobs)


def plan(spec: SweepSpec) -> Plan:
    """Load models and machines and expand the spec into jobs (docs/inputs.md#sweep-specs)."""
    models: dict[str, Model] = {}
    for ref in spec.models:
        model = load_model(ref.spec, lc=ref.lc, base=spec.base)
        if model.name in models:
            raise InputError(f"two models are named '{model.name}'", where(spec.path, key="models"))
        models[model.name] = model
    machines: dict[str, MachineProfile] = {}
    for m in spec.machines:
        profile = load_machine(m, base=spec.base).with_overrides(spec.sets, f"{spec.path}: set")
        if profile.name in machines:
            raise InputError(f"two machines are named '{profile.name}'", where(spec.path, key="machines"))
        machines[profile.name] = profile
    jobs: list[Job] = []
    extra = tuple(a for a in OWN_AXES if any(REGISTRY[s].uses(a) for s in spec.strategies))
    # samples per micro-batch, b / S: a column where a strategy defaults it (data+tensor+pipeline)
    extra += ("micro_batch",) * any(REGISTRY[s].micro_batch is not None for s in spec.strategies)
    for model in models.values():
        if "tokens" in spec.axes:
            try:
                samples_of(model, float(spec.axes["tokens"].min()))
            except InputError as err:
                raise InputError(str(err), where(spec.path, key="axes.tokens")) from None
        for profile in machines.values():
            bound = Bound.of(model, profile)
            for strategy in spec.strategies:
                axes = {k: v for k, v in spec.axes.items() if uses(strategy, k)}
                jobs.append(Job(len(jobs), bound, strategy, axes, extra))
    return Plan(spec, jobs, models, machines)
