"""U_sem^LB (demand.py), U_sched and Q_run (traffic.py) of a small MoE run directory as the
engine writes it (docs/run-contract.md): the routed experts' slices, tensors read whole,
GET_ROWS rows; scheduler requests and traffic kept apart from the semantic demand."""

import json

import pytest

from fixtures import SOURCE_SHA256, write_trace
from residency.evidence import demand, traffic

SHA = SOURCE_SHA256  # the model file tests/fixtures.py writes (deep verify re-hashes it)
# layer 0: an expert tensor of 4 experts x 100 bytes at 1000 and one of 4 x 50 at 2000
EXPERTS = [{"name": f"layer.0.expert.{e}", "kind": "expert", "layer": 0, "expert": e, "step": "layer.0", "bytes": 150,
            "slices": [{"tensor": "blk.0.ffn_up_exps.weight", "component": "up", "offset": 1000 + 100 * e, "bytes": 100},
                       {"tensor": "blk.0.ffn_down_exps.weight", "component": "down", "offset": 2000 + 50 * e, "bytes": 50}],
            "chunks": [0]} for e in range(4)]
TENSORS = [
    {"name": "token_embd.weight", "offset": 0, "bytes": 400, "read": ["rows"], "row_bytes": 40, "rows": [1, 3, 3]},
    {"name": "blk.0.attn_q.weight", "offset": 500, "bytes": 300, "read": ["whole"]},
    {"name": "blk.0.ffn_up_exps.weight", "offset": 1000, "bytes": 400, "read": ["experts"]},
    {"name": "blk.0.ffn_down_exps.weight", "offset": 2000, "bytes": 200, "read": ["experts"]},
    {"name": "rope_freqs.weight", "offset": 2300, "bytes": 64, "read": ["partial"]},
]
ROUTES = [{"pass": 0, "layer": 0, "experts": [[0, 2], [2, 0]]}, {"pass": 1, "layer": 0, "experts": [[2, 3]]}]


def moe_run(d, routes=ROUTES, tensors=TENSORS, experts=EXPERTS):
    d.mkdir(parents=True, exist_ok=True)
    (d / "objects.json").write_text(json.dumps({"n_expert": 4, "experts": experts}))
    (d / "demand.json").write_text(json.dumps({"schema_version": 1, "tensors": tensors}))
    (d / "routes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in routes))
    return d


def test_bound_is_routed_slices_whole_tensors_and_read_rows(tmp_path):
    b = demand.bound(moe_run(tmp_path / "r"), SHA)
    assert b["routed_expert_objects"] == 3                         # experts 0, 2, 3 of layer 0; 1 never picked
    assert b["routed_expert_bytes"] == 3 * 150 and b["whole_tensor_bytes"] == 300
    assert b["row_bytes"] == 2 * 40                                # rows 1 and 3, 3 read twice
    assert b["u_sem_lb_bytes"] == 450 + 300 + 80
    assert b["partial_only_tensors"] == ["rope_freqs.weight"]      # a view: excluded, not inferred
    u = b["union"]
    assert u["duplicate_component_intervals"] == 1 and u["overlapping_component_intervals"] == 0
    assert len(u["union_sha256"]) == 64
    c = b["coverage"]
    assert (c["route_events"], c["prefill_events"], c["decode_passes"], c["managed_expert_objects"]) == (2, 1, 1, 4)
    assert c["min_experts_per_prefill_event"] == 2


def test_a_tensor_read_whole_and_by_rows_counts_once_whole(tmp_path):
    tensors = [dict(TENSORS[0], read=["rows", "whole"])] + TENSORS[1:]
    b = demand.bound(moe_run(tmp_path / "r", tensors=tensors), SHA)
    assert b["row_bytes"] == 0 and b["whole_tensor_bytes"] == 700 and b["u_sem_lb_bytes"] == 450 + 700


def test_a_dense_model_has_no_routes_and_no_expert_bytes(tmp_path):
    d = moe_run(tmp_path / "r", experts=[], tensors=TENSORS[:2])
    (d / "routes.jsonl").unlink()
    b = demand.bound(d, SHA)
    assert b["routed_expert_bytes"] == 0 and b["u_sem_lb_bytes"] == 380 and b["coverage"]["route_events"] == 0


def test_routes_naming_an_unknown_expert_and_rows_outside_the_tensor_are_one_line_errors(tmp_path):
    with pytest.raises(demand.DemandError, match="routes select expert 7 of layer 0, which objects.json does not have"):
        demand.bound(moe_run(tmp_path / "a", routes=[{"pass": 0, "layer": 0, "experts": [[7]]}]), SHA)
    bad = [dict(TENSORS[0], rows=[10])] + TENSORS[1:]
    with pytest.raises(demand.DemandError, match="row 10 of token_embd.weight lies outside the tensor"):
        demand.bound(moe_run(tmp_path / "b", tensors=bad), SHA)
    empty = tmp_path / "c"
    empty.mkdir()
    with pytest.raises(demand.DemandError, match="no objects.json"):
        demand.bound(empty, SHA)


def sched_run(d, fills, size=1000, chunk=256):
    d.mkdir(parents=True, exist_ok=True)
    write_trace(d / "trace.bin", chunk, 4, [(0, c, kind, 0) for c, kind in fills] + [(0, 0, 1, 0)])
    (d / "run.json").write_text(json.dumps({
        "region": {"bytes": size},
        "source_stats": {"logical_bytes": 1200, "physical_bytes": 1536, "padding_bytes": 336, "submissions": 5},
        "counters": {"physical_bytes_read": 4096}}))
    return d


def test_u_sched_is_the_union_of_filled_chunks_with_rereads_counted(tmp_path):
    d = sched_run(tmp_path / "r", [(0, 2), (3, 3), (0, 2), (1, 2)])  # chunk 0 filled twice; 3 is the short tail
    s = traffic.scheduled(d, SHA)
    assert s["chunks"] == 3 and s["requests"] == 4 and s["rereads"] == 1
    assert s["u_sched_bytes"] == 256 + 256 + (1000 - 768)


def test_q_run_logical_aligned_and_padding(tmp_path):
    q = traffic.cumulative(sched_run(tmp_path / "r", [(0, 2)]))
    assert (q["logical_bytes"], q["physical_bytes"], q["padding_bytes"]) == (1200, 1536, 336)
    assert q["physical_bytes"] - q["logical_bytes"] == q["padding_bytes"] and q["kernel_read_bytes"] == 4096
