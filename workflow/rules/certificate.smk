# The memory-sovereignty certificate (reference 004 §2.1, §5.2; claim C1): the synthetic
# MoE run twice under the harness, first the same build's zero-cache oracle (no host
# limit), then the certified run under the hard limit H_cap; then the record
# C = (I, B, A, E, L) beside the certified run, and its Parquet row for the claim.

CERT = config["certificate"]
CERT_MODEL, CERT_IDENTITY = cells.cert_model_files(config)


rule certificate_cell:
    input:
        engine=RESIDCTL,
        model=CERT_MODEL,
        identity=CERT_IDENTITY,
        previous=lambda w: [cells.cert_run("oracle")] if w.cell == "certified" else [],
    output:
        f"{cells.CERT_RUNS}/{{cell}}/harness.json",
    wildcard_constraints:
        cell="|".join(cells.CERT_CELLS),
    params:
        dir=lambda w, output: run_dir(output),
        harness=lambda w: cells.cert_harness_args(config, w.cell),
        gen=lambda w, input: cells.cert_generate_args(config, w.cell, input.model),
        prompt=PM["prompt"],
        cgroup=config["harness"]["cgroup"],
    log:
        f"{LOGS}/certificate/{{cell}}.log",
    resources:
        storage_exclusive=1,
    conda:
        CONDA_ENV
    shell:
        "residency run --out {params.dir:q} --cgroup {params.cgroup:q} {params.harness:q} --drop-cache {input.model:q}"
        " -- {input.engine:q} generate {params.gen:q} --prompt {params.prompt:q} --out {params.dir:q} 2> {log:q}"


rule certificate_record:
    input:
        runs=[cells.cert_run(c) for c in cells.CERT_CELLS],
        identity=CERT_IDENTITY,
        code=residency_code("certificate"),
    output:
        cells.cert_record(),
    params:
        run=lambda w, input: str(Path(input.runs[1]).parent),
        oracle=lambda w, input: str(Path(input.runs[0]).parent),
        reserve=CERT["reserve_bytes"],
    log:
        f"{LOGS}/certificate/record.log",
    conda:
        CONDA_ENV
    shell:
        "residency certificate --run {params.run:q} --oracle {params.oracle:q} --model-identity {input.identity:q}"
        " --reserve-bytes {params.reserve:q} --out {output:q} 2> {log:q}"


rule gather_certificate:
    input:
        runs=[cells.cert_run(c) for c in cells.CERT_CELLS],
        identity=CERT_IDENTITY,
        record=cells.cert_record(),
        code=residency_code("gather", "certificate"),
    output:
        cells.CERT_TABLE,
    params:
        run=lambda w, input: str(Path(input.runs[1]).parent),
        oracle=lambda w, input: str(Path(input.runs[0]).parent),
        reserve=CERT["reserve_bytes"],
    log:
        f"{LOGS}/gather-certificate.log",
    conda:
        CONDA_ENV
    shell:
        "residency gather certificate --oracle {params.oracle:q} --model-identity {input.identity:q}"
        " --reserve-bytes {params.reserve:q} --record {input.record:q} --out {output:q} {params.run:q} 2> {log:q}"
