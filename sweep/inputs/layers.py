"""A network as the sweep sees it: a list of :class:`Layer` shapes (:class:`Model`), and
:func:`bind`, which turns it into the kernels' :class:`~kernels.Net` for one machine."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernels import ACTIVE_FAMILIES, KINDS, LayerArrays, Net, build_net
from kernels.kinds import ROLES
from kernels.transformer import derive_roles


@dataclass(frozen=True)
class Layer:
    """One layer: kind, input ``[C, X...]``, weights ``[C, F, K...]``, output ``[F, Y...]``.

    ``active`` maps a strategy family (``spatial``, ``filter``, ``channel``)
    to a fixed flag; families not in it follow the defaults of docs/model.md §9. ``role`` is
    the layer's tensor-parallel role (:data:`kernels.kinds.ROLES`, docs/model.md §16), as a
    block builder or a model file states it; empty, it is derived when the model is bound
    (:func:`kernels.transformer.derive_roles`).
    """

    name: str
    kind: str
    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    active: dict[str, bool] = field(default_factory=dict, compare=False)
    role: str = ""


@dataclass
class Model:
    """A network and its data set (docs/inputs.md)."""

    name: str
    dataset_samples: int
    layers: list[Layer]
    dataset: str = ""
    measured_s: dict[str, float] = field(default_factory=dict)  # machine name -> s/sample
    source: str = ""
    notes: str = ""

    def describe(self) -> dict:
        """A JSON-able summary for Parquet metadata and ``sweep models``."""
        arrays = to_arrays(self)
        return {
            "name": self.name,
            "dataset": self.dataset,
            "dataset_samples": self.dataset_samples,
            "layers": len(self.layers),
            "weights": int(np.prod(arrays.w, axis=1).sum()),
            "measured_s": self.measured_s,
            "source": self.source,
        }


def to_arrays(model: Model) -> LayerArrays:
    """Per-layer shape arrays padded to three spatial dimensions and role codes (see
    :class:`kernels.LayerArrays`): the roles the layers state, the others derived once, here,
    by :func:`kernels.transformer.derive_roles`."""
    g = len(model.layers)
    x = np.ones((g, 4))
    w = np.ones((g, 5))
    y = np.ones((g, 4))
    kind = np.zeros(g, dtype=np.int64)
    active = np.zeros((len(ACTIVE_FAMILIES), g), dtype=bool)
    overridden = np.zeros(len(ACTIVE_FAMILIES), dtype=bool)
    role = derive_roles(np.array([layer.kind for layer in model.layers]))
    for i, layer in enumerate(model.layers):
        if layer.role:
            role[i] = ROLES.index(layer.role)
        x[i, : len(layer.x)] = layer.x
        w[i, : len(layer.w)] = layer.w
        y[i, : len(layer.y)] = layer.y
        kind[i] = KINDS.index(layer.kind)
        for f, family in enumerate(ACTIVE_FAMILIES):
            if family in layer.active:
                overridden[f] = True
                active[f, i] = layer.active[family]
    return LayerArrays(kind, x, w, y, active, overridden, role)


def bind(model: Model, machine_name: str, ref_rate_flops: float) -> Net:
    """The kernels' :class:`~kernels.Net` of ``model`` on a machine.

    Uses the measured per-sample time when the model has one for this machine
    (docs/model.md §3); ``ref_rate_flops`` is that machine's gpu_flops*efficiency.
    """
    t = model.measured_s.get(machine_name, 0.0)
    return build_net(to_arrays(model), model.dataset_samples, t, ref_rate_flops if t else 1.0)
