#!/bin/bash
# What a checkpoint costs per row (docs/performance.md): on one
# private 2-host pod, TPC-C grows the data, then, with the pod idle, each host
# is asked for full and delta checkpoints (sys.checkpoint) one at a time, and
# the checkpoint thread's CPU time per row visited is printed. Idle, so that
# the figure is the checkpoint's own work: beside running workers it varies
# too much to compare builds (73-217 ns a row for one build).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/experiments/ckptcost.sh [--duration S] [--rounds N] [--bin DIR] [--json] [--help]

One pod of 2 hosts x 1 worker (CPUs 0 and 1), TPC-C (1 warehouse per host)
10/15 for S seconds to grow the data; then, nothing else running, N rounds of
a full and a delta checkpoint on host 0 and on host 1, one at a time
(tools/pod checkpoint --host H). Prints each checkpoint (rows written, rows
left out as unchanged, MiB, seconds, the checkpoint thread's CPU time per
row visited) and the medians of the full and the delta ones. A delta after
an idle pause writes nothing: it is the cost of visiting the rows, a full
one adds writing them.

  --duration S   seconds of TPC-C before the checkpoints (default 15: ~6
                 million rows per host)
  --rounds N     rounds (default 3)
  --bin DIR      programs (default build/bin): run the script with each
                 build's --bin, one after the other, to compare them
  --json         print one JSON line instead of the table
  -h, --help     this text
EOF
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/bin
DUR=15
ROUNDS=3
JSON=0
while [ $# -gt 0 ]; do
    case $1 in
    --duration) DUR=${2-}; shift 2 || { echo "ckptcost.sh: --duration wants a value" >&2; exit 2; } ;;
    --rounds) ROUNDS=${2-}; shift 2 || { echo "ckptcost.sh: --rounds wants a value" >&2; exit 2; } ;;
    --bin) BIN=${2-}; shift 2 || { echo "ckptcost.sh: --bin wants a value" >&2; exit 2; } ;;
    --json) JSON=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "ckptcost.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$DUR" "$ROUNDS"; do
    case $v in '' | *[!0-9]* | 0) echo "ckptcost.sh: --duration and --rounds want whole numbers above 0 (got '$v')" >&2; exit 2 ;; esac
done
NAME=ckptcost
# shellcheck source=tools/experiments/pod2.sh
. "$ROOT/tools/experiments/pod2.sh"
need_programs poddb-server poddb-bench poddb-cli
up "$(make_conf pod 1 1000000)"
echo "TPC-C 10/15 for $DUR s to grow the data" >&2
"$BIN/poddb-bench" --conf "$CONF" --workload tpcc --remote 10/15 --duration "$DUR" --warmup 0 -q >/dev/null

# checkpoint HOST [--full]: one checkpoint of HOST, waited for (tools/pod
# checkpoint); prints: host kind rows unchanged bytes seconds cpu_seconds
checkpoint() {
    local h=$1
    shift
    PODDB_BIN=$BIN "$ROOT/tools/pod" checkpoint --conf "$CONF" --host "$h" "$@" --json |
        python3 -c 'import json, sys
c = json.load(sys.stdin)["hosts"][0]
print(c["host"], c["kind"], c["rows"], c["unchanged"], c["bytes"], c["seconds"], c["cpu_seconds"])' ||
        { echo "ckptcost.sh: host $h's checkpoint failed" >&2; exit 2; }
}
for ((round = 0; round < ROUNDS; round++)); do
    for h in 0 1; do
        checkpoint "$h" --full
        checkpoint "$h"
    done
done >"$WORK/ckpts.txt"

python3 - "$WORK/ckpts.txt" "$JSON" "$DUR" "$ROUNDS" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
per = {"full": [], "delta": []}
lines = []
for h, kind, r, u, b, s, c in rows:
    visited = int(r) + int(u)
    ns = float(c) * 1e9 / visited if visited else 0.0
    per[kind].append(ns)
    lines.append((h, kind, int(r), int(u), int(b) / 1048576, float(s), ns))
med = {k: statistics.median(v) if v else None for k, v in per.items()}
if sys.argv[2] == "1":
    print(json.dumps({"tool": "ckptcost", "duration_s": int(sys.argv[3]), "rounds": int(sys.argv[4]),
                      "full_ns_per_row": med["full"], "delta_ns_per_row": med["delta"],
                      "rows_per_host": [max(l[2] + l[3] for l in lines if l[0] == h) for h in "01"],
                      "checkpoints": len(lines)}))
    sys.exit(0)
print("checkpoints on an idle pod after %s s of TPC-C 10/15 (2 hosts x 1 worker), CPU of the "
      "checkpoint thread per row visited" % sys.argv[3])
print("%-5s %-6s %10s %10s %9s %8s %12s" % ("host", "kind", "rows", "unchanged", "MiB", "seconds", "ns per row"))
for h, kind, r, u, mib, s, ns in lines:
    print("%-5s %-6s %10d %10d %9.1f %8.2f %12.1f" % (h, kind, r, u, mib, s, ns))
print("median: full %.1f ns per row, delta (visit only) %.1f ns per row" % (med["full"], med["delta"]))
PY
