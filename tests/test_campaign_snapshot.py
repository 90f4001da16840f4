"""The tiny campaign's snapshot (tests/campaign_snapshot.py): its key follows every input, an
unfinished copy is never found, and only the newest key is kept."""

import subprocess
from pathlib import Path

import pytest

import campaign_snapshot as snap


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git checkout with the pipeline's sources, a built engine and a llama identity."""
    root = tmp_path / "repo"
    for rel in ("Snakefile", "workflow/rules/a.smk", "config/config.yaml", "engine/src/x.cpp", "tests/conftest.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / ".gitignore").write_text("/.build/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    build = root / ".build" / "engine-test"
    build.mkdir(parents=True)
    (build / "residctl").write_bytes(b"engine v1")
    llama = root / ".build" / "llama.cpp" / "install"
    llama.mkdir(parents=True)
    (llama / "llama-identity.json").write_text("{}")
    monkeypatch.setattr(snap, "ROOT", root)
    monkeypatch.setattr(snap, "STORE", root / ".build" / "tiny-campaign")
    cfg = {"llama": {"build_dir": str(root / ".build" / "llama.cpp")}, "seed": 7}
    return root, cfg, str(build)


def test_the_key_follows_sources_untracked_files_the_engine_and_the_config(checkout):
    root, cfg, engine = checkout
    first = snap.key(cfg, engine)
    assert first == snap.key(cfg, engine)
    (root / "workflow" / "rules" / "a.smk").write_text("changed")
    second = snap.key(cfg, engine)
    (root / "workflow" / "new.py").write_text("untracked, not ignored")
    third = snap.key(cfg, engine)
    (Path(engine) / "residctl").write_bytes(b"engine v2")
    fourth = snap.key(cfg, engine)
    fifth = snap.key({**cfg, "seed": 8}, engine)
    assert len({first, second, third, fourth, fifth}) == 5
    (root / ".build" / "ignored.txt").write_text("outside the sources")
    assert snap.key({**cfg, "seed": 8}, engine) == fifth


def test_no_key_outside_a_git_checkout(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "ROOT", tmp_path)
    assert snap.key({"llama": {"build_dir": str(tmp_path)}}, str(tmp_path)) is None
    assert snap.find(None) is None


def test_publish_then_find_keeps_only_the_newest_key(checkout, tmp_path):
    root, cfg, engine = checkout
    work = tmp_path / "pipeline0"
    (work / "claims").mkdir(parents=True)
    (work / "claims" / "P1.json").write_text('{"verdict": "pass"}')
    (work / "engine").symlink_to(root / "engine")
    old = snap.key(cfg, engine)
    snap.publish(old, work)
    kept = snap.find(old)
    assert kept and (kept / "claims" / "P1.json").read_text() == '{"verdict": "pass"}'
    assert (kept / "engine").is_symlink()
    new = snap.key({**cfg, "seed": 9}, engine)
    assert snap.find(new) is None
    snap.publish(new, work)
    assert snap.find(new) and snap.find(old) is None
    assert sorted(p.name for p in snap.STORE.iterdir()) == [new]


def test_a_copy_without_its_done_stamp_is_not_a_snapshot(checkout):
    root, cfg, engine = checkout
    k = snap.key(cfg, engine)
    (snap.STORE / k / "pipeline").mkdir(parents=True)  # a copy interrupted before its stamp
    assert snap.find(k) is None
