"""The reference's values beside this run's (claims/reference_values.py): every claim has a
family and entries; every reference number is the reference's own (it is in the claim's
REFERENCE text); every pointer names a value in real records (the committed run, fixture
records), a missing one is shown missing and fails here unless marked as a half this
machine may not show; the ledger carries the rows and verify re-checks them."""

import copy
import json
import re

import pytest

from residency import claims
from residency.claims import verify
from residency.claims import reference_values as rv

from conftest import ROOT

NUMBER = re.compile(r"\d[\d,.]*\d|\d")
COMMITTED = ROOT / "claims" / "ledger.json"
committed = pytest.mark.skipif(not COMMITTED.exists(), reason="no claims/ledger.json committed in this checkout")


def numbers_not_in(text: str, reference: str) -> list[str]:
    return [n for n in NUMBER.findall(text) if n not in reference]


def test_every_claim_has_a_family_and_entries_and_nothing_else_has():
    assert set(rv.FAMILIES) == set(claims.REGISTRY) and all(rv.FAMILIES.values())
    assert set(rv.ENTRIES) == set(claims.REGISTRY)
    assert all(rv.ENTRIES[cid] for cid in claims.REGISTRY), [c for c in claims.REGISTRY if not rv.ENTRIES[c]]


@pytest.mark.parametrize("cid", sorted(claims.REGISTRY))
def test_each_entry_is_well_formed_and_its_numbers_are_the_references(cid):
    reference = claims.REGISTRY[cid].REFERENCE
    for ref in rv.ENTRIES[cid]:
        assert ref.label and ref.reference and ref.pointer.startswith("/values/"), ref
        assert (ref.select is None) == (ref.field == ""), ref
        assert ref.field == "" or ref.field.startswith("/"), ref
        assert not numbers_not_in(ref.reference, reference), (cid, ref.reference, numbers_not_in(ref.reference, reference))
    labels = [r.label for r in rv.ENTRIES[cid]]
    assert len(labels) == len(set(labels)), f"{cid}: a label twice"


def test_the_number_check_finds_a_number_the_reference_does_not_state():
    """Negative control of the test above."""
    assert numbers_not_in("0.97 at 0.25", "D/A = 0.97 at r = 0.25") == []
    assert numbers_not_in("0.98, 1,349 events", "D/A = 0.97, 1,349 memory.max events") == ["0.98"]


def _committed(cid):
    return json.loads((ROOT / "claims" / f"{cid}.json").read_text())


@committed
@pytest.mark.parametrize("cid", sorted(claims.REGISTRY))
def test_every_pointer_resolves_in_the_committed_run(cid):
    """The committed records are one full run of the embedded default: every unmarked entry
    names a value there, at the reference's own points (every r of the main campaign)."""
    assert rv.unresolved(_committed(cid)) == []


def test_a_pointer_naming_nothing_is_caught_and_shown_missing():
    doc = {"id": "P1", "verdict": "pass", "values": {"miss_rate_min": 1.0}, "assertions": []}
    assert [u.split(" (")[0] for u in rv.unresolved(doc)] == [
        "P1: arm C physical bytes per pass / region, lowest"]
    row = rv.side_by_side(doc)[1]
    assert row["this_run"] is None and row["status"] == "missing" and rv.shown(row).startswith("missing (no such value")
    doc["values"]["physical_per_pass_over_region_min"] = None  # present, but null: still missing
    assert len(rv.unresolved(doc)) == 1 and rv.side_by_side(doc)[1]["why"] == "value missing"


def test_a_marked_half_missing_says_why_and_is_not_a_defect():
    doc = {"id": "C12", "verdict": "insufficient-evidence", "values": {"gpu_audited": None},
           "reasons": ["unevaluable: /values/gpu_audited: value missing (the reference's GPU half)"],
           "assertions": [{"pointer": "/values/gpu_audited", "op": "eq", "value": True}]}
    row = next(r for r in rv.side_by_side(doc) if r["pointer"] == "/values/gpu_audited")
    assert row["status"] == "not shown on this machine" and row["this_run"] is None
    assert row["why"] == "/values/gpu_audited: value missing (the reference's GPU half)"
    assert row["tested"] == "unevaluable"
    assert not any("gpu_audited" in u for u in rv.unresolved(doc))
    del doc["values"]["gpu_audited"]  # renamed away: the mark does not excuse a pointer naming nothing
    assert any("(/values/gpu_audited): no such value" in u for u in rv.unresolved(doc))


def test_a_selected_row_is_found_wherever_the_config_put_it():
    doc = {"id": "P2", "verdict": "pass", "values": {"per_r": [{"r": 0.75, "d_over_a": 0.4}, {"r": 0.25, "d_over_a": 0.9}]},
           "assertions": [{"pointer": "/values/per_r/1/d_over_a", "op": "lt", "value": 0.5}]}
    rows = {r["label"]: r for r in rv.side_by_side(doc)}
    assert rows["D/A bytes at r = 0.25"]["this_run"] == 0.9 and rows["D/A bytes at r = 0.75"]["this_run"] == 0.4
    assert rows["D/A bytes at r = 0.25"]["tested"] == "does not hold"
    assert rows["D/A bytes at r = 0.75"]["tested"] == "not asserted"
    assert rows["D/A bytes at r = 0.5"]["why"] == "no row of /values/per_r has {'r': 0.5}"
    assert rv.located(rows["D/A bytes at r = 0.25"]) == "/values/per_r/1/d_over_a"  # a pointer into this record
    assert rv.located(rows["D/A bytes at r = 0.5"]) == "/values/per_r rows with {'r': 0.5}, then /d_over_a"


def test_fixture_records_resolve(tmp_path):
    """Records computed by the claim modules from fixture Parquet (the synthetic study)."""
    from test_claims import SETTINGS, project

    root = project(tmp_path)
    for cid in ("P1", "P4"):
        doc = claims.make(cid, root, SETTINGS)
        assert rv.unresolved(doc) == [], cid
        assert [r["status"] for r in rv.side_by_side(doc)] == ["measured"] * len(rv.ENTRIES[cid])


def test_fixture_c1_record_resolves(tmp_path):
    from test_c1_claim import SETTINGS, project

    doc = claims.make("C1", project(tmp_path), SETTINGS)
    assert rv.unresolved(doc) == []
    rows = {r["label"]: r for r in rv.side_by_side(doc)}
    assert rows["T_repr"]["this_run"] == doc["values"]["inventory"]["t_repr_bytes"]
    assert rows["whole-board GPU audit"]["this_run"] is True and rows["whole-board GPU audit"]["tested"] == "holds"


def test_shown_says_checks_counts_units_and_missing():
    def row(v, unit=None, status="measured", why=None):
        return {"this_run": v, "unit": unit, "status": status, "why": why}

    assert rv.shown(row([True, False, True])) == "2 of 3 true"
    assert rv.shown(row(3 * 2**30, "B")) == "3,221,225,472 B (3 GiB)"
    assert rv.shown(row(0.7062, "vs1")) == "0.7062 (-29.4%)"
    assert rv.shown(row([8, 8, 8])) == "8 (each of 3)"
    assert rv.shown(row(None, status="missing", why="no such value")) == "missing (no such value)"


def test_side_by_side_leaves_the_record_as_it_was():
    doc = _committed("C2") if COMMITTED.exists() else {"id": "C2", "values": {}, "assertions": []}
    before = copy.deepcopy(doc)
    rv.side_by_side(doc)
    assert doc == before


def test_the_ledger_carries_the_rows_and_verify_rechecks_them(tmp_path):
    from test_claims import SETTINGS, project

    root = project(tmp_path)
    paths = []
    for cid in sorted(claims.REGISTRY):
        if cid in ("P1", "P4", "P5"):
            claims.make(cid, root, SETTINGS)
            paths.append(root / "claims" / f"{cid}.json")
    led = claims.ledger(paths, root / "claims" / "ledger.json")
    p1 = next(e for e in led["claims"] if e["id"] == "P1")
    assert p1["reference_values"] == rv.side_by_side(json.loads(paths[0].read_text()))
    assert p1["reference_values"][0]["reference"] == "exactly 1.000 in every cell"
    known = [p for p in verify.ledger_problems(root) if "does not list" not in p]
    assert known == []
    doc = json.loads((root / "claims" / "ledger.json").read_text())
    doc["claims"][0]["reference_values"][0]["this_run"] = 0.5  # edited by hand
    (root / "claims" / "ledger.json").write_text(json.dumps(doc))
    problems = [p for p in verify.ledger_problems(root) if "does not list" not in p]
    assert problems == [f"{claims.LEDGER_FILE}: P1's reference values differ from what its record gives (remake the ledger)"]
    del doc["claims"][0]["reference_values"]  # a ledger made before the rows existed is not judged on them
    (root / "claims" / "ledger.json").write_text(json.dumps(doc))
    assert [p for p in verify.ledger_problems(root) if "does not list" not in p] == []
