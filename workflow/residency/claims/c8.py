"""C8 (reference 004 §5.5): bounded direct I/O establishes host nonresidency.

At the same model, cache policy and budget, the buffered source (P) lets the model's
bytes accumulate in charged page cache, while the bounded direct source (F: eight
O_DIRECT windows) keeps the host peak down with a balanced ledger of submissions and
completions and exact outputs. Nonresidency is the reference's eq. 1 (004 §2.1),
S > H_cap - R_policy: S, the canonical bytes managed from storage (T_repr), cannot be
resident in the enforced host allowance H_cap (the cell's limit) while preserving the
declared reserve R_policy (`matched_source.reserve_bytes`); asserted per P and F cell with
its margin S - (H_cap - R_policy) > 0.
"""

from __future__ import annotations

from ..arms import ASYNC, BUFFERED
from .record import Assertion, ClaimResult, as_float, as_int, fmt

ID = "C8"
REFERENCE = ("Reference claim C8: replacing the buffered source with the eight-window bounded O_DIRECT executor "
             "at the same model, graph, cache capacity and scheduler reduces the complete-process-tree host peak "
             "from 6,641,348,608 to 2,980,458,496 bytes (55.123%), with exactly 14,396 reads issued and "
             "completed, peak depth eight, zero cancellation or failure, all eight windows free at shutdown, and "
             "full logits, tokens, routes and cache state matching the control.")
INPUTS = {"runs": "results/matched_source.parquet"}


def mib(v):
    return None if v is None else v / 2**20


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    p = runs[runs["source_arm"] == BUFFERED]
    f = runs[runs["source_arm"] == ASYNC]
    insufficient = []
    if p.empty or f.empty:
        insufficient.append("need a P cell and at least one F cell of the matched source campaign")
    grades = set(runs[runs["source_arm"].isin([BUFFERED, ASYNC])]["host_grade"])
    if grades - {"hard"}:
        insufficient.append(f"host peak needs a hard host limit; grades here: {sorted(map(str, grades))}")
    p_peak = as_int(p["peak_bytes"].iloc[0]) if len(p) else None
    f_peaks = [as_int(v) for v in f["peak_bytes"]]
    f_max = max((v for v in f_peaks if v is not None), default=None)
    pf = runs[runs["source_arm"].isin([BUFFERED, ASYNC])].sort_values("position")
    margins = [as_int(v) for v in pf["eq1_margin_bytes"]]
    values = {
        "p_peak_bytes": p_peak,
        "p_limit_events_total": as_int(p["limit_events_total"].iloc[0]) if len(p) else None,
        "f_peak_bytes": f_peaks,
        "f_peak_bytes_max": f_max,
        "peak_reduction_fraction": (1 - f_max / p_peak) if p_peak and f_max is not None else None,
        "f_peak_below_p": [v is not None and p_peak is not None and v < p_peak for v in f_peaks],
        "f_submissions": [as_int(v) for v in f["source_submissions"]],
        "f_balanced": [as_int(s) is not None and as_int(s) == as_int(c) and as_int(t) == 0 and as_int(r) == 0
                       for s, c, t, r in zip(f["source_submissions"], f["source_completions"],
                                             f["source_tickets_outstanding_at_close"], f["source_rejections"])],
        "f_windows_free": [as_int(a) == as_int(b) for a, b in zip(f["source_windows_free_at_close"], f["source_windows"])],
        "f_peak_depth_max": as_int(f["source_peak_depth"].max()) if len(f) else None,
        "exact": [bool(v) for v in list(p["exact"]) + list(f["exact"])],
        "f_padding_bytes": [as_int(v) for v in f["source_padding_bytes"]],
        "f_mean_wall_s": as_float(f["wall_s"].mean()) if len(f) else None,
        "p_wall_s": as_float(p["wall_s"].iloc[0]) if len(p) else None,
        "eq1": {"cells": [str(v) for v in pf["source_arm"]],
                "managed_bytes": [as_int(v) for v in pf["eq1_managed_bytes"]],
                "cap_minus_reserve": [as_int(v) for v in pf["eq1_cap_minus_reserve"]],
                "margin_bytes": margins,
                "margin_min": min((m for m in margins if m is not None), default=None),
                "holds": [m is not None and m > 0 for m in margins]},
    }
    headline = (f"Host peak buffered P {fmt((p_peak or 0) / 2**20, '.1f')} MiB against bounded direct F at most "
                f"{fmt((f_max or 0) / 2**20, '.1f')} MiB ({fmt(values['peak_reduction_fraction'], '.1%')} lower); "
                f"F submissions {values['f_submissions'][:1]} balanced: {all(values['f_balanced']) if values['f_balanced'] else 'n/a'}"
                f"; eq. 1 margin at least {fmt(mib(values['eq1']['margin_min']), '.1f')} MiB.")
    assertions = [
        Assertion("/values/f_peak_below_p", "all_true", why="the bounded direct source lowers the host peak"),
        Assertion("/values/f_balanced", "all_true",
                  why="F: submissions = completions, no rejection, no ticket outstanding"),
        Assertion("/values/f_windows_free", "all_true", why="F: every window free at close"),
        Assertion("/values/exact", "all_true", why="P and F outputs equal the oracle's"),
        Assertion("/values/eq1/holds", "all_true",
                  why="eq. 1: S > H_cap - R_policy in every P and F cell (margin > 0): the model cannot be resident "
                      "in the host allowance while keeping the reserve"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
