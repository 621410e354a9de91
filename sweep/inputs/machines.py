"""Machine profiles: TOML files with SI units in their keys (docs/inputs.md#machines; parameters: docs/model.md §8).

:class:`MachineProfile` is the validated file; :meth:`MachineProfile.pytree`
gives the kernels' :class:`~kernels.Machine`. Built-in profiles live in
``grids/machines/``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import grids
from kernels import SCALAR_PARAMS, STRATEGIES, Machine, with_params
from kernels.machine import INTER_PARAMS, KIND_EFFICIENCY_PARAMS, inter_levels
from kernels.names import PARAMS
from kernels.params import CHOICE, CONTINUOUS, FAMILIES, SWITCH, WHOLE
from kernels.terms import ADDITIVE_TERMS, OVERHEAD_TERMS
from sweep.errors import InputError, InputWarning, where
from sweep.inputs.models import read_toml

#: Top-level number keys a machine file always has (written back always), with defaults
#: (None = required); from the parameter records (:data:`kernels.names.PARAMS`).
TOP_KEYS: dict[str, float | None] = {
    n: p.default for n, p in PARAMS.items() if p.core and not p.file_key and p.kind != CHOICE
}
#: Optional top-level keys, written to a file only when stated or different from these defaults:
#: the per-kind roofline of docs/model.md §3 (``mem_passes = 0`` and every ``efficiency_<kind> = 1``
#: is the paper's compute) and data+tensor+pipeline's parameters (§16).
OPTIONAL_KEYS: dict[str, float] = {
    n: p.default for n, p in PARAMS.items() if not p.core and not p.file_key and p.default is not None
}
#: Top-level choices a file always has, written back by name (``allreduce_algo``, ``memory_model``).
CORE_CHOICES: tuple[str, ...] = tuple(n for n, p in PARAMS.items() if p.core and p.kind == CHOICE)

#: Parameters that must be > 0 (their records' bounds).
POSITIVE: frozenset[str] = frozenset(
    n for n, p in PARAMS.items() if p.kind in (CONTINUOUS, WHOLE) and p.bounds_text() == "> 0"
)

#: Plausible magnitudes in SI units: name -> (lowest, highest, unit). A value outside draws a
#: warning, not an error: it is most likely given in another unit (100 meaning 100 GB/s).
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    n: (*p.plausible, p.unit) for n, p in PARAMS.items() if p.plausible is not None
}


def warn_implausible(name: str, values, origin: str, key: str | None = None) -> None:
    """One warning naming the key and the unit when a value of ``name`` is outside :data:`PLAUSIBLE`."""
    if name not in PLAUSIBLE:
        return
    low, high, unit = PLAUSIBLE[name]
    bad = [float(v) for v in values if not low <= float(v) <= high]
    if not bad:
        return
    value = bad[0]
    bound = f"under {low:g} {unit}" if value < low else f"over {high:g} {unit}"
    hint = {"s": "latencies are in seconds (5 us is 5e-6)"}.get(
        unit, f"the unit is {unit} (100 G{unit} is 1e11)"
    )
    text = f"{where(origin, key=key or name)}: {value:g} {unit} is {bound}, implausible; {hint}"
    warnings.warn(InputWarning(text, param="set" if origin == "set" else ()), stacklevel=3)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_param(name: str, value, origin: str, key: str | None = None, warn: bool = True) -> float:
    """Validate one scalar machine parameter by its record; returns it as float (a choice's
    name as its code). A choice takes a name or its code; a switch 0 or 1; a number its
    record's bounds, a whole number a whole one.

    ``key`` is the name to show in errors (the file's own key, e.g. ``intra.alpha_s``).
    An implausible magnitude draws a warning (:func:`warn_implausible`) unless ``warn`` is false.
    """
    key = key or name
    record = PARAMS.get(name)
    if record is None:
        raise InputError(
            f"unknown machine parameter (known: {', '.join(SCALAR_PARAMS)})", where(origin, key=key)
        )
    if record.kind == CHOICE:  # a name, or its code (a spec's [set] values arrive checked)
        if isinstance(value, str) and value in record.codes:
            return float(record.codes[value])
        if _is_number(value) and value in record.codes.values():
            return float(value)
        raise InputError(f"must be one of {', '.join(record.choices)}", where(origin, key=key))
    if not _is_number(value):
        raise InputError(f"must be a number, got {value!r}", where(origin, key=key))
    value = float(value)
    if record.kind == SWITCH:
        legal = value in (0.0, 1.0)
    else:
        above = value > record.low if record.low_open else value >= record.low
        legal = above and value <= record.high
    if not legal:
        raise InputError(f"must be {record.bounds_text()}, got {value:g}", where(origin, key=key))
    if record.kind == WHOLE and value != int(value):
        raise InputError(f"must be a whole number, got {value:g}", where(origin, key=key))
    if warn:
        warn_implausible(name, [value], origin, key)
    return value


def family(kinds: Collection[str]) -> str:
    """The model family of a model with layers of ``kinds``: ``transformer`` or ``cnn``
    (:data:`kernels.params.FAMILIES`)."""
    return next((f for f, marks in FAMILIES.items() if set(marks) & set(kinds)), "cnn")


@dataclass(frozen=True)
class Posterior:
    """A calibrated file's ``[calibration]`` table: the fitted parameters' coordinates
    ``log(value + floor)`` and their covariance (a Laplace approximation), the spread of held-out
    log residuals, and how the fit was chosen (docs/trust.md, *Prediction intervals*)."""

    structure: str
    cv: str
    cv_accuracy: float
    spread_log: float
    params: tuple[str, ...]
    log_values: tuple[float, ...]
    floors: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class MachineProfile:
    """A validated machine file. ``params`` holds the scalars of :data:`kernels.SCALAR_PARAMS`
    except the inter-level ones, which are the per-level lists."""

    name: str
    params: dict[str, float]
    inter_span_nodes: tuple[float, ...]
    inter_alpha_s: tuple[float, ...]
    inter_bandwidth_Bps: tuple[float, ...]
    description: str = ""
    source: str = ""
    sources: tuple[str, ...] = ()
    overrides: dict[str, float] = field(default_factory=dict)
    #: strategy -> term (compute, allreduce, allgather, halo, p2p) -> multiplicative factor,
    #: and per_iter_s, per_sample_s -> additive seconds (:func:`kernels.terms.scale_terms`)
    overheads: dict[str, dict[str, float]] = field(default_factory=dict)
    #: machine whose measured per-sample times apply here, and its gpu_flops * efficiency
    measured_as: str = ""
    measured_rate_flops: float = 0.0
    #: model name -> factor on its measured per-sample compute time here (``[compute_scale]``)
    compute_scale: dict[str, float] = field(default_factory=dict)
    #: what ``sweep calibrate`` fitted, for prediction intervals (``[calibration]``), or None
    posterior: Posterior | None = None
    #: the optional parameters (:data:`OPTIONAL_KEYS`) the file gives, itself or through its
    #: ``base``; the others take their record's default (:func:`check_family` refuses a model whose family needs one unstated)
    stated: frozenset[str] = frozenset()

    @property
    def measured_key(self) -> str:
        """The name models' measured per-sample times are keyed by: ``measured_as`` or the name."""
        return self.measured_as or self.name

    @property
    def ref_rate_flops(self) -> float:
        """The gpu_flops * efficiency measured times belong to: ``[measured] rate_flops``,
        else the profile's own as written (before overrides)."""
        if self.measured_rate_flops > 0:
            return self.measured_rate_flops
        return self.params["gpu_flops"] * self.params["efficiency"]

    def with_overrides(self, values: Mapping[str, float | str], origin: str = "set") -> MachineProfile:
        """Validated overrides, applied in the kernels by :func:`kernels.with_params`; a mistake
        is said of ``origin`` (the parameter ``set`` unless a file's table is named)."""
        try:
            checked = {k: check_param(k, v, origin) for k, v in values.items()}
        except InputError as err:
            raise InputError(str(err), param=(*err.param, *(("set",) if origin == "set" else ()))) from None
        return replace(self, overrides={**self.overrides, **checked})

    def pytree(self, dtype=np.float64) -> Machine:
        """The kernels' machine, base values only (apply ``overrides`` with :func:`kernels.with_params`)."""
        p = {k: np.asarray(v, dtype=dtype) for k, v in self.params.items() if k not in OPTIONAL_KEYS}
        optional = {k: self.params.get(k, default) for k, default in OPTIONAL_KEYS.items()}
        return Machine(
            **p,
            # every optional key is a Machine field of its name, but the per-kind efficiencies (an array)
            **{k: np.asarray(v, dtype=dtype) for k, v in optional.items() if k not in KIND_EFFICIENCY_PARAMS},
            kind_efficiency=np.asarray([optional[k] for k in KIND_EFFICIENCY_PARAMS], dtype=dtype),
            inter_span_nodes=np.asarray(self.inter_span_nodes, dtype=dtype),
            inter_alpha_s=np.asarray(self.inter_alpha_s, dtype=dtype),
            inter_bandwidth_Bps=np.asarray(self.inter_bandwidth_Bps, dtype=dtype),
        )

    def baked(self, values: Mapping[str, float] | None = None, **changes) -> MachineProfile:
        """The profile with its overrides and ``values`` written into the base parameters.

        Inter-level parameters follow :func:`kernels.machine.inter_levels`, as
        :func:`kernels.with_params` does for a swept axis.
        ``changes`` replace other fields (``name``, ``overheads``, ...).
        """
        merged = {**self.overrides, **(values or {})}
        params = dict(self.params)
        levels = {"inter_alpha_s": self.inter_alpha_s, "inter_bandwidth_Bps": self.inter_bandwidth_Bps}
        for name, value in merged.items():
            if name in INTER_PARAMS:
                new = inter_levels(name, float(value), np.asarray(levels[name], np.float64))
                levels[name] = tuple(float(v) for v in new)
            else:
                params[name] = float(value)
        return replace(
            self,
            params=params,
            inter_alpha_s=levels["inter_alpha_s"],
            inter_bandwidth_Bps=levels["inter_bandwidth_Bps"],
            overrides={},
            **changes,
        )

    def override_values(self, dtype, skip: Collection[str] = ()) -> dict:
        """The profile's overrides as ``dtype`` arrays, for :func:`override` (less ``skip``)."""
        return {k: np.asarray(v, dtype) for k, v in self.overrides.items() if k not in skip}

    def value(self, name: str) -> float:
        """Effective value of a scalar parameter (first inter level for the inter ones)."""
        if name in self.overrides:
            return self.overrides[name]
        if name == "inter_alpha_s":
            return self.inter_alpha_s[0]
        if name == "inter_bandwidth_Bps":
            return self.inter_bandwidth_Bps[0]
        return self.params[name]

    def unstated(self, family_name: str) -> tuple[str, ...]:
        """The parameters ``family_name``'s models need (:attr:`kernels.params.Param.needed_by`)
        that neither the file, its base nor an override states."""
        given = self.stated | set(self.overrides)
        return tuple(n for n, p in PARAMS.items() if family_name in p.needed_by and n not in given)

    def describe(self) -> dict:
        """A JSON-able description for Parquet metadata and ``sweep machines``."""
        return {
            "name": self.name,
            "description": self.description,
            "params": self.params,
            "inter": [
                {"span_nodes": s, "alpha_s": a, "bandwidth_Bps": b}
                for s, a, b in zip(
                    self.inter_span_nodes, self.inter_alpha_s, self.inter_bandwidth_Bps, strict=True
                )
            ],
            "overrides": self.overrides,
            "overheads": self.overheads,
            "measured": {"machine": self.measured_key, "rate_flops": self.ref_rate_flops},
            **({"compute_scale": self.compute_scale} if self.compute_scale else {}),
            "source": self.source,
            "sources": list(self.sources),
        }


def override(machine: Machine, values: Mapping) -> Machine:
    """The kernels' machine with scalar overrides applied: ``--set``, a sweep's ``[set]``, a
    swept axis, a calibrated or scaled value. The one sweep-side call of
    :func:`kernels.with_params` (traceable; values may be arrays)."""
    return with_params(machine, **values) if values else machine


def check_family(profile: MachineProfile, model_name: str, kinds: Collection[str]) -> None:
    """Refuse a model whose family needs parameters the profile does not state: a default
    there would answer silently wrong (a transformer's GEMMs at 100 % of peak without
    ``gpu_sms`` and ``efficiency_linear``; docs/inputs.md#machines)."""
    name = family(kinds)
    missing = profile.unstated(name)
    if missing:
        raise InputError(
            f"machine '{profile.name}' cannot run {name} model '{model_name}': it does not state "
            f"{', '.join(missing)}, which {name} models need (GEMMs by shape, docs/model.md §8); "
            "state them, or inherit them with base = a profile that does",
            param="machine",
        )


#: What a profile takes from its ``base`` when it does not give it: the parameters and the links.
INHERITED = frozenset({*TOP_KEYS, *OPTIONAL_KEYS, *CORE_CHOICES, "intra", "inter"})


def _with_base(doc: dict, origin: str, seen: tuple[str, ...] = ()) -> dict:
    """``doc`` with what it does not give of :data:`INHERITED` taken from its ``base`` profile
    (a built-in name or a ``.toml`` path beside ``origin``), itself resolved the same way."""
    base = doc.get("base")
    if base is None:
        return doc
    if not isinstance(base, str) or not base:
        raise InputError("must be a machine name or a .toml path", where(origin, key="base"))
    if base in builtin_names():
        path, base_origin = grids.MACHINES / f"{base}.toml", base
    else:
        path = Path(base) if Path(base).is_absolute() else Path(origin).parent / base
        base_origin = str(path)
        if path.suffix != ".toml" or not path.is_file():
            raise InputError(
                f"no machine '{base}': not a built-in nor a .toml file", where(origin, key="base")
            )
    if base_origin in (*seen, origin):
        chain = " -> ".join((*seen, origin, base_origin))
        raise InputError(f"profiles inherit in a circle: {chain}", where(origin, key="base"))
    parent = _with_base(read_toml(path), base_origin, (*seen, origin))
    return {**{k: v for k, v in parent.items() if k in INHERITED}, **doc}


def parse_machine(doc: dict, origin: str) -> MachineProfile:
    """Validate a parsed machine TOML document (what it does not give taken from its ``base``)."""
    known = INHERITED | {
        "name",
        "description",
        "sources",
        "base",
        "overheads",
        "measured",
        "compute_scale",
        "calibration",
    }
    for key in doc:
        if key not in known:
            raise InputError("unknown key", where(origin, key=key))
    doc = _with_base(doc, origin)
    params = _scalar_params(doc, origin)
    params.update(_intra_params(doc.get("intra"), origin))
    spans, alphas, bws = _inter_levels(doc.get("inter"), origin)
    sources = doc.get("sources", [])
    if isinstance(sources, str):
        sources = [sources]
    if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
        raise InputError("must be a list of strings", where(origin, key="sources"))
    measured_as, measured_rate = parse_measured(doc.get("measured"), origin)
    return MachineProfile(
        compute_scale=parse_compute_scale(doc.get("compute_scale", {}), origin),
        posterior=parse_posterior(doc.get("calibration"), origin),
        overheads=parse_overheads(doc.get("overheads", {}), origin),
        measured_as=measured_as,
        measured_rate_flops=measured_rate,
        sources=tuple(sources),
        name=str(doc.get("name", Path(origin).stem)),
        params=params,
        inter_span_nodes=tuple(spans),
        inter_alpha_s=tuple(alphas),
        inter_bandwidth_Bps=tuple(bws),
        description=str(doc.get("description", "")),
        source=origin,
        stated=frozenset(n for n in OPTIONAL_KEYS if n in doc),
    )


def _scalar_params(doc: dict, origin: str) -> dict[str, float]:
    """The top-level parameters (:data:`TOP_KEYS`, :data:`OPTIONAL_KEYS` and
    :data:`CORE_CHOICES`, defaults where they have one), checked."""
    params: dict[str, float] = {}
    for key, default in TOP_KEYS.items():
        if key not in doc:
            if default is None:
                raise InputError("missing required key", where(origin, key=key))
            params[key] = default
        else:
            params[key] = check_param(key, doc[key], origin)
    for key, default in OPTIONAL_KEYS.items():
        params[key] = check_param(key, doc[key], origin) if key in doc else default
    for key in CORE_CHOICES:
        params[key] = check_param(key, doc[key], origin) if key in doc else float(PARAMS[key].default or 0)
    return params


def _intra_params(intra, origin: str) -> dict[str, float]:
    """``intra_alpha_s`` and ``intra_bandwidth_Bps`` from the ``[intra]`` table, checked."""
    if not isinstance(intra, dict):
        raise InputError("missing [intra] table (alpha_s, bandwidth_Bps)", where(origin, key="intra"))
    for key in intra:
        if key not in ("alpha_s", "bandwidth_Bps"):
            raise InputError("unknown key", where(origin, key=f"intra.{key}"))
    params = {}
    for key in ("alpha_s", "bandwidth_Bps"):
        if key not in intra:
            raise InputError("missing required key", where(origin, key=f"intra.{key}"))
        params[f"intra_{key}"] = check_param(f"intra_{key}", intra[key], origin, f"intra.{key}")
    return params


def _inter_levels(inter, origin: str) -> tuple[list[float], list[float], list[float]]:
    """``(span_nodes, alpha_s, bandwidth_Bps)`` of each ``[[inter]]`` level, checked: spans
    increase from level to level, and the last level is unbounded (``inf``)."""
    if not isinstance(inter, list) or not inter:
        raise InputError("needs at least one [[inter]] level", where(origin, key="inter"))
    spans: list[float] = []
    alphas, bws = [], []
    for i, level in enumerate(inter):
        last = i == len(inter) - 1
        for key in level:
            if key not in ("span_nodes", "alpha_s", "bandwidth_Bps"):
                raise InputError("unknown key", where(origin, key=f"inter[{i}].{key}"))
        for key in ("alpha_s", "bandwidth_Bps"):
            if key not in level:
                raise InputError("missing required key", where(origin, key=f"inter[{i}].{key}"))
        alphas.append(check_param("inter_alpha_s", level["alpha_s"], origin, f"inter[{i}].alpha_s"))
        bws.append(
            check_param("inter_bandwidth_Bps", level["bandwidth_Bps"], origin, f"inter[{i}].bandwidth_Bps")
        )
        span = level.get("span_nodes")
        if span is None:
            if not last:
                raise InputError(
                    "only the last level may omit span_nodes", where(origin, key=f"inter[{i}].span_nodes")
                )
            spans.append(math.inf)
        else:
            if isinstance(span, bool) or not isinstance(span, int) or span < 1:
                raise InputError("must be an integer >= 1", where(origin, key=f"inter[{i}].span_nodes"))
            if spans and span <= spans[-1]:
                raise InputError(
                    "spans must increase from level to level", where(origin, key=f"inter[{i}].span_nodes")
                )
            spans.append(float(span) if not last else math.inf)  # the last level is unbounded
    return spans, alphas, bws


def check_overhead(value, origin: str, key: str, additive: bool = False) -> float:
    """An overhead: a finite number, > 0 for a factor, >= 0 for an additive term (seconds)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"must be a number, got {value!r}", where(origin, key=key))
    if additive and value < 0:
        raise InputError(f"must be >= 0 seconds, got {value:g}", where(origin, key=key))
    if not additive and value <= 0:
        raise InputError(f"must be > 0, got {value:g}", where(origin, key=key))
    return float(value)


#: An additive overhead per element of a model's input sample: seconds per input element per sample
#: of ``b`` per iteration (moving each input sample to its GPUs); a bound model turns it into
#: ``per_sample_s`` (:func:`sweep.inputs.configs.model_overheads`).
INPUT_TERM = "per_input_s"


def parse_overheads(table, origin: str) -> dict[str, dict[str, float]]:
    """``[overheads.<strategy>]`` tables: ``compute``, ``allreduce``, ``allgather``, ``halo``,
    ``p2p`` factors > 0 on that strategy's terms, and ``per_iter_s``, ``per_sample_s``
    additive seconds >= 0 (per iteration, per sample of ``b`` per iteration), applied by
    :func:`kernels.terms.scale_terms`; ``per_input_s`` seconds >= 0 per element of the
    model's input sample, added to ``per_sample_s`` for each model."""
    if not isinstance(table, dict):
        raise InputError("must be a table of [overheads.<strategy>] tables", where(origin, key="overheads"))
    known = (*OVERHEAD_TERMS, *ADDITIVE_TERMS, INPUT_TERM)
    out: dict[str, dict[str, float]] = {}
    for strategy, terms in table.items():
        key = f"overheads.{strategy}"
        if strategy not in STRATEGIES:
            raise InputError(f"unknown strategy (known: {', '.join(STRATEGIES)})", where(origin, key=key))
        if not isinstance(terms, dict):
            raise InputError(
                f"must be a table of {', '.join(OVERHEAD_TERMS)} = factor and "
                f"{', '.join(ADDITIVE_TERMS)} = seconds",
                where(origin, key=key),
            )
        out[strategy] = {}
        for term, value in terms.items():
            if term not in known:
                raise InputError(
                    f"unknown term (known: {', '.join(known)})", where(origin, key=f"{key}.{term}")
                )
            additive = term in ADDITIVE_TERMS or term == INPUT_TERM
            out[strategy][term] = check_overhead(value, origin, f"{key}.{term}", additive)
    return out


def parse_measured(table, origin: str) -> tuple[str, float]:
    """``[measured]``: ``machine`` whose measured per-sample times apply, and its ``rate_flops``.

    A calibrated profile keeps the compute its base machine measured under its
    own name (``sweep calibrate`` writes this table).
    """
    if table is None:
        return "", 0.0
    if not isinstance(table, dict):
        raise InputError("must be a table (machine, rate_flops)", where(origin, key="measured"))
    for key in table:
        if key not in ("machine", "rate_flops"):
            raise InputError("unknown key", where(origin, key=f"measured.{key}"))
    name = table.get("machine")
    if not isinstance(name, str) or not name:
        raise InputError("must be a machine name", where(origin, key="measured.machine"))
    if "rate_flops" not in table:
        raise InputError("missing required key", where(origin, key="measured.rate_flops"))
    return name, check_param("gpu_flops", table["rate_flops"], origin, "measured.rate_flops")


def parse_compute_scale(table, origin: str) -> dict[str, float]:
    """``[compute_scale]``: model name = factor > 0 on that model's measured per-sample time."""
    if not isinstance(table, dict):
        raise InputError("must be a table of model = factor", where(origin, key="compute_scale"))
    return {str(k): check_overhead(v, origin, f"compute_scale.{k}") for k, v in table.items()}


def _numbers(value, origin: str, key: str, n: int | None = None) -> tuple[float, ...]:
    ok = isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value
    )
    if not ok or (n is not None and len(value) != n):
        size = f"{n} " if n is not None else ""
        raise InputError(f"must be a list of {size}finite numbers", where(origin, key=key))
    return tuple(float(x) for x in value)


def parse_posterior(table, origin: str) -> Posterior | None:
    """``[calibration]`` (written by ``sweep calibrate``), checked: names, coordinates, floors and a
    square covariance of the same length, a spread >= 0."""
    if table is None:
        return None
    key = "calibration"
    if not isinstance(table, dict):
        raise InputError("must be a table", where(origin, key=key))
    fields = ("structure", "cv", "cv_accuracy", "spread_log", "params", "log_values", "floors", "covariance")
    for k in table:
        if k not in fields:
            raise InputError("unknown key", where(origin, key=f"{key}.{k}"))
    for k in fields:
        if k not in table:
            raise InputError("missing required key", where(origin, key=f"{key}.{k}"))
    names = table["params"]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise InputError("must be a list of parameter names", where(origin, key=f"{key}.params"))
    n = len(names)
    cov = table["covariance"]
    if not isinstance(cov, list) or len(cov) != n:
        raise InputError(f"must be {n} rows of {n} numbers", where(origin, key=f"{key}.covariance"))
    rows = tuple(_numbers(r, origin, f"{key}.covariance", n) for r in cov)
    spread = _numbers([table["spread_log"]], origin, f"{key}.spread_log")[0]
    if spread < 0:
        raise InputError(f"must be >= 0, got {spread:g}", where(origin, key=f"{key}.spread_log"))
    return Posterior(
        structure=str(table["structure"]),
        cv=str(table["cv"]),
        cv_accuracy=_numbers([table["cv_accuracy"]], origin, f"{key}.cv_accuracy")[0],
        spread_log=spread,
        params=tuple(names),
        log_values=_numbers(table["log_values"], origin, f"{key}.log_values", n),
        floors=_numbers(table["floors"], origin, f"{key}.floors", n),
        covariance=rows,
    )


def builtin_names() -> list[str]:
    """Names of the built-in machine profiles."""
    return sorted(p.stem for p in grids.MACHINES.glob("*.toml"))


def load_machine(spec: str | Path, base: Path | None = None) -> MachineProfile:
    """A built-in profile by name, or a ``.toml`` path."""
    text = str(spec)
    if text in builtin_names():
        path = grids.MACHINES / f"{text}.toml"
        return parse_machine(read_toml(path), text)
    path = Path(text)
    if base is not None and not path.is_absolute():
        path = base / path
    if path.suffix != ".toml":
        raise InputError(
            f"unknown machine '{text}': not a built-in ({', '.join(builtin_names())}) nor a .toml file"
        )
    return parse_machine(read_toml(path), str(path))
