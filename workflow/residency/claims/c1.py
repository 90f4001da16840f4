"""C1 (reference 004 §2.1-2.2, §5.2, Table 5): the memory-sovereignty certificate of one
execution, C = (I, B, A, E, L), from results/certificate.parquet (certificate.py).

The claim: class W (U_sem^LB > H_cap + G_phys, eq. 3) or R (T_repr > H_cap + G_decl,
eq. 2) with its margin in bytes; the named relation E (logits, tokens, response bytes,
routes, consumer and destination records) exact against the same-build zero-cache oracle
over the run's horizon; a passing admission predicate (positive headroom, zero limit
events, zero OOM kills) under the recorded authority vector (host hard; GPU audited, or
absent with G = 0 where NVML finds no board and the run placed nothing on a device);
clean lifecycle closure (no fault, Plan balanced and drained, zero reconcile, signal-audit
and route violations). An obligation that cannot be evaluated leaves its value null, so
the verdict is insufficient-evidence, never pass.

The reference's statement has a GPU half: the execution ran under a whole-board GPU audit.
A certificate with no board (grade absent, G = 0, nothing placed on a device) is a valid
certificate of a host-only execution, but it does not show that half, so `gpu_audited` is
null there and the claim says insufficient-evidence for that half alone, naming it.
"""

from __future__ import annotations

import json

from residency.claims.record import Assertion, ClaimResult, fmt

ID = "C1"
REFERENCE = ("Reference claim C1: Qwen3-Next Q4_K_M at 32K+64 on an RTX 3090 under a hard 11 GiB host cgroup and "
             "a 23 GiB whole-board GPU audit on a physical 24 GiB board: T_repr = 45.08 GiB, U_sem^LB = 43.59375 GiB "
             "exceeds the declared 34 GiB envelope by 9.59375 GiB; E_64-out (all 64 complete logit rows, tokens, "
             "response bytes, routes, consumer and destination identities) exact against one same-build zero-cache "
             "comparator; zero resource events; clean no-fault lifecycle closure. Class W / E[E_64-out, 64].")
INPUTS = {"certificate": "results/certificate.parquet"}

EXACT = ("oracle_same_build", "all_logit_rows_exact", "all_tokens_exact", "response_exact", "all_routes_exact",
         "consumer_exact", "destination_exact")


def _values(cert: dict, row) -> dict:
    eqs = {f"eq{q['equation']}": {k: q[k] for k in ("statement", "lhs_bytes", "rhs_bytes", "margin_bytes", "holds",
                                                     "not_evaluable")}
           for q in cert["predicates"]["equations"]}
    w, r = cert["classes"]["W"], cert["classes"]["R"]
    return {
        "run_dir": row["run_dir"], "certificate_sha256": row["certificate_sha256"],
        "inventory": {"t_repr_bytes": cert["I"]["t_repr"]["t_repr_bytes"], "s_bytes": cert["I"]["s_bytes"],
                      "u_sem_lb_bytes": cert["I"]["u_sem_lb"]["u_sem_lb_bytes"],
                      "u_sem_lb_union": cert["I"]["u_sem_lb"]["union"], "u_sched_bytes": cert["I"]["u_sched"]["u_sched_bytes"],
                      "q_run": cert["I"]["q_run"], "route_coverage": cert["I"]["u_sem_lb"]["coverage"]},
        "authority": cert["A"], "boundaries": cert["B"], "equations": eqs,
        "claim_class": "W" if w else ("R" if r else None), "w_or_r": (w or r) if None not in (w, r) else None,
        "exactness": {"relation": cert["E"]["relation"], "horizon": cert["E"]["horizon"],
                      "first_differences": {k: t["first_difference"] for k, t in cert["E"]["terms"].items()}},
        "checks": cert["checks"], "gpu_note": cert["gpu_note"],
        "gpu_audited": True if cert["A"]["gpu"] == "audited" else None, "not_evaluated": cert["not_evaluated"],
        "lifecycle": cert["L"]["checks"],
    }


def compute(frames, settings) -> ClaimResult:
    t = frames["certificate"]
    if len(t) != 1:
        return ClaimResult(f"{len(t)} certified executions (one expected)", {"rows": len(t)}, [],
                           [f"results/certificate.parquet has {len(t)} rows, one certified execution expected"])
    row = t.iloc[0]
    cert = json.loads(row["certificate_json"])
    v = _values(cert, row)
    e3 = v["equations"]["eq3"]
    headline = (f"class {v['claim_class']}: U_sem^LB {fmt(e3['lhs_bytes'], ',')} B vs H_cap + G_phys "
                f"{fmt(e3['rhs_bytes'], ',')} B (margin {fmt(e3['margin_bytes'], ',')} B); E exact "
                f"{cert['E']['exact']} over {v['exactness']['horizon']['outputs']} outputs; host {v['authority']['host']}, "
                f"GPU {v['authority']['gpu']}; admissible {cert['admissible']}; lifecycle closed {cert['L']['lifecycle_closed']}.")
    assertions = [Assertion("/values/w_or_r", "eq", True,
                            why="class W (eq. 3) or R (eq. 2): the demand or the representation exceeds the envelope")]
    assertions += [Assertion(f"/values/checks/{k}", "eq", True, why=f"E term: {k}") for k in EXACT]
    assertions += [
        Assertion("/values/checks/candidate_resource_contract", "eq", True,
                  why="the admission predicate holds under a hard host cap (headroom > 0, no limit event, no OOM kill)"),
        Assertion("/values/checks/gpu_audit", "eq", True,
                  why="GPU: positive margin below G_decl and no foreign compute process (or no board, nothing on a device)"),
        Assertion("/values/gpu_audited", "eq", True,
                  why="the reference's GPU half: the execution under a whole-board GPU audit (grade audited); "
                      f"this execution's GPU grade: {v['authority']['gpu']} ({v['authority']['gpu_reason']})"),
        Assertion("/values/checks/lifecycle_closed", "eq", True, why="clean no-fault lifecycle closure"),
        Assertion("/values/checks/oracle_lifecycle_closed", "eq", True, why="the oracle's lifecycle closed cleanly too"),
    ]
    return ClaimResult(headline, v, assertions)
