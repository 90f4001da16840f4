# The real-model pager study (reference 000): SmolLM2 (or your GGUF) through llama.cpp,
# arms A/C/D/E x r x reps, plus unconstrained plain-mmap baselines (the exactness oracle).
# Each run: its own memory cgroup with limit r*T_repr + O, the model's page cache dropped first.
# {model} is a name of pager_model.models: each model runs the same study under its own runs
# and its own config digest (cells.model_view), so adding a model reruns nothing of another.


rule pager_model_graph_plan:
    # One short unmeasured generation on plain mmap learns where each object's first weight
    # read lies in the graph llama.cpp builds (per graph shape: the prompt's prefill and a
    # decode step), and with pager_model.consumption tensor each tensor's release node (its
    # last reader); every measured run then loads it and makes no discovery pass.
    input:
        engine=RESIDCTL,
        model=lambda w: cells.pm_model(mv(w))[0],
        identity=lambda w: cells.pm_model(mv(w))[1],
    output:
        f"{PM_RUNS}/{{model}}/graph-plan/graph-plan.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dir=lambda w, output: run_dir(output),
        prompt=PM["prompt"],
        flags=lambda w: cells.graph_plan_flags(mv(w)),
        config_digest=lambda w: cells.pm_digest(mv(w)),
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/pager_model/{{model}}/graph-plan.log",
    conda:
        CONDA_ENV
    shell:
        "{input.engine:q} generate --model {input.model:q} {params.flags:q} --prompt {params.prompt:q}"
        " --graph-plan-out {output:q} --out {params.dir:q}/run 2> {log:q}"


rule pager_model_calibrate_run:
    input:
        engine=RESIDCTL,
        model=lambda w: cells.pm_model(mv(w))[0],
        inventory=lambda w: cells.pm_model(mv(w))[2],
        digests=pm_digests,
        plan=lambda w: cells.pm_graph_plan(mv(w)),
    output:
        f"{PM_RUNS}/{{model}}/calibrate/{{arm}}/rep{{rep}}/harness.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dir=lambda w, output: run_dir(output),
        # A whole generation at a budget that holds the model: O includes the decode's memory.
        gen=lambda w, input: cells.generate_args(mv(w), input.model, w.arm, pm_budget(input.inventory, 1.0)),
        prompt=PM["prompt"],
        meta=lambda w: cells.pm_meta(mv(w), campaign="calibrate", arm=w.arm, rep=w.rep),
        cgroup=config["harness"]["cgroup"],
        config_digest=lambda w: cells.pm_digest(mv(w)),
    log:
        f"{LOGS}/pager_model/{{model}}/calibrate-{{arm}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule pager_model_overhead:
    input:
        pm_calibration_runs,
    output:
        "results/calibration/pager_model-{model}.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dirs=lambda w, input: run_dirs(input),
        margin=OVERHEAD_MARGIN,
    log:
        f"{LOGS}/pager_model/{{model}}/overhead.log",
    conda:
        CONDA_ENV
    shell:
        "residency overhead {params.margin:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule pager_model_cell:
    input:
        engine=RESIDCTL,
        model=lambda w: cells.pm_model(mv(w))[0],
        inventory=lambda w: cells.pm_model(mv(w))[2],
        digests=pm_digests,
        plan=lambda w: cells.pm_graph_plan(mv(w)),
        overhead="results/calibration/pager_model-{model}.json",
    output:
        f"{PM_RUNS}/{{model}}/{{arm}}/r{{r}}/rep{{rep}}/harness.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dir=lambda w, output: run_dir(output),
        budget=lambda w, input: pm_budget(input.inventory, w.r),
        gen=lambda w, input: cells.generate_args(mv(w), input.model, w.arm, pm_budget(input.inventory, w.r)),
        prompt=PM["prompt"],
        meta=lambda w, input: cells.pm_meta(mv(w), campaign="main", arm=w.arm, r=w.r, rep=w.rep,
                                      t_repr_bytes=pm_t_repr(input.inventory)),
        cgroup=config["harness"]["cgroup"],
        config_digest=lambda w: cells.pm_digest(mv(w)),
    log:
        f"{LOGS}/pager_model/{{model}}/{{arm}}-r{{r}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --budget-bytes {params.budget:q}"
        " --overhead {input.overhead:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule pager_model_baseline:
    input:
        engine=RESIDCTL,
        model=lambda w: cells.pm_model(mv(w))[0],
        inventory=lambda w: cells.pm_model(mv(w))[2],
        digests=pm_digests,
        plan=lambda w: cells.pm_graph_plan(mv(w)),
    output:
        f"{PM_RUNS}/{{model}}/baseline/rep{{rep}}/harness.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: cells.generate_args(mv(w), input.model, "kernel-mmap", None),
        prompt=PM["prompt"],
        meta=lambda w, input: cells.pm_meta(mv(w), campaign="baseline", arm="kernel-mmap", rep=w.rep,
                                      t_repr_bytes=pm_t_repr(input.inventory)),
        cgroup=config["harness"]["cgroup"],
        config_digest=lambda w: cells.pm_digest(mv(w)),
    log:
        f"{LOGS}/pager_model/{{model}}/baseline-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule pager_model_roofline_run:
    # The I/O roofline's bandwidth, measured in the same campaign: the engine's own reader over
    # the model file at the pager's chunk size and source, the file's page cache dropped first.
    input:
        engine=RESIDCTL,
        model=lambda w: cells.pm_model(mv(w))[0],
    output:
        f"{PM_RUNS}/{{model}}/roofline/rep{{rep}}/harness.json",
    wildcard_constraints:
        model=PM_MODEL_RE,
    params:
        dir=lambda w, output: run_dir(output),
        stream=lambda w, input: cells.roofline_stream_args(mv(w), input.model),
        meta=lambda w: cells.pm_meta(mv(w), campaign="roofline", rep=w.rep),
        cgroup=config["harness"]["cgroup"],
        config_digest=lambda w: cells.pm_digest(mv(w)),
    log:
        f"{LOGS}/pager_model/{{model}}/roofline-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} stream {params.stream:q} --out {params.dir:q} 2> {log:q}"
