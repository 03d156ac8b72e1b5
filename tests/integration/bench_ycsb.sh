# YCSB end to end on a 2-host pod (10 000 tuples, one range partition per
# host): poddb-bench loads each host's partition, runs 50/50 and 95/5 at skew
# 0.7 with 10% multi-partition transactions (half of their operations on the
# other host, through the CXL region) in internal and client mode for ~2 s,
# and 100% multi-partition for 1 s; --check finds every tuple and the column
# counters grown by exactly the committed read-modify-writes; a damaged
# counter makes --check fail loudly. The hosts run with huge_pages: true.
source tests/lib.sh
source tests/bench-pod.sh

# Multi-partition shares (percent of transactions), the paper's 10 and 100.
YCSB_MULTI_PARTITION_PCT=10
YCSB_MULTI_PARTITION_ALL=100

conf=$(bench_conf "  ycsb: {tuples: 10000, theta: 0.7}")
# Its fixed-size table is what huge pages are for (docs/configuration.md).
sed -i 's/^host_defaults:$/host_defaults:\n  huge_pages: true/' "$conf"
start_pod "$conf"
"$CLI" --conf "$conf" --host 1 call sys.config | grep -q "^host.huge_pages	true$" ||
  fail "sys.config does not show huge_pages: true"
grep -q 'huge_pages: ' "$TMP/host1.log" || fail "host 1 did not say what huge_pages does: $(cat "$TMP/host1.log")"
pass "huge_pages: true is on and said so"

bench_progress "ycsb 50/50 internal mode" --conf "$conf" --workload ycsb --duration 2 --warmup 0.5 --check \
  --multi-partition "$YCSB_MULTI_PARTITION_PCT" --read-pct 50
[ "$(jget knobs)" = "read_pct=50,theta=0.7,multi_partition_pct=$YCSB_MULTI_PARTITION_PCT,scramble=false" ] ||
  fail "knobs: $(jget knobs)"
grep -q 'usertable rows: 10000 (expected 10000)' "$TMP/bench.json" || fail "rows: $(jget check_report)"
expect_remote "ycsb 50/50 internal mode, $YCSB_MULTI_PARTITION_PCT% multi-partition" moved

bench_progress "ycsb 50/50 internal mode, $YCSB_MULTI_PARTITION_ALL% multi-partition" --conf "$conf" --workload ycsb --duration 1 --warmup 0.3 --check \
  --multi-partition "$YCSB_MULTI_PARTITION_ALL" --read-pct 50
expect_remote "ycsb 50/50 internal mode, $YCSB_MULTI_PARTITION_ALL% multi-partition"
[ "$(jget remote_calls)" = "$(jget calls)" ] || fail "not every call was multi-partition"

bench_progress "ycsb 95/5 client mode" --conf "$conf" --workload ycsb --mode client --duration 2 --warmup 0.5 --check \
  --multi-partition "$YCSB_MULTI_PARTITION_PCT" --read-pct 95
expect_remote "ycsb 95/5 client mode, $YCSB_MULTI_PARTITION_PCT% multi-partition"

# Knobs are checked before anything runs.
bench --conf "$conf" --workload ycsb --duration 1 --theta 1
[ "$rc" = 2 ] && grep -q "theta: '1' is not a number in \[0, 1)" "$TMP/bench.err" ||
  fail "theta 1: exit $rc: $(cat "$TMP/bench.err")"
bench --conf "$conf" --workload ycsb --duration 1 --remote 10/15
[ "$rc" = 2 ] && grep -q "ycsb has no knob 'remote_new_order_pct'" "$TMP/bench.err" ||
  fail "a tpcc knob for ycsb: exit $rc: $(cat "$TMP/bench.err")"
pass "bad knobs are refused with exit 2"

# A lost update: a counter changed during a run by something that is not a
# committed read-modify-write of the run. --check compares the counters with
# their sum before the run, so the damage must land inside the run.
damage_during_run "$conf" 0 'column counters grew by .*: DIFFERENT' \
  test.corrupt_ycsb 17 3 -- --workload ycsb --multi-partition "$YCSB_MULTI_PARTITION_PCT"
pass "--check reports counters changed outside the run's commits and exits 1"

stop_pod
