# Paper tables: CSV, Markdown and LaTeX from Parquet.

TABLES = [f"results/tables/{name}.{ext}" for name in ("pager-synthetic", "pager-model", "table6-matched-pairs", "models",
                                                       "table3-principal", "table5-certificate", "table4-identity", "table7-faults",
                                                       "table9-populations", "table10-negative-results",
                                                       "table1-obligations", "table11-claim-map", "reference-values")
          for ext in ("csv", "md", "tex")]
TABLE3_CLAIMS = ["claims/C1.json", "claims/C2.json", "claims/C8.json"]  # the principal records, one row each
TABLE9_CLAIMS = ["claims/C4.json", "claims/C5.json", "claims/C12.json", "claims/C6.json", "claims/C7.json"]  # the reference's order
TABLE10_CLAIMS = ["claims/C10.json", "claims/C9.json"]  # the stopped line and the product comparison, one row each
# every further model's pager-model table (results/sweep/<name>/tables/)
TABLES += [f"{cells.pm_table_stem(config, n)}.{ext}" for n in SWEEP_NAMES for ext in ("csv", "md", "tex")]


SWEEP_MODELS = [sweep_model(n) for n in PM_NAMES]


rule table_pager_synthetic:
    input:
        runs="results/pager_synthetic.parquet",
        opt="results/pager_synthetic_opt.parquet",
        code=residency_code("table", "pager-synthetic"),
    output:
        table_outputs("pager-synthetic"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table-pager-synthetic.log",
    conda:
        CONDA_ENV
    shell:
        "residency table pager-synthetic --runs {input.runs:q} --opt {input.opt:q} --out-stem {params.stem:q} 2> {log:q}"


rule table_pager_model:
    input:
        runs="results/pager_model.parquet",
        opt="results/pager_model_opt.parquet",
        roofline="results/pager_model_roofline.parquet",
        code=residency_code("table", "pager-model"),
    output:
        table_outputs("pager-model"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table-pager-model.log",
    conda:
        CONDA_ENV
    shell:
        "residency table pager-model --runs {input.runs:q} --opt {input.opt:q} --roofline {input.roofline:q}"
        " --out-stem {params.stem:q} 2> {log:q}"


use rule table_pager_model as table_pager_model_sweep with:
    input:
        runs=f"{cells.SWEEP}/{{model}}/pager_model.parquet",
        opt=f"{cells.SWEEP}/{{model}}/pager_model_opt.parquet",
        roofline=f"{cells.SWEEP}/{{model}}/pager_model_roofline.parquet",
        code=residency_code("table", "pager-model"),
    output:
        [f"{cells.SWEEP}/{{model}}/tables/pager-model.{ext}" for ext in ("csv", "md", "tex")],
    wildcard_constraints:
        model=SWEEP_MODEL_RE,
    log:
        f"{LOGS}/sweep/{{model}}/table-pager-model.log",


rule table6_matched_pairs:
    input:
        runs="results/matched_source.parquet",
        code=residency_code("table", "table6-matched-pairs"),
    output:
        table_outputs("table6-matched-pairs"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table6-matched-pairs.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table6-matched-pairs --runs {input.runs:q} --out-stem {params.stem:q} 2> {log:q}"


rule table3_principal:
    input:
        records=TABLE3_CLAIMS,
        code=residency_code("table", "table3-principal"),
    output:
        table_outputs("table3-principal"),
    params:
        table="table3-principal",
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
        records=lambda w, input: ",".join(input.records),
    log:
        f"{LOGS}/table3-principal.log",
    conda:
        CONDA_ENV
    shell:
        "residency table {params.table:q} --runs {params.records:q} --out-stem {params.stem:q} 2> {log:q}"


# Table 10 from its claim records, as table 3 is made from its own.
use rule table3_principal as table10_negative_results with:
    input:
        records=TABLE10_CLAIMS,
        code=residency_code("table", "table10-negative-results"),
    output:
        table_outputs("table10-negative-results"),
    params:
        table="table10-negative-results",
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
        records=lambda w, input: ",".join(input.records),
    log:
        f"{LOGS}/table10-negative-results.log",


# Table 9 from its claim records and the input tables they name (the cells' host grades).
rule table9_populations:
    input:
        records=TABLE9_CLAIMS,
        data=sorted({p for c in TABLE9_CLAIMS for p in _claims.inputs_of(Path(c).stem).values()}),
        code=residency_code("table", "table9-populations"),
    output:
        table_outputs("table9-populations"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
        records=lambda w, input: ",".join(input.records),
    log:
        f"{LOGS}/table9-populations.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table9-populations --runs {params.records:q} --out-stem {params.stem:q} 2> {log:q}"


rule table5_certificate:
    input:
        record=cells.cert_record(),
        code=residency_code("table", "table5-certificate"),
    output:
        table_outputs("table5-certificate"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table5-certificate.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table5-certificate --runs {input.record:q} --out-stem {params.stem:q} 2> {log:q}"


rule table_models:
    # One row per model of pager_model.models (the primary first): its Parquet, inventory and claims.
    input:
        data=[p for m in SWEEP_MODELS for p in (m["runs"], m["opt"], m["inventory"], *m["claims"])],
        code=residency_code("table", "models"),
    output:
        table_outputs("models"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
        models=_json.dumps(SWEEP_MODELS),
    log:
        f"{LOGS}/table-models.log",
    conda:
        CONDA_ENV
    shell:
        "residency table models --models {params.models:q} --out-stem {params.stem:q} 2> {log:q}"


rule table4_identity:
    input:
        runs=[cells.CERT_TABLE, "results/matched_source.parquet", "results/bounded_source.parquet",
              fault_cells.FAULT_TABLE, fault_cells.WARM_TABLE],
        code=residency_code("table", "table4-identity"),
    output:
        table_outputs("table4-identity"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
        runs=lambda w, input: ",".join(input.runs),
    log:
        f"{LOGS}/table4-identity.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table4-identity --runs {params.runs:q} --out-stem {params.stem:q} 2> {log:q}"


rule table7_faults:
    input:
        runs=fault_cells.FAULT_TABLE,
        code=residency_code("table", "table7-faults"),
    output:
        table_outputs("table7-faults"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table7-faults.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table7-faults --runs {input.runs:q} --out-stem {params.stem:q} 2> {log:q}"


# Table 1 from the certificate's Parquet (the C1 claim's input): each obligation with the
# certificate's named checks that discharge it.
rule table1_obligations:
    input:
        runs=cells.CERT_TABLE,
        code=residency_code("table", "table1-obligations"),
    output:
        table_outputs("table1-obligations"),
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table1-obligations.log",
    conda:
        CONDA_ENV
    shell:
        "residency table table1-obligations --runs {input.runs:q} --out-stem {params.stem:q} 2> {log:q}"


# Table 11 (the claim map) and the reference's values beside this run's, from the ledger and
# the records it lists.
rule table11_claim_map:
    input:
        ledger=CLAIMS_LEDGER,
        records=expand("claims/{claim_id}.json", claim_id=CLAIM_IDS),
        code=residency_code("table", "table11-claim-map"),
    output:
        table_outputs("table11-claim-map"),
    params:
        table="table11-claim-map",
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/table11-claim-map.log",
    conda:
        CONDA_ENV
    shell:
        "residency table {params.table:q} --runs {input.ledger:q} --out-stem {params.stem:q} 2> {log:q}"


use rule table11_claim_map as table_reference_values with:
    output:
        table_outputs("reference-values"),
    params:
        table="reference-values",
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/reference-values.log",
