#!/usr/bin/env python3
"""What the machine did while `make bench` measured: results/bench/conditions.json.

On a shared machine the spread of every ratio depends on what else runs: other tenants take
CPU time from this guest (steal) and the virtual disk's latency moves with them (iowait).
`make bench` snapshots the CPU counters of /proc/stat at its start and its end, and the table
in docs/benchmarks.md opens with the shares of the run's CPU time, so a reader can tell a
quiet run from a contended one (bench/rows.py).

    bench/conditions.py start    # the first snapshot (and the commit measured)
    bench/conditions.py end      # the second: the run's wall time and CPU shares
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow"))

from residency.core import atomic  # noqa: E402

import rows  # noqa: E402  (the bench directory: where bench.json lives)

# /proc/stat's aggregate cpu line, in the kernel's order (guest time is already in user).
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


class ConditionsError(ValueError):
    pass


def path() -> Path:
    return rows.BENCH_JSON.with_name("conditions.json")


def cpu_counters(stat: str) -> dict[str, int]:
    """The aggregate `cpu` line of a /proc/stat text, as jiffies per field."""
    for line in stat.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:1 + len(FIELDS)]]
            values += [0] * (len(FIELDS) - len(values))  # old kernels: no steal column
            return dict(zip(FIELDS, values))
    raise ConditionsError("/proc/stat has no aggregate cpu line")


def shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Percent of the CPU time between two snapshots: busy (user, nice, system, irq,
    softirq), idle, iowait and steal; they add up to 100."""
    d = {f: after[f] - before[f] for f in FIELDS}
    total = sum(d.values())
    if total <= 0 or min(d.values()) < 0:
        raise ConditionsError("the CPU counters did not advance between the two snapshots")
    busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
    return {k: 100.0 * v / total for k, v in
            (("busy", busy), ("idle", d["idle"]), ("iowait", d["iowait"]), ("steal", d["steal"]))}


def _commit() -> str | None:
    p = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return p.stdout.strip() or None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def start(stat: str) -> dict:
    doc = {"started": _now(), "t0": time.monotonic(), "commit": _commit(), "stat": cpu_counters(stat)}
    atomic.write_json(path(), doc)
    return doc


def end(stat: str) -> dict:
    if not path().exists():
        raise ConditionsError(f"{path()}: no start snapshot (run `bench/conditions.py start` first)")
    begun = json.loads(path().read_text())
    doc = {"started": begun["started"], "ended": _now(), "seconds": time.monotonic() - begun["t0"],
           "commit": begun["commit"], "cpu_percent": shares(begun["stat"], cpu_counters(stat))}
    atomic.write_json(path(), doc)
    return doc


def line(doc: dict) -> str:
    """The sentence the table opens with; empty for a run that has not ended."""
    if "cpu_percent" not in doc:
        return ""
    c, s = doc["cpu_percent"], round(doc["seconds"])
    return (f"Run of {doc['started']} to {doc['ended'][11:]} ({s // 60} min {s % 60} s) at "
            f"{doc['commit'] or 'an unknown commit'}; the CPUs' time over the run: busy {c['busy']:.0f} %, idle "
            f"{c['idle']:.0f} %, iowait {c['iowait']:.0f} %, steal {c['steal']:.1f} % (time other tenants of the "
            "host took from this machine).\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("start", "end"))
    args = ap.parse_args(argv)
    try:
        stat = Path("/proc/stat").read_text()
        doc = start(stat) if args.cmd == "start" else end(stat)
    except (ConditionsError, OSError, json.JSONDecodeError, KeyError) as e:
        print(f"bench conditions: error: {e}", file=sys.stderr)
        return 2
    if args.cmd == "end":
        sys.stdout.write(line(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
