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
    log:
        f"{LOGS}/synthetic-region.log",
    conda:
        CONDA_ENV
    shell:
        "{input} mkregion --out {output.region} --size {params.size} --seed {params.seed} 2> {log}"
        " && residency region-identity --region {output.region} --seed {params.seed} --out {output.identity} 2>> {log}"


rule region_content_digests:
    input:
        engine=RESIDCTL,
        file=REGION,
        identity=REGION_IDENTITY,
    output:
        f"{REGION}.chunks-{{chunk}}.json",
    wildcard_constraints:
        chunk=r"\d+",
    log:
        f"{LOGS}/region-digests-{{chunk}}.log",
    conda:
        CONDA_ENV
    shell:
        CONTENT_DIGESTS_CMD
