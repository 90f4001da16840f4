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
from residency import cells as residency_cells  # noqa: E402
from residency import config as residency_config  # noqa: E402

configfile: "config/config.yaml"


envvars:
    "PATH",


try:
    residency_config.validate(config)
except residency_config.ConfigError as exc:
    sys.exit(str(exc))
# A configured user GGUF that is not there stops here, in one line (never "nothing to do").
if (missing := residency_cells.missing_model(config)) is not None:
    sys.exit(missing)


include: "workflow/rules/common.smk"
include: "workflow/rules/llama.smk"
include: "workflow/rules/engine.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/models_llm.smk"
include: "workflow/rules/pager.smk"
include: "workflow/rules/pager_model.smk"
include: "workflow/rules/matched_source.smk"
include: "workflow/rules/reclaim.smk"
include: "workflow/rules/gather.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/tables.smk"


rule all:
    default_target: True
    input:
        FIGURES,
        CLAIMS_LEDGER,
        TABLES,


rule figures:
    input:
        FIGURES,
        CLAIMS_LEDGER,
        TABLES,


rule claims:
    input:
        CLAIMS_LEDGER,


rule tables:
    input:
        TABLES,
