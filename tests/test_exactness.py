"""The exactness comparator catches a single flipped byte in one logit row."""

import json

import numpy as np
import pytest

from residency.evidence import exactness


def write_run(d, tokens, logits):
    d.mkdir(parents=True)
    (d / "tokens.json").write_text(json.dumps({"prompt": "p", "prompt_tokens": [1], "tokens": tokens, "text": "t"}))
    np.asarray(logits, dtype="<f4").tofile(d / "logits.f32")
    return d


@pytest.fixture
def oracle(tmp_path):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 50)).astype("<f4")
    return write_run(tmp_path / "oracle", [5, 9, 2, 7, 7, 1], logits), logits


def test_identical_run_is_exact(tmp_path, oracle):
    o, logits = oracle
    r = write_run(tmp_path / "run", [5, 9, 2, 7, 7, 1], logits.copy())
    c = exactness.compare(r, o)
    assert c.exact and c.first_differing_step is None and c.rows_compared == 6


@pytest.mark.parametrize("row, byte", [(0, 0), (3, 77), (5, 199)])
def test_one_flipped_byte_is_caught_and_located(tmp_path, oracle, row, byte):
    o, logits = oracle
    raw = bytearray(logits.tobytes())
    raw[row * 50 * 4 + byte] ^= 0x01
    r = write_run(tmp_path / "run", [5, 9, 2, 7, 7, 1], np.frombuffer(bytes(raw), dtype="<f4").reshape(6, 50))
    c = exactness.compare(r, o)
    assert not c.exact and c.tokens_equal and not c.logits_equal
    assert c.first_differing_step == row and c.rows_differing == 1
    assert f"logit row {row} first differs at vocab index {byte // 4}" in c.detail


def test_negative_zero_is_not_equal_to_zero(tmp_path, oracle):
    """Bits are compared, not float values: -0.0 == 0.0 as floats but not as bytes."""
    o, logits = oracle
    a = logits.copy()
    a[2, 4] = 0.0
    o2 = write_run(tmp_path / "o2", [5, 9, 2, 7, 7, 1], a)
    b = a.copy()
    b[2, 4] = -0.0
    r = write_run(tmp_path / "run", [5, 9, 2, 7, 7, 1], b)
    assert exactness.compare(r, o2).first_differing_step == 2


def test_different_token_and_missing_outputs(tmp_path, oracle):
    o, logits = oracle
    r = write_run(tmp_path / "run", [5, 9, 3, 7, 7, 1], logits)
    c = exactness.compare(r, o)
    assert not c.exact and not c.tokens_equal and c.first_differing_step == 2
    assert "token 2: 3 vs oracle 2" in c.detail
    empty = tmp_path / "empty"
    empty.mkdir()
    c = exactness.compare(empty, o)
    assert not c.exact and "missing" in c.detail
