"""The cache-transfer campaign (reference 004 A.5, claim C7): zero reuse (pager-zero) against
independent per-layer LRU-k (pager-lru-k, `--lru-k K`) on one model, with the same scheduler
and representation (same build, source, windows, chunk size, budget, threads), one pair of
cells per configured prompt, bound to the config's `cache_transfer` section.

The cells run one after another in alternating fixed order (pair 0: zero, lru-k; pair 1:
lru-k, zero; ...): each cell's job waits for the one before it, so neither arm always runs
first on a storage state the other left. Every cell is one job under the harness and a cold
prefill: a fresh process, the model's page cache dropped first (`--drop-cache`). Its prefill
and decode run in that one process with no pager reset between them, so LRU-k's decode
starts from what the prefill's tail left resident (the reference's prefill-tail seeding).
`premise_error` refuses a config that cannot make such pairs before any cell runs.
"""

from __future__ import annotations

from residency.core.arms import PAGER_LRU_K, PAGER_ZERO
from residency.campaigns.cells import digest, entry_files, entry_name, entry_view, meta_flags, model_spec, opts, run_sections

RUNS = "results/runs/cache_transfer"
TABLE = "results/cache_transfer.parquet"
ARMS = (PAGER_ZERO, PAGER_LRU_K)


def model(config: dict) -> str:
    """The model's name in paths."""
    return entry_name(config["cache_transfer"]["model"])


def model_files(config: dict) -> tuple[str, str]:
    """(GGUF path, identity record) of the campaign's model."""
    return entry_files(config, config["cache_transfer"]["model"])


def order(config: dict) -> list[tuple[int, str]]:
    """(pair, arm) of every cell in run order: zero, lru-k, lru-k, zero, zero, lru-k, ..."""
    n = len(config["cache_transfer"]["prompts"])
    return [(i, a) for i in range(n) for a in (ARMS if i % 2 == 0 else ARMS[::-1])]


def premise_error(config: dict) -> str | None:
    """One line naming the key when the pairs cannot be the reference's (004 §5.1: "a cold
    prefill ... alternating fixed order across five prompts"), else None: a repeated prompt
    is not another pair, and one generated token leaves no decode to time."""
    c = config["cache_transfer"]
    for i, text in enumerate(c["prompts"]):
        if text in c["prompts"][:i]:
            return (f"config error: cache_transfer.prompts[{i}]: the same prompt as prompts[{c['prompts'].index(text)}]; "
                    "each pair needs its own prompt")
    if c["tokens"] < 2:
        return f"config error: cache_transfer.tokens: {c['tokens']} leaves no decode pass after the prefill to time"
    return None


def cell_run(pair: int, arm: str) -> str:
    return f"{RUNS}/pair{pair}/{arm}/harness.json"


def runs(config: dict) -> list[str]:
    """Every cell's harness record, in run order."""
    return [cell_run(i, a) for i, a in order(config)]


def previous_run(config: dict, pair: int, arm: str) -> list[str]:
    """The cell run just before this one ([] for the first): its job waits for it."""
    seq = order(config)
    k = seq.index((int(pair), arm))
    return [cell_run(*seq[k - 1])] if k else []


def prompt(config: dict, pair: int) -> str:
    return config["cache_transfer"]["prompts"][int(pair)]


def ct_digest(config: dict) -> str:
    """What the cells depend on: every run's sections, the campaign's and the model as configured."""
    c = config["cache_transfer"]
    return digest(run_sections(config) | {"cache_transfer": c, "model": model_spec(entry_view(config, c["model"]))})


def generate_args(config: dict, arm: str, gguf: str) -> list[str]:
    """The residctl generate flags of one cell (prompt and run directory added by the rule):
    both arms the same but for the arm and, for pager-lru-k, K."""
    c = config["cache_transfer"]
    return opts(model=gguf, tokens=c["tokens"], ctx=c["ctx"], threads=c["threads"], watchdog_s=c["watchdog_s"],
                arm=arm, lru_k=c["k"] if arm == PAGER_LRU_K else None, budget_bytes=c["budget_bytes"],
                chunk_size=c["chunk_bytes"], huge_chunks="off", source=c["source"], windows=c["windows"])


def harness_args(config: dict, pair: int, arm: str) -> list[str]:
    return meta_flags(ct_digest(config), {"campaign": "cache_transfer", "arm": arm, "pair": int(pair),
                                          "order": order(config).index((int(pair), arm))})
