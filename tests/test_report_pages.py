"""The report's own pages from records alone: the ledger (verdict, reasons, assertions, the
reference's statement; text escaped) and the scope (machine, features, grades per campaign)."""

import pandas as pd

from residency.render import report_pages


def _record(cid, verdict, reasons):
    return {"id": cid, "verdict": verdict, "headline": f"{cid} measured <here>", "reasons": reasons,
            "assertions": [{"pointer": "/values/x", "op": "le", "value": 1.13, "tolerance": None},
                           {"pointer": "/values/ok", "op": "all_true", "value": None}],
            "reference_statement": "D/OPT 1.08-1.13 & more"}


def test_ledger_page_lists_every_claim_with_its_verdict_and_reasons():
    records = {"P1": _record("P1", "pass", []), "C2": _record("C2", "insufficient-evidence", ["no <hard> limit"])}
    ledger = {"claims": [{"id": "C2", "sha256": "ab" * 32}, {"id": "P1", "sha256": "cd" * 32}]}
    page = report_pages.ledger_page(ledger, records)
    assert page.index("<b>C2</b>") < page.index("<b>P1</b>")  # ledger order
    assert "<tr class='insufficient-evidence'>" in page and "<tr class='pass'>" in page
    assert "no &lt;hard&gt; limit" in page and "<hard>" not in page
    assert "/values/x le 1.13" in page and "/values/ok all true" in page and "D/OPT 1.08-1.13 &amp; more" in page
    assert "2 claims (insufficient-evidence: 1, pass: 1)" in page


def test_scope_page_counts_runs_by_campaign_and_grade(tmp_path):
    df = pd.DataFrame({"campaign": ["main", "main", "stress"], "host_grade": ["hard", "unenforced", "hard"],
                       "status": ["ok", "ok", "oom-killed"]})
    df.to_parquet(tmp_path / "pager_synthetic.parquet")
    page = report_pages.scope_page({"hostname": "box", "kernel": "6.18"}, {"cgroup": {"version": 1}},
                                   {"harness.cgroup": "auto"}, {"pager_synthetic": tmp_path / "pager_synthetic.parquet"})
    assert "box" in page and "6.18" in page
    assert "<td>main</td><td>2</td><td>ok: 2</td><td>hard: 1, unenforced: 1</td>" in page
    assert "<td>stress</td><td>1</td><td>oom-killed: 1</td><td>hard: 1</td>" in page
