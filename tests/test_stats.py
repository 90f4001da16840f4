"""The paired-log t interval, checked against the reference's Table 6."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from residency.analysis import stats

D = [102.358, 102.228, 100.032, 101.996, 102.202, 101.616]
F = [32.867, 32.820, 32.837, 32.889, 32.887, 32.811]


def test_reference_table6():
    r = stats.paired_log_ratio(D, F)
    assert r.n == 6
    assert r.ratio == pytest.approx(0.322914, abs=1e-6)
    assert r.low == pytest.approx(0.320092, abs=1e-6)
    assert r.high == pytest.approx(0.325761, abs=1e-6)
    assert r.reciprocal == pytest.approx(1 / 0.322914, rel=1e-5)


@given(st.lists(st.tuples(st.floats(0.1, 1e4), st.floats(0.1, 1e4)), min_size=2, max_size=20))
def test_interval_contains_the_geometric_ratio(pairs):
    d, f = zip(*pairs)
    r = stats.paired_log_ratio(d, f)
    assert r.low <= r.ratio * (1 + 1e-12) and r.ratio <= r.high * (1 + 1e-12)
    assert math.isclose(r.ratio * r.reciprocal, 1.0, rel_tol=1e-9)


def test_bad_input():
    with pytest.raises(ValueError):
        stats.paired_log_ratio([1.0], [1.0])
    with pytest.raises(ValueError):
        stats.paired_log_ratio([1.0, 0.0], [1.0, 1.0])
