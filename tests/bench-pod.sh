# Shared by the benchmark integration tests (tests/integration/bench_*.sh;
# source tests/lib.sh first): a 2-host pod of conf/pod.yaml on a unique
# region with a workloads: section and the test module that damages data on
# purpose (tests/modules/bench_corrupt.c), and checks on poddb-bench's JSON.
BENCH="$BIN/poddb-bench"
CLI="$BIN/poddb-cli"
POD_PIDS=()

# bench_conf WORKLOADS: a copy of conf/pod.yaml with these lines (indented by
# two spaces) under workloads:
bench_conf() {
  local conf
  conf=$(make_conf)
  printf 'modules:\n  - %s\nworkloads:\n%s\n' "$PWD/build/test/modules/bench_corrupt.so" "$1" >>"$conf"
  echo "$conf"
}

# start_pod CONF: one server per host, each answering sys.ping.
start_pod() {
  local conf=$1
  on_exit "$BIN/poddb-region destroy --conf $conf --force"
  for h in 0 1; do
    "$BIN/poddb-server" --conf "$conf" --host $h >"$TMP/host$h.log" 2>&1 &
    POD_PIDS+=($!)
    on_exit "kill -KILL $!"
  done
  for h in 0 1; do
    local up=0
    for _ in $(seq 1 300); do
      if "$CLI" --conf "$conf" --host $h -t 2000 call sys.ping >/dev/null 2>&1; then up=1; break; fi
      kill -0 "${POD_PIDS[$h]}" 2>/dev/null || { cat "$TMP/host$h.log" >&2; fail "host $h exited at start"; }
      sleep 0.1
    done
    [ $up = 1 ] || { cat "$TMP/host$h.log" >&2; fail "host $h does not answer"; }
  done
  pass "2-host pod up ($conf)"
}

# stop_pod: SIGTERM, a clean exit (status 0) and no sanitizer report.
stop_pod() {
  for p in "${POD_PIDS[@]}"; do kill -TERM "$p"; done
  for h in 0 1; do
    local st=0
    wait "${POD_PIDS[$h]}" || st=$?
    if [ $st != 0 ] || grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error|WARNING: ThreadSanitizer' "$TMP/host$h.log"; then
      cat "$TMP/host$h.log" >&2
      fail "host $h: exit status $st or a sanitizer report at shutdown"
    fi
  done
  POD_PIDS=()
  pass "the pod stopped cleanly"
}

# bench ARGS...: run poddb-bench --json; sets $rc and $TMP/bench.json, $TMP/bench.err
bench() {
  set +e
  "$BENCH" "$@" --json >"$TMP/bench.json" 2>"$TMP/bench.err"
  rc=$?
  set -e
}

# jget PATH: a value of the last poddb-bench JSON line
jget() { json_get "$(cat "$TMP/bench.json")" "$1"; }

# expect_run WHAT: the last run exited 0, committed, had no errors and --check passed
expect_run() {
  [ "$rc" = 0 ] || fail "$1: exit $rc: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
  python3 - "$TMP/bench.json" "$1" <<'PY' || fail "$1: $(cat "$TMP/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
what = sys.argv[2]
def need(c, msg):
    if not c:
        sys.exit(f"{what}: {msg}")
need(d["committed"] > 0, "nothing committed")
need(d["committed_per_s"] > 0, "no throughput")
need(sum(d["errors"].values()) == 0, f"errors: {d['errors']} (first: {d['first_error']})")
need(d["check"] == "passed", f"check {d['check']}: {d['check_report']}")
need(all(v > 0 for v in d["commits"].values()), f"a transaction type never committed: {d['commits']}")
need(d["latency_us"]["p50"] > 0 and d["latency_us"]["p99"] >= d["latency_us"]["p50"], "latency")
need(len(d["per_second"]) >= 1 and sum(d["per_second"]) == d["committed"],
     f"per-second series {d['per_second']} does not add up to {d['committed']}")
need(d["moved_in_per_s"] is None or d["moved_in_per_s"] >= 0, "moved_in")
PY
  pass "$1: $(jget committed_per_s) committed/s, check passed"
}
