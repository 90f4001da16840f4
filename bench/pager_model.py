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
     against the same run without, and the share of the run the hashing took;
  5. each pager arm's tokens/s against the I/O roofline at r = 0.75 (target: D and E >= 0.8),
     everything measured in this run: min(compute rate = the plain-mmap tokens/s of 1,
     bandwidth = `residctl stream` O_DIRECT reads of the model file at the chunk size, one in
     flight, / OPT's bytes per token = Belady's misses on D's own trace at D's capacity x the
     chunk size / tokens). A (kernel mmap) needs the campaign's cgroup limit, so it is not
     run here: the campaign's table (results/tables/pager-model.*) and P9 report its fraction.
     Beside it, each arm's serial bound, 1 / (1 / compute + its own bytes per token /
     bandwidth): what a pager that never overlaps a read with compute reaches with its own
     traffic (D and C read on demand, blocking the compute thread that faults), and D+F:
     arm D with F's source (io_uring, eight windows, read-ahead; seven chunks of its
     budget pay the windows), the overlap the campaign's one-window D does not attempt.

Usage: bench/pager_model.py [--residctl .build/engine/residctl] [--model results/models/...gguf]
                            [--reps 3] [--tokens 64] [--roofline-reps 3] [--skip-1-4]
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
sys.path.insert(0, str(ROOT / "workflow"))  # this checkout's residency (belady, trace, models)
sys.path.insert(0, str(ROOT / "bench"))

import rows  # noqa: E402  (results/bench/bench.json)
ROOFLINE_R = 0.75
ROOFLINE_ARMS = ("pager-lru", "pager-declared", "pager-prefetch", "pager-declared+uring")
LETTERS = {"pager-lru": "C", "pager-declared": "D", "pager-prefetch": "E", "pager-declared+uring": "D+F"}
URING = ["--source", "uring", "--windows", "8"]  # D+F: F's source and read-ahead under D's policy
PROMPT = "Explain in one paragraph why the sky is blue."


def generate(residctl: str, model: str, out: Path, arm: str, tokens: int, budget: int | None,
             digests: Path | None = None) -> dict:
    arm, _, source = arm.partition("+")
    cmd = [residctl, "generate", "--model", model, "--arm", arm, "--tokens", str(tokens), "--prompt", PROMPT,
           "--out", str(out), *(URING if source == "uring" else [])]
    if budget is not None:
        cmd += ["--budget-bytes", str(budget)]
    if digests is not None:
        cmd += ["--content-digests", str(digests)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads((out / "run.json").read_text())


def fio_direct_gib_s(path: str, block: int, depth: int, engine: str, hugetlbfs: str | None) -> float:
    """fio's O_DIRECT read rate; its buffers on huge pages when a hugetlbfs mount is given (the
    pager's windows are), else 2 MiB aligned on small pages (then the row is not comparable)."""
    mem = f"--iomem=mmaphuge:{hugetlbfs}/pager-model-bench.buf" if hugetlbfs else "--iomem_align=2m"
    out = subprocess.run(["fio", "--name=bench", f"--filename={path}", "--readonly", "--rw=read", "--direct=1",
                          f"--bs={block}", f"--iodepth={depth}", f"--ioengine={engine}", mem,
                          "--output-format=json"], check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return job["bw_bytes"] / 2**30


def stream_bytes_per_s(residctl: str, model: str, chunk: int, out: Path) -> float:
    """The roofline's bandwidth: one O_DIRECT pass over the model file at the chunk size, one
    read in flight (the pager's direct source), as the campaign's calibration reads it."""
    subprocess.run([residctl, "stream", "--file", model, "--object-bytes", str(chunk), "--window-bytes", str(chunk),
                    "--source", "direct", "--windows", "1", "--depth", "1", "--consumers", "1", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = json.loads((out / "run.json").read_text())
    return run["source_stats"]["physical_bytes"] / run["wall_ns"] * 1e9


def opt_bytes_per_token(run_dir: Path, run: dict) -> float:
    """Belady's fewest fetches on this run's own trace at its capacity, in bytes per token."""
    from residency.analysis import belady
    from residency.core import trace

    ref = trace.read(run_dir / "trace.bin").reference()
    opt = belady.opt_misses(ref, int(run["budget"]["budget_chunks"]))
    return opt * run["region"]["chunk_size"] / run["generation"]["tokens"]


def roofline_at(a, tmp: Path, mmap_tps: list[float], chunk: int) -> None:
    """Section 5: C, D, E at r = 0.75 against min(compute, bandwidth / OPT bytes per token)."""
    compute_tps = statistics.median(mmap_tps)
    from residency.inputs import models

    t_repr = models.inventory_doc(a.model)["tensor_bytes"]
    budget = int(ROOFLINE_R * t_repr)
    tps = {arm: [] for arm in ROOFLINE_ARMS}
    own_bpt = {arm: [] for arm in ROOFLINE_ARMS}  # the arm's own physical bytes read per token
    bw, opt_bpt = [], []
    not_run = {}  # arm -> why (D+F's eight windows may not fit a small model's budget)
    for i in range(max(a.reps, a.roofline_reps)):
        if i < a.roofline_reps:
            bw.append(stream_bytes_per_s(a.residctl, a.model, chunk, tmp / f"s{i}"))
        if i < a.reps:
            for arm in ROOFLINE_ARMS:  # interleaved: C D E C D E ...
                if arm in not_run:
                    continue
                d = tmp / f"r-{arm}-{i}"
                try:
                    run = generate(a.residctl, a.model, d, arm, a.tokens, budget)
                except subprocess.CalledProcessError as e:
                    if e.returncode != 2 or "+" not in arm:  # exit 2: residctl refused its input
                        raise
                    not_run[arm] = (e.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
                    continue
                tps[arm].append(run["generation"]["tokens_per_s"])
                own_bpt[arm].append(run["source_stats"]["physical_bytes"] / run["generation"]["tokens"])
                if arm == "pager-declared":
                    opt_bpt.append(opt_bytes_per_token(d, run))
    med = statistics.median
    bandwidth, bpt = med(bw), med(opt_bpt)
    bound = min(compute_tps, bandwidth / bpt)
    print(f"5. roofline at r = {ROOFLINE_R}: min(compute {compute_tps:.2f} tok/s, bandwidth {bandwidth / 1e9:.3f} GB/s"
          f" / OPT {bpt / 1e6:.2f} MB per token = {bandwidth / bpt:.2f} tok/s) = {bound:.2f} tok/s"
          f" ({'compute' if compute_tps <= bandwidth / bpt else 'I/O'}-bound; bandwidth per rep: "
          + ", ".join(f"{b / 1e9:.3f}" for b in bw) + " GB/s; compute per rep: "
          + ", ".join(f"{t:.2f}" for t in mmap_tps) + " tok/s)")
    roofline_rows(tps, own_bpt, not_run, bound, compute_tps, bandwidth)
    for arm in ROOFLINE_ARMS:
        letter = LETTERS[arm]
        if arm in not_run:
            print(f"   {letter} {arm}: not run at this budget: {' '.join(not_run[arm])}")
            continue
        target = "  (target >= 0.8)" if letter in ("D", "E") else ""
        serial = 1 / (1 / compute_tps + med(own_bpt[arm]) / bandwidth)
        print(f"   {letter} {arm}: {med(tps[arm]):.2f} tok/s = {med(tps[arm]) / bound:.3f} of the roofline{target};"
              f" its serial bound {serial:.2f} tok/s ({med(own_bpt[arm]) / 1e6:.2f} MB per token) ="
              f" {serial / bound:.3f} of the roofline, reached {med(tps[arm]) / serial:.3f}; per rep: "
              + ", ".join(f"{t:.2f}" for t in tps[arm]))


def roofline_rows(tps, own_bpt, not_run, bound, compute_tps, bandwidth) -> None:
    """The roofline targets as bench rows: the best exact arm at 0.9 of the roofline with its
    reps within 10 % of their median, and D at 0.95 of its serial bound."""
    med = statistics.median
    ran = {arm: v for arm, v in tps.items() if arm not in not_run and v}
    best = max(ran, key=lambda arm: med(ran[arm]))
    m = med(ran[best])
    name = f"best exact arm ({LETTERS[best]} {best}) tokens/s / I/O roofline at r = {ROOFLINE_R}"
    rows.add(name, m / bound, [t / bound for t in ran[best]], 0.9, "at least",
             note=f"median of its reps; roofline {bound:.2f} tok/s")
    rows.add(f"{LETTERS[best]}'s reps: largest distance from their median / median", max(abs(t - m) for t in ran[best]) / m,
             [t / m for t in ran[best]], 0.10, "at most", note="pairs: each rep / the median")
    d = "pager-declared"
    serial = 1 / (1 / compute_tps + med(own_bpt[d]) / bandwidth)
    rows.add(f"D tokens/s / its serial bound at r = {ROOFLINE_R}", med(tps[d]) / serial, [t / serial for t in tps[d]], 0.95,
             "at least", note=f"serial bound {serial:.2f} tok/s at D's own {med(own_bpt[d]) / 1e6:.2f} MB per token")


def report_1_4(mmap_tps, pager_tps, fill_gib_s, fio_gib_s, checked_tps, check_share, hugetlbfs) -> None:
    med = statistics.median
    print(f"1. tokens/s  mmap {med(mmap_tps):.2f}  pager(unlimited) {med(pager_tps):.2f}  "
          f"ratio {med(pager_tps) / med(mmap_tps):.3f}  (target >= 0.95; per pair: "
          + ", ".join(f"{p / m:.3f}" for p, m in zip(pager_tps, mmap_tps)) + ")")
    rows.add("pager at an unlimited budget / plain mmap, tokens/s", med(pager_tps) / med(mmap_tps),
             [p / m for p, m in zip(pager_tps, mmap_tps)], 0.95, "at least", note="ratio of the medians")
    if fill_gib_s:
        print(f"2. fill read path {med(fill_gib_s):.2f} GiB/s  fio O_DIRECT psync depth 1 {med(fio_gib_s):.2f} GiB/s  "
              f"ratio {med(fill_gib_s) / med(fio_gib_s):.3f}{'' if hugetlbfs else ' (fio NOT on huge pages: not comparable)'}")
        rows.add("pager fill path (direct source) / fio psync depth 1, read rate", med(fill_gib_s) / med(fio_gib_s),
                 [f / g for f, g in zip(fill_gib_s, fio_gib_s)], 0.95, "at least",
                 why="" if hugetlbfs else "fio's buffers are not on huge pages, the pager's windows are",
                 note="ratio of the medians; the direct source's target")
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--residctl", default=str(ROOT / ".build/engine/residctl"))
    ap.add_argument("--model", default=str(ROOT / "results/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--roofline-reps", type=int, default=3, help="section 5: bandwidth reads of the model file")
    ap.add_argument("--skip-1-4", action="store_true", help="section 5 only (the compute rate from plain mmap runs)")
    ap.add_argument("--hugetlbfs", help="a hugetlbfs mount with free huge pages for fio's buffers (bench/run.sh makes one as root)")
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
            mmap_tps.append(m["generation"]["tokens_per_s"])
            if a.skip_1_4:
                continue
            p = generate(a.residctl, a.model, Path(tmp) / f"d{i}", "pager-declared", a.tokens, unlimited)
            c = generate(a.residctl, a.model, Path(tmp) / f"k{i}", "pager-declared", a.tokens, unlimited, digests)
            pager_tps.append(p["generation"]["tokens_per_s"])
            checked_tps.append(c["generation"]["tokens_per_s"])
            check_share.append(c["counters"]["content_check_ns"] / c["wall_ns"])
            src = p["source_stats"]
            if src.get("read_ns"):
                fill_gib_s.append(src["logical_bytes"] / src["read_ns"] * 1e9 / 2**30)
            fio_gib_s.append(fio_direct_gib_s(a.model, p["region"]["chunk_size"], 1, "psync", a.hugetlbfs))
        if not a.skip_1_4:
            report_1_4(mmap_tps, pager_tps, fill_gib_s, fio_gib_s, checked_tps, check_share, a.hugetlbfs)
        roofline_at(a, Path(tmp), mmap_tps, int(m["region"]["chunk_size"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
