"""Which jobs the cluster test sends through SLURM (tests/test_cluster.py).

The integration lane runs the whole tiny pipeline locally; the cluster lane shows what only a
cluster shows (each job that runs on a node is a SLURM job, run cells alone on the node, their
cgroups made inside the job, the same outputs as locally) on one job of every rule that goes to
SLURM, in a copy of that local campaign:

- a *leaf* job (nothing that runs on a node depends on it, even through files-only steps) is
  removed from the copy and forced again (--forcerun: a missing output alone does not make
  Snakemake rerun a job whose dependents are up to date) by `snakemake figures` through the
  SLURM profile, with everything files-only after it (gathers, tables, claims);
- a rule with no leaf job (calibrations, regions, models: every cell depends on them) has one
  job removed and forced again, as its own target, after that.

So every such rule runs once on SLURM, and nothing is run twice that only repeats the local
run. The builds (the engine, llama.cpp) are left out: the test's campaign reuses the build
`make test` made, as the local run does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Node rules the test does not rerun: builds that take minutes and that the local campaign did
# not run either (both use the build `make test` made).
BUILDS = frozenset({"engine", "llama_build"})
# Where a rule has several jobs, one with the informed arm is taken first: its outputs are
# deterministic, so the comparison with the local run is byte for byte.
PREFERRED = "pager-declared"


@dataclass(frozen=True)
class Job:
    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


_HEADER = re.compile(r"^(?:local)?rule (\w+):$")
_FIELD = re.compile(r"^\s+(input|output): (.*)$")


def parse_dry_run(text: str) -> list[Job]:
    """The jobs of `snakemake -n` output (each job's `rule X:` block)."""
    jobs, cur = [], None
    for line in text.splitlines():
        if m := _HEADER.match(line):
            cur = {"rule": m[1], "input": (), "output": ()}
            jobs.append(cur)
        elif cur is not None and (m := _FIELD.match(line)):
            cur[m[1]] = tuple(p.strip() for p in m[2].split(",") if p.strip())
    return [Job(j["rule"], j["input"], j["output"]) for j in jobs]


def _descendants(jobs: list[Job]) -> list[set[int]]:
    """For each job, every job that depends on it, directly or through others."""
    producer = {o: i for i, j in enumerate(jobs) for o in j.outputs}
    children: list[set[int]] = [set() for _ in jobs]
    for i, j in enumerate(jobs):
        for p in j.inputs:
            if p in producer:
                children[producer[p]].add(i)
    below: list[set[int] | None] = [None] * len(jobs)

    def walk(i: int) -> set[int]:
        if below[i] is None:
            below[i] = set()
            for c in children[i]:
                below[i] |= {c} | walk(c)
        return below[i]

    return [walk(i) for i in range(len(jobs))]


def _pick(candidates: list[Job]) -> Job:
    return min(candidates, key=lambda j: (PREFERRED not in j.outputs[0], j.outputs[0]))


@dataclass(frozen=True)
class Plan:
    rerun: tuple[Job, ...]   # leaves: removed from the copy, forced again by `snakemake figures`
    forced: tuple[Job, ...]  # one job of each rule without a leaf, forced as its own target

    def jobs(self) -> tuple[Job, ...]:
        return self.rerun + self.forced


def plan(jobs: list[Job], slurm_rules: set[str]) -> Plan:
    """One job per rule of `slurm_rules` (the rules that are not localrules; builds excepted)
    among `jobs`: a leaf where the rule has one."""
    below = _descendants(jobs)
    node = [j.rule in slurm_rules and j.rule not in BUILDS for j in jobs]
    rerun, forced = [], []
    for rule in sorted({j.rule for j, n in zip(jobs, node) if n}):
        mine = [i for i, j in enumerate(jobs) if j.rule == rule]
        leaves = [jobs[i] for i in mine if not any(node[d] for d in below[i])]
        if leaves:
            rerun.append(_pick(leaves))
        else:
            forced.append(_pick([jobs[i] for i in mine]))
    return Plan(tuple(rerun), tuple(forced))


def slurm_rules() -> set[str]:
    """The rules the Snakefile does not make localrules: its NODE_RULES and the studies' node
    and run rules (the same union the Snakefile takes)."""
    from residency.campaigns import studies
    from test_rule_placement import snakefile_node_rules
    return snakefile_node_rules() | set(studies.node_rules()) | set(studies.run_rules())
