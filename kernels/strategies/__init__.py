"""One cost function per strategy of docs/model.md §10, each ``f(net, machine, cfg) -> Cost``."""

from kernels.strategies.data import data
from kernels.strategies.filter import channel, filter_
from kernels.strategies.hybrid import data_filter, data_spatial
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
}

__all__ = [
    "STRATEGIES",
    "channel",
    "data",
    "data_filter",
    "data_spatial",
    "filter_",
    "pipeline",
    "serial",
    "spatial",
]
