"""Every study, declared once: its name, its run cells, the rules that run them, the tables
`residency gather` makes of them, its paper tables and its claims.

What is built from this registry (docs/architecture.md, "A study is one registered unit"):
the progress counts (campaigns/progress.py `study_runs`), where rules run under a cluster
executor (the Snakefile's local rules; the slurm profile's whole-node set-resources, written
by workflow/scripts/slurm_profile.py and checked by tests/test_study_registry.py), the
`residency gather` choices, options and handlers (cli.py) and the deep re-gather and the
declared Arrow schemas (gather/studies.py).

The Snakefile reads this module at parse time, so it imports only campaigns and core (no
pandas, no pyarrow). A gather's functions live in the gather layer above, so a declaration
names them as "module:attribute" strings, resolved (core.imports.resolve) only by the layers
that call them; core.imports counts such a string as an import of its module, so the code
inputs of what reads the registry's gathers include them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from residency.campaigns import bounded_source, cache_transfer, cells, fault_cells, speculative, tasks


@dataclass(frozen=True)
class Gather:
    """One gathered table: `residency gather NAME --out T RUN_DIR...` writes it.

    command: "module:function", called as function(run_dirs, out, **options) with `needs`
      (required, the CLI says which are missing) and `takes` (optional, None when absent);
    table: "module:function", lineage -> pa.Table, the table made again from the lineage it
      carries (verify --deep); its lineage's "study" is NAME;
    schema: "module:attribute", the table's declared Arrow schema."""

    name: str
    command: str
    table: str
    schema: str
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Study:
    """One study: `name` is its config section and its progress label.

    runs: config -> every run cell's harness.json, calibration runs included;
    run_rules: the rules whose job is one run cell (`residency run`): a whole node each;
    node_rules: its other rules that run on a node (a build or read for its cells);
    per_model: its cells run again for every further model of pager_model.models."""

    name: str
    runs: Callable[[dict], list[str]]
    run_rules: tuple[str, ...]
    gathers: tuple[Gather, ...] = ()
    node_rules: tuple[str, ...] = ()
    paper_tables: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    per_model: bool = False


# The options of `residency gather`, by name (--region-identity): (type, help). A gather
# names those it needs or takes; the CLI's help lists which gathers use each.
GATHER_OPTIONS = {
    "region_identity": (str, "the region's identity record"),
    "oracle": (str, "the oracle run directory"),
    "model_identity": (str, "the model's identity record"),
    "llama_identity": (str, "the llama.cpp build's identity record (llama-identity.json)"),
    "draft_identity": (str, "the draft's identity record"),
    "reserve_bytes": (int, "R_policy (eq. 1)"),
    "record": (str, "the certificate.json the table must agree with"),
    "prespecified": (str, "JSON list of C3's [adapter, cell] pairs"),
    "tasks": (str, 'JSON {"seed": S, "n": N}, the tasks the runs answered'),
}


def _synthetic_runs(config: dict) -> list[str]:
    ps = config["pager_synthetic"]
    threads = sorted({ps["main"]["threads"], *ps["stress"]["threads"]})
    return ([p for t in threads for p in cells.calibration_runs(config, t)]
            + cells.main_cells(config) + cells.stress_cells(config))


def _model_runs(view: dict) -> list[str]:
    return (cells.pm_calibration_runs(view) + cells.pm_cells(view) + cells.pm_baselines(view)
            + cells.pm_roofline_runs(view))


def _fault_runs(config: dict) -> list[str]:
    return [fault_cells.cell_run(a, c) for a in fault_cells.adapters(config) for c in fault_cells.cell_names(config, a)]


STUDIES = (
    Study("pager_synthetic", _synthetic_runs, ("calibrate_overhead_run", "pager_main_cell", "pager_stress_cell"),
          gathers=(Gather("pager-synthetic", "residency.gather.pager:gather_pager_synthetic",
                          "residency.gather.pager:pager_synthetic_from", "residency.gather.pager:PAGER_SYNTHETIC_SCHEMA",
                          needs=("region_identity",), takes=("llama_identity",)),),
          paper_tables=("pager-synthetic",), claims=("P1", "P4", "P5")),
    Study("pager_model", _model_runs,
          ("pager_model_calibrate_run", "pager_model_cell", "pager_model_baseline", "pager_model_roofline_run"),
          gathers=(Gather("pager-model", "residency.gather.pager:pager_model_command",
                          "residency.gather.pager:pager_model_from", "residency.gather.pager:PAGER_MODEL_SCHEMA",
                          needs=("oracle", "model_identity"), takes=("llama_identity",)),
                   Gather("pager-model-roofline", "residency.gather.roofline:gather_roofline",
                          "residency.gather.roofline:roofline_table", "residency.gather.roofline:SCHEMA")),
          node_rules=("pager_model_graph_plan",), paper_tables=("pager-model",),
          claims=("C9", "P2", "P6", "P7", "P8", "P9", "P10", "P11"), per_model=True),
    Study("matched_source", cells.ms_cells, ("matched_source_cell",),
          gathers=(Gather("matched-source", "residency.gather.pager:matched_source_command",
                          "residency.gather.pager:matched_source_from", "residency.gather.pager:MATCHED_SOURCE_SCHEMA",
                          needs=("oracle", "model_identity"), takes=("llama_identity",)),),
          paper_tables=("table6-matched-pairs",), claims=("C2", "C10")),
    # Its table is the matched-source gather's (the same columns, its own cells).
    Study("bounded_source", lambda config: bounded_source.calibration_runs(config) + bounded_source.runs(),
          ("bounded_source_calibrate_run", "bounded_source_cell"), claims=("C8",)),
    Study("reclaim", cells.reclaim_cells, ("reclaim_cell",),
          gathers=(Gather("reclaim", "residency.gather.reclaim:gather_reclaim", "residency.gather.reclaim:reclaim_from",
                          "residency.gather.reclaim:RECLAIM_SCHEMA", needs=("region_identity",),
                          takes=("llama_identity",)),),
          claims=("P3",)),
    Study("certificate", lambda config: [cells.cert_run(c) for c in cells.CERT_CELLS], ("certificate_cell",),
          gathers=(Gather("certificate", "residency.gather.certificate:certificate_command",
                          "residency.gather.certificate:certificate_table",
                          "residency.gather.certificate:CERTIFICATE_SCHEMA",
                          needs=("oracle", "model_identity", "reserve_bytes"), takes=("record",)),),
          paper_tables=("table1-obligations", "table5-certificate"), claims=("C1",)),
    Study("faults", _fault_runs, ("fault_cell",),
          gathers=(Gather("faults", "residency.gather.faults:faults_command", "residency.gather.faults:faults_table",
                          "residency.gather.faults:FAULTS_SCHEMA", needs=("prespecified",)),
                   Gather("reset-warm", "residency.gather.faults:reset_warm_command",
                          "residency.gather.faults:reset_warm_table", "residency.gather.faults:RESET_WARM_SCHEMA",
                          needs=("oracle",))),
          paper_tables=("table7-faults",), claims=("C3", "C12")),
    Study("tasks", lambda config: tasks.calibration_runs(config) + tasks.task_runs(config),
          ("tasks_calibrate_run", "task_cell"),
          gathers=(Gather("tasks", "residency.gather.tasks:tasks_command", "residency.gather.tasks:tasks_table",
                          "residency.gather.tasks:TASKS_SCHEMA", needs=("tasks", "model_identity")),),
          claims=("C5", "C6", "C11")),
    Study("cache_transfer", cache_transfer.runs, ("cache_transfer_cell",),
          gathers=(Gather("cache-transfer", "residency.gather.cache_transfer:gather_cache_transfer",
                          "residency.gather.cache_transfer:cache_transfer_table",
                          "residency.gather.cache_transfer:CACHE_TRANSFER_SCHEMA"),),
          claims=("C7",)),
    Study("speculative", lambda config: speculative.runs(), ("speculative_cell",),
          gathers=(Gather("speculative", "residency.gather.speculative:gather_speculative",
                          "residency.gather.speculative:speculative_table",
                          "residency.gather.speculative:SPECULATIVE_SCHEMA", needs=("draft_identity",)),),
          node_rules=("speculative_draft",), claims=("C4",)),
)


def gathers() -> dict[str, Gather]:
    """Every gathered table, by its `residency gather` choice."""
    return {g.name: g for s in STUDIES for g in s.gathers}


def run_rules() -> list[str]:
    """Every run cell's rule: each job a whole node."""
    return [r for s in STUDIES for r in s.run_rules]


def node_rules() -> set[str]:
    """The studies' other rules that run on a node."""
    return {r for s in STUDIES for r in s.node_rules}


def slurm_set_resources() -> dict[str, dict]:
    """The slurm profile's set-resources: every run cell's rule asks for a whole node."""
    return {r: {"slurm_extra": "'--exclusive'"} for r in run_rules()}
