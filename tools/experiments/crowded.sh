#!/bin/bash
# Pods that share CPUs, two builds side by side: a 4-host pod on 2 CPUs, and
# two 2-host pods pinned to the same 2 CPUs running at once. Reports
# throughput and the workers' reply waits (how long a worker waited for
# another host's reply: docs/pod.md). Exit status 0, or 2 on an error.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/experiments/crowded.sh [options] TREE_A TREE_B

For each of --pairs pairs, A then B (B first in even pairs), with the
programs of TREE/build/bin on fresh private pods (10 ms epochs, 1 logger and
1 worker per host, TPC-C 10/15, one warehouse per host):

  4 hosts   one 4-host pod, hosts pinned to CPUs 0, 1, 0, 1
  2 pods    two 2-host pods, each with hosts on CPUs 0 and 1, both
            benchmarked at once

and prints per run the committed transactions per second (the two pods'
sum) and the mean reply wait, then the means and B/A.

  --pairs N        pairs of runs (default 3)
  --duration S     seconds of each measured run (default 8)
  --warmup S       seconds of warmup before it (default 1)
  --tpcc "K: V;.." more keys of workloads.tpcc, ';' between them (smaller
                   tables for a quick run: "items: 2000;customers_per_district: 60")
  --remote NO/PAY  TPC-C remote percentages (default 10/15)
  -h, --help       this text

Run nothing else meanwhile: the point is how the pods share the CPUs with
each other, not with a neighbour.
EOF
}

PAIRS=3 DUR=8 WARMUP=1 REMOTE=10/15 ARGS=()
export TPCC_KEYS=
while [ $# -gt 0 ]; do
    case $1 in
    --pairs) PAIRS=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --tpcc) TPCC_KEYS=$2; shift 2 ;;
    --remote) REMOTE=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "crowded.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ARGS+=("$1"); shift ;;
    esac
done
[ ${#ARGS[@]} = 2 ] || { usage >&2; exit 2; }
case $PAIRS$DUR$WARMUP in *[!0-9]*) echo "crowded.sh: --pairs, --duration and --warmup take whole numbers" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NAME=crowded
# shellcheck source=tools/experiments/pod2.sh
. "$ROOT/tools/experiments/pod2.sh"
trees "${ARGS[@]}"
BIN=${TREES[0]}/build/bin

# bench CONF OUT: load (1 s run), then the measured run's JSON line into OUT
bench() {
    "$BIN/poddb-bench" --conf "$1" --workload tpcc --duration 1 --warmup 0 -q >/dev/null 2>"$2.err" &&
        "$BIN/poddb-bench" --conf "$1" --workload tpcc --remote "$REMOTE" --duration "$DUR" \
            --warmup "$WARMUP" --json -q >"$2" 2>>"$2.err" || { tail -5 "$2.err" >&2; return 1; }
}
# "committed/s wait_us" of a JSON line
figures() {
    python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).readlines()[-1])
print("%.0f %.1f" % (d["committed_per_s"], d.get("reply_wait_us_mean") or 0))' "$1"
}

# four_hosts SIDE LABEL: a 4-host pod on CPUs 0,1,0,1
four_hosts() {
    local conf
    conf=$(CPUS="0 1 0 1" WAREHOUSES=4 make_conf "$1-4h" 1 1000)
    up "$conf"
    bench "$conf" "$WORK/$2.json"
    pod_down "$conf"
    rm -rf "${conf%.yaml}"-log-*
    figures "$WORK/$2.json" >"$WORK/$2.result"
}

# two_pods SIDE LABEL: two 2-host pods on CPUs 0,1, benchmarked at once
two_pods() {
    local c1 c2 p1 p2 ok=0
    c1=$(make_conf "$1-p1" 1 1000)
    c2=$(make_conf "$1-p2" 1 1000)
    up "$c1"
    up "$c2"
    # Load one after the other, then measure both at once.
    "$BIN/poddb-bench" --conf "$c1" --workload tpcc --duration 1 --warmup 0 -q >/dev/null
    "$BIN/poddb-bench" --conf "$c2" --workload tpcc --duration 1 --warmup 0 -q >/dev/null
    bench "$c1" "$WORK/$2-1.json" & p1=$!
    bench "$c2" "$WORK/$2-2.json" & p2=$!
    wait $p1 || ok=1
    wait $p2 || ok=1
    pod_down "$c1"
    pod_down "$c2"
    rm -rf "${c1%.yaml}"-log-* "${c2%.yaml}"-log-*
    [ $ok = 0 ] || exit 2
    paste -d' ' <(figures "$WORK/$2-1.json") <(figures "$WORK/$2-2.json") |
        awk '{printf "%.0f %.1f\n", $1 + $3, ($2 + $4) / 2}' >"$WORK/$2.result"
}

echo "A: ${TREES[0]}"
echo "B: ${TREES[1]}"
echo "TPC-C $REMOTE, $DUR s runs, 1 worker and 1 logger per host, $PAIRS pairs"
for i in $(seq "$PAIRS"); do
    for side in $([ $((i % 2)) = 1 ] && echo a b || echo b a); do
        BIN=${TREES[$([ $side = a ] && echo 0 || echo 1)]}/build/bin
        four_hosts "$side" "$side$i-4h"
        two_pods "$side" "$side$i-2p"
    done
    for k in 4h 2p; do
        read -r at aw <"$WORK/a$i-$k.result"
        read -r bt bw <"$WORK/b$i-$k.result"
        printf 'pair %d %s: A %s/s wait %s us  B %s/s wait %s us\n' "$i" \
            "$([ $k = 4h ] && echo "4 hosts" || echo "2 pods ")" "$at" "$aw" "$bt" "$bw"
    done
done
python3 - "$WORK" "$PAIRS" <<'EOF'
import statistics as s, sys
work, n = sys.argv[1], int(sys.argv[2])
for k, label in (("4h", "4 hosts on 2 CPUs"), ("2p", "2 pods on 2 CPUs ")):
    r = {side: [tuple(map(float, open("%s/%s%d-%s.result" % (work, side, i, k)).read().split()))
                for i in range(1, n + 1)] for side in "ab"}
    ta, tb = s.mean(x[0] for x in r["a"]), s.mean(x[0] for x in r["b"])
    wa, wb = s.mean(x[1] for x in r["a"]), s.mean(x[1] for x in r["b"])
    ahead = sum(y[0] > x[0] for x, y in zip(r["a"], r["b"]))
    print("mean %s: A %.0f/s wait %.0f us  B %.0f/s wait %.0f us  B/A %.3f, B ahead in %d of %d"
          % (label, ta, wa, tb, wb, tb / ta if ta else 0, ahead, n))
EOF
