#!/usr/bin/env python3
"""Benchmark: the pager on a real model against its references, measured side by side.

Prints ratios from runs interleaved in one invocation (A B A B ...), because the
development machines are shared and noisy: absolute numbers drift, ratios of neighbours
much less.

  1. tokens/s of the pager at an unlimited budget (pager-declared, budget = the whole
     model plus its own window and page tables) against llama.cpp's plain mmap
     (target >= 0.95);
  2. the pager's fill path (source read + UFFDIO_COPY, from run.json) against fio's
     O_DIRECT sequential read rate at the same block size on the same file;
  3. D/OPT per budget ratio from a finished campaign (results/pager_model_opt.parquet),
     when there is one;
  4. the cost of the content check: tokens/s of the pager at the unlimited budget with
     --content-digests (every fill hashed with XXH64 and compared before it is published)
     against the same run without, and the share of the run the hashing took.

Usage: bench/pager_model.py [--residctl .build/engine/residctl] [--model results/models/...gguf]
                            [--reps 3] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Explain in one paragraph why the sky is blue."


def generate(residctl: str, model: str, out: Path, arm: str, tokens: int, budget: int | None,
             digests: Path | None = None) -> dict:
    cmd = [residctl, "generate", "--model", model, "--arm", arm, "--tokens", str(tokens), "--prompt", PROMPT,
           "--out", str(out)]
    if budget is not None:
        cmd += ["--budget-bytes", str(budget)]
    if digests is not None:
        cmd += ["--content-digests", str(digests)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads((out / "run.json").read_text())


def fio_direct_gib_s(path: str, block: int, depth: int, engine: str) -> float:
    out = subprocess.run(["fio", "--name=bench", f"--filename={path}", "--readonly", "--rw=read", "--direct=1",
                          f"--bs={block}", f"--iodepth={depth}", f"--ioengine={engine}", "--iomem_align=2m",
                          "--output-format=json"], check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return job["bw_bytes"] / 2**30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--residctl", default=str(ROOT / ".build/engine/residctl"))
    ap.add_argument("--model", default=str(ROOT / "results/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    for p in (a.residctl, a.model):
        if not Path(p).exists():
            print(f"bench: error: {p} not found (run `make figures` first)", file=sys.stderr)
            return 2
    if not shutil.which("fio"):
        print("bench: error: fio not installed", file=sys.stderr)
        return 2
    size = Path(a.model).stat().st_size
    unlimited = size + (64 << 20)
    mmap_tps, pager_tps, fill_gib_s, fio_gib_s = [], [], [], []
    checked_tps, check_share = [], []
    (ROOT / "results").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=ROOT / "results") as tmp:
        digests = Path(tmp) / "digests.json"
        subprocess.run([a.residctl, "inventory", "--file", a.model, "--out", str(digests)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(a.reps):
            m = generate(a.residctl, a.model, Path(tmp) / f"a{i}", "kernel-mmap", a.tokens, None)
            p = generate(a.residctl, a.model, Path(tmp) / f"d{i}", "pager-declared", a.tokens, unlimited)
            c = generate(a.residctl, a.model, Path(tmp) / f"k{i}", "pager-declared", a.tokens, unlimited, digests)
            mmap_tps.append(m["generation"]["tokens_per_s"])
            pager_tps.append(p["generation"]["tokens_per_s"])
            checked_tps.append(c["generation"]["tokens_per_s"])
            check_share.append(c["counters"]["content_check_ns"] / c["wall_ns"])
            src = p["source_stats"]
            if src.get("read_ns"):
                fill_gib_s.append(src["logical_bytes"] / src["read_ns"] * 1e9 / 2**30)
            fio_gib_s.append(fio_direct_gib_s(a.model, p["region"]["chunk_size"], 1, "psync"))
    med = statistics.median
    print(f"1. tokens/s  mmap {med(mmap_tps):.2f}  pager(unlimited) {med(pager_tps):.2f}  "
          f"ratio {med(pager_tps) / med(mmap_tps):.3f}  (target >= 0.95; per pair: "
          + ", ".join(f"{p / m:.3f}" for p, m in zip(pager_tps, mmap_tps)) + ")")
    if fill_gib_s:
        print(f"2. fill read path {med(fill_gib_s):.2f} GiB/s  fio O_DIRECT psync depth 1 {med(fio_gib_s):.2f} GiB/s  "
              f"ratio {med(fill_gib_s) / med(fio_gib_s):.3f}")
    opt = ROOT / "results/pager_model_opt.parquet"
    if opt.exists():
        import pandas as pd

        df = pd.read_parquet(opt)
        d = df[(df["arm"] == "pager-declared") & df["d_over_opt"].notna()]
        print("3. D/OPT per r: " + ", ".join(f"{r:g}: {v:.3f}" for r, v in d.groupby("r")["d_over_opt"].mean().items())
              + "  (reference 1.08-1.13; aim <= 1.05)")
    else:
        print("3. D/OPT: no campaign results yet (results/pager_model_opt.parquet)")
    print(f"4. content check  tokens/s with {med(checked_tps):.2f}  without {med(pager_tps):.2f}  "
          f"ratio {med(checked_tps) / med(pager_tps):.3f}  (hashing {100 * med(check_share):.2f} % of the run; "
          "per pair: " + ", ".join(f"{c / p:.3f}" for c, p in zip(checked_tps, pager_tps)) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
