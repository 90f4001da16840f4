#!/usr/bin/env python3
"""The rows of `make bench`: results/bench/bench.json, and the table generated from it.

Every benchmark that has a target writes its row here (`add`), each ratio measured side by
side in one run: a list of objects with `name`, `ratio`, `pairs` (each pair's ratio, in run
order), `target`, `bound` ("at least" or "at most"), `met` (true, false, or null when the
row is not comparable: then `why` says what made it unfair, and it is never printed as met)
and `note`. A row of the same name replaces the earlier one; the file is rewritten
atomically. `make bench` starts from an empty file, so it holds one run's rows.

    bench/rows.py table                   # print the Markdown table of the rows
    bench/rows.py table --update FILE     # rewrite FILE's table between its bench markers, after the
                                          # run's conditions (bench/conditions.py) when they were taken
    bench/rows.py add NAME RATIO TARGET BOUND [--pairs X ...] [--why TEXT] [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow"))

from residency.core import atomic  # noqa: E402

# Relative to the working directory (make bench runs in the checkout); RESIDENCY_BENCH_JSON
# names another file.
BENCH_JSON = Path(os.environ.get("RESIDENCY_BENCH_JSON", "results/bench/bench.json"))
BOUNDS = ("at least", "at most")
BEGIN, END = "<!-- bench table: begin (bench/rows.py) -->", "<!-- bench table: end -->"


class BenchRowError(ValueError):
    pass


def read(path: Path | None = None) -> list[dict]:
    path = path or BENCH_JSON
    if not path.exists():
        return []
    rows = json.loads(path.read_text())
    if not isinstance(rows, list):
        raise BenchRowError(f"{path}: not a list of rows")
    return rows


def row(name: str, ratio: float | None, pairs: list[float], target: float, bound: str,
        why: str = "", note: str = "") -> dict:
    """One row; met is null when `why` says the comparison is not fair or there is no ratio."""
    if bound not in BOUNDS:
        raise BenchRowError(f"bound must be one of {BOUNDS}, not {bound!r}")
    if ratio is not None and not math.isfinite(ratio):
        raise BenchRowError(f"{name}: ratio {ratio!r} is not a number")
    comparable = not why and ratio is not None
    met = None
    if comparable:
        met = ratio >= target if bound == "at least" else ratio <= target
    return {"name": name, "ratio": ratio, "pairs": [float(p) for p in pairs], "target": target, "bound": bound,
            "met": met, "why": why, "note": note}


def add(name: str, ratio: float | None, pairs: list[float], target: float, bound: str, why: str = "",
        note: str = "", path: Path | None = None) -> dict:
    path = path or BENCH_JSON
    new = row(name, ratio, pairs, target, bound, why, note)
    rows = [r for r in read(path) if r["name"] != name] + [new]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, rows)
    print(f"bench row: {line(new)}")
    return new


def verdict(r: dict) -> str:
    if r["met"] is None:
        return f"not comparable: {r['why']}" if r["why"] else "no ratio"
    return "met" if r["met"] else "NOT met"


def line(r: dict) -> str:
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
    pairs = f" (pairs {', '.join(f'{p:.3f}' for p in r['pairs'])})" if r["pairs"] else ""
    return f"{r['name']}: {ratio}{pairs}; target {r['bound']} {r['target']:g}: {verdict(r)}"


def table(rows: list[dict]) -> str:
    out = ["| benchmark | ratio | pairs | target | met |", "|---|---|---|---|---|"]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        note = f" ({r['note']})" if r["note"] else ""
        out.append(f"| {r['name']}{note} | {ratio} | {', '.join(f'{p:.3f}' for p in r['pairs'])} | "
                   f"{r['bound']} {r['target']:g} | {verdict(r)} |")
    return "\n".join(out) + "\n"


def update(doc: Path, rows: list[dict], lead: str = "") -> None:
    """Rewrite the table between doc's markers; `lead` (a line) opens it."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise BenchRowError(f"{doc}: no bench table markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    lead = f"{lead}\n" if lead else ""
    atomic.write_text(doc, f"{head}{BEGIN}\n{lead}{table(rows)}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("--update", type=Path)
    a = sub.add_parser("add")
    a.add_argument("name")
    a.add_argument("ratio", type=float)
    a.add_argument("target", type=float)
    a.add_argument("bound", choices=BOUNDS)
    a.add_argument("--pairs", type=float, nargs="*", default=[])
    a.add_argument("--why", default="")
    a.add_argument("--note", default="")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "add":
            add(args.name, args.ratio, args.pairs, args.target, args.bound, args.why, args.note)
            return 0
        rows = read()
        if args.update:
            import conditions  # here, not above: conditions imports this module

            cond = conditions.path()
            update(args.update, rows, conditions.line(json.loads(cond.read_text())) if cond.exists() else "")
        else:
            sys.stdout.write(table(rows))
        return 0
    except (BenchRowError, json.JSONDecodeError, OSError) as e:
        print(f"bench rows: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
