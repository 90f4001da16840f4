# Cache transfer (reference 004 A.5; claim C7): per prompt one pair of cells on one model,
# zero reuse (pager-zero) against per-layer LRU-k (pager-lru-k), the same build, scheduler
# and representation; every cell one job under the harness and a cold prefill (the model's
# page cache dropped, a fresh process), run one after another in alternating fixed order
# (each waits for the cell before it); then results/cache_transfer.parquet.

# The premise before any cell: one prompt per pair, a decode after each prefill.
if (premise := cache_transfer.premise_error(config)) is not None:
    sys.exit(premise)

CT_MODEL, CT_IDENTITY = cache_transfer.model_files(config)


rule cache_transfer_cell:
    input:
        engine=RESIDCTL,
        model=CT_MODEL,
        identity=CT_IDENTITY,
        previous=lambda w: cache_transfer.previous_run(config, int(w.pair), w.arm),
    output:
        f"{cache_transfer.RUNS}/pair{{pair}}/{{arm}}/harness.json",
    wildcard_constraints:
        pair=r"\d+",
        arm="|".join(map(re.escape, cache_transfer.ARMS)),
    params:
        dir=lambda w, output: run_dir(output),
        gen=lambda w, input: cache_transfer.generate_args(config, w.arm, input.model),
        harness=lambda w: cache_transfer.harness_args(config, w.pair, w.arm),
        prompt=lambda w: cache_transfer.prompt(config, w.pair),
        cgroup=config["harness"]["cgroup"],
        config_digest=cache_transfer.ct_digest(config),
    log:
        f"{LOGS}/cache_transfer/pair{{pair}}-{{arm}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q} --drop-cache {input.model:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule gather_cache_transfer:
    input:
        runs=cache_transfer.runs(config),
        code=residency_code("gather", "cache-transfer"),
    output:
        cache_transfer.TABLE,
    params:
        dirs=lambda w, input: run_dirs(input.runs),
    log:
        f"{LOGS}/gather-cache-transfer.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather cache-transfer --out {output:q} {params.dirs:q} 2> {log:q}"
