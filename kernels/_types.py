"""Type alias for pytree leaves: a jax.Array when traced, a numpy array or scalar when built."""

from typing import Any, TypeAlias

Array: TypeAlias = Any
