"""The protocol revisions a claim's record names (`values.protocol_revisions`).

A revision changes what was fixed before the runs: the campaign design or what a claim
asserts (docs/protocol-revisions.md lists each with its reason and the reference's
sentence). A claim module's own revision is its `REVISION`; the revisions below are shared
by several claims and name them. Every record lists all that apply, oldest first, so a
reader of one record sees every way its protocol differs from the first one.
"""

from __future__ import annotations

HARNESS_RESERVE_R1 = {
    "revision": "harness reserve r1 (issue 22)",
    "change": ("a cell's hard limit is r x T_repr + R, R = O + max(harness.overhead_margin x O, "
               "harness.overhead_margin_min_bytes); it was r x T_repr + O, O the highest calibration peak"),
    "reason": ("a limit at exactly the calibrated peak killed runs that needed a page more than their calibration "
               "saw (an arm C cell OOM-killed at peak = limit in the tiny campaign)"),
    "follows": "004 §2.1: \"R_policy an operator-declared reserve for non-target host state\"",
}
HARNESS_RESERVE_R2 = {
    "revision": "harness reserve r2 (issue 23)",
    "change": ("R = O + max(harness.overhead_margin x O, harness.overhead_margin_min_bytes, "
               "harness.overhead_spread_factor x spread), spread the widest max - min of one arm's calibration "
               "remainders; at least three calibration runs per arm (harness.overhead_reps >= 3)"),
    "reason": ("a fixed margin is right only on a machine as steady as the one it was chosen on; with one calibration "
               "run nothing said how much a run's overhead varies"),
    "follows": ("004 §2.1's R_policy, \"an operator-declared reserve for non-target host state\": declared (the "
                "factor, fixed before the runs) and sized from what this machine measured"),
}
CHUNK_SCALE_R1 = {
    "revision": "chunk scale r1 (issue 22)",
    "change": "pager_model.chunk_bytes 512 KiB (SmolLM2 in 188 chunks, huge_chunks off), was 2 MiB (47 chunks)",
    "reason": ("at 47 chunks LRU kept a few chunks across passes (C read 0.894 x the model per token at r = 0.75) and "
               "D/OPT sat above its value at finer chunks; the reference's model is about a thousand chunks of 2 MiB. "
               "128 KiB (751 chunks) cost about 3x more per pager run on this disk (0.4 ms per O_DIRECT read), more "
               "than the default campaign's time carries; config/paper.yaml keeps 2 MiB for a model of a few GB"),
    "follows": ("000: \"All real-model numbers are Qwen2.5-3B-Instruct Q4_K_M, CPU-only, 64 generated tokens\"; "
                "\"D/OPT = 1.08-1.13 on the real model ... and exactly 1.00 on the synthetic workload at realistic "
                "chunk counts\""),
}
KERNEL_BASELINE_PREMISE_R1 = {
    "revision": "kernel baseline premise r1 (issue 23)",
    "change": ("insufficient-evidence, naming the r, where arm A's host limit holds the whole model and its "
               "calibrated overhead (limit >= model bytes + O), instead of judging D/A (P2) and A's flatness (P9) "
               "there; every other assertion and threshold unchanged"),
    "reason": ("a calibration spread widened by a job reading the model beside a calibration run put A's limit above "
               "the model; A read it once and P2 failed on a setup that had lost the comparison's premise"),
    "follows": ("000: \"Arm D reads 13-69 % fewer bytes than arm C and beats the kernel-mmap baseline at every "
                "budget\"; \"Give the kernel more budget and tokens/s does not move\": a budget below the model"),
}

# The claims whose cells run under a calibrated hard limit: both reserve revisions apply to them.
RESERVED = ("P1", "P2", "P3", "P5", "P8", "P9", "C2", "C5", "C6", "C8", "C11")
# Shared revision -> the claims it applies to (docs/protocol-revisions.md, each one's "Claims").
SHARED = (
    (HARNESS_RESERVE_R1, RESERVED),
    (HARNESS_RESERVE_R2, RESERVED),
    (CHUNK_SCALE_R1, ("P7", "P8", "P9", "C9", "P2", "P6", "P10", "P11", "C2", "C10")),
    (KERNEL_BASELINE_PREMISE_R1, ("P2", "P9")),
)


def of(claim_id: str, module) -> list[dict]:
    """Every revision claim `claim_id` (computed by `module`) is made under: the shared ones
    that name it, then its own."""
    found = [rev for rev, ids in SHARED if claim_id in ids]
    own = getattr(module, "REVISION", None)
    return found + ([own] if own else [])
