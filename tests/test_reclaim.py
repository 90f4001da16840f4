"""Reclaim authority (P3): the pressure written on fake v1/v2 cgroups, the kernel's counters
read back, the reclaim cells gathered, and the claim on fixtures where each half holds, fails,
or cannot be shown (cgroup v1, a machine where no cell can be made)."""

import json
from pathlib import Path

import pandas as pd
import pytest

from residency.run import cgroup, harness, reclaim
from residency import claims
from residency.gather.reclaim import gather_reclaim

from fixtures import region_identity, seal
from test_cgroup_fake import fake_v1, fake_v2


def test_v2_pressure_is_memory_high_with_swap_available(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "memory.swap.max").write_text("0\n")
    reclaim.configure(cell, 2, 40 << 20, 96 << 20, cgroup._write)
    assert (cell / "memory.high").read_text() == str(40 << 20)
    assert (cell / "memory.max").read_text() == str(96 << 20)
    assert (cell / "memory.swap.max").read_text() == "max"
    cg = cgroup.Cgroup(cgroup.locate(str(fake_v2(tmp_path))), 96 << 20, name="c", high_bytes=40 << 20)
    assert (cg.path / "memory.high").read_text() == str(40 << 20)
    assert not cg.authority.hard and "reclaim cell" in cg.authority.reasons[0]


def test_v1_pressure_is_the_limit_with_memsw_unlimited(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "memory.memsw.limit_in_bytes").write_text("1\n")
    (cell / "memory.swappiness").write_text("60\n")
    reclaim.configure(cell, 1, 40 << 20, 96 << 20, cgroup._write)
    assert (cell / "memory.limit_in_bytes").read_text() == str(40 << 20)
    assert (cell / "memory.memsw.limit_in_bytes").read_text() == "-1"
    assert (cell / "memory.swappiness").read_text() == "60\n"  # not turned to 0: swap is the point
    cg = cgroup.Cgroup(cgroup.locate(str(fake_v1(tmp_path))), 96 << 20, name="c", high_bytes=40 << 20)
    assert (cg.path / "memory.limit_in_bytes").read_text() == str(40 << 20)


def test_counters_read_per_version(tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 37\nmax 0\noom 0\noom_kill 0\n")
    (v2 / "memory.stat").write_text("anon 1\npgscan 120687\npgsteal 60000\nworkingset_refault_anon 9\n")
    c = reclaim.read(v2, 2, 1 << 20, 4096, reclaim.Peaks(swap_bytes=5, unevictable_bytes=6, samples=7))
    assert c.events["high"] == 37 and c.stat["pgscan"] == 120687 and c.kernel_reclaimed_bytes == 60000 * 4096
    assert (c.swap_peak_bytes, c.unevictable_peak_bytes, c.samples, c.lacks) == (5, 6, 7, [])
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.stat").write_text("swap 0\nworkingset_refault_anon 31512\npgmajfault 4061\n")
    (v1 / "memory.failcnt").write_text("39629\n")
    c = reclaim.read(v1, 1, 1 << 20, 4096, reclaim.Peaks())
    assert c.stat["workingset_refault_anon"] == 31512 and c.failcnt == 39629
    assert c.kernel_reclaimed_bytes is None and c.events == {} and any("memory.high" in x for x in c.lacks)


def test_sampler_keeps_the_peaks(tmp_path):
    (tmp_path / "memory.stat").write_text("swap 100\nunevictable 5\n")
    s = reclaim.Sampler(tmp_path, 1)
    s.sample()
    (tmp_path / "memory.stat").write_text("swap 40\nunevictable 50\n")
    s.sample()
    assert (s.peaks.swap_bytes, s.peaks.unevictable_bytes, s.peaks.samples) == (100, 50, 2)


def test_a_reclaim_cell_without_a_cgroup_is_recorded_as_unavailable(tmp_path):
    out = tmp_path / "cell"
    rec = harness.run(["true"], out, None, cgroup_mode="off", meta={"protection": "protected"},
                      pressure=harness.Pressure(high_bytes=1 << 20, swap_bytes=1 << 20, swap_dir=str(tmp_path)))
    assert rec["status"] == "unavailable" and "needs a cgroup" in rec["host"]["reason"]
    assert json.loads((out / "harness.json").read_text())["status"] == "unavailable"
    assert (out / "manifest.json").exists()
    with pytest.raises(harness.HarnessError, match="^cgroup required but unavailable"):
        harness.run(["true"], out, None, cgroup_mode="required", cgroup_parent=str(tmp_path / "nope"),
                    pressure=harness.Pressure(1 << 20, 1 << 20, str(tmp_path)))


# ---- the claim ---------------------------------------------------------------------------

V2_UNPROTECTED = {"high": 50, "pgscan": 120687, "pgsteal": 60000, "swap": 30 << 20, "refault": 9000}
V2_PROTECTED = {"high": 37, "pgscan": 0, "pgsteal": 0, "swap": 0, "refault": 0}


def reclaim_run(root: Path, protection: str, rep: int, version: int, k: dict, status="ok") -> Path:
    d = root / protection / f"rep{rep}"
    d.mkdir(parents=True)
    run = {"schema_version": 1, "subcommand": "scan", "status": status, "error": None, "arm": "pager-declared",
           "policy": "declared", "source_engine": "direct", "uffd_mode": "syscall", "config": {"passes": 3},
           "region": {"bytes": 8 << 20, "chunk_size": 1 << 20, "chunks": 8},
           "budget": {"budget_bytes": 4 << 20, "budget_chunks": 3},
           "counters": {"evictions": 20, "bytes_verified": 24 << 20, "verify_errors": 0},
           "protect": {"on": protection == "protected", "locked_bytes": (3 << 20) if protection == "protected" else 0}}
    (d / "run.json").write_text(json.dumps(run))
    events = {"high": k["high"], "max": 0} if version == 2 else {}
    stat = ({"pgscan": k["pgscan"], "pgsteal": k["pgsteal"], "workingset_refault_anon": k["refault"]} if version == 2
            else {"workingset_refault_anon": k["refault"], "pgmajfault": k["refault"] // 8})
    rc = {"version": version, "high_bytes": 3 << 20, "page_bytes": 4096, "events": events, "stat": stat,
          "failcnt": k.get("failcnt") if version == 1 else None, "swap_peak_bytes": k["swap"],
          "unevictable_peak_bytes": 0, "samples": 10,
          "kernel_reclaimed_bytes": k["pgsteal"] * 4096 if version == 2 else None,
          "lacks": [] if version == 2 else ["memory.high"]}
    h = {"schema_version": 1, "argv": ["residctl"], "engine": {"path": "/x", "sha256": "e" * 64},
         "meta": {"campaign": "reclaim", "arm": "pager-declared", "protection": protection, "r": "0.5", "rep": str(rep),
                  "config_digest": "c" * 64, "overhead_bytes": 1 << 20, "reclaim_high_bytes": 3 << 20,
                  "reclaim_fraction": 0.5},
         "status": "ok" if status == "ok" else "failed", "exit_code": 0, "term_signal": None,
         "started_utc": "2026-01-01T00:00:00+00:00", "wall_s": 0.1, "rusage": None,
         "host": {"grade": "soft", "reason": "reclaim cell", "limit_bytes": 5 << 20,
                  "cgroup": {"version": version, "path": "/x", "limit_bytes": 5 << 20, "peak_bytes": 3 << 20,
                             "limit_events": 0, "oom_events": 0, "oom_kills": 0, "pressure_events": k.get("vmp")},
                  "reclaim": rc, "swap": {"path": "/s", "bytes": 16 << 20}},
         "stderr_tail": [], "engine_manifest": "ok"}
    (d / "harness.json").write_text(json.dumps(h))
    return seal(d)


def p3(tmp_path, version=2, unprotected=V2_UNPROTECTED, protected=V2_PROTECTED, reps=2):
    runs = tmp_path / "results" / "runs" / "reclaim"
    dirs = [reclaim_run(runs, arm, rep, version, k) for rep in range(1, reps + 1)
            for arm, k in (("unprotected", unprotected), ("protected", protected))]
    res = tmp_path / "results"
    gather_reclaim(dirs, region_identity(tmp_path), res / "reclaim.parquet")
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": version}}))
    return claims.make("P3", tmp_path, {})


def test_p3_passes_on_v2_when_both_halves_hold(tmp_path):
    doc = p3(tmp_path)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert doc["values"]["protected"]["v2_nothing_eligible"] == [True, True]
    df = pd.read_parquet(tmp_path / "results" / "reclaim.parquet")
    assert set(df["protection"]) == {"unprotected", "protected"} and (df["pager_evicted_bytes"] == 20 << 20).all()


@pytest.mark.parametrize("half,change,assertion", [
    ("unprotected", {"swap": 0}, "kernel_took_pages_to_swap"),
    ("unprotected", {"pgsteal": 0}, "v2_kernel_reclaimed"),
    ("protected", {"pgscan": 12}, "v2_nothing_eligible"),
    ("protected", {"high": 0}, "entered_reclaim"),
    ("protected", {"swap": 4096}, "kernel_took_nothing_to_swap"),
])
def test_p3_fails_naming_the_half_that_did_not_hold(tmp_path, half, change, assertion):
    kw = {half: (V2_UNPROTECTED if half == "unprotected" else V2_PROTECTED) | change}
    doc = p3(tmp_path, **kw)
    assert doc["verdict"] == "fail"
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and f"/values/{half}/{assertion}" in failed[0], failed


def test_p3_on_v1_asserts_the_counterparts_and_names_what_v1_cannot_show(tmp_path):
    unprot = {"high": None, "pgscan": None, "pgsteal": 0, "swap": 30 << 20, "refault": 31512, "failcnt": 39629}
    prot = {"high": None, "pgscan": None, "pgsteal": 0, "swap": 0, "refault": 0, "failcnt": 88, "vmp": 300}
    doc = p3(tmp_path, version=1, unprotected=unprot, protected=prot)
    assert doc["verdict"] == "insufficient-evidence"
    assert [r for r in doc["reasons"] if r.startswith("protected half: cgroup v1 has no memory.high")]
    assert not [r for r in doc["reasons"] if r.startswith(("failed:", "unevaluable:"))], doc["reasons"]
    # a v1 counterpart that does not hold is still a failure, named
    doc = p3(tmp_path / "b", version=1, unprotected=unprot, protected=prot | {"refault": 5})
    assert [r for r in doc["reasons"] if r.startswith("failed:") and "v1_no_anon_refault" in r]


def test_p3_without_cells_made_is_insufficient_with_the_reason(tmp_path):
    runs = tmp_path / "results" / "runs" / "reclaim"
    dirs = []
    for arm in ("unprotected", "protected"):
        out = runs / arm / "rep1"
        harness.run(["true"], out, None, cgroup_mode="off", meta={"protection": arm, "rep": "1"},
                    pressure=harness.Pressure(1 << 20, 1 << 20, str(tmp_path)))
        dirs.append(out)
    res = tmp_path / "results"
    gather_reclaim(dirs, region_identity(tmp_path), res / "reclaim.parquet")
    (res / "machine.json").write_text("{}")
    (res / "probe.json").write_text("{}")
    doc = claims.make("P3", tmp_path, {})
    assert doc["verdict"] == "insufficient-evidence"
    assert any("could not be made here" in r and "needs a cgroup" in r for r in doc["reasons"]), doc["reasons"]
