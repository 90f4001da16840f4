#!/usr/bin/env python3
"""Benchmark: arm D with the object-granular consumption signal against the tensor-granular
one (`residctl generate --consumption object|tensor`), side by side in one invocation.

For each chunk size (2 MiB and the campaign's 512 KiB) and each budget ratio r, the two
runs of a pair are interleaved (object, tensor, object, tensor ...), because this machine
is shared and noisy. Each pair prints, measured in this run:

  - misses (chunk fills) and physical bytes, tensor / object (target: never above 1);
  - decode tokens/s, tensor / object (target: never worse, within the pairs' spread);
  - D/OPT for both (OPT = Belady on each run's own trace at its capacity; target <= 1.03);
  - D against MIN holding only the tensor being read (workflow/residency/evidence/tensor_reference.py):
    the floor a tensor-granular signal can reach, which OPT (holding nothing) is below.

The graph plan of each chunk size (object boundaries, release nodes, the tensors' read
order) is learned first by one unmeasured plain-mmap run.

Usage: bench/consumption.py [--residctl .build/engine/residctl] [--model results/models/...gguf]
                            [--reps 3] [--tokens 64] [--ratios 0.25 0.5 0.75]
                            [--chunks 2097152 524288]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow"))  # this checkout's residency (belady, trace, models)
PROMPT = "Explain in one paragraph why the sky is blue."
MODES = ("object", "tensor")


def generate(a, out: Path, arm: str, chunk: int, extra: list[str]) -> dict:
    cmd = [a.residctl, "generate", "--model", a.model, "--arm", arm, "--tokens", str(a.tokens), "--prompt", PROMPT,
           "--chunk-size", str(chunk), "--threads", str(a.threads), "--out", str(out), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads((out / "run.json").read_text())


def learn_plan(a, tmp: Path, chunk: int) -> Path:
    plan = tmp / f"plan-{chunk}.json"
    cmd = [a.residctl, "generate", "--model", a.model, "--arm", "kernel-mmap", "--tokens", "2", "--prompt", PROMPT,
           "--chunk-size", str(chunk), "--threads", str(a.threads), "--consumption", "tensor",
           "--graph-plan-out", str(plan), "--out", str(tmp / f"plan-run-{chunk}")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return plan


def bounds(run_dir: Path, run: dict) -> tuple[int, int | None]:
    """(OPT, MIN holding the tensor being read) on the run's own trace at its capacity."""
    from residency.analysis import opt as analysis, belady
    from residency.core import trace

    t = trace.read(run_dir / "trace.bin")
    ref, steps = t.reference(), t.reference_steps()
    cap = int(run["budget"]["budget_chunks"])
    held, _ = analysis.tensor_held_bounds(run_dir, ref, steps, cap)
    return belady.opt_misses(ref, cap), held


def cell(a, tmp: Path, chunk: int, r: float, budget: int, plan: Path) -> dict:
    """Interleaved pairs of one (chunk, r): per mode, misses, bytes, tokens/s, OPT, held MIN."""
    got = {m: {"misses": [], "bytes": [], "tps": [], "opt": [], "held": []} for m in MODES}
    for i in range(a.reps):
        for mode in MODES:
            d = tmp / f"c{chunk}-r{r:g}-{mode}-{i}"
            run = generate(a, d, "pager-declared", chunk,
                           ["--budget-bytes", str(budget), "--source", "direct", "--consumption", mode,
                            "--graph-plan", str(plan)])
            opt, held = bounds(d, run)
            g = got[mode]
            g["misses"].append(run["counters"]["misses"])
            g["bytes"].append(run["counters"]["physical_bytes_read"])
            g["tps"].append(run["generation"]["tokens_per_s"])
            g["opt"].append(opt)
            g["held"].append(held)
    return got


def report(chunk: int, r: float, got: dict) -> None:
    med = statistics.median
    o, t = got["object"], got["tensor"]
    pairs = list(zip(o["tps"], t["tps"]))
    miss_ratio = [tm / om for om, tm in zip(o["misses"], t["misses"])]
    byte_ratio = [tb / ob for ob, tb in zip(o["bytes"], t["bytes"])]
    d_opt = {m: [x / y for x, y in zip(got[m]["misses"], got[m]["opt"])] for m in MODES}
    held = [x / y for x, y in zip(t["misses"], t["held"]) if y]
    print(f"  chunk {chunk >> 10} KiB, r = {r:g}: misses tensor/object {med(miss_ratio):.3f} "
          f"(per pair: " + ", ".join(f"{om}/{tm}" for om, tm in zip(o["misses"], t["misses"]))
          + f"); bytes {med(byte_ratio):.3f}; "
          f"tokens/s tensor/object {med(tp / op for op, tp in pairs):.3f} (per pair: "
          + ", ".join(f"{tp / op:.3f}" for op, tp in pairs) + f"); D/OPT object {med(d_opt['object']):.3f}, "
          f"tensor {med(d_opt['tensor']):.3f} (target <= 1.03)"
          + (f"; D(tensor) / MIN holding the tensor being read {med(held):.3f}" if held else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--residctl", default=str(ROOT / ".build/engine/residctl"))
    ap.add_argument("--model", default=str(ROOT / "results/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.25, 0.375, 0.5, 0.625, 0.75])
    ap.add_argument("--chunks", type=int, nargs="+", default=[2 << 20, 512 << 10])
    a = ap.parse_args()
    for p in (a.residctl, a.model):
        if not Path(p).exists():
            print(f"bench: error: {p} not found (run `make figures` first)", file=sys.stderr)
            return 2
    from residency.inputs import models

    t_repr = models.inventory_doc(a.model)["tensor_bytes"]
    print("consumption signals, arm D, object vs tensor (interleaved pairs):")
    (ROOT / "results").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=ROOT / "results") as tmp:
        for chunk in a.chunks:
            plan = learn_plan(a, Path(tmp), chunk)
            for r in a.ratios:
                report(chunk, r, cell(a, Path(tmp), chunk, r, int(r * t_repr), plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
