# The native engine: built once by CMake into a build directory the run rules depend on,
# linked against the pinned llama.cpp build, then asked which kernel features this machine
# has (recorded with every campaign).

# What builds residctl (its sources and build files; not the engine's tests).
ENGINE_SOURCES = sorted(
    str(p) for p in [*Path("engine/src").rglob("*"), *Path("engine/cmake").rglob("*"), Path("engine/CMakeLists.txt")]
    if p.is_file() and p.suffix in {".cpp", ".hpp", ".h", ".txt", ".cmake"}
)


rule engine:
    input:
        sources=ENGINE_SOURCES,
        llama=LLAMA_IDENTITY,
    output:
        RESIDCTL,
    params:
        # The real path: a working directory whose engine/ is a link (the tests') must not
        # leave a shared build dir configured against a path that goes away with it.
        src=str(Path("engine").resolve()),
        # CMake after clearing a cache configured for another path (a moved or copied checkout).
        configure=str(Path(workflow.basedir) / "workflow" / "scripts" / "cmake-configure.sh"),
        build_dir=lambda w, output: str(Path(output[0]).parent),
        build_type=config["engine"]["build_type"],
        llama_prefix=lambda w, input: str(Path(input.llama).parent.resolve()),
    log:
        f"{LOGS}/engine-build.log",
    conda:
        CONDA_ENV
    shell:
        "({params.configure:q} {params.src:q} {params.build_dir:q} -DCMAKE_BUILD_TYPE={params.build_type:q}"
        " -DRESID_WITH_LLAMA=ON -DCMAKE_PREFIX_PATH={params.llama_prefix:q}"
        " && cmake --build {params.build_dir:q} --target residctl -j2) > {log:q} 2>&1"


rule probe:
    input:
        RESIDCTL,
    output:
        "results/probe.json",
    resources:
        storage_exclusive=1,
    log:
        f"{LOGS}/probe.log",
    conda:
        CONDA_ENV
    shell:
        "{input:q} probe --dir results > {output:q}.tmp 2> {log:q} && mv {output:q}.tmp {output:q}"


rule machine:
    output:
        "results/machine.json",
    log:
        f"{LOGS}/machine.log",
    conda:
        CONDA_ENV
    shell:
        "residency machine --out {output:q} 2> {log:q}"
