"""Fuzz properties of the pipeline's readers of files (docs/testing.md, "Fuzzing"): trace.bin,
the model inventory (a GGUF's header), run.json / harness.json / objects.json on gather, and
the config. Each is fed real-looking files (made like the engine's: tests/fixtures.py, the
pipeline's own GGUF writer, config/config.yaml) with a few of their values replaced, keys
deleted, or their bytes cut or flipped, and must either read them or raise its documented
clean error with a one-line message; any other exception is a finding. The engine's parsers
have libFuzzer targets (engine/fuzz/, `make fuzz`)."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import make_model_run, make_run, seal
from residency.core import config, manifest, trace
from residency.gather import pager as gather, base as gather_base
from residency.inputs import gguf_synth, models

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GATHER_FUZZ = settings(FUZZ, max_examples=80)  # each example writes and seals a run directory


def clean(errors: tuple[type[BaseException], ...], fn, *args):
    """fn(*args), or one of `errors` with a one-line message; anything else fails."""
    try:
        return fn(*args)
    except errors as exc:
        msg = str(exc)
        assert msg and "\n" not in msg, f"{type(exc).__name__} message is not one line: {msg!r}"
        return None


# ---- JSON documents with a few values replaced or keys deleted ------------------------------

SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True)
           | st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                      max_leaves=6)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw, doc):
    """`doc` with one to three values replaced (the whole document included) or deleted."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(sorted(_paths(doc), key=repr)))
        if not path:
            doc = draw(VALUES)
            continue
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(VALUES)
    return doc


@st.composite
def json_text(draw, doc):
    """A mutated document as text, sometimes cut short (then not JSON)."""
    text = json.dumps(draw(mutated(doc)))
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


# ---- trace.bin ------------------------------------------------------------------------------

def _real_trace() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        return (make_run(Path(d), "main", "pager-lru", 0.5, 0, chunks=4, passes=2) / "trace.bin").read_bytes()


TRACE = _real_trace()


@st.composite
def trace_bytes(draw):
    raw = bytearray(TRACE)
    for _ in range(draw(st.integers(0, 4))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):  # the header's sizes, any value
        raw[16:32] = draw(st.binary(min_size=16, max_size=16))
    if draw(st.integers(0, 3)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw + draw(st.binary(max_size=40)))


@FUZZ
@given(trace_bytes() | st.binary(max_size=80))
def test_trace_reader_reads_or_says_why(raw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "trace.bin"
        p.write_bytes(raw)
        tr = clean((trace.TraceError,), trace.read, p)
    if tr is None:
        return
    assert len(tr.records) == (len(raw) - 32) // 16
    # What gather and the analyses read of a trace that parsed.
    tr.reference(), tr.reference_steps(), tr.outcomes_sha256()
    acc = tr.accesses
    int((acc["step"] >= tr.chunks).sum())


# ---- the model inventory (residency model inventory) --------------------------------------

def _real_gguf() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        spec = gguf_synth.make_spec(variant="dense", seed=3, n_layer=1, n_embd=32, n_ff=64, n_head=2, n_head_kv=1,
                                     n_vocab=260, n_ctx=16)
        gguf_synth.write(spec, Path(d) / "m.gguf")
        return (Path(d) / "m.gguf").read_bytes()


GGUF = _real_gguf()


@st.composite
def gguf_bytes(draw):
    raw = bytearray(GGUF)
    head = min(len(raw), 4096)  # the header, the metadata and the tensor table's start
    for _ in range(draw(st.integers(1, 6))):
        raw[draw(st.integers(0, head - 1))] = draw(st.integers(0, 255))
    if draw(st.integers(0, 3)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw)


@FUZZ
@given(gguf_bytes())
def test_model_inventory_reads_or_says_why(raw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.gguf"
        p.write_bytes(raw)
        doc = clean((models.ModelError,), models.inventory_doc, p)
    if doc is not None:
        json.dumps(doc)  # what `residency model inventory` writes
        assert all(t["offset"] + t["length"] <= len(raw) for t in doc["tensors"])


# ---- run.json, harness.json, objects.json and trace.bin on gather -------------------------

GATHER_ERRORS = (gather_base.GatherError, trace.TraceError)


def _docs(d: Path, names) -> dict:
    return {n: json.loads((d / n).read_text()) for n in names}


with tempfile.TemporaryDirectory() as _d:
    SYNTHETIC = _docs(make_run(Path(_d), "main", "pager-lru", 0.5, 0, chunks=4, passes=2), ("run.json", "harness.json"))
    MODEL = _docs(make_model_run(Path(_d), "main", "pager-lru", 0.5, 0, capacity=2),
                  ("run.json", "harness.json", "objects.json"))


@GATHER_FUZZ
@given(st.sampled_from(["run.json", "harness.json"]).flatmap(
    lambda n: st.tuples(st.just(n), json_text(SYNTHETIC[n]))))
def test_gather_synthetic_run_reads_or_says_why(case):
    name, text = case
    with tempfile.TemporaryDirectory() as d:
        run = make_run(Path(d), "main", "pager-lru", 0.5, 0, chunks=4, passes=2, sealed=False)
        (run / name).write_text(text)
        seal(run)  # as the harness would: the record is malformed, not tampered with
        clean(GATHER_ERRORS, gather.pager_synthetic_table, [str(run)], {"sha256": "a" * 64})


@GATHER_FUZZ
@given(st.sampled_from(["run.json", "harness.json", "objects.json"]).flatmap(
    lambda n: st.tuples(st.just(n), json_text(MODEL[n]))))
def test_gather_model_run_reads_or_says_why(case):
    name, text = case
    with tempfile.TemporaryDirectory() as d:
        run = make_model_run(Path(d), "main", "pager-lru", 0.5, 0, capacity=2, sealed=False)
        (run / name).write_text(text)
        seal(run)
        ident = {"name": "m", "path": "m.gguf", "sha256": "b" * 64}
        clean(GATHER_ERRORS, gather.pager_model_table, [str(run)], ident, str(Path(d) / "no-oracle"))


@GATHER_FUZZ
@given(trace_bytes())
def test_gather_reads_the_trace_or_says_why(raw):
    with tempfile.TemporaryDirectory() as d:
        run = make_run(Path(d), "main", "pager-lru", 0.5, 0, chunks=4, passes=2, sealed=False)
        (run / "trace.bin").write_bytes(raw)
        seal(run)
        clean(GATHER_ERRORS, gather.pager_synthetic_table, [str(run)], {"sha256": "a" * 64})


def test_gather_names_the_run_of_a_malformed_record(tmp_path):
    """The property's contract, once by hand: a run.json that is a list, or whose counters are,
    is one GatherError line naming the run."""
    run = make_run(tmp_path, "main", "pager-lru", 0.5, 0, sealed=False)
    (run / "run.json").write_text("[1, 2]")
    seal(run)
    with pytest.raises(gather_base.GatherError, match=f"^{run}/run.json: not a JSON object"):
        gather.pager_synthetic_table([str(run)], {"sha256": "a" * 64})
    (run / "run.json").write_text('{"counters": [1]}')
    seal(run)
    # its declared shape (workflow/schemas/run.schema.json) names the file and the field
    with pytest.raises(gather_base.GatherError, match=f"^{run}/run.json: /counters: \\[1\\] is not of type 'object'$"):
        gather.pager_synthetic_table([str(run)], {"sha256": "a" * 64})
    (run / "run.json").write_text("{}")  # a failed run's record: still gathered
    seal(run)
    (run / "harness.json").write_text("{}")
    seal(run)
    with pytest.raises(gather_base.GatherError, match=f"^{run}/harness.json: /: 'schema_version' is a required property"):
        gather.pager_synthetic_table([str(run)], {"sha256": "a" * 64})
    assert manifest.problems(run) == []


# ---- the config ------------------------------------------------------------------------------

CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SCHEMA = config.load_schema()


@FUZZ
@given(mutated(CONFIG).filter(lambda d: isinstance(d, dict)))  # a mapping: load's check before validate
def test_config_validation_accepts_or_names_the_key(doc):
    clean((config.ConfigError,), config.validate, doc, SCHEMA)


@settings(FUZZ, derandomize=True)  # found: a non-UTF-8 file raised UnicodeDecodeError (now ConfigError)
@given(st.binary(max_size=200) | json_text(CONFIG).map(str.encode))
def test_config_file_loads_or_names_the_problem(raw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.yaml"
        p.write_bytes(raw)
        clean((config.ConfigError,), config.load, p)
