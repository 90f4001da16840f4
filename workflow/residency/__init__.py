"""residency: the Python half of the evidence pipeline.

Harness (cgroup + residctl), gather (run directories -> Parquet), the Belady bound,
statistics, figures, tables and claim records. One module per concern.
"""

__version__ = "0.1.0"
