"""``python -m sweep.cli``: the ``sweep`` command."""

from sweep.cli.main import main

main()
