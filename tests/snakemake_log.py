"""Which jobs of a Snakemake run ran beside which, read from the run's own log
(.snakemake/log/*.snakemake.log): each job's rule, inputs and resources from its block, and
its interval as the positions of its start block and its "Finished jobid" line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_START = re.compile(r"^(?:local)?rule (\w+):$")
_FIELD = re.compile(r"^    (\w+): (.*)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+)")


@dataclass
class Job:
    jobid: int
    rule: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    start: int = 0
    end: int | None = None  # None: the log never says it finished

    def overlaps(self, other: "Job") -> bool:
        end, other_end = self.end or 1 << 62, other.end or 1 << 62
        return self.start < other_end and other.start < end


def _fields(lines: list[str], i: int) -> tuple[dict[str, str], int]:
    out = {}
    while i < len(lines) and (m := _FIELD.match(lines[i])):
        out[m.group(1)] = m.group(2)
        i += 1
    return out, i


def _files(fields: dict[str, str], key: str) -> list[str]:
    return [p for p in fields.get(key, "").split(", ") if p]


def jobs(log: Path) -> list[Job]:
    """Every job the log started, with its interval in log lines."""
    lines = log.read_text().splitlines()
    found: dict[int, Job] = {}
    i = 0
    while i < len(lines):
        if m := _START.match(lines[i]):
            f, nxt = _fields(lines, i + 1)
            if "jobid" in f:
                res = dict(kv.split("=", 1) for kv in f.get("resources", "").split(", ") if "=" in kv)
                found[int(f["jobid"])] = Job(int(f["jobid"]), m.group(1), _files(f, "input"), _files(f, "output"), res, i)
            i = nxt
            continue
        if (m := _FINISHED.match(lines[i])) and int(m.group(1)) in found:
            found[int(m.group(1))].end = i
        i += 1
    return sorted(found.values(), key=lambda j: j.start)


def campaign_log(work: Path) -> Path:
    """The first (the campaign's own) Snakemake log of a work directory."""
    logs = sorted((work / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        raise FileNotFoundError(f"no Snakemake log under {work}/.snakemake/log")
    return logs[0]
