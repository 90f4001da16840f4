"""Writes the tiny llama-architecture GGUFs the generate tests run on (ctest fixture).

Uses the pipeline's own generator (residency.gguf_synth via its CLI), so nothing binary is
checked in. Usage: python make_test_models.py OUT_DIR
"""

import json
import sys
from pathlib import Path

from residency.cli import main

SPEC = {
    "seed": 7,
    "tensor_type": "Q8_0",
    "alignment": 32,
    # about 0.8 MB: 13 chunks of 64 KiB
    "dense": {"n_layer": 3, "n_embd": 128, "n_ff": 320, "n_head": 4, "n_head_kv": 2,
              "n_vocab": 512, "n_ctx": 128},
    # about 1 MB; 4 experts, 2 used
    "moe": {"n_layer": 2, "n_embd": 128, "n_ff": 192, "n_head": 4, "n_head_kv": 2,
            "n_vocab": 512, "n_ctx": 128, "n_expert": 4, "n_expert_used": 2},
}

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for variant in ("dense", "moe"):
    rc = main(["model", "synth", "--variant", variant, "--spec", json.dumps(SPEC),
               "--out", str(out / f"tiny-{variant}.gguf")])
    if rc:
        sys.exit(rc)
