"""Help texts (STYLE: every command has help text with an example, and a test checks that):
each command's example runs the command itself, keeps its line continuations, and wrapping
never breaks a word (issue 34: ``paradl- sweep``, ``overh eads``, a GPT example that lost its
backslash)."""

from __future__ import annotations

import itertools
import re

import pytest
from click.testing import CliRunner

from sweep.cli.main import cli

COMMANDS = sorted(cli.commands)


def _help(args: list[str], width: int) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=width, prog_name="sweep")
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("args", [[], *([c] for c in COMMANDS)], ids=["sweep", *COMMANDS])
@pytest.mark.parametrize("width", [60, 80, 100])
def test_wrapping_never_breaks_a_word(args, width):
    """Wrapped at any width, the help holds the same words as unwrapped: a word broken at its
    hyphen (``per-`` / ``strategy``) or in its middle (``overhea`` / ``ds``) would differ."""

    def words(text: str) -> list[str]:  # the command list's one-line summaries are cut to fit
        return text.split("\nCommands:\n")[0].split()

    assert words(_help(args, width)) == words(_help(args, 10_000))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_an_example_of_itself(command):
    text = _help([command], 80)
    example = text.split("Example:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert any(line.strip().startswith(f"sweep {command}") for line in example), example
    for before, line in itertools.pairwise(example):
        # an indented line of options continues the command above it, which must end in '\'
        if re.match(r"\s+--", line):
            assert before.rstrip().endswith("\\"), (before, line)
    for line in example:  # a continuation lost in the docstring joins two lines with a gap
        assert not re.search(r"\S\s{3,}--", line.split("#")[0]), line


def test_the_group_help_names_transformers_and_shows_a_gpt_example():
    text = _help([], 80)
    assert "GPT" in text and "CNN" in text
    assert "--strategy data+tensor+pipeline \\" in text


@pytest.mark.parametrize("command", ["codesign", "sensitivity", "estimate"])
def test_micro_batch_default_names_both_strategies(command):
    line = " ".join(_help([command], 10_000).split("\n  --S ", 1)[1].split("\n", 1)[0].split())
    if command == "codesign":  # it chooses among lists: every micro-batch size for data+tensor+pipeline
        assert "[p for pipeline, every divisor of b for data+tensor+pipeline]" in line
    else:  # S = b / micro_batch, the micro-batch 1 by default (Megatron-LM's)
        assert "[p for pipeline; b / --micro-batch for data+tensor+pipeline]" in line
