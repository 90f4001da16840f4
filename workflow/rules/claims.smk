# Claims: one record per claim, computed from Parquet, and the ledger of their digests.
# Each computation also appends a line to claims/history/<ID>.jsonl (not an output: it
# only grows), which the ledger counts.

import json as _json

from residency import claims as _claims
from residency.claims import protocol as _protocol

CLAIM_IDS = sorted(_claims.REGISTRY)
MODEL_CLAIM_IDS = _claims.model_claim_ids()
CLAIMS_LEDGER = "claims/ledger.json"
# Each further model's ledger of its model claims (nothing without a sweep).
SWEEP_LEDGERS = [f"{cells.SWEEP_CLAIMS}/{n}/ledger.json" for n in SWEEP_NAMES]
CLAIM_SETTINGS = _json.dumps(config["claims"], sort_keys=True)


rule claim:
    input:
        data=lambda w: _claims.input_paths(w.claim_id),
        code=lambda w: residency_code("claim", w.claim_id),
    output:
        "claims/{claim_id}.json",
    wildcard_constraints:
        claim_id="|".join(CLAIM_IDS),
    params:
        settings=CLAIM_SETTINGS,
        protocol=lambda w: claim_protocol(w.claim_id),
    log:
        f"{LOGS}/claims/{{claim_id}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency claim {wildcards.claim_id:q} --settings {params.settings:q} --protocol {params.protocol:q}"
        " --out {output:q} 2> {log:q}"


# The model claims of every further model of pager_model.models, from its own Parquet
# (results/sweep/<name>/), into claims/models/<name>/ with their own history.
rule claim_sweep:
    input:
        data=lambda w: _claims.input_paths(w.claim_id, f"{cells.SWEEP}/{w.model}"),
        code=lambda w: residency_code("claim", w.claim_id),
    output:
        f"{cells.SWEEP_CLAIMS}/{{model}}/{{claim_id}}.json",
    wildcard_constraints:
        claim_id="|".join(MODEL_CLAIM_IDS),
        model=SWEEP_MODEL_RE,
    params:
        settings=CLAIM_SETTINGS,
        protocol=lambda w: claim_protocol(w.claim_id, w.model),
        results=lambda w: f"{cells.SWEEP}/{w.model}",
    log:
        f"{LOGS}/sweep/{{model}}/claims/{{claim_id}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency claim {wildcards.claim_id:q} --settings {params.settings:q} --protocol {params.protocol:q}"
        " --results {params.results:q} --out {output:q} 2> {log:q}"


rule ledger:
    input:
        records=expand("claims/{claim_id}.json", claim_id=CLAIM_IDS),
        code=residency_code("ledger"),
    output:
        CLAIMS_LEDGER,
    log:
        f"{LOGS}/claims/ledger.log",
    conda:
        CONDA_ENV
    shell:
        "residency ledger --out {output:q} {input.records:q} 2> {log:q}"


rule ledger_sweep:
    input:
        records=expand(f"{cells.SWEEP_CLAIMS}/{{{{model}}}}/{{claim_id}}.json", claim_id=MODEL_CLAIM_IDS),
        code=residency_code("ledger"),
    output:
        f"{cells.SWEEP_CLAIMS}/{{model}}/ledger.json",
    wildcard_constraints:
        model=SWEEP_MODEL_RE,
    log:
        f"{LOGS}/sweep/{{model}}/claims/ledger.log",
    conda:
        CONDA_ENV
    shell:
        "residency ledger --out {output:q} {input.records:q} 2> {log:q}"
