"""The union of canonical extents: exactly the covered bytes, each once; duplicates and
overlaps counted, not hidden; the digest depends on the intervals, not their order."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from residency.evidence.extents import Interval, canonical_sha256, union

FILES = ["a" * 64, "b" * 64]
intervals = st.lists(
    st.builds(Interval, st.sampled_from(FILES), st.integers(0, 200), st.integers(0, 40), st.sampled_from(["", "x", "y"])),
    max_size=30)


def covered(ivs):
    return {(iv.file_sha256, b) for iv in ivs for b in range(iv.offset, iv.end)}


def brute_counts(ivs):
    ivs = [iv for iv in ivs if iv.length > 0]
    keys, dup, unique = set(), 0, []
    for iv in sorted(ivs):
        k = (iv.file_sha256, iv.offset, iv.length)
        if k in keys:
            dup += 1
        else:
            keys.add(k)
            unique.append(iv)
    over = {i for i, a in enumerate(unique) for j, b in enumerate(unique)
            if i != j and a.file_sha256 == b.file_sha256 and a.offset < b.end and b.offset < a.end}
    return dup, len(over)


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_union_is_the_covered_byte_set_counted_once(ivs):
    u = union(ivs)
    assert u.bytes == len(covered(ivs))
    for f in FILES:  # the runs, per file, are disjoint, ascending and not adjacent
        runs = [r for r, iv_f in zip(u.runs, _run_files(u, ivs)) if iv_f == f]
        assert all(b < e for b, e in runs)
        assert all(runs[i][1] < runs[i + 1][0] for i in range(len(runs) - 1))


def _run_files(u, ivs):
    """The file of each run of `u` (runs are listed file by file, files sorted)."""
    out = []
    for f in sorted({iv.file_sha256 for iv in ivs if iv.length > 0}):
        n = len(union([iv for iv in ivs if iv.file_sha256 == f]).runs)
        out += [f] * n
    return out


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_duplicates_and_overlaps_match_a_brute_force_count(ivs):
    u = union(ivs)
    assert (u.duplicates, u.overlaps) == brute_counts(ivs)
    assert u.components == sum(1 for iv in ivs if iv.length > 0)


@settings(max_examples=100, deadline=None)
@given(intervals, st.randoms())
def test_digest_is_order_free_and_changes_with_an_interval(ivs, rnd):
    shuffled = list(ivs)
    rnd.shuffle(shuffled)
    assert union(shuffled).sha256 == union(ivs).sha256 == canonical_sha256([iv for iv in ivs if iv.length > 0])
    if ivs and ivs[0].length > 0:
        moved = [Interval(ivs[0].file_sha256, ivs[0].offset + 1, ivs[0].length, ivs[0].label)] + ivs[1:]
        assert union(moved).sha256 != union(ivs).sha256


def test_adjacent_is_neither_overlap_nor_duplicate_and_merges():
    f = FILES[0]
    u = union([Interval(f, 0, 10), Interval(f, 10, 5)])
    assert (u.bytes, u.runs, u.duplicates, u.overlaps) == (15, [(0, 15)], 0, 0)
    u = union([Interval(f, 0, 10, "gate"), Interval(f, 0, 10, "again"), Interval(f, 5, 10)])
    assert (u.bytes, u.duplicates, u.overlaps) == (15, 1, 2)
    d = u.as_dict()
    assert d["duplicate_component_intervals"] == 1 and d["overlapping_component_intervals"] == 2


def test_negative_extent_is_refused():
    with pytest.raises(ValueError, match="negative"):
        union([Interval(FILES[0], -1, 4, "bad")])
