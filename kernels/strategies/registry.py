"""The strategy registry (docs/model.md §2): one entry per strategy, read everywhere a strategy varies.

An entry holds the strategy's kernel, the shared configuration axes it reads
(``p``, ``b``, ``p2``, ``S``), its own axes with their types, defaults and
legal values, and how its replicas follow from a configuration. Specs, CLI
options, measured files, the engine, co-design and calibration read these
entries instead of testing strategy names, so a new setting of a strategy is
one :class:`Axis` in its entry plus its physics in the kernel.

Every axis is a field of :class:`kernels.terms.Config` of the same name, a
spec axis, an API keyword and a CLI option (``--name``, ``_`` written ``-``).
A categorical axis (``choices``) is carried as the index of its name: the
kernels see the code, people read the name.

Pure Python and NumPy (no JAX), so that inputs can be checked without importing the kernels.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from kernels.names import LIMITS
from kernels.partition import placeable

#: Codes of data+tensor+pipeline's ``recompute`` axis: activation recomputation (docs/model.md §16).
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")
#: Codes of data+tensor+pipeline's ``precision`` axis: the GEMMs' number format (docs/model.md §16).
PRECISION: tuple[str, ...] = ("bf16", "fp8", "mxfp8", "nvfp4")
#: The machine parameter giving the GPU's dense rate for each precision, in code order, and the
#: format's name in a refusal: per-tensor FP8, block-scaled MXFP8 (OCP microscaling, 32 elements
#: per E8M0 scale) and NVFP4 (16 elements per FP8 scale; docs/model.md §16).
PRECISION_RATE: tuple[str, ...] = ("gpu_flops", "gpu_flops_fp8", "gpu_flops_mxfp8", "gpu_flops_fp4")
_PRECISION_LABEL: tuple[str, ...] = ("BF16", "FP8", "MXFP8", "NVFP4")


def _precision_rate(v):
    """The GPU's rate for the configuration's precision (1 for bf16: every GPU has one)."""
    prec = v["precision"]
    rate = 1.0 * (prec == 0)
    for code in range(1, len(PRECISION)):
        rate = rate + (prec == code) * v[PRECISION_RATE[code]]
    return rate


def _precision_why(v) -> str:
    code = int(v["precision"])
    return (
        f"precision {PRECISION[code]} needs a GPU with an {_PRECISION_LABEL[code]} rate "
        f"(the machine's {PRECISION_RATE[code]} is 0)"
    )


class Axis(NamedTuple):
    """One configuration axis: name, default, legal values, a line of help.

    ``choices`` makes the axis categorical: its values are the names, carried
    as their index. Otherwise the values are whole numbers in ``[minimum,
    maximum]`` (``maximum`` None: unbounded). ``default`` is the value when not
    given (the code, for a categorical axis). ``searched``: co-design tries every
    legal value of the axis when a question does not list its values (otherwise
    the default).
    """

    name: str
    default: int
    help: str
    minimum: int = 1
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    searched: bool = False
    #: the largest value a search tries when not listed (None: ``maximum``, or p)
    searched_max: int | None = None

    def code(self, value: Any) -> int:
        """The code of a value a person gave (a name of ``choices``, or a whole number in range);
        a ``ValueError`` naming the axis otherwise."""
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return self.choices.index(value)
            if _whole(value) and 0 <= int(value) < len(self.choices):
                return int(value)
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}")
        if not _whole(value):
            raise ValueError(f"{self.name} must be a whole number, got {value!r}")
        v = int(value)
        if v < self.minimum or (self.maximum is not None and v > self.maximum):
            upper = f" and <= {self.maximum}" if self.maximum is not None else ""
            raise ValueError(f"{self.name} must be >= {self.minimum}{upper}, got {value!r}")
        return v

    def label(self, code: int) -> str | int:
        """What a person reads for a code: the name of a categorical axis, else the number."""
        return self.choices[int(code)] if self.choices else int(code)

    def shown(self, value: Any) -> bool:
        """Whether a one-line report shows this axis at ``value`` (as a person reads it): always
        where co-design searches it, else when it is away from its default."""
        return self.searched or value != self.label(self.default)


def _whole(value: Any) -> bool:
    """A whole number (an int, or a float or numpy number equal to one), not a bool or a string."""
    if isinstance(value, bool | str):
        return False
    try:
        return float(value) == int(value)
    except (TypeError, ValueError, OverflowError):
        return False


class Rule(NamedTuple):
    """One legality rule of a strategy (docs/model.md §2): a configuration breaks it where
    ``broken(v)`` is true.

    ``v`` maps names to values: the configuration's ``p``, ``b``, ``p2``, ``S`` and own axes,
    and the facts of the model and machine it runs on (:func:`facts`: ``heads``, ``blocks``,
    ``gpu_flops_fp8``). ``broken`` is one array expression (``v["p"] % (v["tp"] * v["pp"]) != 0``) that
    works on Python and NumPy scalars and on traced JAX arrays alike, so that a sweep, the
    kernel and a single configuration read the same rule. ``reason`` is the limit reason a row
    that breaks it is given (a name of :data:`kernels.names.LIMITS`), ``params`` the parameters
    it concerns (those a person changes to mend it), ``says(v)`` its one-line message on scalars.
    """

    reason: str
    params: tuple[str, ...]
    broken: Callable[[Mapping[str, Any]], Any]
    says: Callable[[Mapping[str, Any]], str]

    @property
    def code(self) -> int:
        """The rule's limit code (its reason's index in :data:`kernels.names.LIMITS`)."""
        return LIMITS.index(self.reason)


class Broken(NamedTuple):
    """The first rule a configuration breaks and its one-line message."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return self.message


class Strategy(NamedTuple):
    """A strategy's registry entry.

    ``shared`` lists the shared axes its rows multiply by (``p``, ``b``, ``p2``,
    ``S``); ``own`` its own axes; ``group`` the GPUs of one replica given p, p2
    and its own values by name (the replicas are ``p1 = p / group`` and the
    global batch ``B = b p1``); ``S_is_p`` whether S defaults to p (the
    pipeline) rather than 1. ``kernel`` names the cost function
    ``f(net, machine, cfg) -> Cost`` as ``module:function``, imported on first use.
    """

    name: str
    kernel_path: str
    shared: tuple[str, ...]
    own: tuple[Axis, ...]
    group: Callable[[Any, Any, Mapping[str, Any]], Any]
    S_is_p: bool = False
    paper: bool = True
    doc: str = ""
    rules: tuple[Rule, ...] = ()
    micro_batch: int | None = None

    @property
    def kernel(self) -> Callable:
        module, function = self.kernel_path.split(":")
        return getattr(importlib.import_module(module), function)

    def uses(self, axis: str) -> bool:
        """Whether this strategy's rows multiply by an axis (shared or its own)."""
        return axis in self.shared or any(a.name == axis for a in self.own)

    def axis(self, name: str) -> Axis:
        """Its own axis ``name``."""
        for a in self.own:
            if a.name == name:
                return a
        raise KeyError(name)

    def defaults(self) -> dict[str, int]:
        """Its own axes' default values, by name."""
        return {a.name: a.default for a in self.own}

    def filled(self, cfg):
        """A :class:`kernels.terms.Config` (any record with ``_replace``) whose own axes not
        given (None) take their :attr:`Axis.default`, in ``cfg.p``'s shape and type."""
        zero = cfg.p * 0
        return cfg._replace(**{a.name: zero + a.default for a in self.own if getattr(cfg, a.name) is None})

    def broken(self, net, cfg: Mapping[str, Any], machine=None) -> Broken | None:
        """The first rule one configuration breaks (``cfg``: ``p``, ``b``, ``S`` and own axes by
        name, Python or NumPy scalars; an own axis not given takes its default) on ``net``
        (:class:`kernels.network.Net`) and ``machine`` (None: the rules that read the machine
        hold), or None."""
        v = values(self, net, cfg, machine)
        for rule in self.rules:
            if bool(rule.broken(v)):
                return Broken(rule, f"{rule.says(v)} ({rule.reason})")
        return None

    def check(self, net, cfg: Mapping[str, Any], machine=None) -> str | None:
        """Why one configuration cannot run (the first broken rule's one-line message, its limit
        reason in brackets), or None: :meth:`broken`'s message."""
        found = self.broken(net, cfg, machine)
        return None if found is None else found.message

    def limit(self, v: Mapping[str, Any]):
        """The limit code of the first rule broken by values ``v`` (:func:`values`: scalars or
        arrays), 0 where every rule holds."""
        code: Any = 0
        for rule in self.rules:
            code = code + (code == 0) * rule.broken(v) * rule.code
        return code

    def legal(self, net, p: int, axis: str) -> tuple[int, ...]:
        """The values of own axis ``axis`` that co-design and splits try at ``p`` GPUs on ``net``
        (their default lists): those that break no rule with the other own axes at their
        defaults and one sample in one micro-batch (tp dividing the heads and p, pp up to the
        blocks and dividing p); an axis the registry does not mark ``searched`` its default; a
        categorical one every code."""
        a = self.axis(axis)
        if not a.searched:
            return (a.default,)
        if a.choices:
            return tuple(range(len(a.choices)))
        # every value at once: the rules are array expressions, the other axes at their defaults
        top = a.searched_max if a.searched_max is not None else a.maximum
        tried = np.arange(a.minimum, (top if top is not None else p) + 1)
        v = values(self, net, {"p": p, "b": 1, "p2": 1, "S": 1, axis: tried})
        ok = np.ones(tried.shape, bool)
        for rule in self.rules:
            ok &= ~np.asarray(rule.broken(v), bool)
        return tuple(int(t) for t in tried[ok])


def facts(net, machine=None) -> dict[str, Any]:
    """What the rules read of a model and machine: ``heads`` (the key/value heads tp must
    divide: the attention heads without grouped-query attention), ``blocks`` (the stages the
    model can be cut into: a GPT's transformer blocks), ``experts`` and ``expert_width`` (what
    ep and etp must divide: a mixture of experts' experts and widths, 1 for a dense model), ``gpu_flops_fp8``, ``gpu_flops_mxfp8``,
    ``gpu_flops_fp4`` (the GPU's low-precision rates; 1 without a machine, so that the rules
    reading the machine hold), ``seq`` (a sample's tokens, that cp splits; 0 without an
    embedding). Scalars or arrays."""
    table = getattr(net, "transformer", None)
    moe = getattr(table, "moe", None)
    return {
        "heads": table.heads if table is not None else 1,
        "blocks": net.n_stages,
        "experts": moe.experts if moe is not None else 1,
        "expert_width": moe.width if moe is not None else 1,
        "seq": getattr(net, "tokens", 0),
        **{r: 1.0 if machine is None else getattr(machine, r) for r in PRECISION_RATE[1:]},
    }


def values(strategy: Strategy, net, cfg: Mapping[str, Any], machine=None) -> dict[str, Any]:
    """The names a strategy's rules read: ``cfg``'s values (its own axes not given at their
    defaults) and :func:`facts` of ``net`` and ``machine``."""
    given = {k: v for k, v in cfg.items() if v is not None}
    return {**strategy.defaults(), **given, **facts(net, machine)}


def _tensor_group(p, p2, own: Mapping[str, Any]):
    """tp * pp * cp, the GPUs of one data-parallel replica (its context-parallel ranks share
    its samples); ints, or (traced) arrays where a sweep computes the replicas on the device."""
    return own.get("tp", 1) * own.get("pp", 1) * own.get("cp", 1)


#: data+tensor+pipeline's own axes (docs/model.md §16).
TENSOR_AXES: tuple[Axis, ...] = (
    Axis("tp", 1, "tensor-parallel degree (GPUs splitting each layer)", searched=True),
    Axis("pp", 1, "pipeline stages", searched=True),
    Axis("recompute", 0, "activation recomputation", minimum=0, choices=RECOMPUTE, searched=True),
    Axis(
        "zero",
        0,
        "ZeRO stage: 1 shards optimizer states over data-parallel replicas, 2 also gradients, 3 also weights",
        0,
        3,
        searched=True,
        searched_max=1,  # ZeRO-2/3 (FSDP) are tried where a question lists them
    ),
    Axis("vp", 1, "model chunks per GPU of the interleaved 1F1B schedule (1: plain 1F1B)"),
    Axis("sp", 0, "sequence parallelism (0 or 1)", 0, 1),
    Axis("precision", 0, "number format of the GEMMs", minimum=0, choices=PRECISION),
    Axis("reshard", 1, "zero 3: free the gathered weights after the forward, gather again (0 or 1)", 0, 1),
    Axis("dp_shard", 0, "ZeRO's shard group: data-parallel replicas (0: all; HSDP: fewer)", minimum=0),
    Axis("cp", 1, "context-parallel degree (GPUs splitting each sequence; ring attention)", searched=True),
    Axis("ep", 1, "expert-parallel degree: GPUs a mixture of experts' experts are split over", searched=True),
    Axis("etp", 1, "expert tensor-parallel degree: GPUs each expert's FFN is split over"),
)

#: data+tensor+pipeline's legality (docs/model.md §2, §16), in the order the first broken one is
#: named. pp beyond the blocks, pp x vp chunks not dividing them are ``max_p``, as a group the
#: model cannot be cut into; the interleaved schedule's pp | S is ``batch``.
TENSOR_RULES: tuple[Rule, ...] = (
    Rule(
        "heads",
        ("tp",),
        lambda v: v["heads"] % v["tp"] != 0,
        lambda v: f"tp {v['tp']:g} does not divide the model's {v['heads']:g} key/value heads",
    ),
    Rule(
        "divides",
        ("p", "tp", "pp", "cp"),
        lambda v: v["p"] % (v["tp"] * v["pp"] * v["cp"]) != 0,
        lambda v: (
            f"tp x pp = {v['tp'] * v['pp']:g} does not divide p {v['p']:g}"
            if v["cp"] == 1
            else f"tp x pp x cp = {v['tp'] * v['pp'] * v['cp']:g} does not divide p {v['p']:g}"
        ),
    ),
    Rule(
        "divides",
        ("cp", "seq"),
        # the load-balanced causal split (docs/model.md §20): 2 cp chunks of the sequence, rank i
        # holding chunks i and 2 cp - 1 - i
        lambda v: (v["cp"] > 1) & ((v["seq"] < 2 * v["cp"]) | (v["seq"] % (2 * v["cp"]) != 0)),
        lambda v: (
            f"cp {v['cp']:g} does not split the model's {v['seq']:g}-token sequence into "
            f"2 x cp = {2 * v['cp']:g} equal chunks"
        ),
    ),
    Rule(
        "divides",
        ("dp_shard", "p", "tp", "pp", "cp"),
        # HSDP: groups of dp_shard replicas, replicated across; 0 shards over every replica
        lambda v: (
            (v["dp_shard"] > 0)
            & ((v["p"] // (v["tp"] * v["pp"] * v["cp"])) % (v["dp_shard"] + (v["dp_shard"] == 0)) != 0)
        ),
        lambda v: (
            f"dp_shard {v['dp_shard']:g} does not divide the "
            f"{v['p'] // (v['tp'] * v['pp'] * v['cp']):g} data-parallel replicas"
        ),
    ),
    # a mixture of experts (docs/model.md §17): the expert layers regroup the p / pp GPUs of a
    # stage (tp x dp) into ep x etp x the expert-data-parallel replicas (Megatron-Core's rule)
    Rule(
        "divides",
        ("ep", "etp", "p", "pp"),
        lambda v: (v["p"] // v["pp"]) % (v["ep"] * v["etp"]) != 0,
        lambda v: (
            f"ep x etp = {v['ep'] * v['etp']:g} does not divide the {v['p'] // v['pp']:g} GPUs of a stage"
        ),
    ),
    Rule(
        "divides",
        ("ep",),
        lambda v: v["experts"] % v["ep"] != 0,
        lambda v: (
            f"ep {v['ep']:g} does not divide the model's {v['experts']:g} experts"
            if v["experts"] > 1
            else f"ep {v['ep']:g} needs a mixture of experts (the model has none)"
        ),
    ),
    Rule(
        "divides",
        ("etp",),
        lambda v: v["expert_width"] % v["etp"] != 0,
        lambda v: (
            f"etp {v['etp']:g} does not divide the experts' widths (their gcd {v['expert_width']:g})"
            if v["expert_width"] > 1
            else f"etp {v['etp']:g} needs a mixture of experts (the model has none)"
        ),
    ),
    Rule(
        "max_p",
        ("pp",),
        lambda v: v["pp"] > v["blocks"],
        lambda v: f"pp {v['pp']:g} is more than the model's {v['blocks']:g} blocks",
    ),
    Rule(
        "schedule",
        ("vp", "pp"),
        lambda v: (v["vp"] > 1) & (v["pp"] == 1),
        lambda v: f"vp {v['vp']:g} needs pp > 1: the interleaved schedule interleaves pipeline stages",
    ),
    Rule(
        "max_p",
        ("vp", "pp"),
        # Megatron-Core's placement (kernels.partition.placeable): every one of the pp x vp
        # chunks holds a layer of the blocks, the embedding or the loss
        lambda v: placeable(v["blocks"], v["pp"], v["vp"]) ^ True,  # not placeable (bools or arrays)
        lambda v: (
            f"pp x vp = {v['pp'] * v['vp']:g} model chunks are more than the model's {v['blocks']:g} "
            "blocks with the embedding and the loss"
        ),
    ),
    Rule(
        "batch",
        ("S", "pp", "vp"),
        lambda v: (v["vp"] > 1) & (v["S"] % v["pp"] != 0),
        lambda v: f"the interleaved schedule needs pp {v['pp']:g} to divide S {v['S']:g}",
    ),
    Rule(
        "batch",
        ("micro_batch", "b", "S"),
        lambda v: (v["S"] < 1) | (v["b"] < v["S"]) | (v["b"] % v["S"] != 0),
        lambda v: f"S {v['S']:g} micro-batches do not divide b {v['b']:g}",
    ),
    Rule(
        "precision",
        ("precision",),
        lambda v: (v["precision"] > 0) & (_precision_rate(v) <= 0),
        _precision_why,
    ),
)

_ENTRIES: tuple[Strategy, ...] = (
    Strategy("serial", "kernels.strategies.serial:serial", ("b",), (), lambda p, p2, o: 1, doc="one GPU"),
    Strategy("data", "kernels.strategies.data:data", ("p", "b"), (), lambda p, p2, o: 1),
    Strategy("spatial", "kernels.strategies.spatial:spatial", ("p", "b"), (), lambda p, p2, o: p),
    Strategy(
        "pipeline", "kernels.strategies.pipeline:pipeline", ("p", "b", "S"), (), lambda p, p2, o: p, True
    ),
    Strategy("filter", "kernels.strategies.filter:filter_", ("p", "b"), (), lambda p, p2, o: p),
    Strategy("channel", "kernels.strategies.filter:channel", ("p", "b"), (), lambda p, p2, o: p),
    Strategy(
        "data+filter", "kernels.strategies.hybrid:data_filter", ("p", "b", "p2"), (), lambda p, p2, o: p2
    ),
    Strategy(
        "data+spatial", "kernels.strategies.hybrid:data_spatial", ("p", "b", "p2"), (), lambda p, p2, o: p2
    ),
    Strategy(
        "data+tensor+pipeline",
        "kernels.strategies.megatron:data_tensor_pipeline",
        ("p", "b", "S"),
        TENSOR_AXES,
        _tensor_group,
        paper=False,
        rules=TENSOR_RULES,
        micro_batch=1,  # Megatron-LM's default micro-batch size (docs/model.md §2, §16)
    ),
)

#: Strategy name (column ``strategy``) to its entry, in the order of docs/model.md §2.
REGISTRY: dict[str, Strategy] = {s.name: s for s in _ENTRIES}
#: Every axis a strategy may own, by name (the union over the entries; one definition per name).
OWN_AXES: dict[str, Axis] = {a.name: a for s in _ENTRIES for a in s.own}
#: The shared configuration axes, in column order.
SHARED_AXES: tuple[str, ...] = ("p", "b", "p2", "S")


def entry(name: str) -> Strategy:
    """The entry of strategy ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown strategy '{name}' (known: {', '.join(REGISTRY)})") from None
