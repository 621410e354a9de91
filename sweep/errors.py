"""The one exception type for user mistakes: the CLI prints it as one line and exits 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input. ``str(err)`` is a single line naming the file, line or key.

    ``param`` names the parameters the message is about, as the library spells them
    (``p``, ``global_batch``, ``tp``): the CLI writes them as its flags (``--p``,
    ``--global-batch``, ``--tp``) in one place (:func:`sweep.cli.options.handle_errors`).
    """

    def __init__(self, message: str, where: str | None = None, *, param: str | tuple[str, ...] = ()):
        text = f"{where}: {message}" if where else message
        super().__init__(" ".join(text.split()))
        self.param: tuple[str, ...] = (param,) if isinstance(param, str) else tuple(param)


def where(path, line: int | None = None, key: str | None = None) -> str:
    """``file:line`` or ``file: key 'K'`` prefix for an :class:`InputError`."""
    out = str(path)
    if line is not None:
        out += f":{line}"
    if key is not None:
        out += f": key '{key}'"
    return out


class InputWarning(UserWarning):
    """A legal value that is probably a mistake (an option the strategy ignores); ``param`` as
    :class:`InputError`'s, so the CLI writes its flags."""

    def __init__(self, message: str, *, param: str | tuple[str, ...] = ()):
        super().__init__(message)
        self.param: tuple[str, ...] = (param,) if isinstance(param, str) else tuple(param)
