# Models and regions. The synthetic region is written from a fixed seed by the engine
# (its bytes are a pattern of the file offset, so every read can be checked).


rule synthetic_region:
    input:
        RESIDCTL,
    output:
        region=REGION,
        identity=REGION + ".json",
    params:
        size=PS["region_bytes"],
        seed=PS["seed"],
    shell:
        "{input} mkregion --out {output.region} --size {params.size} --seed {params.seed}"
        " && residency region-identity --region {output.region} --seed {params.seed} --out {output.identity}"
