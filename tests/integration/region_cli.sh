# poddb-region end to end: format, inspect (text and JSON), destroy, bad config,
# files at the region path that are not regions (refused, left intact), and a
# region larger than its file system (refused unless allow_overcommit).
source tests/lib.sh
conf=$(make_conf)
region=$(grep -m1 'path:' "$conf" | awk '{print $2}')
on_exit "$BIN/poddb-region destroy --conf $conf --force"

$BIN/poddb-region --help | grep -q 'usage: poddb-region' || fail "--help"
pass "--help"
set +e
$BIN/poddb-region frobnicate --conf "$conf" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 2 ] && grep -q "unknown command 'frobnicate'" "$TMP/err" || fail "unknown command (rc $rc)"
pass "unknown command is refused"

# config: the parsed region and hosts, without touching the region.
json=$($BIN/poddb-region config --conf "$conf" --json)
[ "$(json_get "$json" region.path)" = "$region" ] || fail "config: region.path in $json"
[ "$(json_get "$json" region.numa_node)" = -1 ] || fail "config: numa_node none is -1"
[ "$(json_get "$json" hosts.1.cpus.0)" = 1 ] || fail "config: hosts[1].cpus"
[ "$(json_get "$json" hosts.1.socket)" = "$TMP/pod-1.sock" ] || fail "config: hosts[1].socket"
$BIN/poddb-region config --conf "$conf" | grep -q "^  1 .*$TMP/pod-1.sock" || fail "config (text)"
[ ! -e "$region" ] || fail "config created the region"
pass "config prints the parsed region and hosts"
python3 -c 'import json,sys; sys.exit("mode" in json.loads(sys.argv[1]))' "$json" \
  || fail "config: a cxl config's JSON has no mode"

# mode: dm: the memory nodes instead of a region, which format refuses.
json=$($BIN/poddb-region config --conf conf/dm.yaml --json)
[ "$(json_get "$json" mode)" = dm ] || fail "config: mode in $json"
[ "$(json_get "$json" dm.pod)" = dmpod ] || fail "config: dm.pod in $json"
[ "$(json_get "$json" dm.provider)" = shm ] || fail "config: dm.provider in $json"
[ "$(json_get "$json" dm.memnodes.0)" = /tmp/poddb-dm-mn0.sock ] || fail "config: dm.memnodes"
[ "$(json_get "$json" dm.pool_size)" = $((256 * 1024 * 1024)) ] || fail "config: dm.pool_size"
[ "$(json_get "$json" dm.protocol)" = ford ] || fail "config: dm.protocol in $json"
[ "$(json_get "$json" dm.replicas)" = 0 ] || fail "config: dm.replicas in $json"
[ "$(json_get "$json" dm.inflight)" = 1 ] || fail "config: dm.inflight in $json"
[ "$(json_get "$json" dm.undo_log_size)" = $((1024 * 1024)) ] || fail "config: dm.undo_log_size"
[ "$(json_get "$json" hosts.1.loggers)" = 0 ] || fail "config: a dm host's loggers"
$BIN/poddb-region config --conf conf/dm.yaml | grep -q "^mode    dm: pod dmpod, provider shm, pool 256.00 MiB" \
  || fail "config (text) of a dm config"
$BIN/poddb-region config --conf conf/dm.yaml |
  grep -q "^dm      protocol ford, 0 backups of each memory node, 1 transaction in flight per worker thread, NIC model off" \
  || fail "config (text) of a dm config: $($BIN/poddb-region config --conf conf/dm.yaml)"
run $BIN/poddb-region format --conf conf/dm.yaml
[ $rc = 1 ] && grep -q "has mode: dm: its records live on the memory nodes" "$TMP/err" \
  || fail "format of a dm config (rc $rc)"
pass "config prints a dm config's memory nodes; format refuses it"

$BIN/poddb-region format --conf "$conf" | grep -q "formatted region $region: generation 1" \
  || fail "format"
[ -f "$region" ] || fail "no region file after format"
pass "format"

json=$($BIN/poddb-region inspect --conf "$conf" --json)
[ "$(json_get "$json" hwcc_budget)" = $((64 * 1024 * 1024)) ] || fail "hwcc_budget in JSON: $json"
[ "$(json_get "$json" nhosts)" = 2 ] || fail "nhosts"
[ "$(json_get "$json" live_hosts)" = 0 ] || fail "live_hosts"
[ "$(json_get "$json" hosts.1.state)" = free ] || fail "host 1 state"
[ "$(json_get "$json" generation)" = 1 ] || fail "generation"
pass "inspect --json reports the configured HWcc budget (64 MiB)"

$BIN/poddb-region inspect --conf "$conf" | grep -q "HWcc budget 64.00 MiB" || fail "text inspect"
pass "inspect (text)"

$BIN/poddb-region format --conf "$conf" | grep -q "generation 2" || fail "reformat bumps generation"
pass "format again: generation 2"

# A config that differs from the formatting one is refused.
sed -e 's/epoch_ms: 10/epoch_ms: 20/' "$conf" >"$TMP/other.yaml"
set +e
$BIN/poddb-region inspect --conf "$TMP/other.yaml" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "different configuration" "$TMP/err" || fail "digest mismatch not refused"
pass "a different config is refused"

# A misspelt key fails with its line number.
line=$(grep -n 'hwcc_budget:' "$conf" | cut -d: -f1)
sed -e 's/hwcc_budget:/hwcc_budgt:/' "$conf" >"$TMP/typo.yaml"
set +e
$BIN/poddb-region inspect --conf "$TMP/typo.yaml" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] || fail "typo accepted (rc $rc)"
grep -q "typo.yaml:$line:[0-9]*: region.hwcc_budgt: unknown key" "$TMP/err" \
  || fail "typo message: $(cat "$TMP/err")"
pass "misspelt key fails with file:line ($(cat "$TMP/err"))"

$BIN/poddb-region destroy --conf "$conf" | grep -q destroyed || fail "destroy"
[ ! -e "$region" ] || fail "region file still there after destroy"
set +e
$BIN/poddb-region inspect --conf "$conf" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "does not exist" "$TMP/err" || fail "inspect of a destroyed region"
pass "destroy"

# A file that is not a PodDB region is never formatted, resized or removed,
# whatever the command and even with --force (10.5 MiB of someone's data).
foreign=/dev/shm/$TEST_TAG-foreign
head -c $((10 * 1048576 + 524288)) /dev/urandom >"$foreign"
sum=$(sha256sum <"$foreign")
sed -e "s|path: $region|path: $foreign|" "$conf" >"$TMP/foreign.yaml"
for cmd in format "format --force" inspect destroy "destroy --force"; do
  set +e
  $BIN/poddb-region $cmd --conf "$TMP/foreign.yaml" >"$TMP/out" 2>"$TMP/err"; rc=$?
  set -e
  [ $rc = 1 ] && grep -q "is not a PodDB region" "$TMP/err" \
    || fail "$cmd of a foreign file (rc $rc): $(cat "$TMP/err")"
done
[ "$(sha256sum <"$foreign")" = "$sum" ] || fail "the foreign file changed"
pass "format, format --force, inspect, destroy and destroy --force refuse a foreign file; it is intact"

# A zero-length file holds nothing: format makes it a region; destroy
# removes only what carries PodDB's superblock.
: >"$foreign"
set +e
$BIN/poddb-region destroy --conf "$TMP/foreign.yaml" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] && [ -e "$foreign" ] && grep -q "is not a PodDB region: it is empty" "$TMP/err" \
  || fail "destroy of an empty file (rc $rc): $(cat "$TMP/err")"
$BIN/poddb-region format --conf "$TMP/foreign.yaml" | grep -q "generation 1" \
  || fail "format of an empty file"
$BIN/poddb-region destroy --conf "$TMP/foreign.yaml" | grep -q destroyed || fail "destroy"
[ ! -e "$foreign" ] || fail "the region made of an empty file is still there after destroy"
pass "an empty file: destroy leaves it, format makes it a region, destroy then removes it"

# A region larger than the free space of /dev/shm is refused by format,
# with both sizes, and no file is left; allow_overcommit formats it anyway.
avail=$(python3 -c 'import os; s = os.statvfs("/dev/shm"); print(s.f_bavail * s.f_frsize)')
big=$(( (2 * avail / 1073741824 + 1) * 1073741824 ))
if [ $big -le $((64 << 40)) ]; then
  sed -e "s|^  size: .*|  size: $big|" "$conf" >"$TMP/big.yaml"
  set +e
  $BIN/poddb-region format --conf "$TMP/big.yaml" >"$TMP/out" 2>"$TMP/err"; rc=$?
  set -e
  [ $rc = 1 ] && grep -q "does not fit its file system: region.size is .* ($big bytes), the file system of /dev/shm has .* free" "$TMP/err" \
    || fail "format of a region larger than /dev/shm (rc $rc): $(cat "$TMP/err")"
  [ ! -e "$region" ] || fail "a refused format left $region"
  sed -e "s|^  size: .*|  size: $big\n  allow_overcommit: true|" "$conf" >"$TMP/over.yaml"
  $BIN/poddb-region format --conf "$TMP/over.yaml" >"$TMP/out" 2>"$TMP/err" \
    || fail "format with allow_overcommit: $(cat "$TMP/err")"
  grep -q "larger than its file system" "$TMP/err" || fail "no warning: $(cat "$TMP/err")"
  [ "$(stat -c %s "$region")" = $big ] || fail "the overcommitted region is not $big bytes"
  $BIN/poddb-region destroy --conf "$TMP/over.yaml" | grep -q destroyed || fail "destroy"
  pass "format refuses a region of $big bytes on /dev/shm ($avail free); allow_overcommit warns"
else
  echo "skip: /dev/shm has more than 32 TiB free"
fi
