"""Belady's MIN against an exhaustive search, LRU and the cyclic-scan closed form."""

from collections import OrderedDict
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from residency.analysis import belady


def brute_force_min(trace, capacity):
    """The fewest misses over every possible eviction choice (exponential; small inputs)."""
    trace = tuple(trace)

    @lru_cache(maxsize=None)
    def best(i, cache):
        if i == len(trace):
            return 0
        x = trace[i]
        if x in cache:
            return best(i + 1, cache)
        if len(cache) < capacity:
            return 1 + best(i + 1, cache | {x})
        return 1 + min(best(i + 1, (cache - {v}) | {x}) for v in cache)

    return best(0, frozenset())


def lru_misses(trace, capacity):
    cache, misses = OrderedDict(), 0
    for x in trace:
        if x in cache:
            cache.move_to_end(x)
            continue
        misses += 1
        if len(cache) >= capacity:
            cache.popitem(last=False)
        cache[x] = True
    return misses


traces = st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=13)


@settings(max_examples=300, deadline=None)
@given(trace=traces, capacity=st.integers(min_value=1, max_value=4))
def test_min_equals_exhaustive_search(trace, capacity):
    assert belady.opt_misses(trace, capacity) == brute_force_min(trace, capacity)


@settings(max_examples=300, deadline=None)
@given(trace=st.lists(st.integers(0, 30), max_size=200), capacity=st.integers(1, 12))
def test_min_bounds(trace, capacity):
    opt = belady.opt_misses(trace, capacity)
    assert len(set(trace)) <= opt <= lru_misses(trace, capacity) <= len(trace)
    # More room never costs misses.
    assert belady.opt_misses(trace, capacity + 1) <= opt


@settings(max_examples=400, deadline=None)
@given(chunks=st.integers(1, 60), capacity=st.integers(1, 70), passes=st.integers(0, 8))
def test_cyclic_closed_form_matches_min(chunks, capacity, passes):
    scan = [i % chunks for i in range(chunks * passes)]
    assert belady.cyclic_scan_opt(chunks, capacity, passes) == belady.opt_misses(scan, capacity)


def test_cyclic_scan_known_values():
    # 3 chunks, room for 2: after the cold pass every other access misses.
    assert belady.cyclic_scan_opt(3, 2, 2) == 4
    # LRU on the same scan misses everything; MIN does not.
    scan = [i % 64 for i in range(64 * 3)]
    assert lru_misses(scan, 31) == len(scan)
    # 64 cold misses, then 128 accesses = 2 periods of 63 (30 hits, 33 misses) + 2 hits.
    assert belady.opt_misses(scan, 31) == 64 + 2 * 33


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        belady.opt_misses([1, 2], 0)


@given(trace=st.lists(st.integers(0, 20), max_size=150), capacity=st.integers(1, 10))
def test_step_held_min_is_min_when_every_access_is_its_own_step(trace, capacity):
    assert belady.step_held_min_misses(trace, list(range(len(trace))), capacity) == belady.opt_misses(trace, capacity)


@given(trace=st.lists(st.integers(0, 20), max_size=150), capacity=st.integers(1, 10),
       cuts=st.lists(st.booleans(), min_size=150, max_size=150))
def test_step_held_min_never_beats_min(trace, capacity, cuts):
    steps, s = [], 0
    for i in range(len(trace)):
        s += cuts[i]
        steps.append(s)
    held = belady.step_held_min_misses(trace, steps, capacity)
    assert belady.opt_misses(trace, capacity) <= held <= len(trace)


def test_step_held_min_keeps_the_step_being_computed():
    # Capacity 2, steps [0 1] [2] [0 1] [2]. At the miss on 1 in the third step MIN evicts 0
    # (never used again) although that step has just read it; held, it must evict 2 instead,
    # which the fourth step then misses.
    trace, steps = [0, 1, 2, 0, 1, 2], [0, 0, 1, 2, 2, 3]
    assert belady.opt_misses(trace, 2) == 4           # 0 1 2(evict 1) 0 1(evict 0 or 2) 2
    assert belady.step_held_min_misses(trace, steps, 2) == 5
    with pytest.raises(ValueError):
        belady.step_held_min_misses([1, 2], [0], 2)
