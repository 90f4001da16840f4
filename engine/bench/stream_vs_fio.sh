#!/usr/bin/env bash
# residctl stream against fio on one file, interleaved (A B A B ...), in one go:
#
#   pair F: residctl stream --source uring --windows 8 --depth 8   vs  fio --ioengine=io_uring --direct=1 --iodepth=8
#   pair D: residctl stream --source direct (one window, blocking)  vs  fio --ioengine=psync    --direct=1 --iodepth=1
#
# Both read the whole file sequentially in window-sized requests (--bs = --window-bytes).
# Prints every run's throughput, the means, and the ratios uring/fio and direct/fio (target
# >= 0.95 each, as geometric means of the pairs), and writes both as rows of
# results/bench/bench.json (bench/rows.py): not comparable, never met, when fio's buffers are
# not on huge pages. The stream number is the complete component: O_DIRECT reads into
# 2 MiB-aligned huge-page windows, the window -> slot copy, consumer threads hashing every
# byte and checking it against the region's pattern, and the Plan's full ticket lifecycle;
# fio only reads.
#
# Usage: engine/bench/stream_vs_fio.sh [--residctl PATH] [--file PATH] [--size BYTES] [--seed N]
#                                      [--reps N] [--window-bytes N] [--hugetlbfs DIR] [--out DIR]
# Needs: residctl (built), fio, python3. The file is a `residctl mkregion` region of --seed
# (made when missing): the stream checks every byte against the pattern (--pattern-seed), so
# no read of the file precedes a timed run (a buffered reference read would warm a host cache
# for the stream and not for fio). --hugetlbfs DIR: a hugetlbfs mount with free huge pages for
# fio's buffers (--iomem=mmaphuge); found in /proc/mounts when not given.
# O_DIRECT bypasses the guest page cache, so no cache drop is needed between runs; a virtual
# disk may still be cached by the host, which this script cannot control (it says so).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
residctl="${RESIDCTL:-$repo/.build/engine/residctl}"
file=/var/tmp/residctl-bench/region-1g.bin
size=$((1 << 30))
seed=1
reps=3
hugetlbfs=""
wbytes=$((2 << 20))
out=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --residctl) residctl="$2"; shift 2 ;;
    --file) file="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --hugetlbfs) hugetlbfs="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --window-bytes) wbytes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "stream_vs_fio: unknown argument $1" >&2; exit 2 ;;
  esac
done

[[ -x "$residctl" ]] || { echo "stream_vs_fio: residctl not found at $residctl (build it, or pass --residctl)" >&2; exit 2; }
command -v fio >/dev/null || { echo "stream_vs_fio: fio is not installed" >&2; exit 2; }
command -v python3 >/dev/null || { echo "stream_vs_fio: python3 is needed" >&2; exit 2; }
[[ "$reps" -ge 3 ]] || { echo "stream_vs_fio: --reps must be >= 3" >&2; exit 2; }

[[ -n "$out" ]] || out="$(mktemp -d /var/tmp/stream-vs-fio.XXXXXX)"
mkdir -p "$out" "$(dirname "$file")"
if [[ ! -f "$file" ]] || [[ "$(stat -c %s "$file")" -ne "$size" ]]; then
  echo "making $file ($size bytes) with residctl mkregion"
  "$residctl" mkregion --out "$file" --size "$size" --seed "$seed"
fi

# fio's buffers: huge pages need a hugetlbfs mount with reserved pages; otherwise 2 MiB-aligned
# ordinary buffers (residctl's windows are 2 MiB aligned and MADV_HUGEPAGE advised).
[[ -n "$hugetlbfs" ]] || hugetlbfs="$(awk '$3 == "hugetlbfs" {print $2; exit}' /proc/mounts || true)"
huge_total="$(awk '/^HugePages_Total/ {print $2}' /proc/meminfo)"
huge_free="$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)"
need_pages=$(( (wbytes * 8 + (2 << 20) - 1) / (2 << 20) + 1 ))
unfair=""
if [[ -n "$hugetlbfs" && "${huge_free:-0}" -ge "$need_pages" ]]; then
  fio_mem=(--iomem="mmaphuge:$hugetlbfs/stream-vs-fio.buf")
  fio_mem_note="fio buffers: mmaphuge on $hugetlbfs"
else
  unfair="fio's buffers are not on huge pages (no hugetlbfs mount with $need_pages free huge pages), residctl's windows are: the comparison favours residctl"
  fio_mem=(--iomem_align=2m)
  fio_mem_note="fio buffers: --iomem_align=2m (no hugetlbfs mount with $need_pages free huge pages: HugePages_Total=${huge_total:-0}, Free=${huge_free:-0}), so fio's buffers are 2 MiB aligned but NOT huge-page backed, while residctl's windows are (MADV_HUGEPAGE): the comparison favours residctl"
fi

run_stream() {  # $1 = uring|direct, $2 = run tag
  local dir="$out/$2"
  rm -rf "$dir"
  local extra=()
  [[ "$1" == uring ]] && extra=(--windows 8 --depth 8)
  "$residctl" stream --file "$file" --object-bytes "$wbytes" --window-bytes "$wbytes" --source "$1" \
    "${extra[@]}" --slots 8 --consumers 2 --passes 1 --pattern-seed "$seed" --out "$dir" >/dev/null
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["status"]=="ok", j["error"]; print(j["throughput_gib_s"])' "$dir/run.json"
}

run_fio() {  # $1 = io_uring|psync, $2 = iodepth, $3 = run tag
  fio --name=seqread --filename="$file" --size="$size" --rw=read --bs="$wbytes" --direct=1 \
    --ioengine="$1" --iodepth="$2" "${fio_mem[@]}" --output-format=json >"$out/$3.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["jobs"][0]["read"]["bw_bytes"] / 2**30)' "$out/$3.json"
}

echo "file: $file ($size bytes); window/bs: $wbytes bytes; reps: $reps; logs: $out"
echo "$fio_mem_note"
echo "residctl: $residctl; $(fio --version)"
echo "note: a virtual disk may be cached by the host; O_DIRECT only bypasses this machine's page cache"
results="$out/results.tsv"
printf 'rep\tpair\tarm\tgib_s\n' >"$results"
for ((r = 1; r <= reps; r++)); do
  a="$(run_stream uring "stream-uring-$r")"; printf '%d\tF\tstream-uring\t%s\n' "$r" "$a" >>"$results"
  b="$(run_fio io_uring 8 "fio-uring-$r")";  printf '%d\tF\tfio-io_uring\t%s\n' "$r" "$b" >>"$results"
  c="$(run_stream direct "stream-direct-$r")"; printf '%d\tD\tstream-direct\t%s\n' "$r" "$c" >>"$results"
  d="$(run_fio psync 1 "fio-psync-$r")";     printf '%d\tD\tfio-psync\t%s\n' "$r" "$d" >>"$results"
  printf 'rep %d: stream uring %.3f  fio io_uring %.3f  |  stream direct %.3f  fio psync %.3f GiB/s\n' "$r" "$a" "$b" "$c" "$d"
done

python3 - "$results" "$out/summary.json" "$repo" "$unfair" <<'PY'
import csv, json, math, statistics, sys
sys.path.insert(0, sys.argv[3] + "/bench")
import rows as bench_rows
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault(r["arm"], []).append(float(r["gib_s"]))
def pair_ratios(a, b):
    return [x / y for x, y in zip(by[a], by[b])]
def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))
out = {"runs": by, "mean_gib_s": {k: statistics.mean(v) for k, v in by.items()},
       "median_gib_s": {k: statistics.median(v) for k, v in by.items()}}
for name, a, b in (("uring_over_fio", "stream-uring", "fio-io_uring"), ("direct_over_fio", "stream-direct", "fio-psync")):
    rs = pair_ratios(a, b)
    out[name] = {"per_pair": rs, "geometric_mean_of_pairs": gmean(rs),
                 "ratio_of_means": statistics.mean(by[a]) / statistics.mean(by[b]),
                 "min": min(rs), "max": max(rs)}
print()
print("%-15s %s" % ("arm", "GiB/s per rep (mean)"))
for k in ("stream-uring", "fio-io_uring", "stream-direct", "fio-psync"):
    print("%-15s %s  (%.3f)" % (k, " ".join("%.3f" % x for x in by[k]), out["mean_gib_s"][k]))
u, d = out["uring_over_fio"], out["direct_over_fio"]
print()
for name, v in (("residctl stream --source uring / fio io_uring, depth 8", u),
                ("residctl stream --source direct / fio psync, depth 1", d)):
    bench_rows.add(name, v["geometric_mean_of_pairs"], v["per_pair"], 0.95, "at least", why=sys.argv[4],
                   note="geometric mean of the pairs; ratio of means %.3f" % v["ratio_of_means"])
json.dump(out, open(sys.argv[2], "w"), indent=2)
PY
echo "summary: $out/summary.json"
