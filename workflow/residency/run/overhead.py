"""The non-weight overhead O of the model process, measured, not guessed (docs/design.md).

Calibration runs execute every arm inside an unlimited cgroup: the synthetic study's
`residctl scan --calibrate` sets everything up and touches no weight byte; the model
study's calibration is a whole generation at a budget that holds the model (r = 1), so
the decode's own memory (KV cache, compute buffers, logits, the trace) is in its peak.
What an arm holds on the weight side (the pager's windows, page-table reserve and the
most chunks it had resident; for llama.cpp's own mapping the whole model file) is
subtracted from its peak; O is the highest remainder over arms and repetitions.

The reserve R = O + max(margin x O, margin_min_bytes, spread_factor x spread) is what a
cell's host limit grants beside its weights: every arm's limit is r * T_repr + R, the same
for all arms. The margin (config harness.overhead_margin, overhead_margin_min_bytes,
overhead_spread_factor) is there because a run may need a few pages more than its
calibration saw (a page of the binary's text charged late, a larger transient buffer): a
limit at exactly the calibrated peak kills such a run. The spread is measured: the widest
range (max - min) of one arm's remainders over its repetitions (at least 3), so a machine
whose runs vary more gets the wider margin its own calibration shows. A run whose cgroup peaked
below the weight-side bytes it held is refused: its pages were charged elsewhere (arm A's model
pages read beside it by another job, 2026-12-06), and its remainder would widen the spread
past the model.
R is also the declared reserve R_policy of eq. 1 (reference 004 §2.1): the state a run needs
beside its weights, at least what the calibration measured. Without a cgroup the process's
own high-water RSS (getrusage) stands in, and the record says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from residency.core.arms import KERNEL_MMAP
from residency.core import atomic


class CalibrationError(RuntimeError):
    pass


def _prepaid(run: dict) -> int:
    """Weight-side bytes a calibration run held at most: the pager's windows, and once it
    filled chunks its page-table reserve and its most resident chunks; for llama.cpp's own
    mapping (generate, arm A) the whole model file, which it populates at load."""
    if run.get("subcommand") == "generate" and run.get("arm") == KERNEL_MMAP:
        return int(run["model"]["bytes"])
    budget = run.get("budget", {})
    held_chunks = int(run.get("counters", {}).get("max_resident_chunks") or 0)
    prepaid = int(budget.get("window_bytes") or 0)
    if held_chunks:
        chunk = int(run["region"]["chunk_size"])
        prepaid += int(budget.get("page_table_bytes") or 0)
        prepaid += (held_chunks + int(budget.get("reserve_chunks") or 0)) * chunk
    return prepaid


def reserve(overhead_bytes: int, margin: float, margin_min_bytes: int, spread_margin: int = 0) -> int:
    """R: the calibrated O and its margin (the largest of margin x O, margin_min_bytes and
    the spread's margin)."""
    return overhead_bytes + max(int(-(-overhead_bytes * margin // 1)), int(margin_min_bytes), int(spread_margin))


def spread(samples: list[dict]) -> int:
    """The widest range of one arm's remainders over its repetitions (0 with one each)."""
    by_arm: dict = {}
    for s in samples:
        by_arm.setdefault(s["arm"], []).append(s["bytes"])
    return max(max(v) - min(v) for v in by_arm.values())


def calibrate(run_dirs, out, margin: float = 0.0, margin_min_bytes: int = 0, spread_factor: float = 0.0) -> dict:
    samples = []
    for d in map(Path, run_dirs):
        h = json.loads((d / "harness.json").read_text())
        if h["status"] != "ok":
            raise CalibrationError(f"calibration run {d} did not complete: {h['status']}")
        cg = h["host"].get("cgroup") or {}
        run = json.loads((d / "run.json").read_text())
        prepaid = _prepaid(run)
        if cg.get("peak_bytes") is not None:
            peak, method = int(cg["peak_bytes"]), "cgroup-peak"
        else:
            peak, method = int(h["rusage"]["maxrss_kib"]) * 1024, "maxrss"
        if method == "cgroup-peak" and peak < prepaid:  # every byte a run holds is charged to its cgroup
            raise CalibrationError(
                f"calibration run {d} peaked at {peak} bytes (its cgroup), below the {prepaid} weight-side bytes it "
                "held: part of them was charged to another process (a page cache warmed beside the run); "
                "remove the directory and rerun it with no other job reading the model")
        samples.append({"run_dir": str(d), "arm": run.get("arm"), "peak_bytes": peak,
                        "prepaid_bytes": prepaid, "bytes": peak - prepaid, "method": method})
    if not samples:
        raise CalibrationError("no calibration runs given")
    methods = sorted({s["method"] for s in samples})
    o, width = max(s["bytes"] for s in samples), spread(samples)
    spread_margin = int(-(-width * spread_factor // 1))
    rec = {
        "overhead_bytes": o,
        "margin": margin,
        "margin_min_bytes": int(margin_min_bytes),
        "spread_bytes": width,
        "spread_factor": spread_factor,
        "spread_margin_bytes": spread_margin,
        "reserve_bytes": reserve(o, margin, margin_min_bytes, spread_margin),
        "method": "+".join(methods),
        "samples": samples,
    }
    atomic.write_json(out, rec)
    return rec
