#!/usr/bin/env bash
# Runs every fuzz target of a fuzz build for SECONDS each, one after another on one core, and
# prints per target its executions and findings (crash, leak, timeout, oom, slow-unit
# artifacts: each is an input that made the target abort, leak, run past -timeout or past
# -rss_limit_mb). A target's working corpus (BUILD/corpus/<target>, grown from
# engine/fuzz/corpus/<target>) is kept between runs; findings land in BUILD/findings/<target>/.
# With RUNS, each target runs until RUNS executions (SECONDS is then its cap), and one that
# stops short of RUNS fails the run too.
# Exit status 1 when any target found anything (or stopped short of RUNS).
# Usage: engine/fuzz/run.sh BUILD SECONDS [RUNS]
set -uo pipefail
build=$1
seconds=$2
runs=${3:-}
seeds=$(cd "$(dirname "$0")" && pwd)/corpus
fail=0
summary=()
for t in $(cat "$build/fuzz_targets.txt"); do
  work=$build/corpus/$t findings=$build/findings/$t log=$build/logs/$t.log
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  rm -f "$findings"/*
  start=$(date +%s)
  "$build/fuzz_$t" -max_total_time="$seconds" ${runs:+-runs="$runs"} -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "$seeds/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(find "$findings" -type f | wc -l)
  took=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    fail=1
    what=$(grep -m1 -E "^(FINDING|==[0-9]+==ERROR|SUMMARY)" "$log" || echo "exit status $rc")
    line="$t: ${execs:-?} executions in ${took} s, $found finding(s): $what (log: $log; inputs: $findings/)"
  elif [ -n "$runs" ] && [ "${execs:-0}" -lt "$runs" ]; then
    fail=1
    line="$t: ${execs:-?} executions in ${took} s, 0 findings, short of $runs executions (cap ${seconds} s)"
  else
    line="$t: ${execs:-?} executions in ${took} s, 0 findings"
  fi
  echo "fuzz $line"
  summary+=("$line")
done
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
exit $fail
