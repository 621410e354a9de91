"""One cost function per strategy of docs/model.md §10, each ``f(net, machine, cfg) -> Cost``."""

from kernels.strategies.data import data
from kernels.strategies.filter import channel, filter_
from kernels.strategies.hybrid import data_filter, data_spatial
from kernels.strategies.megatron import data_tensor_pipeline
from kernels.strategies.pipeline import pipeline
from kernels.strategies.serial import serial
from kernels.strategies.spatial import spatial

#: Strategy name (docs/model.md §2, column ``strategy``) to kernel.
STRATEGIES = {
    "serial": serial,
    "data": data,
    "spatial": spatial,
    "pipeline": pipeline,
    "filter": filter_,
    "channel": channel,
    "data+filter": data_filter,
    "data+spatial": data_spatial,
    "data+tensor+pipeline": data_tensor_pipeline,
}
#: The paper's strategies (docs/model.md §10), without data+tensor+pipeline (§16).
PAPER_STRATEGIES: tuple[str, ...] = tuple(s for s in STRATEGIES if s != "data+tensor+pipeline")

__all__ = [
    "PAPER_STRATEGIES",
    "STRATEGIES",
    "channel",
    "data",
    "data_filter",
    "data_spatial",
    "data_tensor_pipeline",
    "filter_",
    "pipeline",
    "serial",
    "spatial",
]
