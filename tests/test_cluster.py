"""The SLURM path on a real single-host SLURM cluster (workflow/scripts/cluster.sh: munged,
MariaDB, slurmdbd, slurmctld, slurmd), started and stopped here: one job of every rule that
goes to SLURM, run through the repository's SLURM profile in a copy of the tiny pipeline run
locally (the `campaign` fixture), and compared with that local run (tests/cluster_plan.py says
which jobs and why: the integration lane already runs the whole pipeline locally).

Run with `make test-cluster` (pytest -m cluster); `make test` leaves it out."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import cluster_plan
from cluster_timing import node_time
from conftest import ROOT, pipeline_env, snakemake
from test_rule_placement import run_cell_rules

# never in the fast lane (-m "not integration"); its fixture, a local campaign and the SLURM
# jobs, took up to 45 min under load when it ran the whole pipeline (2026-12-05), above the
# default per-test timeout
pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.timeout(4800)]

CLUSTER_SH = ROOT / "workflow" / "scripts" / "cluster.sh"
PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
# Run cells: the rules that run `residency run` (one definition, shared with the placement test).
RUN_RULES = run_cell_rules()


def _cluster(cmd: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER_SH), cmd], env=env, capture_output=True, text=True, timeout=600)


def _daemons_of(state: Path) -> list[str]:
    """Command lines of live processes that name the cluster's state directory."""
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(state) in cmd and "pytest" not in cmd:
            found.append(f"{p.name}: {cmd.strip()}")
    return found


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A fresh cluster for this module; stopped afterwards, leaving nothing running."""
    if os.geteuid() != 0:
        pytest.skip("[root] the single-host SLURM test runs its daemons as root (and makes cgroups as root)")
    state = tmp_path_factory.mktemp("slurm-state")
    env = dict(os.environ, RESID_CLUSTER_DIR=str(state), RESID_CLUSTER_PORT_BASE="26800",
               SLURM_CONF=str(state / "etc" / "slurm.conf"))
    started = _cluster("start", env)
    try:
        assert started.returncode == 0, started.stderr
        yield env
    finally:
        stopped = _cluster("stop", env)
        left = _daemons_of(state)
        assert stopped.returncode == 0 and not left, (stopped.stderr, left)


def _site_profile(work: Path) -> Path:
    """The repository's SLURM profile with this cluster's account and partition added, as the
    README tells a user to do; this node has 2 CPUs, so jobs that are not run cells ask for one
    (run cells take the whole node with --exclusive anyway)."""
    prof = yaml.safe_load(PROFILE.read_text())
    prof["default-resources"] = [r for r in prof["default-resources"] if not r.startswith("cpus_per_task")] + [
        "cpus_per_task=1", "slurm_account=residency", "slurm_partition=main"]
    prof["latency-wait"] = 5
    out = work / "profile"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(prof))
    return out


def _seed(local: Path, work: Path) -> None:
    """`work` becomes a copy of the local campaign: its files with their times, and Snakemake's
    metadata of them (so nothing is out of date), without the local run's logs and locks."""
    def skip(folder: str, names: list[str]) -> set[str]:
        return {"locks", "log", "incomplete"} & set(names) if Path(folder).name == ".snakemake" else set()
    shutil.copytree(local, work, symlinks=True, dirs_exist_ok=True, ignore=skip)


def _remove_outputs(work: Path, jobs) -> list[str]:
    """The jobs' outputs (a run cell's whole run directory), so what SLURM writes is new."""
    outs = [o for j in jobs for o in j.outputs]
    for o in outs:
        f = work / o
        if f.name == "harness.json":
            shutil.rmtree(f.parent)
        else:
            f.unlink(missing_ok=True)
    return outs


def _through_slurm(work: Path, env: dict, profile: Path, *args: str) -> None:
    proc = snakemake(work, *args, "--profile", str(profile), "--workflow-profile", "none",
                     "--slurm-init-seconds-before-status-checks", "2", env=env, timeout=3600)
    if proc.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args[:3])} ... through SLURM failed:\n" + proc.stderr[-4000:])


@pytest.fixture(scope="module")
def cluster_run(slurm, campaign, tmp_path_factory):
    """The planned jobs through SLURM: the leaves forced again by `snakemake figures` (with
    everything files-only after them), then one job of each other rule forced as a target."""
    local, _ = campaign
    work = tmp_path_factory.mktemp("slurm-pipeline")
    _seed(local, work)
    listed = snakemake(work, "figures", "-n", "--forceall", "--cores", "1", env=pipeline_env())
    assert listed.returncode == 0, listed.stderr[-2000:]
    plan = cluster_plan.plan(cluster_plan.parse_dry_run(listed.stdout), cluster_plan.slurm_rules())
    profile = _site_profile(work)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    t0 = time.monotonic()
    _through_slurm(work, slurm, profile, "figures", "--forcerun", *_remove_outputs(work, plan.rerun))
    if forced := _remove_outputs(work, plan.forced):  # with no targets Snakemake would run its first rule
        _through_slurm(work, slurm, profile, *forced, "--forcerun", *forced)
    took = time.monotonic() - t0
    jobs = _sacct(slurm, since)
    # Kept beside the run (make test-cluster's --basetemp): where the cluster side's time goes.
    jobs.to_csv(work / "sacct.csv", index=False)
    t = node_time(jobs)
    print(f"\n{len(plan.jobs())} jobs through SLURM took {took:.0f} s: {t['jobs']} SLURM jobs (median {t['median_job']:.0f} s), "
          f"the node busy {t['busy']:.0f} s, waiting for SLURM to start a queued job {t['turnover']:.0f} s, "
          f"for Snakemake to submit one {t['idle']:.0f} s (sacct times: {work / 'sacct.csv'})")
    return work, jobs, plan


def _sacct(env: dict, since: str) -> pd.DataFrame:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", since, "-o",
                          "JobID,JobName,Comment,State,ExitCode,Submit,Start,End"],
                         env=env, capture_output=True, text=True, check=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    df = pd.DataFrame(rows, columns=["job_id", "name", "comment", "state", "exit_code", "submit", "start", "end"])
    for c in ("submit", "start", "end"):
        df[c] = pd.to_datetime(df[c])
    df["rule"] = df["comment"].str.extract(r"^rule_(.+?)(?:_wildcards_.*)?$")[0]
    return df


def _cells(plan: cluster_plan.Plan) -> list[str]:
    """The harness.json of every run cell that ran through SLURM."""
    return [o for j in plan.jobs() if j.rule in RUN_RULES for o in j.outputs if o.endswith("harness.json")]


def _harness(work: Path, cell: str) -> dict:
    return json.loads((work / cell).read_text())


def test_slurm_ran_the_planned_jobs_and_no_other(cluster_run):
    """One job of every rule that is not a localrule (the plan), each a COMPLETED SLURM job,
    and nothing else: files-only steps stayed in the Snakemake process."""
    _, jobs, plan = cluster_run
    assert sorted(jobs["rule"]) == sorted(j.rule for j in plan.jobs()), jobs[["job_id", "comment"]].to_string()
    assert {j.rule for j in plan.jobs()} >= RUN_RULES, "a run rule had no job in the tiny pipeline"
    assert (jobs["state"] == "COMPLETED").all(), jobs[jobs["state"] != "COMPLETED"].to_string()


def test_every_run_cell_was_its_own_slurm_job(cluster_run):
    work, jobs, plan = cluster_run
    cells = _cells(plan)
    by_id = jobs.set_index("job_id")
    ids = []
    for cell in cells:
        sched = _harness(work, cell).get("scheduler")
        assert sched and sched["kind"] == "slurm", f"{cell}: the harness ran outside a SLURM job"
        job = by_id.loc[sched["job_id"]]
        assert job["rule"] in RUN_RULES, (cell, job["comment"])
        assert (job["state"], job["exit_code"]) == ("COMPLETED", "0:0"), (cell, job.to_dict())
        ids.append(sched["job_id"])
    assert len(set(ids)) == len(cells), "two cells shared a SLURM job"
    assert jobs["rule"].isin(RUN_RULES).sum() == len(cells), "SLURM ran run-cell jobs no harness recorded"
    assert (jobs["state"] == "COMPLETED").all(), jobs[jobs["state"] != "COMPLETED"].to_string()


def test_run_cells_held_the_node_alone(cluster_run):
    """--exclusive: no job ran beside a run cell, although several run cells waited at once
    (so SLURM, not Snakemake's own scheduling, kept them apart)."""
    _, jobs, _ = cluster_run
    cells = jobs[jobs["rule"].isin(RUN_RULES)]
    for _, c in cells.iterrows():
        other = jobs[(jobs["job_id"] != c["job_id"]) & (jobs["start"] < c["end"]) & (jobs["end"] > c["start"])]
        assert other.empty, f"job {c['job_id']} ({c['comment']}) shared the node with {other['job_id'].tolist()}"
    # y waited in the queue while x ran (submitted before x ended) and started only after it.
    waited = [(x["job_id"], y["job_id"]) for _, x in cells.iterrows() for _, y in cells.iterrows()
              if y["submit"] < x["end"] <= y["start"] and x["job_id"] != y["job_id"]]
    assert waited, "never did a run cell wait for another: the test did not exercise --exclusive"


def test_each_cell_made_its_cgroup_inside_its_job(cluster_run, campaign):
    work, _, plan = cluster_run
    local, _ = campaign
    for cell in _cells(plan):
        host, here = _harness(work, cell)["host"], _harness(local, cell)["host"]
        if host["grade"] == "unenforced":
            assert host["reason"], f"{cell}: unenforced without a reason"
        else:
            assert host["cgroup"] and host["cgroup"]["path"], cell
        assert host["grade"] == here["grade"], f"{cell}: {host['grade']} in SLURM, {here['grade']} locally"


def _expected_outcome(cell: str, h: dict) -> bool:
    """A run that completed; a fatal fault cell that failed closed (its engine run ends
    failed by design: the cell's validators judge it); or P3's protected cell killed at its
    hard v1 limit (v1 has no memory.high: the protected cell cannot be throttled, so it ends
    at the limit, as locally)."""
    if h["status"] == "ok":
        return True
    if h["meta"].get("campaign") == "faults" and h["meta"].get("class") == "fatal":
        return h["status"] == "failed"
    return ("/reclaim/protected/" in cell and h["status"] == "oom-killed"
            and (h["host"].get("cgroup") or {}).get("version") == 1)


def test_every_cluster_run_completed(cluster_run):
    work, _, plan = cluster_run
    bad = {c: h["status"] for c in _cells(plan) if not _expected_outcome(c, h := _harness(work, c))}
    assert not bad, bad


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ok_in_both(work: Path, local: Path, cells: list[str]) -> list[str]:
    return [c for c in cells if _harness(work, c)["status"] == "ok" and _harness(local, c)["status"] == "ok"]


# Counters that depend only on the config where the run is deterministic: arms C and D of the
# synthetic study (P1, P4) with one driver thread, or with driver threads in step (sync step). Not the
# free-running stress cells (P5: seeded jitter, so even the exact signal may see the threads
# in another order), nor A (the kernel's page cache decides) nor E (its prefetch races the scan).
DETERMINISTIC_ARMS = ("pager-lru", "pager-declared")
SYNTHETIC_COUNTS = ["accesses", "hits", "misses", "demand_fills", "prefetch_fills", "evictions",
                    "budget_chunks", "bytes_verified", "max_resident_chunks", "trace_sha256"]


def _deterministic_synthetic(df: pd.DataFrame) -> pd.DataFrame:
    keep = df["arm"].isin(DETERMINISTIC_ARMS) & ((df["threads"] == 1) | (df["sync"] == "step"))
    return df[keep & (df["status"] == "ok")].set_index("run_dir").sort_index()


def test_deterministic_outputs_match_the_local_run(cluster_run, campaign):
    work, _, plan = cluster_run
    local, _ = campaign
    remade = [o for j in plan.jobs() if j.rule not in RUN_RULES for o in j.outputs if o.startswith(("results/regions/", "results/models/"))]
    assert remade, "SLURM made no region or model file to compare"
    for rel in ["results/regions", "results/models"]:  # the remade ones among them
        for f in sorted((local / rel).rglob("*")):
            if f.is_file() and f.suffix in (".bin", ".gguf", ".json"):
                assert _sha(f) == _sha(work / f.relative_to(local)), f"{f.relative_to(local)} differs"
    a = _deterministic_synthetic(pd.read_parquet(work / "results" / "pager_synthetic.parquet"))
    b = _deterministic_synthetic(pd.read_parquet(local / "results" / "pager_synthetic.parquet"))
    both = a.index.intersection(b.index)
    assert len(both) >= 0.9 * len(b), f"only {len(both)} of {len(b)} deterministic cells ran ok in both"
    ran = {str(Path(c).parent) for c in _cells(plan) if "/pager_synthetic/main/" in c}
    assert ran and ran <= set(both), f"the synthetic cells SLURM ran are not among those compared: {ran}"
    pd.testing.assert_frame_equal(a.loc[both, SYNTHETIC_COUNTS], b.loc[both, SYNTHETIC_COUNTS])
    for run_dir in both:  # the traces themselves, byte for byte
        assert _sha(work / run_dir / "trace.bin") == _sha(local / run_dir / "trace.bin"), run_dir
    model_cells = [c for c in _cells(plan) if "/pager_model/" in c or "/matched_source/" in c]
    generated = [Path(c).parent for c in _ok_in_both(work, local, model_cells) if (local / Path(c).parent / "tokens.json").exists()]
    assert generated, f"no model run that generated tokens ran ok through SLURM and locally: {model_cells}"
    for d in generated:
        for name in ("tokens.json", "logits.sha256"):
            assert (work / d / name).read_bytes() == (local / d / name).read_bytes(), f"{d}/{name}"


def test_tables_and_must_pass_claims_match(cluster_run, campaign):
    work, _, _ = cluster_run
    local, _ = campaign
    cols = ["arm_row", "r", "capacity_chunks", "opt_misses", "opt_bytes_per_pass"]
    a = pd.read_csv(work / "results" / "tables" / "pager-synthetic.csv")
    b = pd.read_csv(local / "results" / "tables" / "pager-synthetic.csv")
    pd.testing.assert_frame_equal(a[cols], b[cols])
    pager = a["arm_row"].str.startswith(("C ", "D "))
    if (a["ok"] == a["reps"]).all() and (b["ok"] == b["reps"]).all():
        pd.testing.assert_frame_equal(a.loc[pager, ["misses", "miss_rate"]], b.loc[pager, ["misses", "miss_rate"]])
    for cid in ("P1", "P4", "P5", "P10", "P11"):
        verdict = json.loads((work / "claims" / f"{cid}.json").read_text())["verdict"]
        assert verdict == json.loads((local / "claims" / f"{cid}.json").read_text())["verdict"], cid
