"""Every study's gather, by study name: how `verify --deep` makes a table again from the
lineage it carries (gather_base.write attached it). The one module that knows them all, so
no study's gather imports another's."""

from __future__ import annotations

import pyarrow as pa

from residency.gather import pager
from residency.gather import cache_transfer as gather_cache_transfer, certificate as gather_certificate, faults as gather_faults, reclaim as gather_reclaim, roofline as gather_roofline
from residency.gather import speculative as gather_speculative, tasks as gather_tasks

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
