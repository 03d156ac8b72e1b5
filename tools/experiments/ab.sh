#!/bin/bash
# Alternating A/B runs of two builds (or of one build with two environments),
# each run on a fresh private 2-host pod: the method behind the before/after
# figures of docs/performance.md. Exit status 0, or 2 on an error.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/experiments/ab.sh [options] TREE_A TREE_B

Runs A, B, A, B, ... (--pairs pairs), each on a fresh private 2-host pod (or,
with --turns, on one pod each that take turns)
(1 worker per host on CPUs 0 and 1, 10 ms epochs, a 4 GiB region; the
programs of TREE/build/bin, brought up with this tree's tools/pod): a 1 s
run that loads the data, then the measured run. Prints each run's committed
transactions per second and both servers' CPU time per committed
transaction, then the means, B/A, in how many pairs B was ahead, and the
geometric mean of the pairs' B/A with a 95% interval (Student's t over
their logarithms: an interval that holds 1 is a change the runs' noise
hides). TREE_A
and TREE_B may be the same tree with --env-a/--env-b, --engine-b or
--loggers-b telling them apart.

  --workload W     tpcc (default), ycsb or smallbank
  --bench ARGS     poddb-bench arguments of the measured run (default:
                   tpcc "--remote 10/15", ycsb "--read-pct 50
                   --multi-partition 10", smallbank none)
  --sequence "ARGS;ARGS;.."
                   instead of one measured run, these runs one after another
                   on the same pod (poddb-bench arguments, ';' between runs),
                   so that later runs meet what earlier ones left (data grown,
                   tuples in CXL memory); B/A is taken per position and over
                   all runs. Not with --bench
  --pairs N        pairs of runs (default 3)
  --turns          one pod for A and one for B, both up side by side (loaded
                   once) and taking turns: pair i runs the measured run (or
                   the sequence) on each, A first in odd pairs, B first in
                   even ones, the other pod paused (SIGSTOP: it takes no
                   CPU). A pair's two runs then meet the same spell of the
                   VM, where fresh pods one after another can be minutes
                   apart; later pairs meet the data the earlier ones left
  --duration S     seconds of the measured run (default 8)
  --loggers N      loggers per host (default 1; 0 turns logging off)
  --loggers-b N    loggers per host of B only (default: --loggers)
  --engine LINE    an engine: line of the config, like "locking: false"
                   (repeatable)
  --engine-b LINE  an engine: line of B's config only, like
                   "checkpoint_after: 0" (repeatable; after --engine's)
  --ycsb-tuples N  YCSB tuples (default 1000000)
  --env-a "V=X .." environment of A's servers (and of B's with --env-b)
  --threads        also print, per run and as means, the CPU seconds of the
                   servers' threads by kind (pod-worker, pod-logger, pod-epoch,
                   pod-ckpt, ...: both hosts' together) during the measured run
                   (with --sequence: over the whole sequence)
  --keep DIR       keep the configs, JSON lines and server logs in DIR (not
                   the pods' durability logs)
  -h, --help       this text

Single runs on a 2-core VM vary by 10-25%: take several pairs, run nothing
else meanwhile, and trust a difference only when most pairs agree.
EOF
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORKLOAD=tpcc
BENCH=
BENCH_SET=0
SEQUENCE=
PAIRS=3
DUR=8
LOGGERS=1
LOGGERS_B=
ENGINE=()
ENGINE_B=()
TUPLES=1000000
ENV_A=
ENV_B=
KEEP=
THREADS=0
TURNS=0
ARGS=()
while [ $# -gt 0 ]; do
    case $1 in
    --workload) WORKLOAD=$2; shift 2 ;;
    --bench) BENCH=$2; BENCH_SET=1; shift 2 ;;
    --sequence) SEQUENCE=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --loggers) LOGGERS=$2; shift 2 ;;
    --loggers-b) LOGGERS_B=$2; shift 2 ;;
    --engine) ENGINE+=("$2"); shift 2 ;;
    --engine-b) ENGINE_B+=("$2"); shift 2 ;;
    --ycsb-tuples) TUPLES=$2; shift 2 ;;
    --env-a) ENV_A=$2; shift 2 ;;
    --env-b) ENV_B=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --threads) THREADS=1; shift ;;
    --turns) TURNS=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "ab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) ARGS+=("$1"); shift ;;
    esac
done
[ ${#ARGS[@]} = 2 ] || { echo "ab.sh: want two trees, TREE_A and TREE_B (see --help)" >&2; exit 2; }
LOGGERS_B=${LOGGERS_B:-$LOGGERS}
for n in "$PAIRS" "$DUR" "$LOGGERS" "$LOGGERS_B" "$TUPLES"; do
    case $n in '' | *[!0-9]*) echo "ab.sh: '$n' is not a whole number" >&2; exit 2 ;; esac
done
[ "$PAIRS" -ge 1 ] && [ "$DUR" -ge 1 ] || { echo "ab.sh: --pairs and --duration must be at least 1" >&2; exit 2; }
case $WORKLOAD in
tpcc) [ $BENCH_SET = 1 ] || BENCH="--remote 10/15" ;;
ycsb) [ $BENCH_SET = 1 ] || BENCH="--read-pct 50 --multi-partition 10" ;;
smallbank) ;;
*) echo "ab.sh: --workload wants tpcc, ycsb or smallbank, not '$WORKLOAD'" >&2; exit 2 ;;
esac
RUNS=("$BENCH")
if [ -n "$SEQUENCE" ]; then
    [ $BENCH_SET = 0 ] || { echo "ab.sh: --bench and --sequence exclude each other" >&2; exit 2; }
    IFS=';' read -r -a RUNS <<<"$SEQUENCE"
    [ ${#RUNS[@]} -ge 1 ] || { echo "ab.sh: --sequence has no runs" >&2; exit 2; }
    for r in "${RUNS[@]}"; do
        [ -n "${r// /}" ] || { echo "ab.sh: --sequence '$SEQUENCE' has an empty run" >&2; exit 2; }
    done
fi
NAME=ab
# shellcheck source=tools/experiments/pod2.sh
. "$ROOT/tools/experiments/pod2.sh"
trees "${ARGS[@]}"
BIN=${TREES[0]}/build/bin

# CPU ticks (user + system) of both servers of the running pod
cpu_ticks() {
    local s=0 dir f pid
    dir=$(pod_dir)
    for f in "$dir"/host0.pid "$dir"/host1.pid; do
        pid=$(cut -d' ' -f1 "$f")
        s=$((s + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
    done
    echo "$s"
}

# start POD TREE ENV LOGGERS [ENGINE_LINE...]: bring up and load the pod
# POD (its config $WORK/POD.yaml) with TREE's programs (in this shell, so
# that the exit trap brings the pod down if anything fails)
declare -A TREE_OF
start() {
    local pod=$1 tree=$2 envs=$3 loggers=$4 conf
    shift 4
    BIN=$tree/build/bin
    TREE_OF[$pod]=$tree
    conf=$(make_conf "$pod" "$loggers" "$TUPLES" ${ENGINE[@]+"${ENGINE[@]}"} "$@")
    # shellcheck disable=SC2086
    env $envs true || { echo "ab.sh: bad environment '$envs'" >&2; exit 2; }
    # The servers get envs; this shell keeps its own environment.
    # shellcheck disable=SC2086
    up "$conf" $envs
    "$BIN/poddb-bench" --conf "$CONF" --workload "$WORKLOAD" --duration 1 --warmup 0 \
        >"$WORK/$pod.load" 2>&1 || { tail -5 "$WORK/$pod.load" >&2; exit 2; }
}

# measure POD LABEL: the measured run (or the sequence) on the pod POD, made
# $CONF; writes "committed/s cpu_us_per_txn" per run to $WORK/LABEL.result
# (and with --threads the threads' CPU to $WORK/LABEL.threads)
measure() {
    local pod=$1 label=$2 c0 c1 json
    CONF=$WORK/$pod.yaml
    BIN=${TREE_OF[$pod]}/build/bin
    : >"$WORK/$label.result"
    local run=0 bench
    [ $THREADS = 0 ] || thread_ticks >"$WORK/$label.t0"
    for bench in "${RUNS[@]}"; do
        run=$((run + 1))
        c0=$(cpu_ticks)
        # shellcheck disable=SC2086
        "$BIN/poddb-bench" --conf "$CONF" --workload "$WORKLOAD" $bench --duration "$DUR" \
            --warmup 0 --json >"$WORK/$label.$run.json" 2>"$WORK/$label.err" ||
            { tail -5 "$WORK/$label.err" >&2; exit 2; }
        c1=$(cpu_ticks)
        json=$(tail -1 "$WORK/$label.$run.json")
        python3 -c '
import json, sys
d = json.loads(sys.argv[1]); ticks = int(sys.argv[2]); hz = int(sys.argv[3])
n = sum(d["commits"].values())
print("%.0f %.1f" % (d["committed_per_s"], ticks / hz * 1e6 / n if n else 0))' \
            "$json" $((c1 - c0)) "$(getconf CLK_TCK)" >>"$WORK/$label.result"
    done
    [ $THREADS = 0 ] || thread_ticks >"$WORK/$label.t1"
    cp "$(pod_dir)"/host0.log "$WORK/$label-host0.log" 2>/dev/null || true
    [ $THREADS = 0 ] && return
    # per kind: the sum over its threads (by TID) of the ticks in the run
    python3 - "$WORK/$label.t0" "$WORK/$label.t1" "$(getconf CLK_TCK)" >"$WORK/$label.threads" <<'EOF'
import collections, sys
def rd(f):
    return {l.split()[0]: int(l.split()[1]) for l in open(f) if len(l.split()) == 2}
a, b, hz = rd(sys.argv[1]), rd(sys.argv[2]), int(sys.argv[3])
k = collections.Counter()
for t, v in b.items():
    k[t.split("#")[0]] += v - a.get(t, 0)
print(" ".join("%s=%.2f" % (n, v / hz) for n, v in sorted(k.items()) if v > 0))
EOF
}

# The VM's spell (targets.py prints the same gauge): A's poddb-crcbench hot rate
crc_gauge() { "${TREES[0]}/build/bin/poddb-crcbench" --total 512 2>/dev/null | awk '/^ *hot/ {print $(NF-1)}'; }
echo "hot CRC32C before the runs: $(crc_gauge) GB/s"
echo "A: ${TREES[0]}${ENV_A:+ ($ENV_A)}"
echo "B: ${TREES[1]}${ENV_B:+ ($ENV_B)}${ENGINE_B[*]:+ (engine: ${ENGINE_B[*]})}$([ "$LOGGERS_B" = "$LOGGERS" ] || echo " (loggers $LOGGERS_B)")"
if [ -n "$SEQUENCE" ]; then
    echo "$WORKLOAD, a sequence of ${#RUNS[@]} runs of $DUR s on each pod: $SEQUENCE"
    echo "loggers $LOGGERS${ENGINE[*]:+, engine: ${ENGINE[*]}}, $PAIRS pairs"
else
    echo "$WORKLOAD $BENCH, $DUR s runs, loggers $LOGGERS${ENGINE[*]:+, engine: ${ENGINE[*]}}, $PAIRS pairs"
fi
[ $TURNS = 0 ] || echo "--turns: one pod each for A and B, taking turns"
if [ $TURNS = 1 ]; then
    start a "${TREES[0]}" "$ENV_A" "$LOGGERS"; pause "$CONF"
    start b "${TREES[1]}" "$ENV_B" "$LOGGERS_B" ${ENGINE_B[@]+"${ENGINE_B[@]}"}; pause "$CONF"
fi
for i in $(seq "$PAIRS"); do
    if [ $TURNS = 1 ]; then
        # A first in odd pairs, B first in even ones
        for pod in $([ $((i % 2)) = 1 ] && echo a b || echo b a); do
            resume "$WORK/$pod.yaml"
            measure "$pod" "$pod$i"
            pause "$CONF"
        done
    else
        start "a$i" "${TREES[0]}" "$ENV_A" "$LOGGERS"; measure "a$i" "a$i"; down
        start "b$i" "${TREES[1]}" "$ENV_B" "$LOGGERS_B" ${ENGINE_B[@]+"${ENGINE_B[@]}"}
        measure "b$i" "b$i"; down
    fi
    for r in $(seq ${#RUNS[@]}); do
        a=$(sed -n "${r}p" "$WORK/a$i.result")
        b=$(sed -n "${r}p" "$WORK/b$i.result")
        [ ${#RUNS[@]} = 1 ] && run="" || run=" run $r (${RUNS[$((r - 1))]})"
        printf 'pair %d%s: A %s/s (%s us CPU/txn)  B %s/s (%s us CPU/txn)  [load %s]\n' "$i" "$run" \
            ${a% *} ${a#* } ${b% *} ${b#* } "$(uptime | sed 's/.*load average: //')"
    done
    if [ $THREADS = 1 ]; then
        echo "  A threads (CPU s): $(cat "$WORK/a$i.threads")"
        echo "  B threads (CPU s): $(cat "$WORK/b$i.threads")"
    fi
done
echo "hot CRC32C after the runs: $(crc_gauge) GB/s"
if [ $THREADS = 1 ]; then
    python3 - "$WORK" "$PAIRS" <<'EOF'
import collections, sys
work, n = sys.argv[1], int(sys.argv[2])
for side in "ab":
    k = collections.defaultdict(float)
    for i in range(1, n + 1):
        for kv in open("%s/%s%d.threads" % (work, side, i)).read().split():
            name, v = kv.split("=")
            k[name] += float(v)
    print("mean threads %s (CPU s): %s" % (side.upper(), " ".join(
        "%s=%.2f" % (name, v / n) for name, v in sorted(k.items()))))
EOF
fi
python3 - "$WORK" "$PAIRS" "${#RUNS[@]}" <<'EOF'
import math, statistics as s, sys
work, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Student's t, two-sided 95%, by degrees of freedom (1.96 past 30).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
def interval(a, b, unit):
    """B/A of each pair: their geometric mean and a 95% interval for it (a
    t-interval of the pairs' log ratios), so that a change smaller than
    the runs' noise reads as one."""
    r = [math.log(y[0] / x[0]) for x, y in zip(a, b) if x[0] > 0 and y[0] > 0]
    if len(r) < 2:
        return "  B/A of the %s: %s (one: no interval)" % (
            unit, "%.3f" % math.exp(r[0]) if r else "n/a")
    m, h = s.mean(r), T95[min(len(r) - 1, len(T95)) - 1] * s.stdev(r) / math.sqrt(len(r))
    if len(r) > len(T95) + 1:
        h = 1.96 * s.stdev(r) / math.sqrt(len(r))
    return "  B/A of the %s: geometric mean %.3f, 95%% interval %.3f-%.3f (%d %s)" % (
        unit, math.exp(m), math.exp(m - h), math.exp(m + h), len(r), unit)
def rd(side, i):
    return [tuple(float(x) for x in l.split()) for l in open("%s/%s%d.result" % (work, side, i))]
A = [rd("a", i) for i in range(1, n + 1)]
B = [rd("b", i) for i in range(1, n + 1)]
def line(label, a, b, unit):
    print("%s: A %.0f/s (%.1f us CPU/txn)  B %.0f/s (%.1f us CPU/txn)  B/A %.3f, B ahead in %d of %d %s"
          % (label, s.mean(x[0] for x in a), s.mean(x[1] for x in a), s.mean(x[0] for x in b),
             s.mean(x[1] for x in b), s.mean(x[0] for x in b) / s.mean(x[0] for x in a),
             sum(y[0] > x[0] for x, y in zip(a, b)), len(a), unit))
    print(interval(a, b, unit))
if runs > 1:
    for r in range(runs):
        line("mean of run %d" % (r + 1), [p[r] for p in A], [p[r] for p in B], "pairs")
    line("mean of all runs", [x for p in A for x in p], [x for p in B for x in p], "runs")
else:
    line("mean", [p[0] for p in A], [p[0] for p in B], "pairs")
EOF
