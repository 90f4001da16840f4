"""Tables made from the claim ledger and the records it lists: Table 11 of reference 004 (the
claim map: each claim, its record and digest, its verdict, and the commands that make,
verify and replay it) and the reference's values beside this run's, claim by claim
(claims/reference_values.py). A ledger entry whose digest is not its record's stops the
table: it would print a map to another record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from residency.claims import reference_values
from residency.core.identity import sha256_file
from residency.render.tables import write_table

COMMANDS = ("regenerate", "verify", "replay")


def _order(cid: str) -> tuple:
    """P1..P11 then C1..C12, as the README's summary lists them."""
    m = re.match(r"([A-Z]+)(\d+)$", cid)
    return (m.group(1) != "P", m.group(1), int(m.group(2))) if m else (True, cid, 0)


def ledger_records(ledger_path: str) -> list[tuple[dict, dict]]:
    """(ledger entry, record) per claim, in claim order; the record is read from the entry's
    path and must have the entry's digest."""
    entries = json.loads(Path(ledger_path).read_text())["claims"]
    out = []
    for e in sorted(entries, key=lambda e: _order(e["id"])):
        if sha256_file(e["path"]) != e["sha256"]:
            raise SystemExit(f"residency: error: {ledger_path}: {e['path']} is not the record the ledger lists "
                             "(remake the ledger)")
        out.append((e, json.loads(Path(e["path"]).read_text())))
    return out


def table11_claim_map(ledger_path: str, stem) -> pd.DataFrame:
    """Table 11: one row per claim of the ledger; the CSV keeps each full sha256, Markdown
    and LaTeX print its first 12 hex digits."""
    rows = []
    for e, doc in ledger_records(ledger_path):
        cmds = doc.get("commands") or {}
        rows.append({"ID": e["id"], "headline family": reference_values.FAMILIES.get(e["id"], "n/a"),
                     "record": e["path"], "sha256": e["sha256"], "verdict": e["verdict"],
                     **{k: cmds.get(k, "none recorded") for k in COMMANDS}})
    df = pd.DataFrame(rows, columns=["ID", "headline family", "record", "sha256", "verdict", *COMMANDS])
    printed = df.assign(sha256=df["sha256"].str[:12]).rename(columns={"sha256": "sha256 prefix"})
    write_table(df, stem, f"Table 11: the claim map of {ledger_path}: each claim's record, its digest (whole in "
                          "the CSV), its verdict, and the commands that make, verify and replay it", printed)
    return df


def reference_values_table(ledger_path: str, stem) -> pd.DataFrame:
    """Per claim and entry: the reference's value, this run's (missing where the record has
    none), the outcome of the record's assertions on it, and the claim's verdict."""
    rows = []
    for e, doc in ledger_records(ledger_path):
        for r in reference_values.side_by_side(doc):
            rows.append({"claim": e["id"], "label": r["label"], "reference": r["reference"],
                         "this run": reference_values.shown(r), "pointer": reference_values.located(r),
                         "tested": r["tested"], "verdict": r["verdict"]})
    df = pd.DataFrame(rows, columns=["claim", "label", "reference", "this run", "pointer", "tested", "verdict"])
    write_table(df, stem, "The reference's values beside this run's, per claim (the reference's numbers are its "
                          "own, at its own models and machines; this run's are read from each record through the "
                          "pointer; tested: the record's assertions on that value)")
    return df
