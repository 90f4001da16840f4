# llama.cpp, a pinned dependency built from source (never copied into this repository).
# The llama-cpp-python sdist on PyPI vendors llama.cpp at config llama.commit; its sha256 is
# pinned in config. The build is CPU-only, static, without OpenMP, tests, tools or server,
# in a cached build directory; the install prefix holds what the engine links:
#
#   {LLAMA_PREFIX}/include/llama.h, ggml*.h
#   {LLAMA_PREFIX}/lib/libllama.a libggml.a libggml-cpu.a libggml-base.a   (that link order)
#   {LLAMA_PREFIX}/lib/cmake/llama/llama-config.cmake                      (find_package(llama))
#   {LLAMA_IDENTITY}  commit, sdist sha256, source, CMake arguments, compiler, library digests
#
# `snakemake --cores 2 llama` builds it alone.

import sys

LLAMA = config["llama"]
LLAMA_DIR = LLAMA["build_dir"]
LLAMA_PREFIX = f"{LLAMA_DIR}/install"
LLAMA_IDENTITY = f"{LLAMA_PREFIX}/llama-identity.json"
LLAMA_LIBS = [f"{LLAMA_PREFIX}/lib/{lib}" for lib in ("libllama.a", "libggml.a", "libggml-cpu.a", "libggml-base.a")]
LLAMA_HEADER = f"{LLAMA_PREFIX}/include/llama.h"
LLAMA_SDIST = f"{LLAMA_DIR}/sdist/llama_cpp_python-{LLAMA['sdist_version']}.tar.gz"
LLAMA_PY = sys.executable  # the Python running Snakemake (has residency installed)


rule llama:
    input:
        LLAMA_IDENTITY,


rule llama_sdist:
    output:
        LLAMA_SDIST,
    params:
        py=LLAMA_PY,
        version=LLAMA["sdist_version"],
        sha256=LLAMA["sdist_sha256"],
    log:
        f"{LOGS}/llama-sdist.log",
    conda:
        CONDA_ENV
    shell:
        "{params.py:q} -m residency.inputs.llama_build fetch --version {params.version:q} --sha256 {params.sha256:q}"
        " --out {output:q} 2> {log:q}"


rule llama_build:
    input:
        sdist=[] if LLAMA["source_dir"] else [LLAMA_SDIST],
    output:
        identity=LLAMA_IDENTITY,
        libs=LLAMA_LIBS,
        header=LLAMA_HEADER,
    params:
        py=LLAMA_PY,
        sdist=lambda wc, input: ["--sdist", input.sdist[0]] if input.sdist else [],
        source_dir=["--source-dir", LLAMA["source_dir"]] if LLAMA["source_dir"] else [],
        sha256=LLAMA["sdist_sha256"],
        version=LLAMA["sdist_version"],
        commit=LLAMA["commit"],
        build_dir=lambda w, output: str(Path(output.identity).parent.parent),
        build_type=LLAMA["build_type"],
        native="true" if LLAMA["native"] else "false",
        extra=[f"--cmake-arg={a}" for a in LLAMA["cmake_args"]],
    threads: 2  # scaled down to --cores by Snakemake when fewer are given
    resources:
        mem_mb=4000,
    log:
        f"{LOGS}/llama-build.log",
    conda:
        CONDA_ENV
    shell:
        "{params.py:q} -m residency.inputs.llama_build build {params.sdist:q} {params.source_dir:q}"
        " --sdist-sha256 {params.sha256:q} --sdist-version {params.version:q} --commit {params.commit:q}"
        " --build-dir {params.build_dir:q} --build-type {params.build_type:q} --native {params.native:q}"
        " {params.extra:q} --identity {output.identity:q} -j {threads:q} > {log:q} 2>&1"
        " || (grep -m1 '^llama error' {log:q} >&2 || tail -n 30 {log:q} >&2; exit 1)"
