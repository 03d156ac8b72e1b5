# poddb-cli end to end against a real poddb-server: one-shot calls with text
# and --json output, typed arguments, exit codes (0 ok, 1 the procedure
# failed, 2 usage/transport, 3 not found / exists), the shell reading a pipe,
# --help, calls over TCP with the host's token (--token-file, $POD_TOKEN_FILE,
# $POD_TOKEN) and without it. Then the server must stop cleanly on SIGTERM.
source tests/lib.sh
conf=$(make_conf)
sock=$(grep -m1 '^ *socket:' "$conf" | awk '{print $2}' | sed 's/{host}/0/')
# host 0 also listens on TCP, with the token in $TMP/token (named relative to
# the config's directory, $TMP)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
grep -q '^  - cpus: "0" ' "$conf" || fail "conf/pod.yaml's hosts[0] line changed: adapt this script"
sed -i "s|^  - cpus: \"0\" .*|  - {cpus: \"0\", tcp_port: $port, tcp_token_file: token}|" "$conf"
(umask 077; head -c 24 /dev/urandom | base64 >"$TMP/token")
CLI="$BIN/poddb-cli"
on_exit "$BIN/poddb-region destroy --conf $conf --force"

# ---- the server --------------------------------------------------------------
"$BIN/poddb-server" --conf "$conf" --host 0 >"$TMP/server.log" 2>&1 &
srv=$!
on_exit "kill -KILL $srv"
for i in $(seq 1 300); do
  if "$CLI" -s "$sock" -t 2000 call sys.ping >/dev/null 2>&1; then break; fi
  kill -0 $srv 2>/dev/null || { cat "$TMP/server.log" >&2; fail "the server exited at start"; }
  sleep 0.1
done
"$CLI" -s "$sock" -t 2000 call sys.ping >/dev/null 2>&1 || { cat "$TMP/server.log" >&2; fail "the server does not answer"; }
pass "server up on $sock"

no_err() { [ ! -s "$TMP/err" ] || fail "$1: unexpected stderr: $(cat "$TMP/err")"; }
# json_ok FILE: one valid JSON document (python3 -m json.tool)
json_ok() { python3 -m json.tool "$1" >/dev/null || fail "$2: not valid JSON: $(cat "$1")"; }
# json_field FILE PATH: a value of the JSON document in FILE
json_field() { json_get "$(cat "$1")" "$2"; }

# ---- --help and usage errors ------------------------------------------------------
run "$CLI" --help
expect_rc 0 "--help"
grep -q '^usage: poddb-cli' "$TMP/out" || fail "--help: no usage line"
grep -q 'Exit status' "$TMP/out" || fail "--help: no exit status section"
no_err "--help"
pass "--help"

run "$CLI"
expect_rc 2 "no server given"
err_has "no server" "no server given"
run "$CLI" --bogus
expect_rc 2 "unknown option"
err_has "--bogus" "unknown option"
run "$CLI" -s "$TMP/no-such.sock" call sys.ping
expect_rc 2 "cannot connect"
err_has "cannot connect" "cannot connect"
run "$CLI" -s "$sock" frobnicate
[ "$rc" = 2 ] || [ "$rc" = 1 ] || fail "a command that is not 'call': exit $rc"
pass "usage and transport errors exit 2 with a message"

# ---- calls, text output -----------------------------------------------------------
run "$CLI" -s "$sock" call sys.ping
expect_rc 0 "sys.ping"
out_is "$(printf 'pong\t0')" "sys.ping"
no_err "sys.ping"
run "$CLI" --conf "$conf" --host 0 call sys.ping
expect_rc 0 "sys.ping via --conf"
out_is "$(printf 'pong\t0')" "sys.ping via --conf"
run "$CLI" -s "$sock" -t 5000 -e call sys.ping
expect_rc 0 "--timeout --early"
pass "sys.ping (--socket, --conf/--host, --timeout, --early)"

run "$CLI" -s "$sock" call kv.put kv alice '{"age":3}'
expect_rc 0 "kv.put"
out_is "" "kv.put prints nothing"
no_err "kv.put"
run "$CLI" -s "$sock" call kv.get kv alice
expect_rc 0 "kv.get"
out_is '{"age":3}' "kv.get"
pass "kv.put / kv.get (text)"

run "$CLI" -s "$sock" call kv.get kv nobody
expect_rc 3 "kv.get of a missing key"
out_is "(not found)" "kv.get of a missing key"
no_err "kv.get of a missing key"
run "$CLI" -s "$sock" call kv.insert kv alice other
expect_rc 3 "kv.insert of an existing key"
out_is "(exists)" "kv.insert of an existing key"
run "$CLI" -s "$sock" call kv.get kv alice
out_is '{"age":3}' "kv.insert did not overwrite"
run "$CLI" -s "$sock" call kv.delete kv nobody
expect_rc 3 "kv.delete of a missing key"
pass "outcomes exit 3: (not found), (exists)"

run "$CLI" -s "$sock" call kv.get nosuch k
expect_rc 1 "unknown table"
err_has "poddb-cli: kv.get: invalid argument: no kv table 'nosuch'" "unknown table"
run "$CLI" -s "$sock" call no.such.proc
expect_rc 1 "unknown procedure"
err_has "unknown procedure 'no.such.proc'" "unknown procedure"
run "$CLI" -s "$sock" call kv.get kv
expect_rc 1 "wrong argument count"
err_has "kv.get takes 2 arguments, got 1" "wrong argument count"
run "$CLI" -s "$sock" call kv.get kv 42
expect_rc 1 "an integer key"
err_has "argument 2 must be bytes, got int64" "an integer key"
long=$(printf 'k%.0s' $(seq 1 65))
run "$CLI" -s "$sock" call kv.put kv "$long" v
expect_rc 1 "a key longer than key_size"
err_has "key_size 64" "a key longer than key_size"
pass "server errors exit 1 with the server's message on stderr"

# typed arguments
run "$CLI" -s "$sock" call kv.put kv s:42 x:00ff
expect_rc 0 "kv.put s:42 x:00ff"
run "$CLI" -s "$sock" call kv.get kv s:42
out_is "0x00ff" "binary value in text"
run "$CLI" -s "$sock" call kv.put kv x: "hello world"
run "$CLI" -s "$sock" call kv.get kv x:
expect_rc 0 "empty key"
out_is "hello world" "empty key"
run "$CLI" -s "$sock" call kv.scan kv s:42 s:42
out_is "$(printf '42\t0x00ff')" "kv.scan of one key"
run "$CLI" -s "$sock" call kv.scan kv null: null: i:1
expect_rc 0 "kv.scan limit 1"
out_is "$(printf '\thello world')" "kv.scan limit 1 (the empty key first)"
run "$CLI" -s "$sock" call sys.procs
expect_rc 0 "sys.procs"
[ "$(wc -l <"$TMP/out")" = 21 ] || fail "sys.procs: $(wc -l <"$TMP/out") lines"
grep -q "$(printf '\tsys.auth\t1\t1')" "$TMP/out" || fail "sys.procs lacks sys.auth"
grep -q "$(printf '\tkv.multi\t-1\t0')" "$TMP/out" || fail "sys.procs lacks kv.multi"
grep -q "$(printf '\tbench.status\t0\t1')" "$TMP/out" || fail "sys.procs lacks bench.status"
grep -q "$(printf '\tsys.checkpoint\t-1\t1')" "$TMP/out" || fail "sys.procs lacks sys.checkpoint"
pass "typed arguments (s: x: i: null:), binary output, scans"

# ---- --json ------------------------------------------------------------------------
run "$CLI" -s "$sock" --json call kv.get kv alice
expect_rc 0 "--json kv.get"
json_ok "$TMP/out" "--json kv.get"
[ "$(json_field "$TMP/out" status)" = ok ] || fail "--json status"
[ "$(json_field "$TMP/out" code)" = 0 ] || fail "--json code"
[ "$(json_field "$TMP/out" rows.0.0)" = '{"age":3}' ] || fail "--json value: $(cat "$TMP/out")"
pass "--json kv.get: $(cat "$TMP/out")"

run "$CLI" -s "$sock" --json call sys.ping
json_ok "$TMP/out" "--json sys.ping"
[ "$(json_field "$TMP/out" rows.0.0)" = pong ] && [ "$(json_field "$TMP/out" rows.0.1)" = 0 ] \
  || fail "--json sys.ping: $(cat "$TMP/out")"
run "$CLI" -s "$sock" --json call kv.get kv s:42
json_ok "$TMP/out" "--json binary"
[ "$(json_field "$TMP/out" rows.0.0.hex)" = 00ff ] || fail "--json binary: $(cat "$TMP/out")"
run "$CLI" -s "$sock" --json call sys.stats
json_ok "$TMP/out" "--json sys.stats"
[ "$(json_field "$TMP/out" rows.0.0)" = 0 ] || fail "--json sys.stats host"
run "$CLI" -s "$sock" --json call sys.config
json_ok "$TMP/out" "--json sys.config"
run "$CLI" -s "$sock" --json call kv.scan kv null: null:
json_ok "$TMP/out" "--json kv.scan"
pass "--json: ping, binary as {\"hex\":...}, stats, config, scan"

run "$CLI" -s "$sock" --json call kv.get kv nobody
expect_rc 3 "--json not found"
json_ok "$TMP/out" "--json not found"
[ "$(json_field "$TMP/out" status)" = "not found" ] && [ "$(json_field "$TMP/out" code)" = 1 ] \
  || fail "--json not found: $(cat "$TMP/out")"
pass "--json not found: exit 3, code 1"

run "$CLI" -s "$sock" --json call kv.get nosuch k
expect_rc 1 "--json error"
# the error object goes to stdout (like every --json result) or to stderr
if [ -s "$TMP/out" ]; then jf=$TMP/out; else jf=$TMP/err; fi
json_ok "$jf" "--json error"
[ "$(json_field "$jf" code)" = -3 ] || fail "--json error code: $(cat "$jf")"
[ "$(json_field "$jf" status)" = "invalid argument" ] || fail "--json error status"
json_field "$jf" message | grep -q "no kv table 'nosuch'" || fail "--json error message"
pass "--json error: exit 1, code -3 with the server's message"

# ---- the shell, fed by a pipe --------------------------------------------------
cat >"$TMP/script" <<'EOF'
# a comment
sys.ping
call kv.put kv bob "hello   world"
kv.get kv bob
kv.put kv "" "empty"
kv.get kv ""
kv.get kv nobody

help
kv.multi put kv m1 a get kv m1
EOF
set +e
"$CLI" -s "$sock" <"$TMP/script" >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
expect_rc 3 "shell script (its last non-zero status: the not found)"
grep -qx "$(printf 'pong\t0')" "$TMP/out" || fail "shell: no pong"
grep -qx "hello   world" "$TMP/out" || fail "shell: quoted value"
grep -qx "empty" "$TMP/out" || fail "shell: empty key"
grep -qx "(not found)" "$TMP/out" || fail "shell: not found"
grep -qx "$(printf '0\ta')" "$TMP/out" || fail "shell: kv.multi rows"
grep -q "quit" "$TMP/out" || fail "shell: help"
grep -q "prompt\|poddb>" "$TMP/out" && fail "shell: a prompt when stdin is not a terminal"
pass "shell from a pipe: comments, quoting, empty key, help; exit 3 from its (not found)"

printf 'kv.get nosuch a\nsys.ping\n' | { set +e; "$CLI" -s "$sock" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc=$(cat "$TMP/rc")
expect_rc 1 "shell: the last failing command's status"
err_has "no kv table 'nosuch'" "shell error message"
grep -qx "$(printf 'pong\t0')" "$TMP/out" || fail "shell: goes on after an error"
printf 'kv.get kv nobody\nquit\nsys.ping\n' | { set +e; "$CLI" -s "$sock" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc=$(cat "$TMP/rc")
expect_rc 3 "shell: not found, then quit"
grep -q pong "$TMP/out" && fail "shell: a command after quit ran"
printf 'sys.ping\n' | { set +e; "$CLI" -s "$TMP/no-such.sock" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc=$(cat "$TMP/rc")
expect_rc 2 "shell: cannot connect"
printf 'sys.ping\n' | { set +e; "$CLI" -s "$sock" --json >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc=$(cat "$TMP/rc")
expect_rc 0 "shell --json"
json_ok "$TMP/out" "shell --json"
pass "shell exit status: last failure (1, 3), quit, cannot connect (2), --json"

# ---- TCP: the host's token first, or nothing is answered ------------------------------
tcp="tcp:127.0.0.1:$port"
grep -q "tcp listener on 127.0.0.1:$port" "$TMP/server.log" || fail "no TCP listener in the log"
run "$CLI" --help
grep -q -- '--token-file FILE' "$TMP/out" || fail "--help does not describe --token-file"
run "$CLI" -s "$tcp" --token-file "$TMP/token" call sys.ping
expect_rc 0 "sys.ping over TCP with --token-file"
out_is "$(printf 'pong\t0')" "sys.ping over TCP"
no_err "sys.ping over TCP"
run "$CLI" -s "$tcp" --token-file "$TMP/token" call kv.get kv alice
out_is '{"age":3}' "kv.get over TCP: the data of the Unix socket"
printf 'sys.ping\nkv.get kv alice\n' | { set +e; "$CLI" -s "$tcp" --token-file "$TMP/token" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc=$(cat "$TMP/rc")
expect_rc 0 "the shell over TCP"
grep -qx '{"age":3}' "$TMP/out" || fail "the shell over TCP: $(cat "$TMP/out")"
run env POD_TOKEN_FILE="$TMP/token" "$CLI" -s "$tcp" call sys.ping
expect_rc 0 "\$POD_TOKEN_FILE"
run env POD_TOKEN="$(cat "$TMP/token")" "$CLI" -s "$tcp" call sys.ping
expect_rc 0 "\$POD_TOKEN"
pass "TCP with the token: --token-file, the shell, \$POD_TOKEN_FILE, \$POD_TOKEN"

run "$CLI" -s "$tcp" call sys.ping
expect_rc 1 "TCP without a token"
err_has "poddb-cli: sys.ping: not authenticated: " "TCP without a token"
err_has "--token-file FILE" "TCP without a token: how to give it"
run "$CLI" -s "$tcp" --json call kv.get kv alice
expect_rc 1 "--json over TCP without a token"
[ "$(json_field "$TMP/out" code)" = -9 ] && [ "$(json_field "$TMP/out" status)" = "not authenticated" ] \
  || fail "--json without a token: $(cat "$TMP/out")"
(umask 077; echo wrong-token-0123456789 >"$TMP/wrong")
run "$CLI" -s "$tcp" --token-file "$TMP/wrong" call sys.ping
expect_rc 2 "a wrong token"
err_has "poddb-cli: $tcp: token refused: not authenticated: wrong token" "a wrong token"
run env POD_TOKEN_FILE="$TMP/wrong" "$CLI" -s "$tcp" call sys.ping
expect_rc 2 "a wrong \$POD_TOKEN_FILE"
err_has "wrong token" "a wrong \$POD_TOKEN_FILE"
run env POD_TOKEN_FILE="$TMP/wrong" "$CLI" -s "$tcp" --token-file "$TMP/token" call sys.ping
expect_rc 0 "--token-file wins over \$POD_TOKEN_FILE"
run "$CLI" -s "$tcp" --token-file "$TMP/no-such-token" call sys.ping
expect_rc 2 "a missing token file"
err_has "cannot read token file $TMP/no-such-token" "a missing token file"
run "$CLI" -s "$sock" --token-file "$TMP/token" call sys.ping
expect_rc 2 "--token-file with a Unix socket"
err_has "is for a tcp:HOST:PORT server" "--token-file with a Unix socket"
run "$CLI" -s "$sock" call sys.auth "s:$(cat "$TMP/token")"
expect_rc 1 "sys.auth on the Unix socket"
err_has "needs no token" "sys.auth on the Unix socket"
pass "TCP without the token, or with a wrong one, fails with the reason"

# ---- data written through the CLI is there for the client library, and the server stops cleanly
run "$CLI" -s "$sock" call kv.get kv bob
out_is "hello   world" "shell put visible to one-shot call"
kill -TERM $srv
for i in $(seq 1 200); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
kill -0 $srv 2>/dev/null && fail "the server did not stop within 20 s of SIGTERM"
set +e
wait $srv
src=$?
set -e
[ $src = 0 ] || { tail -20 "$TMP/server.log" >&2; fail "server exit status $src"; }
grep -q "stopped cleanly" "$TMP/server.log" || fail "no 'stopped cleanly' in the server log"
if grep -q -e "ERROR: AddressSanitizer" -e "ERROR: LeakSanitizer" -e "runtime error" "$TMP/server.log"; then
  cat "$TMP/server.log" >&2
  fail "sanitizer report in the server log"
fi
[ ! -e "$sock" ] || fail "socket left behind"
run "$CLI" -s "$sock" call sys.ping
expect_rc 2 "after shutdown"
pass "SIGTERM: exit 0, socket removed; the CLI then exits 2"
