"""The tensor-granular reference string of a real-model run, and MIN holding one tensor.

A run's trace records each object step's chunk accesses in ascending chunk order (the
declared order, Belady's reference; belady.py). Inside a step llama.cpp reads the step's
tensors one node after another, in the compute order the graph plan's `read_order` gives
(written by `residctl generate --consumption tensor`). `tensor_reference` rebuilds each
step's accesses in that order, one access per (tensor, chunk it covers), and groups them by
tensor, so `belady.step_held_min_misses(ref, groups, capacity)` is MIN for any policy that
holds the chunks of the tensor being read until that tensor is done (what the pager's
compute threads need) and nothing else: the floor of what a tensor-granular consumption
signal can give D, beside OPT, which does not even hold the tensor being read.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Sequence


def _tensor_chunks(objects: dict) -> tuple[dict[str, list[tuple[str, int, int]]], int]:
    """Per object name, its tensors as (name, first chunk, last chunk); and the chunk size."""
    cs = int(objects["chunk_size"])
    out: dict[str, list[tuple[str, int, int]]] = {}
    for o in objects["objects"]:
        out[o["name"]] = [(t["name"], t["offset"] // cs, (t["offset"] + t["bytes"] - 1) // cs)
                          for t in o["tensors"] if t["bytes"] > 0]
    return out, cs


def read_order(plan: dict) -> list[str] | None:
    """The plan's tensor read order, when every graph shape has the same one (else None)."""
    orders = [s.get("read_order") for s in plan.get("shapes", [])]
    if not orders or any(o is None for o in orders) or any(o != orders[0] for o in orders):
        return None
    return list(orders[0])


def tensor_reference(ref: Sequence[int], steps: Sequence[int], objects: dict,
                     order: Sequence[str]) -> tuple[list[int], list[int]]:
    """Each step's accesses (`ref`, `steps`: the trace's) in tensor read order: for every
    tensor of the step's object in `order`, the step's chunks it covers, ascending; the
    step's chunks no ordered tensor covers (embd's rows, a tensor read in another object)
    follow as one more group. Returns (chunks, group id per access); groups are numbered
    in order, one per (step, tensor)."""
    tensors, _ = _tensor_chunks(objects)
    names = [o["name"] for o in objects["objects"]]
    rank = {n: i for i, n in enumerate(order)}
    by_object = {n: sorted((t for t in ts if t[0] in rank), key=lambda t: rank[t[0]]) for n, ts in tensors.items()}
    out, groups, g = [], [], 0
    i = 0
    while i < len(ref):
        j = i
        while j < len(ref) and steps[j] == steps[i]:
            j += 1
        chunks = sorted(set(ref[i:j]))
        covered: set[int] = set()
        for _, lo, hi in by_object.get(names[steps[i] % len(names)], []):
            mine = [c for c in chunks if lo <= c <= hi]
            if not mine:
                continue
            g += 1
            out += mine
            groups += [g] * len(mine)
            covered.update(mine)
        rest = [c for c in chunks if c not in covered]
        if rest:
            g += 1
            out += rest
            groups += [g] * len(rest)
        i = j
    return out, groups


@functools.lru_cache(maxsize=8)
def _plan_read_order(plan_path: str, mtime_ns: int) -> list[str] | None:
    """The read order of a graph plan, read once per file version (every run of a campaign
    shares one plan)."""
    return read_order(json.loads(Path(plan_path).read_text()))


def load_for_run(run_dir: Path) -> tuple[dict, list[str]] | None:
    """(objects.json, read order) of a run whose graph plan has a read order, else None."""
    run = json.loads((run_dir / "run.json").read_text())
    plan_path = (run.get("config") or {}).get("graph_plan")
    objects_path = run_dir / "objects.json"
    if not plan_path or not Path(plan_path).exists() or not objects_path.exists():
        return None
    order = _plan_read_order(plan_path, Path(plan_path).stat().st_mtime_ns)
    if order is None:
        return None
    return json.loads(objects_path.read_text()), order
