"""core: the vocabulary and the records every layer shares: identities and digests, atomic
writes, run manifests, table lineage, the config and its schema, the trace format, the
machine record, the arm names, the Snakemake lock. Imports nothing of residency."""
