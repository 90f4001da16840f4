"""`residency verify --deep`: follow a claim's Parquet inputs down to the raw runs.

For a gathered table: every run directory it names must still match the manifest whose
digest the row recorded (a changed file is one line naming the run directory and the
file); then the table is gathered again from those run directories, with the same gather
function and arguments (its lineage), into a temporary directory and compared with the
stored one row by row. For an analysis table: its source table is checked the same way
first, must still have the digest the analysis recorded, and the analysis is run again
and compared. Paths in tables are relative to the project root: run this inside it.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from residency.analysis import opt as analysis
from residency.core import atomic, lineage, manifest
from residency.gather import studies as gather_studies
from residency.core.identity import sha256_file

MAX_DIFFS = 3  # differing cells named per table; the rest are counted
LARGE_FILE = 256 << 20  # model files at least this big are hashed with a progress line


class Deep:
    """Checks Parquet tables once each (claims share tables); call inside the project root."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="residency-deep-")
        self._done: dict[str, list[str]] = {}
        self._hashed: dict[str, str | None] = {}  # model/region path -> its sha256 now (None: missing)

    def table(self, rel: str) -> list[str]:
        """Problems of the table at `rel` and of everything it was made from (empty: holds)."""
        if rel not in self._done:
            self._done[rel] = self._check(rel)
        return self._done[rel]

    def _check(self, rel: str) -> list[str]:
        if not Path(rel).exists():
            return [f"{rel}: missing"]
        lin = lineage.of(rel)
        if lin is None:
            return [f"{rel}: records no lineage (made before run manifests); regenerate it"]
        return self._gathered(rel, lin) if lin["kind"] == "gather" else self._analysed(rel, lin)

    def _scratch(self, rel: str) -> Path:
        d = Path(self._tmp.name) / rel.replace("/", "_")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def hashed(self) -> set[str]:
        """The digests of the model and region files re-hashed so far."""
        return {v for v in self._hashed.values() if v}

    def source_file(self, rel: str, ident: dict) -> list[str]:
        """The model or region file a gathered table's runs read (its lineage's identity),
        re-hashed once per verify and compared with the digest the runs were made from."""
        path, want = ident.get("path"), ident.get("sha256")
        if not path or not want:
            return []
        if path not in self._hashed:
            self._hashed[path] = _hash(path) if Path(path).is_file() else None
        now = self._hashed[path]
        if now is None:
            return [f"{path}: missing (the runs of {rel} read it, sha256 {want[:16]}); "
                    "restore it or remake the runs"]
        if now != want:
            return [f"{path}: sha256 is now {now[:16]}, the runs of {rel} read {want[:16]}: "
                    "the model file changed since (remake the runs with it, or restore it)"]
        return []

    def _gathered(self, rel: str, lin: dict) -> list[str]:
        found = runs_intact(pq.read_table(rel, columns=["run_dir", "manifest_sha256"]))
        found += self.source_file(rel, lin.get("identity") or {})
        if found:  # the runs are not what was gathered: a fresh gather could only repeat it
            return found
        fresh = self._scratch(rel) / "gathered.parquet"
        try:
            atomic.write_parquet(fresh, gather_studies.table_from(lin))
        except (OSError, ValueError, KeyError) as exc:
            return [f"{rel}: cannot be gathered again from its run directories: {exc}"]
        return differences(rel, pq.read_table(rel), pq.read_table(fresh), "gathered again")

    def _analysed(self, rel: str, lin: dict) -> list[str]:
        src = lin["source"]
        found = self.table(src["path"])
        if found:
            return found
        now = sha256_file(src["path"])
        if now != src["sha256"]:
            return [f"{rel}: made from {src['path']} with sha256 {src['sha256'][:16]}, which is now "
                    f"{now[:16]}: stale (rerun the analysis)"]
        fresh = analysis.remake(lin, self._scratch(rel))
        return differences(rel, pq.read_table(rel), pq.read_table(fresh), "analysed again")


def _hash(path: str) -> str:
    """sha256 of a file; a large one says so on stderr first and after, with its rate."""
    size = Path(path).stat().st_size
    if size < LARGE_FILE:
        return sha256_file(path)
    print(f"residency verify: re-hashing {path} ({size / 2**30:.1f} GiB)", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    got = sha256_file(path)
    dt = max(time.monotonic() - t0, 1e-9)
    print(f"residency verify: {path}: hashed in {dt:.0f} s ({size / dt / 2**20:.0f} MiB/s)", file=sys.stderr)
    return got


def runs_intact(rows: pa.Table) -> list[str]:
    """One line per file of a named run directory that differs from its recorded manifest.
    Rows gathered as incomplete (no manifest) are compared by the fresh gather instead."""
    found = []
    for run_dir, sha in zip(rows.column("run_dir").to_pylist(), rows.column("manifest_sha256").to_pylist()):
        if sha is None:
            continue
        try:
            found += manifest.problems(run_dir, expect_sha256=sha)
        except manifest.ManifestError as exc:
            found.append(str(exc))
    return found


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def differences(label: str, stored: pa.Table, fresh: pa.Table, how: str) -> list[str]:
    """Lines naming where `stored` and `fresh` differ: columns, row count, then cells."""
    if not stored.schema.remove_metadata().equals(fresh.schema.remove_metadata()):
        return [f"{label}: its columns differ from the table {how}"]
    if stored.num_rows != fresh.num_rows:
        return [f"{label}: {stored.num_rows} rows, {fresh.num_rows} when {how}"]
    where = stored.column("run_dir").to_pylist() if "run_dir" in stored.column_names else range(stored.num_rows)
    diffs = [(w, name, a, b)
             for name in stored.column_names
             for w, a, b in zip(where, stored.column(name).to_pylist(), fresh.column(name).to_pylist())
             if not _same(a, b)]
    lines = [f"{label}: row {w}: {name} is {a!r}, {b!r} when {how}" for w, name, a, b in diffs[:MAX_DIFFS]]
    if len(diffs) > MAX_DIFFS:
        lines.append(f"{label}: and {len(diffs) - MAX_DIFFS} more differing values")
    return lines
