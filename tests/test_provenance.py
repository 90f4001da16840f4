"""Provenance that follows the config, through Snakemake on a tiny real-model campaign (claim
P11 and what it needs: five runs of the synthetic dense model): a rerun has nothing to do; a
switched model or a changed setting remakes the claim; a missing user model stops with one
line; the pager cells check their fills against content digests, and leave the flag out
when content_check is off; a byte flipped in the cached model is caught by the verification
rule, and with its mtime put back (so Snakemake sees no change) by the runs that read it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, engine_build_dir, tiny_config

pytestmark = pytest.mark.integration

MODEL = "results/models/synthetic-dense.gguf"
PAGER_RUN = "results/runs/pager_model/synthetic-dense/pager-declared/r0.75/rep1"
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def p11_config(build_dir: str) -> dict:
    cfg = tiny_config(build_dir)
    cfg["pager_model"].update(arms=["kernel-mmap", "pager-declared"], ratios=[0.75], reps=1, baseline_reps=1,
                              eager_reconcile=False)
    return cfg


def snakemake(work: Path, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "claims/P11.json", "-s", str(ROOT / "Snakefile"), "-d", str(work),
           "--cores", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=900)


def planned(work: Path, *args) -> dict[str, int]:
    """The jobs a dry run plans: rule -> count ({} when there is nothing to do)."""
    p = snakemake(work, "-n", "--quiet", "rules", *args)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    if "Nothing to be done" in out:
        return {}
    jobs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            jobs[parts[0]] = int(parts[1])
    assert jobs, out
    return jobs


def with_config(work: Path, mutate) -> Path:
    """A copy of the finished work dir whose config has `mutate` applied."""
    new = work.parent / f"{work.name}-{len(list(work.parent.iterdir()))}"
    shutil.copytree(work, new, symlinks=True)
    cfg = yaml.safe_load((new / "config" / "config.yaml").read_text())
    mutate(cfg)
    (new / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return new


def flip_tensor_byte(path: Path, at: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        b = fh.read(1)
        fh.seek(at)
        fh.write(bytes([b[0] ^ 1]))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    w = tmp_path_factory.mktemp("provenance") / "w"
    (w / "config").mkdir(parents=True)
    (w / "engine").symlink_to(ROOT / "engine")
    (w / "config" / "config.yaml").write_text(yaml.safe_dump(p11_config(engine_build_dir(w))))
    p = snakemake(w, "--resources", "storage_exclusive=1")
    if p.returncode != 0:
        pytest.fail("snakemake failed:\n" + p.stderr[-4000:])
    return w


def test_a_rerun_has_nothing_to_do(work):
    assert planned(work) == {}


def test_switching_the_model_remakes_the_claim(work):
    jobs = planned(with_config(work, lambda c: c["pager_model"].update(models=["synthetic-moe"])))
    assert jobs["claim"] == 1 and jobs["gather_pager_model"] == 1 and jobs["pager_model_cell"] == 2
    assert jobs["model_verify"] == 1 and jobs["model_content_digests"] == 1


def test_a_setting_a_run_depends_on_remakes_the_runs_and_the_claim(work):
    jobs = planned(with_config(work, lambda c: c["pager_model"].update(tokens=5)))
    assert (jobs["pager_model_cell"], jobs["pager_model_baseline"], jobs["claim"]) == (2, 1, 1)
    jobs = planned(with_config(work, lambda c: c["harness"].update(overhead_reps=4)))
    assert jobs["pager_model_overhead"] == 1 and jobs["claim"] == 1
    # a setting P11's runs do not depend on
    assert planned(with_config(work, lambda c: c["matched_source"].update(depth=7))) == {}


def test_a_missing_user_model_stops_with_one_line(work, tmp_path):
    gone = tmp_path / "mine.gguf"

    def to_user(c):
        c["models"]["user"] = [{"name": "mine", "path": str(gone), "sha256": "a" * 64}]
        c["pager_model"]["models"] = ["user:mine"]
    p = snakemake(with_config(work, to_user), "-n")
    assert p.returncode != 0 and "Nothing to be done" not in p.stdout + p.stderr
    assert [ln for ln in p.stderr.splitlines() if "error" in ln] == [
        f"model error: pager_model.models user:mine: {gone}: missing"]


def test_pager_fills_were_checked_and_the_flag_follows_content_check(work):
    run = json.loads((work / PAGER_RUN / "run.json").read_text())
    assert run["config"]["content_digests"] == "results/models/synthetic-dense.chunks-1048576.json"
    assert run["counters"]["content_checks"] == run["counters"]["demand_fills"] + run["counters"]["prefetch_fills"]
    assert run["counters"]["content_checks"] > 0 and run["counters"]["content_mismatches"] == 0
    off = with_config(work, lambda c: c["pager_model"].update(content_check=False))
    p = snakemake(off, "-n", "-p")
    cells = [ln for ln in p.stdout.splitlines() if " generate " in ln and "--arm pager-declared" in ln]
    assert cells and not any("--content-digests" in ln for ln in cells)
    p = snakemake(work, "-n", "-p", "--forcerun", "pager_model_cell")
    cells = [ln for ln in p.stdout.splitlines() if " generate " in ln and "--arm pager-declared" in ln]
    assert cells and all("--content-digests results/models/synthetic-dense.chunks-1048576.json" in ln for ln in cells)


def test_a_flipped_model_byte_is_caught_by_the_verification_rule(work):
    w = with_config(work, lambda c: None)
    inv = json.loads((w / "results/models/synthetic-dense.inventory.json").read_text())
    want = json.loads((w / "results/models/synthetic-dense.json").read_text())["sha256"]
    flip_tensor_byte(w / MODEL, inv["tensors"][3]["offset"] + 100)
    assert planned(w)["model_verify"] == 1
    p = snakemake(w)
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("model error:")]
    from residency.core.identity import sha256_file
    assert set(lines) == {f"model error: {MODEL}: sha256 mismatch: expected {want} got {sha256_file(w / MODEL)}"}
    assert not (w / "results/models/synthetic-dense.json").exists()  # no identity survives a failed check


def test_a_byte_flipped_behind_snakemakes_back_fails_the_runs_that_read_it(work):
    w = with_config(work, lambda c: None)
    inv = json.loads((w / "results/models/synthetic-dense.inventory.json").read_text())
    st = (w / MODEL).stat()
    flip_tensor_byte(w / MODEL, inv["tensors"][3]["offset"] + 100)
    os.utime(w / MODEL, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert planned(w) == {}  # Snakemake cannot see it ...
    p = snakemake(w, "--forcerun", "pager_model_cell")  # ... but the next pager run reads the bytes
    assert p.returncode == 0, p.stderr[-3000:]
    run = json.loads((w / PAGER_RUN / "run.json").read_text())
    assert run["status"] == "failed" and "content mismatch" in run["error"]
    assert run["counters"]["content_mismatches"] >= 1
    claim = json.loads((w / "claims" / "P11.json").read_text())
    assert claim["verdict"] != "pass", claim["reasons"]
