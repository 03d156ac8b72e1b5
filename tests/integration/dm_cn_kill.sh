# A compute node killed with SIGKILL in the middle of its commits, again and
# again, under ford (docs/dm.md, "A compute node that dies"): two memory
# nodes, two compute nodes. Compute node 1 (the victim) runs a stream of
# kv.multi calls that write one value to all 8 keys of group v (its own) and
# of group s (shared with compute node 0, which writes group s too), while
# poddb-bench keeps its worker busy with kv puts; then it is killed. After
# each kill:
#   - no stuck lock: compute node 0 writes both groups within its timeout
#     (on odd rounds before the victim restarts: the survivor recovers it;
#     on even rounds after: the victim recovers its own previous run);
#   - none half-applied: each group's 8 keys hold one value;
#   - every acknowledged call present: group v holds the victim's last
#     acknowledged value or the one after it (in flight when it died).
# How the victim dies: at a crash point (src/util/crashpoint.h), where it
# kills itself with SIGKILL after a random number of passes: ford-locked (a
# record just locked while executing), ford-log-written (a commit's undo
# log placed, no row written yet) or ford-rows-written (its rows placed, not
# yet released), the last two rolled back by recovery. With
# DM_KILL_RANDOM=1 (the default on tcp;ofi_rxm) two rounds in three kill it
# at a random instant instead. Not on shm: its queues are shared memory
# guarded by spinlocks, and a process killed while it holds one (in the
# middle of posting an operation) leaves the memory node's queue locked for
# every other client (docs/dm.md).
# Under motor (DM_KILL_PROTOCOL=motor) the same, over records of several
# versions: its crash points are ford's (a commit's log and INVISIBLE cells
# placed; its cells made visible), and recovery rolls a commit forward or
# back. Under lotus (DM_KILL_PROTOCOL=lotus) the victim also owns the locks
# of half the keys (its lock table dies with it): on odd rounds compute node
# 0's janitor finds it gone, has its commit rolled back or forward and gives
# back its locks, and compute node 0's writes of keys whose locks the victim
# kept wait (retrying) until it is back; the victim restarts 2 s into them.
# At the end both compute nodes serve kv calls.
source tests/lib.sh
source tests/bench-pod.sh
source tests/dm-pod.sh
PROVIDER=${DM_KILL_PROVIDER:-shm}
ROUNDS=${DM_KILL_ROUNDS:-6}
PROTOCOL=${DM_KILL_PROTOCOL:-ford}
PROTOCOL_CONF="  inflight: 4"
UNDONE='rolled back a transaction'
if [ "$PROTOCOL" = motor ] || [ "$PROTOCOL" = lotus ]; then
  PROTOCOL_CONF="  protocol: $PROTOCOL
  replicas: 0
  inflight: 4"
  UNDONE='motor: rolled \(back\|forward\) a commit'
fi
if [ "$PROVIDER" = shm ]; then RANDOM_KILLS=${DM_KILL_RANDOM:-0}; else RANDOM_KILLS=${DM_KILL_RANDOM:-1}; fi

# crash_for R: the crash point the victim of round R runs with ("": none,
# killed at a random instant).
crash_for() {
  local n=$((400 + RANDOM % 1500)) # past the kv load's 300 puts
  case "$RANDOM_KILLS:$(($1 % 3))" in
    0:1) echo "ford-locked:$n" ;;
    0:2 | 1:2) echo "ford-rows-written:$n" ;;
    0:0) echo "ford-log-written:$n" ;;
    *) echo "" ;;
  esac
}

conf=$(dm_conf dmkill "$PROVIDER" 2 "$PROTOCOL_CONF" "tables:
  - name: g
    key_size: 16
    value_size: 32
workloads:
  smallbank: {accounts: 1000}")
sed -i 's/^engine:$/engine:\n  retry_timeout_ms: 30000/' "$conf"
start_memnodes dmkill "$PROVIDER" 2

# start_cn H [CRASH]: compute node H, answering sys.ping; its pid in CN[H].
# CRASH: it kills itself at that crash point (PODDB_CRASH_POINT). It runs
# with $CN_CONF when set (the same pod, other dm.inflight).
CN=()
start_cn() {
  PODDB_CRASH_POINT=${2:-} "$BIN/poddb-server" --conf "${CN_CONF:-$conf}" --host "$1" \
    >>"$TMP/host$1.log" 2>&1 &
  CN[$1]=$!
  # shm leaves a killed process's region (/dev/shm/PID:*) behind
  on_exit "kill -KILL $!; rm -f /dev/shm/$!:*"
  wait_answering "${CN[$1]}" "$TMP/host$1.log" "compute node $1" --conf "$conf" --host "$1"
}

# victim_dies R CRASH: compute node 1 runs $TMP/victim.calls (each
# acknowledged call a line of $TMP/acks.R) and kv puts to keep its worker
# busy, until it dies: at its crash point when CRASH is set, else killed at a
# random instant once it acknowledged some calls. Sets acked.
victim_dies() {
  "$CLI" --conf "$conf" --host 1 --json <"$TMP/victim.calls" >"$TMP/acks.$1" 2>/dev/null &
  local feeder=$!
  "$BENCH" --conf "$conf" --workload kv --host 1 --table g --keys 300 --value-size 32 \
    --read-ratio 0 --depth 8 --duration 60 --quiet --json >/dev/null 2>&1 &
  local kvload=$!
  for _ in $(seq 1 200); do
    [ "$(grep -c '"ok"' "$TMP/acks.$1" || true)" -ge 20 ] && break
    kill -0 "${CN[1]}" 2>/dev/null || break
    sleep 0.05
  done
  if [ -n "$2" ]; then # it dies by itself at its crash point
    for _ in $(seq 1 600); do kill -0 "${CN[1]}" 2>/dev/null || break; sleep 0.1; done
    kill -0 "${CN[1]}" 2>/dev/null && fail "round $1: the victim did not reach its crash point $2"
  else
    sleep "0.$((RANDOM % 5 + 1))"
    kill -KILL "${CN[1]}" 2>/dev/null || true
  fi
  wait "${CN[1]}" 2>/dev/null || true
  kill "$feeder" "$kvload" 2>/dev/null || true # nothing more can be acknowledged
  wait "$feeder" "$kvload" 2>/dev/null || true
  acked=$(grep -c '"ok"' "$TMP/acks.$1" || true)
}

start_cn 0
start_cn 1
multi put v x0 | "$CLI" --conf "$conf" --host 0 >/dev/null
multi put s x0 | "$CLI" --conf "$conf" --host 0 >/dev/null
bench --conf "$conf" --workload smallbank --duration 0.5 --warmup 0 --check
[ "$rc" = 0 ] || fail "smallbank before the kills: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
# The first victim, with its crash point.
kill -TERM "${CN[1]}"
wait "${CN[1]}" || fail "compute node 1: exit status $? on SIGTERM"
CRASH=([1]="$(crash_for 1)")
start_cn 1 "${CRASH[1]}"

for r in $(seq 1 "$ROUNDS"); do
  # The victim's calls: group v's value is r.i for its i-th call, and each
  # acknowledged call prints one line.
  calls "$TMP/victim.calls" "a$r" v s
  calls "$TMP/survivor.calls" "c$r" s
  "$CLI" --conf "$conf" --host 0 -t 60000 --json <"$TMP/survivor.calls" >"$TMP/survivor.$r" 2>/dev/null &
  survivor=$! # it writes group s meanwhile
  victim_dies "$r" "${CRASH[$r]}"
  crash=$(crash_for $((r + 1)))
  CRASH[$((r + 1))]=$crash
  if [ $((r % 2)) = 0 ]; then start_cn 1 "$crash"; fi
  # No stuck lock: both groups written by compute node 0 (under lotus, on
  # odd rounds, finished once the victim is back: it owns some locks).
  multi put v "after$r" | "$CLI" --conf "$conf" --host 0 -t 30000 >/dev/null &
  writer=$!
  if [ $((r % 2)) = 1 ] && [ "$PROTOCOL" = lotus ]; then
    sleep 2
    start_cn 1 "$crash"
  fi
  wait "$writer" ||
    fail "round $r: compute node 0 cannot write group v after the kill: $(tail -5 "$TMP/host0.log")"
  kill "$survivor" 2>/dev/null || true
  wait "$survivor" 2>/dev/null || true
  grep -q '"error"' "$TMP/survivor.$r" && fail "round $r: the survivor's call failed: $(grep error "$TMP/survivor.$r" | head -3)"
  if [ $((r % 2)) = 1 ] && [ "$PROTOCOL" != lotus ]; then start_cn 1 "$crash"; fi
  s_val=$(group_value 1 s)
  [ "$(group_value 0 v)" = "after$r" ] || fail "round $r: group v lost compute node 0's write"
  pass "round $r: victim killed after $acked acknowledged calls; no stuck lock, group s holds $s_val whole"
done

# Every acknowledged call survives: a last round, after which group v must
# hold the last acknowledged value or the one in flight.
r=final
calls "$TMP/victim.calls" f v
victim_dies "$r" "${CRASH[$((ROUNDS + 1))]}"
v=$(group_value 0 v)
before="f.$acked"
[ "$acked" = 0 ] && before="after$ROUNDS"
[ "$v" = "$before" ] || [ "$v" = "f.$((acked + 1))" ] ||
  fail "group v holds $v after $acked acknowledged calls (expected $before or f.$((acked + 1)))"
pass "every acknowledged call is there ($acked acknowledged, group v holds $v)"
start_cn 1

# A compute node that dies holding an index bucket's lock (in the middle of
# an insert): the next compute node that needs the bucket takes the lock
# over once the memory node says the holder is gone.
python3 -c 'import sys
for i in range(1, 2001): print("call kv.put g new%d x%d" % (i, i))' >"$TMP/inserts.calls"
kill -TERM "${CN[1]}"
wait "${CN[1]}" || fail "compute node 1: exit status $? on SIGTERM"
start_cn 1 "dm-bucket-locked:$((20 + RANDOM % 50))"
"$CLI" --conf "$conf" --host 1 --json <"$TMP/inserts.calls" >"$TMP/inserts.acks" 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 "${CN[1]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${CN[1]}" 2>/dev/null && fail "compute node 1 did not reach its crash point in an insert"
wait "${CN[1]}" 2>/dev/null || true
"$CLI" --conf "$conf" --host 0 -t 60000 --json <"$TMP/inserts.calls" >"$TMP/inserts.again" &
inserter=$!
if [ "$PROTOCOL" = lotus ]; then # some keys' locks are the victim's to give
  sleep 2
  start_cn 1
fi
wait "$inserter" ||
  fail "compute node 0 could not insert after compute node 1 died in an insert: $(grep -v '"ok"' "$TMP/inserts.again" | head -3)"
grep -q 'took over the lock of index bucket' "$TMP/host0.log" ||
  fail "compute node 0 did not take the dead compute node's bucket lock over: $(tail -5 "$TMP/host0.log")"
pass "an index bucket locked by a compute node that died is taken over"
# Its next start keeps twice as many transactions in flight: 9 undo logs
# instead of 5, new ones, which it switches to once its previous run is
# recovered.
sed 's/^  inflight: 4$/  inflight: 8/' "$conf" >"$TMP/more.yaml"
if [ "$PROTOCOL" = lotus ]; then
  kill -TERM "${CN[1]}"
  wait "${CN[1]}" || fail "compute node 1: exit status $? on SIGTERM"
fi
CN_CONF="$TMP/more.yaml" start_cn 1
grep -q 'incarnation [0-9]*), 9 undo logs of' "$TMP/host1.log" ||
  fail "compute node 1 restarted with 8 transactions in flight: $(grep 'undo logs' "$TMP/host1.log" | tail -2)"

recovered=$(cat "$TMP/host0.log" "$TMP/host1.log" | grep -c 'recovered: its locks are stale' || true)
rolled=$(cat "$TMP/host0.log" "$TMP/host1.log" | grep -c "$UNDONE" || true)
crashes=$(grep -c 'crash point ford-[a-z-]* reached' "$TMP/host1.log" || true)
undo=$(grep -cE 'crash point ford-(rows|log)-written reached' "$TMP/host1.log" || true)
[ "$recovered" -ge "$ROUNDS" ] && [ "$crashes" -ge $((ROUNDS / 3)) ] && [ "$rolled" -ge "$undo" ] ||
  fail "$recovered recoveries, $rolled rolled back, $crashes crash points ($undo with a commit to undo) over $ROUNDS kills: $(grep -E 'ford|motor|crash' "$TMP/host0.log" "$TMP/host1.log" | tail -20)"
pass "$PROTOCOL: $recovered recoveries of a killed compute node ($crashes at crash points), $rolled with a commit in flight rolled back or forward"
if [ "$PROTOCOL" = lotus ]; then
  gone=$(grep -c 'lotus: compute node slot 2 (host 1, incarnation [0-9]*) is gone' "$TMP/host0.log" || true)
  [ "$gone" -ge "$ROUNDS" ] ||
    fail "compute node 0's janitor found the victim gone $gone times in $ROUNDS kills: $(grep lotus "$TMP/host0.log" | tail -5)"
  pass "lotus: compute node 0's janitor found the victim gone after $gone kills and gave back its locks"
fi

# Both compute nodes serve on: kv puts and gets through each.
for h in 0 1; do
  "$BENCH" --conf "$conf" --workload kv --host $h --table g --keys 300 --value-size 32 \
    --read-ratio 0.5 --duration 0.5 --warmup 0 --quiet --json >"$TMP/bench.json" 2>"$TMP/bench.err" ||
    fail "kv on compute node $h after the kills: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
done
pass "both compute nodes serve after the kills"
for h in 0 1; do kill -TERM "${CN[$h]}"; wait "${CN[$h]}" || fail "compute node $h: exit status $?"; done
if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error|WARNING: ThreadSanitizer' \
  "$TMP/host0.log" "$TMP/host1.log"; then
  fail "a sanitizer report: $(grep -A20 -E 'Sanitizer|runtime error' "$TMP/host0.log" "$TMP/host1.log" | head -40)"
fi
