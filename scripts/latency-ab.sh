#!/usr/bin/env bash
# Interleaved A/B of the testbed's latency experiment between two `weft` builds: PAIRS runs of
# `weft testbed run latency --only weft` each, alternating A and B so that both see the
# shared machine's same moments. Prints, per run, the prioritized sockperf p99 idle and under
# iperf3 load (µs) and their ratio (the acceptance test's criterion is at most 2), then the
# medians. Needs root (network namespaces); every run removes its namespaces.
#
# Usage: sudo scripts/latency-ab.sh WEFT_A WEFT_B [PAIRS]   (PAIRS: 3 by default)
# Example: build the old commit in a worktree with its own CARGO_TARGET_DIR, then
#   sudo scripts/latency-ab.sh /tmp/old/debug/weft target/debug/weft 5
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
a=$1 b=$2 pairs=${3:-3}
for w in "$a" "$b"; do
  [ -x "$w" ] || { echo "error: $w is not an executable weft" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'build\trun\tidle_p99_us\tloaded_p99_us\tratio\n'
for i in $(seq 1 "$pairs"); do
  for side in A B; do
    w=$a; [ "$side" = B ] && w=$b
    prefix="wab$i$side"
    json=$("$w" testbed run latency --only weft --json --prefix "$prefix" --seconds 10 \
      --rate 500mbit --out "$out/$prefix" 2>/dev/null) || json='{}'
    "$w" testbed down --prefix "$prefix" >/dev/null 2>&1 || true
    python3 -c '
import json, sys
side, run = sys.argv[1], sys.argv[2]
try:
    r = json.loads(sys.stdin.read())["results"][0]
    i, l = r["latency_idle"]["p99_us"], r["latency_loaded"]["p99_us"]
    print(f"{side}\t{run}\t{i}\t{l}\t{l / i:.2f}")
except Exception as e:
    print(f"{side}\t{run}\tfailed: {e}")
' "$side" "$i" <<<"$json" | tee -a "$out/rows.tsv"
  done
done
python3 - "$out/rows.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
for side in "AB":
    r = [float(x[4]) for x in rows if x[0] == side and len(x) == 5]
    l = [float(x[3]) for x in rows if x[0] == side and len(x) == 5]
    if r:
        print(f"{side}: median ratio {statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}), "
              f"median loaded p99 {statistics.median(l):.1f} us, {len(r)} runs")
PY
