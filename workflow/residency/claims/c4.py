"""C4 (reference 004 A.1): temporal amortization, from results/speculative.parquet. On one
target, a speculative cell (a draft made from the target by the pinned llama.cpp's
quantizer proposes, the target verifies a group per traversal) against a greedy cell, the
same arm, weight budget, source and hard host limit. The speculative cell commits more than
one decode output per target traversal (the reference: 511 outputs in 104 traversals,
4.913), and its committed tokens and every committed logit row equal plain greedy decoding
of the target, byte for byte.

Not shown here, named: the reference's GPU half (the target's weights served into a GPU
under an audited 11.5 GiB allowance; these cells place nothing on a device), which alone
makes the verdict insufficient-evidence. Hybrid-state rebasing (the reference's winner
commits and loser rebases of Qwen3.6's recurrent state) does not apply to a dense target
with only a KV cache: the record says so rather than asserting it.
"""

from __future__ import annotations

from residency.campaigns.speculative import GREEDY, SPECULATIVE
from residency.claims.record import Assertion, ClaimResult, as_int, fmt
from residency.evidence import resource

ID = "C4"
REFERENCE = ("Reference claim C4 (A.1): a canonical Qwen3.6-27B Q4_K_M target and its linear MTP block, an 8,192-token "
             "prompt and 512 greedy outputs, draft length at most six, host 7.5 GiB and GPU 11.5 GiB; one prefill "
             "output plus 511 decode outputs in 104 target traversals: 4.913 committed outputs per target traversal, "
             "407 accepted draft tokens, 51 fully accepted groups, 12.016 end-to-end tokens/s; 723 full logit rows, "
             "every token and the exposed hybrid state exact against the same-build oracle.")
INPUTS = {"cells": "results/speculative.parquet"}
HYBRID = ("not applicable: the target is dense; its only state across traversals is the KV cache, whose rejected "
          "positions are removed after each verification (no recurrent state to commit or rebase)")


def _cell(t, name: str) -> dict:
    rows = t[t["cell"] == name]
    return rows.iloc[0].to_dict() if len(rows) == 1 else {}


def _valid(c: dict) -> bool:
    """Status ok and three of the resource predicate's terms (grade, limit events, OOM kills;
    not headroom nor pressure events): C4's assertion as the protocol states it."""
    t = resource.terms(resource.HostCounters.of_row(c))
    return c.get("status") == "ok" and all(t[k] is True for k in ("grade", "limit_events", "oom_kills"))


def _per_output(c: dict):
    b, n = as_int(c.get("physical_bytes_read")), as_int(c.get("tokens"))
    return b / n if b is not None and n else None


def compute(frames, settings) -> ClaimResult:
    t = frames["cells"]
    g, s = _cell(t, GREEDY), _cell(t, SPECULATIVE)
    insufficient = [f"results/speculative.parquet has no single {n} cell" for n, c in ((GREEDY, g), (SPECULATIVE, s))
                    if not c]
    insufficient += [f"the {n} cell did not finish ok ({c.get('error')})" for n, c in ((GREEDY, g), (SPECULATIVE, s))
                     if c and c.get("status") != "ok"]
    eq = [s.get("tokens_equal_greedy"), s.get("logits_equal_greedy")]
    bpo = {n: _per_output(c) for n, c in ((GREEDY, g), (SPECULATIVE, s))}
    tps = {n: c.get("end_to_end_tokens_per_s") for n, c in ((GREEDY, g), (SPECULATIVE, s))}
    values = {
        "draft": {k: s.get(f"draft_{k}") for k in ("type", "sha256", "bytes", "from_sha256", "llama_commit")},
        "draft_max": as_int(s.get("draft_max")), "tokens": as_int(s.get("tokens")),
        "decode_outputs": as_int(s.get("decode_outputs")), "traversals": as_int(s.get("traversals")),
        "outputs_per_traversal": s.get("outputs_per_traversal"),
        "drafted": as_int(s.get("drafted")), "accepted": as_int(s.get("accepted")),
        "full_groups": as_int(s.get("full_groups")), "rows_traversed": as_int(s.get("rows_traversed")),
        "greedy_traversals": as_int(g.get("passes")) - 1 if g.get("passes") is not None else None,
        "end_to_end_tokens_per_s": tps,
        "tokens_per_s_speculative_over_greedy": tps[SPECULATIVE] / tps[GREEDY] if tps[GREEDY] and tps[SPECULATIVE] else None,
        "physical_bytes_per_output": bpo,
        "bytes_per_output_speculative_over_greedy": bpo[SPECULATIVE] / bpo[GREEDY] if bpo[GREEDY] and bpo[SPECULATIVE] else None,
        "rows_compared": as_int(s.get("rows_compared")),
        "exact": [None if x is None else bool(x) for x in eq],
        "cells_valid": [_valid(c) for c in (g, s) if c],
        "host": {n: {"grade": c.get("host_grade"), "limit_bytes": as_int(c.get("limit_bytes")),
                     "peak_bytes": as_int(c.get("peak_bytes"))} for n, c in ((GREEDY, g), (SPECULATIVE, s)) if c},
        "hybrid_state_rebasing": HYBRID,
        "gpu_served": None,
    }
    headline = (f"{values['decode_outputs']} decode outputs in {values['traversals']} target traversals: "
                f"{fmt(values['outputs_per_traversal'])} committed outputs per traversal ({values['accepted']} of "
                f"{values['drafted']} draft tokens accepted, {values['full_groups']} groups whole); tokens and "
                f"{values['rows_compared']} logit rows equal greedy: {all(x is True for x in eq)}; end-to-end tokens/s "
                f"{fmt(tps[SPECULATIVE])} against greedy {fmt(tps[GREEDY])}; physical bytes per output x"
                f"{fmt(values['bytes_per_output_speculative_over_greedy'])}.")
    assertions = [
        Assertion("/values/cells_valid", "all_true",
                  why="both cells finished ok under the hard host limit, with zero limit events and zero OOM kills"),
        Assertion("/values/exact", "all_true",
                  why="the committed tokens and every committed logit row equal plain greedy decoding of the target"),
        Assertion("/values/outputs_per_traversal", "gt", float(settings["c4_min_outputs_per_traversal"]),
                  why="more than one committed decode output per target traversal (temporal amortization)"),
        Assertion("/values/gpu_served", "eq", True,
                  why="the reference's GPU half: the target's weights served into a GPU under an audited allowance; "
                      "these cells place nothing on a device"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
