"""CI's comparison of the paper tables with tests/golden/ (tests/golden_tables.py): the
synthetic study's table regenerated at the fixed config of tests/golden/config.yaml, every
other paper table from the tiny campaign the integration tests run (the `campaign`
fixture), each table's declared deterministic part compared cell by cell; a mismatch names
the table, the row key and the column of each changed cell (`make golden` accepts a
deliberate change)."""

import pytest

import golden_tables
from golden_tables import GOLDEN, TABLES_DIR, compare, deterministic_part

ACCEPT = "if that is intended, run `make golden` and commit tests/golden/"


def _assert_same(name: str, got: str) -> None:
    changes = compare(name, got, (GOLDEN / f"{name}.csv").read_text())
    assert not changes, f"{name}: {len(changes)} change(s) from the golden table; {ACCEPT}{name}.csv:\n" + "\n".join(changes)


@pytest.mark.integration
def test_synthetic_table_matches_the_golden_file(tmp_path):
    _assert_same("pager-synthetic", deterministic_part("pager-synthetic", golden_tables.regenerate(tmp_path)))


@pytest.mark.integration
@pytest.mark.parametrize("name", golden_tables.CAMPAIGN_TABLES)
def test_campaign_table_matches_the_golden_file(campaign, name):
    work, _ = campaign
    _assert_same(name, deterministic_part(name, work / TABLES_DIR / f"{name}.csv"))


@pytest.mark.integration
def test_every_paper_table_the_campaign_makes_has_a_golden_file(campaign):
    work, _ = campaign
    made = {p.stem for p in (work / TABLES_DIR).glob("*.csv")}
    assert made <= set(golden_tables.TABLES), f"paper tables without a golden declaration: {sorted(made - set(golden_tables.TABLES))}"
    assert {p.stem for p in GOLDEN.glob("*.csv")} == set(golden_tables.TABLES)


# ---- the comparison itself, on small synthetic tables ------------------------------------

SYNTHETIC = ("arm_row,r,reps,ok,capacity_chunks,miss_rate,misses,opt_misses,evictions,bytes_per_pass,"
             "opt_bytes_per_pass,wall_ms,peak_mib,limit_mib,bytes_over_opt\n"
             "A (kernel mmap),0.5,2,2,32,0.37,71.5,128.0,0.0,1.13,0.67,277.5,65.5,65.5,1.69\n"
             "D (declared),0.5,2,2,30,0.6875,132.0,132.0,102.0,0.6875,0.6875,195.1,63.8,65.5,1.0\n"
             "E (prefetch),0.5,2,2,30,0.0121,2.5,132.0,102.0,0.6875,0.6875,157.5,63.8,65.5,1.0\n")
GOLDEN_PART = ("arm_row,r,reps,ok,capacity_chunks,miss_rate,misses,opt_misses,evictions,bytes_per_pass,"
               "opt_bytes_per_pass,bytes_over_opt\n"
               "D (declared),0.5,2,2,30,0.6875,132.0,132.0,102.0,0.6875,0.6875,1.0\n"
               "E (prefetch),0.5,2,2,30,,,132.0,102.0,0.6875,0.6875,1.0\n")


def _part(tmp_path, name: str, text: str) -> str:
    table = tmp_path / f"{name}.csv"
    table.write_text(text)
    return deterministic_part(name, table)


def test_the_golden_part_keeps_counts_and_drops_what_timing_decides(tmp_path):
    assert _part(tmp_path, "pager-synthetic", SYNTHETIC) == GOLDEN_PART


def test_a_changed_cell_is_named_by_table_row_key_and_column(tmp_path):
    got = _part(tmp_path, "pager-synthetic", SYNTHETIC.replace("102.0,0.6875,0.6875,195.1", "103.0,0.6875,0.6875,195.1"))
    assert compare("pager-synthetic", got, GOLDEN_PART) == [
        "pager-synthetic, row arm_row=D (declared), r=0.5, evictions: want '102.0' got '103.0'"]


def test_a_changed_timing_column_is_not_a_change(tmp_path):
    got = _part(tmp_path, "pager-synthetic", SYNTHETIC.replace("195.1,63.8", "999.9,70.1").replace("0.0121,2.5", "0.5,66"))
    assert compare("pager-synthetic", got, GOLDEN_PART) == []


def test_rows_and_columns_that_came_or_went_are_named(tmp_path):
    got = _part(tmp_path, "pager-synthetic", SYNTHETIC.replace("D (declared),0.5", "D (declared),0.75"))
    assert compare("pager-synthetic", got, GOLDEN_PART) == [
        "pager-synthetic, row arm_row=D (declared), r=0.5: gone", "pager-synthetic, row arm_row=D (declared), r=0.75: new"]
    dropped = GOLDEN_PART.replace(",bytes_over_opt\n", "\n").replace(",1.0\n", "\n")
    assert compare("pager-synthetic", dropped, GOLDEN_PART) == ["pager-synthetic: column 'bytes_over_opt' gone"]


def test_a_verdict_is_compared_only_for_the_claims_it_is_deterministic_for(tmp_path):
    text = ("ID,headline family,record,sha256,verdict,regenerate,verify,replay\n"
            "P1,f,claims/P1.json,aa,pass,r,v,p\n"
            "C5,f,claims/C5.json,bb,fail,r,v,p\n")
    want = _part(tmp_path, "table11-claim-map", text)
    assert want == ("ID,headline family,record,verdict,regenerate,verify,replay\n"
                    "P1,f,claims/P1.json,pass,r,v,p\n"
                    "C5,f,claims/C5.json,,r,v,p\n")
    got = _part(tmp_path, "table11-claim-map", text.replace("aa,pass", "cc,fail").replace("bb,fail", "dd,pass"))
    assert compare("table11-claim-map", got, want) == ["table11-claim-map, row ID=P1, verdict: want 'pass' got 'fail'"]


def test_a_column_no_declaration_names_stops_the_comparison(tmp_path):
    with pytest.raises(golden_tables.GoldenError, match="table6-matched-pairs: column 'G \\(s\\)' neither compared"):
        _part(tmp_path, "table6-matched-pairs", "Block,Order,D (s),F (s),F/D,G (s)\n1,D->F,1.0,0.9,0.9,2.0\n")


def test_patterned_columns_follow_their_declaration(tmp_path):
    got = _part(tmp_path, "models", "model,architecture,quant_types,t_repr_bytes,exact,D/OPT r=0.5,D/A bytes r=0.5,"
                                    "D/C bytes r=0.5,A tok/s,D tok/s,P2,P6,P7,P8,P9,P10,P11,C9\n"
                                    "m,llama,Q8_0,10,4/4,1.01,0.3,0.6,5.0,6.0,pass,fail,pass,pass,fail,pass,pass,pass\n")
    assert got == ("model,architecture,quant_types,t_repr_bytes,exact,D/OPT r=0.5,P7,P10,P11\n"
                   "m,llama,Q8_0,10,4/4,1.01,pass,pass,pass\n")


def test_a_repeated_row_key_is_an_error():
    with pytest.raises(golden_tables.GoldenError, match="repeats the row key Block=1"):
        compare("table6-matched-pairs", "Block,Order\n1,D->F\n1,F->D\n", "Block,Order\n1,D->F\n")


def test_every_declared_column_has_a_reason_or_is_compared():
    for name, t in golden_tables.TABLES.items():
        assert all(why.strip() for why in t.excluded.values()), name
        assert all(r.why.strip() and set(r.columns) <= set(t.compared) for r in t.only_in), name
        assert not set(t.key) & set(t.compared), name
