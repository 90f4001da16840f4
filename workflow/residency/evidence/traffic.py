"""U_sched and Q_run of one execution (reference 004 §2.1): what the scheduler requested and
how many bytes moved, kept apart from the semantic demand (demand.py), which they never
stand in for.

U_sched: the deduplicated union of the file extents the pager requested from its source,
i.e. every chunk the run filled (trace.bin demand and prefetch fills), each as its
[chunk * chunk_size, min(+chunk_size, file size)) extent; `requests` counts the fills, so
`requests - chunks` are rereads. Q_run: the cumulative traffic, logical (extent bytes the
source was asked for) and aligned physical (the spans it read, padding included), from
run.json's source ledger, with the kernel's own read count beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from residency.core import trace as trace_mod
from residency.evidence.extents import Interval, union


def scheduled(run_dir: str | Path, model_sha256: str) -> dict:
    run_dir = Path(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    tr = trace_mod.read(run_dir / "trace.bin")
    fills = tr.records[np.isin(tr.records["kind"], [trace_mod.FILL_DEMAND, trace_mod.FILL_PREFETCH])]
    size, cs = int(run["region"]["bytes"]), tr.chunk_size
    chunks = sorted(set(fills["chunk"].astype(int).tolist()))
    u = union([Interval(model_sha256, c * cs, min(cs, size - c * cs), f"chunk {c}") for c in chunks])
    return {"u_sched_bytes": u.bytes, "union_sha256": u.sha256, "chunks": len(chunks), "requests": int(len(fills)),
            "rereads": int(len(fills)) - len(chunks), "chunk_size": cs,
            "rule": "the union of the file extents of every chunk the pager filled (demand and prefetch)"}


def cumulative(run_dir: str | Path) -> dict:
    run = json.loads((Path(run_dir) / "run.json").read_text())
    src, c = run.get("source_stats") or {}, run.get("counters") or {}
    return {"logical_bytes": src.get("logical_bytes"), "physical_bytes": src.get("physical_bytes"),
            "padding_bytes": src.get("padding_bytes"), "source_reads": src.get("submissions"),
            "kernel_read_bytes": c.get("physical_bytes_read"),
            "rule": "logical: extent bytes the source was asked for; physical: the aligned spans it read "
                    "(rereads and padding included); kernel: /proc/self/io read_bytes over load and generation"}
