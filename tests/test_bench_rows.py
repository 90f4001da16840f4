"""bench/rows.py: make bench's rows (results/bench/bench.json) and the table made from them.
A row that is not comparable is never met; a row of the same name replaces the earlier one."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import rows  # noqa: E402


def test_met_follows_the_bound():
    assert rows.row("a", 0.96, [0.95, 0.97], 0.95, "at least")["met"] is True
    assert rows.row("a", 0.94, [], 0.95, "at least")["met"] is False
    assert rows.row("b", 1.04, [], 1.05, "at most")["met"] is True
    assert rows.row("b", 1.06, [], 1.05, "at most")["met"] is False


def test_a_row_that_is_not_comparable_is_never_met():
    r = rows.row("uring / fio", 2.84, [2.8, 2.9], 0.95, "at least", why="fio's buffers are not on huge pages")
    assert r["met"] is None
    assert "not comparable: fio's buffers" in rows.line(r) and "met" not in rows.line(r).split(":")[-1]
    assert "| not comparable: fio's buffers are not on huge pages |" in rows.table([r])


def test_rows_are_replaced_by_name_and_written_whole(tmp_path):
    f = tmp_path / "bench.json"
    rows.add("a", 0.5, [0.5], 0.9, "at least", path=f)
    rows.add("b", 1.0, [1.0], 1.05, "at most", path=f)
    rows.add("a", 0.95, [0.95], 0.9, "at least", path=f)
    got = json.loads(f.read_text())
    assert [r["name"] for r in got] == ["b", "a"] and got[1]["ratio"] == 0.95 and got[1]["met"] is True
    assert {"name", "ratio", "pairs", "target", "met"} <= set(got[0])
    assert list(tmp_path.iterdir()) == [f]  # no temporary file left


def test_bad_rows_are_refused():
    with pytest.raises(rows.BenchRowError, match="bound"):
        rows.row("a", 1.0, [], 1.0, "about")
    with pytest.raises(rows.BenchRowError, match="not a number"):
        rows.row("a", float("nan"), [], 1.0, "at least")


def test_the_table_is_rewritten_between_its_markers(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"intro\n{rows.BEGIN}\nold table\n{rows.END}\nafter\n")
    rows.update(doc, [rows.row("a", 0.97, [0.97], 0.95, "at least")])
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("after\n") and "old table" not in text
    assert "| a | 0.970 | 0.970 | at least 0.95 | met |" in text
    doc.write_text("no markers\n")
    with pytest.raises(rows.BenchRowError, match="markers"):
        rows.update(doc, [])


def test_the_command_line_gives_one_line_on_a_bad_file(tmp_path):
    bad = tmp_path / "bench.json"
    bad.write_text("{not json")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "rows.py"), "table"], capture_output=True, text=True,
                       env={"RESIDENCY_BENCH_JSON": str(bad), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("bench rows: error:"), p.stderr
