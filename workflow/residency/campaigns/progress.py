"""Progress of a campaign: which study, how many of its run cells are done out of how many,
and an estimate of the time left.

Snakemake's own "N of M steps" counts every job alike (a gather as much as a 25 s run), so
the pipeline watches the run cells themselves: a cell is done when its harness.json exists.
The estimate is measured, not guessed: each study's remaining cells times the mean time a
cell of that study took in this session (its engine wall from harness.json plus the
per-cell cost of Snakemake and the harness, measured the same way). A study with no cell
done yet in this session is estimated with the mean of every cell done so far, and the
line says the estimate is rough; before any cell is done there is none.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from residency.campaigns import cells, studies


def study_runs(config: dict) -> dict[str, list[str]]:
    """Every run cell's harness.json, per registered study, calibration runs included (a
    per-model study's further models each under "<study> <model>", after every study)."""
    runs = {s.name: s.runs(config) for s in studies.STUDIES}
    return runs | {f"{s.name} {m}": s.runs(cells.model_view(config, m))
                   for s in studies.STUDIES if s.per_model for m in cells.sweep_names(config)}


def requested(studies: dict[str, list[str]], outputs) -> dict[str, list[str]]:
    """The cells the requested targets' DAG will run (`outputs`: the outputs of its jobs that
    need to run), per study; a study with none is left out, so `snakemake claims/P7.json`
    counts and estimates only the cells P7 needs."""
    outputs = {str(o) for o in outputs}
    kept = {study: [r for r in runs if r in outputs] for study, runs in studies.items()}
    return {study: runs for study, runs in kept.items() if runs}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _wall_s(path: Path) -> float:
    try:
        return float(json.loads(path.read_text()).get("wall_s") or 0.0)
    except (OSError, ValueError):
        return 0.0


@dataclass
class Tracker:
    """Counts done cells per study; times the ones finished since it started."""

    studies: dict[str, list[str]]
    root: Path = Path(".")
    started: float = field(default_factory=time.monotonic)
    seen: dict[str, set] = field(default_factory=dict)  # study -> cells done before we started
    fresh: dict[str, list[float]] = field(default_factory=dict)  # study -> engine walls of cells done since
    current: str | None = None
    # True: every listed cell is to run now (requested()); one whose file exists at the start
    # (a stale output) counts as done only once the run has written it anew.
    to_run: bool = False
    before: dict[str, tuple | None] = field(default_factory=dict)

    def __post_init__(self):
        for study, runs in self.studies.items():
            if self.to_run:
                self.before.update({r: _stamp(self.root / r) for r in runs})
            self.seen[study] = set() if self.to_run else {r for r in runs if (self.root / r).exists()}
            self.fresh[study] = []

    def poll(self) -> bool:
        """Look for newly done cells; True when something changed."""
        changed = False
        for study, runs in self.studies.items():
            for r in runs:
                stamp = _stamp(self.root / r)
                if r not in self.seen[study] and stamp is not None and stamp != self.before.get(r):
                    self.seen[study].add(r)
                    self.fresh[study].append(_wall_s(self.root / r))
                    self.current, changed = study, True
        return changed

    def overhead_s(self, now: float) -> float:
        """Mean per-cell time outside the engine: elapsed minus engine walls, per fresh cell."""
        n = sum(len(w) for w in self.fresh.values())
        walls = sum(sum(w) for w in self.fresh.values())
        return max(0.0, (now - self.started - walls) / n) if n else 0.0

    def remaining_s(self, now: float) -> tuple[float | None, bool]:
        """(seconds left, rough): None before any cell is timed; rough while an unfinished
        study has no timed cell of its own (it gets the mean of all timed cells)."""
        timed = [w for walls in self.fresh.values() for w in walls]
        if not timed:
            return None, True
        left, over, rough = 0.0, self.overhead_s(now), False
        for study, runs in self.studies.items():
            todo = len(runs) - len(self.seen[study])
            if todo == 0:
                continue
            walls = self.fresh[study] or timed
            rough |= not self.fresh[study]
            left += todo * (sum(walls) / len(walls) + over)
        return left, rough

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        parts = [f"{s} {len(self.seen[s])}/{len(r)}" for s, r in self.studies.items() if r]
        left, rough = self.remaining_s(now)
        eta = ("no estimate before a cell is done" if left is None else
               f"about {_minutes(left)} left{' (rough until every study has a cell done)' if rough else ''}")
        now_in = f"; now {self.current}" if self.current else ""
        return f"progress: cells done: {', '.join(parts)}{now_in}; {eta}"


def summary(studies: dict[str, list[str]], root: Path = Path(".")) -> list[str]:
    """Where a campaign's time went (from the cells' harness.json): per study its cells and
    their engine time; overall, the span from the first cell's start to the last cell's end
    and the part of it outside the engine (Snakemake, the harness, the steps between cells).
    Snakemake interleaves the studies, so a study has no span of its own."""
    import datetime as dt

    lines, spans, total = [], [], 0.0
    for study, runs in studies.items():
        walls = []
        for r in runs:
            try:
                h = json.loads((root / r).read_text())
                t0 = dt.datetime.fromisoformat(h["started_utc"]).timestamp()
            except (OSError, ValueError, KeyError, TypeError):
                continue
            walls.append(float(h.get("wall_s") or 0.0))
            spans += [t0, t0 + walls[-1]]
        if walls:
            total += sum(walls)
            lines.append(f"time: {study}: {len(walls)} cells, {_minutes(sum(walls))} in the engine")
    if spans:
        span = max(spans) - min(spans)
        lines.append(f"time: all cells: {_minutes(span)} from the first cell's start to the last one's end, "
                     f"{_minutes(max(0.0, span - total))} of it outside the engine")
    return lines


def _minutes(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def watch(studies: dict[str, list[str]], interval_s: float = 5.0, stream=sys.stderr,
          to_run: bool = False) -> threading.Thread:
    """A daemon thread printing the progress line whenever a cell finishes (at most every
    interval_s): started by the Snakefile's onstart, so `make figures` and a plain
    `snakemake` both show it, and silent in a run that finishes no cell (a build); it dies
    with Snakemake."""
    tracker = Tracker(studies, to_run=to_run)

    def loop():
        while True:
            time.sleep(interval_s)
            if tracker.poll():
                print(tracker.line(), file=stream, flush=True)

    t = threading.Thread(target=loop, name="residency-progress", daemon=True)
    t.start()
    return t
