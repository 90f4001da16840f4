"""The non-weight overhead O of the model process, measured, not guessed (DESIGN.md §6).

Calibration runs start the engine with everything set up but no weight byte touched
(`residctl scan --calibrate`) inside an unlimited cgroup; O is the highest cgroup peak
over the repetitions. Every arm's host limit is then r * T_repr + O. Without a cgroup the
process's own high-water RSS (getrusage) stands in, and the record says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import atomic


class CalibrationError(RuntimeError):
    pass


def calibrate(run_dirs, out) -> dict:
    samples = []
    for d in map(Path, run_dirs):
        h = json.loads((d / "harness.json").read_text())
        if h["status"] != "ok":
            raise CalibrationError(f"calibration run {d} did not complete: {h['status']}")
        cg = h["host"].get("cgroup") or {}
        if cg.get("peak_bytes") is not None:
            samples.append({"run_dir": str(d), "bytes": int(cg["peak_bytes"]), "method": "cgroup-peak"})
        else:
            samples.append({"run_dir": str(d), "bytes": int(h["rusage"]["maxrss_kib"]) * 1024, "method": "maxrss"})
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
