# Analysis: the Belady bound per run (from its own trace) and determinism per cell.


rule analyse_pager_synthetic:
    input:
        runs="results/pager_synthetic.parquet",
        code=residency_code("analyse", "pager-synthetic"),
    output:
        opt="results/pager_synthetic_opt.parquet",
        determinism="results/pager_synthetic_determinism.parquet",
    log:
        f"{LOGS}/analyse-pager-synthetic.log",
    conda:
        CONDA_ENV
    shell:
        "residency analyse pager-synthetic --runs {input.runs:q} --opt-out {output.opt:q} --determinism-out {output.determinism:q} 2> {log:q}"


rule analyse_pager_model:
    input:
        runs="results/pager_model.parquet",
        code=residency_code("analyse", "pager-model"),
    output:
        opt="results/pager_model_opt.parquet",
    log:
        f"{LOGS}/analyse-pager-model.log",
    conda:
        CONDA_ENV
    shell:
        "residency analyse pager-model --runs {input.runs:q} --opt-out {output.opt:q} 2> {log:q}"


use rule analyse_pager_model as analyse_pager_model_sweep with:
    input:
        runs=f"{cells.SWEEP}/{{model}}/pager_model.parquet",
        code=residency_code("analyse", "pager-model"),
    output:
        opt=f"{cells.SWEEP}/{{model}}/pager_model_opt.parquet",
    wildcard_constraints:
        model=SWEEP_MODEL_RE,
    log:
        f"{LOGS}/sweep/{{model}}/analyse-pager-model.log",
