"""Shared pieces of the command line: one-line errors and warnings, the parameters' flags,
the configuration options the strategy registry defines, ``--set`` parsing.

Every user mistake surfaces as :class:`sweep.errors.InputError` and is printed
as one line ``error: ...`` with exit status 2. The library names parameters as
it spells them (``p``, ``global_batch``, ``tp``); :func:`flagged` writes them as
the command line's flags (``--p``, ``--global-batch``, ``--tp``), here and
nowhere else. JAX is set up by the API call a command makes
(:func:`sweep.engine.backend.computation`), not here.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Iterable

import click

from kernels.strategies.registry import OWN_AXES
from sweep.errors import InputError, InputWarning

EXIT_INPUT = 2


#: The parameters whose flag is not ``--`` and their name with ``-`` for ``_``: the library's
#: names (:mod:`sweep.api`, :mod:`sweep.answers.query`) against the commands' spellings.
FLAGS: dict[str, str] = {
    "k": "-k",
    "out": "-o",
    "B": "--global-batch",
    "minimize": "--min",
    "maximize": "--max",
    "confirm": "--yes",
    "space_check": "--no-space-check",
    "quality": "--quality-weight",
    "strategies": "--strategy",
    # a setting as the API writes it (a keyword and its value), where the flag is the switch
    "confirm=True": "--yes",
    "resume=True": "--resume",
    "strict=True": "--strict",
    "transfer=False": "--no-transfer",
    "space_check=False": "--no-space-check",
    # an argument named in parentheses by a report (the profile runs were predicted on)
    "(machine)": "(--machine)",
    "(fit)": "(--fit)",
}

#: What the reports of :mod:`sweep.trust.report` and a stopped run's message name: settings and
#: arguments written as above, in text that carries no ``param``.
REPORT_PARAMS = ("strict=True", "transfer=False", "resume=True", "(machine)", "(fit)")


def flag(name: str) -> str:
    """The command-line flag of parameter ``name``: :data:`FLAGS`' spelling, else ``--`` and
    ``_`` written ``-`` (``--global-batch``)."""
    return FLAGS.get(name) or "--" + name.replace("_", "-")


def flagged(text: str, params: Iterable[str]) -> str:
    """``text`` with the first standalone mention of each parameter written as its flag (a quoted
    name is a column or a value, not the parameter)."""
    for name in params:
        text = re.sub(rf"(?<![\w.+/'`-]){re.escape(name)}(?![\w'`-])", flag(name), text, count=1)
    return text


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
        text = flagged(str(message), message.param) if isinstance(message, InputWarning) else str(message)
        click.echo(f"warning: {text}", err=True)

    warnings.showwarning = show


def handle_errors(fn):
    """Turn :class:`InputError` into ``error: ...`` on stderr and exit status 2, the parameters
    it names written as flags (:func:`flagged`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            click.echo(f"error: {flagged(str(err), err.param)}", err=True)
            sys.exit(EXIT_INPUT)

    return wrapper


def configuration_options(fn):
    """One option per configuration axis of the strategy registry (:data:`OWN_AXES`), plus the
    batch as users set it (``--global-batch``, ``--micro-batch``); the command receives
    them as keywords of their axis names, None where not given."""
    for axis in reversed(OWN_AXES.values()):
        kind = click.Choice(axis.choices) if axis.choices else int
        default = axis.choices[axis.default] if axis.choices else axis.default
        fn = click.option(
            flag(axis.name), axis.name, type=kind, default=None, help=f"{axis.help} [{default}]."
        )(fn)
    fn = click.option(
        "--micro-batch",
        "micro_batch",
        type=int,
        default=None,
        help="Samples per micro-batch: S = b / micro-batch [1 for data+tensor+pipeline, Megatron-LM's].",
    )(fn)
    fn = click.option(
        "--global-batch",
        "global_batch",
        type=int,
        default=None,
        help="Samples per iteration, instead of --b: b = global batch / p1.",
    )(fn)
    return fn


def configuration_list_options(fn):
    """One ``--<axis> LIST`` option per configuration axis of the strategy registry
    (:data:`OWN_AXES`), the values a question chooses from; the command receives them as
    keywords of their axis names, a tuple (names of a categorical axis, whole numbers otherwise)
    or None where not given (:func:`parse_list`)."""
    for axis in reversed(OWN_AXES.values()):
        values = f"a list of {', '.join(axis.choices)}" if axis.choices else "a list"
        default = "every legal value" if axis.searched else f"{axis.label(axis.default)}"
        text = f"{axis.help[0].upper()}{axis.help[1:]}; {values} [{default}]."
        fn = click.option(flag(axis.name), axis.name, metavar="LIST", default=None, help=text)(fn)
    return fn


def parse_ints(text: str | None, option: str, minimum: int | None = 1) -> tuple[int, ...] | None:
    """A comma-separated list of whole numbers (``1_024`` allowed), each at least ``minimum``
    (None: any, the caller checks the range); None where the option was not given."""
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        try:
            value = int(float(part))
        except ValueError:
            raise InputError(f"{option} takes whole numbers, got '{part}'") from None
        if value != float(part) or (minimum is not None and value < minimum):
            at_least = f" >= {minimum}" if minimum is not None else ""
            raise InputError(f"{option} takes whole numbers{at_least}, got '{part}'")
        out.append(value)
    if not out:
        raise InputError(f"{option} is empty")
    return tuple(out)


def parse_list(name: str, text: str | None) -> tuple[int | str, ...] | None:
    """A comma-separated list of one own axis's values as given: names of a categorical axis,
    whole numbers otherwise (their range checked against the axis by the question)."""
    if not OWN_AXES[name].choices:
        return parse_ints(text, flag(name), minimum=None)
    if text is None:
        return None
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    if not words:
        raise InputError(f"{flag(name)} is empty")
    return words


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
