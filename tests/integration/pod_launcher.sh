# tools/pod end to end: a 2-host pod up, status, a call to each host, logs,
# a refused second up, down from another directory; afterwards no server or
# supervisor process, no region file, no socket and no pid file may remain.
# Also: checkpoint on every host, up refuses CPUs and NUMA nodes the machine
# lacks, status into a pipe its reader closed, down --keep-region,
# a crashed host is reported, a file at the region path that is not a
# region is neither used nor removed, and check-numa / poddb-numaprobe run.
source tests/lib.sh
conf=$(make_conf)
region=/dev/shm/$TEST_TAG-region
grep -q "path: $region" "$conf" || fail "make_conf did not give a unique region"
ROOT=$(pwd)
BIN_ABS=$(cd "$BIN" && pwd)
POD="$ROOT/tools/pod"
export PODDB_RUN_DIR=$TMP/run     # the pod's pid files and logs stay inside $TMP
on_exit "$POD down --conf $conf --bin $BIN_ABS --timeout 5"
sock() { echo "$TMP/pod-$1.sock"; }

# No process of this pod: nothing whose command line names the config or the run directory.
no_pod_process() {
  local left
  left=$(pgrep -af -- "$conf|$PODDB_RUN_DIR" || true)
  [ -z "$left" ] || fail "$1: processes left behind: $left"
}

# ---- --help -----------------------------------------------------------------------------
for c in up down status logs check-numa checkpoint; do
  run "$POD" $c --help
  expect_rc 0 "$c --help"
  out_has "usage: tools/pod $c" "$c --help"
done
run "$POD" --help
expect_rc 0 "--help"
out_has "tools/pod up --conf FILE" "--help"
run "$POD" up
expect_rc 2 "up without --conf"
err_has "--conf" "up without --conf"
pass "--help of every subcommand; usage errors exit 2"

# ---- the machine check --------------------------------------------------------------------
online=$(cat /sys/devices/system/cpu/online 2>/dev/null || echo "0-$(($(nproc) - 1))")
last_cpu=$(echo "$online" | tr ',' '\n' | sed 's/.*-//' | sort -n | tail -1)
absent=$((last_cpu + 1))
if [ $absent -le 1023 ]; then
  sed -e "s/cpus: \"1\"/cpus: \"$absent\"/" "$conf" >"$TMP/nocpu.yaml"
  run "$POD" up --conf "$TMP/nocpu.yaml" --bin "$BIN_ABS"
  expect_rc 1 "up with CPU $absent"
  err_has "names CPU $absent, which this machine does not have" "up with CPU $absent"
  err_has "CPUs online ($online)" "the message says what the machine has"
  [ ! -e "$region" ] || fail "a refused up created the region"
  pass "up refuses CPU $absent: $(head -1 "$TMP/err")"
else
  echo "skip: this machine has CPUs up to $last_cpu; a config cannot name one it lacks"
fi
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
last_node=$(echo "$nodes" | tr ',' '\n' | sed 's/.*-//' | sort -n | tail -1)
sed -e "s/numa_node: none/numa_node: $((last_node + 1))/" "$conf" >"$TMP/nonode.yaml"
run "$POD" up --conf "$TMP/nonode.yaml" --bin "$BIN_ABS"
expect_rc 1 "up with NUMA node $((last_node + 1))"
err_has "region.numa_node is $((last_node + 1)) but this machine has NUMA node" "numa_node"
pass "up refuses NUMA node $((last_node + 1)): $(head -1 "$TMP/err")"

# ---- a file at the region path that is not a PodDB region ------------------------------------
head -c $((10 * 1048576 + 524288)) /dev/urandom >"$region"
sum=$(sha256sum <"$region")
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "up on a foreign file"
err_has "is not a PodDB region" "up on a foreign file"
run "$POD" down --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "down with a foreign file at the region path"
err_has "is not a PodDB region" "down with a foreign file at the region path"
no_pod_process "after up on a foreign file"
[ "$(sha256sum <"$region")" = "$sum" ] || fail "up or down changed the foreign file"
rm -f "$region"
pass "up and down refuse a foreign file at the region path and leave it intact"

# ---- up, status, calls, logs -----------------------------------------------------------------
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "up"
out_has "is up: 2 hosts on region $region" "up"
out_has "$(sock 0)" "up prints host 0's socket"
out_has "$(sock 1)" "up prints host 1's socket"
out_has "$PODDB_RUN_DIR/" "up prints the run directory"
out_has "host1.log" "up prints the logs"
[ -S "$(sock 0)" ] && [ -S "$(sock 1)" ] || fail "no sockets after up"
[ -f "$region" ] || fail "no region after up"
pass "up: 2 hosts"

run "$POD" status --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "status"
out_has "running (2 of 2 hosts answering)" "status"
run "$POD" status --conf "$conf" --bin "$BIN_ABS" --json
expect_rc 0 "status --json"
python3 -m json.tool "$TMP/out" >/dev/null || fail "status --json is not JSON"
json=$(cat "$TMP/out")
[ "$(json_get "$json" state)" = running ] || fail "status --json state: $json"
pid0=$(json_get "$json" hosts.0.pid)
pid1=$(json_get "$json" hosts.1.pid)
grep -q poddb-server "/proc/$pid0/cmdline" && grep -q poddb-server "/proc/$pid1/cmdline" \
  || fail "status pids $pid0 $pid1 are not servers"
pass "status: running, pids $pid0 $pid1"

# A reader that closes the pipe early (`| head -1`, `| true`): no traceback,
# only the exit status of a program killed by SIGPIPE (141) or the usual one.
for reader in "head -1" "true"; do
  for opt in "" "--json"; do
    set +e
    "$POD" status --conf "$conf" --bin "$BIN_ABS" $opt 2>"$TMP/err" | $reader >/dev/null
    rc=${PIPESTATUS[0]}
    set -e
    [ ! -s "$TMP/err" ] || fail "status $opt | $reader: stderr: $(cat "$TMP/err")"
    [ "$rc" = 0 ] || [ "$rc" = 141 ] || fail "status $opt | $reader: exit $rc"
  done
done
pass "status | head -1, status | true: no traceback"

for h in 0 1; do
  "$BIN/poddb-cli" -s "$(sock $h)" -t 5000 call kv.put kv "key-$h" "value-$h" >/dev/null \
    || fail "kv.put on host $h"
  [ "$("$BIN/poddb-cli" -s "$(sock $h)" -t 5000 call kv.get kv "key-$h")" = "value-$h" ] \
    || fail "kv.get on host $h"
done
pass "poddb-cli kv.put/kv.get on each host"

# A checkpoint on every host, waited for: each host's first is full, and
# together they hold the two rows; --json; a host the pod lacks is refused.
run "$POD" checkpoint --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "checkpoint"
for h in 0 1; do
  grep -Eq "^  $h +full +[0-9]+ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/out" ||
    fail "checkpoint: no full checkpoint on host $h: $(cat "$TMP/out")"
done
rows0=$(awk '$1 == 0 && $2 == "full" {print $3}' "$TMP/out")
[ "$(awk '$2 == "full" {n += $3} END {print n}' "$TMP/out")" = 2 ] ||
  fail "checkpoint: the hosts' full checkpoints do not hold the 2 rows: $(cat "$TMP/out")"
ls "$TMP"/pod/log-0/ckpt-0-*.log "$TMP"/pod/log-1/ckpt-1-*.log >/dev/null 2>&1 ||
  fail "checkpoint: no checkpoint files in $TMP/pod/log-*"
run "$POD" checkpoint --conf "$conf" --bin "$BIN_ABS" --host 0 --json
expect_rc 0 "checkpoint --host 0 --json"
json=$(cat "$TMP/out")
[ "$(json_get "$json" hosts.0.host)" = 0 ] && [ "$(json_get "$json" hosts.0.kind)" = delta ] &&
  [ "$(json_get "$json" hosts.0.rows)" = 0 ] && [ "$(json_get "$json" hosts.0.unchanged)" = "$rows0" ] ||
  fail "checkpoint --host 0 --json (host 0 had $rows0 rows): $json"
run "$POD" checkpoint --conf "$conf" --bin "$BIN_ABS" --host 2
expect_rc 1 "checkpoint --host 2"
err_has "the pod has hosts 0..1" "checkpoint --host 2"
pass "checkpoint: a full checkpoint on each host, then a delta on host 0 (--json); host 2 refused"

# An idle pod's workers poll their inboxes (no futex reaches another host),
# but after 100 ms without work only every 1 ms (src/server/server.c,
# dequeue_batch): ~1 000 wake-ups a second each, not ~10 000.
worker_switches() {
  local t n=0
  for t in /proc/"$1"/task/*; do
    case $(cat "$t/comm" 2>/dev/null) in pod-worker*)
      n=$((n + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status"))) ;;
    esac
  done
  echo $n
}
workers_of() {
  ls /proc/"$1"/task | while read -r t; do cat "/proc/$1/task/$t/comm"; done | grep -c '^pod-worker'
}
sleep 0.5
a=("$(worker_switches "$pid0")" "$(worker_switches "$pid1")")
sleep 1
b=("$(worker_switches "$pid0")" "$(worker_switches "$pid1")")
w=("$(workers_of "$pid0")" "$(workers_of "$pid1")")
per=()
for h in 0 1; do
  [ "${w[h]}" -ge 1 ] || fail "host $h: no worker thread found"
  per[h]=$(((b[h] - a[h]) / w[h]))
  [ "${per[h]}" -lt 3000 ] || fail "idle host $h: its workers woke ${per[h]} times in 1 s each"
done
pass "an idle pod's workers poll slowly: ${per[0]} and ${per[1]} wake-ups in 1 s per worker"

run "$POD" logs 0 --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "logs 0"
out_has "serving on $(sock 0)" "logs 0"
run "$POD" logs 1 -n 1 --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "logs 1 -n 1"
[ "$(wc -l <"$TMP/out")" = 1 ] || fail "logs -n 1 printed $(wc -l <"$TMP/out") lines"
run "$POD" logs 2 --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "logs of a host the pod lacks"
err_has "it has hosts 0..1" "logs 2"
pass "logs"

run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "a second up"
err_has "is already running: host 0 (pid $pid0), host 1 (pid $pid1)" "a second up"
err_has "tools/pod down --conf $conf" "a second up says how to stop"
pass "a second up refuses: $(cat "$TMP/err")"

# ---- down from another directory ----------------------------------------------------------
set +e
(cd / && "$POD" down --conf "$conf" --bin "$BIN_ABS") >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
expect_rc 0 "down"
out_has "host 0 (pid $pid0) stopped cleanly" "down"
out_has "host 1 (pid $pid1) stopped cleanly" "down"
out_has "removed the region $region" "down"
no_pod_process "after down"
for p in $pid0 $pid1; do [ ! -e "/proc/$p" ] || fail "server pid $p still exists"; done
[ ! -e "$region" ] || fail "region file left behind"
for h in 0 1; do [ ! -e "$(sock $h)" ] || fail "socket of host $h left behind"; done
left=$(find "$PODDB_RUN_DIR" -name '*.pid' -o -name '*.exit' -o -name '*.sock' | head -3)
[ -z "$left" ] || fail "state files left behind: $left"
pass "down: no process, region, socket or pid file left"

run "$POD" down --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "down of a stopped pod"
out_has "is not running" "down of a stopped pod"
pass "down of a stopped pod is not an error"

# ---- --keep-region, then a crashed host -------------------------------------------------------
run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "up again"
run "$POD" down --conf "$conf" --bin "$BIN_ABS" --keep-region
expect_rc 0 "down --keep-region"
[ -f "$region" ] || fail "down --keep-region removed the region"
"$BIN/poddb-region" inspect --conf "$conf" --json >"$TMP/inspect" || fail "inspect the kept region"
[ "$(json_get "$(cat "$TMP/inspect")" live_hosts)" = 0 ] || fail "kept region has live hosts"
pass "down --keep-region keeps the region, with no live host"

run "$POD" up --conf "$conf" --bin "$BIN_ABS"
expect_rc 0 "up on the kept region"
pid1=$(json_get "$("$POD" status --conf "$conf" --bin "$BIN_ABS" --json)" hosts.1.pid)
kill -KILL "$pid1"
for _ in $(seq 50); do [ -e "$PODDB_RUN_DIR"/*/host1.exit ] && break; sleep 0.1; done
run "$POD" status --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "status with a crashed host"
out_has "exited (killed by SIGKILL)" "status shows the crash"
run "$POD" down --conf "$conf" --bin "$BIN_ABS"
expect_rc 1 "down after a crash"
err_has "host 1 had exited before down (killed by SIGKILL)" "down reports the crash"
out_has "host 0 (pid" "down still stops host 0"
out_has "removed the stale socket $(sock 1)" "down removes the crashed host's socket"
no_pod_process "after a crash and down"
[ ! -e "$region" ] || fail "region left behind after a crash"
for h in 0 1; do [ ! -e "$(sock $h)" ] || fail "socket of host $h left behind after a crash"; done
pass "a crashed host: status and down report it; down still cleans up"

# ---- check-numa and poddb-numaprobe ------------------------------------------------------------
run "$BIN/poddb-numaprobe" --size 64MiB --loads 20000 --rounds 1
expect_rc 0 "poddb-numaprobe"
out_has "NUMA nodes:" "poddb-numaprobe"
grep -qE '^  [0-9]+ ' "$TMP/out" || fail "poddb-numaprobe lists no node: $(cat "$TMP/out")"
run "$BIN/poddb-numaprobe" --json --size 64MiB --loads 20000 --rounds 1
expect_rc 0 "poddb-numaprobe --json"
python3 -m json.tool "$TMP/out" >/dev/null || fail "poddb-numaprobe --json is not JSON"
python3 - "$TMP/out" <<'PY' || fail "poddb-numaprobe --json: no node or no latency"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["nodes"]) >= 1
assert any(p["ns"] and p["ns"] > 0 for p in d["latency"]["pairs"])
PY
run "$BIN/poddb-numaprobe" --size 1
expect_rc 2 "poddb-numaprobe --size 1"
err_has "not a size" "poddb-numaprobe --size 1"
run "$POD" check-numa --conf "$conf" --bin "$BIN_ABS" --size 64MiB --loads 20000 --rounds 1
expect_rc 0 "check-numa"
out_has "What $conf emulates here:" "check-numa"
out_has "host 1: CPU 1 on node" "check-numa names each host's node"
run "$POD" check-numa --conf "$conf" --bin "$BIN_ABS" --json --no-latency
expect_rc 0 "check-numa --json"
python3 -m json.tool "$TMP/out" >/dev/null || fail "check-numa --json is not JSON"
pass "poddb-numaprobe and check-numa run; --json parses"

# ---- the machine check and check-numa's reading on a machine this one is not ------------------
# A fake sysfs with two sockets (nodes 0, 1) and a CPU-less node 2 (a CXL
# expander); the latency figures are made-up inputs, the test checks what
# tools/pod concludes from them.
fake=$TMP/sys/devices/system
mkdir -p "$fake/cpu" "$fake/node/node0" "$fake/node/node1" "$fake/node/node2"
echo 0-7 >"$fake/cpu/online"; echo 0-2 >"$fake/node/online"
echo 0-3 >"$fake/node/node0/cpulist"; echo 4-7 >"$fake/node/node1/cpulist"
: >"$fake/node/node2/cpulist"
python3 - "$POD" "$TMP/sys" <<'PY' || fail "machine check / emulation reading on a fake 3-node machine"
import sys, types
pod = types.ModuleType("pod"); pod.__file__ = sys.argv[1]
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), pod.__dict__)
m = pod.Machine(sysfs=sys.argv[2])
m.allowed = set(range(8))
assert m.nodes == {0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}, 2: set()}, m.nodes
def conf(node, cpus1="4-5"):
    c1 = pod.parse_cpu_list(cpus1)
    return {"region": {"numa_node": node, "kind": "shm", "path": "/dev/shm/x"}, "hosts": [
        {"id": 0, "cpus": [0, 1], "cpu_list": "0-1", "workers": 2},
        {"id": 1, "cpus": sorted(c1), "cpu_list": cpus1, "workers": 2}]}
ns = {(0, 0): 100, (0, 1): 150, (0, 2): 250, (1, 0): 150, (1, 1): 100, (1, 2): 250}
probe = {"nodes": [{"node": 0, "cpus": "0-3", "cpuless": False},
                   {"node": 1, "cpus": "4-7", "cpuless": False},
                   {"node": 2, "cpus": "", "cpuless": True}],
         "latency": {"pairs": [{"from_node": a, "to_node": b, "ns": v} for (a, b), v in ns.items()]}}
# region on the CPU-less node: both hosts see 2.5x their local latency
lines, info = pod.emulation(conf(2), probe, m)
assert info["region_kind"] == "cpuless-node", info
assert "node 2 has no CPUs" in lines[0], lines
assert "host 0: CPUs 0-1 on node 0; region memory 250 ns vs local 100 ns (x2.50)" in lines, lines
assert pod.check_machine(conf(2), m) == ([], []), pod.check_machine(conf(2), m)
# region on socket 1 with host 1 on socket 1: warned, the region is local to it
lines, info = pod.emulation(conf(1), probe, m)
assert info["region_kind"] == "remote-socket", info
errors, warnings = pod.check_machine(conf(1), m)
assert not errors and any("host 1 runs on CPUs of node 1" in w for w in warnings), warnings
# a node and CPUs the machine lacks are refused, naming what it has
errors, _ = pod.check_machine(conf(3, "8-9"), m)
assert any("names CPUs 8-9, which this machine does not have: it has 8 CPUs online (0-7)" in e
           for e in errors), errors
assert any("region.numa_node is 3 but this machine has NUMA nodes 0-2 (node 0: CPUs 0-3; "
           "node 1: CPUs 4-7; node 2: no CPUs)" in e for e in errors), errors
PY
pass "machine check and check-numa reading on a fake two-socket machine with a CPU-less node"
