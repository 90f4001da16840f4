# The synthetic pager study (reference 000): arms A/C/D/E on a cyclic scan, one job per run.
# Every run goes through the harness: its own memory cgroup, limit r*T_repr + O.


rule calibrate_overhead_run:
    input:
        engine=RESIDCTL,
        region=REGION,
        digests=PS_DIGESTS,
    output:
        f"{RUNS}/calibrate/{{arm}}/t{{threads}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        scan=lambda w: scan_args(w.arm, max(PS["main"]["ratios"]), w.threads, 0, "all-threads-finished"),
        meta=lambda w: harness_meta(campaign="calibrate", arm=w.arm, threads=w.threads, rep=w.rep),
        cgroup=config["harness"]["cgroup"],
        config_digest=PS_DIGEST,
    log:
        f"{LOGS}/pager_synthetic/calibrate/{{arm}}-t{{threads}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.meta:q}"
        " -- {input.engine:q} scan {params.scan:q} --calibrate --out {params.dir:q} 2> {log:q}"


rule overhead:
    input:
        calibration_runs,
    output:
        "results/calibration/pager_synthetic-t{threads}.json",
    params:
        dirs=lambda w, input: run_dirs(input),
        margin=OVERHEAD_MARGIN,
    log:
        f"{LOGS}/pager_synthetic/overhead-t{{threads}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency overhead {params.margin:q} --out {output:q} {params.dirs:q} 2> {log:q}"


rule pager_main_cell:
    input:
        engine=RESIDCTL,
        region=REGION,
        digests=PS_DIGESTS,
        overhead=f"results/calibration/pager_synthetic-t{PS['main']['threads']}.json",
    output:
        f"{RUNS}/main/{{arm}}/r{{r}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        budget=lambda w: budget_bytes(w.r),
        scan=lambda w: scan_args(w.arm, w.r, PS["main"]["threads"], PS["main"]["compute_us"], PS["main"]["signal"]),
        meta=lambda w: harness_meta(campaign="main", arm=w.arm, r=w.r, rep=w.rep,
                                    threads=PS["main"]["threads"], compute_us=PS["main"]["compute_us"],
                                    signal=PS["main"]["signal"]),
        cgroup=config["harness"]["cgroup"],
        config_digest=PS_DIGEST,
    log:
        f"{LOGS}/pager_synthetic/main/{{arm}}-r{{r}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
        mem_mb=lambda w: budget_bytes(w.r) // 2**20 + 64,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --budget-bytes {params.budget:q}"
        " --overhead {input.overhead:q} {params.meta:q}"
        " -- {input.engine:q} scan {params.scan:q} --out {params.dir:q} 2> {log:q}"


rule pager_stress_cell:
    input:
        engine=RESIDCTL,
        region=REGION,
        digests=PS_DIGESTS,
        overhead="results/calibration/pager_synthetic-t{threads}.json",
    output:
        f"{RUNS}/stress/{{arm}}/{{signal}}/t{{threads}}-c{{compute}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: run_dir(output),
        budget=budget_bytes(PS["stress"]["ratio"]),
        scan=lambda w: stress_scan_args(w.arm, w.threads, w.compute, w.signal),
        meta=lambda w: stress_meta(w.arm, w.threads, w.compute, w.signal, w.rep),
        cgroup=config["harness"]["cgroup"],
        config_digest=PS_DIGEST,
    log:
        f"{LOGS}/pager_synthetic/stress/{{arm}}-{{signal}}-t{{threads}}-c{{compute}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
        mem_mb=budget_bytes(PS["stress"]["ratio"]) // 2**20 + 64,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} --budget-bytes {params.budget:q}"
        " --overhead {input.overhead:q} {params.meta:q}"
        " -- {input.engine:q} scan {params.scan:q} --out {params.dir:q} 2> {log:q}"
