#!/usr/bin/env bash
# make bench: every benchmark in one run, its rows in results/bench/bench.json (bench/rows.py),
# the machine's CPU shares over the run in results/bench/conditions.json (bench/conditions.py),
# and the table of docs/benchmarks.md rewritten from both.
#
# A fair fio comparison needs fio's buffers on huge pages, as residctl's windows are. As root,
# when no hugetlbfs mount has enough free huge pages, this reserves them and mounts one for
# the run, and puts both back as they were on exit (vm.nr_hugepages, the mount). Without
# root and without such a mount the fio rows are written as not comparable, never as met.
# Usage: bench/run.sh [PYTHON]   (the venv's python; default .venv/bin/python)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-$repo/.venv/bin/python}"
cd "$repo"

pages=32  # 64 MiB: fio's 8 buffers of 2 MiB (stream_vs_fio) and one of the chunk size, twice over
mount_dir="" old_pages=""
restore() {
  if [[ -n "$mount_dir" ]]; then umount "$mount_dir" 2>/dev/null || true; rmdir "$mount_dir" 2>/dev/null || true; fi
  if [[ -n "$old_pages" ]]; then echo "$old_pages" >/proc/sys/vm/nr_hugepages || true; fi
}
trap restore EXIT

huge="$(awk '$3 == "hugetlbfs" {print $2; exit}' /proc/mounts || true)"
free_pages="$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)"
if [[ -z "$huge" || "${free_pages:-0}" -lt "$pages" ]] && [[ "$(id -u)" -eq 0 ]]; then
  old_pages="$(cat /proc/sys/vm/nr_hugepages)"
  echo $((old_pages + pages)) >/proc/sys/vm/nr_hugepages
  free_pages="$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)"
  if [[ -z "$huge" ]]; then
    mount_dir="$(mktemp -d /tmp/bench-hugetlbfs.XXXXXX)"
    mount -t hugetlbfs none "$mount_dir"
    huge="$mount_dir"
  fi
  echo "bench: reserved $pages huge pages (vm.nr_hugepages $old_pages -> $((old_pages + pages)), $free_pages free) on $huge for fio's buffers; put back on exit"
fi
if [[ -z "$huge" || "${free_pages:-0}" -lt "$pages" ]]; then
  echo "bench: no hugetlbfs mount with $pages free huge pages and not root to make one: the fio rows are not comparable"
  huge=""
fi

rm -f results/bench/bench.json results/bench/conditions.json
"$py" bench/conditions.py start  # the machine's CPU counters now and at the end (other tenants' steal)
"$py" bench/pager_model.py ${huge:+--hugetlbfs "$huge"}
"$py" bench/consumption.py
"$py" bench/matched_overlap.py
"$py" bench/pager_nice.py
engine/bench/stream_vs_fio.sh ${huge:+--hugetlbfs "$huge"}
echo
"$py" bench/conditions.py end
echo "bench rows (results/bench/bench.json):"
"$py" bench/rows.py table
"$py" bench/rows.py table --update docs/benchmarks.md
