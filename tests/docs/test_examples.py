"""Every console block and interactive Python example of README.md and docs/*.md, executed
and compared with what the document shows (the conventions: :mod:`tests.docs.runner`,
docs/contributing.md#executed-documentation).

A changed default or output fails here instead of misleading a reader. After a change that
is meant to change outputs, ``python -m tests.docs --update`` rewrites the blocks.
"""

from __future__ import annotations

import pytest

from tests.docs import runner

BLOCKS = [b for path in runner.DOCUMENTS for b in runner.parse(path, (runner.ROOT / path).read_text())]
EXAMPLES = [
    (path, line, source)
    for path in runner.DOCUMENTS
    for line, source in runner.python_examples(path, (runner.ROOT / path).read_text())
]


@pytest.fixture(scope="session")
def doc_sessions(tmp_path_factory):
    """One :class:`runner.DocSession` per document, sharing one dataset cache."""
    root = tmp_path_factory.mktemp("docs")
    cache = runner.DatasetCache(root / "_datasets")
    cache.root.mkdir()
    sessions: dict[str, runner.DocSession] = {}

    def get(path: str) -> runner.DocSession:
        if path not in sessions:
            sessions[path] = runner.DocSession(path, root / path.replace("/", "_"), cache)
        return sessions[path]

    return get


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_console_block(block, doc_sessions):
    if block.skip:
        pytest.skip(block.skip)
    results = doc_sessions(block.path).run_through(block)
    for result in results:
        if not runner.matches(result.command.expected, result.lines):
            shown = "\n".join(result.command.expected)
            printed = "\n".join(result.lines)
            pytest.fail(
                f"{block.id}: $ {result.command.text}\n--- the document shows:\n{shown}\n"
                f"--- the program prints (exit {result.exit_code}):\n{printed}\n"
                "(python -m tests.docs --update rewrites the documents' outputs)",
                pytrace=False,
            )


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{p}:{line}" for p, line, _ in EXAMPLES])
def test_python_example(example, doc_sessions):
    path, line, source = example
    session = doc_sessions(path)
    session.run_through(session.blocks[-1]) if session.blocks else None  # the datasets they read
    report = runner.run_doctest(session, line, source)
    assert not report, report


def test_every_document_has_its_blocks_parsed():
    """The harness sees the blocks: README.md's first examples, and every fence it counts."""
    readme = (runner.ROOT / "README.md").read_text()
    blocks = runner.parse("README.md", readme)
    assert blocks[0].commands[0].text == "sweep run paper-resnet50-vgg16"
    assert blocks[1].commands[0].text.startswith("sweep estimate --model resnet50")
    for path in runner.DOCUMENTS:
        text = (runner.ROOT / path).read_text()
        fences = sum(line.strip() == "```console" for line in text.splitlines())
        assert len(runner.parse(path, text)) == fences


def test_ellipsis_conventions():
    assert runner.matches(["a ... b"], ["a 1.2 s b"])
    assert not runner.matches(["a ... b"], ["a 1.2 s c"])
    assert runner.matches(["x", "...", "z"], ["x", "y1", "y2", "z"])
    assert runner.matches(["x", "...", "z"], ["x", "z"])
    assert not runner.matches(["x", "z"], ["x", "y", "z"])
    assert not runner.matches(["1.5"], ["1.50"])  # numbers exactly
    # an update keeps a shown '...' line that still matches and rewrites what changed
    assert runner.updated(["t ... s", "n 1"], ["t 9 s", "n 2"]) == ["t ... s", "n 2"]
    assert runner.updated(["...", "answer 1", "..."], ["q", "answer 1", "r"]) == ["...", "answer 1", "..."]
    assert runner.updated(["...", "answer 1"], ["q", "answer 2"]) == ["q", "answer 2"]


def test_rewrite_replaces_only_outputs():
    text = "intro\n```console\n$ sweep a \\\n    --b\nold\n$ sweep c\n```\nafter\n"
    (block,) = runner.parse("x.md", text)
    results = {block.line: [runner.Result(c, [f"new {i}"], 0) for i, c in enumerate(block.commands)]}
    assert runner.rewrite("x.md", text, results) == (
        "intro\n```console\n$ sweep a \\\n    --b\nnew 0\n$ sweep c\nnew 1\n```\nafter\n"
    )


SHELL = [
    (p, line, c)
    for p in runner.DOCUMENTS
    for line, c in runner.shell_commands(p, (runner.ROOT / p).read_text())
]


@pytest.mark.parametrize("shell", SHELL, ids=[f"{p}:{line}" for p, line, _ in SHELL])
def test_shell_example_parses(shell):
    """The ``sweep`` commands of ```bash blocks are not run (they name a reader's files or take
    minutes), but each must still parse: every option and argument a command has now."""
    path, line, command = shell
    assert runner.parse_only(command) is None, f"{path}:{line}: {command}: {runner.parse_only(command)}"


def test_parse_only_catches_a_renamed_option():
    assert runner.parse_only("sweep run my.toml --keep pareto:t_epoch_s,p") is None
    assert "--only-feasable" in runner.parse_only("sweep run my.toml --only-feasable")
    assert runner.shell_commands(
        "x.md", "```bash\nA=1 sweep plan x && sweep run x \\\n  --resume  # c\n```\n"
    ) == [
        (2, "sweep plan x"),
        (2, "sweep run x --resume"),
    ]
