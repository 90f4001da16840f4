"""The resource predicate, written once: did a run stay inside its host limit?

`admissible(c)` (reference 004 §2.1's admission predicate; docs/design.md, "Admission") is
True when every term below holds, False when one fails, and None when it cannot be said:

- grade: the host grade is `hard` (the kernel holds the limit and swap is off:
  run/harness.py). Any other grade (soft, instrumented, unenforced) has no limit to stay
  inside, so the predicate is None whatever the counters say;
- headroom: the limit minus the cgroup's peak is positive (None: limit or peak unknown);
- limit_events: zero; v2 `memory.events` max, v1 `memory.failcnt` (None: not read);
- pressure_events: zero; v1 vmpressure reclaim passes inside the cgroup, which is how a
  v1 run pressing on its limit shows when failcnt stays 0. v2 has no such counter (its
  `memory.events` max counts that reclaim), nor has a v1 cgroup without
  memory.pressure_level, so a missing one counts as zero;
- oom_kills: zero (None: not read).

A term that is None makes the predicate None. The counters are what the harness read from
the run's cgroup at its end (run/cgroup.Counters); a gathered table records them beside
the predicate's value (column `admissible`), so a reader can redo it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The terms, in the order the docstring gives them, and the table columns they read.
TERMS = ("grade", "headroom", "limit_events", "pressure_events", "oom_kills")
COLUMNS = ("host_grade", "limit_bytes", "peak_bytes", "limit_events", "pressure_events", "oom_kills")


def _known(v):
    """A record's or a Parquet cell's value: None for null (pandas reads one as NaN)."""
    return None if v is None or v != v else v


@dataclass(frozen=True)
class HostCounters:
    """The predicate's inputs: the host grade, the limit, and the cgroup's counters."""

    grade: str | None
    limit_bytes: int | None
    peak_bytes: int | None
    limit_events: int | None
    pressure_events: int | None
    oom_kills: int | None

    @classmethod
    def of_row(cls, row) -> HostCounters:
        """From a gathered row, a Parquet record or a fact dict (host_grade, limit_bytes,
        peak_bytes, limit_events, pressure_events, oom_kills; an absent key is None)."""
        def num(k):
            v = _known(row.get(k))
            return None if v is None else int(v)
        return cls(_known(row.get("host_grade")), num("limit_bytes"), num("peak_bytes"), num("limit_events"),
                   num("pressure_events"), num("oom_kills"))

    @classmethod
    def of_harness(cls, host: dict) -> HostCounters:
        """From harness.json's `host` record (its grade, limit and cgroup counters)."""
        cg = host.get("cgroup") or {}
        return cls(host.get("grade"), host.get("limit_bytes"), cg.get("peak_bytes"), cg.get("limit_events"),
                   cg.get("pressure_events"), cg.get("oom_kills"))


def headroom_bytes(c: HostCounters) -> int | None:
    """The limit minus the peak (None when either is unknown)."""
    return c.limit_bytes - c.peak_bytes if c.limit_bytes is not None and c.peak_bytes is not None else None


def limit_events_total(c: HostCounters) -> int | None:
    """Limit events plus (v1) pressure events: None when neither counter was read."""
    events = [e for e in (c.limit_events, c.pressure_events) if e is not None]
    return sum(events) if events else None


def terms(c: HostCounters) -> dict[str, bool | None]:
    """Each term of the predicate on its own (the module docstring gives their meaning)."""
    room = headroom_bytes(c)
    return {"grade": c.grade == "hard",
            "headroom": None if room is None else room > 0,
            "limit_events": None if c.limit_events is None else c.limit_events == 0,
            "pressure_events": (c.pressure_events or 0) == 0,
            "oom_kills": None if c.oom_kills is None else c.oom_kills == 0}


def all_hold(values) -> bool | None:
    """True when every value is True; None when one is None; else False."""
    values = list(values)
    return None if any(v is None for v in values) else all(values)


def admissible(c: HostCounters) -> bool | None:
    """The run stayed inside its host limit (True), did not (False), or cannot say (None)."""
    t = terms(c)
    return all_hold(t.values()) if t["grade"] else None
