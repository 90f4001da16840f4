"""Synthetic llama GGUFs: byte-identical from the same spec and seed, the MoE tensors at the
shapes llama.cpp's llama architecture loads, a usable tokenizer, finite small weights, one-line
errors for impossible shapes; the llama.cpp pin (sdist digest, extraction, build flags,
user checkouts); and, where the pipeline has built llama.cpp, that the models load and
generate with it."""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import yaml

from residency.inputs import gguf_synth, llama_build, models
from residency.core.identity import sha256_file

from conftest import ROOT

SMALL = dict(n_layer=2, n_embd=64, n_ff=96, n_head=4, n_head_kv=2, n_vocab=320, n_ctx=128, seed=3)
MOE = dict(SMALL, n_ff=64, n_expert=4, n_expert_used=2)
SMALL_SHAPE = {k: v for k, v in SMALL.items() if k != "seed"}


def spec(variant="dense", **kw):
    base = dict(MOE if variant == "moe" else SMALL)
    base.update(kw)
    return gguf_synth.make_spec(variant=variant, **base)


def reader(path):
    import gguf

    return gguf.GGUFReader(path)


def field(r, key):
    return r.get_field(key).contents()


# ---------------------------------------------------------------------------- determinism

@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_same_spec_and_seed_give_identical_bytes(tmp_path, variant):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    ra = gguf_synth.write(spec(variant), a)
    rb = gguf_synth.write(spec(variant), b)
    assert a.read_bytes() == b.read_bytes()
    assert ra["sha256"] == rb["sha256"] == sha256_file(a)
    c = tmp_path / "c.gguf"
    gguf_synth.write(spec(variant, seed=4), c)
    assert sha256_file(c) != ra["sha256"] and c.stat().st_size == a.stat().st_size


def test_each_tensor_type_writes_and_differs(tmp_path):
    sizes = {}
    for t in gguf_synth.TENSOR_TYPES:
        p = tmp_path / f"{t}.gguf"
        gguf_synth.write(spec(tensor_type=t), p)
        r = reader(p)
        types = {x.name: x.tensor_type.name for x in r.tensors}
        assert types["blk.0.attn_q.weight"] == t and types["blk.0.attn_norm.weight"] == "F32"
        sizes[t] = p.stat().st_size
    assert sizes["F32"] > sizes["F16"] > sizes["Q8_0"]


def test_alignment_is_honoured(tmp_path):
    p = tmp_path / "al.gguf"
    gguf_synth.write(spec(alignment=4096), p)
    doc = models.inventory_doc(p)
    assert doc["alignment"] == 4096
    assert all(t["offset"] % 4096 == 0 for t in doc["tensors"])


# ---------------------------------------------------------------------------- structure

def test_moe_tensors_and_metadata(tmp_path):
    s = spec("moe")
    p = tmp_path / "moe.gguf"
    gguf_synth.write(s, p)
    r = reader(p)
    shapes = {t.name: [int(d) for d in t.shape] for t in r.tensors}
    e, f, x = s.n_embd, s.n_ff, s.n_expert
    for i in range(s.n_layer):
        b = f"blk.{i}."
        assert shapes[b + "ffn_gate_inp.weight"] == [e, x]
        assert shapes[b + "ffn_gate_exps.weight"] == [e, f, x]
        assert shapes[b + "ffn_up_exps.weight"] == [e, f, x]
        assert shapes[b + "ffn_down_exps.weight"] == [f, e, x]
        assert shapes[b + "attn_k.weight"] == [e, s.n_embd_kv]
        assert b + "ffn_gate.weight" not in shapes and b + "ffn_up.weight" not in shapes
    assert field(r, "general.architecture") == "llama"
    assert field(r, "llama.expert_count") == x and field(r, "llama.expert_used_count") == s.n_expert_used
    assert field(r, "llama.block_count") == s.n_layer
    assert field(r, "llama.feed_forward_length") == f


def test_dense_tensors(tmp_path):
    s = spec("dense")
    p = tmp_path / "dense.gguf"
    gguf_synth.write(s, p)
    r = reader(p)
    shapes = {t.name: [int(d) for d in t.shape] for t in r.tensors}
    assert shapes["token_embd.weight"] == [s.n_embd, s.n_vocab] == shapes["output.weight"]
    assert shapes["blk.1.ffn_down.weight"] == [s.n_ff, s.n_embd]
    assert not any("exps" in n or "gate_inp" in n for n in shapes)
    assert r.get_field("llama.expert_count") is None
    assert len(shapes) == 3 + 9 * s.n_layer


def test_tokenizer_is_a_complete_spm_vocabulary(tmp_path):
    s = spec()
    p = tmp_path / "t.gguf"
    gguf_synth.write(s, p)
    r = reader(p)
    assert field(r, "tokenizer.ggml.model") == "llama"
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    scores = field(r, "tokenizer.ggml.scores")
    assert len(tokens) == len(types) == len(scores) == s.n_vocab
    assert len(set(tokens)) == s.n_vocab
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert tokens[3 + 0x0A] == "<0x0A>" and types[3 + 0x0A] == 6  # byte fallback for "\n"
    assert all(types[3 + b] == 6 for b in range(256))
    assert "\u2581" in tokens and "a" in tokens
    assert (field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")) == (1, 2)


def test_weights_are_small_and_finite(tmp_path):
    import gguf

    s = spec("moe")
    p = tmp_path / "w.gguf"
    gguf_synth.write(s, p)
    for t in reader(p).tensors:
        v = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type) if t.tensor_type.name == "Q8_0" \
            else np.asarray(t.data, dtype=np.float32)
        assert np.isfinite(v).all(), t.name
        if "norm" in t.name:
            assert np.all(v == 1.0), t.name
        else:
            fan_in = int(t.shape[0])
            assert np.abs(v).max() <= np.sqrt(3.0 / fan_in) * 1.01, t.name
            assert np.abs(v).mean() > 0.1 * np.sqrt(3.0 / fan_in), t.name  # not all zeros


@pytest.mark.parametrize("kw, needle", [
    (dict(n_head=5), "n_embd 64 is not a multiple of n_head 5"),
    (dict(n_head_kv=3), "n_head 4 is not a multiple of n_head_kv 3"),
    (dict(n_ff=100), "n_ff 100 must be a multiple of 32 for Q8_0 rows"),
    (dict(n_vocab=100), "n_vocab 100 is below 260"),
    (dict(tensor_type="Q4_0"), "tensor_type 'Q4_0' is not one of F32, F16, Q8_0"),
    (dict(alignment=48), "alignment 48 must be a power of two"),
    (dict(n_expert=4), "only apply to the moe variant"),
])
def test_impossible_shapes_are_one_line_errors(kw, needle):
    with pytest.raises(gguf_synth.SpecError) as info:
        spec(**kw)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_moe_needs_experts():
    with pytest.raises(gguf_synth.SpecError, match="n_expert_used must be in 1..n_expert"):
        spec("moe", n_expert_used=5)


def test_default_and_paper_configs_describe_loadable_models():
    for name, limit in (("config.yaml", 64 << 20), ("paper.yaml", 4 << 30)):
        syn = yaml.safe_load((ROOT / "config" / name).read_text())["models"]["synthetic"]
        for variant in gguf_synth.VARIANTS:
            s = gguf_synth.spec_from_config(syn, variant)
            size = sum(gguf_synth._nbytes(t) for t in gguf_synth.tensor_plan(s))
            assert 0 < size < limit, (name, variant, size)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "residency.inputs.models_cli", "model", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_synth_cli(tmp_path):
    syn = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["models"]["synthetic"]
    syn = dict(syn, dense=dict(SMALL_SHAPE))
    out, ident = tmp_path / "d.gguf", tmp_path / "d.json"
    r = run_cli("synth", "--variant", "dense", "--spec", json.dumps(syn), "--out", str(out), "--identity", str(ident))
    assert r.returncode == 0, r.stderr
    rec = json.loads(ident.read_text())
    assert rec["sha256"] == sha256_file(out) and rec["spec"]["n_layer"] == SMALL["n_layer"]
    assert rec["source"] == "synthetic" and rec["gguf_package"]
    bad = dict(syn, dense=dict(SMALL_SHAPE, n_head=5))
    r = run_cli("synth", "--variant", "dense", "--spec", json.dumps(bad), "--out", str(tmp_path / "x.gguf"))
    assert r.returncode == 1 and not (tmp_path / "x.gguf").exists()
    assert r.stderr.strip().splitlines() == [
        "synthetic model (dense): n_embd 64 is not a multiple of n_head 5"]



# ---------------------------------------------------------------------------- llama.cpp pin

def fake_sdist(path, top="llama_cpp_python-9.9.9", head=None):
    files = {
        f"{top}/pyproject.toml": b"[project]\n",
        f"{top}/vendor/llama.cpp/CMakeLists.txt": b"project(x)\n",
        f"{top}/vendor/llama.cpp/include/llama.h": b"/* h */\n",
        f"{top}/vendor/llama.cpp/ggml/CMakeLists.txt": b"# ggml\n",
        f"{top}/vendor/llama.cpp/src/llama.cpp": b"// src\n",
    }
    if head:
        files[f"{top}/.git/modules/vendor/llama.cpp/HEAD"] = head.encode() + b"\n"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_extract_vendor_checks_the_digest_and_takes_only_llama_cpp(tmp_path):
    sd = tmp_path / "s.tar.gz"
    digest = fake_sdist(sd)
    src = tmp_path / "src"
    with pytest.raises(llama_build.LlamaBuildError, match=f"sha256 mismatch: expected {'0' * 64} got {digest}"):
        llama_build.extract_vendor(sd, "0" * 64, src)
    assert not src.exists()
    assert llama_build.extract_vendor(sd, digest, src) == (src, None)
    assert (src / "include" / "llama.h").read_bytes() == b"/* h */\n"
    assert not (src / "pyproject.toml").exists() and not (src / "vendor").exists()
    marker = src / llama_build.MARKER
    mtime = marker.stat().st_mtime_ns
    llama_build.extract_vendor(sd, digest, src)  # cached: not extracted again
    assert marker.stat().st_mtime_ns == mtime


def test_extract_vendor_checks_the_vendored_commit(tmp_path):
    head = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    sd = tmp_path / "s.tar.gz"
    digest = fake_sdist(sd, head=head)
    with pytest.raises(llama_build.LlamaBuildError, match=f"vendors llama.cpp {head}, but llama.commit is 1234567"):
        llama_build.extract_vendor(sd, digest, tmp_path / "a", "1234567")
    assert not (tmp_path / "a").exists()
    assert llama_build.extract_vendor(sd, digest, tmp_path / "b", head[:12]) == (tmp_path / "b", head)
    with pytest.raises(llama_build.LlamaBuildError, match="but llama.commit is 1234567"):
        llama_build.extract_vendor(sd, digest, tmp_path / "b", "1234567")  # the cached path checks too


def test_cmake_args_build_only_what_the_engine_needs():
    args = llama_build.cmake_args("/p", "Release", False, "abc1234", ["-DGGML_AVX2=ON"])
    for flag in ("-DBUILD_SHARED_LIBS=OFF", "-DGGML_OPENMP=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                 "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                 "-DLLAMA_BUILD_COMMON=OFF", "-DGGML_NATIVE=OFF", "-DCMAKE_BUILD_TYPE=Release",
                 "-DLLAMA_BUILD_COMMIT=abc1234", "-DCMAKE_INSTALL_LIBDIR=lib"):
        assert flag in args
    assert args[-1] == "-DGGML_AVX2=ON"


def test_user_checkout_commit(tmp_path):
    with pytest.raises(llama_build.LlamaBuildError, match="not a llama.cpp source tree"):
        llama_build.user_checkout(tmp_path, "abc1234")
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "llama.h").write_text("/* */\n")
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    rec = llama_build.user_checkout(tmp_path, "abc1234")
    assert rec["commit"] == "abc1234" and rec["commit_from"] == "config"
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(tmp_path), *cmd], check=True, env=env, capture_output=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    rec = llama_build.user_checkout(tmp_path, "abc1234")
    assert rec["commit"] == head and rec["commit_from"] == "git" and rec["dirty"] is False
    (tmp_path / "CMakeLists.txt").write_text("project(y)\n")
    assert llama_build.user_checkout(tmp_path, "abc1234")["dirty"] is True


# ---------------------------------------------------------------------------- in llama.cpp

def llama_prefix():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["llama"]
    return ROOT / cfg["build_dir"] / "install"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    prefix = llama_prefix()
    ident = prefix / "llama-identity.json"
    if not ident.is_file():
        pytest.skip(f"[llama] llama.cpp is not built here ({ident} missing; `snakemake --cores 2 llama` builds it)")
    cc, cxx = shutil.which("cc") or shutil.which("gcc"), shutil.which("c++") or shutil.which("g++")
    if not cc or not cxx:
        pytest.skip("no C/C++ compiler")
    rec = json.loads(ident.read_text())
    d = tmp_path_factory.mktemp("smoke")
    obj, exe = d / "smoke.o", d / "smoke"
    subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Werror", "-c", str(ROOT / "tests" / "llama_smoke.c"),
                    "-I", str(prefix / "include"), "-o", str(obj)], check=True)
    libs = [str(prefix / "lib" / x) for x in rec["static_libs"]]
    subprocess.run([cxx, str(obj), *libs, *rec["system_libs"], "-o", str(exe)], check=True)
    return exe


def generate(exe, model, prompt="The capital of France is", n=8):
    r = subprocess.run([str(exe), str(model), prompt, str(n)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    # random models emit byte tokens that are not UTF-8 on their own
    return json.loads(r.stdout.decode("utf-8", errors="replace"))


@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_synthetic_models_load_and_generate_in_pinned_llama_cpp(smoke, tmp_path, variant):
    s = spec(variant)
    p = tmp_path / f"{variant}.gguf"
    gguf_synth.write(s, p)
    out = generate(smoke, p)
    assert out["n_vocab"] == s.n_vocab
    assert out["prompt_tokens"][0] == 1  # <s>
    assert len(out["generated"]) == 8 and all(0 <= t < s.n_vocab for t in out["generated"])
    assert generate(smoke, p) == out  # greedy decoding is deterministic


def test_smollm2_generates_text(smoke):
    p = ROOT / "results" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not p.is_file():
        pytest.skip(f"[llama] {p} not fetched (`snakemake --cores 1 llm_models`)")
    out = generate(smoke, p, n=6)
    assert out["n_vocab"] == 49152
    assert "Paris" in out["text"], out
