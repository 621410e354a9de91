"""The ``sweep`` command line: :mod:`sweep.cli.main` (the group and entry point), one module per
command group (:mod:`~sweep.cli.sweeps`, :mod:`~sweep.cli.answers`, :mod:`~sweep.cli.trust`), and the
shared :mod:`~sweep.cli.options`."""
