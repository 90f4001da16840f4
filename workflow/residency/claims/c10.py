"""C10 (reference 004 Appendix B, Table 10): a stopped line kept.

The stop procedure on this machine's numbers. The carrier premise is prespecified: a
throughput target (`claims.c10_target_tokens_per_s`, fixed in the config from the
reference, not from these runs) needs a storage bandwidth of target x bytes per token.
Bytes per token and the measured bandwidth both come from the matched source campaign's
own source statistics, from its D cells (the blocking one-window O_DIRECT reader, the
campaign's reference source) that completed oracle-exact: bytes per token is the mean of
their physical source bytes per generated output; the measured carrier bandwidth is their
physical source bytes over their time inside the reads (source_read_ns: D's preads, one
at a time, so this is what the device delivered at depth one). F's read time sums
overlapping reads and is not a wall-clock bandwidth. Decision: "advance" when measured >=
needed, else "stop".

The reference's claim is that the premise failed and the line stopped (a 1.085 GB/s
carrier against a 5.207 GB/s need), the negative outcome kept rather than reclassified.
The record asserts that both inputs were measured and that the decision is "stop": on a
machine whose storage meets the need the procedure says "advance" and this claim FAILS
(the reference's stop does not reproduce there); that outcome is kept as well.
"""

from __future__ import annotations

from residency.core.arms import DIRECT
from residency.claims.record import Assertion, ClaimResult, as_float, as_int, fmt

ID = "C10"
REFERENCE = ("Reference claim C10: the GPT-OSS-20B contiguous pack removed only 4.014% of the direct-service wall "
             "on the physical RTX 3080 Ti cell and reached the 6 GiB host cap with 1,349 memory.max events; the "
             "observed 1.085 GB/s carrier would need at least 5.207 GB/s, so the carrier premise did not advance "
             "to the next experiment. Resource or component success is insufficient when the next prospective "
             "criterion fails.")
INPUTS = {"runs": "results/matched_source.parquet"}


def _cell(x) -> dict:
    phys, ns = as_int(x["source_physical_bytes"]), as_int(x.get("source_read_ns"))
    return {"block": as_int(x["block"]), "position": as_int(x["position"]), "source_physical_bytes": phys,
            "source_read_ns": ns, "tokens": as_int(x["tokens"]),
            "source_physical_bytes_per_output": as_float(x["source_physical_bytes_per_output"]),
            "bandwidth_bytes_per_s": phys * 1e9 / ns if phys is not None and ns else None,
            "tokens_per_s": as_float(x["tokens_per_s"]), "run_dir": x["run_dir"]}


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    target = float(settings["c10_target_tokens_per_s"])
    d = runs[runs["source_arm"] == DIRECT]
    ok = d[(d["status"] == "ok") & d["exact"].fillna(False).astype(bool)].sort_values("position")
    cells = [_cell(x) for _, x in ok.iterrows()]
    insufficient = []
    if ok.empty:
        insufficient.append(f"no D cell of the matched source campaign completed exactly ({len(d)} D cells)")
    timed = [c for c in cells if c["source_physical_bytes"] is not None and c["source_read_ns"]]
    if cells and len(timed) < len(cells):
        insufficient.append(f"{len(cells) - len(timed)} of {len(cells)} exact D cells carry no source read time "
                            "(source_read_ns): the measured bandwidth needs every one (regather matched_source)")
    per_out = [c["source_physical_bytes_per_output"] for c in cells if c["source_physical_bytes_per_output"] is not None]
    bytes_per_token = sum(per_out) / len(per_out) if per_out and len(per_out) == len(cells) else None
    measured = (sum(c["source_physical_bytes"] for c in timed) * 1e9 / sum(c["source_read_ns"] for c in timed)
                if timed and len(timed) == len(cells) else None)
    needed = target * bytes_per_token if bytes_per_token is not None else None
    decision = None if measured is None or needed is None else ("advance" if measured >= needed else "stop")
    values = {
        "target_tokens_per_s": target,
        "bytes_per_token": bytes_per_token,
        "needed_bandwidth_bytes_per_s": needed,
        "measured_bandwidth_bytes_per_s": measured,
        "margin_bytes_per_s": measured - needed if decision else None,
        "measured_over_needed": measured / needed if decision and needed else None,
        "decision": decision,
        "d_cells": cells,
        "d_mean_tokens_per_s": (sum(c["tokens_per_s"] for c in cells if c["tokens_per_s"] is not None)
                                / len(cells)) if cells and all(c["tokens_per_s"] is not None for c in cells) else None,
        "procedure": ("premise: the storage carrier serves the target throughput; needed = target tokens/s x "
                      "physical source bytes per output of D; measured = D's physical source bytes / time inside "
                      "its reads; advance when measured >= needed, else stop and keep the stop"),
        "not_reproduced": ("the reference's line is a GPT-OSS-20B contiguous pack on a physical RTX 3080 Ti with a "
                           "provider storage device; here the premise is applied to this campaign's model and "
                           "this machine's storage"),
    }
    gb = 1e9
    headline = (f"Carrier premise at {target:g} tokens/s: needs {fmt(needed / gb if needed else None, '.3f')} GB/s "
                f"({fmt(bytes_per_token / 2**20 if bytes_per_token else None, '.2f')} MiB per output); measured "
                f"{fmt(measured / gb if measured else None, '.3f')} GB/s over {len(timed)} D cells; decision: "
                f"{decision or 'n/a'}.")
    assertions = [
        Assertion("/values/bytes_per_token", "gt", 0, why="bytes per token was measured"),
        Assertion("/values/measured_bandwidth_bytes_per_s", "gt", 0, why="the carrier bandwidth was measured"),
        Assertion("/values/decision", "eq", "stop",
                  why="the reference's outcome: the carrier is below the need and the line stops"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
