# poddb-btreebench, the B+-tree's own benchmark: --help, bad options refused
# with exit 2, a small run's table and JSON line (the tool exits 1 by itself
# when a lookup misses a key it inserted), and --huge.
source tests/lib.sh
B=$BIN/poddb-btreebench
"$B" --help | grep -q '^usage: poddb-btreebench' || fail "--help"
pass "--help"
for bad in "--keys 150" "--keys 0" "--node 1000" "--batch 17" "--rounds x" "extra"; do
  set +e
  # shellcheck disable=SC2086
  "$B" $bad >/dev/null 2>"$TMP/err"; rc=$?
  set -e
  [ $rc = 2 ] && grep -q 'poddb-btreebench: ' "$TMP/err" || fail "'$bad': exit $rc: $(cat "$TMP/err")"
done
pass "bad options are refused with exit 2"
"$B" --keys 20000 --lookups 2000 --rounds 2 >"$TMP/out" || fail "run: $(cat "$TMP/out")"
grep -q '^B+-tree of 20000 order-line keys: 1024-byte nodes' "$TMP/out" || fail "header: $(cat "$TMP/out")"
[ "$(grep -c '^  round [12]: lookup ' "$TMP/out")" = 2 ] || fail "rounds: $(cat "$TMP/out")"
out=$("$B" --keys 20000 --lookups 2000 --rounds 1 --node 512 --batch 5 --huge --json)
for k in keys node height node_bytes huge insert_ns lookup_ns batch batch_ns; do
  json_get "$out" "$k" >/dev/null || fail "--json has no $k: $out"
done
[ "$(json_get "$out" keys)" = 20000 ] && [ "$(json_get "$out" node)" = 512 ] &&
  [ "$(json_get "$out" batch)" = 5 ] && [ "$(json_get "$out" huge)" = True ] || fail "--json: $out"
pass "a small run: a table, and one JSON line with --huge"
