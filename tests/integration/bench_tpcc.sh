# TPC-C end to end on a 2-host pod (one warehouse per host): poddb-bench
# loads each host's warehouse (bench.load, idempotent), runs the mix with
# Tigon's remote shares (10/15: cross-host NewOrder lines and Payments through
# the CXL region) in internal and in client mode for ~2 s and a short 60/90
# run, and --check finds consistency conditions 1-4 holding after each, and
# after a restart of the pod (loading again skips what is there); a
# damaged D_YTD makes --check fail loudly.
source tests/lib.sh
source tests/bench-pod.sh

# Remote NewOrder / Payment shares (percent), the paper's usual and high ones.
TPCC_REMOTE=10/15
TPCC_REMOTE_HIGH=60/90

conf=$(bench_conf "  tpcc: {warehouses: 2, items: 1000, customers_per_district: 60}")
start_pod "$conf"

bench_progress "tpcc internal mode" --conf "$conf" --workload tpcc --duration 2 --warmup 0.5 --check --remote "$TPCC_REMOTE"
[ "$(jget mode)" = internal ] || fail "mode $(jget mode)"
[ "$(jget knobs)" = "remote_new_order_pct=${TPCC_REMOTE%/*},remote_payment_pct=${TPCC_REMOTE#*/}" ] ||
  fail "knobs: $(jget knobs)"
# Every NewOrder that rolls back is one the generator made roll back (the
# spec's 1%), and nothing else rolls back. The share is checked when there are
# enough NewOrders for it to mean something (sanitizer builds on a busy
# machine can be slow).
python3 - "$TMP/bench.json" <<'PY' || fail "rollbacks: $(cat "$TMP/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
ua = d["user_aborts"]["tpcc.new_order"]
no = d["commits"]["tpcc.new_order"] + ua
rb = d["aborts_per_s"]["rollback"] * d["duration_s"]
assert abs(rb - ua) < 1, (rb, ua)
assert d["aborts_per_s"]["user_abort"] == 0, d["aborts_per_s"]
if no >= 3000:
    assert 0.002 < ua / no < 0.03, (ua, no)
print(f"{ua} of {no} NewOrders rolled back as generated")
PY
pass "tpcc: NewOrder rolls back as generated (~1%), nothing else"
expect_remote "tpcc internal mode $TPCC_REMOTE" moved

bench_progress "tpcc internal mode $TPCC_REMOTE_HIGH" --conf "$conf" --workload tpcc --duration 1 --warmup 0.3 --check --remote "$TPCC_REMOTE_HIGH"
expect_remote "tpcc internal mode $TPCC_REMOTE_HIGH"

"$CLI" --conf "$conf" --host 1 call bench.load tpcc >"$TMP/out"
grep -q '^loaded' "$TMP/out" || fail "a second bench.load: $(cat "$TMP/out")"
pass "bench.load of a loaded host says so and does nothing"

bench_progress "tpcc client mode" --conf "$conf" --workload tpcc --mode client --duration 2 --warmup 0.5 --check \
  --remote "$TPCC_REMOTE" --connections 4 --depth 4
expect_remote "tpcc client mode $TPCC_REMOTE"
[ "$(jget connections)" = 4 ] || fail "connections $(jget connections)"

# After a restart the warehouses are recovered from the logs: loading again
# finds each load unit's rows there, and the run's --check holds.
stop_pod
start_pod "$conf"
bench --conf "$conf" --workload tpcc --duration 0.5 --warmup 0 --check --remote "$TPCC_REMOTE"
[ "$rc" = 0 ] || fail "tpcc after a restart: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
pass "after a restart tpcc is found loaded and runs, --check passing"

# Damage warehouse 2 (on host 1): condition 1 must fail, naming it.
"$CLI" --conf "$conf" --host 1 call test.corrupt_tpcc 2 7 100 >/dev/null
bench --conf "$conf" --workload tpcc --duration 0.5 --warmup 0 --check --remote "$TPCC_REMOTE"
[ "$rc" = 1 ] || fail "--check after damage: exit $rc"
grep -q 'CHECK FAILED' "$TMP/bench.err" || fail "no loud failure: $(cat "$TMP/bench.err")"
grep -q 'condition 1 fails: warehouse 2 district 7' "$TMP/bench.err" ||
  fail "the report does not name warehouse 2 district 7: $(cat "$TMP/bench.err")"
[ "$(jget check)" = FAILED ] || fail "json check: $(jget check)"
pass "--check reports a damaged D_YTD and exits 1"

stop_pod
