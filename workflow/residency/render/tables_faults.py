"""Paper tables 4 and 7 of reference 004: the executable identity boundary of the principal
records (engine, adapter, source and Plan sha256 per record, as each run recorded them), and
the fault modes mapped to their invariants with the observed outcome of every cell per
adapter (results/faults.parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from residency.core.arms import ASYNC
from residency.render.tables import write_table

# Table 7's rows: (mode, cells, invariant exercised, required observation).
MODES = [
    ("No fault", ("none",), "Ordinary publication and closure",
     "Exact output; balanced tickets, windows, slots, consumers, reset and shutdown"),
    ("Short read; EIO; failed bundle extent", ("short-read", "eio", "bundle-extent-failure"),
     "Publish only after complete valid movement", "Zero accepted outputs or readiness; executor drains"),
    ("Stale completion; wrong object", ("stale-completion", "wrong-object"),
     "Published version denotes requested object and epoch", "Mismatch rejected before visibility; zero accepted outputs"),
    ("Valid out-of-order completion", ("out-of-order",), "Legal completion order is not overconstrained",
     "Full control-exact output and clean closure"),
    ("Held consumer", ("held-consumer",), "No reuse before declared consumers finish",
     "Reuse delayed; full control-exact output and balanced release"),
    ("Reset with source work; shutdown with live consumer", ("reset-outstanding", "shutdown-live-consumer"),
     "Drain or invalidate outstanding versions", "No stale publication; balanced terminal state"),
]


def _observed(r) -> str:
    """One cell's outcome as observed: its verdict, then what it did."""
    verdict = "valid" if r["valid"] is True else ("INVALID" if r["valid"] is False else "not evaluable")
    if r["class"] == "fatal":
        what = (f"{r['status']}, rejected {r['rejection_kind']}, {r['tokens']} tokens, {r['logit_rows']} logit rows, "
                f"{r['windows_retained']} window(s) retained, {r['inflight_at_close']} in flight")
    else:
        what = f"{r['status']}, {r['tokens']} tokens exact" if r["valid"] else f"{r['status']}"
        extra = {"out-of-order": ("reordered", "completions reordered"),
                 "held-consumer": ("reuse_refusals", "reuse refusals"),
                 "reset-outstanding": ("outstanding_at_reset", "reads outstanding at reset"),
                 "shutdown-live-consumer": ("shutdown_refusal", "shutdown refusal")}.get(r["cell"])
        if extra:
            v = r[extra[0]]
            what += f", {int(v) if isinstance(v, float) and v == v else v} {extra[1]}"
    star = "" if r["prespecified"] else " (beyond C3's set)"
    reasons = f" [{r['reasons']}]" if isinstance(r["reasons"], str) and r["reasons"] else ""  # NaN: none
    return f"{r['cell']}: {verdict}{star}, {what}{reasons}"


def table7_faults(runs_parquet, stem) -> pd.DataFrame:
    t = pd.read_parquet(runs_parquet)
    adapters = list(t.sort_values("adapter_rank")["adapter"].unique())
    rows = []
    for mode, cells, invariant, required in MODES:
        row = {"mode": mode, "invariant exercised": invariant, "required observation": required}
        for a in adapters:
            sub = t[(t["adapter"] == a) & t["cell"].isin(cells)]
            sub = sub.set_index("cell").reindex([c for c in cells if c in set(sub["cell"])]).reset_index()
            row[f"observed: {a}"] = "; ".join(_observed(r) for _, r in sub.iterrows()) or "not run"
        rows.append(row)
    df = pd.DataFrame(rows)
    write_table(df, stem, "Table 7: fault modes, the invariants they exercise and the observed outcome of each "
                          "cell per adapter (deterministic cells, not reliability trials)")
    return df


def _identity(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text()).get("identity") or {}


def _identity_row(record: str, role: str, ident: dict, attribution: str) -> dict:
    def p(k):
        v = ident.get(f"{k}_sha256")
        return v[:12] if v else "n/a"

    return {"record": record, "workload / role": role, "executable sha256": p("engine"),
            "adapter / source sha256": f"{p('adapter')} / {p('source')}", "plan sha256": p("plan"),
            "plan_sha256_full": ident.get("plan_sha256"), "direct attribution": attribution}


def _f_cell(parquet) -> str:
    """An F cell's run directory (the bounded direct source whose identity the row names)."""
    t = pd.read_parquet(parquet)
    f = t[t["source_arm"] == ASYNC]
    return (f if len(f) else t)["run_dir"].iloc[0]


def table4_identity(certificate, matched, bounded, faults, warm, stem) -> pd.DataFrame:
    """One row per principal record; each record's identities from one of its runs (every run
    of a record has the same, checked for the fault cells)."""
    rows = []
    cert = pd.read_parquet(certificate)
    rows.append(_identity_row("C1", "certified execution", _identity(cert["run_dir"].iloc[0]),
                              "Exactness, resources and clean no-fault closure"))
    rows.append(_identity_row("C2", "matched P/D/F source campaign", _identity(_f_cell(matched)),
                              "Source admission, paired complete-component result"))
    rows.append(_identity_row("C8", "bounded P/F pair at its own cap", _identity(_f_cell(bounded)),
                              "Host nonresidency: the bounded source's peak under the cap"))
    ft = pd.read_parquet(faults)
    for a in ft.sort_values("adapter_rank")["adapter"].unique():
        sub = ft[(ft["adapter"] == a) & ft["prespecified"]]
        ids = {tuple(sub[f"{k}_sha256"].dropna().unique()) for k in ("engine", "adapter", "source", "plan")}
        one = {k: sub[f"{k}_sha256"].dropna().iloc[0] if sub[f"{k}_sha256"].notna().any() else None
               for k in ("engine", "adapter", "source", "plan")}
        same = all(len(x) == 1 for x in ids)
        rows.append(_identity_row(f"C3 {a}", f"{len(sub)} prespecified fault/control cells", one,
                                  "Named transitions" + ("" if same else " (cells differ in identity)")))
    wt = pd.read_parquet(warm)
    rows.append(_identity_row("C12", "primary, reset, warm, reset, shutdown", _identity(wt["run_dir"].iloc[0]),
                              "Reset/warm parity and balanced teardown"))
    df = pd.DataFrame(rows)
    plans = set(df["plan_sha256_full"].dropna())
    shared = f"byte-identical across these rows (sha256 {next(iter(plans))[:12]})" if len(plans) == 1 else \
        f"NOT identical across these rows ({len(plans)} digests)"
    df = df.drop(columns=["plan_sha256_full"])
    write_table(df, stem, f"Table 4: executable identity boundary of the principal records. The Plan source is {shared}; "
                          "adapter and source identities are per record: a passing row does not transfer to another binary")
    return df
