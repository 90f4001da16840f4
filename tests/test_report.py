"""The Snakemake report of the tiny campaign: one self-contained page with every figure
captioned, every paper table, the claim ledger with each verdict and its reasons, and the
machine identity and scope; opened in headless Chromium (a screenshot is kept beside it,
results/report.png, to look at)."""

from __future__ import annotations

import base64
import html
import json
import shutil
import subprocess

import pytest

from conftest import snakemake

pytestmark = pytest.mark.integration

FIGURES = ["figures/02-miss-rate-vs-optimal.png", "figures/06-real-model-bytes.png",
           "figures/07-throughput-scaling.png", "figures/08-matched-source-pairs.png"]
TABLES = ["results/tables/pager-synthetic.csv", "results/tables/pager-model.csv",
          "results/tables/table6-matched-pairs.csv", "results/tables/models.csv",
          "results/tables/table1-obligations.csv", "results/tables/table11-claim-map.csv",
          "results/tables/reference-values.csv"]
PAGES = ["results/report/claims.html", "results/report/scope.html"]


@pytest.fixture(scope="module")
def report(campaign):
    work, env = campaign
    out = work / "results" / "report.html"
    p = snakemake(work, "--report", str(out), env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return work, out


def _embedded(page: str, name: str) -> dict:
    """The JSON object the report's <script id=NAME> assigns (`var NAME = {...};`)."""
    script = page.index(f'<script id="{name}">')
    start = page.index(f"var {name} = ", script) + len(f"var {name} = ")
    return json.JSONDecoder().raw_decode(page, start)[0]


def _data(entry: dict) -> bytes:
    return base64.b64decode(entry["data_uri"].split(";base64,", 1)[1])


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("[chromium] chromium is not installed (Debian: apt-get install chromium)")
    return exe


def _headless(*args: str) -> subprocess.CompletedProcess:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_every_figure_table_and_page_is_in_the_report(report):
    work, out = report
    results = _embedded(out.read_text(), "results")
    for rel in FIGURES + TABLES + PAGES:
        assert rel in results, f"{rel} is not in the report"
        entry = results[rel]
        assert entry["caption"].strip(), f"{rel} has no caption"
        assert _data(entry) == (work / rel).read_bytes(), f"{rel}: the report holds other bytes"
    categories = _embedded(out.read_text(), "categories")
    assert {"Figures", "Tables", "Claims", "Machine and scope"} <= set(categories), categories


def test_the_ledger_page_has_every_claim_with_its_verdict_and_reasons(report):
    work, out = report
    page = _data(_embedded(out.read_text(), "results")["results/report/claims.html"]).decode()
    ledger = json.loads((work / "claims" / "ledger.json").read_text())
    for entry in ledger["claims"]:
        rec = json.loads((work / entry["path"]).read_text())
        row = page.split(f"<b>{entry['id']}</b>", 1)
        assert len(row) == 2, f"{entry['id']} is not in the ledger page"
        assert f"<b>{rec['verdict']}</b>" in row[1][:400], entry["id"]
        for reason in rec["reasons"]:
            assert html.escape(reason) in page, (entry["id"], reason)
    side = page.split("beside this run", 1)[1]  # the reference's values, after the claims
    for entry in ledger["claims"]:
        for r in entry["reference_values"]:
            assert html.escape(r["reference"]) in side and html.escape(r["label"]) in side, (entry["id"], r["label"])


def test_the_scope_page_names_the_machine(report):
    work, out = report
    page = _data(_embedded(out.read_text(), "results")["results/report/scope.html"]).decode()
    machine = json.loads((work / "results" / "machine.json").read_text())
    assert machine["hostname"] in page and machine["kernel"] in page
    assert "host grade" in page and "pager_synthetic.main" in page


def test_chromium_renders_the_report(report):
    """The page's own code draws the menu (the categories) and the ledger page renders as a
    table with one row per claim; the screenshot is for a person to look at."""
    work, out = report
    dom = _headless("--virtual-time-budget=10000", "--dump-dom", out.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    for word in ("Figures", "Tables", "Claims", "Machine and scope"):
        assert word in dom.stdout, f"{word} not rendered"
    shot = work / "results" / "report.png"
    p = _headless("--virtual-time-budget=10000", f"--screenshot={shot}", out.as_uri())
    assert p.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p.stderr[-2000:]
    ledger_page = work / "results" / "report" / "claims.html"
    dom = _headless("--dump-dom", ledger_page.as_uri())
    claims = json.loads((work / "claims" / "ledger.json").read_text())["claims"]
    ledger_table, side_by_side = dom.stdout.split("</table>")[:2]  # the ledger, then the reference's values
    assert ledger_table.count("<tr class=") == len(claims), dom.stdout[:2000]
    assert side_by_side.count("<tr class=") == sum(len(e["reference_values"]) for e in claims)
