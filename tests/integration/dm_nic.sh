# The NIC model of the disaggregated-memory mode (docs/dm.md, "The NIC
# model"): a memory node and two mode: dm compute nodes on shm with
# dm.nic_model on. The compute nodes say the model is on, sys.config shows
# it, they share the memory node's caps through one schedule in /dev/shm,
# and poddb-bench's SmallBank with --check passes and says, in its table and
# its JSON, that its figures are modelled.
source tests/lib.sh
source tests/bench-pod.sh
source tests/dm-pod.sh

POD="$TEST_TAG"
RTT_US=20
on_exit "rm -f /dev/shm/poddb-nic1-$POD-*"

conf=$(dm_conf "$POD" shm 1 \
  "  nic_model: {enabled: true, rtt_us: $RTT_US, atomic_mops: 2.5, rw_mops: 35, gbps: 100}
  inflight: 2" \
  "workloads:
  smallbank: {accounts: 1000}")
start_memnodes "$POD" shm 1

start_pod "$conf"
for h in 0 1; do
  grep -q "NIC model on: fabric costs are modelled (rtt $RTT_US us" "$TMP/host$h.log" ||
    fail "host $h does not say that the NIC model is on: $(cat "$TMP/host$h.log")"
done
"$CLI" --conf "$conf" --host 1 call sys.config >"$TMP/sysconf"
grep -q "^dm.nic_model.enabled	true$" "$TMP/sysconf" &&
  grep -q "^dm.nic_model.rtt_us	$RTT_US$" "$TMP/sysconf" ||
  fail "sys.config does not show the NIC model: $(cat "$TMP/sysconf")"
# One schedule for the memory node, shared by both compute nodes.
n=$(ls /dev/shm/poddb-nic1-"$POD"-* 2>/dev/null | wc -l)
[ "$n" = 1 ] || fail "$n NIC model schedules for one memory node"
pass "both compute nodes model the NIC, with one schedule for the memory node"

# The table says the figures are modelled.
set +e
"$BENCH" --conf "$conf" --workload smallbank --duration 1 --warmup 0.2 >"$TMP/table" 2>"$TMP/table.err"
rc=$?
set -e
[ "$rc" = 0 ] || fail "smallbank (table): exit $rc: $(cat "$TMP/table.err")"
grep -q "^NIC model     on (modelled: rtt $RTT_US us" "$TMP/table" &&
  grep -q "^committed/s .*(modelled)$" "$TMP/table" &&
  grep -q "^latency (us) .*(modelled)$" "$TMP/table" ||
  fail "the table does not say its figures are modelled: $(cat "$TMP/table")"
pass "poddb-bench's table says the figures are modelled"

# The JSON too; --check passes; every committed transaction waited at
# least one modelled round trip (a lower bound: this machine may add more).
bench --conf "$conf" --workload smallbank --duration 1.5 --warmup 0.2 --check
[ "$rc" = 0 ] || fail "smallbank: exit $rc: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
[ "$(jget check)" = passed ] || fail "smallbank: check $(jget check): $(jget check_report)"
python3 - "$TMP/bench.json" "$RTT_US" <<'PY' || fail "nic_model in the JSON: $(cat "$TMP/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
rtt = float(sys.argv[2])
m = d["nic_model"]
assert m is not None and m["figures"] == "modelled", m
assert m["rtt_us"] == rtt and m["atomic_mops"] == 2.5 and m["rw_mops"] == 35 and m["gbps"] == 100, m
assert sum(d["errors"].values()) == 0, d["errors"]
if d["committed"] > 0:
    assert d["latency_us"]["p50"] >= rtt, d["latency_us"]
    assert d["round_trips_per_txn"] >= 2, d["round_trips_per_txn"]
PY
pass "smallbank with the NIC model: $(jget committed_per_s) committed/s (modelled), check passed"

stop_pod
stop_memnodes
pass "the memory node stopped cleanly"
