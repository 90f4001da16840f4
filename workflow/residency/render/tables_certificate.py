"""Paper tables 1, 3, 5 and 10 of reference 004: the certificate obligations (Table 1's
fields I, B/A, E, L), each with the named checks of this run's certificate that discharge
it; the principal results by evidence identity, one row per claim record (C1, C2, C8; never
pooled); the C1 certificate instance field by field; and the compact negative results (C10's
stopped line, with C9's resident and storage-backed operating points), one row per record."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from residency.render.tables import write_table

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


# ---- Table 1: the certificate obligations, each with the checks that discharge it here ----

# Per field of reference 004's Table 1: what it obliges (in our words) and the named checks
# of the certificate (certificate.checks) that discharge it; L adds its own closure checks.
OBLIGATIONS = [
    ("I", "inventory and provenance: representation, semantic-demand and scheduler unions and cumulative "
          "traffic kept apart, each with its inclusion rule; model and engine identities; the nonresidency "
          "predicates over them (eq. 1-3)", ("eq1_holds", "eq2_holds", "eq3_holds")),
    ("B, A", "per-tier allowance and authority grade over the whole process tree and the whole board, with "
             "margins and event counters", ("candidate_resource_contract", "gpu_audit")),
    ("E", "a same-build oracle, every compared surface and the exact horizon",
     ("oracle_same_build", "all_logit_rows_exact", "all_tokens_exact", "response_exact", "all_routes_exact",
      "consumer_exact", "destination_exact")),
    ("L", "no publication before movement, the requested identity, no reuse before consumers finish, "
          "drain or invalidate at shutdown, no invalid completion made visible",
     ("lifecycle_closed", "oracle_lifecycle_closed")),
]


def read_certificate(path: str) -> tuple[dict, str]:
    """(certificate, its sha256) from results/certificate.parquet (one certified run) or a
    certificate.json."""
    import hashlib

    if str(path).endswith(".parquet"):
        t = pd.read_parquet(path, columns=["certificate_json", "certificate_sha256"])
        if len(t) != 1:
            raise SystemExit(f"residency: error: {path}: {len(t)} certified runs, one expected")
        return json.loads(t["certificate_json"].iloc[0]), str(t["certificate_sha256"].iloc[0])
    text = Path(path).read_text()
    return json.loads(text), hashlib.sha256(text.encode()).hexdigest()


def _discharged(checks: dict) -> str:
    false = [k for k, v in checks.items() if v is False]
    unknown = [k for k, v in checks.items() if v is None]
    if false:
        return "not discharged: " + ", ".join(false) + " false"
    return ("not evaluable: " + ", ".join(unknown)) if unknown else "discharged"


def _n(v) -> str:
    return "n/a" if v is None else str(v)


def _recorded(cert: dict) -> dict[str, str]:
    """What each field records, read from the certificate."""
    inv, b, a, e = cert["I"], cert["B"], cert["A"], cert["E"]
    u, h, g = inv["u_sem_lb"], b["host"], b["gpu"]
    engine = str((inv.get("engine_identity") or {}).get("engine_sha256"))
    return {
        "I": (f"T_repr {inv['t_repr']['t_repr_bytes']:,} B, S {inv['s_bytes']:,} B, U_sem^LB {u['u_sem_lb_bytes']:,} B "
              f"(union sha256 {u['union']['union_sha256'][:12]}, {u['union']['duplicate_component_intervals']} "
              f"duplicates, {u['union']['overlapping_component_intervals']} overlaps), U_sched "
              f"{inv['u_sched']['u_sched_bytes']:,} B, Q_run {inv['q_run']['physical_bytes']:,} B physical; model "
              f"sha256 {inv['model']['sha256'][:12]}, engine {engine[:12]}"),
        "B, A": (f"host {a['host']}: H_cap {_mib(h['h_cap_bytes'])}, peak {_mib(h['peak_bytes'])}, headroom "
                 f"{_mib(h['headroom_bytes'])}, {_n(h['limit_events'])} limit events, {_n(h['oom_kills'])} OOM "
                 f"kills; GPU {a['gpu']}: G_decl {_mib(g['g_decl_bytes'])}, G_phys {_mib(g['g_phys_bytes'])}, margin "
                 f"{_mib(g['margin_bytes'])}, foreign compute processes {_n(g['foreign_compute_processes'])}"
                 + (f"; {cert['gpu_note']}" if cert.get("gpu_note") else "")),
        "E": (f"{e['relation']}; horizon {e['horizon']['outputs']} outputs; oracle {e['oracle']['arm']} "
              f"({e['oracle']['run_dir']})"),
        "L": cert["L"]["transitions"],
    }


def table1_obligations(cert_path: str, stem) -> pd.DataFrame:
    """Table 1: one row per obligation field (I, B/A, E, L) with the certificate's named
    checks that discharge it, their values and whether they do, read from the certificate."""
    cert, sha = read_certificate(cert_path)
    recorded, rows = _recorded(cert), []
    for name, obligation, names in OBLIGATIONS:
        missing = [n for n in names if n not in cert["checks"]]
        if missing:
            raise SystemExit(f"residency: error: {cert_path}: the certificate has no check {', '.join(missing)}")
        checks = {n: cert["checks"][n] for n in names}
        if name == "L":  # the closure's own checks (certificate.lifecycle), each named
            checks |= {f"L.{k}": v for k, v in cert["L"]["checks"].items()}
        rows.append({"field": name, "obligation": obligation,
                     "checks": "; ".join(f"{k} = {json.dumps(v)}" for k, v in checks.items()),
                     "recorded": recorded[name], "verdict": _discharged(checks)})
    df = pd.DataFrame(rows)
    write_table(df, stem, f"Table 1: the certificate obligations, each with this run's checks (certificate "
                          f"sha256 {sha[:12]}; not evaluated: {'; '.join(cert['not_evaluated']) or 'none'})")
    return df
