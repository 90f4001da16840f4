"""The reference's numbers beside this run's, claim by claim (issue 22, item 10).

For each claim: its headline family (the reference's Table 11 names C1..C12; P1..P11 named
after reference 000's steps) and a list of entries, each a label, the reference's value as
the reference states it (its number and unit, taken from the claim module's REFERENCE
text), and a JSON pointer into this run's record that names the value measured here. The
reference's numbers live here and in `reference_statement` only, never in a record's
`values`: nothing here changes a verdict.

An entry with `select` points at a list of rows: the rows whose keys equal `select` are
chosen and `field` (a pointer inside each row) is read from each, so a per-r entry finds
its ratio wherever the config put it, and a config without that ratio shows it missing.
`unshown` marks a half this machine may not show (a GPU half, a cgroup-v2 counter): there a
null value is expected and says why; an unmarked missing value, or a pointer naming nothing
(marked or not), is a defect the tests catch. A missing value is shown as missing, never
filled in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from residency.claims import record

GIB = 1 << 30


@dataclass(frozen=True)
class Ref:
    label: str
    reference: str
    pointer: str
    select: dict | None = None
    field: str = ""
    unit: str | None = None
    unshown: str | None = None


def _per_r(label: str, pointer: str, field: str, refs: dict[float, str], unit: str | None = None) -> list[Ref]:
    """One entry per budget ratio r of a list of per-r rows ({'r': r, ...})."""
    return [Ref(label.format(r=r), ref, pointer, {"r": r}, field, unit) for r, ref in refs.items()]


GPU = "GPU half"
V2 = "cgroup v2 counter (v1 has no memory.high, pgscan or pgsteal)"
NONRESIDENT = "the cycle half, against a nonresident control under the candidate's hard limit"

FAMILIES = {
    "P1": "LRU misses every chunk of a cyclic scan",
    "P2": "Declared layer order against LRU and kernel mmap",
    "P3": "Reclaim authority under pager protection",
    "P4": "Declared order at the Belady bound (synthetic)",
    "P5": "The exact consumption signal restores determinism",
    "P6": "Prefetch trades bytes for demand faults",
    "P7": "Declared order near the Belady bound (real model)",
    "P8": "Cyclic-scan degeneration on a real model",
    "P9": "Throughput against budget: kernel flat, pager rising",
    "P10": "The tight-budget livelock is fixed",
    "P11": "The pager serves exact weights",
    "C1": "Semantic demand beyond full residency",
    "C2": "Six-pair complete asynchronous component",
    "C3": "All fourteen prespecified fault/control cells",
    "C4": "Qwen3.6 MTP temporal amortization",
    "C5": "Qwen-specific natural utility",
    "C6": "Shared-Plan comparison and preserved F1 miss",
    "C7": "Gemma cache transfer",
    "C8": "Gemma bounded direct source",
    "C9": "Cross-model product comparison",
    "C10": "GPT-OSS storage-device stop",
    "C11": "Llama task-admission stop",
    "C12": "Shared-Plan parity process",
}

_MAIN_R = (0.25, 0.375, 0.5, 0.625, 0.75)

ENTRIES: dict[str, list[Ref]] = {
    "P1": [
        Ref("arm C miss rate, lowest over the runs", "exactly 1.000 in every cell", "/values/miss_rate_min"),
        Ref("arm C physical bytes per pass / region, lowest", "the entire 2 GiB region every run",
            "/values/physical_per_pass_over_region_min", unit="x region"),
    ],
    "P2": [
        *_per_r("D/A bytes at r = {r}", "/values/per_r", "/d_over_a",
                dict(zip(_MAIN_R, ("0.97", "0.89", "0.71", "0.57", "0.50")))),
        *_per_r("D's bytes against C's at r = {r}", "/values/per_r", "/d_over_c",
                {0.25: "13-69% fewer (over every r)", 0.75: "13-69% fewer (over every r)"}, unit="fewer"),
        Ref("D's traces byte-identical across reps, per judged r", "all three reps byte-identical at every ratio",
            "/values/d_deterministic"),
    ],
    "P3": [
        Ref("unprotected: bytes the kernel reclaimed", "~236 MiB reclaimed", "/values/cells",
            {"protection": "unprotected"}, "/kernel_reclaimed_bytes", "B", V2),
        Ref("unprotected: pgscan", "~ 120,687", "/values/cells", {"protection": "unprotected"}, "/pgscan", None, V2),
        Ref("protected: memory.events high", "37", "/values/cells", {"protection": "protected"}, "/high_events",
            None, V2),
        Ref("protected: pgscan", "0", "/values/cells", {"protection": "protected"}, "/pgscan", None, V2),
        Ref("protected: pgsteal", "0", "/values/cells", {"protection": "protected"}, "/pgsteal", None, V2),
        Ref("unprotected: the kernel took the pager's pages to swap", "the authority leaks",
            "/values/unprotected/kernel_took_pages_to_swap"),
    ],
    "P4": [
        Ref("D/OPT, highest over the lockstep runs", "exactly 1.00 at realistic chunk counts",
            "/values/d_over_opt_max"),
        Ref("D/OPT, lowest over the lockstep runs", "exactly 1.00 at realistic chunk counts", "/values/d_over_opt_min"),
    ],
    "P5": [
        Ref("exact signal: stress cells deterministic", "determinism restored at all six stress cells",
            "/values/exact_signal_deterministic"),
        Ref("racy signal: stress cells whose outcomes differ", "non-deterministic under concurrency + compute",
            "/values/racy_signal_cells_differing"),
    ],
    "P6": [
        *_per_r("E/D bytes at r = {r}", "/values/per_r", "/e_over_d_bytes",
                {0.5: "~4-8% more (r >= 0.5)", 0.75: "~4-8% more (r >= 0.5)", 0.25: "~13% more (r <= 0.375)",
                 0.375: "~13% more (r <= 0.375)"}, unit="vs1"),
        *_per_r("E/D demand faults at r = {r}", "/values/per_r", "/e_over_d_demand_faults",
                {0.5: "~2x fewer (r >= 0.5)", 0.75: "~2x fewer (r >= 0.5)"}, unit="vs1"),
        *_per_r("E/D p99 demand-fault latency at r = {r}", "/values/per_r", "/e_over_d_demand_fault_p99",
                {0.5: "lower tail latency (r >= 0.5)", 0.25: "a modest latency gain (r <= 0.375)"}, unit="vs1"),
    ],
    "P7": _per_r("D/OPT at r = {r}, mean over reps", "/values/d_over_opt_per_r", "/mean",
                 {r: "1.08-1.13 (over every r)" for r in _MAIN_R}),
    "P8": [
        *_per_r("arm C physical bytes per run at r = {r}", "/values/cells", "/physical_bytes_read",
                {0.25: "134-144 GB per 64 tokens", 0.75: "134-144 GB per 64 tokens, including 0.75"}, unit="GB"),
        *_per_r("arm C faults handled at r = {r}", "/values/cells", "/faults_handled",
                {0.25: "absent_handled 2561-2817", 0.75: "absent_handled 2561-2817"}),
        *_per_r("layer transitions per run at r = {r}", "/values/cells", "/layer_transitions", {0.75: "2304"}),
    ],
    "P9": [
        *_per_r("arm A tokens/s at r = {r}", "/values/arms/kernel-mmap/tokens_per_s_per_r", "/tokens_per_s",
                {0.25: "~0.7 t/s, flat", 0.75: "~0.7 t/s, flat"}, unit="tokens/s"),
        Ref("arm A tokens/s, largest r / smallest r", "flat across a 3x budget range",
            "/values/arms/kernel-mmap/largest_r_over_smallest_r", unit="x"),
        *_per_r("arm C tokens/s at r = {r}", "/values/arms/pager-lru/tokens_per_s_per_r", "/tokens_per_s",
                {0.25: "~1.0 t/s, flat", 0.75: "~1.0 t/s, flat"}, unit="tokens/s"),
        Ref("arm C tokens/s, largest r / smallest r", "flat across a 3x budget range",
            "/values/arms/pager-lru/largest_r_over_smallest_r", unit="x"),
        *_per_r("arm D tokens/s at r = {r}", "/values/arms/pager-declared/tokens_per_s_per_r", "/tokens_per_s",
                {0.25: "1.12 t/s", 0.75: "2.85 t/s"}, unit="tokens/s"),
        Ref("arm D tokens/s, largest r / smallest r", "2.5x, monotone",
            "/values/arms/pager-declared/largest_r_over_smallest_r", unit="x"),
        Ref("unconstrained baseline", "13.2 t/s", "/values/baseline_tokens_per_s", unit="tokens/s"),
    ],
    "P10": [
        Ref("arm E runs completed", "arm E completes at every ratio", "/values/completed"),
        Ref("ratios arm E ran at", "every ratio", "/values/ratios_covered"),
    ],
    "P11": [
        Ref("runs token- and logit-identical to the mmap load", "byte-identical token sequences", "/values/exact"),
        Ref("logit rows compared per run", "32 tokens", "/values/logit_rows_compared_per_run"),
    ],
    "C1": [
        Ref("T_repr", "45.08 GiB", "/values/inventory/t_repr_bytes", unit="B"),
        Ref("U_sem^LB", "43.59375 GiB", "/values/inventory/u_sem_lb_bytes", unit="B"),
        Ref("host cap H_cap", "11 GiB", "/values/boundaries/host/h_cap_bytes", unit="B"),
        Ref("host authority", "hard", "/values/authority/host"),
        Ref("declared GPU allowance G_decl", "23 GiB", "/values/boundaries/gpu/g_decl_bytes", unit="B"),
        Ref("physical board G_phys", "24 GiB", "/values/boundaries/gpu/g_phys_bytes", unit="B"),
        Ref("whole-board GPU audit", "a 23 GiB whole-board GPU audit", "/values/gpu_audited", unshown=GPU),
        Ref("claim class", "W", "/values/claim_class"),
        Ref("outputs in the exactness horizon", "all 64 complete logit rows", "/values/exactness/horizon/outputs"),
        Ref("logit rows exact", "exact", "/values/checks/all_logit_rows_exact"),
        Ref("tokens exact", "exact", "/values/checks/all_tokens_exact"),
        Ref("response bytes exact", "exact", "/values/checks/response_exact"),
        Ref("routes exact", "exact", "/values/checks/all_routes_exact"),
        Ref("consumer identity exact", "exact", "/values/checks/consumer_exact"),
        Ref("destination identity exact", "exact", "/values/checks/destination_exact"),
        Ref("host limit events", "zero resource events", "/values/boundaries/host/limit_events"),
        Ref("lifecycle closed", "clean no-fault lifecycle closure", "/values/checks/lifecycle_closed"),
    ],
    "C2": [
        Ref("P: exact", "completes exactly", "/values/p/exact"),
        Ref("P: host headroom at its peak", "reaches the 11 GiB host ceiling", "/values/p/headroom_bytes", unit="B"),
        Ref("P: memory.max events", "33,481", "/values/p/limit_events_total"),
        Ref("D and F cells exact", "exact", "/values/d_and_f_exact"),
        Ref("D and F cells admissible", "positive margin and zero limit events", "/values/d_and_f_admissible"),
        Ref("pairs", "six counterbalanced pairs", "/values/wall_f_over_d/n"),
        Ref("F/D complete wall, geometric", "0.322913 (32.3% of D's wall time)", "/values/wall_f_over_d/ratio"),
        Ref("F/D 95% paired-log t interval, low", "0.320090", "/values/wall_f_over_d/low"),
        Ref("F/D 95% paired-log t interval, high", "0.325762", "/values/wall_f_over_d/high"),
        Ref("D/F (reciprocal)", "3.10x", "/values/wall_f_over_d/reciprocal", unit="x"),
        Ref("F/D physical source bytes per output", "1.0", "/values/physical_bytes_per_output_f_over_d"),
        Ref("F/D exposed source wait", "0.534673", "/values/exposed_source_wait_f_over_d/ratio"),
        Ref("F/D decode rate", "1.541885", "/values/decode_rate_f_over_d/ratio"),
        Ref("F: source operations per cell", "55,520", "/values/cells", {"source_arm": "F"}, "/source_submissions"),
        Ref("F: peak in-flight depth", "eight", "/values/f_peak_depth_max"),
        Ref("F: no dynamic allocation", "zero dynamic allocation", "/values/f_no_dynamic_allocation"),
        Ref("windows free at every close", "all windows free", "/values/windows_free_at_every_close"),
    ],
    "C3": [
        Ref("prespecified cells", "fourteen", "/values/prespecified"),
        Ref("cells that satisfy their validators", "all fourteen", "/values/valid"),
        Ref("adapters", "Qwen3-Next and Gemma 4", "/values/adapters"),
        Ref("swap off in every cell", "swap zero", "/values/swap_off"),
        Ref("GPU boundary audited, no foreign compute PID", "foreign compute PIDs are zero",
            "/values/gpu_boundary", unshown=GPU),
    ],
    "C4": [
        Ref("generated outputs", "512 greedy outputs", "/values/tokens"),
        Ref("decode outputs", "511", "/values/decode_outputs"),
        Ref("target traversals", "104", "/values/traversals"),
        Ref("committed outputs per target traversal", "4.913", "/values/outputs_per_traversal"),
        Ref("accepted draft tokens", "407", "/values/accepted"),
        Ref("fully accepted groups", "51", "/values/full_groups"),
        Ref("draft length, at most", "six", "/values/draft_max"),
        Ref("speculative end-to-end tokens/s", "12.016", "/values/end_to_end_tokens_per_s/speculative",
            unit="tokens/s"),
        Ref("logit rows compared", "723 full logit rows", "/values/rows_compared"),
        Ref("cells exact against the same-build oracle", "exact", "/values/exact"),
        Ref("host limit of the speculative cell", "host 7.5 GiB", "/values/host/speculative/limit_bytes", unit="B"),
        Ref("target served into a GPU under its allowance", "GPU 11.5 GiB", "/values/gpu_served", unshown=GPU),
    ],
    "C5": [
        Ref("aggregate F1, control", "0.590909", "/values/aggregate_f1_control"),
        Ref("aggregate F1, candidate", "0.590909", "/values/aggregate_f1_candidate"),
        Ref("task-level F1 equal", "all eight agree", "/values/task_f1_equal"),
        Ref("tasks whose outputs are token-identical", "15 of 16 request outputs", "/values/tokens_identical"),
        Ref("cycles, control total", "331.884 s", "/values/cycle/total_control_wall_s", unit="s"),
        Ref("cycles, candidate total", "235.917 s", "/values/cycle/total_candidate_wall_s", unit="s"),
        Ref("cycles, candidate / control", "-28.916%", "/values/cycle/total_candidate_over_control", unit="vs1"),
        Ref("favourable against a nonresident control", "all eight task directions favourable",
            "/values/cycle/favourable_against_a_nonresident_control",
            unshown=NONRESIDENT),
    ],
    "C6": [
        Ref("valid cells", "16 complete valid cells", "/values/valid_cells"),
        Ref("request-plus-reset, control total", "335.400 s", "/values/cycle/total_control_wall_s", unit="s"),
        Ref("request-plus-reset, candidate total", "250.785 s", "/values/cycle/total_candidate_wall_s", unit="s"),
        Ref("candidate / control", "-25.228%", "/values/cycle/total_candidate_over_control", unit="vs1"),
        Ref("aggregate F1 delta", "-0.0015625 (the prespecified criterion is not met)", "/values/aggregate_f1_delta"),
        Ref("shorter against a nonresident control", "250.785 s against 335.400 s",
            "/values/cycle/shorter_against_a_nonresident_control",
            unshown=NONRESIDENT),
    ],
    "C7": [
        Ref("pairs", "five prompt pairs", "/values/n_pairs"),
        Ref("logits and tokens exact in every pair", "match within all five pairs", "/values/exact"),
        Ref("H2D bytes fewer with LRU-k", "462,068,305,440 to 161,626,889,956 bytes (-65.021%)",
            "/values/h2d_bytes_fewer", unshown=GPU),
        Ref("process block reads, reduction", "61.474%", "/values/bytes_reduction", unit="%"),
        Ref("decode time, zero reuse", "1,199.513 s", "/values/totals/decode_ns/zero", unit="ns"),
        Ref("decode time, LRU-k", "269.682 s", "/values/totals/decode_ns/lru_k", unit="ns"),
        Ref("decode time, reduction", "77.517%", "/values/decode_reduction", unit="%"),
        Ref("pairs with lower decode time", "all five directions favorable", "/values/lower_decode"),
    ],
    "C8": [
        Ref("host peak, buffered P", "6,641,348,608 bytes", "/values/p_peak_bytes", unit="B"),
        Ref("host peak, bounded F", "2,980,458,496 bytes", "/values/f_peak_bytes", unit="B"),
        Ref("host peak reduction", "55.123%", "/values/peak_reduction_fraction", unit="%"),
        Ref("F reads issued and completed", "14,396", "/values/f_submissions"),
        Ref("F peak depth", "eight", "/values/f_peak_depth"),
        Ref("F windows free at shutdown", "all eight windows free", "/values/f_windows_free"),
        Ref("cells exact against the control", "full logits, tokens, routes and cache state match", "/values/exact"),
    ],
    "C9": [
        Ref("storage-backed / resident, total wall", "4.965x", "/values/storage_over_resident/total_wall", unit="x"),
        Ref("storage-backed / resident, time to first token", "14.126x (first useful action)",
            "/values/storage_over_resident/ttft", unit="x"),
        Ref("resident path completed every task", "both complete all five", "/values/resident/all_completed"),
        Ref("storage-backed path completed every task", "both complete all five", "/values/storage/all_completed"),
    ],
    "C10": [
        Ref("measured carrier bandwidth", "1.085 GB/s observed", "/values/measured_bandwidth_bytes_per_s", unit="GB/s"),
        Ref("bandwidth the target needs", "at least 5.207 GB/s", "/values/needed_bandwidth_bytes_per_s", unit="GB/s"),
        Ref("decision", "did not advance to the next experiment", "/values/decision"),
    ],
    "C11": [
        Ref("tasks passed", "one of four", "/values/correct"),
        Ref("tasks the admission criterion requires", "4/4", "/values/required_correct"),
        Ref("resources passed", "685 MiB GPU margin", "/values/resources_passed"),
        Ref("admission", "stopped the planned economics cell", "/values/admission"),
    ],
    "C12": [
        Ref("requests", "a primary and an immediate-warm request", "/values/requests"),
        Ref("resets", "reset, warm request, reset and shutdown", "/values/resets"),
        Ref("primary tokens equal the oracle's", "equal the inherited same-build oracle",
            "/values/primary_tokens_equal_oracle"),
        Ref("warm tokens equal the oracle's", "equal the inherited same-build oracle",
            "/values/warm_tokens_equal_oracle"),
        Ref("balanced at teardown", "requests, resets, windows, slots, consumers and tickets balanced",
            "/values/balanced_all"),
        Ref("host clean under its limit", "host peak 5,013,585,920 bytes under 6 GiB", "/values/resource_clean"),
        Ref("whole-board GPU audit", "whole-board peak 12,294,094,848 bytes on a 12 GiB board",
            "/values/gpu_audited", unshown=GPU),
    ],
}


# ---- resolving an entry against a record ---------------------------------------------------


def _concrete(doc: dict, ref: Ref) -> list[str]:
    """The concrete pointers of the entry in this record (one per selected row); PointerError
    when the pointer names nothing; [] when no row matches `select`."""
    if ref.select is None:
        record.resolve(doc, ref.pointer)
        return [ref.pointer]
    rows = record.resolve(doc, ref.pointer)
    if not isinstance(rows, list):
        raise record.PointerError(f"{ref.pointer!r}: not a list of rows")
    return [f"{ref.pointer}/{i}{ref.field}" for i, row in enumerate(rows)
            if isinstance(row, dict) and all(row.get(k) == v for k, v in ref.select.items())]


def _missing(v) -> bool:
    """None, NaN, or a list of nothing but those (every selected row without the value)."""
    if isinstance(v, list):
        return all(_missing(x) for x in v)
    return v is None or (isinstance(v, float) and math.isnan(v))


def _record_reason(doc: dict, pointers: list[str]) -> str | None:
    """The record's own reason for a missing value at one of `pointers`, if it gives one."""
    for r in doc.get("reasons") or []:
        if any(r.startswith(f"unevaluable: {p}:") for p in pointers):
            return r.removeprefix("unevaluable: ")
    return None


def _tested(doc: dict, pointers: list[str]) -> str:
    """How the record's assertions on this value (or above or below it) came out."""
    def related(a):
        return any(a == p or p.startswith(a + "/") or a.startswith(p + "/") for p in pointers)

    outcomes = [record.check(a, doc)[0] for a in doc.get("assertions") or [] if related(a["pointer"])]
    if not outcomes:
        return "not asserted"
    return "does not hold" if False in outcomes else ("unevaluable" if None in outcomes else "holds")


def resolve(doc: dict, ref: Ref) -> dict:
    """One side-by-side row: the reference's value, this run's (raw, or None when missing),
    its status (measured, missing, not shown here) and why, and the assertions' outcome."""
    out = {"label": ref.label, "reference": ref.reference, "pointer": ref.pointer}
    if ref.select is not None:
        out |= {"select": dict(ref.select), "field": ref.field}
    try:
        pointers = _concrete(doc, ref)
        got = [record.resolve(doc, p) for p in pointers]
        value = got[0] if len(got) == 1 else got
        why = None if pointers else f"no row of {ref.pointer} has {ref.select}"
    except record.PointerError:  # its message quotes the document: too long to show
        pointers, value, why = [], None, "no such value"
    if why is None and _missing(value):
        why = "value missing"
    status = "measured"
    if why is not None:  # a marked half is excused only where the record names the value (null)
        unshown = ref.unshown if why != "no such value" else None
        value, status = None, ("not shown on this machine" if unshown else "missing")
        why = (_record_reason(doc, pointers) or f"{unshown}: {why}") if unshown else why
    return out | {"resolved": pointers, "this_run": value, "status": status, "why": why, "unit": ref.unit,
                  "tested": _tested(doc, pointers or [ref.pointer + ref.field]), "verdict": doc.get("verdict")}


def located(row: dict) -> str:
    """Where this run's value is: the record's pointers to it, or what the entry looks for."""
    if row["resolved"]:
        return ", ".join(row["resolved"][:3]) + (f" (+{len(row['resolved']) - 3})" if len(row["resolved"]) > 3 else "")
    return row["pointer"] + (f" rows with {row['select']}, then {row['field']}" if "select" in row else "")


def side_by_side(doc: dict) -> list[dict]:
    """Every entry of the record's claim, resolved against it (the ledger's reference_values)."""
    return [resolve(doc, ref) for ref in ENTRIES.get(doc.get("id"), [])]


def unresolved(doc: dict) -> list[str]:
    """The entries this record leaves missing without a mark that this machine may not show
    them: each is a pointer that names nothing a run makes (a defect, or a renamed value)."""
    return [f"{doc.get('id')}: {row['label']} ({located(row)}): {row['why']}" for row in side_by_side(doc)
            if row["status"] == "missing"]


def ledger_problems(entry: dict, doc: dict, name: str) -> list[str]:
    """A ledger entry's side-by-side rows against what its record gives now (a ledger made
    before these rows existed carries none and is not judged on them)."""
    if "reference_values" not in entry or entry["reference_values"] == side_by_side(doc):
        return []
    return [f"{name}: {entry['id']}'s reference values differ from what its record gives (remake the ledger)"]


# ---- showing this run's value --------------------------------------------------------------


def _number(v, unit: str | None) -> str:
    if unit == "B":
        if abs(v) >= 1 << 20:
            return f"{int(v):,} B ({v / GIB:.4g} GiB)" if abs(v) >= GIB else f"{int(v):,} B ({v / (1 << 20):.4g} MiB)"
        return f"{int(v):,} B"
    if unit in ("GB", "GB/s"):
        return f"{v / 1e9:.4g} {unit}"
    if unit == "ns":
        return f"{v / 1e9:.4g} s"
    if unit == "%":
        return f"{v * 100:.4g}%"
    if unit == "vs1":
        return f"{v:.4g} ({(v - 1) * 100:+.1f}%)"
    if unit == "fewer":
        return f"{v:.4g} ({(1 - v) * 100:.1f}% fewer)"
    text = f"{v:,}" if isinstance(v, int) else f"{v:.4g}"
    return text + ("" if not unit else unit if unit == "x" else f" {unit}")


def _one(v, unit: str | None) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return _number(v, unit)
    return str(v)


def shown(row: dict) -> str:
    """This run's value in words: a list of checks as 'k of n true', numbers with their unit,
    a missing value as missing with why."""
    v, unit = row["this_run"], row.get("unit")
    if row["status"] != "measured":
        return f"{row['status']} ({row['why']})"
    if isinstance(v, list):
        if all(isinstance(x, bool) for x in v):
            return f"{sum(v)} of {len(v)} true"
        if len(set(v)) == 1 and len(v) > 1:
            return f"{_one(v[0], unit)} (each of {len(v)})"
        if len(v) > 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return f"{_one(min(v), unit)} to {_one(max(v), unit)} ({len(v)} values)"
        return " / ".join(_one(x, unit) for x in v)
    return _one(v, unit)
