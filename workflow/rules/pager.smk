# The synthetic pager study (reference 000): arms A/C/D/E on a cyclic scan, one job per run.
# Every run goes through the harness: its own memory cgroup, limit r*T_repr + O.


def scan_args(arm, r, threads, compute_us, signal):
    """The residctl scan flags of one cell (the run directory is added by the rule)."""
    args = [
        f"--region {REGION}", f"--seed {PS['seed']}", f"--arm {arm}",
        f"--chunk-size {PS['chunk_bytes']}", f"--passes {PS['passes']}",
        f"--threads {threads}", f"--compute-us {compute_us}", f"--signal {signal}",
        f"--watchdog-s {PS['watchdog_s']}",
    ]
    if arm != "kernel-mmap":
        args += [f"--budget-bytes {budget_bytes(r)}", f"--source {PS['source']}",
                 f"--prefetch-depth {PS['prefetch_depth']}"]
    if PS["eager_reconcile"]:
        args.append("--eager-reconcile")
    return " ".join(args)


def harness_meta(**kv):
    return " ".join(f"--meta {k}={v}" for k, v in kv.items()) + f" --meta config_digest={PS_DIGEST}"


rule calibrate_overhead_run:
    input:
        engine=RESIDCTL,
        region=REGION,
    output:
        f"{RUNS}/calibrate/t{{threads}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: str(Path(output[0]).parent),
        scan=lambda w: scan_args("kernel-mmap", 0, w.threads, 0, "all-threads-finished"),
        meta=lambda w: harness_meta(campaign="calibrate", threads=w.threads, rep=w.rep),
        cgroup=config["harness"]["cgroup"],
    resources:
        storage_exclusive=1,
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} {params.meta}"
        " -- {input.engine} scan {params.scan} --calibrate --out {params.dir}"


rule overhead:
    input:
        lambda w: [f"{RUNS}/calibrate/t{w.threads}/rep{k}/harness.json"
                   for k in range(1, config["harness"]["overhead_reps"] + 1)],
    output:
        "results/calibration/pager_synthetic-t{threads}.json",
    params:
        dirs=lambda w, input: " ".join(str(Path(p).parent) for p in input),
    shell:
        "residency overhead --out {output} {params.dirs}"


def cell_rule_inputs(threads):
    return {
        "engine": RESIDCTL,
        "region": REGION,
        "overhead": f"results/calibration/pager_synthetic-t{threads}.json",
    }


rule pager_main_cell:
    input:
        **cell_rule_inputs(PS["main"]["threads"]),
    output:
        f"{RUNS}/main/{{arm}}/r{{r}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: str(Path(output[0]).parent),
        budget=lambda w: budget_bytes(w.r),
        scan=lambda w: scan_args(w.arm, w.r, PS["main"]["threads"], PS["main"]["compute_us"], PS["main"]["signal"]),
        meta=lambda w: harness_meta(campaign="main", arm=w.arm, r=w.r, rep=w.rep,
                                    threads=PS["main"]["threads"], compute_us=PS["main"]["compute_us"],
                                    signal=PS["main"]["signal"]),
        cgroup=config["harness"]["cgroup"],
    resources:
        storage_exclusive=1,
        mem_mb=lambda w: budget_bytes(w.r) // 2**20 + 64,
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} --budget-bytes {params.budget}"
        " --overhead {input.overhead} {params.meta}"
        " -- {input.engine} scan {params.scan} --out {params.dir}"


rule pager_stress_cell:
    input:
        engine=RESIDCTL,
        region=REGION,
        overhead="results/calibration/pager_synthetic-t{threads}.json",
    output:
        f"{RUNS}/stress/{{arm}}/{{signal}}/t{{threads}}-c{{compute}}/rep{{rep}}/harness.json",
    params:
        dir=lambda w, output: str(Path(output[0]).parent),
        budget=budget_bytes(PS["stress"]["ratio"]),
        scan=lambda w: scan_args(w.arm, PS["stress"]["ratio"], w.threads, w.compute, w.signal),
        meta=lambda w: harness_meta(campaign="stress", arm=w.arm, r=ratio_str(PS["stress"]["ratio"]),
                                    rep=w.rep, threads=w.threads, compute_us=w.compute, signal=w.signal),
        cgroup=config["harness"]["cgroup"],
    resources:
        storage_exclusive=1,
        mem_mb=budget_bytes(PS["stress"]["ratio"]) // 2**20 + 64,
    shell:
        "residency run --out {params.dir} --cgroup {params.cgroup} --budget-bytes {params.budget}"
        " --overhead {input.overhead} {params.meta}"
        " -- {input.engine} scan {params.scan} --out {params.dir}"
