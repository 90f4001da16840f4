"""The speculative-decoding campaign (reference 004 A.1, claim C4), bound to the config's
`speculative` section: on one target model, a greedy cell (one target traversal per
output) and a speculative cell (`residctl generate --draft`), the same in everything else:
arm, weight budget, source, chunk size, threads, prompt, horizon and hard host limit. The
draft is the target requantized by the pinned llama.cpp's own quantizer at build time
(its identity names the target and the type). The speculative cell runs after the greedy
one; each is one job under the harness.
"""

from __future__ import annotations

from pathlib import Path

from residency.campaigns.cells import MODELS_DIR, digest, entry_files, entry_name, entry_view, meta_flags, model_spec, opts, run_sections

RUNS = "results/runs/speculative"
TABLE = "results/speculative.parquet"
GREEDY, SPECULATIVE = "greedy", "speculative"
CELLS = (GREEDY, SPECULATIVE)


def model(config: dict) -> str:
    """The target's name in paths."""
    return entry_name(config["speculative"]["model"])


def model_files(config: dict) -> tuple[str, str]:
    """(GGUF path, identity record) of the target."""
    return entry_files(config, config["speculative"]["model"])


def draft_files(config: dict) -> tuple[str, str]:
    """(GGUF path, identity record) of the draft made from the target."""
    stem = f"{MODELS_DIR}/drafts/{Path(model_files(config)[0]).stem}.{config['speculative']['draft_type']}"
    return f"{stem}.gguf", f"{stem}.json"


def cell_run(cell: str) -> str:
    return f"{RUNS}/{cell}/harness.json"


def runs() -> list[str]:
    """Both cells' harness records, in run order."""
    return [cell_run(c) for c in CELLS]


def previous_run(cell: str) -> list[str]:
    """The cell run just before this one ([] for the first): its job waits for it."""
    k = CELLS.index(cell)
    return [cell_run(CELLS[k - 1])] if k else []


def spec_digest(config: dict) -> str:
    """What the cells depend on: every run's sections, the campaign's, the target as configured
    and the llama.cpp pin (the draft is made by it)."""
    c = config["speculative"]
    return digest(run_sections(config) | {"speculative": c, "llama_commit": config["llama"]["commit"],
                                          "model": model_spec(entry_view(config, c["model"]))})


def generate_args(config: dict, cell: str, gguf: str, draft: str) -> list[str]:
    """The residctl generate flags of one cell (prompt and run directory added by the rule):
    both the same but for --draft."""
    c = config["speculative"]
    spec = opts(draft=draft, draft_max=c["draft_max"]) if cell == SPECULATIVE else []
    return opts(model=gguf, tokens=c["tokens"], ctx=c["ctx"], threads=c["threads"], watchdog_s=c["watchdog_s"],
                arm=c["arm"], budget_bytes=c["budget_bytes"], chunk_size=c["chunk_bytes"], huge_chunks="off",
                source=c["source"], windows=c["windows"]) + spec


def harness_args(config: dict, cell: str) -> list[str]:
    """The hard host limit of both cells and the cell's meta."""
    c = config["speculative"]
    return (opts(limit_bytes=c["host_cap_bytes"])
            + meta_flags(spec_digest(config), {"campaign": "speculative", "arm": c["arm"], "cell": cell,
                                               "order": CELLS.index(cell)}))
