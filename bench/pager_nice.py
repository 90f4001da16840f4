#!/usr/bin/env python3
"""Benchmark: the pager thread's default nice (-10) against `--pager-nice inherit`, beside a
CPU load, measured side by side.

The pager thread serves every fault; a compute thread that faults waits until that thread
is scheduled. On a machine whose cores are busy with other work (a shared node, or this
project's own two-core machines during a campaign), a pager thread at the compute threads'
nice queues behind everything else. The default raises it (nice -10, residctl's
kDefaultPagerNice); this row measures what that buys on the real model: arm D
(pager-declared, the direct source: every miss blocks a compute thread) at r = 0.75 of the
model's tensor bytes, tokens/s with the default over tokens/s with `inherit`, the two
interleaved (inherit, default, inherit, default, ...) while one busy-looping process per
core runs beside them (started and stopped here). Target: at least 1.0 (the default must not
cost tokens/s). Without CAP_SYS_NICE the engine keeps the process's nice and says so in
run.json: the row is then not comparable.

Usage: bench/pager_nice.py [--residctl .build/engine/residctl] [--model results/models/...gguf]
                           [--pairs 3] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT / "bench"))

import rows  # noqa: E402  (results/bench/bench.json)

R = 0.75
PROMPT = "Explain in one paragraph why the sky is blue."
NAME = f"pager nice -10 / inherit, D tokens/s at r = {R} beside a CPU load"


def spin() -> None:
    """A busy loop: one core's worth of other work."""
    while True:
        pass


def generate(a, out: Path, nice: str, budget: int) -> dict:
    cmd = [a.residctl, "generate", "--model", a.model, "--arm", "pager-declared", "--tokens", str(a.tokens),
           "--prompt", PROMPT, "--budget-bytes", str(budget), "--pager-nice", nice, "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads((out / "run.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--residctl", default=str(ROOT / ".build/engine/residctl"))
    ap.add_argument("--model", default=str(ROOT / "results/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    for p in (a.residctl, a.model):
        if not Path(p).exists():
            print(f"bench: error: {p} not found (run `make figures` first)", file=sys.stderr)
            return 2
    from residency.inputs import models

    budget = int(R * models.inventory_doc(a.model)["tensor_bytes"])
    load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(os.cpu_count() or 1)]
    tps = {"inherit": [], "-10": []}
    refused = ""
    (ROOT / "results").mkdir(exist_ok=True)
    try:
        for p in load:
            p.start()
        with tempfile.TemporaryDirectory(prefix="bench-nice-", dir=ROOT / "results") as tmp:
            for i in range(a.pairs):
                for nice in ("inherit", "-10"):
                    run = generate(a, Path(tmp) / f"{nice}-{i}", nice, budget)
                    tps[nice].append(run["generation"]["tokens_per_s"])
                    refused = refused or (run["pager_thread"] or {}).get("nice_error") or ""
    finally:
        for p in load:
            p.terminate()
            p.join()
    pairs = [n / i for n, i in zip(tps["-10"], tps["inherit"])]
    ratio = statistics.median(tps["-10"]) / statistics.median(tps["inherit"])
    print(f"pager nice: D at r = {R} beside {len(load)} busy process(es): tokens/s nice -10 "
          + ", ".join(f"{t:.2f}" for t in tps["-10"]) + "; inherit " + ", ".join(f"{t:.2f}" for t in tps["inherit"]))
    why = f"the engine could not set the pager thread's nice ({refused}): both runs used the process's" if refused else ""
    rows.add(NAME, ratio, pairs, 1.0, "at least", why=why,
             note=f"ratio of the medians; {len(load)} busy-looping processes beside, budget {budget} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
