"""Every study's gather, by study name: how `verify --deep` makes a table again from the
lineage it carries (base.write attached it), and its declared columns. The one module that knows them all, so
no study's gather imports another's."""

from __future__ import annotations

import pyarrow as pa

from residency.gather import cache_transfer as gather_cache_transfer
from residency.gather import certificate as gather_certificate
from residency.gather import faults as gather_faults
from residency.gather import pager
from residency.gather import reclaim as gather_reclaim
from residency.gather import roofline as gather_roofline
from residency.gather import speculative as gather_speculative
from residency.gather import tasks as gather_tasks

TABLE_OF_STUDY = {"pager-synthetic": pager.pager_synthetic_from,
                  "pager-model": pager.pager_model_from,
                  "matched-source": pager.matched_source_from,
                  "reclaim": gather_reclaim.reclaim_from,
                  "certificate": gather_certificate.certificate_table,
                  "faults": gather_faults.faults_table,
                  "reset-warm": gather_faults.reset_warm_table,
                  "tasks": gather_tasks.tasks_table,
                  "cache-transfer": gather_cache_transfer.cache_transfer_table,
                  "speculative": gather_speculative.speculative_table,
                  "pager-model-roofline": gather_roofline.roofline_table}


def table_from(lin: dict) -> pa.Table:
    """The table a gather lineage describes, made again from its run directories."""
    return TABLE_OF_STUDY[lin["study"]](lin)


# Every gathered table's declared columns (tests/test_gather_schemas.py).
SCHEMA_OF_STUDY = {"pager-synthetic": pager.PAGER_SYNTHETIC_SCHEMA,
                   "pager-model": pager.PAGER_MODEL_SCHEMA,
                   "matched-source": pager.MATCHED_SOURCE_SCHEMA,
                   "reclaim": gather_reclaim.RECLAIM_SCHEMA,
                   "certificate": gather_certificate.CERTIFICATE_SCHEMA,
                   "faults": gather_faults.FAULTS_SCHEMA,
                   "reset-warm": gather_faults.RESET_WARM_SCHEMA,
                   "tasks": gather_tasks.TASKS_SCHEMA,
                   "cache-transfer": gather_cache_transfer.CACHE_TRANSFER_SCHEMA,
                   "speculative": gather_speculative.SPECULATIVE_SCHEMA,
                   "pager-model-roofline": gather_roofline.SCHEMA}
