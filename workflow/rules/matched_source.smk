# The matched source campaign (reference 004 §5.3): one model, prompt, cache policy, cache
# capacity and host limit; only the source changes: P (buffered pread), D (blocking O_DIRECT, one window),
# F (io_uring O_DIRECT, eight windows, the next bundle read during the current compute).
# First a same-build synchronous-source oracle (no host limit), then one P cell, then the
# D/F pairs in the configured counterbalanced order; every cell is compared with the oracle.
# Before any of them, the premise (eq. 1, S > H_cap - R_policy: premise.py) is checked.


rule matched_source_premise:
    input:
        inventory=lambda w: pm_model()[2],
        overhead=f"results/calibration/pager_model-{PM_NAME}.json",
        code=residency_code("premise", "matched-source"),
    output:
        cells.ms_premise(config),
    params:
        flags=cells.ms_premise_flags(config),
    log:
        f"{LOGS}/matched_source/premise.log",
    conda:
        CONDA_ENV
    shell:
        "residency premise matched-source --inventory {input.inventory:q} --overhead {input.overhead:q}"
        " {params.flags:q} --out {output:q} 2> {log:q}"


rule matched_source_cell:
    input:
        engine=RESIDCTL,
        model=lambda w: pm_model()[0],
        inventory=lambda w: pm_model()[2],
        digests=PM_DIGESTS,
        plan=PM_GRAPH_PLAN,
        overhead=f"results/calibration/pager_model-{PM_NAME}.json",
        premise=cells.ms_premise(config),
        previous=ms_previous,
    output:
        f"{MS_RUNS}/{{cell}}/harness.json",
    wildcard_constraints:
        cell=MS_CELL_PATTERN,
    params:
        dir=lambda w, output: run_dir(output),
        limit=lambda w, input: [] if w.cell == arms.ORACLE else
        cells.opts(budget_bytes=ms_host_budget(input.inventory), overhead=input.overhead),
        gen=lambda w, input: ms_generate_args(w.cell, input.model, ms_pager_budget(w.cell, input.inventory)),
        prompt=PM["prompt"],
        meta=lambda w, input: ms_meta(w.cell, input.inventory),
        cgroup=config["harness"]["cgroup"],
        config_digest=MS_DIGEST,
    log:
        f"{LOGS}/matched_source/{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.limit:q}"
        " --drop-cache {input.model:q} {params.meta:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"
