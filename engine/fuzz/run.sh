#!/usr/bin/env bash
# Runs every fuzz target of a fuzz build for SECONDS each, JOBS targets at a time (FUZZ_JOBS,
# default the number of cores: libFuzzer runs one process on one core, so two targets on two
# cores each get what one alone gets), and prints per target its executions and findings
# (crash, leak, timeout, oom, slow-unit artifacts: each is an input that made the target abort,
# leak, run past -timeout or past -rss_limit_mb). A target's working corpus
# (BUILD/corpus/<target>, grown from engine/fuzz/corpus/<target>) is kept between runs; findings
# land in BUILD/findings/<target>/.
# With RUNS, each target runs until RUNS executions (SECONDS is then its cap), and one that
# stops short of RUNS fails the run too.
# Exit status 1 when any target found anything (or stopped short of RUNS).
# Usage: engine/fuzz/run.sh BUILD SECONDS [RUNS]
set -uo pipefail
build=$1
seconds=$2
runs=${3:-}
jobs=${FUZZ_JOBS:-$(nproc)}
seeds=$(cd "$(dirname "$0")" && pwd)/corpus

# fuzz_one TARGET: runs it and writes its one summary line to BUILD/logs/TARGET.summary,
# prefixed "FAIL " when it found anything or stopped short of RUNS.
fuzz_one() {
  local t=$1 work=$build/corpus/$1 findings=$build/findings/$1 log=$build/logs/$1.log
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  rm -f "$findings"/*
  local start rc execs found took what line
  start=$(date +%s)
  "$build/fuzz_$t" -max_total_time="$seconds" ${runs:+-runs="$runs"} -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "$seeds/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(find "$findings" -type f | wc -l)
  took=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    what=$(grep -m1 -E "^(FINDING|==[0-9]+==ERROR|SUMMARY)" "$log" || echo "exit status $rc")
    line="FAIL $t: ${execs:-?} executions in ${took} s, $found finding(s): $what (log: $log; inputs: $findings/)"
  elif [ -n "$runs" ] && [ "${execs:-0}" -lt "$runs" ]; then
    line="FAIL $t: ${execs:-?} executions in ${took} s, 0 findings, short of $runs executions (cap ${seconds} s)"
  else
    line="$t: ${execs:-?} executions in ${took} s, 0 findings"
  fi
  echo "$line" >"$build/logs/$t.summary"
  echo "fuzz ${line#FAIL }"
}

targets=$(cat "$build/fuzz_targets.txt")
mkdir -p "$build/logs"
for t in $targets; do
  rm -f "$build/logs/$t.summary"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$t" &
done
wait

fail=0
echo "fuzz summary ($jobs at a time):"
for t in $targets; do
  line=$(cat "$build/logs/$t.summary" 2>/dev/null || echo "FAIL $t: no summary (the run was cut short)")
  case $line in FAIL*) fail=1 ;; esac
  echo "  ${line#FAIL }"
done
exit $fail
