"""Reclaim pressure on a cell's cgroup, and the kernel's reclaim counters (P3).

Reference 000, claim 3: without the pager's protection the kernel reclaims the pager's
pages to swap (the application's authority over residency leaks); with it the kernel enters
reclaim, finds nothing eligible, and the pager's own evictions are the only thing that
frees memory. A reclaim cell puts its cgroup under pressure below the pager's budget, with
swap available to it, and records what the kernel did:

  v2: memory.high = the pressure (throttle and reclaim, no OOM), memory.max = the cell's
      limit, memory.swap.max = max. Read: memory.events (high, max, oom_kill),
      memory.stat pgscan, pgsteal (bytes reclaimed = pgsteal pages), workingset refaults,
      memory.swap.peak.
  v1: v1 has no memory.high: its only limit, memory.limit_in_bytes, is set to the
      pressure, and memory.memsw.limit_in_bytes to unlimited (swap available). v1's
      memory.stat has no pgscan or pgsteal; read instead: workingset_refault_anon (pages
      the kernel took and the process faulted back), pgmajfault, pgpgout, memory.failcnt,
      vmpressure events (cgroup.Counters.pressure_events).

Both: a sampler reads memory.stat every `SAMPLE_S` while the cell runs and keeps the peaks
of the swap in use by the cgroup and of its unevictable (mlocked) bytes; those are gone from
memory.stat once the cell's processes have exited.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

SAMPLE_S = 0.05
# memory.stat keys recorded at the end (cumulative counters survive the processes' exit).
V2_STAT = ("pgscan", "pgsteal", "pgscan_direct", "pgscan_kswapd", "pgsteal_direct", "pgsteal_kswapd",
           "workingset_refault_anon", "workingset_refault_file", "pgmajfault", "pswpin", "pswpout")
V1_STAT = ("workingset_refault_anon", "workingset_refault_file", "pgmajfault", "pgpgin", "pgpgout")
V2_EVENTS = ("low", "high", "max", "oom", "oom_kill")


def _kv(path: Path) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().lstrip("-").isdigit():
            out[k] = int(v)
    return out


def _num(path: Path) -> int | None:
    try:
        v = path.read_text().strip()
    except OSError:
        return None
    return int(v) if v.lstrip("-").isdigit() else None


def configure(path: Path, version: int, high_bytes: int, limit_bytes: int | None, write) -> None:
    """Put the cgroup at `path` under reclaim pressure `high_bytes` with swap available
    (`write(file, value)` is the cgroup writer, which raises CgroupUnavailable)."""
    if version == 2:
        if limit_bytes is not None:
            write(path / "memory.max", str(limit_bytes))
        write(path / "memory.high", str(high_bytes))
        if (path / "memory.swap.max").exists():
            write(path / "memory.swap.max", "max")
    else:
        write(path / "memory.limit_in_bytes", str(high_bytes))
        if (path / "memory.memsw.limit_in_bytes").exists():
            write(path / "memory.memsw.limit_in_bytes", "-1")


@dataclass
class Peaks:
    swap_bytes: int = 0         # swap in use by the cgroup
    unevictable_bytes: int = 0  # mlocked (or otherwise unevictable) bytes charged to it
    samples: int = 0


class Sampler:
    """Samples the cgroup's memory.stat while the cell runs (a daemon thread)."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        stat = _kv(self.path / "memory.stat")
        swap = stat.get("swap") if self.version == 1 else _num(self.path / "memory.swap.current")
        self.peaks.swap_bytes = max(self.peaks.swap_bytes, swap or 0)
        self.peaks.unevictable_bytes = max(self.peaks.unevictable_bytes, stat.get("unevictable", 0))
        self.peaks.samples += 1

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(SAMPLE_S):
                return


@dataclass
class ReclaimCounters:
    """What the kernel did to a reclaim cell (None: the counter does not exist here)."""

    version: int
    high_bytes: int
    page_bytes: int
    events: dict[str, int | None] = field(default_factory=dict)  # v2 memory.events
    stat: dict[str, int | None] = field(default_factory=dict)    # memory.stat, the keys above
    failcnt: int | None = None                                    # v1 memory.failcnt
    swap_peak_bytes: int = 0
    unevictable_peak_bytes: int = 0
    samples: int = 0
    kernel_reclaimed_bytes: int | None = None  # v2: pgsteal pages; v1: not counted (None)
    lacks: list[str] = field(default_factory=list)  # what this cgroup version cannot show


def read(path: Path, version: int, high_bytes: int, page_bytes: int, peaks: Peaks) -> ReclaimCounters:
    stat = _kv(path / "memory.stat")
    c = ReclaimCounters(version=version, high_bytes=high_bytes, page_bytes=page_bytes,
                        swap_peak_bytes=peaks.swap_bytes, unevictable_peak_bytes=peaks.unevictable_bytes,
                        samples=peaks.samples)
    if version == 2:
        ev = _kv(path / "memory.events")
        c.events = {k: ev.get(k) for k in V2_EVENTS}
        c.stat = {k: stat.get(k) for k in V2_STAT}
        if c.stat["pgsteal"] is not None:
            c.kernel_reclaimed_bytes = c.stat["pgsteal"] * page_bytes
    else:
        c.stat = {k: stat.get(k) for k in V1_STAT}
        c.failcnt = _num(path / "memory.failcnt")
        c.lacks = ["memory.high (v1's only limit is hard: over it the kernel reclaims or OOM-kills, never throttles)",
                   "memory.events high", "memory.stat pgscan / pgsteal (pages scanned and reclaimed)"]
    return c


def as_record(c: ReclaimCounters) -> dict:
    return asdict(c)
