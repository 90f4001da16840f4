# Gather: every run directory of the synthetic campaign -> one typed Parquet table.


rule gather_pager_synthetic:
    input:
        runs=MAIN_CELLS + STRESS_CELLS,
        region=REGION + ".json",
        probe="results/probe.json",
    output:
        "results/pager_synthetic.parquet",
    params:
        dirs=lambda w, input: " ".join(str(Path(p).parent) for p in input.runs),
    shell:
        "residency gather --region-identity {input.region} --out {output} {params.dirs}"
