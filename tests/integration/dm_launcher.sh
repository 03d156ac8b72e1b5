# tools/pod with a mode: dm config: up starts the memory node, then two
# compute nodes; status lists the memory node and both; a row written through
# host 0 is read through host 1; logs mn0; checkpoint, down --keep-region and a
# second up are refused; down stops the compute nodes, then the memory node.
# Afterwards no process, socket or pid file of the pod may remain. Also: a
# memory node not started by tools/pod at the configured socket is refused,
# and a pod of two memory nodes with a backup heals itself when one is killed.
source tests/lib.sh
ROOT=$(pwd)
BIN_ABS=$(cd "$BIN" && pwd)
POD="$ROOT/tools/pod"
export PODDB_RUN_DIR=$TMP/run     # the pod's pid files and logs stay inside $TMP
conf=$TMP/dm.yaml
mn=$TMP/mn0.sock
sed -e "s|/tmp/poddb-dm-mn0.sock|$mn|" -e "s|/tmp/poddb-dm-{host}.sock|$TMP/cn-{host}.sock|" \
    -e "s|^  pod: dmpod$|  pod: $TEST_TAG|" -e "s|^  pool_size: 256MiB$|  pool_size: 32MiB|" \
    conf/dm.yaml >"$conf"
grep -q "pool_size: 32MiB" "$conf" && grep -q "pod: $TEST_TAG" "$conf" ||
  fail "the copy of conf/dm.yaml lacks its unique pod name or pool size"
on_exit "$POD down --conf $conf --bin $BIN_ABS --timeout 5"
sock() { echo "$TMP/cn-$1.sock"; }

# No process whose command line names $TMP (the config, the sockets, the run directory).
no_pod_process() { ! pgrep -af -- "$TMP" >"$TMP/left" || fail "$1: processes left: $(cat "$TMP/left")"; }

run "$POD" logs --help
expect_rc 0 "logs --help"
out_has "mnN" "logs --help names the memory nodes"
pass "logs --help names mnN"

# ---- up, status -------------------------------------------------------------------------------
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "up"
out_has "is up: 2 hosts (compute nodes) on 1 memory node (pod $TEST_TAG, provider shm, pool 32.00 MiB each)" "up"
out_has "$mn" "up prints the memory node's socket"
out_has "mn0.log" "up prints the memory node's log"
[ -S "$mn" ] && [ -S "$(sock 0)" ] && [ -S "$(sock 1)" ] || fail "no sockets after up"
pass "up: a memory node and 2 compute nodes"

run "$POD" status --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "status"
out_has "running (2 of 2 hosts answering, 1 of 1 memory node accepting)" "status"
grep -Eq "^  mn0 +running +[0-9]+ +yes " "$TMP/out" || fail "status: no memory node row: $(cat "$TMP/out")"
pid_of() { awk -v id="$1" '$1 == id && $2 == "running" {print $3}' "$TMP/out"; }
mnpid=$(pid_of mn0)
pid0=$(pid_of 0)
pid1=$(pid_of 1)
grep -q poddb-memnode "/proc/$mnpid/cmdline" || fail "status: pid $mnpid is not a memory node"
grep -q poddb-server "/proc/$pid0/cmdline" && grep -q poddb-server "/proc/$pid1/cmdline" ||
  fail "status: pids $pid0 $pid1 are not servers"
pass "status: the memory node (pid $mnpid), then hosts $pid0 $pid1"

# ---- a row through host 0, read through host 1 --------------------------------------------------
"$BIN/poddb-cli" --conf "$conf" --host 0 call kv.put kv shared "from host 0" >/dev/null ||
  fail "kv.put through host 0"
[ "$("$BIN/poddb-cli" --conf "$conf" --host 1 call kv.get kv shared)" = "from host 0" ] ||
  fail "host 1 does not see host 0's row"
pass "a row written through host 0 is read through host 1"

# ---- logs, and what is refused ------------------------------------------------------------------
run "$POD" logs mn0 --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "logs mn0"
out_has "pod $TEST_TAG, provider shm, pool 33554432 bytes" "logs mn0"
run "$POD" logs mn1 --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "logs mn1"
err_has "it has memory nodes 0..0" "logs mn1"
pass "logs mn0; mn1 refused"

run "$POD" checkpoint --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "checkpoint"
err_has "mode dm does not log" "checkpoint"
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "a second up"
err_has "is already running: memory node 0 (pid $mnpid), host 0 (pid $pid0), host 1 (pid $pid1)" \
  "a second up"
run "$POD" down --conf "$conf" --bin "$BIN_ABS" --keep-region
expect_rc 1 "down --keep-region"
err_has "has mode: dm, which has no region" "down --keep-region"
[ -e "/proc/$mnpid" ] && [ -e "/proc/$pid0" ] || fail "a refused down --keep-region stopped something"
pass "checkpoint, a second up and down --keep-region are refused"

# ---- down ----------------------------------------------------------------------------------------
run "$POD" down --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "down"
out_has "host 0 (pid $pid0) stopped cleanly" "down"
out_has "host 1 (pid $pid1) stopped cleanly" "down"
out_has "memory node 0 (pid $mnpid) stopped cleanly" "down"
out_has "stopped 2 hosts and 1 memory node in" "down"
grep -q region "$TMP/out" "$TMP/err" && fail "down of a dm pod talks of a region: $(cat "$TMP/out")"
no_pod_process "after down"
for s in "$mn" "$(sock 0)" "$(sock 1)"; do [ ! -e "$s" ] || fail "socket $s left behind"; done
left=$(find "$PODDB_RUN_DIR" -name '*.pid' -o -name '*.exit' -o -name '*.sock' | head -3)
[ -z "$left" ] || fail "state files left behind: $left"
pass "down: no process, socket or pid file left"

# ---- a memory node that tools/pod did not start ---------------------------------------------------
"$BIN/poddb-memnode" --socket "$mn" --pod "$TEST_TAG" --pool-size 4MiB >"$TMP/foreign.log" 2>&1 &
foreign=$!
on_exit "kill -KILL $foreign"
for _ in $(seq 1 200); do grep -q ': ready$' "$TMP/foreign.log" && break; sleep 0.05; done
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "up with a foreign memory node"
err_has "memory node 0 (accepting on $mn, not started by tools/pod" "up with a foreign memory node"
[ ! -e "$(sock 0)" ] || fail "up started a compute node beside a foreign memory node"
kill -TERM "$foreign"
wait "$foreign" || fail "the foreign memory node did not exit cleanly: $(cat "$TMP/foreign.log")"
no_pod_process "after the foreign memory node"
pass "a memory node not started by tools/pod is refused"

# ---- a pod with a backup heals itself ------------------------------------------------------------
# Two memory nodes (dm.replicas: 1 by default): memory node 1 killed with
# SIGKILL; the compute nodes stop (status 3), the supervisor starts the
# memory node again and then the compute nodes, one of which rebuilds it;
# every row written before is there.
hconf=$TMP/dm-heal.yaml
sed -e "s|^    - $mn$|    - $TMP/h-mn0.sock\n    - $TMP/h-mn1.sock|" -e "s|^  pod: $TEST_TAG$|  pod: ${TEST_TAG}h|" \
    -e "s|$TMP/cn-{host}.sock|$TMP/hcn-{host}.sock|" "$conf" >"$hconf"
grep -q "h-mn1.sock" "$hconf" || fail "the healing test's config has no second memory node"
on_exit "$POD down --conf $hconf --bin $BIN_ABS --timeout 5"
run "$POD" up --conf "$hconf" --bin "$BIN_ABS"
expect_rc 0 "up (two memory nodes)"
for i in $(seq 1 50); do echo "call kv.put kv key$i value$i"; done >"$TMP/puts"
"$BIN/poddb-cli" --conf "$hconf" --host 0 <"$TMP/puts" >/dev/null || fail "writing 50 rows"
run "$POD" status --conf "$hconf" --bin "$BIN_ABS"
victim=$(awk '$1 == "mn1" && $2 == "running" {print $3}' "$TMP/out")
[ -n "$victim" ] || fail "status shows no running mn1: $(cat "$TMP/out")"
kill -KILL "$victim"
healed=0
for _ in $(seq 1 300); do
  run "$POD" status --conf "$hconf" --bin "$BIN_ABS"
  now=$(awk '$1 == "mn1" && $2 == "running" {print $3}' "$TMP/out")
  if [ "$rc" = 0 ] && [ -n "$now" ] && [ "$now" != "$victim" ] &&
    grep -q "running (2 of 2 hosts answering, 2 of 2 memory nodes accepting)" "$TMP/out"; then
    healed=1
    break
  fi
  sleep 0.1
done
[ $healed = 1 ] || fail "the pod did not heal after memory node 1 died: $(cat "$TMP/out")"
for i in $(seq 1 50); do echo "call kv.get kv key$i"; done >"$TMP/gets"
"$BIN/poddb-cli" --conf "$hconf" --host 1 <"$TMP/gets" >"$TMP/got" || fail "reading the rows back"
for i in 1 25 50; do grep -qx "value$i" "$TMP/got" || fail "row key$i lost: $(head -3 "$TMP/got")"; done
[ "$(grep -c '^value' "$TMP/got")" = 50 ] || fail "rows lost: $(grep -vc '^value' "$TMP/got") missing"
cat "$PODDB_RUN_DIR"/*/host*.log | grep -q "rebuilt memory node 1" ||
  fail "no compute node says it rebuilt memory node 1"
pass "memory node 1 killed: the supervisor started it and the compute nodes again, it was rebuilt, no row lost"
run "$POD" down --conf "$hconf" --bin "$BIN_ABS"
expect_rc 0 "down (healed pod)"
out_has "memory node 1 (pid $now) stopped cleanly" "down (healed pod)"
no_pod_process "after the healed pod's down"
pass "down stops the healed pod without starting anything again"
