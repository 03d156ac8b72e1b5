# shellcheck shell=bash
# A library, not a program: sourced (`. pod2.sh`) by the bash scripts that
# measure on private 2-host pods (ab.sh, ckptcost.sh, crowded.sh,
# moveback.sh), so it has no options and no --help of its own; explib.py's
# Pods does the same for the Python tools (targets.py). The pods: 1 worker
# per host on CPUs 0 and 1, a 4 GiB region with 256 MiB of HWcc, 10 ms
# epochs, one region per config. Set ROOT, BIN and NAME (the script's name)
# first; this sets WORK (a scratch directory), TAG and CONF (the pod the
# benchmarks talk to) and on exit stops every pod it started and removes
# WORK and the regions (copying WORK to $KEEP first when KEEP is set, but
# for the pods' durability logs: a few TPC-C runs leave gigabytes of
# segments and checkpoints).

# need_programs P...: every program in $BIN, or exit 2
need_programs() {
    for p in "$@"; do
        [ -x "$BIN/$p" ] || { echo "$NAME: $BIN/$p not found: run make" >&2; exit 2; }
    done
}

# trees DIR...: TREES, the directories as absolute paths, each with a built
# poddb-server and poddb-bench, or exit 2
trees() {
    local t d p
    TREES=()
    for t in "$@"; do
        d=$(cd "$t" 2>/dev/null && pwd) || { echo "$NAME: no directory $t" >&2; exit 2; }
        for p in poddb-server poddb-bench; do
            [ -x "$d/build/bin/$p" ] || { echo "$NAME: $d/build/bin/$p not found: run make there" >&2; exit 2; }
        done
        TREES+=("$d")
    done
}

WORK=$(mktemp -d "/tmp/poddb-$NAME.XXXXXX")
TAG=$NAME-$$
# The regions' (and run directories') names start with RPFX: $PODDB_EXP_TAG
# when set (a test sets its own, so that runs side by side, as two clones'
# test suites, each find only their own leftovers).
RPFX=${PODDB_EXP_TAG:-poddb}-$TAG
CONF=
PODS_UP=() # the configs of the pods that are up
cleanup() {
    local c
    for c in ${PODS_UP[@]+"${PODS_UP[@]}"}; do pod_down "$c"; done
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" &&
            find "$WORK" -mindepth 1 -maxdepth 1 ! -name '*-log-*' -exec cp -r {} "$KEEP"/ \;
    fi
    rm -rf "$WORK" /dev/shm/"$RPFX"-*
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# make_conf NAME LOGGERS YCSB_TUPLES [ENGINE_LINE...]: writes $WORK/NAME.yaml
# (engine lines like "locking: false"; HOST_LINE, when set, one more line of
# host_defaults like "huge_pages: true"; CPUS, when set, one host per word
# pinned to that CPU list, like "0 1 0 1" for 4 hosts on 2 CPUs; WAREHOUSES,
# the TPC-C warehouses, default 2; TPCC_KEYS, more keys of workloads.tpcc
# with ';' between them, like "items: 2000;customers_per_district: 60") and
# prints its path
make_conf() {
    local f=$WORK/$1.yaml
    cat >"$f" <<EOC
region:
  path: /dev/shm/$RPFX-$1
  kind: shm
  size: 4GiB
  hwcc_budget: 256MiB
host_defaults:
  workers: 1
  loggers: $2
  socket: $WORK/$1-{host}.sock
  log_dir: $WORK/$1-log-{host}
${HOST_LINE:+  $HOST_LINE
}hosts:
$(for c in ${CPUS:-0 1}; do echo "  - cpus: \"$c\""; done)
workloads:
  tpcc:
    warehouses: ${WAREHOUSES:-2}
${TPCC_KEYS:+$(tr ';' '\n' <<<"$TPCC_KEYS" | sed 's/^ */    /')
}  ycsb:
    tuples: $3
    theta: 0.7
engine:
  epoch_ms: 10
EOC
    shift 3
    for line in "$@"; do echo "  $line" >>"$f"; done
    echo "$f"
}

# run_base: where tools/pod keeps its pods' pid files and server logs
run_base() {
    if [ -n "${PODDB_RUN_DIR:-}" ]; then echo "$PODDB_RUN_DIR"
    elif [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ]; then echo "$XDG_RUNTIME_DIR/poddb"
    else echo "/tmp/poddb-run-$(id -u)"; fi
}
# pod_dir [CONF]: the run directory of the pod of CONF (default $CONF):
# tools/pod names it after the region, $RPFX-NAME
pod_dir() {
    local name
    name=$(basename "${1:-$CONF}" .yaml)
    ls -d "$(run_base)/$RPFX-$name"-* | head -1
}
# pod_pids [CONF]: the servers' process ids, host 0 first
pod_pids() {
    local dir
    dir=$(pod_dir "$@")
    ls "$dir"/host*.pid | sort -V | xargs cut -d' ' -f1
}

# thread_ticks [CONF]: "KIND#TID TICKS" for every thread of both servers of
# the pod of CONF (default $CONF), KIND the thread's name without its
# trailing number (pod-worker, pod-ckpt, ...), TICKS its user + system time
thread_ticks() {
    local dir f pid t
    dir=$(pod_dir "$@")
    for f in "$dir"/host*.pid; do
        pid=$(cut -d' ' -f1 "$f")
        for t in /proc/"$pid"/task/*; do
            echo "$(sed 's/[0-9]*$//' "$t/comm" 2>/dev/null)#${t##*/} $(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{print $12 + $13}')"
        done
    done
}

# up CONF [VAR=VALUE...]: start the pod of CONF (its log directories emptied
# first; the servers get the variables) and make it $CONF
up() {
    CONF=$1
    shift
    rm -rf "${CONF%.yaml}"-log-*
    env PODDB_BIN="$BIN" "$@" "$ROOT/tools/pod" up --conf "$CONF" >"$WORK/pod-up.txt" 2>&1 ||
        { cat "$WORK/pod-up.txt" >&2; exit 2; }
    PODS_UP+=("$CONF")
}
# pod_down CONF: stop the pod of CONF (resumed first if paused)
pod_down() {
    # shellcheck disable=SC2046
    kill -CONT $(pod_pids "$1" 2>/dev/null) 2>/dev/null || true
    PODDB_BIN=$BIN "$ROOT/tools/pod" down --conf "$1" >/dev/null 2>&1 || true
    local keep=() c
    for c in ${PODS_UP[@]+"${PODS_UP[@]}"}; do [ "$c" = "$1" ] || keep+=("$c"); done
    PODS_UP=(${keep[@]+"${keep[@]}"})
}
# down: stop the pod of $CONF
down() {
    pod_down "$CONF"
    CONF=
}
# pause CONF / resume CONF: stop and continue both servers of the pod of
# CONF (SIGSTOP, SIGCONT), so that pods can take turns on the machine: a
# stopped pod takes no CPU (an idle one still wakes now and then)
# and keeps its data. Only between benchmark runs: nothing may wait on it.
# shellcheck disable=SC2046
pause() { kill -STOP $(pod_pids "$1"); }
# shellcheck disable=SC2046
resume() { kill -CONT $(pod_pids "$1"); }
