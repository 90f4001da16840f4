"""The claim ledger: one module per claim, each computing its values from Parquet.

Every claim module defines ID, REFERENCE (what the reference document claims, its numbers
included), INPUTS (logical name -> Parquet path under the project root) and
`compute(frames, settings) -> ClaimResult`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from residency.claims import history, revisions
from residency.core.arms import KERNEL_MMAP
from residency.claims import c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, record
from residency.claims.model_runs import MODEL_OPT, MODEL_ROOFLINE, MODEL_RUNS

REGISTRY = {m.ID: m for m in (p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, c1, c2, c3, c4, c5, c6, c7, c8, c9,
                              c10, c11, c12)}
MACHINE_FILE = "results/machine.json"
PROBE_FILE = "results/probe.json"  # kernel features residctl found (userfaultfd, O_DIRECT, cgroup)
LEDGER_FILE = "claims/ledger.json"


def module(claim_id: str):
    try:
        return REGISTRY[claim_id]
    except KeyError:
        raise SystemExit(f"residency: error: unknown claim {claim_id!r} (known: {', '.join(sorted(REGISTRY))})") from None


MODEL_INPUTS = (MODEL_RUNS, MODEL_OPT, MODEL_ROOFLINE)


def model_claim_ids() -> list[str]:
    """The claims made from the real-model study alone: every model of the sweep gets its own."""
    return sorted(i for i, m in REGISTRY.items() if set(m.INPUTS.values()) <= set(MODEL_INPUTS))


def inputs_of(claim_id: str, results: str | None = None) -> dict[str, str]:
    """The claim's Parquet inputs; `results`: a sweep model's directory (results/sweep/<name>),
    whose pager_model Parquet stand in for the primary model's."""
    mod = module(claim_id)
    if results is None:
        return dict(mod.INPUTS)
    if claim_id not in model_claim_ids():
        raise SystemExit(f"residency: error: claim {claim_id} is not a model claim (those: "
                         f"{', '.join(model_claim_ids())}); --results applies to model claims only")
    return {k: f"{results}/{Path(v).name}" for k, v in mod.INPUTS.items()}


def input_paths(claim_id: str, results: str | None = None) -> list[str]:
    return list(inputs_of(claim_id, results).values()) + [MACHINE_FILE, PROBE_FILE]


def load_frames(inputs: dict[str, str], root: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(root / path) for name, path in inputs.items()}


def scope_of(frames: dict[str, pd.DataFrame], root: Path) -> dict:
    """Identities the values were measured under: machine, model/region, engine and the
    llama.cpp build it links, config, and whether the runs' fills were content-checked."""
    def uniq(col):
        vals = sorted({v for f in frames.values() if col in f for v in f[col].dropna().unique()})
        return vals[0] if len(vals) == 1 else (vals or None)

    machine = json.loads((root / MACHINE_FILE).read_text())
    probe = json.loads((root / PROBE_FILE).read_text())
    return {
        "machine": machine,
        "kernel_features": {
            "userfaultfd": (probe.get("userfaultfd") or {}).get("how"),
            "o_direct_alignment": (probe.get("o_direct") or {}).get("min_alignment"),
            "io_uring": (probe.get("io_uring") or {}).get("supported"),
            "cgroup_version": (probe.get("cgroup") or {}).get("version"),
            "cgroup_writable": (probe.get("cgroup") or {}).get("writable"),
        },
        "model": uniq("model") or ("synthetic cyclic-scan region" if any("region_sha256" in f for f in frames.values())
                                   else None),
        "model_sha256": uniq("model_sha256") or uniq("region_sha256"),
        "model_bytes": uniq("model_bytes") or uniq("region_bytes"),
        "engine_sha256": uniq("engine_sha256"),
        "llama": {"commit": uniq("llama_commit"), "build_sha256": uniq("llama_build_sha256")},
        "config_digest": uniq("config_digest"),
        "content_checks": content_checks_of(frames),
    }


def content_checks_of(frames: dict[str, pd.DataFrame]) -> dict | None:
    """How many of the claim's pager runs had their fills checked against the content
    digests (arm A fills nothing; None when the inputs carry no per-run counts)."""
    runs = [f for f in frames.values() if "content_checks" in f and "arm" in f]
    if not runs:
        return None
    df = pd.concat([f.loc[f["arm"] != KERNEL_MMAP, ["content_checks", "content_mismatches"]] for f in runs])
    return {"pager_runs": int(len(df)), "checked": int((df["content_checks"].fillna(0) > 0).sum()),
            "mismatches": int(df["content_mismatches"].fillna(0).sum())}


def compute(claim_id: str, root: Path, settings: dict, protocol: dict | None = None,
            results: str | None = None) -> dict:
    mod = module(claim_id)
    frames = load_frames(inputs_of(claim_id, results), root)
    result = mod.compute(frames, settings)
    result.values["protocol_revisions"] = revisions.of(claim_id, mod)
    return record.build(claim_id, mod.REFERENCE, result, input_paths(claim_id, results),
                        scope_of(frames, root), settings, root, protocol)


def make(claim_id: str, root: Path, settings: dict, out: Path | None = None,
         protocol: dict | None = None, results: str | None = None) -> dict:
    """Compute and write the record, then append its line to the history next to it
    (claims/history/<ID>.jsonl). `results`: a sweep model's directory (inputs_of); its
    record says how to remake it (verify and replay read claims/<ID>.json only)."""
    doc = compute(claim_id, root, settings, protocol, results)
    out = out or root / "claims" / f"{claim_id}.json"
    if results is not None:
        doc["commands"] = {"regenerate": f"snakemake --cores 1 {out}"}
    record.write(doc, out)
    history.append(history.path_for(out, claim_id), history.entry_of(doc, out))
    refresh_ledger(out)
    return doc


def ledger_entry(p: Path) -> dict:
    """One record's ledger entry: its digest and verdict, how often it was computed on its
    scope and the verdicts seen there (from the history), so no rerun hides an earlier
    verdict, and the reference's values beside this run's (reference_values.py)."""
    from residency.core.identity import sha256_file
    from residency.claims.reference_values import side_by_side

    doc = json.loads(Path(p).read_text())
    digest = sha256_file(p)
    past = history.read(history.path_for(p, doc["id"]))
    return {"id": doc["id"], "path": str(p), "sha256": digest, "verdict": doc["verdict"],
            "headline": doc["headline"], "scope_sha256": history.scope_digest(doc),
            "in_history": any(e["record_sha256"] == digest for e in past),
            **history.tally(past, history.scope_digest(doc)), "reference_values": side_by_side(doc)}


def ledger(paths: list[Path], out: Path) -> dict:
    """The ledger of these records, in path order (what `snakemake claims` writes)."""
    led = {"schema_version": 1, "claims": [ledger_entry(p) for p in sorted(paths, key=str)]}
    record.write(led, out)
    return led


def refresh_ledger(rec: Path) -> None:
    """Replace (or add) one record's entry in the ledger beside it (claims/ledger.json, or a
    sweep model's), so a claim made alone leaves a ledger that agrees with every record on
    disk and its history. Claim jobs run in parallel: the read-modify-write holds an flock
    on the records' directory; the ledger is replaced atomically."""
    import fcntl
    import os

    rec = Path(rec)
    out = rec.parent / "ledger.json"
    fd = os.open(rec.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entry = ledger_entry(rec)
        old = json.loads(out.read_text())["claims"] if out.exists() else []
        kept = [e for e in old if e["id"] != entry["id"]]
        record.write({"schema_version": 1, "claims": sorted(kept + [entry], key=lambda e: e["path"])}, out)
    finally:
        os.close(fd)  # closing the descriptor releases the lock
