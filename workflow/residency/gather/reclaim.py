"""Gather the reclaim cells (P3): run directories -> results/reclaim.parquet.

One row per cell: the run columns every study shares (residency.gather.pager), the arm's
protection, and what the kernel did to the cell's cgroup under pressure (harness.json
`host.reclaim`, module reclaim): v2 memory.events high and memory.stat pgscan / pgsteal;
v1's counterparts (workingset_refault_anon, pgmajfault, failcnt, vmpressure); on both the
sampled peaks of the swap the cgroup used and of its unevictable bytes. A counter this
cgroup version does not have is null, and `kernel_lacks` names what is missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from residency.gather import base

RECLAIM_COLUMNS = [
    ("protection", pa.string()),               # unprotected | protected
    ("protect_on", pa.bool_()),                # run.json protect.on: what the engine ran with
    ("region_locked_bytes", pa.int64()),       # of the pager's region, when its record was written
    ("pressure_bytes", pa.int64()),            # v2 memory.high / v1 memory.limit_in_bytes
    ("pressure_fraction", pa.float64()),       # of the budget, above O
    ("swap_file_bytes", pa.int64()),           # the swap the cell turned on for itself
    ("high_events", pa.int64()),               # v2 memory.events high (null on v1)
    ("max_events", pa.int64()),                # v2 memory.events max (null on v1)
    ("pgscan", pa.int64()),                    # v2 memory.stat (null on v1)
    ("pgsteal", pa.int64()),                   # v2 memory.stat (null on v1)
    ("kernel_reclaimed_bytes", pa.int64()),    # v2: pgsteal pages (null on v1)
    ("workingset_refault_anon", pa.int64()),   # pages the kernel took and the process faulted back
    ("workingset_refault_file", pa.int64()),
    ("pgmajfault", pa.int64()),
    ("pgpgout", pa.int64()),                   # v1 memory.stat (pages uncharged: the pager's frees included)
    ("failcnt", pa.int64()),                   # v1 memory.failcnt (null on v2)
    ("swap_peak_bytes", pa.int64()),           # sampled: swap in use by the cgroup
    ("unevictable_peak_bytes", pa.int64()),    # sampled: mlocked bytes charged to the cgroup
    ("samples", pa.int64()),
    ("pager_evicted_bytes", pa.int64()),       # the pager's own evictions x chunk bytes
    ("kernel_lacks", pa.string()),             # what this cgroup version cannot show ("; "-joined)
    ("bytes_verified", pa.int64()),
    ("verify_errors", pa.int64()),
]

STAT_COLUMNS = ("pgscan", "pgsteal", "workingset_refault_anon", "workingset_refault_file", "pgmajfault", "pgpgout")

RECLAIM_SCHEMA = pa.schema(base.RUN_COLUMNS + RECLAIM_COLUMNS + base.HOST_COLUMNS + [
    ("region_sha256", pa.string()),
] + base.PROVENANCE_COLUMNS)


def reclaim_row(run_dir: Path, region_sha256: str | None) -> dict:
    row, run, meta = base.common_row(run_dir)
    harness = json.loads((run_dir / "harness.json").read_text())
    rc = harness["host"].get("reclaim") or {}
    stat, events = rc.get("stat") or {}, rc.get("events") or {}
    counters = run.get("counters", {})
    protect = run.get("protect") or {}
    ev = row.get("evictions")
    if harness["status"] == "unavailable":  # never run: why the machine could not make it
        row["error"] = harness["host"].get("reason")
    row.update({
        "protection": meta.get("protection"),
        "protect_on": protect.get("on"),
        "region_locked_bytes": base.to_int(protect.get("locked_bytes")),
        "pressure_bytes": base.to_int(meta.get("reclaim_high_bytes") or rc.get("high_bytes")),
        "pressure_fraction": float(meta["reclaim_fraction"]) if meta.get("reclaim_fraction") else None,
        "swap_file_bytes": base.to_int((harness["host"].get("swap") or {}).get("bytes")),
        **{c: base.to_int(events.get(k)) for c, k in (("high_events", "high"), ("max_events", "max"))},
        **{k: base.to_int(stat.get(k)) for k in STAT_COLUMNS},
        "kernel_reclaimed_bytes": base.to_int(rc.get("kernel_reclaimed_bytes")),
        "failcnt": base.to_int(rc.get("failcnt")),
        "swap_peak_bytes": base.to_int(rc.get("swap_peak_bytes")),
        "unevictable_peak_bytes": base.to_int(rc.get("unevictable_peak_bytes")),
        "samples": base.to_int(rc.get("samples")),
        "pager_evicted_bytes": ev * row["chunk_bytes"] if ev is not None and row.get("chunk_bytes") else None,
        "kernel_lacks": "; ".join(rc.get("lacks") or []) or None,
        "bytes_verified": base.to_int(counters.get("bytes_verified")),
        "verify_errors": base.to_int(counters.get("verify_errors")),
        "region_sha256": region_sha256,
    })
    return row


def reclaim_table(run_dirs: list[str], region: dict, llama: dict | None = None) -> pa.Table:
    rows = [reclaim_row(Path(d), region["sha256"]) for d in run_dirs]
    base.stamp_llama(rows, llama)
    return pa.Table.from_pylist(rows, schema=RECLAIM_SCHEMA)


def gather_reclaim(run_dirs: list[str | os.PathLike], region_identity: str | os.PathLike,
                   out: str | os.PathLike, llama_identity: str | os.PathLike | None = None) -> pa.Table:
    """Write results/reclaim.parquet from the reclaim cells' run directories."""
    return base.write({"study": "reclaim", "run_dirs": sorted(map(str, run_dirs)),
                       "identity": json.loads(Path(region_identity).read_text()), "oracle": None,
                       "llama": base.llama_record(llama_identity)}, out, reclaim_from)


def reclaim_from(lin: dict) -> pa.Table:
    """The table a reclaim gather lineage describes (verify --deep)."""
    return reclaim_table(lin["run_dirs"], lin["identity"], lin.get("llama"))
