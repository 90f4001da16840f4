# The Snakemake report's own pages (figures and tables are declared with report() in their
# rules): the claim ledger and the run's scope, each one self-contained HTML page.
# `snakemake --report results/report.html` (or `make report`) collects them into one file.

import json as _json

from residency.render import report_pages as _report_pages

REPORT_PAGES = ["results/report/claims.html", "results/report/scope.html"]
STUDY_PARQUETS = [f"results/{s}.parquet" for s in ("pager_synthetic", "pager_model", "matched_source")]


rule report_ledger:
    input:
        ledger=CLAIMS_LEDGER,
        records=expand("claims/{claim_id}.json", claim_id=CLAIM_IDS),
        code=residency_code("report-page", "ledger"),
    output:
        report("results/report/claims.html", caption="../report/claims.rst", category="Claims"),
    log:
        f"{LOGS}/report-ledger.log",
    conda:
        CONDA_ENV
    shell:
        "residency report-page ledger --ledger {input.ledger:q} --out {output:q} 2> {log:q}"


rule report_scope:
    input:
        machine="results/machine.json",
        probe="results/probe.json",
        parquets=STUDY_PARQUETS,
        code=residency_code("report-page", "scope"),
    output:
        report("results/report/scope.html", caption="../report/scope.rst", category="Machine and scope"),
    params:
        scope=_json.dumps(_report_pages.campaign_scope(config)),
        parquets=lambda w, input: [a for p in input.parquets for a in ("--parquet", p)],
    log:
        f"{LOGS}/report-scope.log",
    conda:
        CONDA_ENV
    shell:
        "residency report-page scope --machine {input.machine:q} --probe {input.probe:q}"
        " --scope-json {params.scope:q} {params.parquets:q} --out {output:q} 2> {log:q}"
