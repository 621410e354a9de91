"""The one exception type for user mistakes: the CLI prints it as one line and exits 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input. ``str(err)`` is a single line naming the file, line or key."""

    def __init__(self, message: str, where: str | None = None):
        text = f"{where}: {message}" if where else message
        super().__init__(" ".join(text.split()))


def where(path, line: int | None = None, key: str | None = None) -> str:
    """``file:line`` or ``file: key`` prefix for an :class:`InputError`."""
    out = str(path)
    if line is not None:
        out += f":{line}"
    if key is not None:
        out += f": key '{key}'"
    return out
