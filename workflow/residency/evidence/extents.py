"""Unions of canonical extents: the duplicate-free, overlap-free byte sets of the inventory
(reference 004 §2.1, §5.2).

A component interval is (file identity, offset, length) plus the label that put it there
(an expert object's gate slice, a tensor read whole, a row of the token embedding). The
union is the set of bytes the intervals cover, as sorted disjoint [offset, end) runs, so
nothing is counted twice. What the union absorbed is reported, not hidden: `duplicates`
counts intervals whose key (file, offset, length) repeats an earlier one, `overlaps` the
intervals that share bytes with another interval without being its duplicate (adjacent
intervals, which share no byte, are neither). The union's digest is the sha256 of its
canonical serialization: the component intervals sorted by (file, offset, length, label),
as compact UTF-8 JSON without a trailing newline; two unions with that digest were made
of the same intervals.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Interval:
    file_sha256: str
    offset: int
    length: int
    label: str = ""

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass
class Union:
    bytes: int
    runs: list[tuple[int, int]]           # disjoint [offset, end), ascending (one file)
    components: int                       # intervals given (empty ones dropped)
    duplicates: int
    overlaps: int
    sha256: str
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"union_bytes": self.bytes, "runs": len(self.runs), "component_intervals": self.components,
                "duplicate_component_intervals": self.duplicates, "overlapping_component_intervals": self.overlaps,
                "union_sha256": self.sha256, "files": self.files,
                "deduplication_key": "(model sha256, offset, length)",
                "canonical_serialization": "component intervals sorted by (model sha256, offset, length, label), "
                                           "compact UTF-8 JSON [[sha256, offset, length, label], ...], no trailing newline"}


def _check(iv: Interval) -> None:
    if iv.offset < 0 or iv.length < 0:
        raise ValueError(f"extent {iv.label or ''} at {iv.offset}+{iv.length}: negative offset or length")


def canonical_sha256(intervals: list[Interval]) -> str:
    rows = [[iv.file_sha256, iv.offset, iv.length, iv.label] for iv in sorted(intervals)]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def _counts(ivs: list[Interval]) -> tuple[int, int]:
    """(duplicates, overlaps) among intervals sorted by (file, offset, length)."""
    seen, duplicates, overlapping = set(), 0, set()
    unique = []
    for iv in ivs:
        key = (iv.file_sha256, iv.offset, iv.length)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        unique.append(iv)
    reach: dict[str, tuple[int, int]] = {}  # per file: (furthest end so far, index of that interval)
    for i, iv in enumerate(unique):
        end, j = reach.get(iv.file_sha256, (-1, -1))
        if iv.offset < end:
            overlapping.update((i, j))
        if iv.end > end:
            reach[iv.file_sha256] = (iv.end, i)
    return duplicates, len(overlapping)


def union(intervals: list[Interval]) -> Union:
    """The union of `intervals` (all of one model file, or each counted per file)."""
    for iv in intervals:
        _check(iv)
    ivs = sorted(iv for iv in intervals if iv.length > 0)
    duplicates, overlaps = _counts(ivs)
    runs: list[tuple[int, int]] = []
    total = 0
    for f in sorted({iv.file_sha256 for iv in ivs}):
        file_runs: list[list[int]] = []
        for iv in (x for x in ivs if x.file_sha256 == f):
            if file_runs and iv.offset <= file_runs[-1][1]:
                file_runs[-1][1] = max(file_runs[-1][1], iv.end)
            else:
                file_runs.append([iv.offset, iv.end])
        total += sum(e - b for b, e in file_runs)
        runs += [(b, e) for b, e in file_runs]
    return Union(bytes=total, runs=runs, components=len(ivs), duplicates=duplicates, overlaps=overlaps,
                 sha256=canonical_sha256(ivs), files=sorted({iv.file_sha256 for iv in ivs}))
