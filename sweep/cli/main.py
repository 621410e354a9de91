"""The ``sweep`` command line: a thin click layer over the library (:mod:`sweep.api`).

One module per command group: :mod:`sweep.cli.sweeps` (configurations and sweeps),
:mod:`sweep.cli.answers` (queries over sweeps), :mod:`sweep.cli.trust` (validation and
calibration against measured runs).
"""

from __future__ import annotations

import os
import sys

import click

from sweep.cli import answers, sweeps, trust
from sweep.cli.options import EXIT_INPUT, HelpContext, HelpGroup, one_line_warnings


@click.group(cls=HelpGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="paradl-sweep")
def cli() -> None:
    """Design-space explorer for parallel deep-learning training: CNNs (the ParaDL oracle) and
    GPT transformers (Megatron-style data+tensor+pipeline), as vectorized JAX kernels.

    \b
    Example:
      sweep estimate --model resnet50 --machine abci --strategy data --p 1024 --b 32
      sweep estimate --model gpt3-175b --machine a100-ib800 --strategy data+tensor+pipeline \\
          --p 1024 --b 64 --tp 8 --pp 16 --S 64 --recompute full
      sweep run paper-resnet50-vgg16 && sweep best outputs/paper-resnet50-vgg16 --per model,p --rank
    """
    one_line_warnings()


for _module in (sweeps, answers, trust):
    for _command in _module.COMMANDS:
        _command.context_class = HelpContext
        cli.add_command(_command)


def main() -> None:
    """Console entry point: click usage errors also print one line and exit 2."""
    try:
        cli.main(standalone_mode=False, prog_name="sweep")
    except click.UsageError as err:
        if type(err).__name__ == "NoArgsIsHelpError" and err.ctx is not None:
            click.echo(err.ctx.get_help())
            return
        click.echo(f"error: {err.format_message()}", err=True)
        sys.exit(EXIT_INPUT)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(130)
