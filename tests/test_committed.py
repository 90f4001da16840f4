"""The committed claims/ tree is one consistent run: the ledger lists every claim of the
registry once, every record digest and history count matches, and the README's measured
section is what those records give. Skipped where no ledger is committed."""

import pytest

from residency.claims import summary, verify

from conftest import ROOT

LEDGER = ROOT / "claims" / "ledger.json"
committed = pytest.mark.skipif(not LEDGER.exists(), reason="no claims/ledger.json committed in this checkout")


@committed
def test_the_ledger_lists_every_claim_and_every_digest_matches():
    problems = verify.ledger_problems(ROOT)
    assert not problems, "the committed claims/ tree is not one consistent run:\n" + "\n".join(problems)


@committed
def test_the_readme_measured_section_is_generated_from_the_records():
    problem = summary.check(ROOT / "docs" / "results.md", ROOT)
    assert problem is None, problem
