"""``sweep merge``: check that every shard of a sharded run finished, and seal the dataset.

Shards (``sweep run --shard K/N``) write their part files into one folder
under names carrying their tag, so the folder already reads as one dataset
(Arrow skips the ``_``- and ``.``-files). Merging checks that all N shard
manifests exist, agree on the run and are complete, and that their part
files are all there; for ``--keep`` runs it reduces the shards' results
(the Pareto front of their fronts, the top k of their top k's, ties broken
by row identity as in one run) into ``part-keep.parquet``. It then writes
``_manifest.json`` with ``complete = true``. Merging again is harmless.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import InputError
from sweep.output import store
from sweep.output.manifest import Manifest
from sweep.reduce.keep import parse_keep
from sweep.reduce.reducer import Reducer


@dataclass
class MergeSummary:
    folder: Path
    shards: int
    rows: int
    keep: str


def _done_count(manifest: Manifest) -> int:
    prefix = sum(int(v) for v in manifest.done.values())
    return prefix + sum(len(v) for v in (manifest.done_extra or {}).values())


def _lost_files(folder: Path, manifest: Manifest, tag: str) -> int:
    """Files a complete shard wrote that are not in the folder (someone deleted them)."""
    if manifest.run_key["keep"] != "all":
        return 0 if (folder / (manifest.keep_state or "-")).is_file() else 1
    return sum(
        not (folder / store.part_name(job["index"], c, tag)).is_file()
        for job in manifest.jobs
        for c in range(job["chunks"])
    )


def merge(folder: Path) -> MergeSummary:
    """Verify the shards in ``folder`` and write ``_manifest.json`` (and ``part-keep.parquet``).

    Raises :class:`InputError` naming every missing or unfinished shard.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", str(folder))
    found = store.shard_manifests(folder)
    if not found:
        return _merged_already(folder)
    counts = sorted({n for _, n in found})
    if len(counts) > 1:
        raise InputError(f"holds shards of different counts ({', '.join(map(str, counts))})", str(folder))
    n = counts[0]
    store.writable_folder(folder)  # merging writes the manifest and the kept rows here
    manifests = _read_shards(folder, found)
    run_key = _check_shards(folder, manifests, n)
    first = manifests[0]
    keep_text = run_key["keep"]
    if keep_text != "all":
        rows = _reduce_shards(folder, manifests, n)
    else:
        rows = sum(int(m.rows) for m in manifests.values())
    merged = Manifest(
        format=first.format,
        name=first.name,
        spec_path=first.spec_path,
        run_key=run_key,
        versions=first.versions,
        jobs=_merged_jobs(manifests, n),
        shards=n,
        done={store.shard_tag(k, n): manifests[k].done for k in range(n)},
        rows=rows,
        complete=True,
        schema=first.schema,
    )
    store.atomic_write_text(folder / store.MANIFEST, json.dumps(merged.to_json(), indent=1))
    return MergeSummary(folder, n, rows, keep_text)


def _merged_already(folder: Path) -> MergeSummary:
    """A folder without shard manifests: fine when it holds one complete unsharded run."""
    doc = store.read_manifest(folder)
    single = Manifest.from_json(doc) if doc is not None else None
    if single is not None and single.complete and "shards" not in (single.run_key or {}):
        return MergeSummary(folder, 1, int(single.rows), single.run_key["keep"])
    raise InputError("no shard manifests (_manifest-sKofN.json): nothing to merge", str(folder))


def _read_shards(folder: Path, found: dict[tuple[int, int], Path]) -> dict[int, Manifest]:
    """The readable shard manifests, by shard number."""
    manifests: dict[int, Manifest] = {}
    for (k, _), path in sorted(found.items()):
        doc = store.read_manifest(folder, path.name)
        if doc is not None:
            manifests[k] = Manifest.from_json(doc)
    return manifests


def _check_shards(folder: Path, manifests: dict[int, Manifest], n: int) -> dict:
    """The shards' common run key, once all ``n`` agree on it, are complete and have their files."""
    run_key = manifests[min(manifests)].run_key
    odd = [store.shard_tag(k, n) for k, m in manifests.items() if m.run_key != run_key]
    if odd:
        raise InputError(f"shards {', '.join(odd)} were run with a different spec or options", str(folder))
    problems = []
    for k in range(n):
        tag = store.shard_tag(k, n)
        m = manifests.get(k)
        if m is None:
            problems.append(f"{tag} (missing)")
        elif not m.complete:
            total = sum(job["chunks"] for job in m.jobs)
            problems.append(f"{tag} (incomplete: {_done_count(m)} of {total} chunks)")
        elif lost := _lost_files(folder, m, tag):
            problems.append(f"{tag} ({lost} files missing)")
    if problems:
        raise InputError(
            f"{len(problems)} of {n} shards not finished: {', '.join(problems)}; "
            f"rerun each with sweep run SPEC --shard K/{n} -o {folder}",
            str(folder),
        )
    return run_key


def _reduce_shards(folder: Path, manifests: dict[int, Manifest], n: int) -> int:
    """Reduce the shards' kept rows into ``part-keep.parquet``; returns its rows."""
    first = manifests[0]
    schema = store.Schema.from_json(first.schema)
    keep = parse_keep(first.run_key["keep"], (*schema.int_columns, *schema.float_columns))
    reducer = Reducer(keep, schema, folder, store.MERGE_SPILL_PREFIX)
    reducer.adopt([])  # deletes the spills of a merge that was killed
    try:
        for k in range(n):
            reducer.load(folder / str(manifests[k].keep_state))
        writer = store.PartWriter(folder, schema.arrow(), first.compression or "zstd")
        return writer.write_tables(store.KEEP_PART, reducer.tables())
    finally:
        reducer.discard_spills()


def _merged_jobs(manifests: dict[int, Manifest], n: int) -> list[dict]:
    """Each job once: its range over all shards, its chunks summed."""
    jobs: dict[int, dict] = {}
    for k in range(n):
        for job in manifests[k].jobs:
            entry = jobs.setdefault(job["index"], {**job, "chunks": 0})
            entry["range"] = [
                min(entry["range"][0], job["range"][0]),
                max(entry["range"][1], job["range"][1]),
            ]
            entry["chunks"] += job["chunks"]
    return [jobs[i] for i in sorted(jobs)]
