# The real-model pager study (reference 000): SmolLM2 (or your GGUF) through llama.cpp,
# arms A/C/D/E x r x reps, plus unconstrained plain-mmap baselines (the exactness oracle).
# Each run: its own memory cgroup with limit r*T_repr + O, the model's page cache dropped first.


rule pager_model_graph_plan:
    # One short unmeasured generation on plain mmap learns where each object's first weight
    # read lies in the graph llama.cpp builds (per graph shape: the prompt's prefill and a
    # decode step); every measured run then loads it and makes no discovery pass.
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        identity=lambda w: pm_model()[1],
    output:
        PM_GRAPH_PLAN,
    params:
        dir=lambda w, output: run_dir(output),
        prompt=PM["prompt"],
        threads=PM["threads"],
        ctx=PM["ctx"],
        config_digest=PM_DIGEST,
    log:
        f"{LOGS}/pager_model/graph-plan.log",
    conda:
        CONDA_ENV
    shell:
        "{input.engine} generate --model {input.model} --arm kernel-mmap --tokens 2 --threads {params.threads}"
        " --ctx {params.ctx} --prompt {params.prompt:q} --graph-plan-out {output} --out {params.dir}/run 2> {log}"


rule pager_model_calibrate_run:
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
        plan=PM_GRAPH_PLAN,
    output:
        f"{PM_RUNS}/{PM_NAME}/calibrate/{{arm}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        # A whole generation at a budget that holds the model: O includes the decode's memory.
        gen=lambda w, input: generate_args(input.model, w.arm, pm_budget(input.inventory, 1.0)),
        prompt=PM["prompt"],
        meta=lambda w: pm_meta(campaign="calibrate", arm=w.arm, rep=w.rep),
        cgroup=config["harness"]["cgroup"],
        config_digest=PM_DIGEST,
    log:
        f"{LOGS}/pager_model/calibrate-{{arm}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} --drop-cache {input.model} {params.meta}"
        " -- {input.engine} generate {params.gen} --prompt {params.prompt:q} --out {params.dir} 2> {log}"


rule pager_model_overhead:
    input:
        pm_calibration_runs,
    output:
        f"results/calibration/pager_model-{PM_NAME}.json",
    params:
        dirs=lambda w, input: " ".join(str(Path(p).parent) for p in input),
    log:
        f"{LOGS}/pager_model/overhead.log",
    conda:
        CONDA_ENV
    shell:
        "residency overhead --out {output} {params.dirs} 2> {log}"


rule pager_model_cell:
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
        plan=PM_GRAPH_PLAN,
        overhead=f"results/calibration/pager_model-{PM_NAME}.json",
    output:
        f"{PM_RUNS}/{PM_NAME}/{{arm}}/r{{r}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        budget=lambda w, input: pm_budget(input.inventory, w.r),
        gen=lambda w, input: generate_args(input.model, w.arm, pm_budget(input.inventory, w.r)),
        prompt=PM["prompt"],
        meta=lambda w, input: pm_meta(campaign="main", arm=w.arm, r=w.r, rep=w.rep,
                                      t_repr_bytes=pm_t_repr(input.inventory)),
        cgroup=config["harness"]["cgroup"],
        config_digest=PM_DIGEST,
    log:
        f"{LOGS}/pager_model/{{arm}}-r{{r}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} --budget-bytes {params.budget}"
        " --overhead {input.overhead} --drop-cache {input.model} {params.meta}"
        " -- {input.engine} generate {params.gen} --prompt {params.prompt:q} --out {params.dir} 2> {log}"


rule pager_model_baseline:
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
        plan=PM_GRAPH_PLAN,
    output:
        f"{PM_RUNS}/{PM_NAME}/baseline/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: generate_args(input.model, "kernel-mmap", None),
        prompt=PM["prompt"],
        meta=lambda w, input: pm_meta(campaign="baseline", arm="kernel-mmap", rep=w.rep,
                                      t_repr_bytes=pm_t_repr(input.inventory)),
        cgroup=config["harness"]["cgroup"],
        config_digest=PM_DIGEST,
    log:
        f"{LOGS}/pager_model/baseline-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} --drop-cache {input.model} {params.meta}"
        " -- {input.engine} generate {params.gen} --prompt {params.prompt:q} --out {params.dir} 2> {log}"
