"""A tiny campaign end to end through Snakemake: engine build (or the test build), region,
calibration, every arm through the harness, gather, analysis, figure, table, claims,
ledger, verify and replay."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from conftest import snakemake

pytestmark = pytest.mark.integration

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
    p = snakemake(work, "-n", "--cores", "1", "figures", env=env)
    assert p.returncode == 0
    assert "Nothing to be done" in p.stdout + p.stderr
