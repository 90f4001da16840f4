"""The run records' declared shapes (workflow/schemas/harness.schema.json, run.schema.json;
residency.core.records): what the harness writes has its shape, and a record that does not
is one line naming the file and the field."""

import json

import pytest

from residency.core import records
from residency.run import harness
from test_harness import fake_engine
from test_manifest import ENGINE_WRITES_RECORD, OUT


def test_what_the_harness_writes_has_its_declared_shape(tmp_path):
    out = tmp_path / "run"
    rec = harness.run([fake_engine(tmp_path, OUT + ENGINE_WRITES_RECORD), "--out", str(out)], out,
                      limit_bytes=None, cgroup_mode="off")
    on_disk = json.loads((out / "harness.json").read_text())
    assert on_disk == rec
    assert records.check(on_disk, "harness", out / "harness.json") is on_disk


@pytest.mark.parametrize("kind, doc, field", [
    ("harness", {"schema_version": 1, "status": "ok", "engine": {"sha256": "e"}, "meta": {}, "host": {}}, "/host"),
    ("harness", {"schema_version": 1, "status": 0, "engine": {"sha256": "e"}, "meta": {}, "host": {"grade": "hard"}},
     "/status"),
    ("harness", {"schema_version": 1, "status": "ok", "engine": {"sha256": "e"}, "meta": {"r": [0.5]},
                 "host": {"grade": "hard"}}, "/meta/r"),
    ("run", {"counters": {"misses": "many"}}, "/counters/misses"),
    ("run", {"wall_ns": 1.5}, "/wall_ns"),
    # A key holding a line break (found by tests/test_fuzz_inputs.py) is shown escaped.
    ("harness", {"schema_version": 1, "status": "ok", "engine": {"sha256": "e"}, "meta": {"\n": []},
                 "host": {"grade": "hard"}}, "/meta['\\n']"),
])
def test_a_record_off_its_shape_is_one_line_naming_the_field(kind, doc, field):
    with pytest.raises(records.RecordError) as exc:
        records.check(doc, kind, f"x/{kind}.json")
    msg = str(exc.value)
    assert msg.startswith(f"x/{kind}.json: {field}") and "\n" not in msg, msg


def test_an_empty_run_record_of_a_failed_run_is_accepted():
    assert records.check({}, "run", "x/run.json") == {}
