# Shared by the disaggregated-memory integration tests (source tests/lib.sh
# first): memory nodes mn0..mnN-1 in $TMP and a 2-host dm config on them.
MEMNODE="$BIN/poddb-memnode"
MN_PIDS=()

# dm_conf POD PROVIDER NMEMNODES [DM_LINES [REST]]: a 2-host mode: dm config
# in $TMP/dm.yaml on memory nodes $TMP/mn0.sock.. (one worker each, sockets
# $TMP/cn-{host}.sock, phantom_protection off), with DM_LINES (indented by
# two spaces) added to its dm: section and REST appended; prints its path.
dm_conf() {
  {
    printf 'mode: dm\ndm:\n  pod: %s\n  provider: "%s"\n  memnodes:\n' "$1" "$2"
    for m in $(seq 0 $(($3 - 1))); do printf '    - %s\n' "$TMP/mn$m.sock"; done
    [ -n "${4:-}" ] && printf '%s\n' "$4"
    printf 'host_defaults:\n  workers: 1\n  socket: %s\nhosts:\n  - {}\n  - {}\n' "$TMP/cn-{host}.sock"
    printf 'engine:\n  phantom_protection: false\n'
    [ -n "${5:-}" ] && printf '%s\n' "$5"
  } >"$TMP/dm.yaml"
  echo "$TMP/dm.yaml"
}

# start_memnode POD PROVIDER M: memory node mnM of the pod (its log appended
# to $TMP/mnM.log), not waited for; its pid in MN_PIDS[M].
start_memnode() {
  "$MEMNODE" --socket "$TMP/mn$3.sock" --pod "$1" --pool-size 64MiB --provider "$2" \
    >>"$TMP/mn$3.log" 2>&1 &
  MN_PIDS[$3]=$!
  on_exit "kill -KILL $!"
}

# memnode_serves M: wait until memory node M's socket is there.
memnode_serves() {
  for _ in $(seq 1 300); do [ -S "$TMP/mn$1.sock" ] && return 0; sleep 0.05; done
  cat "$TMP/mn$1.log" >&2
  fail "memory node $1 did not come up"
}

# start_memnodes POD PROVIDER NMEMNODES: memory nodes mn0.. of the pod, each
# serving its socket; their pids in MN_PIDS.
start_memnodes() {
  for m in $(seq 0 $(($3 - 1))); do start_memnode "$1" "$2" "$m"; done
  for m in $(seq 0 $(($3 - 1))); do memnode_serves "$m"; done
}

# stop_memnodes: SIGTERM to each, which must exit 0.
stop_memnodes() {
  for m in "${!MN_PIDS[@]}"; do
    kill -TERM "${MN_PIDS[$m]}"
    local st=0
    wait "${MN_PIDS[$m]}" || st=$?
    [ $st = 0 ] || { cat "$TMP/mn$m.log" >&2; fail "memory node $m: exit status $st"; }
    rm -f "$TMP/mn$m.sock"
  done
  MN_PIDS=()
}
