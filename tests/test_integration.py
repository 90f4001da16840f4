"""A tiny campaign end to end through Snakemake: engine build (or the test build), region,
calibration, every arm through the harness, gather, analysis, figure, table, claims,
ledger, verify and replay."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import snakemake_log
from conftest import snakemake
from test_rule_placement import run_cell_rules

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
                "figures/08-matched-source-pairs.png", "claims/C2.json", "claims/C8.json",
                "results/bounded_source.parquet", "results/runs/matched_source/synthetic-dense/premise.json",
                "results/reclaim.parquet", "figures/04-reclaim-authority.png", "claims/P3.json",
                "claims/C1.json", "results/runs/certificate/certificate.json",
                "results/tables/table3-principal.md", "results/tables/table5-certificate.tex",
                "results/faults.parquet", "results/faults_reset_warm.parquet", "claims/C3.json", "claims/C12.json",
                "results/tables/table4-identity.md", "results/tables/table7-faults.csv",
                "results/tasks.parquet", "claims/C5.json", "claims/C6.json", "claims/C11.json",
                "results/speculative.parquet", "claims/C4.json", "results/tables/table9-populations.md",
                "results/tables/table10-negative-results.md", "results/tables/table1-obligations.md",
                "results/tables/table11-claim-map.tex", "results/tables/reference-values.csv"]:
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


MODEL_TABLE = ["arm_row", "r", "reps", "valid", "exact", "gb_per_run", "bytes_per_token_over_t", "misses",
               "opt_misses", "tokens_per_s", "fault_p99_us", "peak_mib", "limit_mib", "misses_over_opt",
               "roofline_tokens_per_s", "fraction_of_roofline"]


def touches_weights_or_disk(job: snakemake_log.Job) -> bool:
    """A job that reads a model's or region's bytes (its input), writes one (its output) or
    measures the disk (the probe): beside a run cell it would warm the page cache the cell is
    measured on, or share its disk."""
    files = job.inputs + job.outputs
    return job.rule == "probe" or any(
        f.endswith(".gguf") or (f.startswith("results/regions/") and f.endswith(".bin")) for f in files)


def test_no_run_cell_shares_the_disk_or_the_weights_page_cache(campaign):
    """The campaign ran with two cores: still, no job touching the weights or the disk ran
    beside a run cell (on 2026-12-06 the speculative draft read the model beside arm A's
    calibration, whose peak came out at half the model and inflated the reserve past it)."""
    work, _ = campaign
    jobs = snakemake_log.jobs(snakemake_log.campaign_log(work))
    run_rules = run_cell_rules()
    cells = [j for j in jobs if j.rule in run_rules]
    assert cells, "the log shows no run cell"
    assert all(j.end is not None for j in jobs), [j.rule for j in jobs if j.end is None]
    beside = sorted({(c.rule, o.rule) for c in cells for o in jobs
                     if o is not c and o.overlaps(c) and (touches_weights_or_disk(o) or o in cells)})
    assert not beside, f"(run cell, job beside it): {beside}"


def test_model_and_matched_tables_hold_their_invariants(campaign):
    work, _ = campaign
    tables = work / "results" / "tables"
    pm = pd.read_csv(tables / "pager-model.csv")
    assert list(pm.columns) == MODEL_TABLE
    arms = ("A (kernel mmap)", "C (LRU)", "D (declared)", "E (prefetch)")
    assert list(zip(pm["arm_row"], pm["r"].fillna(0))) == [(a, r) for a in arms for r in (0.5, 0.75)] + [
        ("baseline (unconstrained)", 0)]
    assert (pm["valid"] == pm["reps"]).all() and (pm["exact"] == pm["reps"]).all(), pm.to_string()  # exactness
    assert (pm["reps"] == 2).all() and (pm["gb_per_run"] > 0).all()
    # each arm's fraction is its own tokens/s over the bound at its r
    roof = pm[pm["roofline_tokens_per_s"].notna()]
    assert len(roof) == 8, pm.to_string()
    assert (roof["fraction_of_roofline"] - roof["tokens_per_s"] / roof["roofline_tokens_per_s"]).abs().max() < 1e-9
    limited = pm[pm["limit_mib"].notna()]
    if (pd.read_parquet(work / "results" / "pager_model.parquet").query("campaign == 'main'")["host_grade"] == "hard").all():
        assert (limited["peak_mib"] <= limited["limit_mib"]).all(), limited.to_string()
    t6 = pd.read_csv(tables / "table6-matched-pairs.csv")
    assert list(t6.columns) == ["Block", "Order", "D (s)", "F (s)", "F/D"]
    assert list(t6["Block"]) == [1, 2] and list(t6["Order"]) == ["D->F", "F->D"]  # the configured order
    ms = pd.read_parquet(work / "results" / "matched_source.parquet")
    wall = {(b, a): w for b, a, w in zip(ms["block"], ms["source_arm"], ms["wall_s"])}
    assert list(t6["F/D"]) == [round(wall[(k, "F")] / wall[(k, "D")], 6) for k in (1, 2)]
    pairs = ms[ms["source_arm"].isin(["D", "F"])]
    assert pairs["exact"].all()
    balanced = ((pairs["source_submissions"] == pairs["source_completions"]) & (pairs["source_rejections"] == 0)
                & (pairs["source_tickets_outstanding_at_close"] == 0)
                & (pairs["source_windows_free_at_close"] == pairs["source_windows"]))
    assert balanced.all() and (pairs["source_submissions"] > 0).all(), pairs.to_string()  # balanced tickets


# What the tiny campaign determines. DETERMINED: the verdict follows from the engine's
# correctness and the policies' counts (deterministic at these budgets), or from the design
# (P6: the tiny campaign runs no r <= 0.375, so its low half cannot be shown). MEASURED:
# timing and memory decide the verdict on the machine (P5's free-running cells, P9's
# throughput, C2's wall interval and peak depth, C8's peaks); there the values must be
# recomputed from the raw run directories and every assertion evaluated.
DETERMINED = {"P1": "pass", "P2": "pass", "P4": "pass", "P7": "pass", "P8": "pass", "P10": "pass", "P11": "pass",
              "P6": "insufficient-evidence"}
NEEDS_HARD_LIMIT = {"P2", "P9", "C2", "C8", "C9"}  # cross-arm comparisons at equal host limits


def expected_verdict(cid: str, doc: dict, all_hard: bool) -> None:
    if cid in NEEDS_HARD_LIMIT and not all_hard:
        assert doc["verdict"] == "insufficient-evidence" and any("hard host limit" in r for r in doc["reasons"]), cid
    elif cid in DETERMINED:
        assert doc["verdict"] == DETERMINED[cid], (cid, doc["reasons"])
    else:
        assert cid in MEASURED, f"{cid}: neither determined nor measured in this test"
        evaluated(doc)
    if cid == "P6":
        assert doc["reasons"][0] == "low (r <= 0.375) half: the campaign ran no r in it, so this machine's run cannot show it"


def p3_as_this_machine_allows(work: Path, doc: dict) -> None:
    """P3's verdict rests on the kernel: on cgroup v1 the protected half cannot be shown (named)
    while v1's counterparts are asserted; without root or a cgroup no cell can be made (named);
    on v2 every assertion is evaluated. No swap is left on by the cells."""
    from residency.run import swap

    # this campaign's swap files only: another worker's campaign may be in its reclaim cell now
    mine = f"{work.resolve()}/"
    assert not [f for f in swap.active_files() if swap.PREFIX in f and f.startswith(mine)], "a reclaim cell left its swap on"
    cells = pd.read_parquet(work / "results" / "reclaim.parquet")
    assert sorted(cells["protection"]) == ["protected", "unprotected"]
    if (cells["status"] == "unavailable").any():
        assert doc["verdict"] == "insufficient-evidence"
        assert any("could not be made here" in r for r in doc["reasons"]), doc["reasons"]
    elif (cells["cgroup_version"] == 1).all():
        assert doc["verdict"] == "insufficient-evidence"
        assert any(r.startswith("protected half: cgroup v1 has no memory.high") for r in doc["reasons"])
        assert not [r for r in doc["reasons"] if r.startswith("unevaluable:")], doc["reasons"]
    else:
        evaluated(doc)


def evaluated(doc: dict) -> None:
    """Every assertion was evaluated on complete evidence, and the verdict is what they say."""
    assert doc["insufficient"] == [] and not any(r.startswith("unevaluable") for r in doc["reasons"]), doc["reasons"]
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert doc["verdict"] == ("fail" if failed else "pass"), doc["reasons"]


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def p5_from_runs(work: Path, doc: dict) -> None:
    """Each stress cell's distinct traces and access outcomes, from its repetitions' trace files."""
    from residency.core import trace
    from residency.core.identity import sha256_file

    v = doc["values"]
    assert v["race_possible_cells"] == 4 and len(v["exact_signal_cells"]) == len(v["racy_signal_cells"]) == 4
    differing = 0
    for c in v["exact_signal_cells"] + v["racy_signal_cells"]:
        cell = work / "results/runs/pager_synthetic/stress" / c["arm"] / c["signal"] / f"t{c['threads']}-c{c['compute_us']}"
        traces = list(cell.glob("rep*/trace.bin"))
        outcomes = {trace.read(t).outcomes_sha256() for t in traces}
        assert (c["reps"], c["reps_ok"], c["distinct_traces"], c["distinct_outcomes"]) == (
            2, 2, len({sha256_file(t) for t in traces}), len(outcomes)), c
        assert c["sync"] == "none" and c["jitter_us"] == (400 if c["compute_us"] else 0), c
        assert c["deterministic"] == (len(outcomes) == 1), c  # free-running: judged on access outcomes
        differing += c["signal"] == "thread0-started" and len(outcomes) > 1
    assert v["racy_signal_cells_differing"] == differing
    for r in doc["reasons"]:  # a failed half is named
        assert not r.startswith("failed:") or "racy half" in r or "exact half" in r, r


def p9_from_runs(work: Path, doc: dict) -> None:
    """Mean tokens/s per arm and r, from each run's run.json."""
    for arm, a in doc["values"]["arms"].items():
        assert len(a["tokens_per_s_per_r"]) == 2, arm
        for x in a["tokens_per_s_per_r"]:
            runs = list((work / "results/runs/pager_model/synthetic-dense" / arm / f"r{x['r']:g}").glob("rep*/run.json"))
            tps = [_json(p)["generation"]["tokens_per_s"] for p in runs]
            assert len(tps) == 2 and x["tokens_per_s"] == pytest.approx(sum(tps) / 2, rel=1e-9), (arm, x)


def c2_from_runs(work: Path, doc: dict) -> None:
    """The paired-log interval of F/D complete wall, from each pair's harness.json."""
    from residency.analysis.stats import paired_log_ratio

    cells = doc["values"]["cells"]
    wall = {(c["block"], c["source_arm"]): _json(work / c["run_dir"] / "harness.json")["wall_s"] for c in cells}
    d, f = [wall[(k, "D")] for k in (1, 2)], [wall[(k, "F")] for k in (1, 2)]
    want, got = paired_log_ratio(d, f), doc["values"]["wall_f_over_d"]
    assert (got["n"], got["ratio"], got["low"], got["high"]) == pytest.approx((2, want.ratio, want.low, want.high))
    assert got["low"] < got["ratio"] < got["high"]
    depth = [(c["source_peak_depth"], c["source_windows"]) for c in cells if c["source_arm"] == "F"]
    assert doc["values"]["f_peak_depth_equals_windows"] == [p == w for p, w in depth]
    assert doc["values"]["p"]["admissible"] in (True, False)


def c8_from_runs(work: Path, doc: dict) -> None:
    """C8's own pair: host peaks, the premise and eq. 1's margins, from its cells' harness.json
    and the premise record the capped cells ran after."""
    v = doc["values"]
    runs = work / "results/runs/bounded_source"
    cells = {c: _json(runs / c / "harness.json") for c in ("P-natural", "P", "F")}
    assert v["p_peak_bytes"] == cells["P"]["host"]["cgroup"]["peak_bytes"]
    assert v["f_peak_bytes"] == cells["F"]["host"]["cgroup"]["peak_bytes"]
    premise = _json(runs / "premise.json")
    assert v["premise"]["p_natural_peak_bytes"] == cells["P-natural"]["host"]["cgroup"]["peak_bytes"] \
        == premise["p_natural_peak_bytes"]
    assert v["premise"]["h_cap_bytes"] == cells["P"]["host"]["limit_bytes"] == premise["h_cap_bytes"]
    margins = [int(h["meta"]["t_repr_bytes"]) - (h["host"]["limit_bytes"] - int(h["meta"]["reserve_bytes"]))
               for h in (cells["P"], cells["F"])]
    assert v["eq1"]["margin_bytes"] == margins == [premise["margin_bytes"]] * 2
    assert v["eq1"]["holds"] == [m > 0 for m in margins]


def c1_from_runs(work, doc):
    """C1: the certificate rebuilt from the two raw run directories equals the recorded one;
    under a hard host cap every obligation holds (the default config is sized for it); the
    verdict is pass on an audited board, and names the GPU half as not shown without one."""
    from residency.evidence import certificate

    runs = Path("results") / "runs" / "certificate"  # relative, as the rule names them in the record
    rec = json.loads((work / runs / certificate.FILE).read_text())
    model = json.loads((work / "results" / "models" / "synthetic-moe.json").read_text())
    with contextlib.chdir(work):
        again = certificate.build(runs / "certified", runs / "oracle",
                                  {k: model.get(k) for k in ("path", "sha256", "bytes")}, rec["B"]["host"]["r_policy_bytes"])
    assert json.loads(json.dumps(again)) == rec
    if rec["A"]["host"] != "hard":
        assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
        return
    assert doc["values"]["equations"]["eq3"]["margin_bytes"] > 0 and doc["values"]["claim_class"] == "W"
    held = {k: v for k, v in doc["values"]["checks"].items() if not k.startswith("eq")}
    assert all(held.values()), held
    if rec["A"]["gpu"] == "audited":
        assert doc["verdict"] == "pass", doc["reasons"]
    else:  # no board: the reference's GPU half is named as not shown, and nothing else
        assert doc["verdict"] == "insufficient-evidence"
        assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/gpu_audited: value missing"], \
            doc["reasons"]


def faults_from_runs(work: Path, cid: str, doc: dict) -> None:
    """C3, C12: every cell ran as its own job under the harness; under a hard host limit every
    cell (C3's and the rest) is valid and the reset/warm process equals the oracle, so the only
    unshown half is the GPU one (no board here), named; without a hard limit, insufficient."""
    cells = pd.read_parquet(work / "results" / "faults.parquet")
    assert sorted(set(cells["adapter"])) == ["synthetic-dense", "synthetic-moe"] and len(cells) == 10
    assert cells["prespecified"].sum() == 5 + 2 and set(cells["class"]) == {"control", "fatal", "recoverable"}
    hard = (cells["host_grade"] == "hard").all()
    if hard:
        assert cells["valid"].eq(True).all(), cells[["adapter", "cell", "reasons"]].to_string()
    unshown = [r.split(":")[1].strip() for r in doc["reasons"]]
    if hard and doc["values"].get("gpu_grades", [doc["values"].get("gpu_grade")]) != ["audited"]:
        assert doc["verdict"] == "insufficient-evidence"
        assert unshown == ["/values/gpu_boundary" if cid == "C3" else "/values/gpu_audited"], doc["reasons"]
    elif not hard:
        assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    table7 = (work / "results" / "tables" / "table7-faults.md").read_text()
    assert ("held-consumer: valid" in table7 and "stale-completion: valid" in table7) or not hard, table7
    assert "byte-identical across these rows" in (work / "results" / "tables" / "table4-identity.md").read_text()


def tasks_from_runs(work: Path, cid: str, doc: dict) -> None:
    """C5, C6, C11: each of the two tasks ran as four jobs (the oracle resident, controls A and
    C and the candidate under one hard limit), every run finished and every capped run's
    tokens equal the oracle's (so the F1 are equal). C5's control is A; C6's the exact control
    of lower total wall; each cycle half passes or fails by the walls the Parquet holds. The
    synthetic model answers with byte noise, so no task is correct and, under a hard limit
    with clean resources, C11 reproduces the stop; without a hard limit all three are
    insufficient."""
    t = pd.read_parquet(work / "results" / "tasks.parquet")
    assert len(t) == 8 and sorted(t["role"]) == ["candidate"] * 2 + ["control"] * 4 + ["oracle"] * 2, t.to_string()
    assert (t["status"] == "ok").all() and (t["tokens"] == 4).all(), t[["task", "role", "status", "error"]].to_string()
    capped = t[t["role"] != "oracle"]
    assert capped["tokens_equal_oracle"].eq(True).all() and capped["logits_equal_oracle"].eq(True).all()
    assert (t[t["role"] == "candidate"]["arm"] == "pager-declared").all()
    assert capped.groupby("task")["limit_bytes"].nunique().eq(1).all()  # one hard limit per task
    hard = (capped["host_grade"] == "hard").all()
    wall = capped.groupby(["role", "arm"])["wall_s"].sum()
    cand = t[t["role"] == "candidate"].set_index("task")["wall_s"]
    if cid in ("C5", "C6") and not hard:
        assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    elif cid == "C5":
        ctrl = t[(t["role"] == "control") & (t["arm"] == "kernel-mmap")].set_index("task")["wall_s"]
        assert doc["values"]["control_arm"] == "kernel-mmap" and doc["values"]["aggregate_f1_delta"] == 0.0
        assert doc["values"]["cycle"]["total_control_wall_s"] == pytest.approx(ctrl.sum())
        assert doc["verdict"] == ("pass" if (cand < ctrl).all() else "fail"), doc["reasons"]
    elif cid == "C6":
        fastest = min(("kernel-mmap", "pager-lru"), key=lambda a: wall[("control", a)])
        assert doc["values"]["control_arm"] == fastest and doc["values"]["aggregate_f1_delta"] == 0.0
        shorter = wall[("candidate", "pager-declared")] < wall[("control", fastest)]
        assert doc["verdict"] == ("pass" if shorter else "fail"), doc["reasons"]
    elif (t[t["role"] == "candidate"]["host_grade"] == "hard").all():
        assert doc["values"]["admission"] == "stop" and doc["values"]["correct"] == 0
        cand_ok = t[t["role"] == "candidate"]["admissible"]
        assert doc["verdict"] == ("pass" if cand_ok.eq(True).all() else "fail"), doc["reasons"]
    else:
        assert doc["verdict"] == "insufficient-evidence", doc["reasons"]


def c9_from_runs(work: Path, doc: dict) -> None:
    """C9: the ratios are the means of the runs the record names, as the Parquet has them."""
    runs = pd.read_parquet(work / "results" / "pager_model.parquet")
    v = doc["values"]
    base = runs[runs["run_dir"].isin(v["resident"]["run_dirs"])]
    store = runs[runs["run_dir"].isin(v["storage"]["run_dirs"])]
    assert len(base) == v["resident"]["runs"] and len(store) == v["storage"]["runs"] > 0
    assert set(store["arm"]) == {"pager-declared"} and set(store["r"]) == {doc["settings"]["c9_ratio"]}
    want = store["wall_ns"].mean() / base["wall_ns"].mean()
    assert v["storage_over_resident"]["total_wall"] == pytest.approx(want, rel=1e-9)


def c10_from_runs(work: Path, doc: dict) -> None:
    """C10: the need is the target times D's bytes per output; the decision follows from it."""
    v = doc["values"]
    assert v["target_tokens_per_s"] == doc["settings"]["c10_target_tokens_per_s"]
    assert v["needed_bandwidth_bytes_per_s"] == pytest.approx(v["target_tokens_per_s"] * v["bytes_per_token"])
    need, got = v["needed_bandwidth_bytes_per_s"], v["measured_bandwidth_bytes_per_s"]
    assert v["decision"] == ("advance" if got >= need else "stop")


def c7_from_runs(work: Path, doc: dict) -> None:
    """C7: two pairs in alternating order, each cell a cold prefill; each pair's bytes are the
    physical bytes its two cells' rows record."""
    cells = pd.read_parquet(work / "results" / "cache_transfer.parquet")
    assert list(cells["arm"]) == ["pager-zero", "pager-lru-k", "pager-lru-k", "pager-zero"], cells.to_string()
    assert (cells["status"] == "ok").all() and cells["cold_start"].all() and cells["first_decode_hits"].notna().all()
    assert sorted(doc["values"]["pairs"]) == ["0", "1"]
    for key, pair in doc["values"]["pairs"].items():
        rows = cells[cells["pair"] == int(key)].set_index("arm")["physical_bytes_read"]
        assert pair["bytes_read"] == {"zero": rows["pager-zero"], "lru_k": rows["pager-lru-k"]}, key
    # a host half that does not hold fails the claim; else only the H2D half is unshown
    if any(r.startswith("failed:") for r in doc["reasons"]):
        assert doc["verdict"] == "fail", doc["reasons"]
    else:
        assert doc["verdict"] == "insufficient-evidence"
        assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/h2d_bytes_fewer: value missing"]


def c4_from_runs(work: Path, doc: dict) -> None:
    """C4: the amortization is the speculative cell's own outputs over its traversals; only
    the GPU half is unshown when the host half holds."""
    cells = pd.read_parquet(work / "results" / "speculative.parquet")
    assert sorted(cells["cell"]) == ["greedy", "speculative"] and (cells["status"] == "ok").all()
    s = cells[cells["cell"] == "speculative"].iloc[0]
    v = doc["values"]
    assert v["traversals"] == s["traversals"] and v["decode_outputs"] == s["tokens"] - 1
    assert v["outputs_per_traversal"] == pytest.approx(v["decode_outputs"] / v["traversals"])
    assert v["traversals"] + v["accepted"] == v["decode_outputs"]
    if any(r.startswith("failed:") for r in doc["reasons"]):
        assert doc["verdict"] == "fail", doc["reasons"]
    else:
        assert doc["verdict"] == "insufficient-evidence"
        assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/gpu_served: value missing"]


MEASURED = {"P5": p5_from_runs, "P9": p9_from_runs, "C2": c2_from_runs, "C8": c8_from_runs, "C9": c9_from_runs,
            "C10": c10_from_runs}


def test_claims_hold(campaign):
    """Each claim's verdict against what its runs show. That every record verifies and replays
    is test_verify_all_deep_passes_on_the_campaign's (one `verify --all --deep`), the
    single-claim commands the README test's."""
    work, _ = campaign
    ledger = json.loads((work / "claims" / "ledger.json").read_text())
    grades = {g for name in ("pager_model", "matched_source")
              for g in pd.read_parquet(work / "results" / f"{name}.parquet")["host_grade"] if g != "instrumented"}
    for entry in ledger["claims"]:
        cid = entry["id"]
        doc = json.loads((work / "claims" / f"{cid}.json").read_text())
        if cid == "P3":
            p3_as_this_machine_allows(work, doc)
        elif cid == "C1":
            c1_from_runs(work, doc)
        elif cid in ("C3", "C12"):
            faults_from_runs(work, cid, doc)
        elif cid in ("C5", "C6", "C11"):
            tasks_from_runs(work, cid, doc)
        elif cid == "C7":
            c7_from_runs(work, doc)
        elif cid == "C4":
            c4_from_runs(work, doc)
        else:
            expected_verdict(cid, doc, grades == {"hard"})
        if cid in MEASURED and doc["verdict"] != "insufficient-evidence":
            MEASURED[cid](work, doc)
    assert sorted(e["id"] for e in ledger["claims"]) == sorted(
        ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8",
         "P9", "P10", "P11"])


def test_reference_values_sit_beside_the_campaigns_records(campaign):
    """Every unmarked entry of claims/reference_values.py names a value in the tiny
    campaign's records (a point the tiny config does not run, an r outside its ratios, is
    shown missing, never filled in); the ledger carries the rows; tables 1 and 11 are read
    from the certificate and the ledger."""
    from residency.claims import reference_values as rv

    work, _ = campaign
    ledger = json.loads((work / "claims" / "ledger.json").read_text())
    for entry in ledger["claims"]:
        doc = json.loads((work / entry["path"]).read_text())
        assert entry["reference_values"] == rv.side_by_side(doc), entry["id"]
        assert [u for u in rv.unresolved(doc) if "no row of" not in u] == [], entry["id"]
    t11 = pd.read_csv(work / "results" / "tables" / "table11-claim-map.csv")
    assert sorted(t11["ID"]) == sorted(e["id"] for e in ledger["claims"])
    assert dict(zip(t11["ID"], t11["sha256"])) == {e["id"]: e["sha256"] for e in ledger["claims"]}
    t1 = pd.read_csv(work / "results" / "tables" / "table1-obligations.csv")
    cert = json.loads((work / "results" / "runs" / "certificate" / "certificate.json").read_text())
    assert list(t1["field"]) == ["I", "B, A", "E", "L"]
    assert f"all_tokens_exact = {json.dumps(cert['checks']['all_tokens_exact'])}" in t1.set_index("field").loc["E", "checks"]
    refv = pd.read_csv(work / "results" / "tables" / "reference-values.csv")
    assert len(refv) == sum(len(e["reference_values"]) for e in ledger["claims"])


def test_rerun_is_a_no_op(campaign):
    work, env = campaign
    p = snakemake(work, "-n", "--cores", "1", "figures", env=env)
    assert p.returncode == 0
    assert "Nothing to be done" in p.stdout + p.stderr


@pytest.mark.changes_checkout
def test_a_change_three_imports_deep_remakes_what_runs_it_and_nothing_else(campaign):
    """evidence/extents.py is imported by gather.pager through exactness and demand: changed
    (Snakemake compares an input's checksum, so a touch is not a change), it remakes the model
    gathers (and what reads them), never the gathers that do not import it. The file is
    changed by one trailing comment and restored, bytes and times, however the test ends."""
    work, env = campaign
    from residency.core import imports

    deep = imports.PACKAGE_DIR / "evidence" / "extents.py"
    st, original = deep.stat(), deep.read_bytes()
    try:
        deep.write_bytes(original + b"# a change for tests/test_integration.py\n")
        os.utime(deep, (st.st_atime, time.time() + 3600))
        p = snakemake(work, "figures", "-n", "--cores", "1", "--quiet", "rules", env=env)
    finally:
        deep.write_bytes(original)
        os.utime(deep, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.returncode == 0, p.stderr[-2000:]
    jobs = {line.split()[0] for line in (p.stdout + p.stderr).splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert {"gather_pager_model", "gather_matched_source", "certificate_record"} <= jobs, sorted(jobs)
    assert not {"gather_reclaim", "gather_pager_model_roofline", "figure_04", "engine"} & jobs, sorted(jobs)


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


def test_a_claim_made_alone_leaves_verify_passing(campaign):
    """The README's single-claim path: `snakemake claims/P1.json` (here forced to recompute,
    as after an interrupted campaign) and then `residency verify` on it and on everything.
    The campaign's claims/ is put back afterwards, so the other tests see the run they expect."""
    work, env = campaign
    keep = work.parent / "claims-before-single"
    shutil.copytree(work / "claims", keep, symlinks=True)

    def p1():
        return {e["id"]: e for e in json.loads((work / "claims" / "ledger.json").read_text())["claims"]}["P1"]

    try:
        before = p1()["computed_on_scope"]
        p = snakemake(work, "claims/P1.json", "--cores", "1", "--forcerun", "claim", env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        assert p1()["computed_on_scope"] == before + 1, p1()
        for which in (["--claim", "P1"], ["--all"]):
            v = _residency(work, env, "verify", *which)
            assert v.returncode == 0, v.stdout + v.stderr
    finally:
        shutil.rmtree(work / "claims")
        shutil.move(keep, work / "claims")
