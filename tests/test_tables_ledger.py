"""Table 11 (the claim map) and the reference's values beside this run's, from a ledger and
the records it lists; Table 1 (the certificate obligations) from the certificate. Each is
read from its records, never typed in: a changed record changes the table, a record that is
not the ledger's stops it in one line."""

import json
import subprocess
import sys

import pytest

from residency import claims
from residency.render.tables_certificate import table1_obligations
from residency.render.tables_ledger import reference_values_table, table11_claim_map

from conftest import ROOT


def _record(cid, verdict, values):
    return {"id": cid, "verdict": verdict, "headline": f"{cid} headline", "scope": {}, "values": values,
            "assertions": [], "reasons": [],
            "commands": {"regenerate": f"snakemake --cores 1 claims/{cid}.json",
                         "verify": f"residency verify --claim {cid}", "replay": f"residency replay --claim {cid}"}}


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    """Three records (C10 before C2 and P1 in the file order) and their ledger, with paths
    relative to the working directory as the ledger rule writes them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "claims").mkdir()
    docs = {"C10": _record("C10", "fail", {"measured_bandwidth_bytes_per_s": 2.4e9}),
            "C2": _record("C2", "pass", {"p": {"limit_events_total": 3468}}),
            "P1": _record("P1", "pass", {"miss_rate_min": 1.0, "physical_per_pass_over_region_min": 1.0})}
    for cid, doc in docs.items():
        (tmp_path / "claims" / f"{cid}.json").write_text(json.dumps(doc))
    claims.ledger([tmp_path / "claims" / f"{c}.json" for c in docs], tmp_path / "claims" / "ledger.json")
    led = json.loads((tmp_path / "claims" / "ledger.json").read_text())
    for e in led["claims"]:
        e["path"] = f"claims/{e['id']}.json"
    (tmp_path / "claims" / "ledger.json").write_text(json.dumps(led))
    return tmp_path


def test_table11_has_every_claim_its_digest_verdict_and_commands(ledger):
    df = table11_claim_map("claims/ledger.json", ledger / "t11")
    led = {e["id"]: e for e in json.loads((ledger / "claims" / "ledger.json").read_text())["claims"]}
    assert list(df["ID"]) == ["P1", "C2", "C10"]  # the pager study first, then by number
    row = df.set_index("ID").loc["C10"]
    assert row["sha256"] == led["C10"]["sha256"] and len(row["sha256"]) == 64
    assert row["verdict"] == "fail" and row["headline family"] == "GPT-OSS storage-device stop"
    assert (row["regenerate"], row["verify"], row["replay"]) == (
        "snakemake --cores 1 claims/C10.json", "residency verify --claim C10", "residency replay --claim C10")
    csv, md, tex = ((ledger / f"t11.{x}").read_text() for x in ("csv", "md", "tex"))
    assert led["C10"]["sha256"] in csv
    assert led["C10"]["sha256"][:12] in md and led["C10"]["sha256"] not in md
    assert led["C10"]["sha256"][:12] in tex and led["C10"]["sha256"] not in tex and "sha256 prefix" in md


def test_a_record_changed_after_its_ledger_stops_the_table(ledger):
    p = ledger / "claims" / "C2.json"
    p.write_text(p.read_text().replace("pass", "fail"))
    proc = subprocess.run([sys.executable, "-m", "residency.cli", "table", "table11-claim-map", "--runs",
                           "claims/ledger.json", "--out-stem", str(ledger / "t11")], capture_output=True, text=True,
                          cwd=ledger, env={"PYTHONPATH": str(ROOT / "workflow"), "PATH": ""})
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "claims/C2.json is not the record the ledger lists" in proc.stderr
    assert not (ledger / "t11.csv").exists()


def test_reference_values_sit_beside_this_runs_and_a_missing_value_says_so(ledger):
    df = reference_values_table("claims/ledger.json", ledger / "refv")
    c2 = df[df["claim"] == "C2"].set_index("label")
    assert c2.loc["P: memory.max events", "reference"] == "33,481"
    assert c2.loc["P: memory.max events", "this run"] == "3,468"
    assert c2.loc["P: exact", "this run"] == "missing (no such value)"  # the record has none: never made up
    p1 = df[df["claim"] == "P1"].set_index("label")
    assert p1.loc["arm C miss rate, lowest over the runs", "this run"] == "1"
    c10 = df[df["claim"] == "C10"].set_index("label")
    assert c10.loc["measured carrier bandwidth", "this run"] == "2.4 GB/s"
    assert set(df["claim"]) == {"P1", "C2", "C10"} and (ledger / "refv.md").read_text().count("| C2 |") == len(c2)


def test_table1_lists_each_obligation_with_its_certificate_checks(tmp_path):
    from test_c1_claim import project

    root = project(tmp_path)
    df = table1_obligations(str(root / "results" / "certificate.parquet"), tmp_path / "t1")
    assert list(df["field"]) == ["I", "B, A", "E", "L"]
    rows = df.set_index("field")
    assert list(rows["verdict"]) == ["discharged"] * 4
    assert "eq3_holds = true" in rows.loc["I", "checks"] and "U_sem^LB" in rows.loc["I", "recorded"]
    assert "candidate_resource_contract = true; gpu_audit = true" == rows.loc["B, A", "checks"]
    assert "all_tokens_exact = true" in rows.loc["E", "checks"] and "L.shutdown_clean = true" in rows.loc["L", "checks"]
    same = table1_obligations(str(root / "results" / "runs" / "certificate" / "certificate.json"), tmp_path / "t1j")
    assert same.equals(df)  # the Parquet's certificate is the record's
    for ext in ("csv", "md", "tex"):
        assert (tmp_path / f"t1.{ext}").stat().st_size > 0


def test_table1_says_which_check_does_not_discharge_its_obligation(tmp_path):
    from test_c1_claim import project

    root = project(tmp_path, edit=lambda r: (r / "response.txt").write_text("abd"))
    rows = table1_obligations(str(root / "results" / "certificate.parquet"), tmp_path / "t1").set_index("field")
    assert rows.loc["E", "verdict"] == "not discharged: response_exact false"
    assert "response_exact = false" in rows.loc["E", "checks"] and rows.loc["L", "verdict"] == "discharged"


def test_table1_stops_on_a_certificate_without_a_named_check(tmp_path):
    from test_c1_claim import project

    root = project(tmp_path)
    path = root / "results" / "runs" / "certificate" / "certificate.json"
    cert = json.loads(path.read_text())
    del cert["checks"]["gpu_audit"]
    path.write_text(json.dumps(cert))
    with pytest.raises(SystemExit, match="the certificate has no check gpu_audit"):
        table1_obligations(str(path), tmp_path / "t1")
