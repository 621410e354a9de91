"""``sweep merge``: check that every shard of a sharded run finished, and seal the dataset.

Shards (``sweep run --shard K/N``) write their part files into one folder
under names carrying their tag, so the folder already reads as one dataset
(Arrow skips the ``_``- and ``.``-files). Merging checks that all N shard
manifests exist, agree on the run and are complete, and that their part
files are all there; for ``--keep`` runs it reduces the shards' results
(the Pareto front of their fronts, the top k of their top k's, ties broken
by row identity as in one run) into ``part-keep.parquet``. It then writes
``_manifest.parquet`` with ``complete = true`` and deletes the shards'
``--keep`` results, so that every file left is Parquet of the data's
schema. Merging again is harmless.
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


def _lost_files(folder: Path, manifest: Manifest, tag: str, merged: bool) -> int:
    """Files a complete shard wrote that are not in the folder (someone deleted them)."""
    if manifest.run_key["keep"] != "all":
        return 0 if merged or (folder / (manifest.keep_state or "-")).is_file() else 1
    return sum(
        not (folder / store.part_name(job["index"], c, tag)).is_file()
        for job in manifest.jobs
        for c in range(job["chunks"])
    )


def merge(folder: Path) -> MergeSummary:
    """Verify the shards in ``folder`` and write ``_manifest.parquet`` (and ``part-keep.parquet``).

    A ``--keep`` run's shard results (``_keep-sKofN.parquet``, rows with their
    identities) are deleted once the merged result and manifest are in place,
    so the folder holds only Parquet files of the data's schema. Merging a
    merged folder again checks it and changes nothing. Raises
    :class:`InputError` naming every missing or unfinished shard.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", str(folder))
    found = store.shard_manifests(folder)
    single = store.load_manifest(folder)
    if not found:
        if single is not None and single.complete and "shards" not in single.run_key:
            return MergeSummary(folder, 1, int(single.rows), single.run_key["keep"])
        if old := store.old_manifests(folder):
            raise InputError(store.OLD_VERSION.format(old[0].name), str(folder))
        raise InputError(
            f"no shard manifests ({store.manifest_name('sKofN')}): nothing to merge", str(folder)
        )
    counts = sorted({n for _, n in found})
    if len(counts) > 1:
        raise InputError(f"holds shards of different counts ({', '.join(map(str, counts))})", str(folder))
    n = counts[0]
    store.writable_folder(folder)  # merging writes the manifest and the kept rows here
    manifests: dict[int, Manifest] = {}
    for (k, _), path in sorted(found.items()):
        doc = store.load_manifest(folder, path.name)
        if doc is not None:
            manifests[k] = doc
    run_key = manifests[min(manifests)].run_key
    odd = [store.shard_tag(k, n) for k, m in manifests.items() if m.run_key != run_key]
    if odd:
        raise InputError(f"shards {', '.join(odd)} were run with a different spec or options", str(folder))
    merged = single is not None and _merged(folder, single, run_key, n, manifests)
    _check_finished(folder, manifests, n, merged)
    if merged:
        rows = int(single.rows)  # type: ignore[union-attr]
    else:
        first = manifests[0]
        schema = store.Schema.from_json(first.schema)
        if run_key["keep"] != "all":
            rows = _merge_kept(folder, schema, run_key["keep"], manifests, first.compression or "zstd")
        else:
            rows = sum(int(m.rows) for m in manifests.values())
        doc = _merged_manifest(manifests, run_key, n, rows)
        store.write_manifest(folder / store.MANIFEST, json.dumps(doc.to_json(), indent=1), schema.arrow())
    if run_key["keep"] != "all":  # the merged manifest is in place: the shards' results are spent
        for m in manifests.values():
            (folder / str(m.keep_state)).unlink(missing_ok=True)
    return MergeSummary(folder, n, rows, run_key["keep"])


def _merged(folder: Path, single: Manifest, run_key: dict, n: int, manifests: dict[int, Manifest]) -> bool:
    """Whether ``folder`` already holds the merge of these ``n`` complete shards."""
    return (
        single.complete
        and single.shards == n
        and single.run_key == run_key
        and len(manifests) == n
        and all(m.complete for m in manifests.values())
        and (run_key["keep"] == "all" or (folder / store.KEEP_PART).is_file())
    )


def _check_finished(folder: Path, manifests: dict[int, Manifest], n: int, merged: bool) -> None:
    """Raise an :class:`InputError` naming every shard that is missing, unfinished or has lost
    files (a merged ``--keep`` run's shard results are gone by design)."""
    problems = []
    for k in range(n):
        tag = store.shard_tag(k, n)
        m = manifests.get(k)
        if m is None:
            problems.append(f"{tag} (missing)")
        elif not m.complete:
            total = sum(job["chunks"] for job in m.jobs)
            problems.append(f"{tag} (incomplete: {_done_count(m)} of {total} chunks)")
        elif lost := _lost_files(folder, m, tag, merged):
            problems.append(f"{tag} ({lost} files missing)")
    if problems:
        raise InputError(
            f"{len(problems)} of {n} shards not finished: {', '.join(problems)}; "
            f"rerun each with shard K/{n} into {folder}",
            str(folder),
            param="shard",
        )


def _merge_kept(
    folder: Path, schema: store.Schema, keep_text: str, manifests: dict[int, Manifest], compression: str
) -> int:
    """Reduce the shards' ``--keep`` results into ``part-keep.parquet``; returns its rows."""
    keep = parse_keep(keep_text, (*schema.int_columns, *schema.float_columns))
    reducer = Reducer(keep, schema, folder, store.spill_prefix("merge"))
    reducer.adopt([])  # deletes the spills of a merge that was killed
    try:
        for k in sorted(manifests):
            reducer.load(folder / str(manifests[k].keep_state))
        writer = store.PartWriter(folder, schema.arrow(), compression)
        return writer.write_tables(store.KEEP_PART, reducer.tables())
    finally:
        reducer.discard_spills()


def _merged_manifest(manifests: dict[int, Manifest], run_key: dict, n: int, rows: int) -> Manifest:
    """The manifest of the whole run: the shards' jobs joined, each shard's finished chunks."""
    first = manifests[0]
    jobs: dict[int, dict] = {}
    for k in range(n):
        for job in manifests[k].jobs:
            entry = jobs.setdefault(job["index"], {**job, "chunks": 0})
            entry["range"] = [
                min(entry["range"][0], job["range"][0]),
                max(entry["range"][1], job["range"][1]),
            ]
            entry["chunks"] += job["chunks"]
    return Manifest(
        format=first.format,
        name=first.name,
        spec_path=first.spec_path,
        run_key=run_key,
        versions=first.versions,
        jobs=[jobs[i] for i in sorted(jobs)],
        shards=n,
        done={store.shard_tag(k, n): manifests[k].done for k in range(n)},
        rows=rows,
        complete=True,
        schema=first.schema,
    )
