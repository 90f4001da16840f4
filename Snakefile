# The evidence pipeline. Thin on purpose: configuration, validation, includes, targets.
# `snakemake --cores 1 figures` runs the main job; `snakemake --cores 1 claims/P1.json`
# makes one claim with everything it needs. See README.md.

import os
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))
# Jobs call the `residency` console script of the environment running Snakemake, also
# when that environment (e.g. .venv) is not activated.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
from residency.campaigns import cells as residency_cells  # noqa: E402
from residency.campaigns import studies as residency_studies  # noqa: E402
from residency.core import config as residency_config  # noqa: E402
from residency.core import locks as residency_locks  # noqa: E402

configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


envvars:
    "PATH",


try:
    residency_config.validate(config)
except residency_config.ConfigError as exc:
    sys.exit(str(exc))
# A lock a killed run left: said in one line with its fix, before Snakemake's own
# "Another Snakemake instance is running", which is not so (a held lock is not touched).
if (stale := residency_locks.stale_note(".")) is not None:
    print(stale, file=sys.stderr)
# A configured user GGUF that is not there stops here, in one line (never "nothing to do").
if (missing := residency_cells.missing_model(config)) is not None:
    sys.exit(missing)


include: "workflow/rules/common.smk"


# Wildcards shared by the run rules of every study.
wildcard_constraints:
    arm="|".join(arms.PAGER_ARMS),
    signal="all-threads-finished|thread0-started",
    r=r"[0-9.]+",
    rep=r"\d+",
    threads=r"\d+",
    compute=r"\d+",


include: "workflow/rules/llama.smk"
include: "workflow/rules/engine.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/models_llm.smk"
include: "workflow/rules/pager.smk"
include: "workflow/rules/pager_model.smk"
include: "workflow/rules/matched_source.smk"
include: "workflow/rules/bounded_source.smk"
include: "workflow/rules/certificate.smk"
include: "workflow/rules/reclaim.smk"
include: "workflow/rules/faults.smk"
include: "workflow/rules/tasks.smk"
include: "workflow/rules/cache_transfer.smk"
include: "workflow/rules/speculative.smk"
include: "workflow/rules/gather.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/report.smk"


# Where each rule runs under a cluster executor. A run cell (its command is the harness,
# `residency run`) is its own SLURM job on a whole node: the studies' run rules
# (residency/campaigns/studies.py, from which the slurm profile's set-resources is written);
# so are the rules that build native code for the nodes, or probe, describe or read for them
# (NODE_RULES, and the studies' node rules). Every other rule only reads and writes files, or
# fetches from PyPI (which compute nodes may not reach), and runs in the Snakemake process.
NODE_RULES = {"engine", "llama_build", "machine", "probe", "synthetic_region", "region_content_digests",
              "model_content_digests", "model_inventory", "model_user_inventory", "model_verify", "model_synthetic",
              "model_user"} | residency_studies.node_rules()
RUN_RULES = set(residency_studies.run_rules())
# A rule that runs a cell but is no study's run rule would run in the Snakemake process.
if stray := sorted(RUN_RULES ^ {r.name for r in workflow.rules if "residency run " in (r.shellcmd or "")}):
    sys.exit(f"workflow error: {', '.join(stray)}: a rule runs `residency run` if and only if it is a study's "
             "run rule (residency/campaigns/studies.py)")
workflow.localrules(*(r.name for r in workflow.rules if r.name not in NODE_RULES | RUN_RULES))


onstart:
    # One line per finished run cell: study, cells done of all, the time left (residency.progress).
    from residency.campaigns import progress

    # Only the cells this invocation's DAG will run (its needrun jobs' outputs).
    to_run = {str(f) for job in workflow.dag.needrun_jobs() for f in job.output}
    progress.watch(progress.requested(progress.study_runs(config), to_run), to_run=True)


onsuccess:
    from residency.campaigns import progress

    print("\n".join(progress.summary(progress.study_runs(config))), file=sys.stderr)


rule all:
    default_target: True
    input:
        FIGURES,
        CLAIMS_LEDGER,
        SWEEP_LEDGERS,
        TABLES,
        REPORT_PAGES,


rule figures:
    input:
        FIGURES,
        CLAIMS_LEDGER,
        SWEEP_LEDGERS,
        TABLES,
        REPORT_PAGES,


rule claims:
    input:
        CLAIMS_LEDGER,
        SWEEP_LEDGERS,


rule tables:
    input:
        TABLES,
