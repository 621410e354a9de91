"""The names of a dataset folder's files (docs/output-format.md#files): the manifest, part files,
shards' manifests, a reduction's running state and its spills. Pure string rules, no I/O."""

from __future__ import annotations

import re

MANIFEST = "_manifest.parquet"


def shard_tag(k: int, n: int) -> str:
    """``s0003of0016``: the name part of shard ``k`` (0-based) of ``n``."""
    return f"s{k:04d}of{n:04d}"


SHARD_MANIFEST = re.compile(r"_manifest-s(\d+)of(\d+)\.parquet")


def manifest_name(tag: str | None = None) -> str:
    """``_manifest.parquet``, or a shard's ``_manifest-s0003of0016.parquet``."""
    return MANIFEST if tag is None else f"_manifest-{tag}.parquet"


def spill_prefix(tag: str | None = None) -> str:
    """Names of a reduction's spills: ``_spill-000003.parquet``, a shard's
    ``_spill-s0003of0016-000003.parquet``, a merge's ``_spill-merge-000003.parquet``."""
    return f"_spill-{tag}-" if tag else "_spill-"


def state_name(tag: str | None = None, seq: int | None = None) -> str:
    """A reduction's running state: checkpoint ``seq`` (``_keep-000012.parquet``, a shard's
    ``_keep-s0003of0016-000012.parquet``), or without ``seq`` a shard's final state
    (``_keep-s0003of0016.parquet``; an unsharded run's result is :data:`KEEP_PART`)."""
    if seq is None:
        return f"_keep-{tag}.parquet"
    return f"_keep-{tag}-{seq:06d}.parquet" if tag else f"_keep-{seq:06d}.parquet"


def state_checkpoints(tag: str | None = None) -> str:
    """The glob of a run's (or shard ``tag``'s) checkpoints of :func:`state_name`."""
    return f"_keep-{tag}-*.parquet" if tag else "_keep-[0-9]*.parquet"


#: The prefix of ``sweep merge``'s spill files.
MERGE_SPILL_PREFIX = "_spill-merge-"


def spill_name(prefix: str, seq: int) -> str:
    """Spill file ``seq`` of a reduction: ``_spill-000003.parquet``."""
    return f"{prefix}{seq:06d}.parquet"


def spill_glob(prefix: str) -> str:
    """The glob of every spill file :func:`spill_name` makes with ``prefix``."""
    return f"{prefix}[0-9]*.parquet"


def spill_seq(prefix: str, name: str) -> int:
    """The number of spill file ``name`` (:func:`spill_name`)."""
    return int(name[len(prefix) : -len(".parquet")])


def part_name(job: int, chunk: int, tag: str | None = None) -> str:
    """``part-j0001-c000000012.parquet``; a shard's ``part-s0003of0016-j0001-c000000012.parquet``."""
    shard = f"{tag}-" if tag else ""
    return f"part-{shard}j{job:04d}-c{chunk:09d}.parquet"
