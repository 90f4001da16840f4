# Shared names and helpers of the rule files, from residency.cells (paths, the campaign's cells,
# config digests, the residctl flags of a cell; tested in tests/test_cells.py) bound to the
# loaded config, and the few functions the rules call. The rule files hold rules only.

import json
import re
from functools import partial

from residency.core import arms
from residency.campaigns import bounded_source, cache_transfer, cells, fault_cells, speculative
from residency import claims as residency_claims
from residency import cli as residency_cli
from residency.claims import protocol as residency_protocol
from residency.campaigns import tasks as residency_tasks

CONDA_ENV = "../../environment.yml"  # relative to the rule files; used with --sdm conda
RESIDCTL = cells.residctl(config)
LOGS = cells.LOGS


def residency_code(command, choice=None):
    """The source files an output's command can execute (residency.cli.code_of, from the
    package's import graph): a change in any of them remakes the output, and no other does."""
    return residency_cli.code_of(command, choice)


ratio_str = cells.ratio_str
run_dir = cells.run_dir
run_dirs = cells.run_dirs
OVERHEAD_MARGIN = cells.overhead_margin_flags(config)  # the reserve R = O + margin (overhead.py)
model_identity = cells.model_identity
model_inventory = cells.model_inventory

# Content digests of a model or region file (residctl inventory), checked against the sha256
# of its identity record: the rules making them have inputs engine, file and identity.
CONTENT_DIGESTS_CMD = (
    "residency model digests --residctl {input.engine:q} --file {input.file:q} --chunk-size {wildcards.chunk:q}"
    " --identity {input.identity:q} --out {output:q} 2> {log:q}"
)

# ---- the synthetic pager study ------------------------------------------------------------

PS = config["pager_synthetic"]
# Each run rule has its campaign's config digest as a plain param, since Snakemake reruns a job
# when a param changes, but does not compare params derived from input (`lambda w, input:`),
# which most of the flags are.
PS_DIGEST = cells.ps_digest(config)
REGION = cells.region(config)
REGION_IDENTITY = cells.region_identity(config)
RUNS = cells.RUNS
budget_bytes = partial(cells.budget_bytes, config)
scan_args = partial(cells.scan_args, config)
harness_meta = partial(cells.harness_meta, config)
PS_DIGESTS = list(filter(None, [cells.ps_content_digests(config)]))  # [] when content_check is off
stress_scan_args = partial(cells.stress_scan_args, config)
stress_meta = partial(cells.stress_meta, config)
MAIN_CELLS = cells.main_cells(config)
STRESS_CELLS = cells.stress_cells(config)


def calibration_runs(wildcards):
    return cells.calibration_runs(config, wildcards.threads)


# ---- reclaim authority (reference 000, claim 3) -------------------------------------------

RECLAIM = config["reclaim"]
RECLAIM_DIGEST = cells.reclaim_digest(config)
RECLAIM_CELLS = cells.reclaim_cells(config)
RECLAIM_RUNS = cells.RECLAIM_RUNS
reclaim_scan_args = partial(cells.reclaim_scan_args, config)
reclaim_meta = partial(cells.reclaim_meta, config)
RECLAIM_HARNESS = cells.reclaim_harness_args(config)


# ---- the real-model pager study (reference 000 on llama.cpp) ------------------------------

PM = config["pager_model"]
PM_RUNS = cells.PM_RUNS
# Every model of pager_model.models runs the study under its own {model} (its name); the
# PM_* names are the primary's (the first entry), which the matched campaign runs on.
PM_NAMES = cells.pm_names(config)
PM_MODEL_RE = "|".join(re.escape(n) for n in PM_NAMES)
PM_NAME = PM_NAMES[0]
PM_DIGEST = cells.pm_digest(config)
pm_model = partial(cells.pm_model, config)
pm_t_repr = cells.pm_t_repr
pm_budget = cells.pm_budget
PM_GRAPH_PLAN = cells.pm_graph_plan(config)
PM_DIGESTS = list(filter(None, [cells.pm_content_digests(config)]))
SWEEP_NAMES = cells.sweep_names(config)
SWEEP_MODEL_RE = "|".join(re.escape(n) for n in SWEEP_NAMES) or "(?!)"  # matches nothing without a sweep


def mv(w):
    """The config as the model of a job sees it (its {model} wildcard; else the primary)."""
    return cells.model_view(config, w.get("model", PM_NAME))


def pm_digests(w):
    return list(filter(None, [cells.pm_content_digests(mv(w))]))


def pm_calibration_runs(w):
    return cells.pm_calibration_runs(mv(w))


# ---- the matched source campaign (reference 004 §5.3) -------------------------------------

MS_RUNS = cells.ms_runs(config)
MS_CELLS = cells.ms_cells(config)  # in execution order: the oracle first
MS_DIGEST = cells.ms_digest(config)
MS_CELL_PATTERN = cells.MS_CELL_PATTERN
ms_host_budget = partial(cells.ms_host_budget, config)
ms_pager_budget = partial(cells.ms_pager_budget, config)
ms_generate_args = partial(cells.ms_generate_args, config)
ms_meta = partial(cells.ms_meta, config)


def ms_previous(wildcards):
    return cells.ms_previous(config, wildcards.cell)


# ---- claims and tables ---------------------------------------------------------------------


def claim_protocol(claim_id, name=None):
    """The campaign design the claim's inputs are made under (residency/claims/protocol.py), as the
    claim's model sees it (the primary unless named: one model's claims do not change with
    the rest of pager_model.models)."""
    view = cells.model_view(config, name)
    return json.dumps(residency_protocol.of(view, residency_claims.input_paths(claim_id)), sort_keys=True)


def sweep_model(name):
    """What results/tables/models.* reads of one model of pager_model.models."""
    return {"name": name, "runs": cells.pm_parquet(config, name), "opt": cells.pm_opt(config, name),
            "inventory": cells.pm_model(cells.model_view(config, name))[2],
            "claims": [cells.pm_claim(config, name, c) for c in MODEL_CLAIM_IDS]}


def table_outputs(name):
    """A table's three files; the CSV goes into the Snakemake report."""
    csv = report(f"results/tables/{name}.csv", caption="../report/table.rst", category="Tables")
    return [csv, *(f"results/tables/{name}.{ext}" for ext in ("md", "tex"))]
