# The disaggregated-memory mode end to end: two real poddb-memnode memory
# nodes and two poddb-server compute nodes (mode: dm) on each provider (shm,
# tcp;ofi_rxm). A kv row written through one compute node is read through
# the other (the records live on the memory nodes); poddb-bench loads
# SmallBank (and YCSB on shm), runs it on both compute nodes with --check
# (the audit scans walk the memory nodes' hash indexes) and reports the
# fabric operations per transaction; TPC-C (its range reads by key on the
# hash index) commits every transaction type and passes --check; and every
# process stops cleanly. All that under ford (dm.protocol's default), motor
# and lotus (no CAS on a memory node in SmallBank: its locks are in the
# compute nodes' tables); SmallBank under rs-2pl too. Bad input is refused with a clear message and
# nothing running is harmed: a second compute node of a running host, a
# ford compute node on a pod that runs rs-2pl, a compute node of another
# pod, one configured for another count of backups than its pod, backups
# on pools of two sizes, a memory node that is not there, a config that
# asks for next-key locking. Two memory nodes under ford keep one backup of
# each other's records (dm.replicas' default).
source tests/lib.sh
source tests/bench-pod.sh

source tests/dm-pod.sh

# pod_conf PROVIDER POD [PROTOCOL]: the config of this test on memory nodes
# mn0 and mn1 (dm.protocol: ford, the default, unless given), each worker
# thread with 4 transactions in flight.
pod_conf() {
  dm_conf "$2" "$1" 2 "  protocol: ${3:-ford}
  inflight: 4" "tables:
  - name: kv
    key_size: 16
    value_size: 64
workloads:
  smallbank: {accounts: 2000}
  ycsb: {tuples: 2000, theta: 0.7}
  tpcc: {warehouses: 2, items: 1000, customers_per_district: 60}"
}

# expect_dm_run WHAT: the last poddb-bench run exited 0 with --check passed
# and no errors.
expect_dm_run() {
  [ "$rc" = 0 ] || fail "$1: exit $rc: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
  [ "$(jget check)" = passed ] || fail "$1: check $(jget check): $(jget check_report)"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(sum(d["errors"].values()) != 0)' \
    "$TMP/bench.json" || fail "$1: errors: $(cat "$TMP/bench.json")"
}

# DM_POD_PROVIDERS: the providers to run on (make tsan: shm only).
IFS=, read -r -a PROVIDERS <<<"${DM_POD_PROVIDERS:-shm,tcp;ofi_rxm}"
for provider in "${PROVIDERS[@]}"; do
for protocol in ford motor lotus; do
  if [ $protocol = ford ]; then
    conf=$(pod_conf "$provider" dmtest)
  elif [ $protocol = motor ]; then # motor keeps no backups (docs/dm.md)
    conf=$(pod_conf "$provider" dmtest "motor
  replicas: 0
  versions: 3")
  else
    conf=$(pod_conf "$provider" dmtest "lotus
  replicas: 0")
  fi
  provider="$provider/$protocol"
  start_memnodes dmtest "${provider%/*}" 2
  start_pod "$conf"
  if [ $protocol = ford ]; then
    grep -q 'mode: dm keeps each record on 2 memory nodes' "$TMP/host0.log" || fail "host 0 did not say that each record is kept twice"
  elif [ $protocol = lotus ]; then
    grep -q 'lotus: lock service of compute node slot 1 of 2 up' "$TMP/host0.log" ||
      fail "host 0 did not say its lock service is up: $(tail -5 "$TMP/host0.log")"
  else
    "$CLI" --conf "$conf" --host 0 call sys.config | grep -q "^dm.versions	3$" ||
      fail "sys.config: dm.versions: $("$CLI" --conf "$conf" --host 0 call sys.config)"
  fi
  "$CLI" --conf "$conf" --host 0 call sys.config | grep -q "^mode	dm$" || fail "sys.config: mode"

  # One row, written through host 0, read through host 1.
  "$CLI" --conf "$conf" --host 0 call kv.put kv shared "from host 0" >/dev/null
  [ "$("$CLI" --conf "$conf" --host 1 call kv.get kv shared)" = "from host 0" ] ||
    fail "$provider: host 1 does not see host 0's row"
  pass "$provider: a row written on one compute node is read on the other"

  bench --conf "$conf" --workload smallbank --duration 2 --warmup 0.3 --check
  expect_dm_run "$provider: smallbank"
  grep -q 'balance rows: 4000 (expected 4000)' "$TMP/bench.json" || fail "rows: $(jget check_report)"
  # Every committed transaction read and locked records on the memory node;
  # under lotus the locks are in the compute nodes' tables: no CAS at all.
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); o=d["store_ops_per_txn"]
lotus = sys.argv[2] == "lotus"
sys.exit(not (d["committed"] == 0 or (o["read"] >= 1 and (o["cas"] == 0 if lotus else o["cas"] >= 1) and d["round_trips_per_txn"] >= 2)))' \
    "$TMP/bench.json" $protocol || fail "$provider: fabric operations per transaction: $(cat "$TMP/bench.json")"
  pass "$provider: smallbank on 2 compute nodes, $(jget committed_per_s) committed/s, check passed"
  # TPC-C: its range reads are point reads here (tpcc.range_reads: auto on
  # a hash index). Short runs, each passing --check (conditions 1-4 and the
  # delivery cursors), until together they committed every type of
  # transaction (one run, unless the machine is slow: a sanitizer build).
  tpcc_runs=0
  echo '{}' >"$TMP/tpcc-commits.json"
  while :; do
    bench --conf "$conf" --workload tpcc --duration 1 --warmup 0.2 --check
    expect_dm_run "$provider: tpcc"
    tpcc_runs=$((tpcc_runs + 1))
    python3 - "$TMP/bench.json" "$TMP/tpcc-commits.json" <<'PY' && break
import json, sys
c = json.load(open(sys.argv[2]))
for k, v in json.load(open(sys.argv[1]))["commits"].items():
    c[k] = c.get(k, 0) + v
json.dump(c, open(sys.argv[2], "w"))
types = ("new_order", "payment", "order_status", "delivery", "stock_level")
sys.exit(any(c.get("tpcc." + t, 0) == 0 for t in types))
PY
    [ $tpcc_runs -lt 20 ] ||
      fail "$provider: tpcc: a type of transaction never committed in $tpcc_runs runs: $(cat "$TMP/tpcc-commits.json")"
  done
  pass "$provider: tpcc on 2 compute nodes, $(jget committed_per_s) committed/s, every type committed in $tpcc_runs run(s), check passed"
  if [ "${provider%/*}" = shm ]; then
    bench --conf "$conf" --workload ycsb --duration 2 --warmup 0.3 --check --read-pct 50
    expect_dm_run "$provider: ycsb"
    pass "$provider: ycsb 50/50 on 2 compute nodes, $(jget committed_per_s) committed/s, check passed"
  fi
  stop_pod
  stop_memnodes
  provider="${provider%/*}"
done
done

# expect_refused CONF PATTERN WHAT: host 0 of CONF does not start, says
# PATTERN, and leaves no socket behind.
expect_refused() {
  set +e
  "$BIN/poddb-server" --conf "$1" --host 0 >"$TMP/refused.log" 2>&1
  rc=$?
  set -e
  [ $rc != 0 ] && grep -q -- "$2" "$TMP/refused.log" || fail "$3: exit $rc: $(cat "$TMP/refused.log")"
  [ ! -e "$TMP/cn-0.sock" ] || fail "$3: the refused compute node left its socket"
  pass "$3: refused"
}

# rs-2pl, the other protocol, on the same memory nodes' layout; then a
# compute node configured for ford is refused by a pod that runs rs-2pl, and
# a second compute node of a host that runs already by the memory nodes.
start_memnodes dmtest shm 2
conf=$(pod_conf shm dmtest rs-2pl)
start_pod "$conf"
bench --conf "$conf" --workload smallbank --duration 1 --warmup 0.2 --check
expect_dm_run "shm: smallbank under rs-2pl"
pass "shm: smallbank on 2 compute nodes under rs-2pl, $(jget committed_per_s) committed/s, check passed"
sed "s|$TMP/cn-{host}.sock|$TMP/cn-again-{host}.sock|" "$conf" >"$TMP/again.yaml"
set +e
"$BIN/poddb-server" --conf "$TMP/again.yaml" --host 0 >"$TMP/twice.log" 2>&1
rc=$?
set -e
[ $rc != 0 ] && grep -q 'a compute node of host 0 (pid [0-9]*) is connected already' "$TMP/twice.log" ||
  fail "a second compute node of host 0: exit $rc: $(cat "$TMP/twice.log")"
pass "a second compute node of a host that runs: refused"
stop_pod
expect_refused "$(pod_conf shm dmtest ford)" 'runs protocol rs-2pl' \
  "a ford compute node on a pod that runs rs-2pl"
stop_memnodes

# A compute node of another pod is refused by the memory node, clearly.
start_memnodes dmtest shm 2
expect_refused "$(pod_conf shm otherpod)" 'belongs to pod "dmtest", not to pod "otherpod"' \
  "a compute node of another pod"
# A pod keeps one count of backups: a compute node configured for another
# is refused.
conf=$(pod_conf shm dmtest)
start_pod "$conf"
stop_pod
expect_refused "$(pod_conf shm dmtest "ford
  replicas: 0")" 'keeps 1 backup of each memory node' "a compute node without backups on a pod with them"
stop_memnodes
# Backups need pools of one size.
start_memnode dmtest shm 0
"$MEMNODE" --socket "$TMP/mn1.sock" --pod dmtest --pool-size 32MiB --provider shm >"$TMP/mn1.log" 2>&1 &
MN_PIDS[1]=$!
on_exit "kill -KILL $!"
memnode_serves 0
memnode_serves 1
expect_refused "$(pod_conf shm dmtest)" 'needs memory nodes of one pool size' \
  "a pod with backups on pools of two sizes"
stop_memnodes

# No memory node at the configured socket: the message names it.
conf=$(pod_conf shm dmtest)
expect_refused "$conf" "$TMP/mn0.sock" "a compute node without its memory nodes"

# Next-key locking cannot run on the memory node's hash index.
sed -i 's/phantom_protection: false/phantom_protection: true/' "$conf"
expect_refused "$conf" 'phantom_protection' "phantom_protection: true in dm mode"
