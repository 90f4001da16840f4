"""`residency summary`: the README's measured section rendered from claim records and the
ledger, and the check that fails when the README's copy differs."""

import json
import subprocess
import sys

import pytest

from residency import claims
from residency.claims import summary

from conftest import ROOT
from fixtures import SOURCE_SHA256
from test_claims import SETTINGS, project

IDS = ("P1", "P4", "P5")


@pytest.fixture
def tree(tmp_path):
    root = project(tmp_path, d_extra=(16,))  # P4 fails: one D run misses once more than OPT
    for cid in IDS:
        claims.make(cid, root, SETTINGS)
    claims.make("P1", root, SETTINGS)  # computed twice on this scope
    claims.ledger([root / "claims" / f"{cid}.json" for cid in IDS], root / "claims" / "ledger.json")
    return root


def readme(root, body):
    p = root / "README.md"
    p.write_text(f"# Title\n\nSome prose.\n\n{body}\n## Next section\n")
    return p


def test_render_says_each_claims_verdict_values_and_scope(tree):
    text = summary.render(tree)
    assert text.startswith(summary.BEGIN + "\n" + summary.NOTE) and text.endswith(summary.END + "\n")
    assert "Measured on test (cpu ?, ? cpus, ?, kernel ?)." in text
    assert "| P1 | pass | 2 (2 pass) | synthetic cyclic-scan region | eeeeeeeeeeee | cccccccccccc |" in text
    assert "| P4 | fail | 1 (1 fail) |" in text
    for cid in sorted(set(claims.REGISTRY) - set(IDS)):
        assert f"| {cid} | not in the ledger | 0 | | | |" in text
    p4 = json.loads((tree / "claims" / "P4.json").read_text())
    assert f"- **P4: fail.** {p4['headline']}" in text
    failed = [a for a in p4["assertions"] if a.get("why") and a["why"] in " ".join(p4["reasons"])]
    assert failed and all(f"  - does not hold: {a['why']}" in text for a in failed)
    assert f"  Scope: model synthetic cyclic-scan region (sha256 {SOURCE_SHA256[:12]}), engine eeeeeeeeeeee, config " \
           "cccccccccccc. Computed on this scope: 1 (1 fail)." in text
    # Claims in the order of the studies: P before C, numerically.
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| P") or line.startswith("| C")]
    assert rows.index("| P4") < rows.index("| P10") and rows.index("| P11") < rows.index("| C2")


def test_render_of_an_all_true_assertion_counts_the_items(tree):
    p5 = json.loads((tree / "claims" / "P5.json").read_text())
    a = next(a for a in p5["assertions"] if a["op"] == "all_true")
    items = p5["values"][a["pointer"].removeprefix("/values/")]
    n_true = sum(1 for x in items if x is True)
    assert f"= {n_true} of {len(items)} true)" in summary.render(tree)


def test_check_passes_when_the_readme_has_what_the_records_give(tree):
    p = readme(tree, summary.render(tree))
    assert summary.check(p, tree) is None


def test_check_fails_when_the_readme_was_edited_or_the_records_changed(tree):
    p = readme(tree, summary.render(tree).replace("| P4 | fail |", "| P4 | pass |"))
    assert summary.check(p, tree) == (f"{p}: the measured section differs from what the claim records give "
                                      f"(regenerate it with: residency summary --update {p})")
    p = readme(tree, summary.render(tree))
    claims.make("P5", tree, SETTINGS)
    claims.ledger([tree / "claims" / f"{cid}.json" for cid in IDS], tree / "claims" / "ledger.json")
    assert summary.check(p, tree) is not None  # P5 now computed twice


def test_update_rewrites_only_the_section(tree):
    p = readme(tree, f"{summary.BEGIN}\nstale\n{summary.END}\n")
    summary.update(p, tree)
    text = p.read_text()
    assert text.startswith("# Title\n\nSome prose.\n\n" + summary.render(tree)) and text.endswith("\n## Next section\n")
    assert summary.check(p, tree) is None


def test_missing_markers_or_ledger_are_one_line_errors(tree, tmp_path):
    p = readme(tree, "no markers here\n")
    with pytest.raises(summary.SummaryError, match=f"^{p}: no <!-- summary:begin --> ... <!-- summary:end --> section$"):
        summary.check(p, tree)
    with pytest.raises(summary.SummaryError, match="^no claims/ledger.json"):
        summary.render(tmp_path / "empty")


def test_cli(tree):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "residency.cli", "summary", "--root", str(tree), *args],
                              capture_output=True, text=True, cwd=ROOT)
    p = run()
    assert p.returncode == 0 and p.stdout == summary.render(tree)
    md = readme(tree, "x\n")
    assert run("--check", str(md)).returncode == 2  # no section: an error
    md = readme(tree, f"{summary.BEGIN}\n{summary.END}\n")
    bad = run("--check", str(md))
    assert bad.returncode == 1 and "differs from what the claim records give" in bad.stderr
    assert run("--update", str(md)).returncode == 0 and run("--check", str(md)).returncode == 0
    assert run("--out", str(tree / "s.md")).returncode == 0 and (tree / "s.md").read_text() == summary.render(tree)
