"""The cluster test's choice of jobs (tests/cluster_plan.py), on a small known DAG."""

import cluster_plan
from test_rule_placement import run_cell_rules

# `snakemake -n` blocks: a region, two calibration reps, a files-only overhead step between
# them and the cells, two cells, a files-only gather, and the engine's build.
DRY_RUN = """
Building DAG of jobs...
[Mon Dec  7 13:00:15 2026]
rule synthetic_region:
    output: results/regions/r.bin, results/regions/r.bin.json
    log: results/logs/r.log
    jobid: 1
    reason: Forced execution
[Mon Dec  7 13:00:15 2026]
rule engine:
    input: engine/CMakeLists.txt
    output: /build/residctl
    jobid: 2
rule calibrate_overhead_run:
    input: /build/residctl, results/regions/r.bin
    output: results/runs/s/calibrate/pager-lru/rep1/harness.json
    jobid: 3
rule calibrate_overhead_run:
    input: /build/residctl, results/regions/r.bin
    output: results/runs/s/calibrate/pager-declared/rep1/harness.json
    jobid: 4
rule overhead:
    input: results/runs/s/calibrate/pager-lru/rep1/harness.json, results/runs/s/calibrate/pager-declared/rep1/harness.json
    output: results/calibration/s.json
    jobid: 5
rule pager_main_cell:
    input: /build/residctl, results/regions/r.bin, results/calibration/s.json
    output: results/runs/s/main/kernel-mmap/rep1/harness.json
    jobid: 6
rule pager_main_cell:
    input: /build/residctl, results/regions/r.bin, results/calibration/s.json
    output: results/runs/s/main/pager-declared/rep1/harness.json
    jobid: 7
rule gather:
    input: results/runs/s/main/kernel-mmap/rep1/harness.json, results/runs/s/main/pager-declared/rep1/harness.json
    output: results/s.parquet
    jobid: 8
rule figures:
    input: results/s.parquet
    jobid: 0
"""
SLURM = {"synthetic_region", "engine", "calibrate_overhead_run", "pager_main_cell"}


def _outputs(jobs) -> list[tuple[str, str]]:
    return [(j.rule, j.outputs[0]) for j in jobs]


def test_the_dry_run_is_read_job_by_job():
    jobs = cluster_plan.parse_dry_run(DRY_RUN)
    assert [j.rule for j in jobs] == ["synthetic_region", "engine", "calibrate_overhead_run", "calibrate_overhead_run",
                                      "overhead", "pager_main_cell", "pager_main_cell", "gather", "figures"]
    assert jobs[0].outputs == ("results/regions/r.bin", "results/regions/r.bin.json") and jobs[0].inputs == ()
    assert jobs[4].inputs == ("results/runs/s/calibrate/pager-lru/rep1/harness.json",
                              "results/runs/s/calibrate/pager-declared/rep1/harness.json")
    assert jobs[-1].outputs == ()


def test_a_leaf_is_rerun_and_a_rule_without_one_is_forced_builds_left_out():
    plan = cluster_plan.plan(cluster_plan.parse_dry_run(DRY_RUN), SLURM)
    # the cell is a leaf (only files-only steps follow it); the informed arm's is taken
    assert _outputs(plan.rerun) == [("pager_main_cell", "results/runs/s/main/pager-declared/rep1/harness.json")]
    # a calibration feeds the cells through the files-only overhead step, so it is no leaf
    assert _outputs(plan.forced) == [("calibrate_overhead_run", "results/runs/s/calibrate/pager-declared/rep1/harness.json"),
                                     ("synthetic_region", "results/regions/r.bin")]
    assert "engine" not in {j.rule for j in plan.jobs()}


def test_the_slurm_rules_are_the_node_and_run_rules():
    rules = cluster_plan.slurm_rules()
    assert run_cell_rules() <= rules
    assert {"synthetic_region", "model_synthetic", "machine", "probe"} <= rules
    assert not {"claim", "overhead", "figures", "ledger"} & rules
