"""`residency verify --deep` and `--all` on fixture trees: an untampered tree passes; a
changed counter in a run.json, a flipped byte in trace.bin or logits.f32, a rewritten
manifest, a stale analysis and a table gathered differently are each caught, with one
line naming where."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from residency.analysis import opt as analysis
from residency import claims
from residency.gather import pager as gather
from residency.claims import verify

from conftest import ROOT
from fixtures import SOURCE_SHA256, flip_byte, seal, set_counter
from test_claims import SETTINGS as SYNTHETIC_SETTINGS, project as synthetic_project
from test_model_claims import SETTINGS as MODEL_SETTINGS, project as model_project

SETTINGS = {**SYNTHETIC_SETTINGS, **MODEL_SETTINGS}


def run_dirs(root, table):
    return pq.read_table(root / "results" / table, columns=["run_dir"]).column("run_dir").to_pylist()


def with_claims(root, ids):
    for cid in ids:
        claims.make(cid, root, SETTINGS)
    return root


@pytest.fixture
def synthetic(tmp_path):
    return with_claims(synthetic_project(tmp_path), ("P1", "P4", "P5"))


@pytest.fixture
def model(tmp_path):
    return with_claims(model_project(tmp_path), ("P2", "P7", "P11"))


def test_an_untampered_synthetic_tree_passes(synthetic):
    for cid in ("P1", "P4", "P5"):
        assert verify.verify(cid, synthetic, deep=True) == [], cid


def test_an_untampered_model_tree_passes(model):
    for cid in ("P2", "P7", "P11"):
        assert verify.verify(cid, model, deep=True) == [], cid


@pytest.mark.parametrize("cid", ["P1", "P4"])  # a gathered input; an analysed one (through its lineage)
def test_a_changed_counter_is_one_line_naming_the_run_and_file(synthetic, cid):
    target = run_dirs(synthetic, "pager_synthetic.parquet")[5]
    assert verify.verify(cid, synthetic) == []
    set_counter(target, "physical_bytes_read", 12345)
    assert verify.verify(cid, synthetic) == []  # the shallow check cannot see the runs
    found = verify.verify(cid, synthetic, deep=True)
    assert len(found) == 1, found
    assert found[0].startswith(f"{target}/run.json: ") and "changed since the run" in found[0]


def test_a_flipped_trace_byte_is_caught(synthetic):
    target = run_dirs(synthetic, "pager_synthetic.parquet")[0]
    flip_byte(synthetic / target / "trace.bin")
    found = verify.verify("P5", synthetic, deep=True)
    assert len(found) == 1 and found[0].startswith(f"{target}/trace.bin: sha256"), found


def test_a_flipped_logit_byte_is_caught(model):
    target = run_dirs(model, "pager_model.parquet")[7]
    flip_byte(model / target / "logits.f32")
    found = verify.verify("P11", model, deep=True)
    assert len(found) == 1 and found[0].startswith(f"{target}/logits.f32: sha256"), found


def test_a_resealed_run_is_caught_by_the_gathered_digest(model):
    target = run_dirs(model, "pager_model.parquet")[3]
    set_counter(target, "misses", 1)
    seal(model / target)  # the run directory is consistent again, but not the one gathered
    found = verify.verify("P2", model, deep=True)
    assert len(found) == 1 and found[0].startswith(f"{target}/manifest.json: ") and "gathered" in found[0], found


def test_a_table_that_no_longer_gathers_the_same_is_caught(synthetic):
    # A run gathered as incomplete (no manifest) has no digests to check: the fresh gather
    # is what catches a change in it.
    target = run_dirs(synthetic, "pager_synthetic.parquet")[2]
    (synthetic / target / "manifest.json").unlink()
    res = synthetic / "results"
    dirs = run_dirs(synthetic, "pager_synthetic.parquet")
    gather.gather_pager_synthetic(dirs, res.parent / "region.json", res / "pager_synthetic.parquet")
    claims.make("P1", synthetic, SETTINGS)
    assert verify.verify("P1", synthetic, deep=True) == []
    before = json.loads((Path(target) / "run.json").read_text())["counters"]["physical_bytes_read"]
    set_counter(target, "physical_bytes_read", 7)
    found = verify.verify("P1", synthetic, deep=True)
    assert found == [f"results/pager_synthetic.parquet: row {target}: physical_bytes_read is {before}, "
                     "7 when gathered again"], found


def test_a_stale_analysis_is_caught(synthetic):
    res = synthetic / "results"
    target = run_dirs(synthetic, "pager_synthetic.parquet")[4]
    set_counter(target, "evictions", 99)
    seal(synthetic / target)
    gather.gather_pager_synthetic(run_dirs(synthetic, "pager_synthetic.parquet"), synthetic / "region.json",
                                  res / "pager_synthetic.parquet")
    # P4 reads only the OPT table, which was computed from the table as it was before.
    assert verify.verify("P4", synthetic) == []
    found = verify.verify("P4", synthetic, deep=True)
    assert len(found) == 1, found
    assert re.match(r"results/pager_synthetic_opt.parquet: made from \S*results/pager_synthetic.parquet with sha256 "
                    r"[0-9a-f]{16}, which is now [0-9a-f]{16}: stale \(rerun the analysis\)$", found[0]), found
    analysis.analyse_pager_synthetic(res / "pager_synthetic.parquet", res / "pager_synthetic_opt.parquet",
                                     res / "pager_synthetic_determinism.parquet")
    claims.make("P4", synthetic, SETTINGS)
    assert verify.verify("P4", synthetic, deep=True) == []


def test_a_table_without_lineage_is_not_deep_verified(synthetic):
    import pandas as pd
    p = synthetic / "results" / "pager_synthetic.parquet"
    pd.read_parquet(p).to_parquet(p, index=False)  # same rows, written by hand
    claims.make("P1", synthetic, SETTINGS)
    assert verify.verify("P1", synthetic, deep=True) == [
        "results/pager_synthetic.parquet: records no lineage (made before run manifests); regenerate it"]


# ---- --all: every claim and the ledger ----------------------------------------------------

IDS = ("P1", "P4", "P5")


@pytest.fixture
def registry(monkeypatch):
    """The registry of the claims the synthetic fixture tree can support."""
    monkeypatch.setattr(claims, "REGISTRY", {cid: claims.REGISTRY[cid] for cid in IDS})


def ledger(root):
    return claims.ledger([root / "claims" / f"{cid}.json" for cid in IDS], root / "claims" / "ledger.json")


def test_all_passes_on_a_consistent_tree_and_names_each_problem(synthetic, registry):
    assert all(not p for p in verify.verify_all(synthetic).values())  # each claim refreshed its entry
    (synthetic / "claims" / "ledger.json").unlink()
    assert verify.verify_all(synthetic)[verify.LEDGER] == [f"no {claims.LEDGER_FILE} (make it with: "
                                                           f"snakemake --cores 1 {claims.LEDGER_FILE})"]
    ledger(synthetic)
    assert all(not p for p in verify.verify_all(synthetic, deep=True).values())
    target = run_dirs(synthetic, "pager_synthetic.parquet")[1]
    set_counter(target, "hits", 0)
    found = verify.verify_all(synthetic, deep=True)
    assert found[verify.LEDGER] == []
    assert all(len(found[cid]) == 1 and found[cid][0].startswith(f"{target}/run.json") for cid in IDS), found


def test_a_claim_made_alone_or_in_parallel_keeps_the_ledger_true(synthetic, registry):
    from concurrent.futures import ThreadPoolExecutor

    ledger(synthetic)
    claims.make("P1", synthetic, SETTINGS)  # `snakemake claims/P1.json --forcerun claim`
    assert verify.verify("P1", synthetic) == [] and all(not p for p in verify.verify_all(synthetic).values())
    (synthetic / "claims" / "ledger.json").unlink()
    with ThreadPoolExecutor(3) as pool:  # three claim jobs at once, no ledger yet
        list(pool.map(lambda cid: claims.make(cid, synthetic, SETTINGS), IDS))
    led = json.loads((synthetic / "claims" / "ledger.json").read_text())
    assert [e["id"] for e in led["claims"]] == sorted(IDS) == sorted(IDS, key=lambda c: f"claims/{c}.json")
    assert all(not p for p in verify.verify_all(synthetic).values())


def test_all_checks_the_ledger_lists_every_claim_once_with_matching_digests(synthetic, registry):
    claims.ledger([synthetic / "claims" / "P1.json", synthetic / "claims" / "P4.json"],
                  synthetic / "claims" / "ledger.json")
    assert verify.ledger_problems(synthetic) == [f"{claims.LEDGER_FILE} does not list P5"]
    ledger(synthetic)
    stale = (synthetic / "claims" / "ledger.json").read_text()
    claims.make("P4", synthetic, SETTINGS)  # the same record again: the claim refreshes its ledger entry
    assert verify.verify_all(synthetic)[verify.LEDGER] == []
    (synthetic / "claims" / "ledger.json").write_text(stale)  # a ledger from before that computation
    assert verify.verify_all(synthetic)[verify.LEDGER] == [
        f"{claims.LEDGER_FILE}: P4 says {{'computed_on_scope': 1, 'verdicts_on_scope': {{'pass': 1}}, "
        "'computed_in_all': 1}, its history says {'computed_on_scope': 2, 'verdicts_on_scope': {'pass': 2}, "
        "'computed_in_all': 2}"]
    ledger(synthetic)
    rec = synthetic / "claims" / "P4.json"
    doc = json.loads(rec.read_text())
    doc["headline"] += " (edited by hand)"
    rec.write_text(json.dumps(doc))
    found = verify.verify_all(synthetic)
    assert found[verify.LEDGER] == [f"{claims.LEDGER_FILE} digest for P4 does not match the record",
                                    "claims/P4.json is not in claims/history/P4.jsonl: it was not made by `residency claim`"]
    assert found["P4"] == []  # each line said once, under the ledger
    assert sorted(verify.verify("P4", synthetic)) == sorted(found[verify.LEDGER])


def test_cli_exit_status_and_lines(synthetic):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "residency.cli", "verify", *args, "--root", str(synthetic)],
                              capture_output=True, text=True, cwd=ROOT)
    assert run("--claim", "P1", "--deep").returncode == 0
    target = run_dirs(synthetic, "pager_synthetic.parquet")[0]
    set_counter(target, "misses", 3)
    p = run("--claim", "P1", "--deep")
    assert p.returncode == 1
    assert p.stdout.splitlines()[0] == "residency verify P1: FAILED (1 problems)"
    assert p.stdout.splitlines()[1].startswith(f"  - {target}/run.json: ")
    p = run("--all")
    assert p.returncode == 1 and "residency verify ledger: FAILED" in p.stdout


def test_deep_verify_re_hashes_the_model_bytes_a_scope_names(synthetic):
    """One byte of the region the runs read flipped with its mtime kept: the shallow check and
    the manifests cannot see it; the deep one names the file. A missing file is named too."""
    region = synthetic / "region.bin"
    st = region.stat()
    flip_byte(region, 3)
    os.utime(region, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify.verify("P1", synthetic) == []
    found = verify.verify("P1", synthetic, deep=True)
    assert len(found) == 1 and found[0].startswith("region.bin: sha256 is now "), found
    assert "the runs of results/pager_synthetic.parquet read" in found[0]
    region.unlink()
    found = verify.verify("P1", synthetic, deep=True)
    assert len(found) == 1 and found[0].startswith("region.bin: missing (the runs of results/pager_synthetic.parquet"), found


def test_each_model_file_is_hashed_once_per_verify(synthetic, registry, monkeypatch):
    from residency.claims import deep

    seen = []
    monkeypatch.setattr(deep, "_hash", lambda p: seen.append(p) or SOURCE_SHA256)
    assert all(not p for p in verify.verify_all(synthetic, deep=True).values())
    assert seen == ["region.bin"]
