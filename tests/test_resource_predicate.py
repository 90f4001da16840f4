"""The resource predicate, written once (evidence/resource.py): its terms, what None means,
that every gathered table with host counters records it beside its inputs, and that the
committed tables' recorded values are the predicate of their own columns."""

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from residency.evidence import resource
from residency.gather import base, studies

ROOT = Path(__file__).resolve().parents[1]
counts = st.one_of(st.none(), st.integers(0, 3))
sizes = st.one_of(st.none(), st.integers(0, 1 << 30))


def hc(grade="hard", limit=100, peak=90, limit_events=0, pressure_events=0, oom_kills=0):
    return resource.HostCounters(grade, limit, peak, limit_events, pressure_events, oom_kills)


def test_a_run_inside_its_hard_limit_is_admissible():
    assert resource.admissible(hc()) is True
    assert resource.admissible(hc(pressure_events=None)) is True  # v2: no vmpressure counter


@pytest.mark.parametrize("change", [{"peak": 100}, {"peak": 101}, {"limit_events": 1}, {"pressure_events": 2},
                                    {"oom_kills": 1}])
def test_each_term_alone_makes_it_fail(change):
    assert resource.admissible(hc(**change)) is False


@pytest.mark.parametrize("change", [{"grade": "soft"}, {"grade": "instrumented"}, {"grade": None}, {"limit": None},
                                    {"peak": None}, {"limit_events": None}, {"oom_kills": None}])
def test_what_it_cannot_say_is_none(change):
    assert resource.admissible(hc(**change)) is None


@given(st.sampled_from(["hard", "soft", "instrumented", "unenforced", None]), sizes, sizes, counts, counts, counts)
def test_it_is_the_conjunction_of_its_terms(grade, limit, peak, le, pe, oom):
    c = resource.HostCounters(grade, limit, peak, le, pe, oom)
    t = resource.terms(c)
    got = resource.admissible(c)
    assert set(t) == set(resource.TERMS)
    if grade != "hard":
        assert got is None
    elif None in t.values():
        assert got is None
    else:
        assert got is (peak < limit and le == 0 and (pe or 0) == 0 and oom == 0)


def test_a_table_row_reads_like_the_harness_record():
    host = {"grade": "hard", "limit_bytes": 100,
            "cgroup": {"peak_bytes": 90, "limit_events": 0, "pressure_events": 4, "oom_kills": 0}}
    row = {"host_grade": "hard", "limit_bytes": 100.0, "peak_bytes": 90, "limit_events": 0, "pressure_events": 4,
           "oom_kills": 0, "other": 1}
    assert resource.HostCounters.of_harness(host) == resource.HostCounters.of_row(row)
    assert resource.admissible(resource.HostCounters.of_row(pd.Series(row))) is False
    nan = pd.Series({"host_grade": float("nan"), "limit_bytes": float("nan")})  # pandas' nulls
    assert resource.HostCounters.of_row(nan) == resource.HostCounters(None, None, None, None, None, None)


def test_every_table_with_host_counters_records_the_predicate_and_its_inputs():
    for study, schema in studies.SCHEMA_OF_STUDY.items():
        if "host_grade" not in schema.names:
            continue
        assert "admissible" in schema.names, study
        inputs = set(resource.COLUMNS) if study != "certificate" else {
            "host_grade", "limit_bytes", "peak_bytes", "limit_events_total", "oom_kills"}
        assert inputs <= set(schema.names), f"{study}: {inputs - set(schema.names)}"
    assert [n for n, _ in base.PREDICATE_COLUMNS] == list(resource.COLUMNS) + ["admissible"]


def _recorded(v):
    return None if v is None or v != v else bool(v)


@pytest.mark.parametrize("name", ["pager_synthetic", "pager_model", "matched_source", "bounded_source", "reclaim",
                                  "faults", "faults_reset_warm", "tasks", "cache_transfer", "speculative"])
def test_a_committed_tables_recorded_predicate_is_that_of_its_columns(name):
    path = ROOT / "results" / f"{name}.parquet"
    t = pd.read_parquet(path) if path.exists() else None
    if t is None or "admissible" not in t.columns:
        pytest.skip(f"{path.name}: not committed, or gathered before the predicate was recorded")
    got = [resource.admissible(resource.HostCounters.of_row(r)) for _, r in t.iterrows()]
    assert got == [_recorded(v) for v in t["admissible"]]


def test_the_committed_certificate_records_the_predicate_of_its_boundary():
    path = ROOT / "results" / "certificate.parquet"
    if not path.exists():
        pytest.skip("certificate.parquet is not committed in this checkout")
    for _, r in pd.read_parquet(path).iterrows():
        cert = json.loads(r["certificate_json"])
        h = cert["B"]["host"]
        # B records limit and pressure events summed: the sum stands in for both counters.
        c = resource.HostCounters(cert["A"]["host"], h["h_cap_bytes"], h["peak_bytes"], h["limit_events"], None,
                                  h["oom_kills"])
        assert resource.admissible(c) is cert["admissible"]
