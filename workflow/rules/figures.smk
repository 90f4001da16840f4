# Figures: each drawn by one function from Parquet only.

FIGURES = [
    f"figures/{stem}.{ext}"
    for stem in ("02-miss-rate-vs-optimal", "04-reclaim-authority", "06-real-model-bytes", "07-throughput-scaling",
                 "08-matched-source-pairs")
    for ext in ("png", "pdf")
]


rule figure_02:
    input:
        runs="results/pager_synthetic.parquet",
        opt="results/pager_synthetic_opt.parquet",
        code=residency_code("figure", "02"),
    output:
        report("figures/02-miss-rate-vs-optimal.png", caption="../report/figure-02.rst", category="Figures",
               subcategory="pager study, synthetic"),
        "figures/02-miss-rate-vs-optimal.pdf",
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/figure-02.log",
    conda:
        CONDA_ENV
    shell:
        "residency figure 02 --runs {input.runs:q} --opt {input.opt:q} --out-stem {params.stem:q} 2> {log:q}"


rule figure_model:
    input:
        runs="results/pager_model.parquet",
        opt="results/pager_model_opt.parquet",
        roofline="results/pager_model_roofline.parquet",
        code=residency_code("figure"),
    output:
        report("figures/{number}-{name}.png", caption="../report/figure-model.rst", category="Figures",
               subcategory="pager study, real model"),
        "figures/{number}-{name}.pdf",
    wildcard_constraints:
        number="06|07",
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/figure-{{number}}-{{name}}.log",
    conda:
        CONDA_ENV
    shell:
        "residency figure {wildcards.number:q} --runs {input.runs:q} --opt {input.opt:q} --roofline {input.roofline:q}"
        " --out-stem {params.stem:q} 2> {log:q}"


rule figure_08:
    input:
        runs="results/matched_source.parquet",
        code=residency_code("figure", "08"),
    output:
        report("figures/08-matched-source-pairs.png", caption="../report/figure-08.rst", category="Figures",
               subcategory="matched source campaign"),
        "figures/08-matched-source-pairs.pdf",
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/figure-08.log",
    conda:
        CONDA_ENV
    shell:
        "residency figure 08 --runs {input.runs:q} --out-stem {params.stem:q} 2> {log:q}"


rule figure_04:
    input:
        runs="results/reclaim.parquet",
        code=residency_code("figure", "04"),
    output:
        "figures/04-reclaim-authority.png",
        "figures/04-reclaim-authority.pdf",
    params:
        stem=lambda w, output: str(Path(output[0]).with_suffix("")),
    log:
        f"{LOGS}/figure-04.log",
    conda:
        CONDA_ENV
    shell:
        "residency figure 04 --runs {input.runs:q} --out-stem {params.stem:q} 2> {log:q}"
