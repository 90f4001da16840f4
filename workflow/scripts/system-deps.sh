#!/usr/bin/env bash
# Check the system packages the engine needs; install them with apt-get when this is
# Debian/Ubuntu and we are root, otherwise stop with the exact command to run.
set -euo pipefail

pkgs_debian=(g++ cmake ninja-build make pkg-config liburing-dev libxxhash-dev fio libgtest-dev nlohmann-json3-dev libcli11-dev)

missing=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }

have_cmd g++ || missing+=(g++)
have_cmd cmake || missing+=(cmake)
have_cmd ninja || missing+=(ninja-build)
have_cmd make || missing+=(make)
have_cmd pkg-config || missing+=(pkg-config)
have_cmd fio || missing+=(fio)
{ have_cmd pkg-config && pkg-config --exists liburing; } || missing+=(liburing-dev)
{ have_cmd pkg-config && pkg-config --exists libxxhash; } || missing+=(libxxhash-dev)
have_header gtest/gtest.h || missing+=(libgtest-dev)
have_header nlohmann/json.hpp || missing+=(nlohmann-json3-dev)
have_header CLI/CLI.hpp || missing+=(libcli11-dev)

if have_cmd g++; then
  if ! echo 'int main(){ return [] consteval { return 0; }(); }' | g++ -std=c++20 -x c++ - -o /dev/null 2>/dev/null; then
    echo "system-deps: g++ does not compile C++20 (need g++ >= 11)" >&2
    exit 1
  fi
fi

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
  echo "system-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -q >/dev/null 2>&1
    apt-get install -y -q "${missing[@]}" >/dev/null
  }
  exit 0
fi

echo "system-deps: missing ${missing[*]}; install them with:" >&2
echo "  sudo apt-get install -y ${pkgs_debian[*]}" >&2
exit 1
