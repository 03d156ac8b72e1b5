# poddb-region inspect on a running 2-host pod whose hosts wrote each other's
# kv tuples (so the owners moved them into CXL memory): it reports the HWcc
# bytes per CXL-resident tuple (8-byte record + index share) per host and in
# total, and the figure meets the pod's target of at most 48 bytes (8-byte keys).
source tests/lib.sh
N=${PODDB_HWCC_KEYS:-3000}
conf=$TMP/pod.yaml
cat >"$conf" <<YAML
region:
  path: /dev/shm/$TEST_TAG-region
  kind: shm
  size: 1GiB
  hwcc_budget: 16MiB
host_defaults:
  workers: 1
  loggers: 0
  socket: $TMP/h{host}.sock
  log_dir: $TMP/log-{host}
hosts:
  - {}
  - {}
tables:
  - {name: t8, key_size: 7, value_size: 16, partitions: 4}
YAML
sock() { echo "$TMP/h$1.sock"; }
pids=()
for h in 0 1; do
  "$BIN/poddb-server" --conf "$conf" --host $h >"$TMP/server-$h.log" 2>&1 &
  pids[$h]=$!
  on_exit "kill ${pids[$h]}; sleep 1; kill -9 ${pids[$h]}"
done
for h in 0 1; do
  for i in $(seq 1 600); do
    "$BIN/poddb-cli" -s "$(sock $h)" -t 2000 call sys.ping >/dev/null 2>&1 && break
    if [ $i = 600 ] || ! kill -0 "${pids[$h]}" 2>/dev/null; then
      fail "host $h did not come up: $(cat "$TMP/server-$h.log")"
    fi
    sleep 0.1
  done
done
pass "2 hosts up"

# Every host writes every key: the keys of the other host's partitions move
# into CXL memory. kv tables are range-partitioned on the first key byte, so
# the 7-byte keys start with every byte value in turn.
for h in 0 1; do
  for i in $(seq 1 "$N"); do printf 'call kv.put t8 x:%02x%012x v%d\n' $((i % 256)) "$i" "$h"; done \
    | "$BIN/poddb-cli" -s "$(sock $h)" -t 30000 >/dev/null || fail "kv.put on host $h"
done
pass "$N keys written from each host"

json=$("$BIN/poddb-region" inspect --conf "$conf" --json)
total=0
for h in 0 1; do
  t=$(json_get "$json" hosts.$h.resident_tuples)
  [ "$(json_get "$json" hosts.$h.resident_known)" = True ] || fail "host $h: index directory unreadable"
  [ "$t" -gt 0 ] || fail "host $h has no CXL-resident tuple: $json"
  total=$((total + t))
done
[ "$(json_get "$json" resident.resident_tuples)" = $total ] || fail "the total is not the sum: $json"
bpt=$(json_get "$json" resident.hwcc_bytes_per_tuple)
python3 -c "import sys; b=float(sys.argv[1]); sys.exit(0 if 0 < b <= 48 else 1)" "$bpt" \
  || fail "HWcc bytes per CXL-resident tuple: $bpt (target: at most 48)"
pass "inspect --json: $total CXL-resident tuples, $bpt HWcc bytes each (target <= 48)"

text=$("$BIN/poddb-region" inspect --conf "$conf")
echo "$text" | grep -q "CXL-resident tuples: HWcc bytes = 8-byte record + share of the CXL indexes" \
  || fail "text inspect lacks the resident-tuple table: $text"
echo "$text" | grep -qE "^  total +$total " || fail "text inspect: no total row of $total tuples: $text"
echo "$text" | sed -n '/CXL-resident tuples/,$p'
pass "inspect (text) prints the per-host and total rows"
