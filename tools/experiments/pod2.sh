# Sourced by the scripted measurements on one private 2-host pod
# (targets.sh, moveback.sh): 1 worker per host on CPUs 0 and 1, a 4 GiB
# region with 256 MiB of HWcc, 10 ms epochs. Set ROOT, BIN and NAME (the
# script's name) first; this sets WORK (a scratch directory), TAG and CONF
# and on exit stops the pod and removes WORK and the region (copying WORK to
# $KEEP first when KEEP is set, but for the pods' durability logs: a few
# TPC-C runs leave gigabytes of segments and checkpoints).

# need_programs P...: every program in $BIN, or exit 2
need_programs() {
    for p in "$@"; do
        [ -x "$BIN/$p" ] || { echo "$NAME: $BIN/$p not found: run make" >&2; exit 2; }
    done
}

WORK=$(mktemp -d "/tmp/poddb-$NAME.XXXXXX")
TAG=$NAME-$$
CONF=
cleanup() {
    [ -n "$CONF" ] && PODDB_BIN=$BIN "$ROOT/tools/pod" down --conf "$CONF" >/dev/null 2>&1 || true
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" &&
            find "$WORK" -mindepth 1 -maxdepth 1 ! -name '*-log-*' -exec cp -r {} "$KEEP"/ \;
    fi
    rm -rf "$WORK" "/dev/shm/poddb-$TAG"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# make_conf NAME LOGGERS YCSB_TUPLES [ENGINE_LINE...]: writes $WORK/NAME.yaml
# (engine lines like "locking: false"; HOST_LINE, when set, one more line of
# host_defaults like "huge_pages: true") and prints its path
make_conf() {
    local f=$WORK/$1.yaml
    cat >"$f" <<EOC
region:
  path: /dev/shm/poddb-$TAG
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
  - cpus: "0"
  - cpus: "1"
workloads:
  tpcc:
    warehouses: 2
  ycsb:
    tuples: $3
    theta: 0.7
engine:
  epoch_ms: 10
EOC
    shift 3
    for line in "$@"; do echo "  $line" >>"$f"; done
    echo "$f"
}

# up CONF: start the pod of CONF (its log directories emptied first)
up() {
    CONF=$1
    rm -rf "$WORK"/*-log-*
    PODDB_BIN=$BIN "$ROOT/tools/pod" up --conf "$CONF" >"$WORK/pod-up.txt" 2>&1 ||
        { cat "$WORK/pod-up.txt" >&2; exit 2; }
}
down() {
    PODDB_BIN=$BIN "$ROOT/tools/pod" down --conf "$CONF" >/dev/null 2>&1 || true
    CONF=
}
