"""Tables 3 and 5: one row per claim record (C1's authority vector and relation from its
certificate; C2's and C8's from their cells), and the C1 instance field by field."""

import json

from residency import claims
from residency.render.tables_certificate import table3_principal, table5_certificate
from test_c1_claim import SETTINGS, project


def fake_campaign_record(path, cid):
    doc = {"id": cid, "headline": f"{cid} headline", "verdict": "pass",
           "scope": {"model": "smollm2", "machine": {"hostname": "test"}},
           "values": {"cells": [{"host_grade": "hard", "limit_bytes": 64 << 20}, {"host_grade": "hard", "limit_bytes": None}],
                      "d_and_f_exact": [True, True, False]}}
    path.write_text(json.dumps(doc))
    return str(path)


def _strip_cells(path):
    doc = json.loads(open(path).read())
    doc["values"].pop("cells")
    open(path, "w").write(json.dumps(doc))


def test_table5_lists_every_obligation_of_the_instance(tmp_path):
    root = project(tmp_path, gpu=None)
    df = table5_certificate(str(root / "results/runs/certificate/certificate.json"), tmp_path / "t5")
    assert list(df["field"]) == ["I", "B, A", "E", "L", "classes"]
    text = dict(zip(df["field"], df["C1 instantiation"]))
    assert "U_sem^LB" in text["I"] and "1 duplicates, 0 overlaps" in text["I"]
    assert "host hard" in text["B, A"] and "GPU absent" in text["B, A"] and "eq. 3 margin" in text["B, A"]
    assert "exact: True over 3 outputs" in text["E"] and "closed: True" in text["L"]
    for ext in ("csv", "md", "tex"):
        assert (tmp_path / f"t5.{ext}").stat().st_size > 0


def test_table3_has_one_row_per_record_never_pooled(tmp_path):
    root = project(tmp_path, gpu=None)
    c1 = root / "claims" / "C1.json"
    claims.make("C1", root, SETTINGS, c1)
    c8 = fake_campaign_record(tmp_path / "C8.json", "C8")
    _strip_cells(c8)
    paths = [str(c1), fake_campaign_record(tmp_path / "C2.json", "C2"), c8]
    df = table3_principal(paths, tmp_path / "t3")
    assert list(df["record"]) == ["C1", "C2", "C8"]
    r = df.set_index("record")
    assert r.loc["C1", "resource authority"].startswith("host hard") and "GPU absent (G = 0)" in r.loc["C1", "resource authority"]
    assert "E = E_logits" in r.loc["C1", "exactness scope"] and r.loc["C1", "verdict"] == "insufficient-evidence"
    assert r.loc["C2", "resource authority"] == "host hard 64.00 MiB"
    assert r.loc["C2", "exactness scope"] == "2 of 3 compared cells oracle-exact"
    assert r.loc["C8", "resource authority"].startswith("not carried in the record's values")
    assert "C8 headline & pass" in (tmp_path / "t3.tex").read_text()
