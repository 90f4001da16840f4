#!/usr/bin/env bash
# Runs one step of `make test` with its output held in LOG, then prints a header (the step,
# its exit status and its seconds) and the whole log, and exits with the step's status.
# make test runs its steps in lanes side by side (a ctest beside the next build); held this
# way, a step's lines come out together instead of interleaved with a build's.
# Usage: workflow/scripts/lane.sh NAME LOG COMMAND [ARG...]
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 NAME LOG COMMAND [ARG...]" >&2; exit 2; }
name=$1 log=$2
shift 2
mkdir -p "$(dirname "$log")"
start=$(date +%s)
"$@" >"$log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ]; then what="passed"; else what="FAILED (exit $rc)"; fi
echo "=== $name: $what in $took s; its output ($log):"
cat "$log"
echo "=== end of $name"
exit "$rc"
