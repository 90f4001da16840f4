"""Every gathered table by its study name (the registry, campaigns/studies.py): how `verify
--deep` makes a table again from the lineage it carries (base.write attached it), and its
declared columns. The registry names each gather's functions, resolved here, so no study's
gather imports another's."""

from __future__ import annotations

import pyarrow as pa

from residency.campaigns import studies
from residency.core.imports import resolve

TABLE_OF_STUDY = {g.name: resolve(g.table) for g in studies.gathers().values()}


def table_from(lin: dict) -> pa.Table:
    """The table a gather lineage describes, made again from its run directories."""
    return TABLE_OF_STUDY[lin["study"]](lin)


# Every gathered table's declared columns (tests/test_gather_schemas.py).
SCHEMA_OF_STUDY = {g.name: resolve(g.schema) for g in studies.gathers().values()}
