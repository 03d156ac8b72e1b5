# SmallBank end to end on a 2-host pod (10 000 accounts, one range partition
# per host): poddb-bench loads each host's accounts, runs the six
# transactions with hot accounts in internal and client mode for ~2 s, a
# share of Amalgamate and SendPayment with the second account on the other
# host (through the CXL region), and --check finds the audit total moved by
# exactly the money the committed calls created; money appearing from
# elsewhere makes --check fail loudly. After a restart of the pod, loading
# again finds the accounts there (recovered) and the run and --check pass.
source tests/lib.sh
source tests/bench-pod.sh

# Percent of Amalgamate/SendPayment calls with the second account on the other host.
SMALLBANK_REMOTE_PCT=25

conf=$(bench_conf "  smallbank: {accounts: 10000}")
start_pod "$conf"

bench_progress "smallbank internal mode (hot set)" --conf "$conf" --workload smallbank --duration 2 --warmup 0.5 --check \
  --remote-pct "$SMALLBANK_REMOTE_PCT"
grep -q 'balance rows: 20000 (expected 20000)' "$TMP/bench.json" || fail "rows: $(jget check_report)"
grep -q 'money created by committed calls .*: equal' "$TMP/bench.json" || fail "audit: $(jget check_report)"
expect_remote "smallbank internal mode, $SMALLBANK_REMOTE_PCT% remote" moved

bench_progress "smallbank client mode (Zipfian 0.9)" --conf "$conf" --workload smallbank --mode client --duration 2 --warmup 0.5 --check \
  --remote-pct "$SMALLBANK_REMOTE_PCT" --theta 0.9
[ "$(jget knobs)" = "hot_accounts=400,hot_pct=90,theta=0.9,remote_pct=$SMALLBANK_REMOTE_PCT" ] ||
  fail "knobs: $(jget knobs)"
expect_remote "smallbank client mode, $SMALLBANK_REMOTE_PCT% remote"

# Money from nowhere during a run: the audit no longer adds up.
damage_during_run "$conf" 1 'money created by committed calls .*: DIFFERENT' \
  test.corrupt_smallbank 9999 12345 -- --workload smallbank --remote-pct "$SMALLBANK_REMOTE_PCT"
pass "--check reports money that no committed call created and exits 1"

# After a restart the accounts are recovered from the logs: loading again
# finds each load unit's rows there and goes on to the run.
stop_pod
start_pod "$conf"
bench --conf "$conf" --workload smallbank --duration 1 --warmup 0 --check
[ "$rc" = 0 ] || fail "smallbank after a restart: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
grep -q 'balance rows: 20000 (expected 20000)' "$TMP/bench.json" || fail "rows after a restart: $(jget check_report)"
grep -q 'bench: loaded smallbank on host 0: .* of them there before' "$TMP/host0.log" ||
  fail "the load after a restart does not say it found rows there: $(grep 'bench: load' "$TMP/host0.log")"
pass "after a restart smallbank is found loaded and runs, --check passing"
stop_pod
