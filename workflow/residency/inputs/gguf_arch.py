"""Architecture families of the synthetic GGUFs: per family, what one layer holds, how the
output is tied, and the metadata keys the pinned llama.cpp needs to load it.

Each entry was read off the pinned llama.cpp (commit 0c1e5709): the tensors a family's
`load_arch_tensors` creates (src/models/<arch>.cpp; `create_tensor_qkv` in
src/llama-model.cpp takes a fused attn_qkv or split q/k/v with optional biases) and the keys
its `load_arch_hparams` reads. Tensor names come from gguf-py's own table
(`gguf.TENSOR_NAMES`), and every name a family writes is one gguf-py lists for that
architecture (`gguf.MODEL_TENSORS`), which the tests check.

| family   | attention                    | layer extras                                  | FFN                         | output        |
|----------|------------------------------|-----------------------------------------------|-----------------------------|---------------|
| llama    | q, k, v, o                   | -                                             | gate/up/down, or MoE        | tied, untied  |
| qwen2    | q, k, v (+ biases), o        | -                                             | gate/up/down                | tied, untied  |
| qwen3    | q, k, v, o                   | attn_q_norm, attn_k_norm                      | gate/up/down                | tied, untied  |
| gemma2   | q, k, v, o; softcapping; SWA | post_attention_norm, post_ffw_norm            | gate/up/down (GELU)         | tied only     |
| gemma3   | q, k, v, o; SWA interleaved  | q/k norms, post_attention_norm, post_ffw_norm | gate/up/down (GELU)         | tied, untied  |
| phi3     | fused attn_qkv, o            | rope_factors_long/short (shared by all layers)| ffn_up = gate+up fused      | tied, untied  |
| qwen2moe | q, k, v (+ biases), o        | -                                             | MoE + shared expert (gated) | untied only   |
| qwen3moe | q, k, v, o                   | attn_q_norm, attn_k_norm                      | MoE                         | tied, untied  |

gemma2 always reads its output projection from token_embd (an output.weight would be a
tensor llama.cpp does not create: the load fails); qwen2moe requires output.weight. phi3's
rope_factors_short is read by every layer and rope_factors_long by none at a context below
the training context (llama.cpp picks one by context size): a tensor read by several layers
and one loaded but never read. phi3's vocabulary carries <|endoftext|>: for a model named
phi3, llama.cpp's vocabulary loader looks that token up (a vocabulary without it fails to
load with "unordered_map::at").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

VARIANTS = ("dense", "moe", "sparse-moe")
# The variants with experts: `sparse-moe` is a moe whose routes select a small share of many
# experts (the bounded-source campaign's model: its demand is a fraction of its bytes).
MOE_VARIANTS = ("moe", "sparse-moe")
ATTN_SOFTCAP = 50.0   # gemma2's attn_logit_softcapping (as Gemma 2 ships)
FINAL_SOFTCAP = 30.0  # gemma2's final_logit_softcapping
SWA_PATTERN = 2       # gemma3: every second layer global (layer il is SWA when il % 2 == 0)


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]  # ggml order: ne0 (the contiguous row) first
    ggml_type: str           # F32, F16, Q8_0
    fan_in: int              # 0: a norm weight or a rope factor (all ones)


@dataclass(frozen=True)
class Family:
    arch: str                  # general.architecture
    variants: tuple[str, ...]  # dense (one FFN) and/or moe (experts)
    ties: tuple[bool, ...]     # tied_output values llama.cpp loads
    fused_qkv: bool = False    # attn_qkv instead of attn_q/k/v
    attn_bias: bool = False    # attn_{q,k,v}.bias
    qk_norm: bool = False      # attn_q_norm, attn_k_norm
    post_norms: bool = False   # post_attention_norm, post_ffw_norm
    fused_gate_up: bool = False  # ffn_up holds gate and up (2 * n_ff rows), no ffn_gate
    shared_expert: bool = False  # ffn_{gate_inp,gate,up,down}_shexp next to the experts
    rope_factors: bool = False   # rope_factors_long/short (one each, every layer's rope)
    swa: bool = False            # a sliding window (gemma2: every 2nd layer; gemma3: SWA_PATTERN)
    softcap: bool = False        # attention and final logit soft-capping
    gelu: bool = False           # (documentation) the FFN activation llama.cpp uses
    # Control tokens the family's vocabulary must have: llama.cpp's vocabulary loader sets
    # attributes on them by name for models named like the family (phi3: <|endoftext|>).
    controls: tuple[str, ...] = ()


FAMILIES: dict[str, Family] = {f.arch: f for f in (
    Family("llama", VARIANTS, (False, True)),
    Family("qwen2", ("dense",), (False, True), attn_bias=True),
    Family("qwen3", ("dense",), (False, True), qk_norm=True),
    Family("gemma2", ("dense",), (True,), post_norms=True, swa=True, softcap=True, gelu=True),
    Family("gemma3", ("dense",), (False, True), qk_norm=True, post_norms=True, swa=True, gelu=True),
    Family("phi3", ("dense",), (False, True), fused_qkv=True, fused_gate_up=True, rope_factors=True,
           controls=("<|endoftext|>",)),
    Family("qwen2moe", ("moe",), (False,), attn_bias=True, shared_expert=True),
    Family("qwen3moe", ("moe",), (False, True), qk_norm=True),
)}


def family(arch: str) -> Family:
    if arch not in FAMILIES:
        raise KeyError(arch)
    return FAMILIES[arch]


def tensor_name(key: str, bid: int | None = None, suffix: str = "weight") -> str:
    """gguf-py's name of MODEL_TENSOR.<key> (for block `bid`), with its suffix."""
    import gguf

    base = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR[key]]
    return (base.format(bid=bid) if bid is not None else base) + "." + suffix


# ---------------------------------------------------------------------------- tensors

def _attention(f: Family, s, i: int, w: str) -> list[TensorPlan]:
    e, kv, hd = s.n_embd, s.n_embd_kv, s.head_dim
    n = lambda k, suffix="weight": tensor_name(k, i, suffix)  # noqa: E731
    out = [TensorPlan(n("ATTN_NORM"), (e,), "F32", 0)]
    if f.fused_qkv:
        out.append(TensorPlan(n("ATTN_QKV"), (e, e + 2 * kv), w, e))
    else:
        out += [TensorPlan(n("ATTN_Q"), (e, e), w, e), TensorPlan(n("ATTN_K"), (e, kv), w, e),
                TensorPlan(n("ATTN_V"), (e, kv), w, e)]
    if f.attn_bias:
        out += [TensorPlan(n("ATTN_Q", "bias"), (e,), "F32", e), TensorPlan(n("ATTN_K", "bias"), (kv,), "F32", e),
                TensorPlan(n("ATTN_V", "bias"), (kv,), "F32", e)]
    if f.qk_norm:
        out += [TensorPlan(n("ATTN_Q_NORM"), (hd,), "F32", 0), TensorPlan(n("ATTN_K_NORM"), (hd,), "F32", 0)]
    out.append(TensorPlan(n("ATTN_OUT"), (e, e), w, e))
    if f.post_norms:
        out.append(TensorPlan(n("ATTN_POST_NORM"), (e,), "F32", 0))
    return out


def _dense_ffn(f: Family, s, i: int, w: str) -> list[TensorPlan]:
    e, ff = s.n_embd, s.n_ff
    n = lambda k: tensor_name(k, i)  # noqa: E731
    if f.fused_gate_up:
        return [TensorPlan(n("FFN_UP"), (e, 2 * ff), w, e), TensorPlan(n("FFN_DOWN"), (ff, e), w, ff)]
    return [TensorPlan(n("FFN_GATE"), (e, ff), w, e), TensorPlan(n("FFN_UP"), (e, ff), w, e),
            TensorPlan(n("FFN_DOWN"), (ff, e), w, ff)]


def _moe_ffn(f: Family, s, i: int, w: str) -> list[TensorPlan]:
    e, ff, x = s.n_embd, s.n_ff, s.n_expert
    n = lambda k: tensor_name(k, i)  # noqa: E731
    out = [TensorPlan(n("FFN_GATE_INP"), (e, x), "F32", e),
           TensorPlan(n("FFN_GATE_EXP"), (e, ff, x), w, e),
           TensorPlan(n("FFN_UP_EXP"), (e, ff, x), w, e),
           TensorPlan(n("FFN_DOWN_EXP"), (ff, e, x), w, ff)]
    if f.shared_expert:
        sh = s.n_ff_shexp
        out += [TensorPlan(n("FFN_GATE_INP_SHEXP"), (e,), "F32", e),
                TensorPlan(n("FFN_GATE_SHEXP"), (e, sh), w, e), TensorPlan(n("FFN_UP_SHEXP"), (e, sh), w, e),
                TensorPlan(n("FFN_DOWN_SHEXP"), (sh, e), w, sh)]
    return out


def layer_tensors(f: Family, s, i: int) -> list[TensorPlan]:
    """Every tensor of block i, in the order a converter writes them."""
    w = s.tensor_type
    ffn = _moe_ffn(f, s, i, w) if s.variant in MOE_VARIANTS else _dense_ffn(f, s, i, w)
    out = _attention(f, s, i, w) + [TensorPlan(tensor_name("FFN_NORM", i), (s.n_embd,), "F32", 0)] + ffn
    if f.post_norms:
        out.append(TensorPlan(tensor_name("FFN_POST_NORM", i), (s.n_embd,), "F32", 0))
    return out


def tensor_plan(s) -> list[TensorPlan]:
    """Every tensor, in file order: shared rope factors, token_embd, blk.0 .. blk.{n-1},
    output_norm, then output (unless the output is tied to token_embd)."""
    f = family(s.arch)
    plan = []
    if f.rope_factors:
        plan += [TensorPlan(tensor_name(k), (s.head_dim // 2,), "F32", 0)
                 for k in ("ROPE_FACTORS_LONG", "ROPE_FACTORS_SHORT")]
    plan.append(TensorPlan(tensor_name("TOKEN_EMBD"), (s.n_embd, s.n_vocab), s.tensor_type, s.n_embd))
    for i in range(s.n_layer):
        plan += layer_tensors(f, s, i)
    plan.append(TensorPlan(tensor_name("OUTPUT_NORM"), (s.n_embd,), "F32", 0))
    if not s.tied_output:
        plan.append(TensorPlan(tensor_name("OUTPUT"), (s.n_embd, s.n_vocab), s.tensor_type, s.n_embd))
    return plan


# ---------------------------------------------------------------------------- metadata

def _moe_keys(f: Family, s, w) -> None:
    w.add_expert_count(s.n_expert)
    w.add_expert_used_count(s.n_expert_used)
    if f.arch != "llama":  # llama reads the expert FFN size from feed_forward_length
        w.add_expert_feed_forward_length(s.n_ff)
    if f.shared_expert:
        w.add_expert_shared_feed_forward_length(s.n_ff_shexp)


def _swa_keys(f: Family, s, w) -> None:
    w.add_sliding_window(s.sliding_window)
    if f.arch == "gemma3":
        w.add_sliding_window_pattern(SWA_PATTERN)
        w.add_rope_freq_base_swa(s.rope_freq_base)


def arch_keys(s, w) -> None:
    """The family's own metadata keys (the shape keys every family shares are the writer's)."""
    f = family(s.arch)
    if s.variant in MOE_VARIANTS:
        _moe_keys(f, s, w)
    if f.swa:
        _swa_keys(f, s, w)
    if f.softcap:
        w.add_attn_logit_softcapping(ATTN_SOFTCAP)
        w.add_final_logit_softcapping(FINAL_SOFTCAP)


# ---------------------------------------------------------------------------- checks

def check(s, bad: Callable[[str], None]) -> None:
    """Calls bad(message) for a spec this family cannot be written as."""
    if s.arch not in FAMILIES:
        bad(f"unknown architecture {s.arch!r} (one of {', '.join(FAMILIES)})")
        return
    f = FAMILIES[s.arch]
    if s.variant not in f.variants:
        bad(f"architecture {s.arch} has no {s.variant} variant (only {', '.join(f.variants)})")
    if s.tied_output not in f.ties:
        bad(f"architecture {s.arch} loads only {'a tied' if f.ties == (True,) else 'an untied'} output")
    if f.swa and s.sliding_window < 1:
        bad(f"architecture {s.arch} needs sliding_window >= 1")
    if not f.swa and s.sliding_window:
        bad(f"sliding_window only applies to {', '.join(a for a, x in FAMILIES.items() if x.swa)}")
    if f.shared_expert and s.n_ff_shexp < 1:
        bad(f"architecture {s.arch} needs n_ff_shexp >= 1 (the shared expert's FFN size)")
    if not f.shared_expert and s.n_ff_shexp:
        bad("n_ff_shexp only applies to architectures with a shared expert")
    if (f.rope_factors or f.qk_norm) and s.head_dim % 2:
        bad(f"head size {s.head_dim} must be even")
