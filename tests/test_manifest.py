"""Run manifests: written last over every file, any changed, missing or added file caught
with one line naming it, the harness leaves one behind, and gather carries its digest."""

import json

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from residency.gather import pager as gather
from residency.run import harness
from residency.core import manifest
from residency.core.identity import sha256_file

from fixtures import flip_byte, make_model_run, make_run, region_identity, seal, set_counter
from test_harness import fake_engine


def test_written_over_every_file_but_itself_and_temporaries(tmp_path):
    d = make_run(tmp_path, "main", "pager-lru", 0.5, 1, sealed=False)
    (d / ".run.json.abc.tmp").write_text("half")
    sha = manifest.write(d)
    assert sha == sha256_file(d / "manifest.json")
    doc = json.loads((d / "manifest.json").read_text())
    assert doc["schema_version"] == 1
    assert [e["name"] for e in doc["files"]] == ["harness.json", "run.json", "trace.bin"]
    for e in doc["files"]:
        assert e["bytes"] == (d / e["name"]).stat().st_size and e["sha256"] == sha256_file(d / e["name"])
    assert manifest.problems(d) == [] and manifest.problems(d, expect_sha256=sha) == []


def test_a_changed_counter_is_one_line_naming_the_run_and_file(tmp_path):
    d = make_run(tmp_path, "main", "pager-lru", 0.5, 1)
    set_counter(d, "physical_bytes_read", 1)
    found = manifest.problems(d)
    assert len(found) == 1 and found[0].startswith(f"{d}/run.json: ") and "changed since the run" in found[0]


@pytest.mark.parametrize("name", ["trace.bin", "logits.f32", "tokens.json"])
def test_a_flipped_byte_in_a_raw_file_is_caught(tmp_path, name):
    d = make_model_run(tmp_path, "main", "pager-declared", 0.5, 1)
    flip_byte(d / name, offset=7)  # same size: only the sha256 can tell
    assert manifest.problems(d) == [f"{d}/{name}: sha256 {sha256_file(d / name)[:16]}, manifest.json says "
                                    f"{manifest.read(d)[name]['sha256'][:16]}: changed since the run"]
    with pytest.raises(manifest.ManifestError, match=f"^{d}/{name}: sha256"):
        manifest.verified(d)


def test_missing_added_and_resized_files_are_caught(tmp_path):
    d = make_model_run(tmp_path, "main", "pager-declared", 0.5, 1)
    (d / "tokens.json").unlink()
    (d / "extra.txt").write_text("x")
    with open(d / "logits.f32", "ab") as fh:
        fh.write(b"\0")
    found = manifest.problems(d)
    assert [p.split(": ")[0] for p in found] == [f"{d}/logits.f32", f"{d}/tokens.json", f"{d}/extra.txt"]
    assert "bytes, manifest.json says" in found[0] and "missing" in found[1] and "not listed" in found[2]


def test_a_manifest_rewritten_after_gathering_is_caught(tmp_path):
    d = make_run(tmp_path, "main", "pager-lru", 0.5, 1)
    gathered = sha256_file(d / "manifest.json")
    set_counter(d, "misses", 0)
    seal(d)  # consistent again, but not the manifest the table gathered
    found = manifest.problems(d, expect_sha256=gathered)
    assert len(found) == 1 and found[0].startswith(f"{d}/manifest.json: ") and "since it was gathered" in found[0]


def test_missing_or_corrupt_manifest(tmp_path):
    d = make_run(tmp_path, "main", "pager-lru", 0.5, 1, sealed=False)
    with pytest.raises(manifest.ManifestMissing, match="incomplete"):
        manifest.read(d)
    (d / "manifest.json").write_text("{not json")
    with pytest.raises(manifest.ManifestError, match="manifest.json: unreadable"):
        manifest.read(d)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 2, "files": []}))
    with pytest.raises(manifest.ManifestError, match="not a schema_version 1 manifest"):
        manifest.read(d)


@settings(max_examples=40, deadline=None)
@given(files=st.dictionaries(st.from_regex(r"[a-z]{1,8}\.(bin|json)", fullmatch=True), st.binary(min_size=1, max_size=64),
                             min_size=1, max_size=4),
       pick=st.integers(min_value=0), offset=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_any_single_bit_flip_is_caught(tmp_path_factory, files, pick, offset, bit):
    d = tmp_path_factory.mktemp("run")
    for name, data in files.items():
        (d / name).write_bytes(data)
    manifest.write(d)
    assert manifest.problems(d) == []
    name = sorted(files)[pick % len(files)]
    raw = bytearray(files[name])
    raw[offset % len(raw)] ^= 1 << bit
    (d / name).write_bytes(bytes(raw))
    found = manifest.problems(d)
    assert len(found) == 1 and found[0].startswith(f"{d}/{name}: sha256")


# ---- the harness leaves a manifest; gather carries its digest --------------------------

OUT = "out = sys.argv[sys.argv.index('--out') + 1]\n"
ENGINE_WRITES_RECORD = ("open(os.path.join(out, 'run.json'), 'w').write('{}')\n"
                        "from residency.core import manifest; manifest.write(out)\n")


@pytest.mark.parametrize("body, word", [
    ("pass", "absent"),
    (ENGINE_WRITES_RECORD, "ok"),
    (ENGINE_WRITES_RECORD + "open(os.path.join(out, 'run.json'), 'w').write('{\"x\": 1}')", "mismatch"),
])
def test_harness_writes_the_manifest_last(tmp_path, body, word):
    out = tmp_path / "run"
    rec = harness.run([fake_engine(tmp_path, OUT + body), "--out", str(out)], out, limit_bytes=None, cgroup_mode="off")
    assert rec["engine_manifest"].split(":")[0] == word
    listed = manifest.read(out)
    assert {"harness.json", "residctl.stderr"} <= set(listed)
    assert manifest.problems(out) == []


def test_gather_carries_the_manifest_digest_and_marks_incomplete_runs(tmp_path):
    done = make_run(tmp_path / "runs", "main", "pager-lru", 0.5, 1)
    cut = make_run(tmp_path / "runs", "main", "pager-lru", 0.5, 2, sealed=False)
    out = tmp_path / "t.parquet"
    gather.gather_pager_synthetic([done, cut], region_identity(tmp_path), out)
    rows = {r["rep"]: r for r in pq.read_table(out).to_pylist()}
    assert rows[1]["manifest_sha256"] == sha256_file(done / "manifest.json") and rows[1]["status"] == "ok"
    assert rows[2]["manifest_sha256"] is None and rows[2]["status"] == "incomplete"
    assert rows[2]["error"].startswith("no manifest.json: the run directory is incomplete")
    assert rows[1]["trace_sha256"] == sha256_file(done / "trace.bin")


def test_gather_refuses_a_run_changed_after_it_was_recorded(tmp_path):
    d = make_run(tmp_path / "runs", "main", "pager-lru", 0.5, 1)
    set_counter(d, "misses", 0)
    with pytest.raises(manifest.ManifestError, match=f"^{d}/run.json: .* changed since the run$"):
        gather.gather_pager_synthetic([d], region_identity(tmp_path), tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()


def test_model_and_matched_rows_carry_the_digest(tmp_path):
    runs = [make_model_run(tmp_path / "runs", "baseline", "kernel-mmap", None, 1),
            make_model_run(tmp_path / "runs", "main", "pager-lru", 0.5, 1)]
    ident = tmp_path / "model.json"
    ident.write_text(json.dumps({"name": "tiny", "path": "m.gguf", "sha256": "a" * 64}))
    t = gather.gather_pager_model(runs, runs[0], ident, tmp_path / "m.parquet")
    assert t.column("manifest_sha256").to_pylist() == [sha256_file(r / "manifest.json") for r in runs]
