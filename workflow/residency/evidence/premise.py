"""Premises a campaign recreates before it measures anything (docs/design.md): relations that
hold by construction of the config, checked by a rule before any cell of the campaign runs.
A premise that does not hold stops the campaign with one line giving both sides.

The matched source campaign (reference 004 §5.3, claim C2) measures source ownership under a
host allowance that the model cannot be resident in: eq. 1, S > H_cap - R_policy, with S the
canonical bytes managed from storage (T_repr: every tensor is paged), R_policy the declared
reserve for non-target state (the calibrated O and its margin, overhead.py) and H_cap the
cells' hard limit. The campaign's limit is H_cap = A + R_policy with the weight allowance
A = matched_source.ratio x T_repr, so eq. 1 is A < S, and its margin is S - A.

The bounded-source campaign (reference 004 §5.5, claim C8) adds its own operating point: a
cap above the buffered source's natural peak (P's run without a limit), so that P is
admissible and the host peaks of P and F can be compared, with eq. 1 holding.

`residency premise matched-source|bounded-source` writes the premise record a campaign's
cells depend on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from residency.core import atomic


class PremiseError(RuntimeError):
    pass


def matched_source(t_repr: int, reserve: int, ratio: float, windows: int, chunk_bytes: int) -> dict:
    """The matched campaign's premise: eq. 1 with its margin, and a weight allowance that holds
    F's windows with a cache left for D and P (each pays one window of its own)."""
    allowance = int(float(ratio) * t_repr)
    extra_windows = (windows - 1) * chunk_bytes
    doc = {"relation": "S > H_cap - R_policy (reference 004 eq. 1)", "s_bytes": t_repr,
           "h_cap_bytes": allowance + reserve, "r_policy_bytes": reserve, "weight_allowance_bytes": allowance,
           "ratio": float(ratio), "margin_bytes": t_repr - allowance, "f_extra_window_bytes": extra_windows,
           "d_and_p_budget_bytes": allowance - extra_windows}
    if doc["margin_bytes"] <= 0:
        raise PremiseError(f"premise error: matched_source: eq. 1 does not hold: S = T_repr = {t_repr} bytes is not "
                           f"above H_cap - R_policy = {allowance} bytes (matched_source.ratio {ratio} x T_repr); "
                           "the campaign needs matched_source.ratio below 1")
    if doc["d_and_p_budget_bytes"] < chunk_bytes:
        raise PremiseError(f"premise error: matched_source: the weight allowance {allowance} bytes does not hold F's "
                           f"{windows} windows of {chunk_bytes} bytes and a cache for D and P; raise matched_source.ratio")
    return doc


def bounded_source(t_repr: int, reserve: int, ratio: float, f_budget: int, natural_peak: int) -> dict:
    """C8's premise: eq. 1, an allowance that holds F's budget, and P's natural peak below H_cap."""
    allowance = int(float(ratio) * t_repr)
    cap = allowance + reserve
    doc = {"relation": "S > H_cap - R_policy (reference 004 eq. 1) and P's natural peak < H_cap",
           "s_bytes": t_repr, "h_cap_bytes": cap, "r_policy_bytes": reserve, "weight_allowance_bytes": allowance,
           "ratio": float(ratio), "margin_bytes": t_repr - allowance, "f_budget_bytes": f_budget,
           "p_natural_peak_bytes": natural_peak, "p_natural_headroom_bytes": cap - natural_peak}
    if doc["margin_bytes"] <= 0:
        raise PremiseError(f"premise error: bounded_source: eq. 1 does not hold: S = T_repr = {t_repr} bytes is not "
                           f"above H_cap - R_policy = {allowance} bytes (bounded_source.ratio {ratio} x T_repr)")
    if f_budget > allowance:
        raise PremiseError(f"premise error: bounded_source: F's budget {f_budget} bytes is above the weight allowance "
                           f"H_cap - R_policy = {allowance} bytes; lower bounded_source.budget_bytes")
    if natural_peak >= cap:
        raise PremiseError(f"premise error: bounded_source: P's natural peak {natural_peak} bytes is not below H_cap = "
                           f"{cap} bytes: P would be clipped, and its peak could not be compared (the model's demand "
                           "is too large a share of it for this ratio)")
    return doc


def _natural_peak(harness_json: str) -> int:
    h = json.loads(Path(harness_json).read_text())
    peak = ((h.get("host") or {}).get("cgroup") or {}).get("peak_bytes")
    if h.get("status") != "ok" or peak is None:
        raise PremiseError(f"premise error: bounded_source: P's natural run {harness_json} has no cgroup peak "
                           f"(status {h.get('status')}): the premise needs a cgroup")
    return int(peak)


def _cmd_bounded(a) -> int:
    t_repr = int(json.loads(Path(a.inventory).read_text())["tensor_bytes"])
    reserve = int(json.loads(Path(a.overhead).read_text())["reserve_bytes"])
    try:
        doc = bounded_source(t_repr, reserve, a.ratio, a.budget_bytes, _natural_peak(a.natural))
    except PremiseError as exc:
        print(exc, file=sys.stderr)
        return 1
    atomic.write_json(a.out, doc)
    print(f"residency premise: bounded_source: eq. 1 holds by {doc['margin_bytes']} bytes; P's natural peak "
          f"{doc['p_natural_peak_bytes']} below H_cap {doc['h_cap_bytes']}", file=sys.stderr)
    return 0


def _cmd_matched(a) -> int:
    t_repr = int(json.loads(Path(a.inventory).read_text())["tensor_bytes"])
    reserve = int(json.loads(Path(a.overhead).read_text())["reserve_bytes"])
    try:
        doc = matched_source(t_repr, reserve, a.ratio, a.windows, a.chunk_bytes)
    except PremiseError as exc:
        print(exc, file=sys.stderr)
        return 1
    atomic.write_json(a.out, doc)
    print(f"residency premise: matched_source: eq. 1 holds by {doc['margin_bytes']} bytes "
          f"(S {t_repr} > H_cap - R_policy {doc['weight_allowance_bytes']})", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("premise", help="check a campaign's premise before its cells run")
    sub = p.add_subparsers(dest="campaign", required=True)
    s = sub.add_parser("matched-source", help="eq. 1 of the matched source campaign (C2)")
    s.add_argument("--inventory", required=True, help="the model's tensor inventory (T_repr)")
    s.add_argument("--overhead", required=True, help="the calibration record (reserve_bytes: R_policy)")
    s.add_argument("--ratio", type=float, required=True, help="matched_source.ratio: (H_cap - R_policy) / T_repr")
    s.add_argument("--windows", type=int, required=True)
    s.add_argument("--chunk-bytes", type=int, required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_matched)
    s = sub.add_parser("bounded-source", help="eq. 1 and P's natural peak below the cap (C8)")
    s.add_argument("--inventory", required=True, help="the model's tensor inventory (T_repr)")
    s.add_argument("--overhead", required=True, help="the calibration record (reserve_bytes: R_policy)")
    s.add_argument("--natural", required=True, help="P's natural run (harness.json, no limit)")
    s.add_argument("--ratio", type=float, required=True, help="bounded_source.ratio: (H_cap - R_policy) / T_repr")
    s.add_argument("--budget-bytes", type=int, required=True, help="F's pager budget (its windows included)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_bounded)
