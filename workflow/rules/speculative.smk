# Speculative decoding (reference 004 A.1; claim C4): the draft made from the target by the
# pinned llama.cpp's quantizer, then on the target a greedy cell and a speculative cell
# (residctl generate --draft), the same arm, budget, source and hard host limit, one job
# each under the harness, the speculative one after the greedy one; then
# results/speculative.parquet.

SPEC_MODEL, SPEC_IDENTITY = speculative.model_files(config)
SPEC_DRAFT, SPEC_DRAFT_IDENTITY = speculative.draft_files(config)


rule speculative_draft:
    input:
        engine=RESIDCTL,
        model=SPEC_MODEL,
        identity=SPEC_IDENTITY,
    output:
        gguf=SPEC_DRAFT,
        identity=SPEC_DRAFT_IDENTITY,
    params:
        type=config["speculative"]["draft_type"],
        commit=config["llama"]["commit"],
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/speculative/draft.log",
    conda:
        CONDA_ENV
    shell:
        "residency model quantize --residctl {input.engine:q} --gguf {input.model:q} --source-identity {input.identity:q}"
        " --type {params.type:q} --llama-commit {params.commit:q} --out {output.gguf:q} --identity {output.identity:q} 2> {log:q}"


rule speculative_cell:
    input:
        engine=RESIDCTL,
        model=SPEC_MODEL,
        identity=SPEC_IDENTITY,
        draft=SPEC_DRAFT,
        draft_identity=SPEC_DRAFT_IDENTITY,
        previous=lambda w: speculative.previous_run(w.cell),
    output:
        f"{speculative.RUNS}/{{cell}}/harness.json",
    wildcard_constraints:
        cell="|".join(speculative.CELLS),
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: speculative.generate_args(config, w.cell, input.model, input.draft),
        harness=lambda w: speculative.harness_args(config, w.cell),
        prompt=config["speculative"]["prompt"],
        cgroup=config["harness"]["cgroup"],
        config_digest=speculative.spec_digest(config),
    log:
        f"{LOGS}/speculative/{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q} --drop-cache {input.model:q}"
        " --drop-cache {input.draft:q} -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q}"
        " --out {params.dir:q} 2> {log:q}"


rule gather_speculative:
    input:
        runs=speculative.runs(),
        draft_identity=SPEC_DRAFT_IDENTITY,
        code=residency_code("gather", "speculative"),
    output:
        speculative.TABLE,
    params:
        dirs=lambda w, input: run_dirs(input.runs),
    log:
        f"{LOGS}/gather-speculative.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather speculative --draft-identity {input.draft_identity:q} --out {output:q} {params.dirs:q} 2> {log:q}"
