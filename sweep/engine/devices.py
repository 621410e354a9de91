"""The local devices a chunk is spread over, and their 1-D mesh."""

from __future__ import annotations

import collections

import jax
import numpy as np
from jax.sharding import Mesh

#: Name of the mesh axis a chunk is split over when there are several devices.
AXIS = "d"


def local_devices() -> list:
    """The devices a chunk is spread over: every local device of JAX's default backend."""
    return jax.local_devices()


def describe_devices(devices=None) -> str:
    """Where chunks run, for a person: ``"1 gpu (NVIDIA H200)"``, ``"2 cpu"`` (a CUDA jaxlib
    that fell back to the CPU shows here)."""
    devices = devices if devices is not None else local_devices()
    kinds = collections.Counter((d.platform, d.device_kind) for d in devices)
    return ", ".join(
        f"{n} {platform}" + (f" ({kind})" if platform != "cpu" else "")
        for (platform, kind), n in kinds.items()
    )


def device_mesh(devices=None) -> Mesh:
    """A 1-D mesh (axis ``"d"``) over ``devices`` (default :func:`local_devices`)."""
    return Mesh(np.asarray(devices if devices is not None else local_devices()), (AXIS,))
