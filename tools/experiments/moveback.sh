#!/bin/bash
# Moving cold tuples back below the threshold (engine.moveback_rate,
# docs/configuration.md): on one private 2-host pod, YCSB 95/5
# local-only, then multi-partition runs that move host 1's tuples and host
# 0's into CXL memory, an idle pause, and local-only runs again; prints each
# run's committed/s and host 0's tuples in CXL memory between them.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/experiments/moveback.sh [--rate R] [--idle S] [--duration S] [--mp-runs N]
                                     [--tuples N] [--bin DIR] [--help]

One pod of 2 hosts x 1 worker (CPUs 0 and 1), YCSB (1,000,000 tuples or
--tuples), 95% reads, skew 0.7:
  a local-only run (0% multi-partition), N runs at 100% multi-partition,
  S seconds idle, two local-only runs.

  --rate R       engine.moveback_rate (default 10000; 0 = tuples leave CXL
                 memory only above the threshold)
  --idle S       seconds idle between the phases (default 60)
  --duration S   seconds per run (default 5, no warmup)
  --mp-runs N    multi-partition runs (default 4)
  --tuples N     YCSB tuples, both hosts' together (default 1000000)
  --bin DIR      programs (default build/bin)
  -h, --help     this text

Run it with --rate 0 and with a rate to compare; on an otherwise idle machine.
EOF
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/bin
RATE=10000
IDLE=60
DUR=5
MP_RUNS=4
TUPLES=1000000
while [ $# -gt 0 ]; do
    case $1 in
    --rate) RATE=$2; shift 2 ;;
    --idle) IDLE=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --mp-runs) MP_RUNS=$2; shift 2 ;;
    --tuples) TUPLES=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "moveback.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$RATE" "$IDLE" "$DUR" "$MP_RUNS" "$TUPLES"; do
    case $v in '' | *[!0-9]*) echo "moveback.sh: options want whole numbers (got '$v')" >&2; exit 2 ;; esac
done
NAME=moveback
# shellcheck source=tools/experiments/pod2.sh
. "$ROOT/tools/experiments/pod2.sh"
need_programs poddb-server poddb-bench poddb-cli
up "$(make_conf pod 1 "$TUPLES" "moveback_rate: $RATE")"
echo "loading $TUPLES tuples" >&2
"$BIN/poddb-bench" --conf "$CONF" --workload ycsb --duration 1 --warmup 0 -q >/dev/null

in_cxl() {
    "$BIN/poddb-cli" --conf "$CONF" --host 0 call sys.pod | awk -F'\t' '$1 == "resident" {print $2}'
}
run() {
    "$BIN/poddb-bench" --conf "$CONF" --workload ycsb --read-pct 95 --multi-partition "$1" \
        --duration "$DUR" --warmup 0 --json -q |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(round(d["committed_per_s"]))'
}

row() { printf '%-40s %s\n' "$1" "$2"; }
echo "moveback_rate $RATE, YCSB 95/5, ${DUR} s runs, 2 hosts x 1 worker"
row "0% multi-partition, fresh:" "$(run 0)/s"
for i in $(seq "$MP_RUNS"); do
    row "100% multi-partition, run $i:" "$(run 100)/s"
done
row "host 0's tuples in CXL memory:" "$(in_cxl)"
sleep "$IDLE"
row "... after ${IDLE} s idle:" "$(in_cxl)"
for i in 1 2; do
    row "0% multi-partition, run $i:" "$(run 0)/s"
done
row "host 0's tuples in CXL memory:" "$(in_cxl)"
