"""The fault campaign's cells (reference 004 §5.4, Table 7; claims C3 and C12): paths, the
residctl flags of each cell and its harness flags, bound to the config's `faults` section.

Every fault cell is one job: one adapter (a model through the llama adapter; the first is
the MoE whose routes are recorded, the reference's Qwen3-Next, the second a dense model,
its Gemma 4), zero cache (pager-zero), the configured O_DIRECT windows, a fixed horizon,
greedy sampling, under a hard host limit. Per adapter an oracle cell (kernel-mmap: the
same build, prompt and horizon without the pager) is what the no-fault control must equal;
the recoverable cells must equal the control. The reset/warm cell (C12) runs on the first
adapter: primary request -> reset -> warm request -> reset -> shutdown in one process.
"""

from __future__ import annotations

from residency.campaigns.cells import digest, entry_files, entry_name, entry_view, meta_flags, model_spec, opts, run_sections

FAULT_RUNS = "results/runs/faults"
FAULT_TABLE = "results/faults.parquet"
WARM_TABLE = "results/faults_reset_warm.parquet"
ORACLE = "oracle"
WARM = "reset-warm"
from residency.core.fault_vocabulary import CELLS, CLASS, CONTROL, FATAL, NEEDS_DEPTH  # noqa: F401 (the campaign's names)


def cell_class(cell: str) -> str:
    return CLASS[cell]


def check_cell(cell: str) -> str:
    """The cell, or SystemExit naming it and the cells that exist."""
    if cell not in CELLS:
        raise SystemExit(f"residency: error: unknown fault cell {cell!r} (cells: {', '.join(CELLS)})")
    return cell


def adapters(config: dict) -> list[str]:
    """The adapters' names in paths (smollm2, synthetic-moe, a user model's name)."""
    return [entry_name(e) for e in config["faults"]["adapters"]]


def _entry(config: dict, adapter: str) -> str:
    return {entry_name(e): e for e in config["faults"]["adapters"]}[adapter]


def model_files(config: dict, adapter: str) -> tuple[str, str]:
    """(GGUF path, identity record) of an adapter's model."""
    return entry_files(config, _entry(config, adapter))


def faults_digest(config: dict, adapter: str) -> str:
    """What an adapter's cells depend on: every run's sections, the campaign's section, the
    prompt, and the adapter's model as configured."""
    return digest(run_sections(config) | {"faults": config["faults"], "prompt": config["pager_model"]["prompt"],
                                          "model": _model_entry(config, adapter)})


def _model_entry(config: dict, adapter: str) -> dict:
    """The models entry the adapter's model is made from (cells.model_spec's one value)."""
    (entry,) = model_spec(entry_view(config, _entry(config, adapter))).values()
    return entry


def cell_names(config: dict, adapter: str) -> list[str]:
    return [ORACLE, *config["faults"]["cells"]] + ([WARM] if adapter == adapters(config)[0] else [])


def cell_run(adapter: str, cell: str) -> str:
    return f"{FAULT_RUNS}/{adapter}/{cell}/harness.json"


def fault_runs(config: dict) -> list[str]:
    """Every fault cell's harness record (oracles first), C12's cell excluded."""
    return [cell_run(a, c) for a in adapters(config) for c in cell_names(config, a) if c != WARM]


def warm_run(config: dict) -> str:
    return cell_run(adapters(config)[0], WARM)


def c3_set(config: dict) -> list[tuple[str, str]]:
    """(adapter, cell) of C3's prespecified cells: every configured cell on the first
    adapter, the configured subset on the second."""
    a = adapters(config)
    first = [(a[0], c) for c in config["faults"]["cells"]]
    return first + [(a[1], c) for c in config["faults"]["c3_second_adapter"]] if len(a) > 1 else first


def fault_flag(config: dict, cell: str) -> list[str]:
    if cell in (ORACLE, CONTROL, WARM):
        return []
    return opts(fault=f"{cell}@{config['faults']['at'][cell]}")


def generate_args(config: dict, adapter: str, cell: str, model: str) -> list[str]:
    """The residctl generate flags of one cell (prompt and run directory added by the rule)."""
    f = config["faults"]
    common = opts(model=model, tokens=f["tokens"], ctx=f["ctx"], threads=f["threads"], watchdog_s=f["watchdog_s"])
    if cell == ORACLE:
        return common + opts(arm="kernel-mmap")
    w = f["warm"] if cell == WARM else {"arm": "pager-zero", "budget_bytes": f["budget_bytes"]}
    pager = opts(arm=w["arm"], budget_bytes=w["budget_bytes"], chunk_size=f["chunk_bytes"], huge_chunks="off",
                 source=f["source"], windows=f["windows"])
    return common + pager + fault_flag(config, cell) + opts(warm_request=cell == WARM)


def harness_args(config: dict, adapter: str, cell: str) -> list[str]:
    """The hard host limit of every cell (the oracle's too: the same contract) and its meta."""
    return (opts(limit_bytes=config["faults"]["host_cap_bytes"])
            + meta_flags(faults_digest(config, adapter),
                         {"campaign": "faults", "adapter": adapter, "cell": cell, "class": cell_class(cell)
                          if cell in CELLS else cell}))
