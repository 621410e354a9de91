"""Library messages name parameters, never CLI flags (issue 38): ``sweep.InputError("p must be
>= 1", param="p")``, which the CLI alone writes as ``--p`` (:func:`sweep.cli.options.flagged`).

Every string a library module outside ``sweep/cli`` can show a user (an error, a warning, a
report line, a hint) is read with :mod:`ast`: no string literal or f-string part may spell a flag
(``--keep``, ``--{name}``, ``-o``). Docstrings and comments may describe the CLI.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sweep.cli.options import REPORT_PARAMS, flagged
from sweep.errors import InputError, InputWarning

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = sorted(p for p in (ROOT / "sweep").rglob("*.py") if "cli" not in p.relative_to(ROOT).parts)
#: ``--`` and a letter or a ``{name}`` placeholder, or a short flag ``-o``/``-k``, not inside a word.
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z{]|-[ok](?![\w-]))")
#: Strings that are not messages: XLA's own flags, which the engine sets in the environment.
NOT_MESSAGES = re.compile(r"--xla_")


def text(node: ast.AST) -> str:
    """A string constant, or an f-string with each ``{...}`` written ``{}``."""
    if isinstance(node, ast.Constant):
        return node.value
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of every string that is a statement of its own (docstrings, attribute docs)."""
    return {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, (ast.Constant, ast.JoinedStr))
    }


def flags_spelt(source: str, name: str) -> list[str]:
    """``name:line: text`` of each string in ``source`` that spells a flag."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner:
            continue
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            s = text(node)
            if FLAG.search(s) and not NOT_MESSAGES.search(s):
                found.append(f"{name}:{node.lineno}: {s!r}")
    return found


def test_the_scan_sees_flags():
    """The scan finds a flag in a raise, a built name and a constant, and passes a parameter."""
    source = (
        "X = 'use another folder or --overwrite'\n"
        "def f(k):\n"
        "    '''``--keep`` in a docstring is fine.'''\n"
        "    missing = [f'--{k}']\n"
        "    raise InputError('-o must end in .csv')\n"
        "def g():\n"
        "    raise InputError('p must be >= 1, got -1', param='p')\n"
    )
    lines = sorted(int(hit.split(":")[1]) for hit in flags_spelt(source, "probe"))
    assert lines == [1, 4, 5]


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(ROOT)))
def test_library_messages_spell_no_flag(path):
    assert flags_spelt(path.read_text(), str(path.relative_to(ROOT))) == []


def test_the_cli_writes_parameters_as_flags():
    """The one place that maps names to flags: a parameter named in ``param`` becomes its flag,
    its spelling from the CLI's table where it is not ``--name``."""
    err = InputError(
        "give keep or only_feasible, and global_batch or B", param=("only_feasible", "B", "keep")
    )
    assert (
        flagged(str(err), err.param) == "give --keep or --only-feasible, and global_batch or --global-batch"
    )
    warning = InputWarning("out must end in .csv", param="out")
    assert flagged(str(warning), warning.param) == "-o must end in .csv"
    # a setting as the API writes it is the CLI's switch
    assert (
        flagged("over 1e9: pass confirm=True to run it", ("confirm=True",))
        == "over 1e9: pass --yes to run it"
    )
    assert flagged("(transfer=False leaves it out)", REPORT_PARAMS) == "(--no-transfer leaves it out)"
    assert flagged("predicted on 'abci' (machine)", REPORT_PARAMS) == "predicted on 'abci' (--machine)"


@pytest.mark.parametrize(
    ("args", "api_text", "cli_text"),
    [
        (
            ["sensitivity", "--strategy", "data"],
            "give DIR or a configuration: missing model, machine, p, b (or global_batch)",
            "error: give DIR or a configuration: missing --model, --machine, --p, --b (or --global-batch)",
        ),
        (
            [
                "codesign",
                "--model",
                "resnet50",
                "--machine",
                "abci",
                "--strategy",
                "data",
                "--param",
                "gpu_flops",
                "--p",
                "8",
                "--b",
                "32",
                "--target",
                "t_epoch_s < 1",
                "--grid",
                "1",
            ],
            "grid must be in 2..1,048,576, got 1",
            "error: --grid must be in 2..1,048,576, got 1",
        ),
        (
            [
                "codesign",
                "--model",
                "resnet50",
                "--machine",
                "abci",
                "--strategy",
                "data",
                "--param",
                "gpu_flops",
                "--p",
                "8",
                "--b",
                "32",
                "--beats",
                "data",
            ],
            "beats data is also one of strategies",
            "error: --beats data is also one of --strategy",
        ),
    ],
)
def test_one_message_two_spellings(args, api_text, cli_text):
    """The API's message names the parameters; the CLI prints the same message with its flags."""
    from click.testing import CliRunner

    from sweep import api
    from sweep.cli.main import cli

    call = {
        "sensitivity": lambda: api.sensitivity(strategy="data"),
        "codesign": lambda: api.codesign(
            "resnet50", "abci", "data", "gpu_flops", p=8, b=32,
            **({"beats": "data"} if "--beats" in args else {"target": "t_epoch_s < 1", "grid": 1}),
        ),
    }[args[0]]  # fmt: skip
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value) == api_text
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == cli_text
