"""Gather: run directories -> one typed Parquet row per run.

A row joins what the engine counted (`run.json`), what the kernel said about the run's
cgroup (`harness.json`), the trace digest, and the identities (engine sha256, region or
model sha256, config digest), so any number in a figure leads back here, then to the run
directory (`run_dir`), then to the engine counter of the same name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from . import atomic
from .identity import sha256_file

ARM_LETTER = {
    "kernel-mmap": "A", "pager-lru": "C", "pager-declared": "D", "pager-prefetch": "E",
    "pager-zero": "Z",
}

# The columns of results/pager_synthetic.parquet, in order. Units are in the names.
PAGER_SYNTHETIC_SCHEMA = pa.schema([
    ("campaign", pa.string()),            # main | stress
    ("arm", pa.string()),                 # code name (kernel-mmap, pager-lru, ...)
    ("arm_letter", pa.string()),          # reference letter (A, C, D, E)
    ("r", pa.float64()),                  # budget ratio
    ("rep", pa.int32()),
    ("threads", pa.int32()),
    ("compute_us", pa.int32()),
    ("signal", pa.string()),
    ("status", pa.string()),              # ok | failed | oom-killed | killed-*
    ("error", pa.string()),
    ("policy", pa.string()),
    ("source_engine", pa.string()),
    ("uffd_mode", pa.string()),
    ("region_bytes", pa.int64()),         # T_repr of the synthetic region
    ("chunk_bytes", pa.int64()),
    ("chunks", pa.int64()),
    ("passes", pa.int32()),
    ("budget_bytes", pa.int64()),         # r * T_repr
    ("window_bytes", pa.int64()),
    ("budget_chunks", pa.int64()),        # the pager's capacity after paying for its window
    ("steps", pa.int64()),
    ("accesses", pa.int64()),
    ("hits", pa.int64()),
    ("misses", pa.int64()),
    ("miss_rate", pa.float64()),          # misses / accesses
    ("accesses_after_cold", pa.int64()),  # accesses in passes 2.. (from the trace)
    ("misses_after_cold", pa.int64()),
    ("demand_fills", pa.int64()),
    ("prefetch_fills", pa.int64()),
    ("prefetch_used", pa.int64()),
    ("evictions", pa.int64()),
    ("faults_handled", pa.int64()),
    ("spurious_faults", pa.int64()),
    ("signals", pa.int64()),
    ("logical_bytes_read", pa.int64()),
    ("physical_bytes_read", pa.int64()),
    ("bytes_verified", pa.int64()),
    ("verify_errors", pa.int64()),
    ("max_resident_chunks", pa.int64()),
    ("reconcile_checks", pa.int64()),
    ("reconcile_mismatches", pa.int64()),
    ("fault_p50_ns", pa.int64()),
    ("fault_p99_ns", pa.int64()),
    ("fill_p50_ns", pa.int64()),
    ("wall_ns", pa.int64()),
    ("trace_records", pa.int64()),
    ("trace_sha256", pa.string()),
    ("host_grade", pa.string()),          # hard | instrumented | unenforced
    ("cgroup_version", pa.int32()),
    ("limit_bytes", pa.int64()),          # r * T_repr + overhead
    ("overhead_bytes", pa.int64()),       # calibrated non-weight overhead O
    ("peak_bytes", pa.int64()),           # the cgroup's high-water mark
    ("limit_events", pa.int64()),         # v2 memory.events max / v1 memory.failcnt
    ("pressure_events", pa.int64()),      # v1 vmpressure reclaim events (null on v2)
    ("oom_kills", pa.int64()),
    ("engine_sha256", pa.string()),
    ("region_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
])


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _int(v):
    return None if v is None else int(v)


def pager_synthetic_row(run_dir: Path, region_sha256: str | None) -> dict:
    """One row of results/pager_synthetic.parquet from a run directory."""
    from . import trace as trace_mod

    harness = _load(run_dir / "harness.json")
    if harness is None:
        raise FileNotFoundError(f"{run_dir}: no harness.json (the run was never recorded)")
    meta = harness["meta"]
    run = _load(run_dir / "run.json") or {}
    counters = run.get("counters", {})
    lat = run.get("latency_ns", {})
    region = run.get("region", {})
    budget = run.get("budget", {})
    host = harness["host"]
    cg = host.get("cgroup") or {}

    trace_path = run_dir / "trace.bin"
    acc_after = miss_after = trace_sha = None
    if trace_path.exists():
        tr = trace_mod.read(trace_path)
        acc = tr.accesses
        after = acc["step"] >= tr.chunks
        acc_after = int(after.sum())
        miss_after = int(((acc["flags"] & trace_mod.FLAG_MISS) != 0)[after].sum())
        trace_sha = sha256_file(trace_path)

    accesses = counters.get("accesses")
    misses = counters.get("misses")
    status = run.get("status") if harness["status"] in ("ok", "failed") and run else harness["status"]
    error = run.get("error")
    if not run:
        error = error or f"no run.json: {harness['status']}; stderr: {' | '.join(harness.get('stderr_tail', []))}"
    return {
        "campaign": meta.get("campaign"),
        "arm": meta.get("arm"),
        "arm_letter": ARM_LETTER.get(meta.get("arm"), "?"),
        "r": float(meta["r"]) if meta.get("r") not in (None, "") else None,
        "rep": int(meta.get("rep", 0)),
        "threads": int(meta.get("threads", 1)),
        "compute_us": int(meta.get("compute_us", 0)),
        "signal": meta.get("signal"),
        "status": status,
        "error": error,
        "policy": run.get("policy"),
        "source_engine": run.get("source_engine"),
        "uffd_mode": run.get("uffd_mode"),
        "region_bytes": _int(region.get("bytes")),
        "chunk_bytes": _int(region.get("chunk_size")),
        "chunks": _int(region.get("chunks")),
        "passes": _int(run.get("config", {}).get("passes")),
        "budget_bytes": _int(budget.get("budget_bytes") or meta.get("budget_bytes")),
        "window_bytes": _int(budget.get("window_bytes")),
        "budget_chunks": _int(budget.get("budget_chunks")),
        "steps": _int(counters.get("steps")),
        "accesses": _int(accesses),
        "hits": _int(counters.get("hits")),
        "misses": _int(misses),
        "miss_rate": (misses / accesses) if accesses else None,
        "accesses_after_cold": acc_after,
        "misses_after_cold": miss_after,
        "demand_fills": _int(counters.get("demand_fills")),
        "prefetch_fills": _int(counters.get("prefetch_fills")),
        "prefetch_used": _int(counters.get("prefetch_used")),
        "evictions": _int(counters.get("evictions")),
        "faults_handled": _int(counters.get("faults_handled")),
        "spurious_faults": _int(counters.get("spurious_faults")),
        "signals": _int(counters.get("signals")),
        "logical_bytes_read": _int(counters.get("logical_bytes_read")),
        "physical_bytes_read": _int(counters.get("physical_bytes_read")),
        "bytes_verified": _int(counters.get("bytes_verified")),
        "verify_errors": _int(counters.get("verify_errors")),
        "max_resident_chunks": _int(counters.get("max_resident_chunks")),
        "reconcile_checks": _int(counters.get("reconcile_checks")),
        "reconcile_mismatches": _int(counters.get("reconcile_mismatches")),
        "fault_p50_ns": _int(lat.get("fault_p50")),
        "fault_p99_ns": _int(lat.get("fault_p99")),
        "fill_p50_ns": _int(lat.get("fill_p50")),
        "wall_ns": _int(run.get("wall_ns")),
        "trace_records": _int(run.get("trace", {}).get("records")),
        "trace_sha256": trace_sha,
        "host_grade": host.get("grade"),
        "cgroup_version": _int(cg.get("version")),
        "limit_bytes": _int(host.get("limit_bytes")),
        "overhead_bytes": _int(meta.get("overhead_bytes")),
        "peak_bytes": _int(cg.get("peak_bytes")),
        "limit_events": _int(cg.get("limit_events")),
        "pressure_events": _int(cg.get("pressure_events")),
        "oom_kills": _int(cg.get("oom_kills")),
        "engine_sha256": harness["engine"]["sha256"],
        "region_sha256": region_sha256,
        "config_digest": meta.get("config_digest"),
        "run_dir": str(run_dir),
    }


def gather_pager_synthetic(run_dirs: list[str | os.PathLike], region_identity: str | os.PathLike,
                           out: str | os.PathLike) -> pa.Table:
    """Write results/pager_synthetic.parquet from the given run directories."""
    region = json.loads(Path(region_identity).read_text())
    rows = [pager_synthetic_row(Path(d), region["sha256"]) for d in sorted(map(str, run_dirs))]
    table = pa.Table.from_pylist(rows, schema=PAGER_SYNTHETIC_SCHEMA)
    atomic.write_parquet(out, table)
    return table
