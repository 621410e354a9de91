"""Measured-run files: CSV tables of measured iteration times, read and checked row by row.

One row per measured configuration (format in docs/trust.md)::

    model,strategy,p,b,p2,S,machine,iter_time_s[,iter_time_std_s,t_comp_s,t_comm_s,...]

A row may give a column per own axis of the strategy registry
(:data:`kernels.strategies.registry.OWN_AXES`; data+tensor+pipeline's ``tp``,
``pp``, ``recompute`` = none | selective | full, ``zero``, ``vp``, ``sp``,
``precision`` = bf16 | fp8, docs/model.md §16); a strategy ignores the axes it
does not own. An absent column is the axis's default; an **empty cell** means
"not published": the run keeps the axis in :attr:`Run.unpublished`, and
:func:`sweep.trust.unpublished.fill` (which ``sweep validate`` and ``sweep
calibrate`` call) predicts it with the fastest feasible legal value, since a
published run was tuned. data+tensor+pipeline takes S = 1 when it is absent.

``model``, ``strategy``, ``p``, ``iter_time_s`` and the batch (``b``, or
``global_batch``) are required. The batch is ``b`` samples per data-parallel
replica, as everywhere, or as published LLM runs state it: ``global_batch``,
``b = global_batch / p1`` over the p1 replicas, and ``micro_batch``, ``S = b /
micro_batch`` (where ``b`` or ``S`` is empty or absent; docs/model.md §2).
``p2`` and ``S`` may be absent or empty (the defaults of docs/model.md §2: p2 =
gpus_per_node for the hybrids, S = p for pipeline); ``machine`` may be absent
when the caller names the machine for every row. Other columns are kept as
text and ignored.

A bad row (unknown model or strategy, p not divisible by p2, a time <= 0, a
configuration that cannot exist: tp x pp not dividing p, tp not dividing the
heads, pp beyond the layers, S not dividing b, :func:`~sweep.inputs.configs.impossible`,
or a global batch or micro-batch that does not divide) is reported with its line number: collected in :attr:`Measurements.skipped`,
or raised as an :class:`~sweep.errors.InputError` with ``strict=True``. A bad
file (missing, no header, a required column missing, no usable row: then with
every row's reason) is always an error.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernels.strategies.registry import OWN_AXES, REGISTRY
from sweep.errors import InputError, where
from sweep.inputs.configs import (
    NO_OWN,
    Bound,
    Own,
    default_p2,
    default_S,
    defaults,
    impossible,
    own_values,
    p2_fits,
    uses,
)
from sweep.inputs.machines import MachineProfile, load_machine
from sweep.inputs.models import load_model

#: Columns every measured-run file must have (and the batch: :data:`BATCH`).
REQUIRED: tuple[str, ...] = ("model", "strategy", "p", "iter_time_s")
#: The batch: samples per replica, or the global batch (one of them is required).
BATCH: tuple[str, ...] = ("b", "global_batch")
#: Settings of published runs the model has no axis for yet, at their neutral value: a row
#: that sets one otherwise cannot be predicted as run, so it is skipped with the reason, never
#: predicted as if it were absent (a run with context parallelism 2 is not the run without it).
UNMODELLED: dict[str, tuple[int, str]] = {
    name: found
    for name, found in {
        "cp": (1, "context parallelism"),
        "ep": (1, "expert parallelism"),
        "etp": (1, "expert tensor parallelism"),
    }.items()
    if name not in OWN_AXES
}
#: Columns read when present; any other column is kept as text and ignored.
OPTIONAL: tuple[str, ...] = (
    "p2",
    "S",
    *BATCH,
    "micro_batch",
    "machine",
    "iter_time_std_s",
    "t_comp_s",
    "t_comm_s",
    *OWN_AXES,
)


@dataclass(frozen=True)
class Run:
    """One measured configuration, checked; ``p2`` and ``S`` resolved to the values evaluated."""

    line: int
    model: str
    strategy: str
    machine: str
    p: int
    b: int
    p2: int
    S: int
    iter_time_s: float
    iter_time_std_s: float | None = None
    t_comp_s: float | None = None
    t_comm_s: float | None = None
    fields: dict[str, str] = field(default_factory=dict, compare=False)  # every column as written
    own: Own = NO_OWN  # the strategy's own axes (registry), codes
    #: Own axes whose cell is empty (not published): :func:`sweep.trust.unpublished.fill` sets
    #: them to the fastest feasible legal value; until then they hold their default.
    unpublished: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A row left out, with its line number and why."""

    line: int
    reason: str


@dataclass
class Measurements:
    """A checked measured-run file: usable runs, skipped rows, and what they refer to."""

    path: str
    columns: tuple[str, ...]
    runs: list[Run]
    skipped: list[Skipped]
    bounds: dict[tuple[str, str], Bound]  # (machine key, model name) -> bound model
    machine_of: dict[str, str]  # CSV machine name -> machine key of ``bounds``

    def bound(self, run: Run) -> Bound:
        """The model of ``run`` bound to the machine it is predicted on."""
        return self.bounds[(self.machine_of[run.machine], run.model)]

    def messages(self) -> list[str]:
        """``FILE:LINE: reason`` for every skipped row."""
        return [f"{where(self.path, s.line)}: {s.reason}" for s in self.skipped]

    def subset(self, keep: list[int]) -> Measurements:
        """The same file restricted to the runs at positions ``keep``."""
        return Measurements(
            self.path,
            self.columns,
            [self.runs[i] for i in keep],
            [],
            self.bounds,
            self.machine_of,
        )


class _Bad(Exception):
    """A bad row; carries the reason."""


def _whole(text: str, name: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise _Bad(f"{name} must be a whole number >= 1, got '{text}'") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise _Bad(f"{name} must be a whole number >= 1, got '{text}'")
    return int(value)


def _seconds(text: str, name: str, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Bad(f"{name} must be a number of seconds, got '{text}'") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise _Bad(f"{name} must be {'> 0' if positive else '>= 0'}, got '{text}'")
    return value


def read_measurements(
    path: str | Path,
    *,
    machine: MachineProfile | None = None,
    strict: bool = False,
) -> Measurements:
    """Read and check a measured-run CSV file.

    ``machine`` predicts every row on that profile (the ``machine`` column, if
    any, is then kept but not used); without it each row's ``machine`` names a
    built-in profile or a ``.toml`` path (relative to the CSV's folder).
    ``strict`` turns the first bad row into an :class:`InputError`; otherwise
    bad rows are collected in ``skipped`` with their line numbers.
    """
    path = Path(path)
    reader = csv.reader(_read_text(path).splitlines(keepends=True))
    columns = _read_header(reader, path, machine)
    rows = _RowChecker(path, machine)
    runs: list[Run] = []
    skipped: list[Skipped] = []
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            raise InputError(f"malformed CSV: {err}", where(path, reader.line_num)) from None
        line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
        try:
            if len(record) != len(columns):
                raise _Bad(f"expected {len(columns)} fields like the header, got {len(record)}")
            run = rows.check(dict(zip(columns, (c.strip() for c in record), strict=True)), line)
        except _Bad as bad:
            if strict:
                raise InputError(str(bad), where(path, line)) from None
            skipped.append(Skipped(line, str(bad)))
            continue
        runs.append(run)
    if not runs:
        reasons = "".join(f"; line {s.line}: {s.reason}" for s in skipped)
        raise InputError(f"no usable rows ({len(skipped)} skipped){reasons}", str(path))
    return Measurements(str(path), columns, runs, skipped, rows.bounds, rows.machine_of)


def _read_text(path: Path) -> str:
    """The file's text, or a one-line :class:`InputError`."""
    try:
        # utf-8-sig: a spreadsheet's CSV export often starts with a byte-order mark
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return fh.read()
    except FileNotFoundError:
        raise InputError("no such file", str(path)) from None
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read: not UTF-8 text (byte {err.start})", str(path)) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", str(path)) from None


def _read_header(reader, path: Path, machine: MachineProfile | None) -> tuple[str, ...]:
    """The header's column names, checked: no duplicate, every required column, and a
    ``machine`` column unless the caller names the machine."""
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file: expected a header line", str(path)) from None
    except csv.Error as err:
        raise InputError(f"malformed CSV: {err}", where(path, 1)) from None
    columns = tuple(h.strip() for h in header)
    dupes = sorted({c for c in columns if columns.count(c) > 1})
    if dupes:
        raise InputError(f"column '{dupes[0]}' appears twice in the header", where(path, 1))
    for name in REQUIRED:
        if name not in columns:
            raise InputError(
                f"missing column '{name}' (required: {', '.join(REQUIRED)} and b or global_batch)",
                where(path, 1),
            )
    if not any(name in columns for name in BATCH):
        raise InputError(
            "missing column 'b' or 'global_batch': the samples per replica, or per iteration",
            where(path, 1),
        )
    if machine is None and "machine" not in columns:
        raise InputError(
            "no 'machine' column: give one machine for every row", where(path, 1), param="machine"
        )
    return columns


class _RowChecker:
    """Checks the rows of one file into :class:`Run` s, loading each model and machine once,
    and keeps the bound (model, machine) pairs they use."""

    def __init__(self, path: Path, machine: MachineProfile | None):
        self.path = path
        self.machine = machine
        self.models: dict[str, object] = {}  # name -> Model or the InputError text
        self.profiles: dict[str, object] = {}
        self.bounds: dict[tuple[str, str], Bound] = {}
        self.machine_of: dict[str, str] = {}

    def _load_once(self, cache: dict[str, object], name: str, load):
        """``load(name)`` once per name; a failure is remembered as its message and raised as a bad row."""
        if name not in cache:
            try:
                cache[name] = load(name, base=self.path.parent)
            except InputError as err:
                cache[name] = str(err)
        return cache[name]

    def profile_of(self, name: str) -> MachineProfile:
        if self.machine is not None:
            return self.machine
        found = self._load_once(self.profiles, name, load_machine)
        if isinstance(found, str):
            raise _Bad(f"machine '{name}': {found}")
        assert isinstance(found, MachineProfile)
        return found

    def model_of(self, name: str):
        found = self._load_once(self.models, name, load_model)
        if isinstance(found, str):
            raise _Bad(found if found.startswith("unknown model") else f"model '{name}': {found}")
        return found

    def check(self, values: dict[str, str], line: int) -> Run:
        """Row ``line`` (``values`` by column) as a :class:`Run`, or :class:`_Bad` saying why not."""
        model_name = values["model"]
        if not model_name:
            raise _Bad("empty model")
        strategy = values["strategy"]
        if strategy not in REGISTRY:
            raise _Bad(f"unknown strategy '{strategy}' (known: {', '.join(REGISTRY)})")
        for name, (neutral, what) in UNMODELLED.items():
            if values.get(name, "").strip() not in ("", str(neutral)):
                raise _Bad(
                    f"{name} {values[name].strip()}: {what} is not modelled yet (rows with {name} {neutral} are read)"
                )
        model = self.model_of(model_name)
        machine_name = values.get("machine", "")
        if self.machine is None and not machine_name:
            raise _Bad("empty machine")
        profile = self.profile_of(machine_name)
        p = _whole(values["p"], "p")
        if not uses(strategy, "p") and p != 1:
            raise _Bad(f"{strategy} needs p = 1, got {p}")
        own, unpublished = _own(strategy, values)
        time = _seconds(values["iter_time_s"], "iter_time_s", positive=True)
        extra = {
            name: _seconds(values[name], name, positive=False) if values.get(name) else None
            for name in ("iter_time_std_s", "t_comp_s", "t_comm_s")
        }
        key = profile.source or profile.name
        self.machine_of[machine_name] = key
        if (key, model_name) not in self.bounds:
            self.bounds[(key, model_name)] = Bound.of(model, profile)  # type: ignore[arg-type]
        run = Run(
            line, model_name, strategy, machine_name, p, 1, 1, 1, time, extra["iter_time_std_s"],
            extra["t_comp_s"], extra["t_comm_s"], fields=values, own=own, unpublished=unpublished,
        )  # fmt: skip
        settled = configured(run, own, self.bounds[(key, model_name)])
        if isinstance(settled, str):
            if not unpublished:
                raise _Bad(settled)
            # not at the defaults: fill tries every legal value of the unpublished axes
            return replace(run, b=1, p2=default_p2(profile), S=1, own=own)
        return settled


def configured(run: Run, own: Own, bound: Bound) -> Run | str:
    """``run`` with the own axes ``own`` and the batch its row states (``b``, or ``global_batch``
    over the replicas that ``own`` gives, and ``S`` or ``micro_batch``), or why no such
    configuration exists (the batch does not divide, :func:`~sweep.inputs.configs.impossible`)."""
    values, strategy, p = run.fields, run.strategy, run.p
    try:
        p2, S = _p2_and_S(strategy, p, values.get("p2", ""), values.get("S", ""), bound.profile)
        if values.get("b"):
            b = _whole(values["b"], "b")
        elif values.get("global_batch"):
            big = _whole(values["global_batch"], "global_batch")
            p1 = int(own_values(strategy, p, 1, p2, S, own).p1)
            if big % p1:
                return f"global_batch = {big} does not divide among p1 = {p1} replicas"
            b = big // p1
        else:
            raise _Bad("empty b and global_batch: give the samples per replica, or per iteration")
        if values.get("micro_batch") and not values.get("S") and uses(strategy, "S"):
            mb = _whole(values["micro_batch"], "micro_batch")
            if b % mb:
                return f"micro_batch = {mb} does not divide b = {b} samples per replica"
            S = b // mb
    except _Bad as bad:
        return str(bad)
    # the strategy's own p2 and S (docs/model.md §2); a column it does not use is ignored
    written = own_values(strategy, p, b, p2, S, own)
    p2, S = written.p2, int(written.S)
    why = impossible(strategy, bound.net, p, b, S, own)
    if why:
        return f"no such configuration: {why}"
    return replace(run, b=b, p2=p2, S=S, own=own)


def _own(strategy: str, values: dict[str, str]) -> tuple[Own, tuple[str, ...]]:
    """The row's own axes of ``strategy`` (its registry entry), codes, defaults where absent or
    empty; and the axes whose cell is empty (a column present: not published)."""
    given = {}
    unpublished = []
    for axis in REGISTRY[strategy].own:
        text = values.get(axis.name, "")
        if not text:
            if axis.name in values:
                unpublished.append(axis.name)
            continue
        try:
            given[axis.name] = axis.code(
                text if axis.choices and not text.isdigit() else _number(text, axis.name)
            )
        except ValueError as err:
            raise _Bad(str(err)) from None
    return Own(**given), tuple(unpublished)


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _Bad(f"{name} must be a whole number, got '{text}'") from None


def _p2_and_S(strategy: str, p: int, p2_text: str, s_text: str, profile: MachineProfile) -> tuple[int, int]:
    """The row's p2 and S as given, else their defaults (:func:`~sweep.inputs.configs.defaults`);
    a hybrid's p2 must fit p (:func:`~sweep.inputs.configs.p2_fits`)."""
    given_p2 = _whole(p2_text, "p2") if p2_text else None
    S = _whole(s_text, "S") if s_text else default_S(strategy, p)
    p2, S = defaults(p, given_p2, S, default_p2(profile))
    if uses(strategy, "p2") and not p2_fits(p, p2):
        raise _Bad(f"{strategy}: p = {p} is not divisible by p2 = {p2}")
    return p2, S
