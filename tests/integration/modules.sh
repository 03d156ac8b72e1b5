# Stored procedures from shared objects listed under modules: in the config.
source tests/lib.sh
mods=$PWD/build/test/modules
for m in counter broken nosym placement; do [ -f "$mods/$m.so" ] || fail "$mods/$m.so not built"; done

start_with_module() { # $1: module path; starts host 0, sets $pid, $conf
  conf=$(make_conf)
  printf 'modules:\n  - %s\n' "$1" >>"$conf"
  $BIN/poddb-server --conf "$conf" --host 0 >"$TMP/server.log" 2>&1 &
  pid=$!
  on_exit "kill -KILL $pid; $BIN/poddb-region destroy --conf $conf --force"
}

# A working module: its table and procedure are there, transactions work.
start_with_module "$mods/counter.so"
for _ in $(seq 100); do
  $BIN/poddb-cli --conf "$conf" call sys.ping >/dev/null 2>&1 && break; sleep 0.1
done
[ "$($BIN/poddb-cli --conf "$conf" call counter.incr s:apples 5)" = 5 ] || fail "first incr"
[ "$($BIN/poddb-cli --conf "$conf" call counter.incr s:apples -2)" = 3 ] || fail "second incr"
[ "$($BIN/poddb-cli --conf "$conf" call counter.incr s:pears 1)" = 1 ] || fail "other counter"
$BIN/poddb-cli --conf "$conf" call sys.procs | grep -q "counter.incr" || fail "sys.procs"
$BIN/poddb-cli --conf "$conf" call sys.tables | grep -q "^counters" || fail "sys.tables"
set +e
$BIN/poddb-cli --conf "$conf" call counter.incr s:apples x:00 2>"$TMP/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "argument 2 must be int64" "$TMP/err" || fail "argument check ($rc)"
grep -q "loaded module $mods/counter.so" "$TMP/server.log" || fail "no load message"
kill -TERM $pid; wait $pid || fail "server exit status"
pass "a module's table and procedure work"

# Modules that cannot be used stop the server with the reason.
expect_refused() { # $1 module, $2 text the log must contain
  start_with_module "$1"
  set +e; wait $pid; rc=$?; set -e
  [ $rc = 1 ] || fail "server with $1 exited $rc"
  grep -qF -- "$2" "$TMP/server.log" || fail "log lacks '$2': $(cat "$TMP/server.log")"
  pass "refused: $2"
}
expect_refused "$mods/broken.so" "initialisation failed: deliberately broken for a test"
expect_refused "$mods/nosym.so" "does not export poddb_module_init"
expect_refused "$TMP/no-such-module.so" \
  "modules[0]: cannot load $TMP/no-such-module.so: cannot open shared object file"

# A relative module path is taken from the config file's directory, not from
# the server's working directory; messages and sys.config show the result.
cfgdir=$TMP/cfg; mkdir -p "$cfgdir/lib" "$TMP/elsewhere"
cp "$mods/counter.so" "$cfgdir/lib/"
realdir=$(realpath "$cfgdir")
bin_abs=$(realpath "$BIN")
relconf() { # $1: module path as written; sets $conf (cfg/pod.yaml), $line (its line)
  conf=$cfgdir/pod.yaml
  # Fresh sockets and log directories: a log with history would be recovered.
  sed "s|$TMP/pod|$TMP/rel-$RANDOM|g" "$(make_conf)" >"$conf"
  line=$(( $(wc -l <"$conf") + 2 ))
  printf 'modules:\n  - %s\n' "$1" >>"$conf"
}
start_elsewhere() { # the server runs in $TMP/elsewhere, given the config as ../cfg/pod.yaml
  (cd "$TMP/elsewhere" && exec "$bin_abs/poddb-server" --conf ../cfg/pod.yaml --host 0) \
    >"$TMP/server.log" 2>&1 &
  pid=$!
  on_exit "kill -KILL $pid; $BIN/poddb-region destroy --conf $conf --force"
}
relconf ./lib/counter.so
$BIN/poddb-region config --conf "$conf" | grep -qx "module  $realdir/lib/counter.so" ||
  fail "poddb-region config: $($BIN/poddb-region config --conf "$conf")"
[ "$(json_get "$($BIN/poddb-region config --conf "$conf" --json)" modules.0)" = \
  "$realdir/lib/counter.so" ] || fail "poddb-region config --json"
start_elsewhere
for _ in $(seq 100); do
  $BIN/poddb-cli --conf "$conf" call sys.ping >/dev/null 2>&1 && break; sleep 0.1
done
[ "$($BIN/poddb-cli --conf "$conf" call counter.incr s:plums 4)" = 4 ] ||
  fail "relative module: $(cat "$TMP/server.log")"
$BIN/poddb-cli --conf "$conf" call sys.config | grep -q "module.*$realdir/lib/counter.so" ||
  fail "sys.config: $($BIN/poddb-cli --conf "$conf" call sys.config | grep module)"
kill -TERM $pid; wait $pid || fail "server exit status"
pass "a relative module path is taken from the config's directory"

# A module that is not there: the entry, the path tried and dlerror's reason.
relconf ./missing.so
start_elsewhere
set +e; wait $pid; rc=$?; set -e
want="../cfg/pod.yaml:$line:5: modules[0]: cannot load $realdir/missing.so: cannot open shared object file: No such file or directory"
[ $rc = 1 ] && grep -qF -- "$want" "$TMP/server.log" ||
  fail "missing module ($rc): want '$want', log: $(cat "$TMP/server.log")"
pass "refused: $want"

# `make module` builds a module from one C file (here counter.c into a
# directory of the test's own); the server loads it and its procedure works.
# The test may run under `make test`: the inner make must not join its jobs.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory "$@"; }
mk module SRC=tests/modules/counter.c OUT="$cfgdir/built/counter.so" >"$TMP/make.log" 2>&1 ||
  fail "make module: $(cat "$TMP/make.log")"
relconf ./built/counter.so
start_elsewhere
for _ in $(seq 100); do
  $BIN/poddb-cli --conf "$conf" call sys.ping >/dev/null 2>&1 && break; sleep 0.1
done
[ "$($BIN/poddb-cli --conf "$conf" call counter.incr s:figs 7)" = 7 ] ||
  fail "module built by make module: $(cat "$TMP/server.log")"
kill -TERM $pid; wait $pid || fail "server exit status"
# Without OUT it goes to build/modules/NAME.so; without SRC it says how to call it.
name=mod_$$_$RANDOM
cp tests/modules/counter.c "$TMP/$name.c"
on_exit "rm -f build/modules/$name.so"
mk module SRC="$TMP/$name.c" >"$TMP/make.log" 2>&1 && [ -f "build/modules/$name.so" ] ||
  fail "make module without OUT: $(cat "$TMP/make.log")"
set +e; mk module >"$TMP/make.log" 2>&1; rc=$?; set -e
[ $rc != 0 ] && grep -qF "make module SRC=path/to/mod.c" "$TMP/make.log" || fail "make module without SRC"
pass "make module builds a module that a server loads"

# A module asks where it runs (proc.h: pod_db_host_id, pod_db_nhosts,
# pod_table_part_host) on both hosts of a pod of 2.
conf=$TMP/pod2.yaml
sed "s|$TMP/pod|$TMP/two|g" "$(make_conf)" >"$conf"
printf 'modules:\n  - %s\n' "$mods/placement.so" >>"$conf"
pids=()
for h in 0 1; do
  $BIN/poddb-server --conf "$conf" --host $h >"$TMP/host$h.log" 2>&1 &
  pids+=($!)
  on_exit "kill -KILL $!"
done
on_exit "$BIN/poddb-region destroy --conf $conf --force"
call() { $BIN/poddb-cli --conf "$conf" --host "$@"; }
for h in 0 1; do
  for _ in $(seq 150); do call $h call sys.ping >/dev/null 2>&1 && break; sleep 0.1; done
done
[ "$(call 0 call place.where)" = "$(printf '0\t2')" ] || fail "where on host 0: $(call 0 call place.where)"
[ "$(call 1 call place.where)" = "$(printf '1\t2')" ] || fail "where on host 1: $(call 1 call place.where)"
for k in 0 1 2 3 13; do
  [ "$(call 0 call place.owner $k)" = $((k % 8 % 2)) ] || fail "owner of $k"
done
# Keys 0..100 in partitions k % 8: the even partitions, so the even keys, are host 0's.
[ "$(call 0 call place.load 101)" = 51 ] || fail "load on host 0"
[ "$(call 1 call place.load 101)" = 50 ] || fail "load on host 1"
[ "$(call 0 call place.load 101)" = 0 ] || fail "second load on host 0"
for h in 1 0; do kill -TERM "${pids[$h]}"; wait "${pids[$h]}" || fail "host $h exit status"; done
pass "a module sees its host, the pod's hosts and where partitions live"
