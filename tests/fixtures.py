"""Small fake run directories, shaped like the engine's (docs/run-contract.md), for tests
of gather, analysis and claims that must not depend on the engine or the kernel. Each ends
with manifest.json, as the harness leaves it; a test that edits a run afterwards calls
`seal` again, as a harness would (or leaves it unsealed to test that it is caught)."""

from __future__ import annotations

import hashlib
import json
import struct
from collections import OrderedDict
from pathlib import Path

from residency.core import manifest

HEADER = struct.Struct("<8sIIQQ")
RECORD = struct.Struct("<IIBBHI")


def _simulate(seq, policy: str, capacity: int, extra_miss_steps=()):
    """(trace records, misses, evictions) of (step, chunk) accesses under 'lru' or 'min'
    (Belady: evict the chunk whose next use is farthest). A step in extra_miss_steps counts
    its access as a miss although the chunk is resident (a fake signal fault)."""
    nxt, last = [0] * len(seq), {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i][1], 10**9)
        last[seq[i][1]] = i
    resident: OrderedDict[int, int] = OrderedDict()  # chunk -> position of its next use
    records, misses, evictions = [], 0, 0
    for pos, (step, c) in enumerate(seq):
        miss = c not in resident or step in extra_miss_steps
        if miss:
            misses += 1
            if c not in resident:
                if len(resident) >= capacity:
                    victim = next(iter(resident)) if policy == "lru" else max(resident, key=resident.get)
                    del resident[victim]
                    evictions += 1
                    records.append((step, victim, 4, 0))
                records.append((step, c, 2, 0))
        resident[c] = nxt[pos]
        resident.move_to_end(c)
        records.append((step, c, 1, 1 if miss else 0))
    records.sort(key=lambda r: (r[0], r[2], r[1]))
    return records, misses, evictions


def simulate(policy: str, chunks: int, capacity: int, passes: int, extra_miss_steps=()):
    """A cyclic scan of `chunks` chunks, one per step."""
    return _simulate([(s, s % chunks) for s in range(chunks * passes)], policy, capacity, extra_miss_steps)


def write_trace(path: Path, chunk_size: int, chunks: int, records) -> None:
    data = HEADER.pack(b"RSTRACE1", 1, 16, chunk_size, chunks)
    data += b"".join(RECORD.pack(step, chunk, kind, flags, 0, 0) for step, chunk, kind, flags in records)
    path.write_bytes(data)


def make_run(root: Path, campaign: str, arm: str, r: float, rep: int, *, chunks=16, chunk_size=65536,
             passes=3, threads=1, compute_us=0, signal="all-threads-finished", sync="step", jitter_us=0,
             status="ok", physical_fraction=1.0, extra_miss_steps=(), capacity=None, sealed=True) -> Path:
    d = root / campaign / arm / f"r{r:g}" / f"t{threads}-c{compute_us}-{signal}-{sync}" / f"rep{rep}"
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
        "uffd_mode": "syscall", "config": {"passes": passes, "sync": sync, "jitter_us": jitter_us},
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
                 "compute_us": str(compute_us), "signal": signal, "sync": sync, "jitter_us": str(jitter_us),
                 "config_digest": "c" * 64,
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
    return seal(d) if sealed else d


SOURCE_BYTES = b"the bytes of a tiny model or region\n"  # what deep verify re-hashes
SOURCE_SHA256 = hashlib.sha256(SOURCE_BYTES).hexdigest()


def source_file(root: Path, name: str) -> str:
    """A model or region file at root/name (the path an identity names, relative to the root)."""
    (root / name).write_bytes(SOURCE_BYTES)
    return name


def region_identity(root: Path) -> Path:
    p = root / "region.json"
    p.write_text(json.dumps({"path": source_file(root, "region.bin"), "bytes": len(SOURCE_BYTES), "seed": 1,
                             "sha256": SOURCE_SHA256}))
    return p


# ---- fake real-model runs (residctl generate's run directory) ---------------------------

MODEL_OBJECTS = [[0, 1, 2, 3], [4], [5], [6], [7], [0, 1, 2, 3]]  # embd, layer.0..3, output (tied)
MODEL_OBJECT_NAMES = ["embd", "layer.0", "layer.1", "layer.2", "layer.3", "output"]


def simulate_steps(policy: str, capacity: int, passes: int):
    """The object steps of MODEL_OBJECTS, `passes` times."""
    seq = [(p * len(MODEL_OBJECTS) + i, c) for p in range(passes) for i, obj in enumerate(MODEL_OBJECTS) for c in obj]
    return _simulate(seq, policy, capacity)


def make_model_run(root: Path, campaign: str, arm: str, r: float | None, rep: int, *, tokens=4, n_vocab=16,
                   tps=10.0, logits_seed=0, flip=None, status="ok", chunk_size=1 << 20, capacity=None,
                   bytes_per_miss=None, interposed=True, fault_p99=5000, demand_fault_p99=5000, sealed=True):
    import numpy as np

    d = root / campaign / arm / (f"r{r:g}" if r is not None else "none") / f"rep{rep}"
    d.mkdir(parents=True)
    passes = tokens  # prefill + tokens-1 decode passes produce `tokens` logit rows
    capacity = capacity or (max(2, int((r or 1.0) * 8) - 1))
    policy = "lru" if arm == "pager-lru" else "min"
    records, misses, evictions = simulate_steps(policy, capacity, passes)
    if arm == "kernel-mmap":
        records = [x for x in records if x[2] == 1]
    write_trace(d / "trace.bin", chunk_size, 8, records)
    rng = np.random.default_rng(logits_seed)
    logits = rng.standard_normal((tokens, n_vocab)).astype("<f4")
    if flip is not None:
        raw = bytearray(logits.tobytes())
        raw[flip] ^= 1
        logits = np.frombuffer(bytes(raw), dtype="<f4").reshape(tokens, n_vocab)
    logits.tofile(d / "logits.f32")
    toks = [int(x) for x in logits.argmax(axis=1)]
    (d / "tokens.json").write_text(json.dumps({"prompt": "p", "prompt_tokens": [1, 2], "tokens": toks, "text": "t"}))
    phys = misses * (bytes_per_miss or chunk_size)
    accesses = sum(1 for x in records if x[2] == 1)
    # As the engine decides it (generate_steps.cpp): a pager arm's step larger than its
    # fit_chunks runs oversize; budget.oversize_objects names those other than embd.
    fit = None if arm == "kernel-mmap" else capacity
    over = [i for i, obj in enumerate(MODEL_OBJECTS) if fit is not None and len(obj) > fit]
    (d / "objects.json").write_text(json.dumps({"chunk_size": chunk_size, "chunks": 8, "objects": [
        {"name": n, "chunks": obj} for n, obj in zip(MODEL_OBJECT_NAMES, MODEL_OBJECTS)]}))
    demand = misses // 2 if arm == "pager-prefetch" else misses  # prefetch turns demand faults into fills
    run = {
        "schema_version": 1, "subcommand": "generate", "status": status, "error": None if status == "ok" else "watchdog",
        "arm": arm, "policy": None if arm == "kernel-mmap" else arm.split("-")[1],
        "source_engine": None if arm == "kernel-mmap" else "direct", "uffd_mode": None if arm == "kernel-mmap" else "syscall",
        "config": {"chunk_size": chunk_size},
        "region": {"path": "m.gguf", "bytes": 8 * chunk_size, "chunk_size": chunk_size, "chunks": 8},
        "budget": {"budget_bytes": int((r or 0) * 8 * chunk_size) or None, "window_bytes": chunk_size,
                   "page_table_bytes": 8192, "budget_chunks": capacity, "fit_chunks": fit,
                   "oversize_objects": [MODEL_OBJECT_NAMES[i] for i in over if i != 0]},
        "counters": {"steps": passes * 6, "accesses": accesses, "hits": accesses - misses, "misses": misses,
                     "demand_fills": demand, "prefetch_fills": misses - demand, "prefetch_used": misses - demand,
                     "evictions": evictions, "faults_handled": demand, "spurious_faults": 0, "signals": passes * 6,
                     "logical_bytes_read": phys, "physical_bytes_read": phys, "max_resident_chunks": capacity,
                     "reconcile_checks": 0, "reconcile_mismatches": 0, "oversize_steps": passes * len(over)},
        "latency_ns": {"fault_p50": 1000, "fault_p99": fault_p99, "fault_max": 9000, "demand_fault_p99": demand_fault_p99,
                       "fill_p50": 900, "fill_p99": 1800},
        "wall_ns": 10**9, "trace": {"file": "trace.bin", "records": len(records)},
        "model": {"path": "m.gguf", "bytes": 8 * chunk_size, "n_layer": 4, "n_vocab": n_vocab, "n_expert": 0,
                  "tied_output": True},
        "llama": {"commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f", "repack_disabled": True, "threads": 2, "ctx": 64},
        "generation": {"prompt_tokens": 2, "tokens": tokens, "passes": passes, "prefill_ns": 10**6,
                       "decode_ns": int((tokens - 1) / tps * 1e9), "tokens_per_s": tps,
                       "token_latency_ns": {"count": tokens - 1, "p50": int(1e9 / tps), "p99": int(1e9 / tps),
                                            "max": int(1e9 / tps)}},
        "mapping": {"interposed": interposed if arm != "kernel-mmap" else False},
        "objects": 6, "steps_per_pass": 6,
    }
    (d / "run.json").write_text(json.dumps(run))
    harness = {
        "schema_version": 1, "argv": ["residctl"], "engine": {"path": "/x/residctl", "sha256": "e" * 64},
        "meta": {"campaign": campaign, "arm": arm, "r": f"{r:g}" if r is not None else "", "rep": str(rep),
                 "config_digest": "c" * 64, "overhead_bytes": 4 << 20, "t_repr_bytes": 8 * chunk_size},
        "status": "ok" if status == "ok" else "failed", "exit_code": 0 if status == "ok" else 1,
        "term_signal": None, "started_utc": "2026-01-01T00:00:00+00:00", "wall_s": 1.0,
        "rusage": {"maxrss_kib": 1000, "user_s": 0, "sys_s": 0, "majflt": 0, "inblock": 0},
        "host": {"grade": "hard" if r else "instrumented", "reason": None,
                 "limit_bytes": int(r * 8 * chunk_size) + (4 << 20) if r else None,
                 "cgroup": {"version": 1, "path": "/x", "limit_bytes": 1, "peak_bytes": 1 << 20, "limit_events": 0,
                            "oom_events": 0, "oom_kills": 0, "swap_peak_bytes": None, "pressure_events": 0,
                            "notes": []}},
        "stderr_tail": [], "dropped_cache": ["m.gguf"],
    }
    (d / "harness.json").write_text(json.dumps(harness))
    return seal(d) if sealed else d


def make_roofline_run(root: Path, rep: int, *, physical_bytes=8 << 20, wall_ns=4_000_000, chunk_size=1 << 20,
                      status="ok", sealed=True) -> Path:
    """A roofline calibration read (`residency run ... -- residctl stream`) of the model file."""
    d = root / "roofline" / f"rep{rep}"
    d.mkdir(parents=True)
    run = {
        "schema_version": 1, "subcommand": "stream", "status": status, "error": None if status == "ok" else "short read",
        "source_engine": "direct", "wall_ns": wall_ns,
        "config": {"object_bytes": chunk_size, "window_bytes": chunk_size, "windows": 1, "depth": 1, "source": "direct"},
        "counters": {"reads_issued": physical_bytes // chunk_size, "completions": physical_bytes // chunk_size},
        "file": {"path": "m.gguf", "bytes": physical_bytes},
        "source_stats": {"engine": "direct", "depth": 1, "completions": physical_bytes // chunk_size,
                         "physical_bytes": physical_bytes, "logical_bytes": physical_bytes},
    }
    (d / "run.json").write_text(json.dumps(run))
    harness = {
        "schema_version": 1, "argv": ["residctl", "stream"], "engine": {"path": "/x/residctl", "sha256": "e" * 64},
        "meta": {"campaign": "roofline", "rep": str(rep), "config_digest": "c" * 64},
        "status": "ok" if status == "ok" else "failed", "exit_code": 0 if status == "ok" else 1,
        "term_signal": None, "started_utc": "2026-01-01T00:00:00+00:00", "wall_s": 0.1,
        "rusage": {"maxrss_kib": 1000, "user_s": 0, "sys_s": 0, "majflt": 0, "inblock": 0},
        "host": {"grade": "instrumented", "reason": None, "limit_bytes": None,
                 "cgroup": {"version": 1, "path": "/x", "limit_bytes": None, "peak_bytes": 1 << 20, "limit_events": 0,
                            "oom_events": 0, "oom_kills": 0, "swap_peak_bytes": None, "pressure_events": 0,
                            "notes": []}},
        "stderr_tail": [], "dropped_cache": ["m.gguf"],
    }
    (d / "harness.json").write_text(json.dumps(harness))
    return seal(d) if sealed else d


def seal(d: Path) -> Path:
    """Write the run directory's manifest.json over its files, last, as the harness does."""
    manifest.write(d)
    return d


# ---- tampering, for the tests that must catch it -----------------------------------------

def set_counter(run_dir, name: str, value) -> None:
    """Change one engine counter in run_dir/run.json (the manifest is left as it was)."""
    p = Path(run_dir) / "run.json"
    doc = json.loads(p.read_text())
    doc["counters"][name] = value
    p.write_text(json.dumps(doc))


def flip_byte(path: Path, offset: int = 9) -> None:
    """Flip the lowest bit of one byte: same size, other content."""
    raw = bytearray(Path(path).read_bytes())
    raw[offset] ^= 1
    Path(path).write_bytes(bytes(raw))
