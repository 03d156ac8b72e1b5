# A memory node killed with SIGKILL in the middle of commits, in a pod that
# keeps a backup of every memory node's records (docs/dm.md, "Replication"):
# two memory nodes, dm.replicas 1, two compute nodes under ford. First 400
# keys are written and acknowledged; then in each round both compute nodes
# run streams of kv.multi calls (compute node 1 writes one value to the 8
# keys of group v, compute node 0 to those of group s) until one memory node
# is killed (memory node 1, then memory node 0, then 1 again). Then:
#   - both compute nodes stop by themselves, saying why;
#   - the memory node restarts empty, the compute nodes start again and one
#     of them rebuilds it from the backups (and says so);
#   - nothing acknowledged is lost: each group holds the last value its
#     stream had acknowledged or the one in flight, whole (one value in its
#     8 keys: nothing half-applied), and the 400 keys hold their values;
#   - no stuck lock: both groups are written again through the other
#     compute node.
# SmallBank is loaded before the kills; at the end it is found loaded (the
# compute nodes are new processes) and runs with its audit (--check).
source tests/lib.sh
source tests/bench-pod.sh
source tests/dm-pod.sh
PROVIDER=${DM_MN_KILL_PROVIDER:-shm}
VICTIMS=${DM_MN_KILL_VICTIMS:-1 0 1}

conf=$(dm_conf dmmnkill "$PROVIDER" 2 "  replicas: 1" "tables:
  - name: g
    key_size: 16
    value_size: 32
workloads:
  smallbank: {accounts: 1000}")
sed -i 's/^engine:$/engine:\n  retry_timeout_ms: 30000/' "$conf"
start_memnodes dmmnkill "$PROVIDER" 2

# start_cn H: compute node H, answering sys.ping; its pid in CN[H].
CN=()
start_cn() {
  "$BIN/poddb-server" --conf "$conf" --host "$1" >>"$TMP/host$1.log" 2>&1 &
  CN[$1]=$!
  on_exit "kill -KILL $!; rm -f /dev/shm/$!:*"
}
cn_answers() { wait_answering "${CN[$1]}" "$TMP/host$1.log" "compute node $1" --conf "$conf" --host "$1"; }

# expect_group H GROUP TAG ACKS: the group holds TAG.ACKS (the last
# acknowledged) or TAG.(ACKS+1) (in flight when the memory node died);
# before any acknowledgement, PREV.
expect_group() {
  local v
  v=$(group_value "$1" "$2") || exit 1
  local before="$3.$4"
  [ "$4" = 0 ] && before=$5
  [ "$v" = "$before" ] || [ "$v" = "$3.$(($4 + 1))" ] ||
    fail "group $2 holds $v after $4 acknowledged calls (expected $before or $3.$(($4 + 1)))"
}

start_cn 0
start_cn 1
cn_answers 0
cn_answers 1
python3 -c 'for i in range(400): print("call kv.put g key%d val%d" % (i, i))' >"$TMP/load.calls"
"$CLI" --conf "$conf" --host 0 --json <"$TMP/load.calls" >"$TMP/load.acks" ||
  fail "loading 400 keys: $(grep -v '"ok"' "$TMP/load.acks" | head -3)"
python3 -c 'for i in range(400): print("call kv.get g key%d" % i)' >"$TMP/check.calls"
check_keys() {
  "$CLI" --conf "$conf" --host "$1" -t 30000 --json <"$TMP/check.calls" >"$TMP/check.out" ||
    fail "reading the 400 keys through compute node $1: $(grep -v '"ok"' "$TMP/check.out" | head -3)"
  python3 -c 'import json,sys
lines=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad=[(i,d) for i,d in enumerate(lines) if d.get("status")!="ok" or d["rows"]!=[["val%d"%i]]]
if len(lines)!=400 or bad: sys.exit("%d answers, wrong: %s" % (len(lines), bad[:3]))' "$TMP/check.out" ||
    fail "round $2: the keys written before the kills are not all there"
}
check_keys 0 start
bench --conf "$conf" --workload smallbank --duration 0.5 --warmup 0 --check
[ "$rc" = 0 ] || fail "smallbank before the kills: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
PREV_V=none PREV_S=none

r=0
for victim in $VICTIMS; do
  r=$((r + 1))
  calls "$TMP/v.calls" "v$r" v
  calls "$TMP/s.calls" "s$r" s
  "$CLI" --conf "$conf" --host 1 -t 60000 --json <"$TMP/v.calls" >"$TMP/v.$r" 2>/dev/null &
  fv=$!
  "$CLI" --conf "$conf" --host 0 -t 60000 --json <"$TMP/s.calls" >"$TMP/s.$r" 2>/dev/null &
  fs=$!
  for _ in $(seq 1 300); do
    [ "$(grep -c '"ok"' "$TMP/v.$r" || true)" -ge 30 ] && [ "$(grep -c '"ok"' "$TMP/s.$r" || true)" -ge 30 ] && break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 3 + 1))"
  kill -KILL "${MN_PIDS[$victim]}"
  wait "${MN_PIDS[$victim]}" 2>/dev/null || true
  rm -f "$TMP/mn$victim.sock"
  # The compute nodes stop by themselves.
  for h in 0 1; do
    for _ in $(seq 1 300); do kill -0 "${CN[$h]}" 2>/dev/null || break; sleep 0.1; done
    kill -0 "${CN[$h]}" 2>/dev/null && fail "round $r: compute node $h still runs 30 s after memory node $victim died"
    st=0
    wait "${CN[$h]}" 2>/dev/null || st=$?
    [ "$st" = 3 ] || fail "round $r: compute node $h exited with status $st: $(tail -5 "$TMP/host$h.log")"
  done
  grep -q "memory node $victim ([^)]*) closed its connection" "$TMP/host0.log" ||
    fail "round $r: compute node 0 did not say why it stopped: $(tail -5 "$TMP/host0.log")"
  wait "$fv" "$fs" 2>/dev/null || true
  acks_v=$(grep -c '"ok"' "$TMP/v.$r" || true)
  acks_s=$(grep -c '"ok"' "$TMP/s.$r" || true)
  # The memory node comes back empty; the compute nodes rebuild it.
  start_memnode dmmnkill "$PROVIDER" "$victim"
  memnode_serves "$victim"
  start_cn 0
  start_cn 1
  cn_answers 0
  cn_answers 1
  n=$(cat "$TMP/host0.log" "$TMP/host1.log" | grep -c "rebuilt memory node $victim " || true)
  [ "$n" -ge "$r" ] || n=$(cat "$TMP/host0.log" "$TMP/host1.log" | grep -c "rebuilt memory node" || true)
  [ "$n" -ge "$r" ] || fail "round $r: no compute node says it rebuilt memory node $victim: $(grep 'dm record store' "$TMP/host0.log" "$TMP/host1.log" | tail -6)"
  expect_group 0 v "v$r" "$acks_v" "$PREV_V"
  expect_group 1 s "s$r" "$acks_s" "$PREV_S"
  check_keys $((r % 2)) "$r"
  # No stuck lock: each group written through the other compute node.
  for g in v s; do
    multi put "$g" "after$r" | "$CLI" --conf "$conf" --host $((r % 2)) -t 30000 >/dev/null ||
      fail "round $r: group $g cannot be written after the rebuild: $(tail -5 "$TMP/host$((r % 2)).log")"
  done
  PREV_V=after$r PREV_S=after$r
  pass "round $r: memory node $victim killed after $acks_v + $acks_s acknowledged calls, rebuilt; nothing lost, nothing half-applied, no stuck lock"
done

bench --conf "$conf" --workload smallbank --duration 0.5 --warmup 0 --check
[ "$rc" = 0 ] || fail "smallbank after the rebuilds: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
grep -q 'balance rows: 2000 (expected 2000)' "$TMP/bench.json" || fail "smallbank's rows after the rebuilds: $(jget check_report)"
pass "smallbank, loaded before the kills, is found loaded on the rebuilt pod and its audit holds"
for h in 0 1; do kill -TERM "${CN[$h]}"; wait "${CN[$h]}" || fail "compute node $h: exit status $?"; done
if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error|WARNING: ThreadSanitizer' \
  "$TMP/host0.log" "$TMP/host1.log" "$TMP"/mn*.log; then
  fail "a sanitizer report: $(grep -A20 -E 'Sanitizer|runtime error' "$TMP/host0.log" "$TMP/host1.log" | head -40)"
fi
