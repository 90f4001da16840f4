# Claims: one record per claim, computed from Parquet, and the ledger of their digests.

import json as _json

from residency import claims as _claims

CLAIM_IDS = sorted(_claims.REGISTRY)
CLAIMS_LEDGER = "claims/ledger.json"
CLAIM_SETTINGS = _json.dumps(config["claims"])


rule claim:
    input:
        data=lambda w: _claims.input_paths(w.claim_id),
        code=lambda w: residency_code("claims/__init__.py", "claims/record.py", "claims/model_runs.py", "arms.py",
                                      "pairs.py", "stats.py", f"claims/{w.claim_id.lower()}.py"),
    output:
        "claims/{claim_id}.json",
    wildcard_constraints:
        claim_id="|".join(CLAIM_IDS),
    params:
        settings=f"'{CLAIM_SETTINGS}'",
    log:
        f"{LOGS}/claims/{{claim_id}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency claim {wildcards.claim_id} --settings {params.settings} --out {output} 2> {log}"


rule ledger:
    input:
        expand("claims/{claim_id}.json", claim_id=CLAIM_IDS),
    output:
        CLAIMS_LEDGER,
    log:
        f"{LOGS}/claims/ledger.log",
    conda:
        CONDA_ENV
    shell:
        "residency ledger --out {output} {input} 2> {log}"
