"""Every protocol revision a claim names (its module's REVISION, recorded as
values.protocol_revision) is listed in docs/protocol-revisions.md with its reason and the
reference's sentence it follows, so the record and the list cannot drift apart."""

import re

from residency import claims
from residency.claims import model_runs

from conftest import ROOT

DOC = ROOT / "docs" / "protocol-revisions.md"


def named_revisions() -> dict[str, dict]:
    found = {m.ID: m.REVISION for m in claims.REGISTRY.values() if hasattr(m, "REVISION")}
    found["P7/P8/P9"] = model_runs.CHUNK_REVISION
    return found


def listed() -> dict[str, str]:
    """Heading id -> its section's text."""
    parts = re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]
    return {p.split(":", 1)[0].strip(): p for p in parts}


def test_every_named_revision_is_listed_with_its_reason_and_reference():
    revs, doc = named_revisions(), listed()
    assert {"C2", "C5", "C6", "C7", "C8", "P7/P8/P9"} <= set(revs)
    for cid, rev in revs.items():
        assert {"revision", "change", "reason", "follows"} <= set(rev), cid
        rid = rev["revision"]
        assert rid in doc, f"{cid}: revision {rid!r} is not a heading of {DOC.name}"
        section = doc[rid]
        assert "- Reason:" in section and "- Follows:" in section, rid


def test_the_check_finds_a_revision_that_is_not_listed():
    """Negative control: a made-up revision id is not a heading."""
    assert "C99 r7 (nowhere)" not in listed()
