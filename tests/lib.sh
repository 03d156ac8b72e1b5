# Shared by the integration scripts: unique names, cleanup, assertions.
# Scripts run from the repository root; $PODDB_BIN holds the programs under test
# (tests/run-tests sets it to the sanitized build; default: build/bin).
set -euo pipefail
BIN=${PODDB_BIN:-build/bin}
TEST_TAG="poddb-it-$$-$RANDOM"
TMP=$(mktemp -d "/tmp/$TEST_TAG.XXXX")
CLEANUP_CMDS=()
cleanup() {
  local rc=$?
  for c in "${CLEANUP_CMDS[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
  # A failed run leaves only its test log: the ends of its servers' logs go there.
  if [ "$rc" != 0 ]; then
    for f in "$TMP"/*.log; do
      [ -f "$f" ] || continue
      echo "---- end of ${f##*/} ----" >&2
      tail -n 30 "$f" >&2
    done
  fi
  rm -rf "$TMP"
  rm -f /dev/shm/"$TEST_TAG"* 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT
on_exit() { CLEANUP_CMDS+=("$1"); }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# alive PID: the process runs (a zombie, exited but not yet waited for, does not).
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# hang_report PID: what a process that does not answer is doing: its threads'
# states and kernel wait channels, and their stacks when gdb can attach.
hang_report() {
  echo "---- process $1: $(ps -o stat=,etime=,time=,args= -p "$1" 2>/dev/null) ----" >&2
  local t
  for t in /proc/"$1"/task/*; do
    echo "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null): state $(cut -d' ' -f3 "$t/stat" 2>/dev/null), wchan $(cat "$t/wchan" 2>/dev/null)" >&2
  done
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$1" -batch -nx -ex "thread apply all bt 25" 2>&1 |
      grep -E '^(Thread|#)' | head -n 200 >&2 || true
  fi
}

# wait_answering PID LOG WHAT CLI-ARGS...: wait until `poddb-cli CLI-ARGS call
# sys.ping` answers, up to $PODDB_START_WAIT_S seconds (default 180: sanitized
# servers start slowly on a loaded machine). If the process exits first, or
# never answers, fail with the end of its LOG (and, hung, what it is doing).
wait_answering() {
  local pid=$1 log=$2 what=$3 limit=${PODDB_START_WAIT_S:-180}
  shift 3
  local until=$((SECONDS + limit))
  while [ "$SECONDS" -lt "$until" ]; do
    "$BIN/poddb-cli" "$@" -t 2000 call sys.ping >/dev/null 2>&1 && return 0
    alive "$pid" || { tail -n 40 "$log" >&2; fail "$what exited at start"; }
    sleep 0.1
  done
  tail -n 40 "$log" >&2
  hang_report "$pid"
  fail "$what does not answer after $limit s"
}

# A copy of conf/pod.yaml (or $1) on a unique region path, sockets and log dirs.
make_conf() {
  local src=${1:-conf/pod.yaml} out=$TMP/pod.yaml
  # [exp] without conf/pod.yaml's workloads: section (make run's TPC-C): the
  # tests expect the plain pod and add their own workloads.
  sed -e "s|/dev/shm/poddb-default|/dev/shm/$TEST_TAG-region|" \
      -e "s|/tmp/poddb-default|$TMP/pod|g" \
      -e '/^workloads:/,/^[a-z]/{/^[a-z]/!d;/^workloads:/d}' "$src" >"$out"
  echo "$out"
}

# json_get FILE-or-JSON KEY.PATH: print a value of a one-line JSON document.
json_get() {
  python3 -c 'import json,sys
d=json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    d=d[int(k)] if isinstance(d,list) else d[k]
print(d)' "$1" "$2"
}

# run CMD...: sets rc, $TMP/out and $TMP/err (never stops the script); the
# checks below look at the last run.
run() {
  set +e
  "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  set -e
}
expect_rc() { [ "$rc" = "$1" ] || fail "$2: exit $rc, expected $1 (stdout: $(cat "$TMP/out"); stderr: $(cat "$TMP/err"))"; }
out_is() { [ "$(cat "$TMP/out")" = "$1" ] || fail "$2: stdout '$(cat "$TMP/out")', expected '$1'"; }
out_has() { grep -qF -- "$1" "$TMP/out" || fail "$2: stdout lacks '$1': $(cat "$TMP/out")"; }
err_has() { grep -qF -- "$1" "$TMP/err" || fail "$2: stderr lacks '$1': $(cat "$TMP/err")"; }
