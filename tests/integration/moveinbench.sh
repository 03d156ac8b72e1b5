# poddb-moveinbench end to end, small: --help, a bad option, and a run of 300
# move-ins whose figures it prints and whose move-ins host 1 counted (the tool
# fails by itself when host 1 moved fewer tuples in than it timed).
source tests/lib.sh
MOD=build/test/modules/moveinbench.so
[ -f "$MOD" ] || fail "$MOD is missing (make $MOD)"
"$BIN/poddb-moveinbench" --help | grep -q '^usage: poddb-moveinbench' || fail "--help"
pass "--help"
set +e
"$BIN/poddb-moveinbench" --keys 0 2>"$TMP/err"; rc=$?
set -e
[ $rc = 2 ] && grep -q -- "--keys: '0' is not a number" "$TMP/err" || fail "--keys 0 (rc $rc): $(cat "$TMP/err")"
pass "a bad option is refused"
"$BIN/poddb-moveinbench" --keys 300 --batch 50 --module "$MOD" --bin "$BIN" >"$TMP/out" 2>&1 \
  || fail "run: $(cat "$TMP/out")"
grep -q "move-in round trips: 300 keys, 2 hosts x 1 worker" "$TMP/out" || fail "run: $(cat "$TMP/out")"
grep -qE "^  median [0-9.]+ us  p90 [0-9.]+ us  p99 [0-9.]+ us" "$TMP/out" || fail "no figures: $(cat "$TMP/out")"
grep -q "host 1 moved in 300 tuples" "$TMP/out" || fail "move-ins not counted: $(cat "$TMP/out")"
cat "$TMP/out"
pass "300 timed move-ins"
