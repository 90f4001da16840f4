"""C12 (reference 004 Appendix A.3): the shared-Plan parity process, from
results/faults_reset_warm.parquet: one process serves a primary request, a reset, an immediate
warm request, a reset and shutdown; both requests' tokens equal the same-build oracle's
(kernel-mmap, same prompt and horizon), their logit rows equal each other and the
primary's equal the oracle's; requests, resets, windows, slots, consumers and tickets
balance at teardown. The reference ran it at 8,192+32 on a 12 GiB GPU with a whole-board
audit: that half (board peak under the declared GPU budget) is named, and null here
without a board, so the verdict is insufficient-evidence for it alone.
"""

from __future__ import annotations

from residency.claims.record import Assertion, ClaimResult, as_int, as_text
from residency.evidence import resource

ID = "C12"
REFERENCE = ("Reference claim C12 (A.3): a deterministic 8,192+32 process schedules 3,384 objects per request "
             "through 144 host windows and eight GPU slots, then performs reset, an immediate-warm request, reset "
             "and shutdown; primary and warm token digests equal the inherited same-build oracle; requests, resets, "
             "windows, slots, consumers and tickets are balanced at teardown; host peak 5,013,585,920 bytes under "
             "6 GiB; whole-board peak 12,294,094,848 bytes on a 12 GiB RTX 3080 Ti, leaving the declared margin.")
INPUTS = {"warm": "results/faults_reset_warm.parquet"}


def compute(frames, settings) -> ClaimResult:
    t = frames["warm"]
    if len(t) != 1:
        return ClaimResult(f"{len(t)} reset/warm processes (one expected)", {"rows": len(t)}, [],
                           [f"results/faults_reset_warm.parquet has {len(t)} rows, one process expected"])
    r = t.iloc[0]

    def b(k):
        return None if r[k] is None else bool(r[k])

    # Two of the resource predicate's terms under a hard grade (not headroom nor pressure
    # events): C12's assertion as the protocol states it.
    t = resource.terms(resource.HostCounters.of_row(r))
    v = {"run_dir": r["run_dir"], "status": r["status"], "error": as_text(r["error"]), "requests": as_int(r["requests"]),
         "resets": as_int(r["resets"]),
         "primary_tokens_equal_oracle": b("primary_tokens_equal_oracle"),
         "warm_tokens_equal_oracle": b("warm_tokens_equal_oracle"),
         "primary_logits_equal_oracle": b("primary_logits_equal_oracle"),
         "warm_logits_equal_primary": b("warm_logits_equal_primary"),
         "balanced": {"plan": b("plan_balanced"), "tickets": b("tickets_balanced"), "consumers": b("consumers_balanced"),
                      "slots": as_int(r["slots_vacant_at_close"]) == as_int(r["slots"]),
                      "windows": as_int(r["windows_free_at_close"]) == as_int(r["windows"]),
                      "shutdown": r["plan_shutdown"] == "ok"},
         "bytes_read": {"primary": as_int(r["primary_physical_bytes_read"]), "warm": as_int(r["warm_physical_bytes_read"])},
         "host_grade": r["host_grade"],
         "resource_clean": (t["limit_events"] is True and t["oom_kills"] is True) if t["grade"] else None,
         "gpu_grade": r["gpu_grade"], "gpu_audited": True if r["gpu_grade"] == "audited" else None}
    v["balanced_all"] = [v["balanced"][k] for k in sorted(v["balanced"])]
    headline = (f"primary -> reset -> warm -> reset -> shutdown: {v['requests']} requests, {v['resets']} resets; "
                f"tokens equal the oracle: primary {v['primary_tokens_equal_oracle']}, warm "
                f"{v['warm_tokens_equal_oracle']}; bytes read primary {v['bytes_read']['primary']}, warm "
                f"{v['bytes_read']['warm']}; balanced at teardown {all(x is True for x in v['balanced_all'])}.")
    assertions = [
        Assertion("/values/requests", "eq", 2, why="two requests served in one process"),
        Assertion("/values/resets", "eq", 2, why="a reset after each request"),
        Assertion("/values/primary_tokens_equal_oracle", "eq", True, why="the primary's tokens equal the oracle's"),
        Assertion("/values/warm_tokens_equal_oracle", "eq", True, why="the warm request's tokens equal the oracle's"),
        Assertion("/values/primary_logits_equal_oracle", "eq", True, why="the primary's logit rows equal the oracle's"),
        Assertion("/values/warm_logits_equal_primary", "eq", True, why="the warm request's logit rows equal the primary's"),
        Assertion("/values/balanced_all", "all_true",
                  why="consumers, plan, shutdown, slots, tickets and windows balanced at teardown"),
        Assertion("/values/resource_clean", "eq", True, why="under a hard host limit: zero limit events, zero OOM kills"),
        Assertion("/values/gpu_audited", "eq", True,
                  why="the reference's GPU half: the process under a whole-board GPU audit (grade audited); "
                      f"grade here: {v['gpu_grade']}"),
    ]
    return ClaimResult(headline, v, assertions)
