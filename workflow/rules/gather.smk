# Gather: every run directory of the synthetic campaign -> one typed Parquet table.


rule gather_pager_synthetic:
    input:
        runs=MAIN_CELLS + STRESS_CELLS,
        region=REGION_IDENTITY,
        llama=LLAMA_IDENTITY,
        probe="results/probe.json",
        code=residency_code("gather", "pager-synthetic"),
    output:
        "results/pager_synthetic.parquet",
    params:
        dirs=lambda w, input: run_dirs(input.runs),
    log:
        f"{LOGS}/gather-pager-synthetic.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather pager-synthetic --region-identity {input.region:q} --llama-identity {input.llama:q}"
        " --out {output:q} {params.dirs:q} 2> {log:q}"


rule gather_pager_model:
    input:
        runs=lambda w: cells.pm_cells(mv(w)) + cells.pm_baselines(mv(w)),
        identity=lambda w: cells.pm_model(mv(w))[1],
        llama=LLAMA_IDENTITY,
        code=residency_code("gather", "pager-model"),
    output:
        "results/pager_model.parquet",
    params:
        dirs=lambda w, input: run_dirs(input.runs),
        oracle=lambda w, input: str(Path(input.runs[len(cells.pm_cells(mv(w)))]).parent),  # baseline rep 1
    log:
        f"{LOGS}/gather-pager-model.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather pager-model --oracle {params.oracle:q} --model-identity {input.identity:q}"
        " --llama-identity {input.llama:q} --out {output:q} {params.dirs:q} 2> {log:q}"


# Every further model of pager_model.models: the same gather, into its own results/sweep/<name>/.
use rule gather_pager_model as gather_pager_model_sweep with:
    output:
        f"{cells.SWEEP}/{{model}}/pager_model.parquet",
    wildcard_constraints:
        model=SWEEP_MODEL_RE,
    log:
        f"{LOGS}/sweep/{{model}}/gather-pager-model.log",


# The roofline's calibration reads of each model: one row per rep.
rule gather_pager_model_roofline:
    input:
        runs=lambda w: cells.pm_roofline_runs(mv(w)),
        code=residency_code("gather", "pager-model-roofline"),
    output:
        "results/pager_model_roofline.parquet",
    params:
        dirs=lambda w, input: run_dirs(input.runs),
    log:
        f"{LOGS}/gather-pager-model-roofline.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather pager-model-roofline --out {output:q} {params.dirs:q} 2> {log:q}"


use rule gather_pager_model_roofline as gather_pager_model_roofline_sweep with:
    output:
        f"{cells.SWEEP}/{{model}}/pager_model_roofline.parquet",
    wildcard_constraints:
        model=SWEEP_MODEL_RE,
    log:
        f"{LOGS}/sweep/{{model}}/gather-pager-model-roofline.log",


rule gather_matched_source:
    input:
        runs=MS_CELLS,
        identity=lambda w: pm_model()[1],
        llama=LLAMA_IDENTITY,
        code=residency_code("gather", "matched-source"),
    output:
        "results/matched_source.parquet",
    params:
        dirs=lambda w, input: run_dirs(input.runs),
        oracle=lambda w, input: str(Path(input.runs[0]).parent),  # MS_CELLS starts with the oracle
    log:
        f"{LOGS}/gather-matched-source.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather matched-source --oracle {params.oracle:q} --model-identity {input.identity:q}"
        " --llama-identity {input.llama:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule gather_reclaim:
    input:
        runs=RECLAIM_CELLS,
        region=REGION_IDENTITY,
        llama=LLAMA_IDENTITY,
        code=residency_code("gather", "reclaim"),
    output:
        "results/reclaim.parquet",
    params:
        dirs=lambda w, input: run_dirs(input.runs),
    log:
        f"{LOGS}/gather-reclaim.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather reclaim --region-identity {input.region:q} --llama-identity {input.llama:q}"
        " --out {output:q} {params.dirs:q} 2> {log:q}"
