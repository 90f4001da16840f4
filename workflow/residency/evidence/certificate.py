"""The execution-evidence record C = (I, B, A, E, L) of one certified run (reference 004
§2.1, Table 1), written as `certificate.json` beside the run.

- I, the inventory and provenance: the model's identity, T_repr (the union of every tensor
  extent the adapter's manifest lists), S (the canonical bytes the pager managed from
  storage: the same union, every object being managed), U_sem^LB (demand.py), U_sched and
  Q_run (traffic.py), each with its rule; the engine's identities.
- B, the boundary per tier: host H_cap, R_policy, peak, headroom, events, MemTotal; GPU
  G_decl, G_phys, whole-board peak, margin, foreign compute processes.
- A, the authority grade per tier (host: hard / soft / instrumented / unenforced; GPU:
  audited / absent / failed), never combined into one grade.
- E, the exactness relation against the same-build zero-cache oracle, every term, horizon.
- L, lifecycle closure of this no-fault execution: status ok, no fault, zero reconcile
  mismatches, zero signal-audit and route violations, zero unrecorded or stray fills.

Beside the tuple: equations 1-3 (predicates.py), the admission predicate (resource.py:
positive headroom, zero limit events, zero OOM kills under a hard cap), the classes R (eq. 2) and W
(eq. 3), and the named checks; an obligation that cannot be evaluated is listed in
`not_evaluated` with why.
"""

from __future__ import annotations

import json
from pathlib import Path

from residency.core import atomic
from residency.evidence import demand, exactness, predicates, resource, traffic
from residency.evidence.extents import Interval, union

SCHEMA_VERSION = 1
FILE = "certificate.json"
T_REPR_RULE = ("T_repr: the union of the file extents of every tensor objects.json lists (each object's tensors; "
               "a tied output's tensor counted once), GGUF metadata and alignment padding excluded")
BOUNDARY = ("One execution of one build against that build's zero-cache oracle, at one model, prompt and horizon. "
            "Exactness covers every generated token's complete logit row, the tokens, the response bytes, the "
            "recorded routes and the consumer and destination records; nothing about other prompts, horizons or "
            "builds, and no fault transition (a no-fault closure only).")
S_RULE = "S: the canonical bytes managed from storage by the pager, the union of every managed object's tensors"


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def representation(objects: dict, sha: str) -> dict:
    """T_repr from the adapter's manifest: every tensor extent of every object, unioned."""
    seen = [Interval(sha, int(t["offset"]), int(t["bytes"]), t["name"])
            for o in objects["objects"] for t in o.get("tensors", [])]
    u = union(seen)
    return {"t_repr_bytes": u.bytes, "union": u.as_dict(), "inclusion_rule": T_REPR_RULE,
            "tensors": len({iv.label for iv in seen})}


def inventory(run_dir: Path, run: dict, model: dict) -> dict:
    sha = model["sha256"]
    t = representation(_json(run_dir / "objects.json"), sha)
    return {"model": model, "engine_identity": run.get("identity"), "llama": run.get("llama"),
            "t_repr": t, "s_bytes": t["t_repr_bytes"], "s_rule": S_RULE,
            "engine_tensor_bytes": (run.get("model") or {}).get("tensor_bytes"),  # residctl's own count, beside T_repr
            "u_sem_lb": demand.bound(run_dir, sha), "u_sched": traffic.scheduled(run_dir, sha),
            "q_run": traffic.cumulative(run_dir), "run_dir": str(run_dir)}


def boundaries(host: dict, gpu: dict, reserve: int | None) -> dict:
    cg = host.get("cgroup") or {}
    c = resource.HostCounters.of_harness(host)
    return {
        "host": {"h_cap_bytes": c.limit_bytes, "r_policy_bytes": reserve, "peak_bytes": c.peak_bytes,
                 "headroom_bytes": resource.headroom_bytes(c),
                 "limit_events": resource.limit_events_total(c),  # limit + (v1) pressure events
                 "oom_kills": c.oom_kills, "swap_peak_bytes": cg.get("swap_peak_bytes"),
                 "mem_total_bytes": host.get("mem_total_bytes"), "cgroup": cg.get("path")},
        "gpu": {k: gpu.get(k) for k in ("g_decl_bytes", "g_phys_bytes", "peak_used_bytes", "margin_bytes",
                                         "foreign_compute_processes", "samples", "interval_s", "boards")},
    }


def lifecycle(run: dict) -> dict:
    c, a = run.get("counters") or {}, run.get("signal_audit") or {}
    checks = {
        "status_ok": run.get("status") == "ok",
        "no_fault": (run.get("fault") or {}).get("cell", "none") in ("none", None),
        "reconcile_clean": c.get("reconcile_checks", 0) > 0 and c.get("reconcile_mismatches") == 0,
        "content_clean": c.get("content_mismatches", 0) == 0 and c.get("verify_errors", 0) == 0,
        "signal_audit_clean": all(a.get(k) == 0 for k in ("sequence_errors", "out_of_order", "foreign_reads",
                                                           "outside_reads", "objects_out_of_order")),
        "routes_checked": a.get("route_violations") == 0 and a.get("moe_steps_unrouted", 0) == 0,
        "fills_recorded": c.get("unrecorded_demand_fills") == 0 and c.get("stray_demand_fills") == 0,
        **plan_closure(run.get("plan") or {}),
    }
    return {"checks": checks, "lifecycle_closed": all(checks.values()),
            "transitions": "ordinary publication, movement, eviction, consumer release and shutdown; no fault cell"}


def plan_closure(plan: dict) -> dict:
    """The Plan's closure: balanced tickets and consumers, a clean shutdown, every slot vacant
    and every window free after it, no invariant violated."""
    return {
        "plan_balanced": plan.get("balanced") is True and (plan.get("tickets") or {}).get("balanced") is True,
        "consumers_released": (plan.get("consumers") or {}).get("balanced") is True,
        "shutdown_clean": plan.get("shutdown") == "ok" and plan.get("reconcile_violations") == 0,
        "drained": plan.get("slots") is not None and plan.get("slots_vacant_at_close") == plan.get("slots")
        and plan.get("windows_free_at_close") == plan.get("windows"),
    }


def gpu_obligation(gpu: dict, destination: dict | None) -> tuple[bool | None, str | None]:
    """The GPU audit (positive margin below G_decl, no foreign compute process): evaluated on
    an audited board; not applicable where NVML answered that there is no board and the run
    placed nothing on a device; otherwise not evaluable (never a pass)."""
    grade = gpu.get("grade")
    if grade == "audited":
        return bool((gpu.get("margin_bytes") or 0) > 0 and gpu.get("foreign_compute_processes") == 0), None
    device = ((destination or {}).get("device") or {}).get("memory")
    if grade == "absent" and not str(gpu.get("reason") or "").startswith("no NVML binding") and device == "none":
        return True, f"GPU audit not applicable: {gpu.get('reason')}; the run placed nothing on a device (G = 0)"
    return None, f"GPU audit not evaluable: grade {grade!r} ({gpu.get('reason')}), device memory {device!r}"


def oracle_record(oracle_dir: Path, run: dict) -> dict:
    o = _json(oracle_dir / "run.json")
    return {"run_dir": str(oracle_dir), "arm": o.get("arm"), "policy": o.get("policy"), "status": o.get("status"),
            "identity": o.get("identity"),
            "same_build": o.get("identity") is not None and o.get("identity") == run.get("identity")}


def checks(e: dict, eqs: dict, admissible, gpu_ok, life: dict, oracle: dict, oracle_life: dict) -> dict:
    """The named boolean checks (None: not evaluable)."""
    t = e["terms"]
    by = {q["equation"]: q["holds"] for q in eqs["equations"]}
    return {
        "oracle_same_build": oracle["same_build"], "all_logit_rows_exact": t["logits"]["equal"],
        "all_tokens_exact": t["tokens"]["equal"], "response_exact": t["response"]["equal"],
        "all_routes_exact": t["routes"]["equal"], "consumer_exact": t["consumer"]["equal"],
        "destination_exact": t["destination"]["equal"], "candidate_resource_contract": admissible,
        "gpu_audit": gpu_ok, "lifecycle_closed": life["lifecycle_closed"],
        "oracle_lifecycle_closed": oracle_life["lifecycle_closed"],
        "eq1_holds": by[1], "eq2_holds": by[2], "eq3_holds": by[3],
    }


def build(run_dir: str | Path, oracle_dir: str | Path, model: dict, reserve_bytes: int | None) -> dict:
    """C = (I, B, A, E, L) of the run in `run_dir` against its oracle; `model` is
    {path, sha256, bytes} of the GGUF it ran."""
    run_dir, oracle_dir = Path(run_dir), Path(oracle_dir)
    run, harness = _json(run_dir / "run.json"), _json(run_dir / "harness.json")
    host, gpu = harness["host"], harness["gpu"]
    inv = inventory(run_dir, run, model)
    b = boundaries(host, gpu, reserve_bytes)
    a = {"host": host.get("grade"), "host_reason": host.get("reason"), "gpu": gpu.get("grade"),
         "gpu_reason": gpu.get("reason")}
    e = exactness.relation(run_dir, oracle_dir)
    e["oracle"] = oracle_record(oracle_dir, run)
    life = lifecycle(run)
    eqs = predicates.evaluate(inv["s_bytes"], inv["t_repr"]["t_repr_bytes"], inv["u_sem_lb"]["u_sem_lb_bytes"],
                              reserve_bytes, host, gpu)
    admissible = resource.admissible(resource.HostCounters.of_harness(host))
    gpu_ok, gpu_note = gpu_obligation(gpu, run.get("destination"))
    named = checks(e, eqs, admissible, gpu_ok, life, e["oracle"], lifecycle(_json(oracle_dir / "run.json")))
    not_evaluated = [q["not_evaluable"] for q in eqs["equations"] if q["holds"] is None]
    not_evaluated += [f"{k}: not evaluable" for k, v in named.items() if v is None and not k.startswith("eq")]
    return {"schema_version": SCHEMA_VERSION, "I": inv, "B": b, "A": a, "E": e, "L": life,
            "predicates": eqs, "admissible": admissible,
            "classes": {"R": named["eq2_holds"], "W": named["eq3_holds"],
                        "E": {"relation": e["relation"], "horizon": e["horizon"]["outputs"], "exact": e["exact"]},
                        "L": life["lifecycle_closed"]},
            "checks": named, "gpu_note": gpu_note, "not_evaluated": not_evaluated, "claim_boundary": BOUNDARY,
            "harness_status": harness.get("status")}


def serialize(cert: dict) -> str:
    return json.dumps(cert, indent=1, sort_keys=True) + "\n"


def write(cert: dict, out: str | Path) -> None:
    atomic.write_text(out, serialize(cert))
