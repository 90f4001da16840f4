"""Small fake run directories, shaped like the engine's (docs/run-contract.md), for tests
of gather, analysis and claims that must not depend on the engine or the kernel."""

from __future__ import annotations

import json
import struct
from collections import OrderedDict
from pathlib import Path

HEADER = struct.Struct("<8sIIQQ")
RECORD = struct.Struct("<IIBBHI")


def simulate(policy: str, chunks: int, capacity: int, passes: int, extra_miss_steps=()):
    """(trace records, misses, evictions) of a cyclic scan under 'lru' or 'min' eviction."""
    resident: OrderedDict[int, None] = OrderedDict()
    records, misses, evictions = [], 0, 0
    for step in range(chunks * passes):
        c = step % chunks
        miss = c not in resident or step in extra_miss_steps
        if miss:
            misses += 1
            if c not in resident:
                if len(resident) >= capacity:
                    if policy == "lru":
                        victim = next(iter(resident))
                    else:  # MIN on a cyclic scan: evict the most recently used chunk
                        victim = next(reversed(resident))
                    del resident[victim]
                    evictions += 1
                    records.append((step, victim, 4, 0))
                records.append((step, c, 2, 0))
        resident[c] = None
        resident.move_to_end(c)
        records.append((step, c, 1, 1 if miss else 0))
    records.sort(key=lambda r: (r[0], r[2], r[1]))
    return records, misses, evictions


def write_trace(path: Path, chunk_size: int, chunks: int, records) -> None:
    data = HEADER.pack(b"RSTRACE1", 1, 16, chunk_size, chunks)
    data += b"".join(RECORD.pack(step, chunk, kind, flags, 0, 0) for step, chunk, kind, flags in records)
    path.write_bytes(data)


def make_run(root: Path, campaign: str, arm: str, r: float, rep: int, *, chunks=16, chunk_size=65536,
             passes=3, threads=1, compute_us=0, signal="all-threads-finished", status="ok",
             physical_fraction=1.0, extra_miss_steps=(), capacity=None) -> Path:
    d = root / campaign / arm / f"r{r:g}" / f"t{threads}-c{compute_us}-{signal}" / f"rep{rep}"
    d.mkdir(parents=True)
    region_bytes = chunks * chunk_size
    capacity = capacity or max(2, int(r * chunks) - 1)
    policy = "lru" if arm == "pager-lru" else "min"
    records, misses, evictions = simulate(policy, chunks, capacity, passes, extra_miss_steps)
    write_trace(d / "trace.bin", chunk_size, chunks, records)
    accesses = chunks * passes
    run = {
        "schema_version": 1, "subcommand": "scan", "status": status, "error": None, "arm": arm,
        "policy": {"pager-lru": "lru", "pager-declared": "declared", "pager-prefetch": "prefetch"}.get(arm),
        "source_engine": None if arm == "kernel-mmap" else "direct", "signal": signal,
        "uffd_mode": "syscall", "config": {"passes": passes},
        "region": {"path": "x", "bytes": region_bytes, "chunk_size": chunk_size, "chunks": chunks},
        "budget": {"budget_bytes": int(r * region_bytes), "window_bytes": chunk_size, "budget_chunks": capacity},
        "counters": {"steps": accesses, "accesses": accesses, "hits": accesses - misses, "misses": misses,
                     "demand_fills": misses, "prefetch_fills": 0, "prefetch_used": 0, "evictions": evictions,
                     "faults_handled": misses, "spurious_faults": 0, "signals": accesses,
                     "logical_bytes_read": misses * chunk_size,
                     "physical_bytes_read": int(physical_fraction * misses * chunk_size),
                     "bytes_verified": accesses * chunk_size, "verify_errors": 0,
                     "max_resident_chunks": capacity, "reconcile_checks": 0, "reconcile_mismatches": 0},
        "latency_ns": {"fault_p50": 1000, "fault_p99": 2000, "fault_max": 3000, "fill_p50": 900, "fill_p99": 1800},
        "wall_ns": 12345678, "trace": {"file": "trace.bin", "records": len(records)},
    }
    (d / "run.json").write_text(json.dumps(run))
    harness = {
        "schema_version": 1, "argv": ["residctl"], "engine": {"path": "/x/residctl", "sha256": "e" * 64},
        "meta": {"campaign": campaign, "arm": arm, "r": f"{r:g}", "rep": str(rep), "threads": str(threads),
                 "compute_us": str(compute_us), "signal": signal, "config_digest": "c" * 64,
                 "overhead_bytes": 4 << 20},
        "status": "ok" if status == "ok" else "failed", "exit_code": 0 if status == "ok" else 1,
        "term_signal": None, "started_utc": "2026-01-01T00:00:00+00:00", "wall_s": 0.1,
        "rusage": {"maxrss_kib": 1000, "user_s": 0, "sys_s": 0, "majflt": 0, "inblock": 0},
        "host": {"grade": "hard", "reason": None, "limit_bytes": int(r * region_bytes) + (4 << 20),
                 "cgroup": {"version": 1, "path": "/sys/fs/cgroup/memory/x", "limit_bytes": 1,
                            "peak_bytes": int(r * region_bytes), "limit_events": 0, "oom_events": 0,
                            "oom_kills": 0, "swap_peak_bytes": None, "pressure_events": 0, "notes": []}},
        "stderr_tail": [],
    }
    (d / "harness.json").write_text(json.dumps(harness))
    return d


def region_identity(root: Path) -> Path:
    p = root / "region.json"
    p.write_text(json.dumps({"path": "x", "bytes": 1, "seed": 1, "sha256": "f" * 64}))
    return p
