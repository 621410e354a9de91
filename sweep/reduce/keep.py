"""The in-stream reduction a run keeps (``--keep``), and what a chunk hands the host for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sweep.errors import InputError

#: The most rows --keep top:K may keep: they stay in memory (about 100 bytes each, three
#: times that while a reduction sorts them), unlike a Pareto front, which spills to disk.
MAX_TOP_K = 1 << 20


@dataclass(frozen=True)
class Keep:
    """An in-stream reduction: ``pareto`` over minimised columns, or ``top`` K by one column.

    A Pareto front keeps one row per distinct objective vector on it (the configuration of
    least identity, job then flat grid index) with a ``tied`` count of the configurations
    it stands for; with ``ties`` (``pareto:COLS:all``) it keeps every tied configuration.
    """

    kind: str  # "all", "pareto", "top"
    columns: tuple[str, ...] = ()
    k: int = 0
    ties: bool = False

    @property
    def reduces(self) -> bool:
        return self.kind != "all"

    @property
    def distinct(self) -> bool:
        """Whether the result holds one row per distinct objective vector, with ``tied`` counts."""
        return self.kind == "pareto" and not self.ties

    def describe(self) -> str:
        if self.kind == "pareto":
            return "pareto:" + ",".join(self.columns) + (":all" if self.ties else "")
        if self.kind == "top":
            return f"top:{self.k}:{self.columns[0]}"
        return "all"


class Survivors(NamedTuple):
    """A reducing chunk's candidate rows on the host; ``local`` are their offsets in the chunk,
    ``tied`` how many configurations of the chunk each stands for (None: one each)."""

    ints: np.ndarray
    floats: np.ndarray
    limit: np.ndarray
    local: np.ndarray
    tied: np.ndarray | None = None


def parse_keep(text: str | None, columns: tuple[str, ...]) -> Keep:
    """``pareto:COL,COL[,...][:all]`` or ``top:K:COL``; columns must be float result columns."""
    if not text or text == "all":
        return Keep("all")
    kind, _, rest = text.partition(":")
    if kind == "pareto":
        names, _, option = rest.partition(":")
        if option not in ("", "all"):
            raise InputError(
                f"keep pareto:COLS takes only ':all' after the columns, got ':{option}'", param="keep"
            )
        cols = tuple(c.strip() for c in names.split(",") if c.strip())
        if len(cols) < 1:
            raise InputError("keep pareto needs columns, e.g. pareto:t_epoch_s,p", param="keep")
        keep = Keep("pareto", cols, ties=option == "all")
    elif kind == "top":
        k_text, _, col = rest.partition(":")
        try:
            k = int(k_text)
        except ValueError:
            raise InputError(f"keep top:K:COL needs an integer K, got '{k_text}'", param="keep") from None
        if k < 1 or not col:
            raise InputError("keep top:K:COL needs K >= 1 and a column", param="keep")
        if k > MAX_TOP_K:
            raise InputError(
                f"keep top:K:COL holds K rows in memory: K must be <= {MAX_TOP_K:,}, got {k:,}"
                " (for more, write the rows, e.g. with only_feasible, and query them with sweep top)",
                param=("keep", "only_feasible"),
            )
        keep = Keep("top", (col.strip(),), k)
    else:
        raise InputError(f"keep must be all, pareto:COLS[:all] or top:K:COL, got '{text}'", param="keep")
    for c in keep.columns:
        if c not in columns:
            raise InputError(
                f"keep: unknown or non-numeric column '{c}' (known: {', '.join(columns)})", param="keep"
            )
    return keep
