"""U_sem^LB: the semantic-demand lower bound of one execution (reference 004 §2.1, §5.2).

The bytes the authoritative graph demanded at least once, from what the run recorded about
the graph itself, never from what the pager or the source requested:

- routed experts: every (layer, expert) that `routes.jsonl` (the router's selection, read at
  `ffn_moe_topk-N` before the expert kernel) names for at least one token enters with its
  expert object's slices (`objects.json` `experts`: gate, up, down, ... as canonical
  extents) of the expert tensors the expert kernel read (`demand.json` `experts`): the
  native expert kernel reads the complete slice of every selected expert;
- tensors a computing node read whole (`demand.json` `whole`): their whole extent;
- rows a GET_ROWS read (the token embedding): those rows' extents;
- anything else (a view of part of a tensor, a tensor never read) is excluded, not inferred.

The intervals are unioned under the key (model sha256, offset, length) (extents.py), so the
bound is duplicate- and overlap-free, and the counts of duplicates and overlaps say what
the union absorbed. A record that contradicts the manifest (a route naming an expert the
model does not have, a row outside its tensor) is a DemandError: one line.
"""

from __future__ import annotations

import json
from pathlib import Path

from residency.evidence.extents import Interval, union

INCLUSION_RULE = ("U_sem^LB: the union of (a) the slices (gate, up, down, ...) of every layer-expert object the "
                  "router selected for at least one token (routes.jsonl, read at ffn_moe_topk-N before the "
                  "expert kernel), in the expert tensors the expert kernel read; (b) every tensor a computing "
                  "graph node read whole; (c) the rows GET_ROWS read; nothing inferred (views of part of a "
                  "tensor, unread tensors and scheduler requests excluded)")


class DemandError(ValueError):
    """A run's demand records contradict its manifest; the message is one line."""


def _load(run_dir: Path, name: str):
    path = run_dir / name
    if not path.exists():
        raise DemandError(f"{run_dir}: no {name} (a run of this engine writes it)")
    return json.loads(path.read_text())


def routes(run_dir: Path) -> list[dict]:
    """The route events of a run, in order ([] for a model without experts)."""
    path = run_dir / "routes.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def routed_objects(events: list[dict]) -> set[tuple[int, int]]:
    """(layer, expert) pairs selected for at least one token."""
    return {(int(e["layer"]), int(x)) for e in events for row in e["experts"] for x in row}


def _expert_intervals(objects: dict, read: dict, picked: set[tuple[int, int]], sha: str) -> list[Interval]:
    by_key = {(int(x["layer"]), int(x["expert"])): x for x in objects.get("experts", [])}
    out = []
    for layer, expert in sorted(picked):
        x = by_key.get((layer, expert))
        if x is None:
            raise DemandError(f"routes select expert {expert} of layer {layer}, which objects.json does not have")
        for s in x["slices"]:
            if "experts" in read.get(s["tensor"], ()):
                out.append(Interval(sha, int(s["offset"]), int(s["bytes"]), f"{x['name']} {s['component']}"))
    return out


def _tensor_intervals(t: dict, sha: str) -> list[Interval]:
    how = t["read"]
    if "whole" in how:
        return [Interval(sha, int(t["offset"]), int(t["bytes"]), f"{t['name']} whole")]
    if "rows" in how:
        rb, n = int(t["row_bytes"]), int(t["bytes"])
        bad = [r for r in t["rows"] if r < 0 or (r + 1) * rb > n]
        if bad:
            raise DemandError(f"demand.json: row {bad[0]} of {t['name']} lies outside the tensor ({n} bytes, rows of {rb})")
        return [Interval(sha, int(t["offset"]) + r * rb, rb, f"{t['name']} row {r}") for r in t["rows"]]
    return []


def coverage(events: list[dict], objects: dict) -> dict:
    """Route coverage, as the reference reports it: events, prefill events and the experts
    each prefill event selected."""
    prefill = [e for e in events if e["pass"] == 0]
    per = [len({x for row in e["experts"] for x in row}) for e in prefill]
    return {"route_events": len(events), "prefill_events": len(prefill),
            "decode_passes": len({e["pass"] for e in events} - {0}),
            "min_experts_per_prefill_event": min(per, default=None),
            "max_experts_per_prefill_event": max(per, default=None),
            "managed_expert_objects": len(objects.get("experts", []))}


def bound(run_dir: str | Path, model_sha256: str) -> dict:
    """U_sem^LB of a run directory, with the union's accounting and route coverage."""
    run_dir = Path(run_dir)
    objects, demand = _load(run_dir, "objects.json"), _load(run_dir, "demand.json")
    read = {t["name"]: t["read"] for t in demand["tensors"]}
    events = routes(run_dir)
    picked = routed_objects(events)
    experts = _expert_intervals(objects, read, picked, model_sha256)
    whole = [iv for t in demand["tensors"] if "whole" in t["read"] for iv in _tensor_intervals(t, model_sha256)]
    rows = [iv for t in demand["tensors"] if "whole" not in t["read"] for iv in _tensor_intervals(t, model_sha256)]
    u = union(experts + whole + rows)
    return {"u_sem_lb_bytes": u.bytes, "union": u.as_dict(), "inclusion_rule": INCLUSION_RULE,
            "routed_expert_objects": len(picked), "routed_expert_bytes": union(experts).bytes,
            "whole_tensor_bytes": union(whole).bytes, "row_bytes": union(rows).bytes,
            "partial_only_tensors": sorted(t["name"] for t in demand["tensors"] if t["read"] == ["partial"]),
            "coverage": coverage(events, objects)}
