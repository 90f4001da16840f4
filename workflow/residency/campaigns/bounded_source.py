"""The bounded-source campaign (reference 004 §5.5, claim C8), bound to the config's
`bounded_source` section: one matched pair on one model, the buffered source P (pread
through the page cache) against the bounded direct source F (io_uring O_DIRECT into a fixed
set of windows), the same in everything else (arm, cache, chunk size, threads, prompt,
horizon), under one hard host cap above P's natural peak.

Its operating point is the reference's: a model whose managed bytes S cannot be resident
in the weight allowance (eq. 1, S > H_cap - R_policy, with H_cap - R_policy = ratio x S and
R_policy the calibrated reserve), while what a horizon demands of it (a sparse MoE's routed
experts) and so what P's page cache holds stays below the cap: P is admissible, not
clipped, and the two host peaks can be compared. The cells, in order: F's calibration runs
(O: a direct source holds no page cache), the oracle (kernel-mmap, no limit), P's natural
run (no limit: its own peak), the premise (premise.bounded_source: eq. 1 and P's natural
peak below H_cap), then P and F under the cap.
"""

from __future__ import annotations

from residency.core.arms import ASYNC, BUFFERED, ORACLE
from residency.campaigns.cells import digest, entry_files, entry_name, entry_view, meta_flags, model_spec, opts, run_sections

RUNS = "results/runs/bounded_source"
TABLE = "results/bounded_source.parquet"
NATURAL = "P-natural"
PAIR = (BUFFERED, ASYNC)
CELLS = (ORACLE, NATURAL, *PAIR)  # in run order
SOURCE = {ORACLE: None, NATURAL: "buffered", BUFFERED: "buffered", ASYNC: "uring"}


def model(config: dict) -> str:
    return entry_name(config["bounded_source"]["model"])


def model_files(config: dict) -> tuple[str, str]:
    """(GGUF path, identity record) of the campaign's model."""
    return entry_files(config, config["bounded_source"]["model"])


def digest_of(config: dict) -> str:
    c = config["bounded_source"]
    return digest(run_sections(config) | {"bounded_source": c, "model": model_spec(entry_view(config, c["model"]))})


def cell_run(cell: str) -> str:
    return f"{RUNS}/{cell}/harness.json"


def calibration_runs(config: dict) -> list[str]:
    return [f"{RUNS}/calibrate/rep{k}/harness.json" for k in range(1, config["harness"]["overhead_reps"] + 1)]


def runs() -> list[str]:
    """The campaign's cells' harness records in run order (calibration runs not included)."""
    return [cell_run(c) for c in CELLS]


def previous_run(cell: str) -> list[str]:
    k = CELLS.index(cell)
    return [cell_run(CELLS[k - 1])] if k else []


def pager_budget(config: dict, cell: str) -> int:
    """Every cell holds the same cache: F's budget also pays its windows beyond P's one."""
    c = config["bounded_source"]
    return c["budget_bytes"] + ((c["windows"] - 1) * c["chunk_bytes"] if cell == ASYNC else 0)


def generate_args(config: dict, cell: str, gguf: str) -> list[str]:
    """residctl generate flags of one cell (prompt and run directory added by the rule); a
    calibration run (cell "calibrate") is F's."""
    c = config["bounded_source"]
    common = opts(model=gguf, tokens=c["tokens"], ctx=c["ctx"], threads=c["threads"], watchdog_s=c["watchdog_s"])
    if cell == ORACLE:
        return common + opts(arm="kernel-mmap")
    cell = ASYNC if cell == "calibrate" else cell
    f = cell == ASYNC
    return common + opts(arm=c["arm"], budget_bytes=pager_budget(config, cell), chunk_size=c["chunk_bytes"],
                         huge_chunks="off", source=SOURCE[cell], windows=c["windows"] if f else None,
                         depth=c["depth"] if f else None)


def harness_meta(config: dict, cell: str, t_repr: int) -> list[str]:
    """Where a cell sits in the campaign: the gather of the matched source campaign reads it."""
    arm = BUFFERED if cell == NATURAL else cell
    return meta_flags(digest_of(config), {
        "campaign": "bounded-natural" if cell == NATURAL else "bounded", "arm": config["bounded_source"]["arm"],
        "source_arm": arm, "block": 1 if cell in PAIR else 0, "order": "P-F" if cell in PAIR else "",
        "position": CELLS.index(cell), "rep": 1, "t_repr_bytes": t_repr})


def capped(cell: str) -> bool:
    return cell in PAIR


def weight_allowance(config: dict, t_repr: int) -> int:
    """H_cap - R_policy: ratio x S (S = T_repr, every tensor managed from storage)."""
    return int(float(config["bounded_source"]["ratio"]) * t_repr)
