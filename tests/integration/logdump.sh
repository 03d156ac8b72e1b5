# poddb-logdump against sample log directories written by the log segment unit
# test program (PODDB_LOGDUMP_SAMPLE=DIR build/test/<variant>/test_log_segment):
#   ok/        three segments of host 1 (the third with a torn tail), one of host 2
#   corrupt/   one segment whose last block has a flipped bit, and a stray file
#   badheader/ one segment with a damaged header CRC
source tests/lib.sh
case "$BIN" in
  build/tsan/bin) gen=build/test/tsan/test_log_segment ;;
  *) gen=build/test/asan/test_log_segment ;;
esac
if [ ! -x "$gen" ]; then
  echo "skip: $gen not built (make $gen)"
  exit 0
fi
PODDB_LOGDUMP_SAMPLE=$TMP/logs "$gen" >/dev/null || fail "writing the sample logs"
D=$TMP/logs

$BIN/poddb-logdump --help | grep -q 'usage: poddb-logdump' || fail "--help"
pass "--help"

out=$($BIN/poddb-logdump "$D/ok")
[ "$(echo "$out" | wc -l)" = 4 ] || fail "expected 4 segment lines: $out"
echo "$out" | sed -n 1p | grep -q 'seg-1-0-0000000001.log  host 1  logger 0  seq 1 .* tail clean' \
  || fail "first line: $out"
echo "$out" | sed -n 3p | grep -q 'seq 3 .*tail torn at offset' || fail "torn segment: $out"
echo "$out" | sed -n 4p | grep -q 'host 2  logger 1' || fail "host 2 last: $out"
pass "lists a directory in (host, logger, seq) order with tail status"

$BIN/poddb-logdump --verify "$D/ok" >/dev/null || fail "--verify fails on a merely torn tail"
pass "--verify accepts a torn tail"

set +e
$BIN/poddb-logdump --verify "$D/corrupt" >"$TMP/out" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] || fail "--verify on a corrupt segment: rc $rc"
grep -q 'tail corrupt at offset .*block CRC mismatch' "$TMP/out" || fail "corrupt reason: $(cat "$TMP/out")"
grep -q notes.txt "$TMP/out" && fail "a non-segment file was listed"
$BIN/poddb-logdump "$D/corrupt" >/dev/null || fail "without --verify a corrupt tail is not an error"
pass "--verify refuses a corrupt tail"

set +e
$BIN/poddb-logdump --verify "$D/badheader" >"$TMP/out" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q 'BAD HEADER: .*damaged header' "$TMP/out" || fail "bad header (rc $rc): $(cat "$TMP/out")"
pass "--verify refuses a bad header"

seg=$D/ok/seg-2-1-0000000001.log
json=$($BIN/poddb-logdump --json "$seg")
[ "$(json_get "$json" type)" = segment ] || fail "json type: $json"
[ "$(json_get "$json" host)" = 2 ] || fail "json host: $json"
[ "$(json_get "$json" tail)" = clean ] || fail "json tail: $json"
nrec=$(json_get "$json" records)
[ "$nrec" -gt 0 ] || fail "json records: $json"
json=$($BIN/poddb-logdump --json "$D/ok/seg-1-0-0000000003.log")
[ "$(json_get "$json" tail)" = torn ] || fail "json torn: $json"
pass "--json segment lines"

$BIN/poddb-logdump --json --records "$seg" >"$TMP/recs"
[ "$(grep -c '"type":"record"' "$TMP/recs")" = "$nrec" ] || fail "record lines: $(cat "$TMP/recs")"
last=$(grep '"type":"record"' "$TMP/recs" | tail -1)
[ "$(json_get "$last" key)" = user:42 ] || fail "last record key: $last"
[ "$(json_get "$last" kind)" = PUT ] && [ "$(json_get "$last" epoch)" = 99 ] \
  && [ "$(json_get "$last" version)" = 3 ] && [ "$(json_get "$last" tuple_len)" = 5 ] \
  || fail "last record: $last"
$BIN/poddb-logdump --records "$seg" | grep -q 'table 9    PUT    key "user:42"  ev 99.3  tuple 5 bytes' \
  || fail "text record line"
pass "--records (text and JSON)"

set +e
$BIN/poddb-logdump "$TMP/no-such-dir" 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "cannot access $TMP/no-such-dir: No such file or directory" "$TMP/err" \
  || fail "missing dir (rc $rc): $(cat "$TMP/err")"
set +e
$BIN/poddb-logdump 2>/dev/null; rc=$?
set -e
[ $rc = 2 ] || fail "no arguments: rc $rc"
pass "clear errors for a missing directory and no arguments"

# poddb-crcbench, the CRC's benchmark: its options and one short JSON run
# (a figure, not a test of speed; test_log_segment checks the values).
$BIN/poddb-crcbench --help | grep -q 'usage: poddb-crcbench' || fail "crcbench --help"
set +e
$BIN/poddb-crcbench --size 0 2>"$TMP/err"; rc=$?
set -e
[ $rc = 2 ] && grep -q -- '--size: want 1..' "$TMP/err" || fail "crcbench --size 0 (rc $rc)"
out=$($BIN/poddb-crcbench --size 65536 --total 8 --cold 1 --json)
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["size"] == 65536 and min(d["hot_gbps"], d["cold_gbps"], d["sw_hot_gbps"]) > 0, d' \
  || fail "crcbench --json: $out"
pass "poddb-crcbench: --help, a bad size, one JSON line"

# poddb-segbench, the segment writer's benchmark: its options, a missing
# directory, and one short JSON run that leaves no file behind.
$BIN/poddb-segbench --help | grep -q 'usage: poddb-segbench' || fail "segbench --help"
set +e
$BIN/poddb-segbench 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && grep -q 'want one directory' "$TMP/err" || fail "segbench without a directory (rc $rc)"
$BIN/poddb-segbench --size 65537 "$TMP" 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && grep -q -- '--size: want 0..65536' "$TMP/err" || fail "segbench --size 65537 (rc $rc)"
$BIN/poddb-segbench -n 10 "$TMP/missing" 2>"$TMP/err"; rc=$?
[ $rc = 1 ] && grep -q 'cannot create log segment' "$TMP/err" || fail "segbench into a missing directory (rc $rc)"
set -e
mkdir "$TMP/seg"
out=$($BIN/poddb-segbench --records 20000 --runs 2 --json "$TMP/seg")
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["records"] == 20000 and d["runs"] == 2 and 0 < d["cpu_ns_per_record_min"] <= d["cpu_ns_per_record_mean"], d' \
  || fail "segbench --json: $out"
[ -z "$(ls -A "$TMP/seg")" ] || fail "segbench left files: $(ls "$TMP/seg")"
pass "poddb-segbench: --help, bad arguments, one JSON line, no files left"
