"""Which files of an output folder are a sweep's: ``sweep run`` writes only into a new or empty
folder, or one holding nothing but the files a run writes (docs/output-format.md#files-in-a-dataset-folder).

A folder holding anything else (notes, a plot, a subfolder; ``-o .`` in a project folder) is
refused, as no Arrow reader would take it as one dataset afterwards.
"""

from __future__ import annotations

import re
from pathlib import Path

from sweep.errors import InputError

#: The names a run writes in its folder (:mod:`sweep.output.store`'s ``part_name``, ``manifest_name``,
#: ``state_name``, ``spill_name``, ``temporary``, and an earlier version's manifests).
OWN_FILE = re.compile(r"part-.*\.parquet|_manifest.*\.(parquet|json)|_(keep|spill)-.*\.parquet|\..*\.tmp")


def foreign_files(folder: Path) -> list[str]:
    """The entries of ``folder`` a run did not write, sorted: a folder holding any is not a
    sweep's, and writing into it would leave a folder no Arrow reader takes as one dataset."""
    return sorted(p.name for p in folder.iterdir() if not (p.is_file() and OWN_FILE.fullmatch(p.name)))


def check_own(folder: Path) -> None:
    """Refuse an output folder that holds anything but a sweep's files (README.md#errors)."""
    if not folder.is_dir():
        return
    others = foreign_files(folder)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise InputError(
            f"output folder holds files that are not a sweep's ({shown}): use an empty or new folder",
            str(folder),
        )
