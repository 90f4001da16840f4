"""The architecture families of the synthetic GGUFs (residency.inputs.gguf_arch): every family,
variant and output tying writes deterministically, with the tensor names gguf-py lists for
that architecture and the metadata keys llama.cpp reads; impossible combinations are
one-line errors; and, where the pipeline has built llama.cpp, each one loads and generates."""

import pytest

from residency.inputs import gguf_arch, gguf_synth
from residency.core.identity import sha256_file

from test_gguf_synth import generate, smoke  # noqa: F401  (the pytest fixture)

SHAPE = dict(n_layer=3, n_embd=64, n_ff=64, n_head=4, n_head_kv=2, n_vocab=320, n_ctx=128, seed=5)
CELLS = [(a, v, t) for a, f in gguf_arch.FAMILIES.items() for v in f.variants for t in f.ties]


def spec(arch, variant="dense", tied=False, **kw):
    f = gguf_arch.family(arch)
    base = dict(SHAPE, arch=arch, variant=variant, tied_output=tied)
    if variant == "moe":
        base.update(n_expert=4, n_expert_used=2)
    if variant == "sparse-moe":  # many experts, few used: the share of a route is small
        base.update(n_expert=16, n_expert_used=2)
    if f.shared_expert:
        base["n_ff_shexp"] = 96
    if f.swa:
        base["sliding_window"] = 4
    base.update(kw)
    return gguf_synth.make_spec(**base)


def read(path):
    import gguf

    r = gguf.GGUFReader(path)
    return r, {t.name: [int(d) for d in t.shape] for t in r.tensors}


def cell_id(c):
    return "-".join([c[0], c[1], "tied" if c[2] else "untied"])


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_every_family_writes_byte_identical_files_with_its_own_tensor_names(tmp_path, cell):
    import gguf

    arch, variant, tied = cell
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    assert gguf_synth.write(spec(*cell), a)["sha256"] == gguf_synth.write(spec(*cell), b)["sha256"] == sha256_file(b)
    r, shapes = read(a)
    assert r.get_field("general.architecture").contents() == arch
    allowed = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH[arch.upper()]]}
    for name in shapes:
        base = name.rsplit(".", 1)[0]
        generic = ".".join(["blk.{bid}", *base.split(".")[2:]]) if base.startswith("blk.") else base
        assert generic in allowed, (arch, name)
    assert ("output.weight" in shapes) is (not tied)
    assert [t.name for t in gguf_arch.tensor_plan(spec(*cell))] == [t.name for t in r.tensors]
    assert sha256_file(a) != gguf_synth.write(spec(*cell, seed=6), tmp_path / "c.gguf")["sha256"]


def test_family_tensors_are_the_ones_llama_cpp_creates(tmp_path):
    _, q2 = read_written(tmp_path, "qwen2")
    assert q2["blk.0.attn_q.bias"] == [64] and q2["blk.0.attn_k.bias"] == [32]
    _, q3 = read_written(tmp_path, "qwen3")
    assert q3["blk.1.attn_q_norm.weight"] == [16] == q3["blk.1.attn_k_norm.weight"]
    _, g2 = read_written(tmp_path, "gemma2", tied=True)
    assert {"blk.2.post_attention_norm.weight", "blk.2.post_ffw_norm.weight"} <= set(g2)
    _, p3 = read_written(tmp_path, "phi3")
    assert p3["blk.0.attn_qkv.weight"] == [64, 64 + 2 * 32] and p3["blk.0.ffn_up.weight"] == [64, 128]
    assert "blk.0.ffn_gate.weight" not in p3 and "blk.0.attn_q.weight" not in p3
    assert p3["rope_factors_long.weight"] == [8] == p3["rope_factors_short.weight"]
    _, qm = read_written(tmp_path, "qwen2moe", variant="moe")
    assert qm["blk.0.ffn_gate_exps.weight"] == [64, 64, 4] and qm["blk.0.ffn_gate_inp_shexp.weight"] == [64]
    assert qm["blk.0.ffn_down_shexp.weight"] == [96, 64]


def read_written(tmp_path, arch, variant="dense", tied=False):
    p = tmp_path / f"{arch}-{variant}-{tied}.gguf"
    gguf_synth.write(spec(arch, variant, tied), p)
    return read(p)


def test_family_metadata_keys(tmp_path):
    r, _ = read_written(tmp_path, "gemma2", tied=True)
    f = lambda k: r.get_field(k).contents()  # noqa: E731
    assert f("gemma2.attention.sliding_window") == 4
    assert f("gemma2.attn_logit_softcapping") == gguf_arch.ATTN_SOFTCAP
    assert f("gemma2.final_logit_softcapping") == gguf_arch.FINAL_SOFTCAP
    r, _ = read_written(tmp_path, "gemma3")
    assert f("gemma3.attention.sliding_window_pattern") == gguf_arch.SWA_PATTERN
    r, _ = read_written(tmp_path, "qwen2moe", variant="moe")
    assert (f("qwen2moe.expert_count"), f("qwen2moe.expert_used_count")) == (4, 2)
    assert f("qwen2moe.expert_feed_forward_length") == 64
    assert f("qwen2moe.expert_shared_feed_forward_length") == 96
    r, _ = read_written(tmp_path, "phi3")
    tokens, types = f("tokenizer.ggml.tokens"), f("tokenizer.ggml.token_type")
    assert tokens[-1] == "<|endoftext|>" and types[-1] == 3  # CONTROL, where Phi-3 keeps it
    assert len(tokens) == len(set(tokens)) == SHAPE["n_vocab"]


@pytest.mark.parametrize("kw, needle", [
    (dict(arch="gemma2", tied=False), "architecture gemma2 loads only a tied output"),
    (dict(arch="qwen2moe", variant="moe", tied=True), "architecture qwen2moe loads only an untied output"),
    (dict(arch="qwen2", variant="moe"), "architecture qwen2 has no moe variant (only dense)"),
    (dict(arch="gemma3", sliding_window=0), "architecture gemma3 needs sliding_window >= 1"),
    (dict(arch="qwen3", sliding_window=4), "sliding_window only applies to gemma2, gemma3"),
    (dict(arch="qwen2moe", variant="moe", n_ff_shexp=0), "needs n_ff_shexp >= 1"),
    (dict(arch="mamba"), "unknown architecture 'mamba'"),
])
def test_impossible_families_are_one_line_errors(kw, needle):
    with pytest.raises(gguf_synth.SpecError) as info:
        a = kw.pop("arch")
        if a == "mamba":
            gguf_synth.make_spec(**SHAPE, arch=a, variant="dense")
        else:
            spec(a, kw.pop("variant", "dense"), kw.pop("tied", False), **kw)
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_every_family_loads_and_generates_in_pinned_llama_cpp(smoke, tmp_path, cell):  # noqa: F811
    s = spec(*cell)
    p = tmp_path / "m.gguf"
    gguf_synth.write(s, p)
    out = generate(smoke, p, prompt="the quick brown fox", n=4)
    assert out["n_vocab"] == s.n_vocab and len(out["generated"]) == 4
    assert all(0 <= t < s.n_vocab for t in out["generated"])
