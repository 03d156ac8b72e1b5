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

# Groups of 8 keys of a table g (the kill tests): GROUP0..GROUP7, written
# together by one kv.multi, so that a half-applied transaction shows.
#
# multi OP GROUP [VALUE]: one kv.multi over the group's 8 keys.
multi() {
  local args="" k
  for k in 0 1 2 3 4 5 6 7; do args+=" $1 g $2$k ${3:-}"; done
  echo "call kv.multi$args"
}

# calls FILE TAG GROUP...: 100000 numbered calls, each a kv.multi that puts
# TAG.i into every key of the groups, one group per call in turn.
calls() {
  python3 - "$@" <<'PY'
import sys
out, tag, groups = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "w") as f:
    for i in range(1, 100001):
        for g in groups:
            f.write("call kv.multi" + "".join(" put g %s%d %s.%d" % (g, k, tag, i) for k in range(8)) + "\n")
PY
}

# group_value H GROUP: the group's one value as compute node H of $conf reads it
# (fails when its keys disagree: a half-applied transaction).
group_value() {
  multi get "$2" | "$CLI" --conf "$conf" --host "$1" -t 30000 --json >"$TMP/read.json" ||
    fail "reading group $2 through compute node $1: $(cat "$TMP/read.json")"
  python3 -c 'import json,sys
d=json.loads(open(sys.argv[1]).read())
if d["status"]!="ok": sys.exit("status %s: %s" % (d["status"], d))
vals={r[1] for r in d["rows"]}
if len(vals)!=1: sys.exit("group %s is half-applied: %s" % (sys.argv[2], d["rows"]))
print(vals.pop())' "$TMP/read.json" "$2"
}
