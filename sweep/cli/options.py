"""Shared pieces of the command line: one-line errors and warnings, ``--set`` parsing.

Every user mistake surfaces as :class:`sweep.errors.InputError` and is printed
as one line ``error: ...`` with exit status 2. JAX is set up by the API call a
command makes (:func:`sweep.engine.backend.computation`), not here.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings

import click

from sweep.errors import InputError

EXIT_INPUT = 2


#: A hyphen that does not break a line (U+2011), standing in for ``-`` while help is wrapped.
_NO_BREAK = "\u2011"
_IN_WORD_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")


class HelpFormatter(click.HelpFormatter):
    """click's help formatter, except that a word is never broken at its hyphen
    (``paradl-sweep``, ``per-strategy``) when the text is wrapped."""

    def write_text(self, text: str) -> None:
        super().write_text(_IN_WORD_HYPHEN.sub(_NO_BREAK, text))

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = [(first, _IN_WORD_HYPHEN.sub(_NO_BREAK, second)) for first, second in rows]
        super().write_dl(rows, col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_NO_BREAK, "-")


class HelpContext(click.Context):
    formatter_class = HelpFormatter


class HelpGroup(click.Group):
    """The ``sweep`` group: its help, and every command's, wrapped by :class:`HelpFormatter`."""

    context_class = HelpContext


def one_line_warnings() -> None:
    def show(message, category, filename, lineno, file=None, line=None):
        click.echo(f"warning: {message}", err=True)

    warnings.showwarning = show


def handle_errors(fn):
    """Turn :class:`InputError` into ``error: ...`` on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(EXIT_INPUT)

    return wrapper


def parse_set(values: tuple[str, ...]) -> dict[str, float | str]:
    """``--set KEY=VALUE`` pairs; numbers parsed as floats, other values kept as text."""
    out: dict[str, float | str] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set expects KEY=VALUE, got '{item}'")
        try:
            out[key.strip()] = float(text)
        except ValueError:
            out[key.strip()] = text.strip()
    return out
