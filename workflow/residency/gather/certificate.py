"""The certificate's Parquet table (results/certificate.parquet), the input of claim C1:
one row per certified run, made again from the run directories (the certified run, its
oracle, the model identity, R_policy), so `verify --deep` can rebuild it. The values the
claim asserts are columns and the whole record is `certificate_json`; `certificate_sha256`
is the digest of its serialization, which is the content of certificate.json (checked
when one is given)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa

from residency.core import atomic, lineage, manifest
from residency.evidence import certificate
from residency.gather import base


def _eq(cert: dict, n: int, key: str):
    return cert["predicates"]["equations"][n - 1][key]


def row(cert: dict, run_dir: str, manifest_sha: str) -> dict:
    inv, host, gpu = cert["I"], cert["B"]["host"], cert["B"]["gpu"]
    text = certificate.serialize(cert)
    r = {"run_dir": run_dir, "manifest_sha256": manifest_sha,
         "certificate_sha256": hashlib.sha256(text.encode()).hexdigest(),
         "model": inv["model"].get("path"), "model_sha256": inv["model"]["sha256"],
         "engine_sha256": (inv.get("engine_identity") or {}).get("engine_sha256"),
         "t_repr_bytes": inv["t_repr"]["t_repr_bytes"], "s_bytes": inv["s_bytes"],
         "u_sem_lb_bytes": inv["u_sem_lb"]["u_sem_lb_bytes"], "u_sched_bytes": inv["u_sched"]["u_sched_bytes"],
         "q_run_physical_bytes": inv["q_run"]["physical_bytes"], "host_grade": cert["A"]["host"],
         "gpu_grade": cert["A"]["gpu"], "limit_bytes": host["h_cap_bytes"], "peak_bytes": host["peak_bytes"],
         "headroom_bytes": host["headroom_bytes"], "limit_events_total": host["limit_events"],
         "oom_kills": host["oom_kills"], "admissible": cert["admissible"], "g_decl_bytes": gpu["g_decl_bytes"],
         "g_phys_bytes": gpu["g_phys_bytes"], "exact": cert["E"]["exact"], "horizon": cert["E"]["horizon"]["outputs"],
         "certificate_json": text}
    for n in (1, 2, 3):
        r[f"eq{n}_margin_bytes"] = _eq(cert, n, "margin_bytes")
    return r


# The table's columns, declared: a column that is null in every run keeps its type.
CERTIFICATE_SCHEMA = pa.schema([
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
    ("certificate_sha256", pa.string()),
    ("model", pa.string()),
    ("model_sha256", pa.string()),
    ("engine_sha256", pa.string()),
    ("t_repr_bytes", pa.int64()),
    ("s_bytes", pa.int64()),
    ("u_sem_lb_bytes", pa.int64()),
    ("u_sched_bytes", pa.int64()),
    ("q_run_physical_bytes", pa.int64()),
    ("host_grade", pa.string()),
    ("gpu_grade", pa.string()),
    ("limit_bytes", pa.int64()),
    ("peak_bytes", pa.int64()),
    ("headroom_bytes", pa.int64()),
    ("limit_events_total", pa.int64()),   # limit events + (v1) vmpressure events
    ("oom_kills", pa.int64()),
    ("admissible", pa.bool_()),           # the resource predicate (evidence/resource.py), as the certificate says
    ("g_decl_bytes", pa.int64()),
    ("g_phys_bytes", pa.int64()),
    ("exact", pa.bool_()),
    ("horizon", pa.int64()),
    ("certificate_json", pa.string()),
    ("eq1_margin_bytes", pa.int64()),
    ("eq2_margin_bytes", pa.int64()),
    ("eq3_margin_bytes", pa.int64()),
])


def certificate_table(lin: dict) -> pa.Table:
    """The table a certificate lineage describes, made again from its run directories."""
    rows = []
    for run_dir in lin["run_dirs"]:
        sha, _ = manifest.verified(run_dir)
        manifest.verified(lin["oracle"])
        cert = certificate.build(run_dir, lin["oracle"], lin["identity"], lin["reserve_bytes"])
        rows.append(row(cert, str(run_dir), sha))
    return base.to_table(rows, CERTIFICATE_SCHEMA)


def gather_certificate(run_dir: str, oracle_dir: str, model_identity: str, reserve_bytes: int, out: str,
                       record: str | None = None) -> pa.Table:
    ident = json.loads(Path(model_identity).read_text())
    lin = {"kind": "gather", "study": "certificate", "run_dirs": [str(run_dir)], "oracle": str(oracle_dir),
           "identity": {k: ident.get(k) for k in ("path", "sha256", "bytes")}, "reserve_bytes": int(reserve_bytes)}
    t = certificate_table(lin)
    if record is not None and Path(record).read_text() != t.column("certificate_json")[0].as_py():
        raise ValueError(f"{record}: not the record its run directories give (rebuild it)")
    t = lineage.attach(t, lin)
    atomic.write_parquet(out, t)
    return t


def certificate_command(run_dirs, out, oracle, model_identity, reserve_bytes, record=None) -> pa.Table:
    """`residency gather certificate` (campaigns/studies.py): the certified run is the first."""
    return gather_certificate(run_dirs[0], oracle, model_identity, reserve_bytes, out, record)
