# tools/pod with a mode: dm config: up starts the memory node, then two
# compute nodes; status lists the memory node and both; a row written through
# host 0 is read through host 1; logs mn0; checkpoint, down --keep-region and a
# second up are refused; down stops the compute nodes, then the memory node.
# Afterwards no process, socket or pid file of the pod may remain. Also: a
# memory node not started by tools/pod at the configured socket is refused.
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
