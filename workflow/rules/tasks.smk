# The utility tasks (reference 004 A.2, A.4, B; claims C5, C6, C11): each task of the seeded
# extractive-QA set (residency/campaigns/tasks.py) runs as one job per cell on the primary model under
# the harness: the oracle on the resident path (kernel-mmap, no host limit), each control of
# tasks.controls and the candidate (tasks.arm) at r * T_repr under the candidate's hard limit
# r * T_repr + O, O calibrated for the task runs' context; then results/tasks.parquet (answers
# scored with token F1, every nonresident cell compared with its task's oracle).

# The premise before any cell: every control nonresident under the candidate's own cap.
if (premise := residency_tasks.premise_error(config)) is not None:
    sys.exit(premise)

TASKS = config["tasks"]
TASK_IDS = residency_tasks.task_ids(config)
TASKS_DIGEST = residency_tasks.tasks_digest(config)
TASK_CALIBRATION = residency_tasks.calibration_runs(config)


rule tasks_calibrate_run:
    # The candidate arm at a budget that holds the model, the longest task prompt, the task
    # runs' context and horizon: O includes their KV cache and compute buffers.
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
    output:
        f"{residency_tasks.TASK_RUNS}/calibrate/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: residency_tasks.generate_args(config, "candidate", input.model,
                                                            pm_budget(input.inventory, 1.0)),
        prompt=residency_tasks.prompt(residency_tasks.longest(config)),
        meta=lambda w: cells.meta_flags(TASKS_DIGEST, {"campaign": "calibrate", "arm": TASKS["arm"], "rep": w.rep}),
        cgroup=config["harness"]["cgroup"],
        config_digest=TASKS_DIGEST,
    log:
        f"{LOGS}/tasks/calibrate-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule tasks_overhead:
    input:
        TASK_CALIBRATION,
    output:
        "results/calibration/tasks.json",
    params:
        dirs=lambda w, input: run_dirs(input),
        margin=OVERHEAD_MARGIN,
    log:
        f"{LOGS}/tasks/overhead.log",
    conda:
        CONDA_ENV
    shell:
        "residency overhead {params.margin:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule task_cell:
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
        overhead="results/calibration/tasks.json",
    output:
        f"{residency_tasks.TASK_RUNS}/{{task}}/{{cell}}/harness.json",
    wildcard_constraints:
        task="|".join(TASK_IDS),
        cell="|".join(map(re.escape, residency_tasks.cells_of(config))),
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: residency_tasks.generate_args(config, w.cell, input.model,
                                                            pm_budget(input.inventory, TASKS["ratio"])),
        harness=lambda w, input: residency_tasks.harness_args(config, w.cell, pm_budget(input.inventory, TASKS["ratio"]),
                                                              input.overhead, pm_t_repr(input.inventory), w.task),
        prompt=lambda w: residency_tasks.prompt(residency_tasks.task_by_id(config, w.task)),
        cgroup=config["harness"]["cgroup"],
        config_digest=TASKS_DIGEST,
    log:
        f"{LOGS}/tasks/{{task}}-{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q} --drop-cache {input.model:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule gather_tasks:
    input:
        runs=residency_tasks.task_runs(config),
        identity=lambda w: pm_model()[1],
        code=residency_code("gather", "tasks"),
    output:
        residency_tasks.TASK_TABLE,
    params:
        dirs=lambda w, input: run_dirs(input.runs),
        spec=json.dumps({"seed": TASKS["seed"], "n": TASKS["n"]}),
    log:
        f"{LOGS}/gather-tasks.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather tasks --tasks {params.spec:q} --model-identity {input.identity:q} --out {output:q}"
        " {params.dirs:q} 2> {log:q}"
