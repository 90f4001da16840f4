#!/usr/bin/env bash
# cmake-configure.sh SRC BUILD [CMAKE ARGS...]: `cmake -S SRC -B BUILD ARGS`, after clearing
# BUILD's cache when it was configured for another source or build directory (a moved or
# copied checkout), which CMake refuses with "CMakeCache.txt directory ... is different".
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: cmake-configure.sh SRC BUILD [CMAKE ARGS...]" >&2; exit 2; }
src=$1 build=$2
shift 2
cache=$build/CMakeCache.txt
if [[ -f "$cache" ]]; then
  was_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")
  was_build=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$cache")
  if [[ "$(realpath -m -- "$was_src")" != "$(realpath -m -- "$src")" ||
        "$(realpath -m -- "$was_build")" != "$(realpath -m -- "$build")" ]]; then
    echo "cmake-configure: $build was configured for $was_src (in $was_build); configuring it afresh for $(realpath -m -- "$src")" >&2
    rm -rf -- "$cache" "$build/CMakeFiles"
  fi
fi
exec cmake -S "$src" -B "$build" "$@"
