#!/usr/bin/env bash
# weft against DPDK's rte_sched on the peer harness's workload: for each configuration, runs
# the harness's sched_bench and `weft bench rte-sched` pinned to one CPU, interleaved (each
# round alternates which runs first), and prints the median packets per CPU-second of each
# and the median of the per-round ratios weft / rte_sched. The workload, the EAL arguments
# and the harness are described in the harness's README.md.
#
# Usage: scripts/vs-rte-sched.sh [options]
#   --harness DIR     the harness (sched_bench.c, Makefile; default $RTE_SCHED_DIR, or
#                     ../shared/peers/rte_sched from the repository's root)
#   --rounds N        rounds (default 5; 0 with --instructions: instruction counts only)
#   --packets N       timed departures a run (default 3m; k and m suffixes)
#   --warmup N        departures before the clock starts (default 1m)
#   --cpu C           the CPU both run on (default 1)
#   --engine E        weft's engine: fast (default) or heads
#   --all             the harness README's nine configurations (default: five of them)
#   --config P:ARRIVALS:PROFILE  only this configuration (repeatable)
#   --json            one JSON object per configuration instead of the table
#   --instructions    also instructions a packet under valgrind --tool=callgrind: the
#                     difference between runs of --instr-packets and twice as many, so
#                     setup is not counted (slow: minutes a configuration at 4096 pipes)
#   --instr-packets N (default 50k), after the same warm-up as the timed runs (--warmup:
#                     shaped pipes take a million departures to settle)
# Data on stdout, progress on stderr. Needs pkg-config and DPDK's development files
# (installed with apt-get when pkg-config cannot find libdpdk), make, a C compiler, cargo;
# valgrind for --instructions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "error: $*" >&2; exit 2; }

harness=${RTE_SCHED_DIR:-$root/../shared/peers/rte_sched}
rounds=5 packets=3m warmup=1m cpu=1 all=0 json=0 instr=0 instr_packets=50k engine=fast
configs=()
while [ $# -gt 0 ]; do
  case $1 in
    --harness) harness=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --packets) packets=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --cpu) cpu=${2:?}; shift 2 ;;
    --engine) engine=${2:?}; shift 2 ;;
    --all) all=1; shift ;;
    --config) configs+=("${2:?}"); shift 2 ;;
    --json) json=1; shift ;;
    --instructions) instr=1; shift ;;
    --instr-packets) instr_packets=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "error: unknown option $1" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[0-9]+$ ]] || die "--rounds $rounds: a number"
[ "$rounds" -gt 0 ] || [ $instr = 1 ] || die "--rounds 0 measures nothing without --instructions"
[[ $cpu =~ ^[0-9]+$ ]] || die "--cpu $cpu: a CPU number"
[[ $engine =~ ^(fast|heads)$ ]] || die "--engine $engine: fast or heads"
for n in "$packets" "$warmup" "$instr_packets"; do
  [[ $n =~ ^[0-9]+[km]?$ ]] || die "$n: a count, optionally with k or m (3m, 100k)"
done
[ -f "$harness/sched_bench.c" ] || die "no harness at $harness (sched_bench.c): give --harness DIR or RTE_SCHED_DIR"
if [ ${#configs[@]} -eq 0 ]; then
  if [ $all = 1 ]; then
    configs=(64:uniform:noshape 64:pipe:noshape 64:pipe:shape
      4096:uniform:noshape 4096:pipe:noshape 4096:pipe:shape
      16384:uniform:noshape 16384:pipe:noshape 16384:pipe:shape)
  else
    configs=(64:uniform:noshape 64:pipe:shape 4096:uniform:noshape 4096:pipe:shape 16384:pipe:noshape)
  fi
fi
for c in "${configs[@]}"; do
  [[ $c =~ ^[0-9]+:(uniform|pipe):(noshape|shape)$ ]] || die "--config $c: want PIPES:uniform|pipe:noshape|shape"
done

# DPDK and the harness.
if ! pkg-config --exists libdpdk 2>/dev/null; then
  echo "vs-rte-sched: installing libdpdk-dev dpdk pkg-config" >&2
  apt-get install -y libdpdk-dev dpdk pkg-config >&2 || { apt-get update >&2 && apt-get install -y libdpdk-dev dpdk pkg-config >&2; }
fi
if [ $instr = 1 ] && ! command -v valgrind >/dev/null; then
  echo "vs-rte-sched: installing valgrind" >&2
  apt-get install -y valgrind >&2 || { apt-get update >&2 && apt-get install -y valgrind >&2; }
fi
target=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target/rte_sched"
make -s -C "$harness" OUT="$target/rte_sched" >&2
(cd "$root" && cargo build --release -q -p weft-cli >&2)
peer=$target/rte_sched/sched_bench
weft=$target/release/weft
eal=(--no-huge --no-pci -l 0 --log-level=3 -m 1024 --no-telemetry --no-shconf --file-prefix "vs-rte-sched-$$")

# One configuration's options, the same for both: P:ARRIVALS:PROFILE [PACKETS WARMUP].
opts() {
  local p a s backlog
  IFS=: read -r p a s <<<"$1"
  backlog=4096
  [ "$a" = pipe ] && [ "$p" -gt 4096 ] && backlog=$p
  echo "--pipes $p --arrivals $a --profile $s --packets $2 --warmup $3 --backlog $backlog --burst 32 --seed 0"
}
field() { # KEY: the number after "KEY": in the JSON on stdin (its first occurrence)
  grep -o "\"$1\":[0-9.]*" | head -1 | cut -d: -f2
}
run_peer() { # CONFIG PACKETS WARMUP: the harness's output
  # shellcheck disable=SC2046
  taskset -c "$cpu" "$peer" "${eal[@]}" -- $(opts "$1" "$2" "$3") 2>/dev/null
}
run_weft() {
  # shellcheck disable=SC2046
  taskset -c "$cpu" "$weft" bench rte-sched $(opts "$1" "$2" "$3") --engine "$engine" --json
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Instructions a packet: two runs under callgrind, N and 2N timed packets; the difference in
# instructions over the difference in packets timed (a burst may carry a run past N).
instructions() { # weft|peer CONFIG
  local n ia pa ib pb
  n=$(sed 's/k$/000/; s/m$/000000/' <<<"$instr_packets")
  refs() { # weft|peer CONFIG PACKETS: "instructions packets"
    local out
    if [ "$1" = weft ]; then
      # shellcheck disable=SC2046
      out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$weft" bench rte-sched $(opts "$2" "$3" "$warmup") --engine "$engine" --json 2>&1)
    else
      # The harness counts its timed loop only (callgrind client requests); the
      # difference is taken all the same.
      # shellcheck disable=SC2046
      out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$peer" "${eal[@]}" -- $(opts "$2" "$3" "$warmup") 2>&1)
    fi
    echo "$(awk '/refs:/ { gsub(",", "", $4); print $4 }' <<<"$out") $(field packets <<<"$out")"
  }
  read -r ia pa <<<"$(refs "$1" "$2" "$n")"
  read -r ib pb <<<"$(refs "$1" "$2" $((2 * n)))"
  if [ -z "$ia" ] || [ -z "$ib" ] || [ -z "$pa" ] || [ -z "$pb" ] || [ "$pb" -le "$pa" ]; then
    die "$1 $2: valgrind printed no instruction count"
  fi
  echo $(((ib - ia) / (pb - pa)))
}

declare -A weft_runs peer_runs ratios
for ((r = 1; r <= rounds; r++)); do
  i=0
  for c in "${configs[@]}"; do
    i=$((i + 1))
    if (((r + i) % 2)); then order="peer weft"; else order="weft peer"; fi
    for who in $order; do
      if [ "$who" = weft ]; then
        out=$(run_weft "$c" "$packets" "$warmup") || die "weft failed on $c"
        w=$(field cpu_mpps <<<"$out")
        wsum=$(field seq_checksum <<<"$out")
      else
        out=$(run_peer "$c" "$packets" "$warmup") || die "sched_bench failed on $c"
        d=$(field cpu_mpps <<<"$out")
        dsum=$(field seq_checksum <<<"$out")
      fi
    done
    if [ -z "$w" ] || [ -z "$d" ]; then die "$c: no cpu_mpps in an output"; fi
    [ "$wsum" = "$dsum" ] || die "$c: the arrival streams differ (seq_checksum weft $wsum, rte_sched $dsum)"
    weft_runs[$c]+="$w "
    peer_runs[$c]+="$d "
    ratios[$c]+="$(awk -v w="$w" -v d="$d" 'BEGIN { printf "%.4f", w / d }') "
    echo "vs-rte-sched: round $r/$rounds $c (${order%% *} first): weft $w Mpps, rte_sched $d Mpps" >&2
  done
done

if [ $json = 0 ]; then
  if [ $instr = 1 ]; then
    printf '%-22s %10s %15s %15s %12s %12s\n' "pipes:arrivals:profile" "weft Mpps" "rte_sched Mpps" "weft/rte_sched" "weft instr" "rte instr"
  else
    printf '%-22s %10s %15s %15s\n' "pipes:arrivals:profile" "weft Mpps" "rte_sched Mpps" "weft/rte_sched"
  fi
fi
# A median to 3 decimals, or $2 when there was no round.
fmt() { if [ -n "$1" ]; then printf '%.3f' "$1"; else printf '%s' "$2"; fi; }
for c in "${configs[@]}"; do
  mw=$(tr ' ' '\n' <<<"${weft_runs[$c]:-}" | grep . | median || true)
  md=$(tr ' ' '\n' <<<"${peer_runs[$c]:-}" | grep . | median || true)
  mr=$(tr ' ' '\n' <<<"${ratios[$c]:-}" | grep . | median || true)
  iw="" id=""
  if [ $instr = 1 ]; then
    echo "vs-rte-sched: instructions, $c (callgrind)" >&2
    iw=$(instructions weft "$c")
    id=$(instructions peer "$c")
  fi
  IFS=: read -r p a s <<<"$c"
  if [ $json = 1 ]; then
    list() { tr ' ' '\n' <<<"$1" | grep . | paste -sd, - || true; }
    printf '{"config":"%s","pipes":%s,"arrivals":"%s","profile":"%s","rounds":%s,"packets":"%s","weft_mpps":%s,"rte_sched_mpps":%s,"ratio":%s,"weft_runs":[%s],"rte_sched_runs":[%s],"ratios":[%s]' \
      "$c" "$p" "$a" "$s" "$rounds" "$packets" "$(fmt "$mw" null)" "$(fmt "$md" null)" "$(fmt "$mr" null)" \
      "$(list "${weft_runs[$c]:-}")" "$(list "${peer_runs[$c]:-}")" "$(list "${ratios[$c]:-}")"
    [ $instr = 1 ] && printf ',"weft_instructions_per_packet":%s,"rte_sched_instructions_per_packet":%s' "$iw" "$id"
    printf '}\n'
  elif [ $instr = 1 ]; then
    printf '%-22s %10s %15s %15s %12s %12s\n' "$c" "$(fmt "$mw" -)" "$(fmt "$md" -)" "$(fmt "$mr" -)" "$iw" "$id"
  else
    printf '%-22s %10s %15s %15s\n' "$c" "$(fmt "$mw" -)" "$(fmt "$md" -)" "$(fmt "$mr" -)"
  fi
done
if [ $json = 0 ] && [ "$rounds" -gt 0 ]; then
  echo "(medians of $rounds rounds, packets per CPU-second of the timed loop, $packets packets after $warmup; ratio: median of the per-round ratios; both on CPU $cpu, interleaved)"
fi
