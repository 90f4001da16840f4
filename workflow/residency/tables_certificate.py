"""Paper tables 3, 5 and 10 of reference 004: the principal results by evidence identity, one
row per claim record (C1, C2, C8; never pooled), the C1 certificate instance field by
field (Table 1's obligations I, B/A, E, L), and the compact negative results (C10's
stopped line, with C9's resident and storage-backed operating points), one row per record."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .tables import write_table

MiB = 1 << 20


def _mib(v) -> str:
    return "n/a" if v is None else f"{v / MiB:.2f} MiB"


def _cells_authority(values: dict) -> str:
    """The host grades and limits of a campaign's cells (C2, C8), as recorded."""
    cells = [c for c in values.get("cells") or [] if isinstance(c, dict)]
    if not cells:
        return "not carried in the record's values (see its input table's host_grade, limit_bytes)"
    grades = sorted({str(c.get("host_grade")) for c in cells})
    limits = sorted({c.get("limit_bytes") for c in cells if c.get("limit_bytes") is not None})
    return f"host {'/'.join(grades) or 'n/a'} {', '.join(_mib(x) for x in limits) or 'no limit'}"


def _c1_authority(values: dict) -> str:
    a, b = values["authority"], values["boundaries"]
    gpu = (f"GPU audited {_mib(b['gpu']['g_decl_bytes'])} on a physical {_mib(b['gpu']['g_phys_bytes'])}"
           if a["gpu"] == "audited" else f"GPU {a['gpu']} (G = 0)")
    return f"host {a['host']} {_mib(b['host']['h_cap_bytes'])}; {gpu}"


def _row(doc: dict) -> dict:
    v, scope = doc["values"], doc.get("scope") or {}
    if doc["id"] == "C1":
        authority = _c1_authority(v)
        exactness = f"{v['exactness']['relation']} over {v['exactness']['horizon']['outputs']} outputs vs zero-cache oracle"
    else:
        authority = _cells_authority(v)
        exact = v.get("d_and_f_exact") or v.get("exact") or []
        exactness = f"{sum(1 for x in exact if x is True)} of {len(exact)} compared cells oracle-exact" \
            if isinstance(exact, list) else f"oracle-exact: {exact}"
    return {"record": doc["id"], "campaign / system": f"{scope.get('model')} on {(scope.get('machine') or {}).get('hostname')}",
            "resource authority": authority, "exactness scope": exactness, "principal result": doc["headline"],
            "verdict": doc["verdict"]}


def table3_principal(claim_paths: list[str], stem) -> pd.DataFrame:
    df = pd.DataFrame([_row(json.loads(Path(p).read_text())) for p in claim_paths])
    write_table(df, stem, "Table 3: principal results by evidence identity (values not pooled across rows)")
    return df


LINES = {"C10": "carrier premise (storage bandwidth for a prespecified throughput)",
         "C9": "resident against storage-backed path (admissibility is not superiority)"}


def _consequence(doc: dict) -> str:
    """What the record's outcome means for the line, from its own values and verdict."""
    v = doc["values"]
    if doc["verdict"] == "insufficient-evidence":
        return "No outcome: " + "; ".join(doc.get("insufficient") or doc["reasons"])
    if doc["id"] == "C10":
        return ("The carrier premise did not advance to the next experiment; the stop is kept."
                if v.get("decision") == "stop" else
                "The premise holds on this machine: the line advances, the reference's stop does not reproduce.")
    return ("Two operating points of one model, not a ranking: the storage-backed path runs when capacity is "
            "binding; " + ("the resident path is preferable when latency is the objective."
                           if doc["verdict"] == "pass" else "the reference's statement does not hold here."))


def table10_negative(claim_paths: list[str], stem) -> pd.DataFrame:
    docs = [json.loads(Path(p).read_text()) for p in claim_paths]
    df = pd.DataFrame([{"record": d["id"], "line": LINES.get(d["id"], d["id"]),
                        "result": d["headline"], "consequence": _consequence(d), "verdict": d["verdict"]}
                       for d in docs])
    write_table(df, stem, "Table 10: compact negative results (C10) and the product comparison (C9); each scoped "
                          "to its own identity and prespecified criterion")
    return df


def _fields(cert: dict) -> list[tuple[str, str]]:
    inv, b, a, e, life = cert["I"], cert["B"], cert["A"], cert["E"], cert["L"]
    u = inv["u_sem_lb"]
    eq = {q["equation"]: q for q in cert["predicates"]["equations"]}
    margin = ", ".join(f"eq. {n} margin {_mib(eq[n]['margin_bytes'])}" for n in (1, 2, 3))
    return [
        ("I", f"{inv['model'].get('path')} (sha256 {inv['model']['sha256'][:12]}), engine "
              f"{str((inv.get('engine_identity') or {}).get('engine_sha256'))[:12]}; T_repr {_mib(inv['t_repr']['t_repr_bytes'])}, "
              f"U_sem^LB {_mib(u['u_sem_lb_bytes'])} ({u['routed_expert_objects']} routed expert objects; union sha256 "
              f"{u['union']['union_sha256'][:12]}, {u['union']['duplicate_component_intervals']} duplicates, "
              f"{u['union']['overlapping_component_intervals']} overlaps), U_sched {_mib(inv['u_sched']['u_sched_bytes'])}, "
              f"Q_run {_mib(inv['q_run']['physical_bytes'])} physical"),
        ("B, A", f"host {a['host']} {_mib(b['host']['h_cap_bytes'])} (peak {_mib(b['host']['peak_bytes'])}, "
                 f"{b['host']['limit_events']} limit events); GPU {a['gpu']} (G_decl {_mib(b['gpu']['g_decl_bytes'])}, "
                 f"G_phys {_mib(b['gpu']['g_phys_bytes'])}); {margin}"),
        ("E", f"same-build {e['oracle']['arm']} oracle; {e['relation']} exact: {e['exact']} over "
              f"{e['horizon']['outputs']} outputs"),
        ("L", f"{life['transitions']}; closed: {life['lifecycle_closed']}"),
        ("classes", f"R {cert['classes']['R']}, W {cert['classes']['W']}; admissible {cert['admissible']}; "
                    f"not evaluated: {'; '.join(cert['not_evaluated']) or 'none'}"),
    ]


def table5_certificate(cert_path: str, stem) -> pd.DataFrame:
    cert = json.loads(Path(cert_path).read_text())
    df = pd.DataFrame(_fields(cert), columns=["field", "C1 instantiation"])
    write_table(df, stem, "Table 5: the C1 certificate instance")
    return df
