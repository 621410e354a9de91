"""The machine parameters as records (docs/model.md §8): one :class:`Param` per scalar parameter.

Each record says what a parameter is (unit, kind, bounds, default, one line of help), what a
machine file calls it, which model families need a profile to state it, and how co-design and
sensitivity may vary it. :mod:`kernels.names` lists the parameters from this table
(``SCALAR_PARAMS``), :mod:`kernels.machine` takes the :class:`~kernels.Machine` defaults from it,
and :mod:`sweep.inputs.machines` checks files and overrides by it. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

INF = float("inf")

#: Kinds of parameter: a real number, a whole number, a 0/1 switch, a choice among names
#: (the kernels see the name's index).
CONTINUOUS, WHOLE, SWITCH, CHOICE = "continuous", "whole number", "switch", "choice"

#: Model families and the layer kinds that make a model one: a model with a ``linear`` or
#: ``attention`` layer is a transformer, whose GEMMs data+tensor+pipeline times by shape
#: (docs/model.md §16); any other model is a CNN.
FAMILIES: dict[str, tuple[str, ...]] = {"transformer": ("linear", "attention")}
#: What a machine file needs to state for a transformer model, or inherit from its ``base``.
GPT = ("transformer",)


class Param(NamedTuple):
    """One machine parameter (docs/model.md §8). Values are SI; ``choices`` name a choice's codes."""

    name: str
    unit: str  # SI unit, or what the number counts ("fraction", "GPUs"); "" for a switch or choice
    kind: str  # CONTINUOUS, WHOLE, SWITCH or CHOICE
    help: str
    default: float | None = None  # None: a machine file must give it
    low: float = 0.0  # the smallest legal value
    low_open: bool = True  # True: the value must be > low; False: >= low
    high: float = INF  # the largest legal value (inclusive)
    plausible: tuple[float, float] | None = None  # outside: a warning (another unit, most likely)
    choices: tuple[str, ...] = ()  # a choice's names, in code order
    file_key: str = ""  # where a machine file gives it, when not a top-level key of its name
    core: bool = False  # a file always writes it (it is no extension of the paper's machine)
    needed_by: tuple[str, ...] = ()  # model families a profile must state it for

    @property
    def key(self) -> str:
        """The machine file's key: ``name``, ``intra.alpha_s`` or ``inter[].alpha_s``."""
        return self.file_key or self.name

    @property
    def codes(self) -> dict[str, int]:
        """A choice's names and the codes the kernels see (empty for any other kind)."""
        return {c: i for i, c in enumerate(self.choices)}

    @property
    def varied(self) -> bool:
        """Whether co-design (a range of values) and sensitivity (a derivative) may vary it: only
        a continuous parameter. A whole number, a switch or a choice has no derivative and no
        value between two of its values; compare its values with a sweep instead."""
        return self.kind == CONTINUOUS

    @property
    def fixed_why(self) -> str:
        """Why co-design and sensitivity leave it alone (``""`` for a continuous parameter)."""
        if self.kind == WHOLE:
            return "integer-valued"
        if self.kind == SWITCH:
            return "a switch (0 or 1)"
        if self.kind == CHOICE:
            return f"a choice ({', '.join(self.choices)})"
        return ""

    @property
    def values(self) -> tuple[float, ...] | None:
        """The values a sweep over it may take: a switch's 0 and 1, a choice's codes; None
        for a number (any value within the bounds, a whole number for a whole number)."""
        if self.kind == SWITCH:
            return (0.0, 1.0)
        if self.kind == CHOICE:
            return tuple(float(i) for i in range(len(self.choices)))
        return None

    def bounds_text(self) -> str:
        """The legal values in words: ``> 0``, ``in (0, 1]``, ``0 or 1``, ``ring, tree``."""
        if self.kind == SWITCH:
            return "0 or 1"
        if self.kind == CHOICE:
            return ", ".join(self.choices)
        low = f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high == INF:
            return low
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


_LINK_S = (0.0, 1.0)  # a latency over a second is most likely given in microseconds
_BW = (1e6, INF)  # a bandwidth under 1 MB/s is most likely given in GB/s


#: The parameters every family reads, in the kernels' order (before the per-kind efficiencies).
_BASE: tuple[Param, ...] = (
    Param(
        "gpu_flops",
        "FLOP/s",
        CONTINUOUS,
        "peak (dense) FLOP rate of one GPU",
        core=True,
        plausible=(1e9, INF),
    ),
    Param(
        "efficiency",
        "fraction",
        CONTINUOUS,
        "fraction of gpu_flops every layer reaches",
        1.0,
        high=1.0,
        core=True,
    ),
    Param("gpu_mem_bytes", "B", CONTINUOUS, "memory of one GPU", core=True),
    Param("gpu_mem_bw_Bps", "B/s", CONTINUOUS, "memory bandwidth of one GPU", core=True, plausible=_BW),
    Param("gpus_per_node", "GPUs", WHOLE, "GPUs in a node (the intra-node link's group)", core=True),
    Param("nics_per_node", "NICs", WHOLE, "network ports of a node, shared by its GPUs", 1.0, core=True),
    Param(
        "bytes_per_element",
        "B",
        CONTINUOUS,
        "bytes of one activation, weight or gradient",
        4.0,
        core=True,
    ),
    Param(
        "wu_passes",
        "passes",
        CONTINUOUS,
        "passes over the weights of one weight update",
        3.0,
        low_open=False,
        core=True,
    ),
    Param(
        "intra_alpha_s",
        "s",
        CONTINUOUS,
        "latency of one step on the intra-node link",
        file_key="intra.alpha_s",
        plausible=_LINK_S,
    ),
    Param(
        "intra_bandwidth_Bps",
        "B/s",
        CONTINUOUS,
        "bandwidth of the intra-node link, per direction",
        file_key="intra.bandwidth_Bps",
        plausible=_BW,
    ),
    Param(
        "inter_alpha_s",
        "s",
        CONTINUOUS,
        "latency of one step between nodes (first level; deeper levels keep their extra)",
        file_key="inter[].alpha_s",
        plausible=_LINK_S,
    ),
    Param(
        "inter_bandwidth_Bps",
        "B/s",
        CONTINUOUS,
        "bandwidth of one NIC between nodes (every level)",
        file_key="inter[].bandwidth_Bps",
        plausible=_BW,
    ),
    Param(
        "allreduce_algo",
        "",
        CHOICE,
        "gradient all-reduce algorithm",
        0.0,
        choices=("ring", "tree", "auto", "hierarchical"),
        core=True,
    ),
    Param(
        "memory_model",
        "",
        CHOICE,
        "memory equation: what training keeps, or ParaDL's bound",
        0.0,
        choices=("training", "paradl"),
        core=True,
    ),
    Param(
        "optimizer_states",
        "weights",
        CONTINUOUS,
        "optimizer state kept per weight",
        1.0,
        low_open=False,
        core=True,
    ),
    Param(
        "mem_passes",
        "passes",
        CONTINUOUS,
        "passes over a layer's input and output per training step (0: no roofline)",
        0.0,
        low_open=False,
    ),
)


def _kind_param(kind: str) -> Param:
    return Param(
        f"efficiency_{kind}",
        "fraction",
        CONTINUOUS,
        f"fraction of gpu_flops*efficiency that {kind} layers reach",
        1.0,
        high=1.0,
        needed_by=GPT if kind in FAMILIES["transformer"] else (),
    )


def _transformer() -> list[Param]:
    return [
        Param(
            "op_latency_s",
            "s",
            CONTINUOUS,
            "host time to issue each operation a layer launches",
            0.0,
            low_open=False,
            plausible=(0.0, 0.01),
            needed_by=GPT,
        ),
        Param(
            "eltwise_traffic",
            "factor",
            CONTINUOUS,
            "factor on the memory-bound kernels' activation traffic (1: as counted, 0: none)",
            0.0,
            low_open=False,
            needed_by=GPT,
        ),
        Param(
            "gpu_sms",
            "SMs",
            WHOLE,
            "streaming multiprocessors a GEMM's tiles spread over (0: GEMMs not timed by shape)",
            0.0,
            low_open=False,
            needed_by=GPT,
        ),
        Param("gemm_tile_m", "rows", WHOLE, "rows of a GEMM's output tile", 128.0, needed_by=GPT),
        Param("gemm_tile_n", "columns", WHOLE, "columns of a GEMM's output tile", 128.0, needed_by=GPT),
        Param(
            "scatter_gather",
            "",
            SWITCH,
            "1: pipeline sends 1/tp of the boundary per rank and all-gather it",
            1.0,
            needed_by=GPT,
        ),
        Param(
            "attention",
            "",
            CHOICE,
            "attention implementation: flash keeps no s^2 scores",
            0.0,
            choices=("standard", "flash"),
            needed_by=GPT,
        ),
        Param(
            "gpu_flops_fp8",
            "FLOP/s",
            CONTINUOUS,
            "dense FP8 peak FLOP rate (0: the GPU has none)",
            0.0,
            low_open=False,
            needed_by=GPT,
        ),
        Param(
            "overlap_grad_reduce",
            "",
            SWITCH,
            "1: the gradient all-reduce overlaps the backward pass",
            0.0,
            needed_by=GPT,
        ),
    ]


def _precisions() -> list[Param]:
    """The GPU's dense rate for each low-precision format beyond FP8 (docs/model.md §16): 0 for
    a GPU without hardware for it, which the registry's ``precision`` rule refuses."""
    return [
        Param(
            "gpu_flops_mxfp8",
            "FLOP/s",
            CONTINUOUS,
            "dense MXFP8 (block-scaled FP8) peak FLOP rate (0: the GPU has none)",
            0.0,
            low_open=False,
        ),
        Param(
            "efficiency_linear_lowp",
            "fraction",
            CONTINUOUS,
            "fraction of the FP8/MXFP8/NVFP4 peak the linear layers' GEMMs reach (0: efficiency_linear)",
            0.0,
            low_open=False,
            high=1.0,
        ),
        Param(
            "gpu_flops_fp4",
            "FLOP/s",
            CONTINUOUS,
            "dense NVFP4 (block-scaled FP4) peak FLOP rate (0: the GPU has none)",
            0.0,
            low_open=False,
        ),
    ]


def _run() -> list[Param]:
    """What a whole training run costs beyond its time (docs/model.md §12): power and price."""
    return [
        Param(
            "gpu_power_w",
            "W",
            CONTINUOUS,
            "board power of one GPU over a run (0: not stated; energy_kwh is NaN)",
            0.0,
            low_open=False,
            plausible=(0.0, 5000.0),
        ),
        Param(
            "pue",
            "factor",
            CONTINUOUS,
            "power usage effectiveness: the facility's energy per unit of IT energy",
            1.0,
            low=1.0,
            low_open=False,
            plausible=(1.0, 3.0),
        ),
        Param(
            "usd_per_gpu_hour",
            "USD/GPU-h",
            CONTINUOUS,
            "price of one GPU-hour (0: not stated; cost_usd is NaN)",
            0.0,
            low_open=False,
        ),
    ]


def _moe() -> list[Param]:
    """A mixture of experts' routing (docs/model.md §17)."""
    return [
        Param(
            "moe_imbalance",
            "factor",
            CONTINUOUS,
            "tokens of a mixture of experts' busiest expert over the mean (1: balanced routing)",
            1.0,
            low=1.0,
            low_open=False,
            plausible=(1.0, 4.0),
        ),
    ]


def _memory() -> list[Param]:
    """What a rank holds beside its states and activations (docs/model.md §20)."""
    return [
        Param(
            "mem_workspace_bytes",
            "B",
            CONTINUOUS,
            "memory per GPU beside states and activations: library workspaces and buffers",
            # cuBLAS's workspace as PyTorch configures it on Hopper and later GPUs, eight 4 MiB
            # chunks (CUBLAS_WORKSPACE_CONFIG=:4096:8, PyTorch's CUDA semantics notes)
            8.0 * 4.0 * 2.0**20,
            low_open=False,
        ),
        Param(
            "selective_recompute",
            "",
            CHOICE,
            "selective recomputation's policy: attention (Megatron-LM's, the attention core "
            "again) or op (torchtitan's, all but every other matmul and the attention)",
            0.0,
            choices=("attention", "op"),
        ),
    ]


def machine_params(kinds: Sequence[str]) -> dict[str, Param]:
    """Every scalar machine parameter by name, in the kernels' order: the paper's machine, one
    ``efficiency_<kind>`` per layer kind of ``kinds``, then data+tensor+pipeline's (§16), the
    low-precision formats' rates, a run's power and price (§12), a mixture of experts' routing
    imbalance (§17) and the workspace (§20)."""
    records = [
        *_BASE, *(_kind_param(k) for k in kinds), *_transformer(), *_precisions(), *_run(), *_moe(), *_memory()
    ]  # fmt: skip
    return {p.name: p for p in records}
