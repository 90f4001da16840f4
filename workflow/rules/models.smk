# Models and regions. The synthetic region is written from a fixed seed by the engine
# (its bytes are a pattern of the file offset, so every read can be checked).


rule synthetic_region:
    input:
        RESIDCTL,
    output:
        region=REGION,
        identity=REGION_IDENTITY,
    params:
        size=PS["region_bytes"],
        seed=PS["seed"],
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/synthetic-region.log",
    conda:
        CONDA_ENV
    shell:
        "{input:q} mkregion --out {output.region:q} --size {params.size:q} --seed {params.seed:q} 2> {log:q}"
        " && residency region-identity --region {output.region:q} --seed {params.seed:q} --out {output.identity:q} 2>> {log:q}"


rule region_content_digests:
    input:
        engine=RESIDCTL,
        file=REGION,
        identity=REGION_IDENTITY,
    output:
        f"{REGION}.chunks-{{chunk}}.json",
    wildcard_constraints:
        chunk=r"\d+",
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/region-digests-{{chunk}}.log",
    conda:
        CONDA_ENV
    shell:
        CONTENT_DIGESTS_CMD
