# The bounded-source campaign (reference 004 §5.5; claim C8): one matched pair, buffered P
# against the bounded direct source F, on a model whose managed bytes cannot be resident in
# the weight allowance while what the horizon demands of it fits under the cap
# (residency/campaigns/bounded_source.py). F's calibration runs give O and the reserve R_policy; the
# oracle and P's natural run (no limit) come first; the premise (eq. 1, and P's natural peak
# below H_cap) is checked before P and F run under the cap; then results/bounded_source.parquet.

BS = config["bounded_source"]
BS_MODEL, BS_IDENTITY = bounded_source.model_files(config)
BS_DIGEST = bounded_source.digest_of(config)
BS_INVENTORY = cells.pm_model(cells.entry_view(config, BS["model"]))[2]


rule bounded_source_calibrate_run:
    input:
        engine=RESIDCTL,
        model=BS_MODEL,
        identity=BS_IDENTITY,
    output:
        f"{bounded_source.RUNS}/calibrate/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: bounded_source.generate_args(config, "calibrate", input.model),
        prompt=BS["prompt"],
        meta=lambda w: cells.meta_flags(BS_DIGEST, {"campaign": "calibrate", "arm": BS["arm"], "rep": w.rep}),
        cgroup=config["harness"]["cgroup"],
        config_digest=BS_DIGEST,
    log:
        f"{LOGS}/bounded_source/calibrate-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule bounded_source_overhead:
    input:
        bounded_source.calibration_runs(config),
    output:
        "results/calibration/bounded_source.json",
    params:
        dirs=lambda w, input: run_dirs(input),
        margin=OVERHEAD_MARGIN,
    log:
        f"{LOGS}/bounded_source/overhead.log",
    conda:
        CONDA_ENV
    shell:
        "residency overhead {params.margin:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule bounded_source_premise:
    input:
        inventory=BS_INVENTORY,
        overhead="results/calibration/bounded_source.json",
        natural=bounded_source.cell_run(bounded_source.NATURAL),
        code=residency_code("premise", "bounded-source"),
    output:
        f"{bounded_source.RUNS}/premise.json",
    params:
        flags=cells.opts(ratio=BS["ratio"], budget_bytes=bounded_source.pager_budget(config, "F")),
    log:
        f"{LOGS}/bounded_source/premise.log",
    conda:
        CONDA_ENV
    shell:
        "residency premise bounded-source --inventory {input.inventory:q} --overhead {input.overhead:q}"
        " --natural {input.natural:q} {params.flags:q} --out {output:q} 2> {log:q}"


rule bounded_source_cell:
    input:
        engine=RESIDCTL,
        model=BS_MODEL,
        identity=BS_IDENTITY,
        inventory=BS_INVENTORY,
        overhead="results/calibration/bounded_source.json",
        premise=lambda w: [f"{bounded_source.RUNS}/premise.json"] if bounded_source.capped(w.cell) else [],
        previous=lambda w: bounded_source.previous_run(w.cell),
    output:
        f"{bounded_source.RUNS}/{{cell}}/harness.json",
    wildcard_constraints:
        cell="|".join(map(re.escape, bounded_source.CELLS)),
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: bounded_source.generate_args(config, w.cell, input.model),
        limit=lambda w, input: cells.opts(budget_bytes=bounded_source.weight_allowance(config, pm_t_repr(
            input.inventory)), overhead=input.overhead) if bounded_source.capped(w.cell) else [],
        meta=lambda w, input: bounded_source.harness_meta(config, w.cell, pm_t_repr(input.inventory)),
        prompt=BS["prompt"],
        cgroup=config["harness"]["cgroup"],
        config_digest=BS_DIGEST,
    log:
        f"{LOGS}/bounded_source/{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.limit:q} --drop-cache {input.model:q}"
        " {params.meta:q} -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q}"
        " --out {params.dir:q} 2> {log:q}"


rule gather_bounded_source:
    input:
        runs=bounded_source.runs(),
        identity=BS_IDENTITY,
        llama=LLAMA_IDENTITY,
        code=residency_code("gather", "matched-source"),
    output:
        bounded_source.TABLE,
    params:
        dirs=lambda w, input: run_dirs(input.runs),
        oracle=lambda w, input: str(Path(input.runs[0]).parent),  # the oracle runs first
    log:
        f"{LOGS}/gather-bounded-source.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather matched-source --oracle {params.oracle:q} --model-identity {input.identity:q}"
        " --llama-identity {input.llama:q} --out {output:q} {params.dirs:q} 2> {log:q}"
