"""The validators of the fault cells (reference 004 §5.4, Table 7), as functions of what one
cell's run recorded (its `facts`, read by gather_faults.py).

Every validator is a named check whose value is True (holds), False (violated) or None
(cannot be evaluated here, e.g. no hard host limit); a cell is valid only when every check
is True. The checks of a cell:

- every cell: the cell fired as asked (the control: no fault), under a hard host limit,
  with zero limit events and zero OOM kills;
- fatal cells (short read, EIO, failed bundle extent, stale completion, wrong object): the
  run failed closed with the cell's own rejection; zero accepted tokens and logit rows;
  nothing of the faulted bundle published, no content mismatch, no invariant violation;
  the interrupted window kept out of reuse while its read may still land (every window not
  free at close holds the live ticket of a read whose completion never came, and at least
  one read was interrupted: rejected, or never completed); the source executor drained
  (nothing in flight). This Plan returns the window of a *rejected* read (its completion
  came) without a copy (plan/state.hpp), and retains only windows whose completion never
  came; `windows_retained` records which, per cell;
- the control against the oracle (kernel-mmap, same build): tokens, logit rows, response
  and routes exact; and it closes cleanly;
- recoverable cells against the control: tokens, logit rows, response, routes, consumer and
  destination records, source identity and final cache state exact; closes cleanly; and
  the cell's own evidence (out-of-order: completions handed out reversed; held consumer:
  reuse refused while held, then released; reset: reads outstanding at the reset, none of
  the old epoch published; shutdown: refused while a consumer is live, then clean).
"""

from __future__ import annotations

from residency.evidence import resource

FATAL_REJECTION = {"short-read": "short-read", "eio": "read-failed", "bundle-extent-failure": "read-failed",
                   "stale-completion": "stale-generation", "wrong-object": "wrong-object"}
CONTROL_TERMS = ("tokens", "logits", "response", "routes")
RECOVERABLE_TERMS = CONTROL_TERMS + ("consumer", "destination", "source_identity", "final_cache")


def _common(f: dict) -> dict:
    # Two of the resource predicate's terms under a hard grade (not headroom nor pressure
    # events): Table 7's validator as the protocol states it.
    t = resource.terms(resource.HostCounters.of_row(f))
    return {
        "fired": (f["fault"] is None) if f["cell"] == "none" else bool((f["fault"] or {}).get("fired")),
        "hard_host_limit": t["grade"],
        "zero_limit_events": resource.all_hold((t["limit_events"], t["oom_kills"])) if t["grade"] else None,
    }


def _fatal(f: dict) -> dict:
    rej, plan = f.get("rejection") or {}, f["plan"]
    kind_ok = rej.get("kind") == FATAL_REJECTION[f["cell"]]
    if f["cell"] == "bundle-extent-failure":
        kind_ok = kind_ok and len(rej.get("bundle") or []) >= 2
    return {
        "failed_closed": f["status"] == "failed" and kind_ok,
        "zero_tokens": f["tokens"] == 0 and not f["has_tokens_file"],
        "zero_logit_rows": f["logit_rows"] == 0,
        "nothing_invalid_published": bool(rej) and rej.get("bundle_chunks_published") == 0
        and (f["content_mismatches"] or 0) == 0 and plan.get("first_violation") is None,
        "interrupted_window_kept_from_reuse": _interrupted_kept(plan),
        "executor_drained": f["source"].get("inflight_at_close") == 0,
    }


def windows_retained(plan: dict) -> int | None:
    """Plan windows not free at close (held by reads whose completion never came)."""
    w, free = plan.get("windows"), plan.get("windows_free_at_close")
    return None if w is None or free is None else w - free


def _interrupted_kept(plan: dict) -> bool:
    t = plan.get("tickets") or {}
    retained = windows_retained(plan)
    return bool(retained is not None and retained == t.get("live")
                and (t.get("rejected") or 0) + (t.get("live") or 0) >= 1)


def _closed(f: dict) -> bool:
    """Status ok, the Plan balanced and shut down, nothing in flight, no ticket outstanding,
    every window free."""
    plan, s = f["plan"], f["source"]
    return bool(f["status"] == "ok" and plan.get("balanced") and plan.get("shutdown") == "ok"
                and s.get("inflight_at_close") == 0 and s.get("tickets_outstanding_at_close") == 0
                and s.get("windows_free_at_close") == s.get("windows"))


def _evidence(f: dict) -> dict:
    """The recoverable cell's own observation: that it exercised what it names."""
    x, plan = f["fault"] or {}, f["plan"]
    cell = f["cell"]
    if cell == "out-of-order":
        return {"completions_reordered": (x.get("reordered") or 0) >= 2}
    if cell == "held-consumer":
        return {"reuse_delayed": (x.get("reuse_refusals") or 0) >= 1, "consumer_released": x.get("released") is True}
    if cell == "reset-outstanding":
        return {"reads_outstanding_at_reset": (x.get("outstanding_at_reset") or 0) >= 1,
                "no_stale_publication": x.get("stale_published") == 0, "one_reset": plan.get("resets") == 1}
    if cell == "shutdown-live-consumer":
        return {"shutdown_refused_while_live": x.get("shutdown_refusal") == "consumers-live"}
    return {}


def _exact(f: dict, terms: tuple[str, ...]) -> dict:
    return {f"{t}_exact": (f["exact"] or {}).get(t) for t in terms}


def checks(f: dict) -> dict:
    """Every check of one cell, by name."""
    out = _common(f)
    if f["class"] == "fatal":
        return out | _fatal(f)
    if f["class"] == "control":
        return out | _exact(f, CONTROL_TERMS) | {"closed_cleanly": _closed(f)}
    return out | _exact(f, RECOVERABLE_TERMS) | {"closed_cleanly": _closed(f)} | _evidence(f)


def verdict(c: dict) -> tuple[bool | None, list[str]]:
    """(valid, the checks that failed or could not be evaluated): valid is None when no
    check failed but one could not be evaluated."""
    failed = [k for k, v in c.items() if v is False]
    unknown = [k for k, v in c.items() if v is None]
    if failed:
        return False, failed + [f"{k} (not evaluable)" for k in unknown]
    return (None, [f"{k} (not evaluable)" for k in unknown]) if unknown else (True, [])
