# poddb-region end to end: format, inspect (text and JSON), destroy, bad config.
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
