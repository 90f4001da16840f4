# The fault campaign (reference 004 §5.4, Table 7; claims C3, C12): every fault cell of
# every adapter one job under a hard host limit, with its adapter's oracle (kernel-mmap,
# the same build and horizon); the reset/warm cell on the first adapter; then the tables
# results/faults.parquet and results/faults_reset_warm.parquet.

FAULT_ADAPTERS = fault_cells.adapters(config)
FAULT_RUNS = [fault_cells.cell_run(a, c) for a in FAULT_ADAPTERS for c in fault_cells.cell_names(config, a)]


rule fault_cell:
    input:
        engine=RESIDCTL,
        model=lambda w: fault_cells.model_files(config, w.adapter)[0],
        identity=lambda w: fault_cells.model_files(config, w.adapter)[1],
    output:
        f"{fault_cells.FAULT_RUNS}/{{adapter}}/{{cell}}/harness.json",
    wildcard_constraints:
        adapter="|".join(map(re.escape, FAULT_ADAPTERS)),
        cell="|".join(map(re.escape, [fault_cells.ORACLE, fault_cells.WARM, *fault_cells.CELLS])),
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: fault_cells.generate_args(config, w.adapter, w.cell, input.model),
        harness=lambda w: fault_cells.harness_args(config, w.adapter, w.cell),
        prompt=PM["prompt"],
        cgroup=config["harness"]["cgroup"],
        config_digest=lambda w: fault_cells.faults_digest(config, w.adapter),
    log:
        f"{LOGS}/faults/{{adapter}}/{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q} --drop-cache {input.model:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule gather_faults:
    input:
        runs=fault_cells.fault_runs(config),
        code=residency_code("gather", "faults"),
    output:
        fault_cells.FAULT_TABLE,
    params:
        dirs=lambda w, input: run_dirs(p for p in input.runs if "/oracle/" not in p),
        prespecified=json.dumps(fault_cells.c3_set(config)),
    log:
        f"{LOGS}/gather-faults.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather faults --prespecified {params.prespecified:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule gather_reset_warm:
    input:
        run=fault_cells.warm_run(config),
        oracle=fault_cells.cell_run(FAULT_ADAPTERS[0], fault_cells.ORACLE),
        code=residency_code("gather", "reset-warm"),
    output:
        fault_cells.WARM_TABLE,
    params:
        run=lambda w, input: str(Path(input.run).parent),
        oracle=lambda w, input: str(Path(input.oracle).parent),
    log:
        f"{LOGS}/gather-reset-warm.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather reset-warm --oracle {params.oracle:q} --out {output:q} {params.run:q} 2> {log:q}"
