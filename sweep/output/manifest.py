"""The manifest of a dataset folder, typed (docs/output-format.md#manifest).

A run (or a shard of one) keeps its manifest up to date as chunks finish,
so ``--resume`` continues from it; ``sweep merge`` writes the folder's
manifest from its shards'. :class:`Manifest` holds the fields;
:meth:`Manifest.to_json` and :meth:`Manifest.from_json` convert to and from
the JSON document, whatever file holds it (:mod:`sweep.output.store`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The manifest's large parts, which never change during a run: a writer may encode them once.
FIXED_KEYS = ("run_key", "versions", "jobs", "schema")


@dataclass
class Manifest:
    """A dataset folder's manifest. Optional fields are None where the document has no such key;
    :meth:`from_json` takes values as found, so a reader checks the types of what it uses.

    ``done`` is a run's finished-chunk prefix per job (``{job: chunks}``), with
    ``done_extra`` the chunks finished past it; a merged manifest keeps each
    shard's ``done`` under its tag and has no ``done_extra``.
    """

    name: str = ""
    spec_path: str | None = None
    #: The spec and the options that shaped the rows: a resume must repeat them.
    run_key: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: One entry per job: index, model, machine, strategy, axes, points, range, chunks.
    jobs: list[dict[str, Any]] = field(default_factory=list)
    #: The output schema (:meth:`sweep.output.store.Schema.to_json`).
    schema: dict[str, Any] = field(default_factory=dict)
    rows: int = 0
    complete: bool = False
    done: dict[Any, Any] = field(default_factory=dict)
    done_extra: dict[Any, list[int]] | None = None
    #: Parquet compression of the part files (a run's manifest only).
    compression: str | None = None
    #: Where the chunks ran (a run's manifest only).
    devices: str | None = None
    #: ``{"k": K, "n": N}`` for a shard's manifest.
    shard: dict[str, int] | None = None
    #: How many shards a merged manifest joined.
    shards: int | None = None
    #: A reduction's spill files, running-state file and checkpoint number (while it runs).
    keep_spill: list[str] | None = None
    keep_state: str | None = None
    keep_seq: int | None = None
    #: The level of the prediction intervals ``sweep run --interval`` added (``t_epoch_s_lo``,
    #: ``t_epoch_s_hi``), once every part file has them.
    interval: float | None = None
    format: int = 1

    def to_json(self) -> dict[str, Any]:
        """The JSON document: every field that is not None, in the order manifests are written."""
        out: dict[str, Any] = {}
        for key in _ORDER:
            value = getattr(self, key)
            if value is not None or key in _ALWAYS:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Manifest:
        """A manifest from its JSON document; keys this version does not know are ignored."""
        known = {key: doc[key] for key in _ORDER if key in doc}
        return cls(**known)


# The key order on disk: a run's manifest, with a merged manifest's ``shards`` before ``done``.
_ORDER = (
    "format",
    "name",
    "spec_path",
    "run_key",
    "versions",
    "jobs",
    "shards",
    "done",
    "done_extra",
    "rows",
    "complete",
    "compression",
    "schema",
    "devices",
    "shard",
    "keep_spill",
    "keep_state",
    "keep_seq",
    "interval",
)
# written even when None (a spec read from standard input has no path)
_ALWAYS = frozenset(
    {"format", "name", "spec_path", "run_key", "versions", "jobs", "rows", "complete", "schema"}
)
