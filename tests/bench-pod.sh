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
    wait_answering "${POD_PIDS[$h]}" "$TMP/host$h.log" "host $h" --conf "$conf" --host $h
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

# expect_clean WHAT: the last run exited 0, had no errors, --check passed,
# and what it reports adds up. It may have committed little or nothing: a
# window of a second or two on a loaded machine (a sanitizer build next to
# other work) proves nothing about progress; bench_progress counts that over
# several runs.
expect_clean() {
  [ "$rc" = 0 ] || fail "$1: exit $rc: $(cat "$TMP/bench.err") $(cat "$TMP/bench.json")"
  python3 - "$TMP/bench.json" "$1" <<'PY' || fail "$1: $(cat "$TMP/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
what = sys.argv[2]
def need(c, msg):
    if not c:
        sys.exit(f"{what}: {msg}")
need(sum(d["errors"].values()) == 0, f"errors: {d['errors']} (first: {d['first_error']})")
need(d["check"] == "passed", f"check {d['check']}: {d['check_report']}")
if d["committed"] > 0:
    need(d["committed_per_s"] > 0, "no throughput")
    need(d["latency_us"]["p50"] > 0 and d["latency_us"]["p99"] >= d["latency_us"]["p50"], "latency")
need(len(d["per_second"]) >= 1 and sum(d["per_second"]) == d["committed"],
     f"per-second series {d['per_second']} does not add up to {d['committed']}")
# A pod of two hosts reports its data movement and HWcc use through sys.stats.
need(d["moved_in_per_s"] is not None and d["moved_in_per_s"] >= 0, "moved_in not reported")
need(d["moved_out_per_s"] is not None and d["moved_out_per_s"] >= 0, "moved_out not reported")
need(d["hwcc_quota_bytes"] is not None and 0 < d["hwcc_used_bytes"] <= d["hwcc_quota_bytes"],
     f"HWcc use {d['hwcc_used_bytes']} of {d['hwcc_quota_bytes']}")
PY
}

# bench_progress WHAT ARGS...: poddb-bench ARGS --json, run again while the
# runs together have not committed every transaction type (nor, when they
# made cross-host calls, any cross-host one), up to PROGRESS_DEADLINE_S
# seconds of runs; each run must pass expect_clean. Progress is counted over
# all the runs (in $TMP/progress.json, which expect_remote reads), never in
# one short window. $TMP/bench.json is the last run's.
PROGRESS_DEADLINE_S=${PROGRESS_DEADLINE_S:-180}
bench_progress() {
  local what=$1; shift
  local t0=$SECONDS runs=0
  echo '{}' >"$TMP/progress.json"
  while :; do
    bench "$@"
    expect_clean "$what"
    runs=$((runs + 1))
    python3 - "$TMP/bench.json" "$TMP/progress.json" <<'PY' && break
import json, sys
d = json.load(open(sys.argv[1]))
acc = json.load(open(sys.argv[2]))
c = acc.setdefault("commits", {})
for k, v in d["commits"].items():
    c[k] = c.get(k, 0) + v
t = d["duration_s"]
for k in ("calls", "committed", "remote_calls", "remote_commits"):
    acc[k] = acc.get(k, 0) + d[k]
acc["moved_in"] = acc.get("moved_in", 0) + d["moved_in_per_s"] * t
acc["reply_waits"] = acc.get("reply_waits", 0) + d["reply_waits_per_s"] * t
json.dump(acc, open(sys.argv[2], "w"))
done = c and all(v > 0 for v in c.values()) and (acc["remote_calls"] == 0 or acc["remote_commits"] > 0)
sys.exit(0 if done else 1)
PY
    [ $((SECONDS - t0)) -lt "$PROGRESS_DEADLINE_S" ] ||
      fail "$what: no progress in $runs runs ($((SECONDS - t0)) s): $(cat "$TMP/progress.json")"
    echo "  ($what: run $runs did not yet commit every kind of transaction: $(cat "$TMP/progress.json"); running again)"
  done
  pass "$what: $(jget committed_per_s) committed/s in the last of $runs run(s), check passed"
}

# expect_remote WHAT [moved]: the runs of the last bench_progress had
# cross-host calls and some committed; with "moved", tuples were moved into
# CXL memory meanwhile (true of the first runs that reach another host's
# rows), each a reply waited for (sys.stats pod.waits*), and the last run's
# wait figures are consistent.
expect_remote() {
  python3 - "$TMP/bench.json" "$TMP/progress.json" "$1" "${2:-}" <<'PY' || fail "$1: $(cat "$TMP/progress.json") $(cat "$TMP/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
acc = json.load(open(sys.argv[2]))
what, moved = sys.argv[3], sys.argv[4] == "moved"
if acc["remote_calls"] == 0 or acc["remote_commits"] == 0:
    sys.exit(f"{what}: remote calls {acc['remote_calls']}, committed {acc['remote_commits']}")
if moved and not (acc["moved_in"] > 0 and acc["reply_waits"] > 0):
    sys.exit(f"{what}: {acc['moved_in']:.0f} tuples moved in, {acc['reply_waits']:.0f} reply waits")
w, mean, share = d["reply_waits_per_s"], d["reply_wait_us_mean"], d["reply_waits_over_128us_share"]
if not (w >= 0 and mean >= 0 and 0 <= share <= 1) or (w > 0) != (mean > 0):
    sys.exit(f"{what}: reply waits {w}/s, mean {mean} us, share over 128 us {share}")
print(f"{what}: {acc['remote_commits']} of {acc['remote_calls']} remote calls committed, "
      f"{acc['moved_in']:.0f} tuples moved in, {acc['reply_waits']:.0f} reply waits")
PY
  pass "$1: cross-host calls committed"
}

# damage_during_run CONF HOST REPORT_RE CALL... -- BENCH_ARGS...: run
# poddb-bench --conf CONF --check for 5 s in internal mode; once it prints its
# first progress line (after the check's "before" snapshot, however slow the
# machine), call CALL on HOST through the socket (which also shows a client call is served during
# an internal run); --check must then fail loudly, its report matching
# REPORT_RE.
damage_during_run() {
  local conf=$1 host=$2 report=$3
  shift 3
  local call=()
  while [ "$1" != -- ]; do call+=("$1"); shift; done
  shift
  # Emptied here, not only by the child's redirection: the loop below must not
  # find the previous run's progress line before the child opens the file.
  : >"$TMP/bench.err"
  set +e
  "$BENCH" --conf "$conf" --duration 5 --warmup 0 --check --json "$@" >"$TMP/bench.json" 2>"$TMP/bench.err" &
  local bpid=$!
  set -e
  on_exit "kill -KILL $bpid"
  for _ in $(seq 1 1200); do grep -q 'committed/s' "$TMP/bench.err" && break; sleep 0.05; done
  grep -q 'committed/s' "$TMP/bench.err" || fail "the run did not start in 60 s: $(cat "$TMP/bench.err")"
  "$CLI" --conf "$conf" --host "$host" -t 2000 call "${call[@]}" >/dev/null ||
    fail "a client call during an internal run was not served"
  set +e
  wait $bpid
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "--check after damage: exit $rc: $(cat "$TMP/bench.err")"
  grep -q 'CHECK FAILED' "$TMP/bench.err" || fail "no loud failure: $(cat "$TMP/bench.err")"
  grep -q "$report" "$TMP/bench.err" ||
    fail "the report does not match '$report': $(cat "$TMP/bench.err")"
}
