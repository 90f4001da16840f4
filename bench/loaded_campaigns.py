#!/usr/bin/env python3
"""The tiny pipeline (the tests' campaign: tests/conftest.py tiny_config) run N times back to
back beside a CPU and memory load, to show that no cell dies at its own calibrated limit by
chance and that the verdicts do not move with the machine's load (issue 23, item 1).

Each iteration is a fresh working directory and `snakemake figures` from nothing (models,
calibration, every cell, gather, analysis, claims). The load runs for the whole loop:
--cpu-load busy processes and one process holding --mem-load-gib GiB of touched anonymous
memory (re-touched continuously, so it stays resident and competes for the page cache).

Per iteration it prints: the pipeline's status and wall time, the runs whose harness record
says oom-killed (or any status but ok), the runs whose cgroup peak came within one page of
their limit, and every claim's verdict. At the end it compares the verdicts of all
iterations. Exit status 1 when any run at its calibrated limit was OOM-killed (a reclaim
cell's pressure limit is below its budget by design: its kills are reported apart), any
other run ended other than ok by chance (a fatal fault cell fails by design), any
pipeline failed, or the verdict of
a claim whose assertions are on counts and exact comparisons (the golden tables'
DETERMINISTIC_CLAIMS, P1 among them) differed between iterations; a claim that compares
walls on this 4-token campaign (C5, C6, ...) may move with the load, and is reported.

Usage: bench/loaded_campaigns.py [--iterations 10] [--cpu-load 2] [--mem-load-gib 8]
                                 [--work DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "workflow"))

from conftest import pipeline_env, snakemake, tiny_workdir  # noqa: E402
from golden_tables import DETERMINISTIC_CLAIMS  # noqa: E402  (verdicts on counts and exact comparisons)

PAGE = 4096


def _burn() -> None:
    while True:
        pass


def _hold(gib: float) -> None:
    """Hold `gib` GiB of anonymous memory and keep touching every page of it."""
    block = bytearray(int(gib * (1 << 30)))
    while True:
        for i in range(0, len(block), PAGE):
            block[i] = (block[i] + 1) & 0xFF


def start_load(cpu: int, mem_gib: float) -> list[mp.Process]:
    procs = [mp.Process(target=_burn, daemon=True) for _ in range(cpu)]
    if mem_gib > 0:
        procs.append(mp.Process(target=_hold, args=(mem_gib,), daemon=True))
    for p in procs:
        p.start()
    return procs


def stop_load(procs: list[mp.Process]) -> None:
    for p in procs:
        p.kill()
        p.join()


def run_records(work: Path) -> list[tuple[str, dict]]:
    """Every harness record the pipeline left, with its run directory relative to work."""
    found = []
    for h in sorted((work / "results" / "runs").rglob("harness.json")):
        found.append((str(h.parent.relative_to(work)), json.loads(h.read_text())))
    return found


def pressure_cell(rec: dict) -> bool:
    """A reclaim cell (P3): its limit is a pressure deliberately below the pager's budget, not
    the calibrated r x T_repr + R; on cgroup v1 its protected arm (memory locked) is OOM-killed
    by design, and P3's record says so. Its kills are reported apart, never counted as chance."""
    return (rec.get("host") or {}).get("reclaim") is not None


def expected_end(rec: dict) -> bool:
    """A run whose end other than ok is its design: a pressure cell's OOM kill, or a fatal
    fault cell (C3: the run must fail closed). Any other run that is not ok is a chance failure."""
    return pressure_cell(rec) or (rec.get("meta") or {}).get("class") == "fatal"


def near_limit(rec: dict) -> bool:
    host = rec.get("host") or {}
    limit, cg = host.get("limit_bytes"), host.get("cgroup") or {}
    peak = cg.get("peak_bytes")
    return limit is not None and peak is not None and peak > limit - PAGE


def verdicts(work: Path) -> dict[str, str]:
    out = {}
    for c in sorted((work / "claims").glob("*.json")):
        if c.name == "ledger.json":
            continue
        out[c.stem] = json.loads(c.read_text()).get("verdict")
    return out


def iteration(work: Path, env: dict) -> dict:
    tiny_workdir(work)
    t0 = time.monotonic()
    proc = snakemake(work, "figures", "--cores", "2", "--resources", "storage_exclusive=1", env=env, timeout=3600)
    wall = time.monotonic() - t0
    load1, load5, _ = os.getloadavg()
    recs = run_records(work)
    bad = [(d, r.get("status")) for d, r in recs if r.get("status") not in ("ok", "unavailable")]
    by_dir = dict(recs)
    pressure = {d for d, r in recs if pressure_cell(r)}
    return {
        "snakemake_rc": proc.returncode,
        "snakemake_tail": proc.stderr.splitlines()[-3:] if proc.returncode else [],
        "wall_s": round(wall, 1),
        "loadavg_1_5": [round(load1, 2), round(load5, 2)],
        "runs": len(recs),
        "oom_killed": [d for d, s in bad if s == "oom-killed" and d not in pressure],
        "oom_killed_pressure_cells": [d for d, s in bad if s == "oom-killed" and d in pressure],
        "not_ok": bad,
        "chance_failures": [(d, s) for d, s in bad if not expected_end(by_dir[d])],
        "near_limit": [d for d, r in recs if near_limit(r)],
        "verdicts": verdicts(work),
    }


def _statuses(not_ok: list[tuple[str, str]]) -> str:
    """'none', or each status with its count and its first run directory."""
    by: dict[str, list[str]] = {}
    for d, s in not_ok:
        by.setdefault(s, []).append(d)
    return ", ".join(f"{s} x{len(ds)} (e.g. {ds[0]})" for s, ds in sorted(by.items())) or "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--cpu-load", type=int, default=2, help="busy processes beside the pipeline")
    ap.add_argument("--mem-load-gib", type=float, default=8.0, help="GiB of touched memory held beside it")
    ap.add_argument("--work", type=Path, default=Path("/tmp/loaded-campaigns"))
    ap.add_argument("--json", type=Path, help="write every iteration's results here")
    args = ap.parse_args()

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    env = pipeline_env()
    load = start_load(args.cpu_load, args.mem_load_gib)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results = []
    try:
        for i in range(args.iterations):
            work = args.work / f"it{i}"
            work.mkdir()
            r = iteration(work, env)
            results.append(r)
            print(f"iteration {i}: snakemake rc {r['snakemake_rc']} in {r['wall_s']} s (load average at its end, 1 and 5 min: "
                  f"{r['loadavg_1_5']}); {r['runs']} runs; "
                  f"oom-killed at a calibrated limit {len(r['oom_killed'])} {r['oom_killed']}; "
                  f"oom-killed pressure cells (by design) {r['oom_killed_pressure_cells']}; not ok {_statuses(r['not_ok'])}; "
                  f"chance failures (not ok, not by design) {_statuses(r['chance_failures'])}; "
                  f"within a page of the limit {len(r['near_limit'])} {r['near_limit']}", flush=True)
            print(f"  verdicts: {' '.join(f'{k}={v}' for k, v in r['verdicts'].items())}", flush=True)
            for line in r["snakemake_tail"]:
                print(f"  snakemake: {line}", flush=True)
            if r["snakemake_rc"] == 0 and i < args.iterations - 1:  # keep disk use flat; the last stays whole
                shutil.rmtree(work / "results" / "runs", ignore_errors=True)
    finally:
        stop_load(load)

    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    first = results[0]["verdicts"] if results else {}
    moved = sorted({k for r in results for k in set(first) | set(r["verdicts"])
                    if r["verdicts"].get(k) != first.get(k)})
    moved_exact = [k for k in moved if k in DETERMINISTIC_CLAIMS]
    ooms = sum(len(r["oom_killed"]) for r in results)
    chance = sum(len(r["chance_failures"]) for r in results)
    failed = sum(1 for r in results if r["snakemake_rc"] != 0)
    print(f"summary: {len(results)} iterations, load {args.cpu_load} CPU + {args.mem_load_gib} GiB; "
          f"pipelines failed {failed}; OOM kills at a calibrated limit {ooms}; chance failures {chance}; "
          f"OOM kills of pressure cells (by design) {sum(len(r['oom_killed_pressure_cells']) for r in results)}; "
          f"runs within a page of their limit {sum(len(r['near_limit']) for r in results)}; "
          f"verdicts that differed between iterations: on counts and exact comparisons "
          f"({', '.join(sorted(DETERMINISTIC_CLAIMS))}): {moved_exact or 'none'}; "
          f"on timings: {[k for k in moved if k not in DETERMINISTIC_CLAIMS] or 'none'}")
    return 1 if ooms or chance or failed or moved_exact else 0


if __name__ == "__main__":
    sys.exit(main())
