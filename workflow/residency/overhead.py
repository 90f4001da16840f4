"""The non-weight overhead O of the model process, measured, not guessed (DESIGN.md §6).

Calibration runs start the engine of every arm with everything set up but no weight byte
touched (`residctl scan --calibrate`) inside an unlimited cgroup. What an arm pays out of
its weight budget (the pager's window) is subtracted from its peak; O is the highest
remainder over arms and repetitions. Every arm's host limit is then r * T_repr + O, the
same for all arms. Without a cgroup the process's own high-water RSS (getrusage) stands
in, and the record says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import atomic


class CalibrationError(RuntimeError):
    pass


def _prepaid(run: dict) -> int:
    """Weight-side bytes a calibration run holds: the pager's window; for llama.cpp's own
    mapping (generate, arm A) the whole model file, which it populates at load."""
    if run.get("subcommand") == "generate" and run.get("arm") == "kernel-mmap":
        return int(run["model"]["bytes"])
    return int(run.get("budget", {}).get("window_bytes") or 0)


def calibrate(run_dirs, out) -> dict:
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
        samples.append({"run_dir": str(d), "arm": run.get("arm"), "peak_bytes": peak,
                        "prepaid_bytes": prepaid, "bytes": peak - prepaid, "method": method})
    if not samples:
        raise CalibrationError("no calibration runs given")
    methods = sorted({s["method"] for s in samples})
    rec = {
        "overhead_bytes": max(s["bytes"] for s in samples),
        "method": "+".join(methods),
        "samples": samples,
    }
    atomic.write_json(out, rec)
    return rec
