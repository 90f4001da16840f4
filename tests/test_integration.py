"""A tiny campaign end to end through Snakemake: engine build (or the test build), region,
calibration, every arm through the harness, gather, analysis, figure, table, claims,
ledger, verify and replay."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.integration

def tiny_config(build_dir: str) -> dict:
    """The embedded default, shrunk: same keys (so it stays in step with config.yaml)."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["engine"]["build_dir"] = build_dir
    cfg["harness"]["overhead_reps"] = 1
    ps = cfg["pager_synthetic"]
    ps.update(region_bytes=2 << 20, seed=7, chunk_bytes=64 << 10, watchdog_s=30, eager_reconcile=True)
    ps["main"].update(ratios=[0.5, 0.75], reps=2)
    ps["stress"].update(threads=[2], compute_us=[0, 50], reps=2)
    pm = cfg["pager_model"]
    pm.update(model="synthetic-dense", tokens=4, ctx=64, chunk_bytes=1 << 20, huge_chunks="off", ratios=[0.5, 0.75], reps=2,
              baseline_reps=2, watchdog_s=60, eager_reconcile=True)
    # F's eight 1 MiB windows come out of the same budget as D's one: 0.5 of this small model
    # would leave F fewer chunks than two compute threads need, so the tiny study runs at 0.75.
    cfg["matched_source"].update(ratio=0.75, pairs=["D-F", "F-D"])
    cfg["llama"]["build_dir"] = str(ROOT / ".build" / "llama.cpp")  # the cached pinned build
    return cfg


def engine_build_dir(work: Path) -> str:
    """Reuse the build `make test` made (same sources), else let the pipeline build one."""
    shared = ROOT / ".build" / "engine-test"
    if (shared / "residctl").exists():
        return str(shared)
    return str(work / ".build" / "engine")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipeline")
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config(engine_build_dir(work))))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmd = [sys.executable, "-m", "snakemake", "figures", "-s", str(ROOT / "Snakefile"), "-d", str(work),
           "--cores", "2", "--resources", "storage_exclusive=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    if proc.returncode != 0:
        pytest.fail("snakemake failed:\n" + proc.stderr[-4000:])
    return work, env


def test_outputs_exist(campaign):
    work, _ = campaign
    for rel in ["figures/02-miss-rate-vs-optimal.png", "figures/02-miss-rate-vs-optimal.pdf",
                "results/tables/pager-synthetic.csv", "results/tables/pager-synthetic.md",
                "results/tables/pager-synthetic.tex", "claims/ledger.json",
                "claims/P1.json", "claims/P4.json", "claims/P5.json", "results/probe.json",
                "figures/06-real-model-bytes.png", "figures/07-throughput-scaling.pdf",
                "results/pager_model.parquet", "results/tables/pager-model.md",
                "results/matched_source.parquet", "results/tables/table6-matched-pairs.md",
                "figures/08-matched-source-pairs.png", "claims/C2.json", "claims/C8.json"]:
        assert (work / rel).stat().st_size > 0, rel
    leftovers = [p for p in (work / "results").rglob(".*.tmp")] + list((work / "claims").glob(".*"))
    assert not leftovers, f"temporary files left behind: {leftovers}"


def test_every_run_recorded_and_within_its_limit(campaign):
    work, _ = campaign
    model = pd.read_parquet(work / "results" / "pager_model.parquet")
    assert len(model) == 4 * 2 * 2 + 2
    assert model["valid"].all(), model[~model["valid"]][["run_dir", "error", "exactness_detail"]].to_string()
    assert (model[model["arm"] != "kernel-mmap"]["interposed"]).all()
    df = pd.read_parquet(work / "results" / "pager_synthetic.parquet")
    assert len(df) == 4 * 2 * 2 + 2 * 2 * 2 * 2
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["run_dir", "error"]].to_string()
    assert (df["verify_errors"] == 0).all()
    assert (df["bytes_verified"] == df["accesses"] * df["chunk_bytes"]).all()
    pager = df[df["arm"] != "kernel-mmap"]
    assert (pager["reconcile_checks"] > 0).all() and (pager["reconcile_mismatches"] == 0).all()
    assert (pager["max_resident_chunks"] <= pager["budget_chunks"]).all()
    if (df["host_grade"] == "hard").all():
        assert (df["oom_kills"] == 0).all()
        assert (df["peak_bytes"] <= df["limit_bytes"]).all()
    assert df["engine_sha256"].nunique() == 1 and df["config_digest"].nunique() == 1
    ms = pd.read_parquet(work / "results" / "matched_source.parquet")
    cells = sorted(zip(ms["block"], ms["source_arm"], ms["order"].fillna("")))
    assert cells == [(0, "P", ""), (0, "oracle", ""), (1, "D", "D-F"), (1, "F", "D-F"), (2, "D", "F-D"), (2, "F", "F-D")], cells
    assert ms["valid"].all(), ms[~ms["valid"]][["run_dir", "error"]].to_string()
    f = ms[ms["source_arm"] == "F"]
    assert (f["source_windows_free_at_close"] == f["source_windows"]).all()
    assert (f["source_tickets_outstanding_at_close"] == 0).all() and (f["source_dynamic_allocations"] == 0).all()
    assert (f["source_peak_depth"] <= 8).all() and (f["source_peak_depth"] >= 1).all()


# Correctness properties of the engine: they must hold even at this tiny scale. The other
# claims (throughput shape, D/OPT on a real model) are measurements, not checked here.
MUST_PASS = ("P1", "P4", "P5", "P10", "P11")


def test_claims_hold_and_verify(campaign):
    work, env = campaign
    ledger = json.loads((work / "claims" / "ledger.json").read_text())
    for entry in ledger["claims"]:
        cid = entry["id"]
        doc = json.loads((work / "claims" / f"{cid}.json").read_text())
        assert doc["verdict"] in ("pass", "fail", "insufficient-evidence")
        if cid in MUST_PASS:
            assert doc["verdict"] == "pass", (cid, doc["reasons"])
        for what in ("verify", "replay"):
            p = subprocess.run([sys.executable, "-m", "residency.cli", what, "--claim", cid],
                               cwd=work, capture_output=True, text=True, env=env)
            assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(e["id"] for e in ledger["claims"]) == sorted(
        ["C2", "C8", "P1", "P2", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11"])


def test_rerun_is_a_no_op(campaign):
    work, env = campaign
    p = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(work),
                        "-n", "--cores", "1", "figures"], capture_output=True, text=True, env=env)
    assert p.returncode == 0
    assert "Nothing to be done" in p.stdout + p.stderr


def _residency(work, env, *args):
    return subprocess.run([sys.executable, "-m", "residency.cli", *args], cwd=work, capture_output=True,
                          text=True, env=env)


def test_verify_all_deep_passes_on_the_campaign(campaign):
    work, env = campaign
    p = _residency(work, env, "verify", "--all", "--deep")
    assert p.returncode == 0, p.stdout + p.stderr
    ledger = json.loads((work / "claims" / "ledger.json").read_text())
    assert all(e["in_history"] and e["computed_on_scope"] >= 1 for e in ledger["claims"]), ledger
    runs = pd.read_parquet(work / "results" / "pager_model.parquet")
    assert runs["manifest_sha256"].str.len().eq(64).all()
    for d in runs["run_dir"]:
        listed = json.loads((work / d / "manifest.json").read_text())["files"]
        assert {"run.json", "harness.json", "residctl.stderr", "logits.f32"} <= {f["name"] for f in listed}, d


def test_a_changed_counter_fails_deep_verify_naming_the_run(campaign):
    work, env = campaign
    run_dir = pd.read_parquet(work / "results" / "pager_model.parquet").query("arm == 'pager-declared'")["run_dir"].iloc[0]
    path = work / run_dir / "run.json"
    original = path.read_bytes()
    try:
        doc = json.loads(original)
        doc["counters"]["physical_bytes_read"] += 4096
        path.write_text(json.dumps(doc, indent=2))
        p = _residency(work, env, "verify", "--claim", "P2", "--deep")
        assert p.returncode == 1, p.stdout
        lines = p.stdout.splitlines()
        assert lines[0] == "residency verify P2: FAILED (1 problems)", p.stdout
        assert len(lines) == 2 and lines[1].startswith(f"  - {run_dir}/run.json: "), p.stdout
    finally:
        path.write_bytes(original)
    assert _residency(work, env, "verify", "--claim", "P2", "--deep").returncode == 0
