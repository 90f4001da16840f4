# Reclaim authority (reference 000, claim 3): the pager with and without --protect, its
# cgroup under pressure below its budget with a swap file on for the cell only.


rule reclaim_cell:
    input:
        engine=RESIDCTL,
        region=REGION,
        digests=PS_DIGESTS,
        overhead="results/calibration/pager_synthetic-t1.json",
    output:
        f"{RECLAIM_RUNS}/{{protection}}/rep{{rep}}/harness.json",
    wildcard_constraints:
        protection="unprotected|protected",
    # Runs alone: while its swap file is on, any other cell running would lose its hard grade.
    # storage_exclusive keeps every other run cell out locally (profiles/default allows one);
    # on a cluster the job holds its node alone (--exclusive in profiles/slurm).
    params:
        dir=lambda w, output: run_dir(output),
        scan=lambda w: reclaim_scan_args(w.protection),
        meta=lambda w: reclaim_meta(w.protection, w.rep),
        harness=RECLAIM_HARNESS,
        cgroup=config["harness"]["cgroup"],
        config_digest=RECLAIM_DIGEST,
    log:
        f"{LOGS}/reclaim/{{protection}}-rep{{rep}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q}"
        " --overhead {input.overhead:q} {params.meta:q}"
        " -- {input.engine:q} scan {params.scan:q} --out {params.dir:q} 2> {log:q}"
