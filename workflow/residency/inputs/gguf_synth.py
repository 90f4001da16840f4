"""Synthetic GGUF models of the architecture families the pinned llama.cpp loads, written
from a fixed seed.

`arch` picks the family (`gguf_arch.FAMILIES`: llama, qwen2, qwen3, gemma2, gemma3, phi3,
qwen2moe, qwen3moe: their tensors and metadata keys, read off llama.cpp commit 0c1e5709),
`variant` the FFN: `dense` (one FFN per layer) or `moe` (ffn_gate_inp plus the stacked
ffn_{gate,up,down}_exps tensors, as Mixtral; qwen2moe adds a shared expert), and
`tied_output` whether the output projection is token_embd (no output.weight). The default,
`arch = "llama"` untied, is the llama model the pipeline has always written.

The files carry a minimal but complete SentencePiece ("llama") tokenizer (llama.cpp's
vocabulary loader does not depend on the architecture, so every family takes it): <unk>, <s>,
</s>, the 256 byte tokens <0x00>..<0xFF> (so any text tokenizes by byte fallback), then
"▁", printable ASCII and short lowercase pieces until n_vocab, with scores. Weights are
uniform in +-sqrt(3/fan_in) (norms are 1), so activations and logits stay finite.

Determinism: every tensor's values come from the raw 64-bit output of a PCG64 bit
generator seeded with SeedSequence([seed, crc32(tensor name)]). The raw streams of numpy's
bit generators are fixed algorithms (unlike its distribution methods), so the same spec
and seed give a byte-identical file for a given `gguf` package version (recorded in the
identity). Tensors are written one at a time, so memory stays at one tensor.
"""

from __future__ import annotations

import itertools
import json
import string
import zlib
from dataclasses import asdict, dataclass
from importlib.metadata import version as _pkg_version
from pathlib import Path
from typing import Iterator

import numpy as np

from residency.core import atomic
from residency.inputs import gguf_arch
from residency.inputs.gguf_arch import TensorPlan
from residency.core.identity import digest, sha256_file

VARIANTS = gguf_arch.VARIANTS
ARCHS = tuple(gguf_arch.FAMILIES)
TENSOR_TYPES = ("F32", "F16", "Q8_0")
N_SPECIAL = 3  # <unk>, <s>, </s>
N_BYTE = 256
MIN_VOCAB = N_SPECIAL + N_BYTE + 1  # + "▁" (+ a family's control tokens)
SPM_SPACE = "\u2581"


class SpecError(ValueError):
    """An impossible model shape; the message is one line."""


@dataclass(frozen=True)
class Spec:
    variant: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_vocab: int
    n_ctx: int
    seed: int
    tensor_type: str = "Q8_0"
    alignment: int = 32
    n_expert: int = 0
    n_expert_used: int = 0
    rope_freq_base: float = 10000.0
    rms_eps: float = 1e-5
    arch: str = "llama"         # general.architecture: a gguf_arch family
    tied_output: bool = False   # the output projection is token_embd (no output.weight)
    n_ff_shexp: int = 0         # the shared expert's FFN size (qwen2moe)
    sliding_window: int = 0     # the sliding-window attention span in tokens (gemma2, gemma3)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_embd_kv(self) -> int:
        return self.head_dim * self.n_head_kv


def spec_from_config(models_synthetic: dict, variant: str) -> Spec:
    """The Spec for `variant` from the config's `models.synthetic` section."""
    if variant not in VARIANTS:
        raise SpecError(f"synthetic model: unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    shape = dict(models_synthetic[variant])
    return make_spec(variant=variant, seed=models_synthetic["seed"],
                     tensor_type=models_synthetic["tensor_type"],
                     alignment=models_synthetic["alignment"], **shape)


def make_spec(**kw) -> Spec:
    try:
        spec = Spec(**kw)
    except TypeError as exc:
        raise SpecError(f"synthetic model: {exc}") from None
    check(spec)
    return spec


def check(s: Spec) -> None:
    """Raise SpecError (one line) unless llama.cpp can load a model of this shape."""
    def bad(msg):
        raise SpecError(f"synthetic model ({s.variant if s.arch == 'llama' else s.arch + ' ' + s.variant}): {msg}")

    if s.variant not in VARIANTS:
        bad(f"unknown variant {s.variant!r}")
    gguf_arch.check(s, bad)
    if s.tensor_type not in TENSOR_TYPES:
        bad(f"tensor_type {s.tensor_type!r} is not one of {', '.join(TENSOR_TYPES)}")
    for k in ("n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "n_ctx"):
        if not isinstance(getattr(s, k), int) or getattr(s, k) < 1:
            bad(f"{k} must be a positive integer")
    if s.n_layer > 512:
        bad("n_layer must be at most 512 (LLAMA_MAX_LAYERS)")
    if s.n_embd % s.n_head:
        bad(f"n_embd {s.n_embd} is not a multiple of n_head {s.n_head}")
    if s.head_dim % 2:
        bad(f"head size n_embd/n_head = {s.head_dim} must be even (rotary embedding)")
    if s.n_head % s.n_head_kv:
        bad(f"n_head {s.n_head} is not a multiple of n_head_kv {s.n_head_kv}")
    controls = len(gguf_arch.family(s.arch).controls)
    if s.n_vocab < MIN_VOCAB + controls:
        bad(f"n_vocab {s.n_vocab} is below {MIN_VOCAB + controls} (3 special + 256 byte tokens + 1"
            + (f" + {controls} control" if controls else "") + ")")
    if s.tensor_type == "Q8_0":
        for k in ("n_embd", "n_ff"):
            if getattr(s, k) % 32:
                bad(f"{k} {getattr(s, k)} must be a multiple of 32 for Q8_0 rows")
    if s.alignment < 8 or s.alignment & (s.alignment - 1):
        bad(f"alignment {s.alignment} must be a power of two >= 8")
    if s.seed < 0:
        bad("seed must be >= 0")
    if s.variant in gguf_arch.MOE_VARIANTS:
        if not 2 <= s.n_expert <= 512:
            bad("n_expert must be in 2..512")
        if not 1 <= s.n_expert_used <= s.n_expert:
            bad(f"n_expert_used must be in 1..n_expert ({s.n_expert})")
    elif s.n_expert or s.n_expert_used:
        bad("n_expert/n_expert_used only apply to the moe variants")


# ---------------------------------------------------------------------------- tokenizer

def vocabulary(n_vocab: int, controls: tuple[str, ...] = ()) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of the synthetic SentencePiece vocabulary; `controls`
    (a family's own control tokens, gguf_arch.Family.controls) take the last ids, where the
    real models keep their added tokens."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(N_BYTE)]
    types += [gguf.TokenType.BYTE] * N_BYTE
    scores = [0.0] * len(tokens)
    for rank, piece in zip(range(n_vocab - len(tokens) - len(controls)), _pieces()):
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(rank))
    tokens += list(controls)
    types += [gguf.TokenType.CONTROL] * len(controls)
    scores += [0.0] * len(controls)
    return tokens, scores, [int(t) for t in types]


def _pieces() -> Iterator[str]:
    """"▁", printable ASCII, then "▁"+lowercase words and bare lowercase words by length."""
    yield SPM_SPACE
    yield from (c for c in string.printable[:94] if not c.isspace())
    for n in itertools.count(1):
        for letters in itertools.product(string.ascii_lowercase, repeat=n):
            yield SPM_SPACE + "".join(letters)
        if n >= 2:
            for letters in itertools.product(string.ascii_lowercase, repeat=n):
                yield "".join(letters)


# ---------------------------------------------------------------------------- tensors

def tensor_plan(s: Spec) -> list[TensorPlan]:
    """Every tensor, in file order (gguf_arch.tensor_plan: the family's tensors)."""
    return gguf_arch.tensor_plan(s)


def _nbytes(t: TensorPlan) -> int:
    import gguf

    n = int(np.prod(t.shape))
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t.ggml_type]]
    return n // block * size


def _values(seed: int, t: TensorPlan) -> np.ndarray:
    """float32 values in numpy order (reversed ggml shape), deterministic in (seed, name)."""
    np_shape = tuple(reversed(t.shape))
    if t.fan_in == 0:
        return np.ones(np_shape, dtype=np.float32)
    ss = np.random.SeedSequence([seed, zlib.crc32(t.name.encode())])
    raw = np.random.PCG64(ss).random_raw(int(np.prod(np_shape)))
    unit = (raw >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)  # [0, 1), exact
    scale = np.float32(np.sqrt(3.0 / t.fan_in))
    return ((unit * np.float32(2.0) - np.float32(1.0)) * scale).reshape(np_shape)


def _encode(values: np.ndarray, ggml_type: str) -> np.ndarray:
    import gguf

    if ggml_type == "F32":
        return values
    if ggml_type == "F16":
        return values.astype(np.float16)
    return gguf.quants.quantize(values, gguf.GGMLQuantizationType[ggml_type])


# ---------------------------------------------------------------------------- writer

_FILE_TYPE = {"F32": "ALL_F32", "F16": "MOSTLY_F16", "Q8_0": "MOSTLY_Q8_0"}


def model_name(spec: Spec) -> str:
    """general.name: residency-synthetic-<variant> for llama (as always), else with the family."""
    fam = "" if spec.arch == "llama" else f"{spec.arch}-"
    return f"residency-synthetic-{fam}{spec.variant}" + ("-tied" if spec.tied_output else "")


def _header(w, spec: Spec) -> None:
    """general.* and the shape keys every family reads, then the family's own (gguf_arch)."""
    import gguf

    w.add_name(model_name(spec))
    w.add_description(f"synthetic {spec.variant} {spec.arch} model, seed {spec.seed}, "
                      "written by residency.inputs.gguf_synth; random weights, no real model")
    w.add_custom_alignment(spec.alignment)
    w.add_file_type(int(gguf.LlamaFileType[_FILE_TYPE[spec.tensor_type]]))
    if spec.tensor_type not in ("F32", "F16"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(spec.n_vocab)
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_rope_freq_base(spec.rope_freq_base)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    gguf_arch.arch_keys(spec, w)


def _tokenizer(w, spec: Spec) -> None:
    tokens, scores, types = vocabulary(spec.n_vocab, gguf_arch.family(spec.arch).controls)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def _tensors(w, spec: Spec, plan: list[TensorPlan]) -> None:
    """The tensor table, then each tensor's data (one tensor in memory at a time)."""
    import gguf

    for t in plan:
        qtype = gguf.GGMLQuantizationType[t.ggml_type]
        w.add_tensor_info(t.name, tuple(reversed(t.shape)), np.dtype(np.float32), _nbytes(t), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in plan:
        data = _encode(_values(spec.seed, t), t.ggml_type)
        if data.nbytes != _nbytes(t):
            raise AssertionError(f"{t.name}: encoded {data.nbytes} bytes, planned {_nbytes(t)}")
        w.write_tensor_data(data)


def write(spec: Spec, out: str | Path) -> dict:
    """Write the model atomically to `out`; return its identity record."""
    import gguf

    check(spec)
    out = Path(out)
    with atomic.atomic_path(out, suffix=".gguf") as tmp:
        w = gguf.GGUFWriter(tmp, spec.arch)
        _header(w, spec)
        _tokenizer(w, spec)
        _tensors(w, spec, tensor_plan(spec))
        w.close()
    return identity(spec, out)


def identity(spec: Spec, path: str | Path) -> dict:
    p = Path(path)
    return {
        "path": str(p),
        "bytes": p.stat().st_size,
        "sha256": sha256_file(p),
        "source": "synthetic",
        "license": "none (synthetic weights)",
        "generator": "residency.inputs.gguf_synth",
        "gguf_package": _pkg_version("gguf"),
        "spec": asdict(spec),
        "spec_digest": digest(asdict(spec)),
    }


def write_with_identity(spec: Spec, out: str | Path, identity_out: str | Path) -> dict:
    rec = write(spec, out)
    atomic.write_json(identity_out, rec)
    return rec


def spec_from_json(text: str, variant: str) -> Spec:
    """`--spec` on the CLI: the `models.synthetic` section as JSON (seed, tensor_type,
    alignment and the per-variant shapes)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"synthetic model: --spec is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SpecError("synthetic model: --spec must be a JSON object")
    try:
        return spec_from_config(doc, variant)
    except KeyError as exc:
        raise SpecError(f"synthetic model: --spec lacks {exc.args[0]!r}") from None
