"""CI's comparison of the paper tables: the synthetic study regenerated at the fixed config
of tests/golden/config.yaml through Snakemake, its deterministic part byte for byte
against tests/golden/pager-synthetic.csv (`make golden` accepts a deliberate change)."""

import pytest

import golden_tables


@pytest.mark.integration
def test_synthetic_table_matches_the_golden_file(tmp_path):
    got = golden_tables.deterministic_part(golden_tables.regenerate(tmp_path))
    want = (golden_tables.GOLDEN / "pager-synthetic.csv").read_text()
    assert got == want, ("the synthetic study's counts changed; if that is intended, run `make golden` and commit "
                         "tests/golden/pager-synthetic.csv:\n" + golden_tables.diff(got, want))


def test_the_golden_part_keeps_counts_and_drops_what_timing_decides(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("arm_row,r,reps,ok,capacity_chunks,miss_rate,misses,opt_misses,evictions,bytes_per_pass,"
                     "opt_bytes_per_pass,wall_ms,peak_mib,limit_mib,bytes_over_opt\n"
                     "A (kernel mmap),0.5,2,2,32,0.37,71.5,128.0,0.0,1.13,0.67,277.5,65.5,65.5,1.69\n"
                     "D (declared),0.5,2,2,30,0.6875,132.0,132.0,102.0,0.6875,0.6875,195.1,63.8,65.5,1.0\n"
                     "E (prefetch),0.5,2,2,30,0.0121,2.5,132.0,102.0,0.6875,0.6875,157.5,63.8,65.5,1.0\n")
    assert golden_tables.deterministic_part(table) == (
        "arm_row,r,reps,ok,capacity_chunks,miss_rate,misses,opt_misses,evictions,bytes_per_pass,"
        "opt_bytes_per_pass,bytes_over_opt\n"
        "D (declared),0.5,2,2,30,0.6875,132.0,132.0,102.0,0.6875,0.6875,1.0\n"
        "E (prefetch),0.5,2,2,30,,,132.0,102.0,0.6875,0.6875,1.0\n")
