"""Every protocol revision a claim's record names (values.protocol_revisions: the shared
ones of residency/claims/revisions.py that name the claim, then its module's REVISION) is
listed in docs/protocol-revisions.md with its reason and the reference's sentence it
follows, under a "Claims:" line that names the claim, so the record and the list cannot
drift apart."""

import re

from residency import claims
from residency.claims import revisions

from conftest import ROOT

DOC = ROOT / "docs" / "protocol-revisions.md"


def named_revisions() -> dict[str, list[dict]]:
    """Claim id -> the revisions its record names."""
    return {cid: revisions.of(cid, mod) for cid, mod in claims.REGISTRY.items()}


def listed() -> dict[str, str]:
    """Heading id -> its section's text."""
    parts = re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]
    return {p.split(":", 1)[0].strip(): p for p in parts}


def test_every_named_revision_is_listed_with_its_reason_and_reference():
    named, doc = named_revisions(), listed()
    assert {cid for cid, revs in named.items() if revs} >= {"C2", "C5", "C6", "C7", "C8", "P2", "P6", "P7", "P8", "P9"}
    for cid, revs in named.items():
        for rev in revs:
            assert {"revision", "change", "reason", "follows"} <= set(rev), cid
            rid = rev["revision"]
            assert rid in doc, f"{cid}: revision {rid!r} is not a heading of {DOC.name}"
            assert "- Reason:" in doc[rid] and "- Follows:" in doc[rid], rid


def test_every_listed_revision_is_named_by_the_claims_it_lists():
    """The other way round: a section's "Claims:" line (or its heading's claim) names the
    claims whose records carry it, so no revision is listed and never recorded."""
    named = {cid: {r["revision"] for r in revs} for cid, revs in named_revisions().items()}
    for rid, section in listed().items():
        line = re.search(r"^- Claims: (.*(?:\n  .*)*)", section, flags=re.M)  # the item with its wrapped lines
        ids = set(re.findall(r"\b[CP]\d+\b", line.group(1) if line else rid.split()[0]))
        assert ids, f"{rid}: no claim named"
        assert {cid for cid in ids if rid in named.get(cid, set())} == ids, (rid, sorted(ids))


def test_a_record_names_the_shared_revisions_then_its_own():
    p9 = [r["revision"] for r in revisions.of("P9", claims.REGISTRY["P9"])]
    assert p9 == ["harness reserve r1 (issue 22)", "harness reserve r2 (issue 23)", "chunk scale r1 (issue 22)",
                  "kernel baseline premise r1 (issue 23)"]
    assert [r["revision"] for r in revisions.of("C2", claims.REGISTRY["C2"])][-1] == "C2 r1 (issue 22)"
    assert revisions.of("P4", claims.REGISTRY["P4"]) == []


def test_the_check_finds_a_revision_that_is_not_listed():
    """Negative control: a made-up revision id is not a heading."""
    assert "C99 r7 (nowhere)" not in listed()
