"""The certificate's Parquet table (results/certificate.parquet), the input of claim C1:
one row per certified run, the values the claim asserts as columns and the whole record
as `certificate_json`, so a replay recomputes every value from the table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from . import atomic
from .certificate import FILE
from .identity import sha256_file


def _eq(cert: dict, n: int, key: str):
    return cert["predicates"]["equations"][n - 1][key]


def row(run_dir: Path) -> dict:
    path = run_dir / FILE
    cert = json.loads(path.read_text())
    inv, host, gpu = cert["I"], cert["B"]["host"], cert["B"]["gpu"]
    r = {"run_dir": str(run_dir), "certificate_sha256": sha256_file(path),
         "model": inv["model"].get("path"), "model_sha256": inv["model"]["sha256"],
         "engine_sha256": (inv.get("engine_identity") or {}).get("engine_sha256"),
         "t_repr_bytes": inv["t_repr"]["t_repr_bytes"], "s_bytes": inv["s_bytes"],
         "u_sem_lb_bytes": inv["u_sem_lb"]["u_sem_lb_bytes"], "u_sched_bytes": inv["u_sched"]["u_sched_bytes"],
         "q_run_physical_bytes": inv["q_run"]["physical_bytes"], "host_grade": cert["A"]["host"],
         "gpu_grade": cert["A"]["gpu"], "limit_bytes": host["h_cap_bytes"], "peak_bytes": host["peak_bytes"],
         "headroom_bytes": host["headroom_bytes"], "g_decl_bytes": gpu["g_decl_bytes"],
         "g_phys_bytes": gpu["g_phys_bytes"], "exact": cert["E"]["exact"], "horizon": cert["E"]["horizon"]["outputs"],
         "certificate_json": json.dumps(cert, sort_keys=True)}
    for n in (1, 2, 3):
        r[f"eq{n}_margin_bytes"] = _eq(cert, n, "margin_bytes")
    return r


def gather_certificate(run_dirs: list[str], out: str) -> pa.Table:
    t = pa.Table.from_pylist([row(Path(d)) for d in run_dirs])
    atomic.write_parquet(out, t)
    return t
