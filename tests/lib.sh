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
  rm -rf "$TMP"
  rm -f /dev/shm/"$TEST_TAG"* 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT
on_exit() { CLEANUP_CMDS+=("$1"); }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

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
