"""The tensor-order reference string (tensor_reference.py) and MIN holding one tensor."""

import json

from hypothesis import given, strategies as st

from residency.analysis import opt as analysis, belady
from residency.evidence import tensor_reference as tr

from fixtures import write_trace

CS = 100  # chunk size of the hand-made objects below


def _objects():
    # embd: chunk 0; layer.0: A over chunks 1-2, B over 3, C over 2-3 (file order A B C).
    t = lambda name, off, n: {"name": name, "offset": off, "bytes": n}  # noqa: E731
    return {"chunk_size": CS, "objects": [
        {"name": "embd", "tensors": [t("token_embd.weight", 0, 100)]},
        {"name": "layer.0", "tensors": [t("A", 100, 150), t("B", 300, 100), t("C", 250, 100)]}]}


def test_each_step_reads_its_tensors_in_the_plans_order():
    ref, steps = [0, 1, 2, 3, 0, 1, 2, 3], [0, 1, 1, 1, 2, 3, 3, 3]
    out, groups = tr.tensor_reference(ref, steps, _objects(), ["B", "A", "C"])
    assert out == [0, 3, 1, 2, 2, 3] * 2
    assert groups == [1, 2, 3, 3, 4, 4, 5, 6, 7, 7, 8, 8]


def test_chunks_no_ordered_tensor_covers_follow_as_one_group():
    out, groups = tr.tensor_reference([1, 2, 3], [1, 1, 1], _objects(), ["B"])
    assert out == [3, 1, 2] and groups == [1, 2, 2]


@given(ref=st.lists(st.integers(0, 3), min_size=1, max_size=60), cuts=st.lists(st.booleans(), min_size=60, max_size=60),
       order=st.permutations(["A", "B", "C"]), capacity=st.integers(1, 4))
def test_every_step_keeps_its_chunks_and_the_bounds_are_ordered(ref, cuts, order, capacity):
    steps, s = [], 0
    for i in range(len(ref)):
        s += cuts[i]
        steps.append(s)
    out, groups = tr.tensor_reference(ref, steps, _objects(), order)
    assert groups == sorted(groups)
    # Step by step: the step's own chunks, the same as that step rebuilt alone.
    pieces, i = [], 0
    while i < len(ref):
        j = i
        while j < len(ref) and steps[j] == steps[i]:
            j += 1
        alone, _ = tr.tensor_reference(ref[i:j], steps[i:j], _objects(), order)
        assert set(alone) == set(ref[i:j])
        pieces += alone
        i = j
    assert pieces == out
    held = belady.step_held_min_misses(out, groups, capacity)
    assert belady.opt_misses(out, capacity) <= held <= len(out)


def test_read_order_needs_one_order_for_every_shape():
    assert tr.read_order({"shapes": [{"read_order": ["A", "B"]}, {"read_order": ["A", "B"]}]}) == ["A", "B"]
    assert tr.read_order({"shapes": [{"read_order": ["A", "B"]}, {"read_order": ["B", "A"]}]}) is None
    assert tr.read_order({"shapes": [{"boundaries": []}]}) is None  # a plan made with --consumption object
    assert tr.read_order({"shapes": []}) is None


def _run(tmp_path, plan):
    d = tmp_path / "run"
    d.mkdir()
    (d / "objects.json").write_text(json.dumps(_objects()))
    cfg = {}
    if plan is not None:
        p = tmp_path / "plan.json"
        p.write_text(json.dumps(plan))
        cfg["graph_plan"] = str(p)
    (d / "run.json").write_text(json.dumps({"config": cfg}))
    return d


def test_a_run_with_a_read_order_plan_gets_the_tensor_held_bound(tmp_path):
    d = _run(tmp_path, {"shapes": [{"tokens": 1, "read_order": ["B", "A", "C"]}]})
    # Capacity 2, two passes of layer.0 alone: chunks 1 2 3 in file order, read B A C.
    records = [(s, c, 1, 0) for s in (1, 3) for c in (1, 2, 3)]
    write_trace(d / "trace.bin", CS, 4, records)
    from residency.core import trace

    t = trace.read(d / "trace.bin")
    held, opt = analysis.tensor_held_bounds(d, t.reference(), t.reference_steps(), 2)
    # Reads 3 | 1 2 | 2 3, twice. Holding A's 1 and 2 together costs the refill of 3 the
    # OPT (capacity 2, nothing held) also pays; the second pass misses everything either way.
    assert opt == belady.opt_misses([3, 1, 2, 2, 3] * 2, 2)
    assert held == belady.step_held_min_misses([3, 1, 2, 2, 3] * 2, [1, 2, 2, 3, 3, 4, 5, 5, 6, 6], 2)
    assert opt <= held


def test_without_a_read_order_the_bound_is_null(tmp_path):
    d = _run(tmp_path, {"shapes": [{"tokens": 1, "boundaries": []}]})
    assert analysis.tensor_held_bounds(d, [1], [1], 2) == (None, None)
    (tmp_path / "b").mkdir()
    assert tr.load_for_run(_run(tmp_path / "b", None)) is None  # no --graph-plan at all
