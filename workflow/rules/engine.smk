# The native engine: built once by CMake into a build directory the run rules depend on,
# then asked which kernel features this machine has (recorded with every campaign).

ENGINE_SOURCES = sorted(
    str(p) for p in Path("engine").rglob("*")
    if p.is_file() and p.suffix in {".cpp", ".hpp", ".h", ".txt", ".cmake"} and "build" not in p.parts
)


rule engine:
    input:
        ENGINE_SOURCES,
    output:
        RESIDCTL,
    params:
        build_dir=config["engine"]["build_dir"],
        build_type=config["engine"]["build_type"],
    log:
        "results/logs/engine-build.log",
    shell:
        "(cmake -S engine -B {params.build_dir} -DCMAKE_BUILD_TYPE={params.build_type}"
        " && cmake --build {params.build_dir} --target residctl -j2) > {log} 2>&1"
        " || (tail -n 30 {log} >&2; exit 1)"


rule probe:
    input:
        RESIDCTL,
    output:
        "results/probe.json",
    shell:
        "mkdir -p results && {input} probe --dir results > {output}.tmp && mv {output}.tmp {output}"


rule machine:
    output:
        "results/machine.json",
    shell:
        "residency machine --out {output}"
