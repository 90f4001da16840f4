"""O = max over calibration runs of (peak - weight-side bytes held); what counts as held."""

import json

import pytest

from residency.run import overhead

MiB = 1 << 20


def _run(tmp_path, name, peak, run, status="ok"):
    d = tmp_path / name
    d.mkdir()
    (d / "harness.json").write_text(json.dumps({"status": status, "host": {"cgroup": {"peak_bytes": peak}},
                                                "rusage": {"maxrss_kib": 1}}))
    (d / "run.json").write_text(json.dumps(run))
    return d


def _pager(held, window=2 * MiB, pt=64 << 10, huge=0, chunk=MiB):
    return {"subcommand": "generate", "arm": "pager-declared", "region": {"chunk_size": chunk},
            "counters": {"max_resident_chunks": held},
            "budget": {"window_bytes": window, "page_table_bytes": pt, "reserve_chunks": huge}}


def test_a_generation_pays_its_windows_page_tables_and_resident_chunks(tmp_path):
    # 10 chunks resident + 2 MiB of windows + 64 KiB of page tables: the rest is overhead.
    d = _run(tmp_path, "d", 10 * MiB + 2 * MiB + (64 << 10) + 7 * MiB, _pager(10))
    rec = overhead.calibrate([d], tmp_path / "o.json")
    assert rec["overhead_bytes"] == 7 * MiB
    assert json.loads((tmp_path / "o.json").read_text()) == rec


def test_a_run_that_filled_nothing_pays_only_its_windows(tmp_path):
    d = _run(tmp_path, "d", 2 * MiB + 3 * MiB, _pager(0))
    assert overhead.calibrate([d], tmp_path / "o.json")["overhead_bytes"] == 3 * MiB


def test_kernel_mmap_pays_the_model_file_and_o_is_the_highest_remainder(tmp_path):
    a = _run(tmp_path, "a", 40 * MiB + 9 * MiB, {"subcommand": "generate", "arm": "kernel-mmap",
                                                  "model": {"bytes": 40 * MiB}})
    d = _run(tmp_path, "d", 10 * MiB + 2 * MiB + (64 << 10) + 7 * MiB, _pager(10))
    rec = overhead.calibrate([a, d], tmp_path / "o.json")
    assert rec["overhead_bytes"] == 9 * MiB and rec["method"] == "cgroup-peak"


def test_a_failed_calibration_run_stops_with_its_directory(tmp_path):
    d = _run(tmp_path, "d", MiB, _pager(0), status="oom-killed")
    with pytest.raises(overhead.CalibrationError, match="did not complete"):
        overhead.calibrate([d], tmp_path / "o.json")
    assert not (tmp_path / "o.json").exists()


def test_the_reserve_is_o_and_its_margin_and_the_limit_grants_it(tmp_path):
    from residency.run import harness

    d = _run(tmp_path, "d", 2 * MiB + 30 * MiB, _pager(0))
    rec = overhead.calibrate([d], tmp_path / "o.json", margin=0.1, margin_min_bytes=MiB)
    assert (rec["overhead_bytes"], rec["reserve_bytes"]) == (30 * MiB, 30 * MiB + 3 * MiB)  # 10 % of O
    assert overhead.reserve(4 * MiB, 0.1, MiB) == 5 * MiB  # the floor where 10 % is less
    assert overhead.reserve(10, 0.1, 0) == 11  # rounded up: never below O x (1 + margin)
    limit, extra = harness.limit_from(7 * MiB, str(tmp_path / "o.json"), None)
    assert limit == 7 * MiB + 33 * MiB and extra == {"overhead_bytes": 30 * MiB, "reserve_bytes": 33 * MiB,
                                                       "budget_bytes": 7 * MiB}


def test_a_calibration_record_without_a_reserve_is_refused(tmp_path):
    from residency.run import harness

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"overhead_bytes": MiB}))
    with pytest.raises(harness.HarnessError, match="without reserve_bytes"):
        harness.limit_from(MiB, str(old), None)


def test_the_margin_widens_with_the_spread_of_an_arms_repetitions(tmp_path):
    # Arm D's three reps leave 30, 26 and 34 MiB (a spread of 8 MiB); arm A's two leave 9 and 9.
    runs = [_run(tmp_path, f"d{k}", 2 * MiB + o * MiB, _pager(0)) for k, o in enumerate((30, 26, 34))]
    runs += [_run(tmp_path, f"a{k}", 49 * MiB, {"subcommand": "generate", "arm": "kernel-mmap",
                                                "model": {"bytes": 40 * MiB}}) for k in range(2)]
    rec = overhead.calibrate(runs, tmp_path / "o.json", margin=0.1, margin_min_bytes=MiB, spread_factor=3)
    assert (rec["overhead_bytes"], rec["spread_bytes"], rec["spread_margin_bytes"]) == (34 * MiB, 8 * MiB, 24 * MiB)
    assert rec["reserve_bytes"] == 34 * MiB + 24 * MiB  # 3 x spread beats 10 % of O and the floor
    quiet = overhead.calibrate(runs[:1] + runs[3:], tmp_path / "q.json", margin=0.1, margin_min_bytes=MiB,
                               spread_factor=3)
    assert quiet["spread_bytes"] == 0 and quiet["reserve_bytes"] == 30 * MiB + 3 * MiB  # one rep each: no spread


def test_a_run_that_peaked_below_the_weights_it_held_is_refused(tmp_path):
    # Arm A's model is 40 MiB; a peak of 20 MiB means another process had half of it cached.
    a = _run(tmp_path, "a", 20 * MiB, {"subcommand": "generate", "arm": "kernel-mmap", "model": {"bytes": 40 * MiB}})
    d = _run(tmp_path, "d", 2 * MiB + 30 * MiB, _pager(0))
    with pytest.raises(overhead.CalibrationError, match=r"a peaked at 20971520 bytes \(its cgroup\), below the 41943040"):
        overhead.calibrate([d, a], tmp_path / "o.json")
    assert not (tmp_path / "o.json").exists()
