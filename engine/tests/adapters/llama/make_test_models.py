"""Writes the tiny GGUFs the generate tests run on (ctest fixture llama_test_models).

Uses the pipeline's own generator (residency.inputs.gguf_synth), so nothing binary is checked in:
tiny-dense and tiny-moe (llama, as always), and the architecture matrix, one model per name
`<arch>-<variant>-<tied|untied>-<type>` (engine/CMakeLists.txt's RESID_ARCH_MATRIX): f16 and
q8_0 are written by the generator; q4_0, q4_k_m and iq4_nl (types llama.cpp repacks on x86
unless told not to) are the f16 model requantized by `residctl quantize`, llama.cpp's own
quantizer.

Usage: python make_test_models.py OUT_DIR RESIDCTL [NAME ...]
"""

import json
import subprocess
import sys
from pathlib import Path

# This checkout's pipeline package, whatever the Python has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "workflow"))

from residency.inputs import gguf_arch, gguf_synth  # noqa: E402
from residency.cli import main  # noqa: E402

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

# The matrix's shape: rows of 256 (Q4_K's super-block) so every matrix quantizes to the
# type asked for; three layers (gemma: SWA, global, SWA); a window of 4 tokens, shorter than
# the tests' prompts.
ARCH_SHAPE = {"n_layer": 3, "n_embd": 256, "n_ff": 512, "n_head": 4, "n_head_kv": 2, "n_vocab": 512,
              "n_ctx": 128, "seed": 11, "alignment": 32}
MOE_SHAPE = {"n_ff": 256, "n_expert": 4, "n_expert_used": 2}
WRITTEN = {"f16": "F16", "q8_0": "Q8_0"}
QUANTIZED = ("q4_0", "q4_k_m", "iq4_nl")


def arch_spec(arch: str, variant: str, tie: str, tensor_type: str) -> gguf_synth.Spec:
    fam = gguf_arch.family(arch)
    kw = dict(ARCH_SHAPE, arch=arch, variant=variant, tied_output=tie == "tied", tensor_type=tensor_type)
    if variant == "moe":
        kw.update(MOE_SHAPE)
    if fam.shared_expert:
        kw["n_ff_shexp"] = 512
    if fam.swa:
        kw["sliding_window"] = 4
    return gguf_synth.make_spec(**kw)


def write_arch_model(out: Path, residctl: str, name: str) -> None:
    arch, variant, tie, qtype = name.split("-")
    if qtype in WRITTEN:
        gguf_synth.write(arch_spec(arch, variant, tie, WRITTEN[qtype]), out / f"{name}.gguf")
        return
    if qtype not in QUANTIZED:
        sys.exit(f"make_test_models: {name}: type {qtype} is not one of {', '.join([*WRITTEN, *QUANTIZED])}")
    base = out / f"{arch}-{variant}-{tie}-f16.base.gguf"
    if not base.exists():
        gguf_synth.write(arch_spec(arch, variant, tie, "F16"), base)
    r = subprocess.run([residctl, "quantize", "--in", str(base), "--out", str(out / f"{name}.gguf"), "--type", qtype],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"make_test_models: {name}: {r.stderr.strip()}")


out, residctl, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
out.mkdir(parents=True, exist_ok=True)
for variant in ("dense", "moe"):
    rc = main(["model", "synth", "--variant", variant, "--spec", json.dumps(SPEC),
               "--out", str(out / f"tiny-{variant}.gguf")])
    if rc:
        sys.exit(rc)
for name in names:
    write_arch_model(out, residctl, name)
for base in out.glob("*.base.gguf"):
    base.unlink()
