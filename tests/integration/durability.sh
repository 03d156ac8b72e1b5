# Durability end to end with the real programs (docs/durability.md): an idle
# server does not write its durable-epoch record, what the
# server acknowledged survives SIGKILL, a delete stays deleted, sys.log reports
# the recovery, poddb-logdump shows the durable-epoch record and verifies the
# log, sys.checkpoint writes checkpoints on request that recovery starts
# from, a clean stop leaves a verifiable log, and a damaged durable-epoch record
# stops the server with a clear message rather than a guess.
source tests/lib.sh
# One host: in a pod of several, a host with log history waits for the others
# to recover together (pod mode).
conf=$TMP/pod.yaml
logdir=$TMP/pod/log-0
cat >"$conf" <<EOF
region: {path: /dev/shm/$TEST_TAG-region, kind: shm, size: 512MiB, hwcc_budget: 16MiB}
hosts:
  - workers: 1
    loggers: 1
    socket: $TMP/pod-0.sock
    log_dir: $TMP/pod/log-0
tables:
  - {name: kv, key_size: 64, value_size: 1024}
engine:
  epoch_ms: 10
  reply_before_durable: false
EOF
CLI="$BIN/poddb-cli"
on_exit "$BIN/poddb-region destroy --conf $conf --force"

start() {
  "$BIN/poddb-server" --conf "$conf" --host 0 >>"$TMP/server.log" 2>&1 &
  srv=$!
  on_exit "kill -KILL $srv"
  for _ in $(seq 1 300); do
    if "$CLI" --conf "$conf" -t 2000 call sys.ping >/dev/null 2>&1; then return 0; fi
    kill -0 $srv 2>/dev/null || { cat "$TMP/server.log" >&2; fail "the server exited at start"; }
    sleep 0.1
  done
  fail "the server does not answer"
}

start
# Idle: a quiet server lets the epoch rest (docs/durability.md, "A quiet pod
# sleeps") and writes nothing; reads that wait for durability move the
# durable epoch on without writes of the record (nothing to record); the
# writes that follow are still durable (below).
log_counts() {
  "$CLI" --conf "$conf" call sys.log |
    awk -F'\t' '$1=="persisted_by_file"{f=$2} $1=="persisted_empty"{e=$2} $1=="global_epoch"{g=$2}
                END{print f+0, e+0, g+0}'
}
sleep 0.3
read -r f1 e1 g1 < <(log_counts)
sleep 1
read -r f2 e2 g2 < <(log_counts)
[ $((f2 - f1)) -le 1 ] && [ $((g2 - g1)) -le 5 ] ||
  fail "idle: durable-epoch record written $f1 -> $f2 times, epoch $g1 -> $g2 in 1 s"
pass "an idle server rests: epoch $g1 -> $g2 in 1 s, its durable-epoch record not written"
for i in $(seq 1 20); do
  rc=0
  "$CLI" --conf "$conf" call kv.get kv nobody-$i >/dev/null || rc=$?
  [ $rc = 3 ] || fail "get nobody-$i: exit $rc (expected 3: not found)"
done
read -r f3 e3 g3 < <(log_counts)
[ $((f3 - f2)) -le 2 ] && [ $((e3 - e2)) -ge 5 ] && [ $((g3 - g2)) -ge 5 ] ||
  fail "reads: durable-epoch record written $f2 -> $f3 times, advances without one $e2 -> $e3, epoch $g2 -> $g3"
pass "reads waiting for durability move the epoch on ($g2 -> $g3) without writes ($((e3 - e2)) empty advances)"
"$CLI" --conf "$conf" call kv.put kv alice hello >/dev/null || fail "put alice"
"$CLI" --conf "$conf" call kv.put kv bob world >/dev/null || fail "put bob"
"$CLI" --conf "$conf" call kv.delete kv bob >/dev/null || fail "delete bob"
[ "$("$CLI" --conf "$conf" call sys.log | awk -F'\t' '$1=="logging"{print $2}')" = on ] \
  || fail "sys.log: logging is not on"
pass "acknowledged: put alice, put bob, delete bob"

kill -KILL $srv; wait $srv 2>/dev/null || true
start
[ "$("$CLI" --conf "$conf" call kv.get kv alice)" = hello ] || fail "alice lost after SIGKILL"
set +e
"$CLI" --conf "$conf" call kv.get kv bob >"$TMP/out" 2>&1; rc=$?
set -e
[ $rc = 3 ] || fail "bob came back after SIGKILL (rc $rc: $(cat "$TMP/out"))"
grep -q "recovery: done" "$TMP/server.log" || fail "no recovery summary in the server log"
read_n=$("$CLI" --conf "$conf" call sys.log | awk -F'\t' '$1=="recovery.records_read"{print $2}')
[ "${read_n:-0}" -ge 3 ] || fail "sys.log recovery.records_read: '$read_n'"
pass "after SIGKILL and restart: alice is there, bob stays deleted, recovery reported"

out=$($BIN/poddb-logdump "$logdir") || fail "logdump $logdir: $out"
echo "$out" | sed -n 1p | grep >/dev/null 'durable-epoch  host 0  committed below epoch [0-9]' \
  || fail "logdump: durable record first: $out"
echo "$out" | grep >/dev/null 'seg-0-0-' || fail "logdump: no segment: $out"
json=$($BIN/poddb-logdump --json "$logdir" | sed -n 1p)
[ "$(json_get "$json" type)" = durable ] || fail "logdump --json: $json"
[ "$(json_get "$json" epoch)" -gt 0 ] || fail "logdump --json epoch: $json"
pass "poddb-logdump shows the durable-epoch record"

# A checkpoint on request (sys.checkpoint): it returns at once with the count
# sys.log's checkpoints reaches once it is written; recovery starts from it.
set +e
"$CLI" --conf "$conf" call sys.checkpoint often >"$TMP/out" 2>&1; rc=$?
set -e
[ $rc != 0 ] && grep -q 'no argument, or "full"' "$TMP/out" ||
  fail "sys.checkpoint often (rc $rc): $(cat "$TMP/out")"
log_value() { "$CLI" --conf "$conf" call sys.log | awk -F'\t' -v k="$1" '$1==k{print $2}'; }
checkpoint() { # [full]: ask, wait until written, check it did not fail
  local n
  n=$("$CLI" --conf "$conf" call sys.checkpoint "$@" | awk -F'\t' '$1=="checkpoints"{print $2}')
  [ -n "$n" ] || fail "sys.checkpoint $*: no count"
  for _ in $(seq 1 300); do
    [ "$(log_value checkpoints)" -ge "$n" ] && break
    sleep 0.1
  done
  [ "$(log_value checkpoints)" -ge "$n" ] || fail "sys.checkpoint $*: not written in 30 s"
  [ "$(log_value checkpoint_failures)" = 0 ] || fail "sys.checkpoint $*: failed"
  [ "$(log_value checkpoint_running)" = 0 ] || fail "sys.checkpoint $*: still running"
}
checkpoint
# The first checkpoint of a server's life is full: alice (bob is deleted).
[ "$(log_value last_checkpoint.kind)" = full ] && [ "$(log_value last_checkpoint.rows)" = 1 ] ||
  fail "first requested checkpoint: $("$CLI" --conf "$conf" call sys.log | grep last_checkpoint)"
ls "$logdir"/ckpt-0-*.log >/dev/null 2>&1 || fail "no checkpoint file in $logdir"
"$CLI" --conf "$conf" call kv.put kv carol again >/dev/null || fail "put carol"
checkpoint
[ "$(log_value last_checkpoint.kind)" = delta ] && [ "$(log_value last_checkpoint.rows)" = 1 ] &&
  [ "$(log_value last_checkpoint.unchanged)" = 1 ] ||
  fail "delta checkpoint: $("$CLI" --conf "$conf" call sys.log | grep last_checkpoint)"
checkpoint full
[ "$(log_value last_checkpoint.kind)" = full ] && [ "$(log_value last_checkpoint.rows)" = 2 ] ||
  fail "full checkpoint: $("$CLI" --conf "$conf" call sys.log | grep last_checkpoint)"
pass "sys.checkpoint writes a full, a delta and a full checkpoint on request, sys.log reports each"
kill -KILL $srv; wait $srv 2>/dev/null || true
start
[ "$(log_value recovery.checkpoint_epoch)" -gt 0 ] || fail "recovery did not start from the checkpoint"
[ "$("$CLI" --conf "$conf" call kv.get kv carol)" = again ] || fail "carol lost"
[ "$("$CLI" --conf "$conf" call kv.get kv alice)" = hello ] || fail "alice lost"
set +e
"$CLI" --conf "$conf" call kv.get kv bob >/dev/null 2>&1; rc=$?
set -e
[ $rc = 3 ] || fail "bob came back after the checkpoints (rc $rc)"
pass "after SIGKILL, recovery starts from the requested checkpoint: alice and carol, no bob"

kill -TERM $srv; wait $srv || fail "the server did not stop cleanly"
$BIN/poddb-logdump --verify "$logdir" >/dev/null || fail "--verify after a clean stop"
pass "a clean stop leaves a log that verifies"

# Both slots of the record damaged: the committed end is unknown.
printf 'garbage garbage garbage' | dd of="$logdir/durable-epoch" bs=1 seek=0 conv=notrunc 2>/dev/null
printf 'garbage garbage garbage' | dd of="$logdir/durable-epoch" bs=1 seek=512 conv=notrunc 2>/dev/null
set +e
$BIN/poddb-logdump --verify "$logdir" >"$TMP/out" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q 'DAMAGED' "$TMP/out" || fail "--verify on a damaged record (rc $rc): $(cat "$TMP/out")"
set +e
timeout 20 "$BIN/poddb-server" --conf "$conf" --host 0 >"$TMP/bad.log" 2>&1; rc=$?
set -e
[ $rc != 0 ] && grep -q 'damaged' "$TMP/bad.log" || fail "server with a damaged record (rc $rc): $(cat "$TMP/bad.log")"
pass "a damaged durable-epoch record is refused, by logdump --verify and by the server"

# Replies before durability and logging off: both say so loudly, and work.
sed -e 's/reply_before_durable: false/reply_before_durable: true/' \
    -e "s|$TMP/pod/log-|$TMP/pod/early-log-|" "$conf" >"$TMP/early.yaml"
sed -e 's/loggers: 1/loggers: 0/' -e "s|$TMP/pod/log-|$TMP/pod/off-log-|" "$conf" >"$TMP/off.yaml"
for c in early off; do
  conf=$TMP/$c.yaml
  : >"$TMP/server.log"
  start
  "$CLI" --conf "$conf" call kv.put kv k v >/dev/null || fail "$c: put"
  [ "$("$CLI" --conf "$conf" call kv.get kv k)" = v ] || fail "$c: get"
  if [ $c = off ]; then
    set +e
    "$CLI" --conf "$conf" call sys.checkpoint >"$TMP/out" 2>&1; rc=$?
    set -e
    [ $rc != 0 ] && grep -q 'logging is off' "$TMP/out" || fail "off: sys.checkpoint (rc $rc): $(cat "$TMP/out")"
  fi
  kill -TERM $srv; wait $srv || fail "$c: clean stop"
  want='reply_before_durable is set: .*LOST in a crash'
  [ $c = off ] && want='logging is off (loggers: 0): nothing is durable'
  grep -q "$want" "$TMP/server.log" || fail "$c: the server does not say '$want'"
  $BIN/poddb-region destroy --conf "$conf" --force >/dev/null 2>&1 || true
done
pass "reply_before_durable and loggers: 0 run, and say they are not durable"
