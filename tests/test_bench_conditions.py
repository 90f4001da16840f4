"""bench/conditions.py: the machine's CPU shares over a `make bench` run (steal: time other
tenants of the host took), written beside the rows and opening the table made from them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import conditions  # noqa: E402
import rows  # noqa: E402

STAT = "cpu  {} 0 {} {} {} 0 0 {} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"


def test_the_shares_are_of_the_time_between_the_snapshots():
    before = conditions.cpu_counters(STAT.format(100, 50, 1000, 10, 5))
    after = conditions.cpu_counters(STAT.format(400, 150, 1400, 60, 55))
    got = conditions.shares(before, after)
    # 300 + 100 busy, 400 idle, 50 iowait, 50 steal: 900 jiffies
    assert got == pytest.approx({"busy": 400 / 9, "idle": 400 / 9, "iowait": 50 / 9, "steal": 50 / 9})
    assert sum(got.values()) == pytest.approx(100)
    with pytest.raises(conditions.ConditionsError, match="did not advance"):
        conditions.shares(after, before)
    with pytest.raises(conditions.ConditionsError, match="no aggregate cpu line"):
        conditions.cpu_counters("cpu0 1 2 3\n")


def test_a_run_is_written_start_to_end_and_opens_the_table(tmp_path, monkeypatch):
    monkeypatch.setattr(rows, "BENCH_JSON", tmp_path / "bench.json")
    begun = conditions.start(STAT.format(100, 50, 1000, 10, 5))
    assert "cpu_percent" not in begun and conditions.line(begun) == ""  # not ended: no sentence
    doc = conditions.end(STAT.format(400, 150, 1400, 60, 55))
    assert json.loads((tmp_path / "conditions.json").read_text()) == doc
    assert doc["seconds"] >= 0 and doc["cpu_percent"]["steal"] == pytest.approx(50 / 9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conditions.json"]  # written atomically
    lead = conditions.line(doc)
    assert "steal 5.6 %" in lead and "iowait 6 %" in lead and doc["started"] in lead
    page = tmp_path / "benchmarks.md"
    page.write_text(f"intro\n{rows.BEGIN}\nold\n{rows.END}\n")
    rows.update(page, [rows.row("a", 0.97, [0.97], 0.95, "at least")], lead)
    text = page.read_text()
    assert text.index("steal 5.6 %") < text.index("| benchmark |") and "old" not in text


def test_an_end_without_a_start_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "conditions.py"), "end"], capture_output=True, text=True,
                       env={"RESIDENCY_BENCH_JSON": str(tmp_path / "bench.json"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no start snapshot" in p.stderr, p.stderr
