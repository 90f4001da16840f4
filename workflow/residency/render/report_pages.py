"""The two pages of the Snakemake report that are not figures or tables: the claim ledger
(every claim's verdict, its reasons, assertions and the reference's statement, then the
reference's values beside this run's) and the run's scope (machine identity, kernel
features, what each study ran and how its runs were graded). Each page is one
self-contained HTML file, made from the records alone."""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

STYLE = """<style>
body { font-family: sans-serif; margin: 1em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eee; }
.pass { background: #d4edda; } .fail { background: #f8d7da; } .insufficient-evidence { background: #fff3cd; }
</style>"""

STUDIES = {"pager_synthetic": "synthetic pager study (reference 000)",
           "pager_model": "real-model pager study (reference 000)",
           "matched_source": "matched source campaign (reference 004 §5.3)"}


def _e(value) -> str:
    return html.escape(str(value))


def _page(title: str, body: list[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>{STYLE}</head>"
            f"<body><h1>{_e(title)}</h1>{''.join(body)}</body></html>\n")


def _table(headers: list[str], rows: list[list[str]], row_class: list[str] | None = None) -> str:
    """An HTML table; cells are already-escaped HTML."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        f"<tr class='{_e(row_class[i]) if row_class else ''}'>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _list(items) -> str:
    items = list(items)
    return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>" if items else "none"


def _assertion(a: dict) -> str:
    if a["op"] == "all_true":
        return f"{a['pointer']} all true"
    tol = f" ± {a['tolerance']}" if a.get("tolerance") is not None else ""
    return f"{a['pointer']} {a['op']} {json.dumps(a.get('value'))}{tol}"


def ledger_page(ledger: dict, records: dict[str, dict]) -> str:
    """The claim ledger: one row per ledger entry, in ledger order."""
    rows, classes = [], []
    for entry in ledger["claims"]:
        rec = records[entry["id"]]
        rows.append([f"<b>{_e(entry['id'])}</b>", f"<b>{_e(rec['verdict'])}</b>", _e(rec["headline"]),
                     _list(rec.get("reasons", [])), _list(_assertion(a) for a in rec.get("assertions", [])),
                     _e(rec.get("reference_statement", "")), f"<code>{_e(entry['sha256'][:16])}</code>"])
        classes.append(rec["verdict"])
    counts = Counter(r["verdict"] for r in records.values())
    summary = ", ".join(f"{v}: {n}" for v, n in sorted(counts.items()))
    return _page("Claim ledger", [
        f"<p>{len(rows)} claims ({_e(summary)}). Each record is <code>claims/&lt;ID&gt;.json</code>; "
        "<code>residency verify --claim ID</code> re-checks it against its inputs.</p>",
        _table(["claim", "verdict", "headline (measured here)", "reasons", "assertions",
                "reference statement", "record sha256"], rows, classes),
        *_side_by_side(ledger, records)])


def _side_by_side(ledger: dict, records: dict[str, dict]) -> list[str]:
    """The reference's values beside this run's, per claim in ledger order: this run's read
    from the record through its pointer, shown missing where the record has none."""
    from residency.claims import reference_values as rv

    rows, classes = [], []
    for entry in ledger["claims"]:
        for r in rv.side_by_side(records[entry["id"]]):
            rows.append([f"<b>{_e(entry['id'])}</b>", _e(r["label"]), _e(r["reference"]), _e(rv.shown(r)),
                         f"<code>{_e(rv.located(r))}</code>", _e(r["tested"]), _e(r["verdict"])])
            classes.append(str(r["verdict"]))
    return ["<h2>The reference's values beside this run's</h2>",
            "<p>The reference's numbers are its own, at its own models and machines; this run's are read from "
            "each record through the pointer (a value the record lacks is shown missing, with why); "
            "<i>tested</i> is how the record's assertions on that value came out.</p>",
            _table(["claim", "label", "reference", "this run", "pointer", "tested", "claim verdict"], rows, classes)]


def _kv_table(d: dict) -> str:
    return _table(["key", "value"], [[_e(k), _e(json.dumps(v) if isinstance(v, (dict, list)) else v)]
                                     for k, v in d.items()])


def _study_rows(parquets: dict[str, Path]) -> list[list[str]]:
    import pandas as pd

    rows = []
    for name, path in parquets.items():
        df = pd.read_parquet(path)
        for campaign, g in df.groupby("campaign", sort=True):
            grades = ", ".join(f"{k}: {v}" for k, v in sorted(g["host_grade"].value_counts().items()))
            status = ", ".join(f"{k}: {v}" for k, v in sorted(g["status"].value_counts().items()))
            rows.append([_e(STUDIES.get(name, name)), _e(campaign), _e(len(g)), _e(status), _e(grades)])
    return rows


def campaign_scope(config: dict) -> dict:
    """What the config asks each study to run (the sizes a reader needs beside the verdicts)."""
    ps, pm, ms = config["pager_synthetic"], config["pager_model"], config["matched_source"]
    return {
        "pager_synthetic.main": {k: ps["main"][k] for k in ("arms", "ratios", "reps", "threads")},
        "pager_synthetic.stress": {k: ps["stress"][k] for k in ("arms", "ratio", "threads", "compute_us", "signals", "reps")},
        "pager_synthetic.region_bytes": ps["region_bytes"],
        "pager_model": {k: pm[k] for k in ("models", "tokens", "threads", "arms", "ratios", "reps", "baseline_reps")},
        "matched_source": {k: ms[k] for k in ("ratio", "policy", "pairs")},
        "harness.cgroup": config["harness"]["cgroup"],
    }


def scope_page(machine: dict, probe: dict, scope: dict, parquets: dict[str, Path]) -> str:
    """Machine identity, kernel features, the campaigns' sizes and every run's grade."""
    features = {"kernel": probe.get("kernel"), "userfaultfd": probe.get("userfaultfd", {}).get("how"),
                "o_direct": probe.get("o_direct", {}).get("supported"),
                "io_uring": probe.get("io_uring", {}).get("supported"),
                "cgroup": probe.get("cgroup"), "transparent_hugepage": probe.get("transparent_hugepage")}
    return _page("Machine and scope", [
        "<h2>Machine</h2>", _kv_table(machine),
        "<h2>Kernel features (residctl probe)</h2>", _kv_table(features),
        "<h2>What was run (config)</h2>", _kv_table(scope),
        "<h2>Runs and their host grade</h2>",
        "<p>hard: the run's own memory cgroup with its limit; instrumented: a cgroup without a limit "
        "(the unconstrained baselines and oracles); unenforced: no cgroup could be made (the reason "
        "is in the run's harness.json) and claims that need a hard limit say insufficient-evidence.</p>",
        _table(["study", "campaign", "runs", "status", "host grade"], _study_rows(parquets))])


def write_ledger_page(ledger_path: str, out: str) -> None:
    from residency.core import atomic

    ledger = json.loads(Path(ledger_path).read_text())
    records = {e["id"]: json.loads(Path(e["path"]).read_text()) for e in ledger["claims"]}
    atomic.write_text(out, ledger_page(ledger, records))


def write_scope_page(machine: str, probe: str, scope_json: str, parquets: list[str], out: str) -> None:
    from residency.core import atomic

    paths = {Path(p).stem: Path(p) for p in parquets}
    atomic.write_text(out, scope_page(json.loads(Path(machine).read_text()), json.loads(Path(probe).read_text()),
                                      json.loads(scope_json), paths))
