"""C9 (reference 004 §5.6): resource admissibility is not product superiority.

The resident path (the unconstrained baseline runs of pager_model: plain mmap, no budget)
against the storage-backed path (arm D, pager-declared, at the budget ratio
`claims.c9_ratio`, fixed in the config before any run) on the same task (one prompt, one
token count). Per path: runs, runs completed (status ok and oracle-exact), mean total wall
(the engine's wall_ns: load, context, prefill and decode) and mean time to first token
(TTFT: llama.cpp's prefill_ns, from submitting the prompt batch until its logits choose
output token 0; model load and context creation are not in it). The ratios are
storage-backed over resident. The record asserts the reference's statement: both paths
complete every run exactly, and the resident path is faster in total wall and in TTFT.
These are two operating points of one model and build, not a ranking.
"""

from __future__ import annotations

from residency.core.arms import PAGER_DECLARED
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, as_float, fmt

ID = "C9"
REFERENCE = ("Reference claim C9: on five software-repository tasks, the aggregate-budget Qwen3-Next path and an "
             "aligned resident Qwen3.6 path both complete all five; the resident path is 4.965x faster in total "
             "wall time and 14.126x faster to first useful action. These are different model paths, not a "
             "controlled architecture comparison, and the ratios do not rank model quality: storage-backed "
             "sovereignty is valuable when capacity is binding, a fitting resident model is preferable when "
             "latency is the objective.")
INPUTS = {"runs": mr.MODEL_RUNS}
TTFT = ("time to first token: llama.cpp's prefill_ns, from submitting the prompt batch until its logits choose "
        "output token 0 (model load and context creation excluded; total wall includes them)")
NOT_REPRODUCED = ["the reference compares two different models (Qwen3-Next storage-backed, Qwen3.6 resident); "
                  "here both paths run the same model and build, so the ratio is the cost of the budget alone",
                  "the reference runs on a GPU; here llama.cpp runs on the CPU",
                  "the reference's tasks are five software-repository tasks with a time to first useful action; "
                  "here the task is one fixed prompt and token count, repeated, and the first action is the first "
                  "output token"]


def _path(df) -> dict:
    done = (df["status"] == "ok") & (df["exact"].fillna(False).astype(bool))
    ok = df[done]
    return {"runs": int(len(df)), "completed": int(done.sum()),
            "all_completed": bool(len(df)) and bool(done.all()),
            "mean_wall_s": as_float(ok["wall_ns"].mean() / 1e9) if len(ok) else None,
            "mean_ttft_s": as_float(ok["prefill_ns"].mean() / 1e9) if len(ok) else None,
            "prompt_tokens": sorted(int(v) for v in df["prompt_tokens"].dropna().unique()),
            "tokens": sorted(int(v) for v in df["tokens"].dropna().unique()),
            "host_grades": sorted(str(v) for v in df["host_grade"].dropna().unique()),
            "run_dirs": [str(v) for v in df["run_dir"]]}


def _ratio(num, den):
    return num / den if num is not None and den else None


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    ratio = float(settings["c9_ratio"])
    base = runs[runs["campaign"] == "baseline"]
    main = mr.main_runs(runs, PAGER_DECLARED)
    store = main[(main["r"] - ratio).abs() < 1e-9]
    insufficient = []
    if base.empty:
        insufficient.append(f"no unconstrained baseline runs (campaign baseline) in {mr.MODEL_RUNS}")
    if store.empty:
        have = ", ".join(f"{r:g}" for r in sorted(main["r"].dropna().unique())) or "none"
        insufficient.append(f"no {PAGER_DECLARED} runs of the main campaign at r={ratio:g} "
                            f"(claims.c9_ratio; ratios there: {have})")
    soft = sorted(set(store["host_grade"].astype(str)) - {"hard"})
    if soft:
        insufficient.append(f"the storage-backed path needs its budget under a hard host limit; its runs were "
                            f"graded {soft}")
    resident, storage = _path(base), {"arm": PAGER_DECLARED, "r": ratio, **_path(store)}
    values = {
        "resident": resident,
        "storage": storage,
        "same_task": bool(resident["runs"] and storage["runs"]) and len(resident["prompt_tokens"]) == 1
        and resident["prompt_tokens"] == storage["prompt_tokens"] and len(resident["tokens"]) == 1
        and resident["tokens"] == storage["tokens"],
        "storage_over_resident": {"total_wall": _ratio(storage["mean_wall_s"], resident["mean_wall_s"]),
                                  "ttft": _ratio(storage["mean_ttft_s"], resident["mean_ttft_s"])},
        "ttft_is": TTFT,
        "reading": ("two operating points of the same model and build, resident (no budget) and storage-backed "
                    f"(arm D at r={ratio:g}): the ratios say what the budget costs in latency, not which path "
                    "is better; the storage-backed path is the one that runs when capacity is binding"),
        "not_reproduced": NOT_REPRODUCED,
        "oracle_note": "the resident path's first run is the exactness oracle (exact by definition)",
    }
    q = values["storage_over_resident"]
    headline = (f"Resident {resident['completed']}/{resident['runs']} and storage-backed D at r={ratio:g} "
                f"{storage['completed']}/{storage['runs']} runs completed exactly; storage-backed/resident total "
                f"wall x{fmt(q['total_wall'], '.3f')}, time to first token x{fmt(q['ttft'], '.3f')} "
                f"(two operating points of one model, not a ranking).")
    assertions = [
        Assertion("/values/resident/all_completed", "eq", True, why="the resident path completes every run exactly"),
        Assertion("/values/storage/all_completed", "eq", True,
                  why="the storage-backed path completes every run exactly"),
        Assertion("/values/same_task", "eq", True, why="both paths run the same prompt and token count"),
        Assertion("/values/storage_over_resident/total_wall", "gt", 1.0,
                  why="the resident path is faster in total wall"),
        Assertion("/values/storage_over_resident/ttft", "gt", 1.0,
                  why="the resident path is faster to the first token"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
