"""Every gathered table has declared columns (gather.studies.SCHEMA_OF_STUDY), and the
committed tables are what those declarations say."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from residency.gather import studies

ROOT = Path(__file__).resolve().parents[1]
# The committed tables, by the study whose gather made them.
COMMITTED = {"pager_synthetic": "pager-synthetic", "pager_model": "pager-model", "matched_source": "matched-source",
             "bounded_source": "matched-source", "reclaim": "reclaim", "certificate": "certificate",
             "faults": "faults", "faults_reset_warm": "reset-warm", "tasks": "tasks",
             "cache_transfer": "cache-transfer", "speculative": "speculative",
             "pager_model_roofline": "pager-model-roofline"}


def test_every_study_declares_its_columns():
    assert set(studies.SCHEMA_OF_STUDY) == set(studies.TABLE_OF_STUDY)
    for study, schema in studies.SCHEMA_OF_STUDY.items():
        assert isinstance(schema, pa.Schema) and len(schema) > 0, study
        assert not [f.name for f in schema if pa.types.is_null(f.type)], f"{study}: a column of no type"


@pytest.mark.parametrize("name, study", sorted(COMMITTED.items()))
def test_a_committed_table_has_its_studys_columns(name, study):
    path = ROOT / "results" / f"{name}.parquet"
    if not path.exists():
        pytest.skip(f"{path.name} is not committed in this checkout")
    got = pq.read_schema(path).remove_metadata()
    assert got.equals(studies.SCHEMA_OF_STUDY[study].remove_metadata()), f"{name}: {got} is not its declaration"
