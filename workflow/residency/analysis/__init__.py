"""analysis: derived tables and statistics: the Belady bound (OPT) per run, determinism,
the paired-log t intervals, the roofline bound. Imports gather and below."""
