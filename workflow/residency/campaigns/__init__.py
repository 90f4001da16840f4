"""campaigns: what Snakemake needs to lay a study out: its cells, run paths and residctl
flags, the task set, the fault cells, the progress counts. No pandas, no pyarrow (the
Snakefile imports it at parse time). Imports core only."""
