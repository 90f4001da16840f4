# Claims: one record per claim, computed from Parquet, and the ledger of their digests.

import json as _json

from residency import claims as _claims

CLAIM_IDS = sorted(_claims.REGISTRY)
CLAIMS_LEDGER = "claims/ledger.json"


rule claim:
    input:
        lambda w: _claims.input_paths(w.claim_id),
    output:
        "claims/{claim_id}.json",
    wildcard_constraints:
        claim_id="|".join(CLAIM_IDS),
    params:
        settings=lambda w: "'" + _json.dumps(config["claims"]) + "'",
    shell:
        "residency claim {wildcards.claim_id} --settings {params.settings} --out {output}"


rule ledger:
    input:
        expand("claims/{claim_id}.json", claim_id=CLAIM_IDS),
    output:
        CLAIMS_LEDGER,
    shell:
        "residency ledger --out {output} {input}"
