#!/usr/bin/env bash
# Instructions per packet of the scheduling engines (callgrind), the figures of
# docs/scheduling.md: for each scenario, one run of `engine_profile` under callgrind minus a
# run that only builds the packets (WEFT_PROFILE_POOL_ONLY=1), divided by the packets.
# Instruction counts do not depend on what else the machine is doing.
#
# Usage: scripts/instructions.sh [PACKETS] [SCENARIO...]
#   PACKETS   packets per run (default 200000, as in the docs)
#   SCENARIO  ENGINE:FLOWS:MODE:POLICY[:ENV=VALUE] (default: the table in docs/scheduling.md)
# Prints one tab-separated line per scenario: engine, flows, mode, policy, env, instructions.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "error: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
packets=${1:-200000}
shift || true
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(
    fast:1024:classify:fig1
    fast:65536:classify:fig1
    fast:65536:per-flow:fig1
    fast:65536:batch:fig1
    fast:65536:per-flow-batch:fig1
    fast:1048576:classify:fig1
    fast:1048576:per-flow:fig1
    fast:10000:classify:senic
    fast:65536:per-flow:fig1:WEFT_PROFILE_FIFO=1
    fast:65536:classify:fig1:WEFT_PROFILE_FIFO=1
    fast:65536:per-flow:fig1:WEFT_PROFILE_MIXED=1
    reference:65536:classify:fig1
    reference:10000:classify:senic
  )
fi
cargo build --release -q -p weft-core --example engine_profile >&2
bin=${CARGO_TARGET_DIR:-target}/release/examples/engine_profile
refs() { # env... -- args...: the callgrind instruction total of one run
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 \
    | awk '/refs:/ { gsub(",", "", $4); print $4 }'
}
printf 'engine\tflows\tmode\tpolicy\tenv\tinstructions_per_packet\n'
for s in "${scenarios[@]}"; do
  IFS=: read -r engine flows mode policy extra <<<"$s"
  envs=(WEFT_PROFILE_UNUSED=1)
  [ -n "${extra:-}" ] && envs+=("$extra")
  echo "instructions: $s" >&2
  a=$(refs "${envs[@]}" -- "$engine" "$packets" "$flows" "$mode" "$policy")
  b=$(refs "${envs[@]}" WEFT_PROFILE_POOL_ONLY=1 -- "$engine" "$packets" "$flows" "$mode" "$policy")
  if [ -z "$a" ] || [ -z "$b" ]; then
    echo "error: $s: valgrind printed no instruction count" >&2
    exit 1
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%d\n' "$engine" "$flows" "$mode" "$policy" "${extra:--}" $(((a - b) / packets))
done
