"""``python -m tests.docs [--update] [FILE ...]``: run the documents' console blocks and
Python examples (README.md and docs/*.md unless FILEs are named) and report each mismatch;
with ``--update``, rewrite each console block's output from the program instead.

Run it from the repository root with the worktree first on ``PYTHONPATH``. The datasets the
documents read are written to a temporary folder that is removed afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import jax

from tests.docs import runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="documents (default: README.md and docs/*.md)")
    parser.add_argument("--update", action="store_true", help="rewrite console outputs from the program")
    options = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # as in the test suite (tests/conftest.py)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sweep-docs-") as tmp:
        cache = runner.DatasetCache(Path(tmp) / "_datasets")
        cache.root.mkdir()
        for path in options.files or runner.DOCUMENTS:
            session = runner.DocSession(path, Path(tmp) / path.replace("/", "_"), cache)
            if not session.blocks and not runner.python_examples(path, (runner.ROOT / path).read_text()):
                continue
            for block in session.blocks:
                if block.skip:
                    print(f"{block.id}: skipped ({block.skip})")
                    continue
                for result in session.run_through(block):
                    if not runner.matches(result.command.expected, result.lines):
                        failures += 1
                        print(f"{block.id}: $ {result.command.text}")
                        print("\n".join(f"  | {line}" for line in result.lines))
            text = (runner.ROOT / path).read_text()
            for line, source in runner.python_examples(path, text):
                report = runner.run_doctest(session, line, source)
                if report:
                    failures += 1
                    print(f"{path}:{line}: Python example\n{report}")
            if options.update:
                new = runner.rewrite(path, text, session.results)
                if new != text:
                    (runner.ROOT / path).write_text(new)
                    print(f"{path}: rewritten")
    if options.update:
        return 0
    print(f"{failures} mismatch(es)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
