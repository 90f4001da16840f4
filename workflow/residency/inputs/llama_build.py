"""llama.cpp, pinned and built from source for the engine (never copied into this repository).

The pinned source is the `llama-cpp-python` sdist on PyPI, which vendors llama.cpp at a
known commit under `vendor/llama.cpp`: `fetch` downloads it with pip and checks its sha256
against the config's pin; `build` extracts `vendor/llama.cpp` (once per sdist digest;
the sdist's submodule HEAD must name the configured commit),
configures a CPU-only, static, Release build without tests, tools, examples, server or
OpenMP, builds it in a cached build directory and installs headers, static libraries and
CMake package files to a prefix. `llama-identity.json` in the prefix records the commit,
the sdist digest, the source kind, the exact CMake arguments, the compiler and the
digests of the installed libraries.

Instead of the sdist a user may point `llama.source_dir` at their own llama.cpp checkout;
its commit is `git rev-parse HEAD` when the directory is the top of a git work tree, else
the commit from the config, and the identity says which (and whether the tree was dirty).

    python -m residency.inputs.llama_build fetch --version 0.3.36 --sha256 HEX --out SDIST
    python -m residency.inputs.llama_build build --sdist SDIST --sdist-sha256 HEX --commit C \
        --build-dir .build/llama.cpp --identity .build/llama.cpp/install/llama-identity.json

Errors are one line (`llama error: ...`) and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from residency.core import atomic
from residency.core.identity import digest, sha256_file

PACKAGE = "llama-cpp-python"
VENDOR = "vendor/llama.cpp"
# Static libraries in link order (dependents first) and what they need from the system.
STATIC_LIBS = ["libllama.a", "libggml.a", "libggml-cpu.a", "libggml-base.a"]
SYSTEM_LIBS = ["-lpthread", "-lm", "-ldl"]
MARKER = ".residency-source.json"
ARGS_RECORD = "residency-cmake-args.json"


class LlamaBuildError(Exception):
    """One-line failure of fetching or building llama.cpp."""

    def __init__(self, what: str):
        super().__init__(f"llama error: {what}")


# ---------------------------------------------------------------------------- fetch

def fetch_sdist(version: str, sha256: str, out: str | Path, timeout_s: int = 900) -> dict:
    """pip download the pinned sdist, check its sha256, place it atomically at `out`."""
    out = Path(out)
    req = f"{PACKAGE}=={version}"
    with tempfile.TemporaryDirectory(prefix="residency-sdist-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--no-input", "-d", tmp, req]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise LlamaBuildError(f"{req}: pip download timed out after {timeout_s} s") from None
        if r.returncode != 0:
            lines = [ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip()]
            raise LlamaBuildError(f"{req}: pip download failed: {lines[-1] if lines else r.returncode}")
        found = sorted(Path(tmp).glob(f"{PACKAGE.replace('-', '_')}-{version}.tar.gz")) or \
            sorted(Path(tmp).glob("*.tar.gz"))
        if not found:
            raise LlamaBuildError(f"{req}: pip download produced no sdist")
        got = sha256_file(found[0])
        if got != sha256.lower():
            raise LlamaBuildError(f"{found[0].name}: sha256 mismatch: expected {sha256.lower()} got {got}")
        with atomic.atomic_path(out, suffix=".tar.gz") as dest:
            shutil.copyfile(found[0], dest)
    return {"path": str(out), "sha256": got, "bytes": out.stat().st_size}


def extract_vendor(sdist: str | Path, sha256: str, src_dir: str | Path,
                   commit: str | None = None) -> tuple[Path, str | None]:
    """Extract the sdist's vendor/llama.cpp into `src_dir` (reused while the digest matches).

    The sdist also carries the submodule's git metadata; its HEAD
    (`.git/modules/vendor/llama.cpp/HEAD`) names the vendored commit, which must equal
    `commit` when both are known. Returns (src_dir, vendored commit or None)."""
    sdist, src_dir = Path(sdist), Path(src_dir)
    if not sdist.is_file():
        raise LlamaBuildError(f"{sdist}: missing")
    got = sha256_file(sdist)
    if got != sha256.lower():
        raise LlamaBuildError(f"{sdist}: sha256 mismatch: expected {sha256.lower()} got {got}")

    def check(vendored):
        if vendored and commit and not vendored.startswith(commit.lower()):
            raise LlamaBuildError(f"{sdist.name} vendors llama.cpp {vendored}, but llama.commit is {commit}")
        return vendored

    marker = src_dir / MARKER
    if marker.is_file():
        try:
            rec = json.loads(marker.read_text())
            if rec.get("sdist_sha256") == got and "vendored_commit" in rec:
                return src_dir, check(rec["vendored_commit"])
        except (OSError, json.JSONDecodeError):
            pass
    src_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{src_dir.name}.", dir=src_dir.parent))
    os.chmod(staging, 0o755)
    try:
        with tarfile.open(sdist, "r:gz") as tf:
            members = tf.getmembers()
            top = members[0].name.split("/", 1)[0] if members else ""
            prefix = f"{top}/{VENDOR}/"
            vendored = None
            picked = []
            for m in members:
                if m.name == f"{top}/.git/modules/{VENDOR}/HEAD" and m.isfile():
                    head = tf.extractfile(m).read().decode("ascii", "replace").strip()
                    vendored = head if len(head) == 40 and all(c in "0123456789abcdef" for c in head) else None
                if not m.name.startswith(prefix):
                    continue
                m.name = m.name[len(prefix):]
                if m.name:
                    picked.append(m)
            if not picked:
                raise LlamaBuildError(f"{sdist}: has no {VENDOR}/")
            check(vendored)
            kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tf.extractall(staging, members=picked, **kw)
        for need in ("CMakeLists.txt", "include/llama.h", "ggml/CMakeLists.txt"):
            if not (staging / need).is_file():
                raise LlamaBuildError(f"{sdist}: {VENDOR}/{need} is missing")
        (staging / MARKER).write_text(json.dumps({"sdist": sdist.name, "sdist_sha256": got,
                                                  "vendored_commit": vendored}) + "\n")
        if src_dir.exists():
            shutil.rmtree(src_dir)
        os.replace(staging, src_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return src_dir, vendored


def user_checkout(source_dir: str | Path, config_commit: str) -> dict:
    """Commit and state of a user's llama.cpp checkout."""
    d = Path(source_dir).resolve()
    if not (d / "CMakeLists.txt").is_file() or not (d / "include" / "llama.h").is_file():
        raise LlamaBuildError(f"{source_dir}: not a llama.cpp source tree (no CMakeLists.txt and include/llama.h)")

    def git(*args):
        return subprocess.run(["git", "-C", str(d), *args], capture_output=True, text=True)

    top = git("rev-parse", "--show-toplevel")
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == d:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            raise LlamaBuildError(f"{source_dir}: git rev-parse HEAD failed: {head.stderr.strip()}")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())
        return {"commit": head.stdout.strip(), "commit_from": "git", "dirty": dirty, "source_dir": str(d)}
    return {"commit": config_commit, "commit_from": "config", "dirty": None, "source_dir": str(d)}


# ---------------------------------------------------------------------------- build

def cmake_args(prefix: str | Path, build_type: str, native: bool, commit: str, extra: list[str]) -> list[str]:
    """The -D flags of the engine's llama.cpp: CPU backend only, static, no OpenMP, no
    tests/tools/examples/server/app/common; `extra` is appended (and wins)."""
    return [
        f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DCMAKE_INSTALL_PREFIX={Path(prefix).resolve()}",
        "-DCMAKE_INSTALL_LIBDIR=lib",
        "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DGGML_BACKEND_DL=OFF",
        "-DGGML_CPU=ON",
        "-DGGML_OPENMP=OFF",
        f"-DGGML_NATIVE={'ON' if native else 'OFF'}",
        "-DGGML_CCACHE=OFF",
        "-DLLAMA_BUILD_COMMON=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_OPENSSL=OFF",
        f"-DLLAMA_BUILD_COMMIT={commit}",  # else build-info asks git, which may see our repository
        "-DLLAMA_BUILD_NUMBER=0",
        *extra,
    ]


def _run(cmd: list[str], what: str) -> None:
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=sys.stdout, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise LlamaBuildError(f"{what} failed (exit {r.returncode}); see the build log")


def _compiler(build_dir: Path) -> str | None:
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_CXX_COMPILER:"):
            cxx = line.split("=", 1)[1]
            r = subprocess.run([cxx, "--version"], capture_output=True, text=True)
            return r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else cxx
    return None


def build(src_dir: str | Path, build_dir: str | Path, prefix: str | Path, args: list[str], jobs: int,
          source_id: str | None = None) -> float:
    """Configure, build and install; return the seconds it took. The build directory is a
    cache: reused while the source (path and `source_id`, e.g. the sdist digest) and the
    arguments are unchanged, wiped otherwise (CMake keeps stale -D values in its cache, and
    an sdist's files keep their archive mtimes, so make alone would not see new sources)."""
    src_dir, build_dir, prefix = Path(src_dir).resolve(), Path(build_dir), Path(prefix)
    record = {"source": str(src_dir), "source_id": source_id, "args": args}
    rec_path = build_dir / ARGS_RECORD
    if build_dir.exists():
        try:
            same = json.loads(rec_path.read_text()) == record
        except (OSError, json.JSONDecodeError):
            same = False
        if not same:
            print(f"llama build: source or arguments changed; clearing {build_dir}", flush=True)
            shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    if prefix.exists():
        shutil.rmtree(prefix)
    t0 = time.monotonic()
    _run(["cmake", "-S", str(src_dir), "-B", str(build_dir), *args], "cmake configure")
    atomic.write_json(rec_path, record)
    _run(["cmake", "--build", str(build_dir), "-j", str(max(1, jobs))], "cmake build")
    _run(["cmake", "--install", str(build_dir)], "cmake install")
    seconds = time.monotonic() - t0
    for need in [*(f"lib/{x}" for x in STATIC_LIBS), "include/llama.h", "include/ggml.h",
                 "lib/cmake/llama/llama-config.cmake"]:
        if not (prefix / need).is_file():
            raise LlamaBuildError(f"the install prefix {prefix} lacks {need}")
    return seconds


def identity_record(*, commit: str, source: str, sdist: dict | None, checkout: dict | None,
                    args: list[str], build_type: str, native: bool, prefix: Path, build_dir: Path,
                    seconds: float | None) -> dict:
    prefix = Path(prefix)
    return {
        "commit": commit,
        "source": source,
        "sdist_version": sdist["version"] if sdist else None,
        "sdist_sha256": sdist["sha256"] if sdist else None,
        # the commit the sdist's own submodule metadata names (.git/modules/vendor/llama.cpp/HEAD)
        "sdist_vendored_commit": sdist["vendored_commit"] if sdist else None,
        "checkout": checkout,
        "build_type": build_type,
        "native": native,
        "cmake_args": args,
        "compiler": _compiler(Path(build_dir)),
        "build_seconds": round(seconds, 1) if seconds is not None else None,
        "prefix": str(prefix.resolve()),
        "include_dir": str((prefix / "include").resolve()),
        "lib_dir": str((prefix / "lib").resolve()),
        "static_libs": STATIC_LIBS,
        "system_libs": SYSTEM_LIBS,
        "openmp": False,
        "libs_sha256": {x: sha256_file(prefix / "lib" / x) for x in STATIC_LIBS},
    }


# What a build is (its source, how it was configured and compiled, the libraries' bytes),
# not where it lies or how long it took.
BUILD_FIELDS = ("commit", "source", "sdist_sha256", "checkout", "build_type", "native", "compiler", "libs_sha256")


def build_digest(identity: dict) -> str:
    """The llama.cpp build identity recorded with every run and in every claim's scope."""
    args = [a for a in identity.get("cmake_args", []) if not a.startswith("-DCMAKE_INSTALL_PREFIX=")]
    return digest({k: identity.get(k) for k in BUILD_FIELDS} | {"cmake_args": args})


def build_from_config(*, sdist: str | None, sdist_sha256: str, sdist_version: str, commit: str,
                      source_dir: str | None, build_dir: str, build_type: str, native: bool,
                      extra: list[str], identity_out: str, jobs: int) -> dict:
    bdir = Path(build_dir)
    prefix = bdir / "install"
    if source_dir:
        checkout = user_checkout(source_dir, commit) | {"config_commit": commit}
        if checkout["commit"] != commit:
            print(f"llama build: note: {source_dir} is at {checkout['commit']}, not the configured {commit};"
                  " the checkout's commit is recorded", flush=True)
        src, source, sd, commit = Path(checkout["source_dir"]), "user-checkout", None, checkout["commit"]
    else:
        if not sdist:
            raise LlamaBuildError("no --sdist given and no llama.source_dir configured")
        checkout = None
        src, vendored = extract_vendor(sdist, sdist_sha256, bdir / "src", commit)
        source = "pypi-sdist"
        sd = {"version": sdist_version, "sha256": sdist_sha256.lower(), "vendored_commit": vendored}
    args = cmake_args(prefix, build_type, native, commit, extra)
    seconds = build(src, bdir / "build", prefix, args, jobs,
                    source_id=sd["sha256"] if sd else f"checkout:{checkout['commit']}")
    rec = identity_record(commit=commit, source=source, sdist=sd, checkout=checkout, args=args,
                          build_type=build_type, native=native, prefix=prefix, build_dir=bdir / "build",
                          seconds=seconds)
    atomic.write_json(identity_out, rec)
    print(f"llama build: commit {commit} ({source}) built and installed to {prefix} in {seconds:.0f} s",
          flush=True)
    return rec


# ---------------------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m residency.inputs.llama_build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("fetch", help="download the pinned llama-cpp-python sdist and check its sha256")
    s.add_argument("--version", required=True)
    s.add_argument("--sha256", required=True)
    s.add_argument("--out", required=True)
    s = sub.add_parser("build", help="extract vendor/llama.cpp (or use a checkout), build, install")
    s.add_argument("--sdist", default=None)
    s.add_argument("--sdist-sha256", default="")
    s.add_argument("--sdist-version", default="")
    s.add_argument("--commit", required=True, help="the commit the sdist vendors (recorded)")
    s.add_argument("--source-dir", default=None, help="a llama.cpp checkout instead of the sdist")
    s.add_argument("--build-dir", required=True)
    s.add_argument("--build-type", default="Release", choices=["Release", "RelWithDebInfo", "Debug"])
    s.add_argument("--native", default="true", choices=["true", "false"])
    s.add_argument("--cmake-arg", action="append", default=[], help="extra -D flag (repeatable)")
    s.add_argument("--identity", required=True)
    s.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    a = p.parse_args(argv)
    try:
        if a.command == "fetch":
            rec = fetch_sdist(a.version, a.sha256, a.out)
            print(f"llama fetch: {rec['path']}: sha256 {rec['sha256']} verified", file=sys.stderr)
        else:
            build_from_config(sdist=a.sdist, sdist_sha256=a.sdist_sha256, sdist_version=a.sdist_version,
                              commit=a.commit, source_dir=a.source_dir, build_dir=a.build_dir,
                              build_type=a.build_type, native=a.native == "true", extra=a.cmake_arg,
                              identity_out=a.identity, jobs=a.jobs)
    except LlamaBuildError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
