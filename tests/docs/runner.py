"""Executed documentation: the console blocks of README.md and docs/*.md, run and compared.

A console block is a fenced block opened with ```` ```console ````. Each ``$ `` line is a
command (a trailing ``\\`` continues it on the next line); the lines after it, up to the next
``$ `` line, are what it prints (stdout and stderr together). The commands run in-process
through click's ``CliRunner`` over :data:`sweep.cli.main.cli`, as the ``sweep`` console entry
point runs them, in a working folder of the document's own (see :class:`DocSession`).

Conventions of the documents (docs/contributing.md#executed-documentation):

* ``...`` inside an output line matches any text within that line: timings, rates, versions.
* a line that is only ``...`` matches any number of lines (output left out on purpose).
* ``<!-- doc: skip REASON -->`` on the line before the fence skips the block (too slow or
  needs a cluster); the reason says why.
* ``$ NAME="VALUE"`` sets a shell variable; ``$NAME`` in later commands of the same
  document expands to it.
* ``outputs/NAME`` in a command or a Python example, when no earlier command of the document
  wrote it and NAME is a shipped spec, is the output of ``sweep run NAME``, run once per test
  session.

``python -m tests.docs --update`` rewrites every block's output from the program, keeping the
lines that hold ``...`` where they still match.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The documents whose console blocks are executed, in the order they run.
DOCUMENTS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
ELLIPSIS = "..."
SKIP = re.compile(r"<!--\s*doc:\s*skip\s+(.*?)\s*-->")
ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
OUTPUT_PATH = re.compile(r"(?<![\w/.-])outputs/([\w.+-]+)")


@dataclass
class Command:
    """One ``$`` command of a block: its source lines and the output the document shows."""

    source: list[str]  # the "$ ..." line and its continuation lines, as written
    expected: list[str]  # the output lines shown after it

    @property
    def text(self) -> str:
        """The command as one line, continuations joined, without the ``$ ``."""
        joined = ""
        for line in self.source:
            part = line[2:] if line.startswith("$ ") else line.strip()
            joined += part[:-1].rstrip() + " " if part.endswith("\\") else part
        return joined.strip()


@dataclass
class Block:
    """One console block of a document: where it is, its commands, and a skip reason if any."""

    path: str
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    commands: list[Command]
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def parse(path: str, text: str) -> list[Block]:
    """The console blocks of one document, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        start = i
        skip = SKIP.search(lines[i - 1]) if i > 0 else None
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        commands: list[Command] = []
        k = 0
        while k < len(body):
            if not body[k].startswith("$ "):
                raise ValueError(f"{path}:{start + 2 + k}: output before the first '$ ' command")
            source = [body[k]]
            while source[-1].endswith("\\") and k + 1 < len(body):
                k += 1
                source.append(body[k])
            k += 1
            expected = []
            while k < len(body) and not body[k].startswith("$ "):
                expected.append(body[k])
                k += 1
            commands.append(Command(source, expected))
        blocks.append(Block(path, start + 1, i + 1, commands, skip.group(1) if skip else None))
        i += 1
    return blocks


def _line_pattern(line: str) -> str:
    return ".*".join(re.escape(part) for part in line.split(ELLIPSIS))


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the output lines match the shown lines, under the ``...`` conventions."""
    parts = [
        r"(?:[^\n]*\n)*?" if line.strip() == ELLIPSIS else _line_pattern(line) + r"\n" for line in expected
    ]
    text = "".join(line + "\n" for line in actual)
    return re.fullmatch("".join(parts), text) is not None


def updated(expected: list[str], actual: list[str]) -> list[str]:
    """The lines to show for ``actual``: ``expected`` itself where it still matches; else
    ``actual``, with each line that matches a shown line holding ``...`` replaced by that line.
    Lines a lone ``...`` left out show again, for the writer to leave out anew."""
    if matches(expected, actual):
        return expected
    templates = [line for line in expected if ELLIPSIS in line and line.strip() != ELLIPSIS]
    out = []
    for line in actual:
        out.append(next((t for t in templates if re.fullmatch(_line_pattern(t), line)), line))
    return out


@dataclass
class Result:
    command: Command
    lines: list[str]
    exit_code: int


class DatasetCache:
    """The ``outputs/NAME`` datasets that documents read without writing: each is
    ``sweep run NAME`` once per session, in ``root``. A document's own run registers its
    folder here too, so a later document reads it instead of running it again."""

    def __init__(self, root: Path):
        self.root = root
        self.folders: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        if name not in self.folders:
            folder = self.root / name
            if folder.exists():
                shutil.rmtree(folder)
            result = invoke(["run", name, "-o", str(folder)], self.root)
            if result.exit_code != 0:
                raise RuntimeError(f"sweep run {name}: {result.output}")
            self.folders[name] = folder
        return self.folders[name]


@dataclass
class DocSession:
    """The state one document's commands share: a working folder holding ``outputs/`` and
    ``docs/images/``, the shell variables set so far, and the blocks already run."""

    path: str
    workdir: Path
    cache: DatasetCache
    variables: dict[str, str] = field(default_factory=dict)
    results: dict[int, list[Result]] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)

    def __post_init__(self):
        (self.workdir / "outputs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "docs" / "images").mkdir(parents=True, exist_ok=True)
        self.blocks = parse(self.path, (ROOT / self.path).read_text())

    def run_through(self, block: Block) -> list[Result]:
        """Run every block of the document up to ``block`` (those not run yet), in order,
        and return ``block``'s results."""
        for each in self.blocks:
            if each.line not in self.results:
                self.results[each.line] = [] if each.skip else [self._run(c) for c in each.commands]
            if each.line == block.line:
                break
        return self.results[block.line]

    def _run(self, command: Command) -> Result:
        text = command.text
        assign = ASSIGN.match(text)
        if assign:
            (value,) = shlex.split(assign.group(2))
            self.variables[assign.group(1)] = value
            return Result(command, [], 0)
        expanded = VARIABLE.sub(lambda m: self.variables.get(m.group(1) or m.group(2), m.group(0)), text)
        argv = shlex.split(expanded, comments=True)
        if not argv or argv[0] != "sweep":
            raise ValueError(f"{self.path}: only 'sweep' commands run: {text!r}")
        args = argv[1:]
        self._provide_outputs(args)
        result = invoke(args, self.workdir)
        if args[0] == "run":
            self.register_written()
        return Result(command, result.output.splitlines(), result.exit_code)

    def _provide_outputs(self, args: list[str]) -> None:
        """Link each ``outputs/NAME`` the command reads to the session's dataset; note what it writes."""
        if args and args[0] == "run":
            out = _option(args, "-o", "--out")
            target = out or f"outputs/{Path(args[1]).stem}"
            self.written.add(target)
            folder = self.workdir / target
            if folder.is_symlink():
                folder.unlink()
            return
        for name in OUTPUT_PATH.findall(" ".join(args)):
            link = self.workdir / "outputs" / name
            if f"outputs/{name}" in self.written or link.exists() or link.is_symlink():
                continue
            link.symlink_to(self.cache.get(name), target_is_directory=True)

    def register_written(self) -> None:
        for target in self.written:
            folder = self.workdir / target
            name = Path(target).name
            if folder.is_dir() and not folder.is_symlink() and name not in self.cache.folders:
                self.cache.folders[name] = folder


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return args[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


@dataclass
class Invoked:
    output: str
    exit_code: int


def invoke(args: list[str], cwd: Path) -> Invoked:
    """``sweep ARGS`` in-process in ``cwd``, as the console entry point runs it: click's own
    usage errors print one line ``error: ...`` and exit 2 (:func:`sweep.cli.main.main`)."""
    import click
    from click.testing import CliRunner

    from sweep.cli.main import cli
    from sweep.cli.options import EXIT_INPUT

    runner = CliRunner()
    with _chdir(cwd), warnings.catch_warnings():
        warnings.simplefilter("always")
        result = runner.invoke(cli, args, prog_name="sweep", standalone_mode=False)
    output, code = result.output, result.exit_code
    err = result.exception
    if isinstance(err, click.UsageError):
        output, code = output + f"error: {err.format_message()}\n", EXIT_INPUT
    elif err is not None and not isinstance(err, SystemExit):
        raise err
    if code is None:
        code = 0
    return Invoked(output, code)


@contextlib.contextmanager
def _chdir(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def rewrite(path: str, text: str, results: dict[int, list[Result]]) -> str:
    """The document with each block's output replaced by what its commands printed."""
    lines = text.splitlines()
    blocks = parse(path, text)
    out: list[str] = []
    pos = 0
    for block in blocks:
        out.extend(lines[pos : block.line])  # through the opening fence
        ran = results.get(block.line)
        for i, command in enumerate(block.commands):
            out.extend(command.source)
            if ran:
                out.extend(updated(command.expected, ran[i].lines))
            else:
                out.extend(command.expected)
        pos = block.end - 1  # the closing fence
    out.extend(lines[pos:])
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def python_examples(path: str, text: str) -> list[tuple[int, str]]:
    """The ```` ```python ```` blocks of a document written as interactive sessions (``>>>``),
    with the 1-based line of their fence."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start, body = i, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if body and body[0].startswith(">>>"):
                out.append((start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


def run_doctest(session: DocSession, line: int, source: str) -> str:
    """Run one interactive example in the document's working folder; the failures, as doctest
    reports them (empty when every output matches; ``...`` matches any text)."""
    import doctest
    import io

    for name in OUTPUT_PATH.findall(source):
        link = session.workdir / "outputs" / name
        if (ROOT / "grids" / "sweeps" / f"{name}.toml").is_file() and not (
            link.exists() or link.is_symlink()
        ):
            link.symlink_to(session.cache.get(name), target_is_directory=True)
    test = doctest.DocTestParser().get_doctest(source, {}, session.path, session.path, line)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    report = io.StringIO()
    with _chdir(session.workdir), warnings.catch_warnings():
        warnings.simplefilter("always")
        doctest.DocTestRunner(optionflags=flags).run(test, out=report.write)
    return report.getvalue()


def shell_commands(path: str, text: str) -> list[tuple[int, str]]:
    """The ``sweep ...`` commands of a document's ```` ```bash ```` blocks (not executed: they
    name files a reader has, or take long), with their 1-based line, continuations joined and
    comments dropped."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() != "```bash":
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            start, line = i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            segment: list[str] = []
            for token in [*lexer, ";"]:
                if token in ("&&", "||", ";", "|", "&"):
                    while segment and ASSIGN.match(segment[0]):
                        segment.pop(0)  # VAR=value before a command
                    if segment and segment[0] == "sweep":
                        out.append((start + 1, shlex.join(segment)))
                    segment = []
                else:
                    segment.append(token)
            i += 1
        i += 1
    return out


def parse_only(command: str) -> str | None:
    """Parse ``sweep ...`` as the command line would, without running it: None when click
    accepts every option and argument, else its error."""
    import click

    from sweep.cli.main import cli

    name, *rest = shlex.split(command)[1:]
    if name not in cli.commands:
        return f"no command '{name}'"
    try:
        cli.commands[name].make_context(name, rest, parent=click.Context(cli, info_name="sweep"))
    except click.ClickException as err:
        return err.format_message()
    return None
