"""render: the paper tables, figures and report pages drawn from Parquet and claim records.
Imports claims and below."""
