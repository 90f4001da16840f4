# Paper tables: CSV, Markdown and LaTeX from Parquet.

TABLES = [f"results/tables/pager-synthetic.{ext}" for ext in ("csv", "md", "tex")]


rule table_pager_synthetic:
    input:
        runs="results/pager_synthetic.parquet",
        opt="results/pager_synthetic_opt.parquet",
    output:
        TABLES,
    shell:
        "residency table pager-synthetic --runs {input.runs} --opt {input.opt} --out-stem results/tables/pager-synthetic"
