# tools/experiments: one study end to end in its tiny mode, two runs per point
# (a fresh 2-host pod and an empty log for each, brought up and down with
# tools/pod): the CSV has one row per point with a throughput and a passed
# check, the plot is a PNG, no region is left.
# A config key the server does not know is refused before anything runs.
# tools/experiments/ab.sh: one pair of runs, its means, no region left, --keep
# without the durability logs; a --sequence of two runs compared run by run.
# tools/experiments/ckptcost.sh: one round of requested checkpoints, medians, JSON.
# tools/experiments/fold-profile.py: synthetic perf script text folded right.
# tools/experiments/targets.py, moveback.sh, crowded.sh: tiny runs of this build
# (1 s each, small tables): their lines with figures above 0, no region or pod left.
source tests/lib.sh
export PODDB_RUN_DIR=$TMP/run PODDB_EXP_TAG=$TEST_TAG
BIN_ABS=$(cd "$BIN" && pwd)
out=$TMP/res
tools/experiments/tpcc-remote --tiny --runs 2 --bin "$BIN_ABS" --scratch "$TMP/scratch" --out "$out" \
  >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "tpcc-remote --tiny exited with $?"; }
grep -q "== results: $out" "$TMP/out" || fail "no results line: $(cat "$TMP/out")"
python3 - "$out/results.csv" <<'PY' || fail "results.csv: $(cat "$out/results.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["x_label"] for r in rows] == ["0/0", "60/90"], [r["x_label"] for r in rows]
for r in rows:
    assert r["study"] == "tpcc-remote" and r["workload"] == "tpcc" and r["hosts"] == "2", r
    assert float(r["committed_per_s"]) > 0, r
    assert r["check"] == "passed" and r["runs"] == "2", r
    assert float(r["committed_min"]) <= float(r["committed_per_s"]) <= float(r["committed_max"]), r
assert len(list(csv.DictReader(open(sys.argv[1].replace("results.csv", "runs.csv"))))) == 4
assert float(rows[0]["remote_commits_per_s"]) == 0, rows[0]
assert float(rows[1]["remote_commits_per_s"]) > 0, rows[1]
PY
pass "results.csv: one row per remote share, the median of 2 runs with a passed check"
[ "$(head -c 8 "$out/tpcc-remote.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "tpcc-remote.png is not a PNG"
[ "$(wc -l <"$out/bench.jsonl")" = 4 ] || fail "bench.jsonl: $(cat "$out/bench.jsonl")"
pass "tpcc-remote.png is a PNG, runs.csv and bench.jsonl have every run"
left=$(ls /dev/shm | grep -F "$TEST_TAG" || true)
[ -z "$left" ] || fail "regions left behind: $left"
[ -z "$(find "$TMP/scratch/run" -name '*.pid')" ] || fail "pid files left behind"
pass "every pod was brought down"

set +e
tools/experiments/tpcc-remote --tiny --bin "$BIN_ABS" --out "$TMP/res2" \
  --set engine.no_such_knob=1 >"$TMP/out" 2>&1
rc=$?
set -e
[ $rc = 1 ] || fail "an unknown engine key: exit $rc, expected 1: $(cat "$TMP/out")"
grep -q "rejects the config.*engine.no_such_knob: unknown key" <(tr '\n' ' ' <"$TMP/out") ||
  fail "an unknown engine key: unclear message: $(cat "$TMP/out")"
[ ! -e "$TMP/res2/bench.jsonl" ] || fail "an unknown engine key: ran anyway"
pass "an engine key the server does not know is refused before anything runs"

# tools/experiments/ab.sh: one pair of fresh-pod runs of this build, B with
# an environment and a config line of its own; a tree without a build is refused.
tools/experiments/ab.sh --pairs 1 --duration 1 --workload ycsb --ycsb-tuples 20000 --threads \
  --env-b "PODDB_AB_TEST=1" --engine-b "checkpoint_after: 0" --keep "$TMP/abkeep" . . >"$TMP/ab" 2>&1 ||
  { cat "$TMP/ab" >&2; fail "ab.sh exited with $?"; }
grep -q '^B: .* (engine: checkpoint_after: 0)$' "$TMP/ab" || fail "ab.sh: B's engine line not shown: $(cat "$TMP/ab")"
grep -q '^  checkpoint_after: 0$' "$TMP/abkeep/b1.yaml" && ! grep -q checkpoint_after "$TMP/abkeep/a1.yaml" ||
  fail "ab.sh: --engine-b did not reach B's config only"
[ -z "$(ls -d "$TMP"/abkeep/*-log-* 2>/dev/null)" ] ||
  fail "ab.sh --keep copied the pods' durability logs: $(ls "$TMP/abkeep")"
grep -Eq '^pair 1: A [0-9]+/s \([0-9.]+ us CPU/txn\)  B [0-9]+/s \([0-9.]+ us CPU/txn\)' "$TMP/ab" ||
  fail "ab.sh: no pair line: $(cat "$TMP/ab")"
grep -Eq '^mean: A [0-9]+/s .* B/A [0-9.]+, B ahead in [01] of 1 pairs$' "$TMP/ab" ||
  fail "ab.sh: no means: $(cat "$TMP/ab")"
grep -Eq '^  B/A of the pairs: [0-9.]+ \(one: no interval\)$' "$TMP/ab" ||
  fail "ab.sh: no B/A of the pairs: $(cat "$TMP/ab")"
grep -Eq '^  B threads \(CPU s\): .*pod-logger=[0-9.]+ .*pod-worker=[0-9.]+' "$TMP/ab" &&
  grep -Eq '^mean threads A \(CPU s\): .*pod-worker=[0-9.]+' "$TMP/ab" ||
  fail "ab.sh --threads: no CPU by thread kind: $(cat "$TMP/ab")"
grep -Eq '^hot CRC32C before the runs: [0-9.]+ GB/s$' "$TMP/ab" &&
  grep -Eq '^hot CRC32C after the runs: [0-9.]+ GB/s$' "$TMP/ab" ||
  fail "ab.sh: no machine-speed gauge before and after: $(cat "$TMP/ab")"
[ -z "$(ls /dev/shm | grep "^$TEST_TAG-ab-" || true)" ] || fail "ab.sh left a region behind"
pass "ab.sh: a pair with committed/s and CPU per transaction each (and by thread kind), the means, the CRC gauge, no region left"
# --sequence: two runs on each pod, compared run by run and over both.
tools/experiments/ab.sh --pairs 1 --duration 1 --workload ycsb --ycsb-tuples 20000 \
  --sequence "--read-pct 50 --multi-partition 10;--read-pct 90 --multi-partition 100" . . >"$TMP/ab" 2>&1 ||
  { cat "$TMP/ab" >&2; fail "ab.sh --sequence exited with $?"; }
for r in 1 2; do
  grep -Eq "^pair 1 run $r \(--read-pct .*\): A [0-9]+/s .*  B [0-9]+/s " "$TMP/ab" &&
    grep -Eq "^mean of run $r: A [0-9]+/s .* B ahead in [01] of 1 pairs$" "$TMP/ab" ||
    fail "ab.sh --sequence: run $r missing: $(cat "$TMP/ab")"
done
grep -Eq '^mean of all runs: A [0-9]+/s .* B/A [0-9.]+, B ahead in [012] of 2 runs$' "$TMP/ab" ||
  fail "ab.sh --sequence: no mean of all runs: $(cat "$TMP/ab")"
[ -z "$(ls /dev/shm | grep "^$TEST_TAG-ab-" || true)" ] || fail "ab.sh --sequence left a region behind"
pass "ab.sh --sequence: each run of the sequence compared, and all runs together"
for bad in "--sequence --remote;;--remote" "--bench --remote --sequence --remote"; do
  set +e
  # shellcheck disable=SC2086
  tools/experiments/ab.sh $bad . . >"$TMP/ab" 2>&1
  rc=$?
  set -e
  [ $rc = 2 ] && grep -Eq "empty run|exclude each other" "$TMP/ab" ||
    fail "ab.sh $bad: exit $rc: $(cat "$TMP/ab")"
done
pass "ab.sh refuses a sequence with an empty run, and --bench with --sequence"
set +e
tools/experiments/ab.sh . "$TMP" >"$TMP/ab" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "build/bin/poddb-server not found: run make there" "$TMP/ab" ||
  fail "ab.sh with a tree without a build: exit $rc: $(cat "$TMP/ab")"
pass "ab.sh refuses a tree without a build"

# tools/experiments/ckptcost.sh: a tiny run (1 s of TPC-C, one round): a full
# and a delta checkpoint of each host with its CPU per row, the medians, the
# JSON line; a delta after the idle pause writes nothing; no region left.
tools/experiments/ckptcost.sh --duration 1 --rounds 1 >"$TMP/ck" 2>&1 ||
  { cat "$TMP/ck" >&2; fail "ckptcost.sh exited with $?"; }
for h in 0 1; do
  grep -Eq "^$h +full +[1-9][0-9]* +0 +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/ck" &&
    grep -Eq "^$h +delta +0 +[1-9][0-9]* +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/ck" ||
    fail "ckptcost.sh: host $h's full and delta checkpoints: $(cat "$TMP/ck")"
done
grep -Eq '^median: full [0-9.]+ ns per row, delta \(visit only\) [0-9.]+ ns per row$' "$TMP/ck" ||
  fail "ckptcost.sh: no medians: $(cat "$TMP/ck")"
tools/experiments/ckptcost.sh --duration 1 --rounds 1 --json 2>/dev/null | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["tool"] == "ckptcost" and d["checkpoints"] == 4, d
assert d["full_ns_per_row"] > 0 and d["delta_ns_per_row"] > 0, d
assert all(n > 0 for n in d["rows_per_host"]), d' || fail "ckptcost.sh --json"
[ -z "$(ls /dev/shm | grep "^$TEST_TAG-ckptcost-" || true)" ] || fail "ckptcost.sh left a region behind"
set +e
tools/experiments/ckptcost.sh --rounds 0 >"$TMP/ck" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q 'whole numbers above 0' "$TMP/ck" || fail "ckptcost.sh --rounds 0: exit $rc: $(cat "$TMP/ck")"
pass "ckptcost.sh: a full and a delta checkpoint per host with their CPU per row, medians, JSON"

# tools/experiments/fold-profile.py on perf script's text: samples folded by
# procedure and call; --leaf counts a function with what was inlined into it;
# other threads' samples are left out.
printf '%s\n' \
  'pod-worker0 ' '	 10 be_word (inlined)' '	 10 key_bound' '	 20 descend' '	 30 bt_lookup_at' \
  '	 40 find_locked' '	 50 pod_get_ref' '	 60 p_stock_level' '	 70 pod_call' '' \
  'pod-worker0 ' '	 11 key_bound' '	 21 bt_prefetch' '	 31 table_prefetch' '	 41 pod_prefetch' \
  '	 51 p_new_order' '	 61 pod_call' '' \
  'pod-worker0 ' '	 12 lock_row' '	 22 find_locked' '	 32 pod_get_ref' '	 42 p_new_order' \
  '	 52 pod_call' '' \
  'pod-logger0 ' '	 13 key_bound' '	 23 p_new_order' '' >"$TMP/perf.txt"
tools/experiments/fold-profile.py --script --leaf key_bound "$TMP/perf.txt" >"$TMP/fold" 2>&1 ||
  fail "fold-profile.py exited with $?: $(cat "$TMP/fold")"
grep -q '^3 worker samples$' "$TMP/fold" && grep -Eq '^ +66\.7% +p_new_order$' "$TMP/fold" &&
  grep -Eq '^ +33\.3% +p_stock_level +pod_get_ref$' "$TMP/fold" &&
  grep -Eq '^ +33\.3% +p_new_order +pod_prefetch$' "$TMP/fold" &&
  ! grep -q 'lock_row\|pod_get_ref.*p_new_order\|p_new_order +pod_get_ref' "$TMP/fold" ||
  fail "fold-profile.py: wrong folding: $(cat "$TMP/fold")"
pass "fold-profile.py folds worker samples by procedure and call, inlined frames with their function"

# The scripts below use the release build, as a measurement would, and
# regions named after $PODDB_EXP_TAG and the script (pod2.sh, explib.py).
# no_pods WHAT REGION_PATTERN: no region matching it and no pid file is left
no_pods() {
  local left
  left=$(ls /dev/shm | grep -E "$2" || true)
  [ -z "$left" ] || fail "$1 left regions behind: $left"
  [ -z "$(find "$PODDB_RUN_DIR" -name '*.pid' 2>/dev/null)" ] ||
    fail "$1 left a pod running: $(find "$PODDB_RUN_DIR" -name '*.pid')"
}

# tools/experiments/targets.py --tiny: the three TPC-C pods taking turns, the
# YCSB pod and the move-in bench, 1 s each; the table has every target with
# a figure above 0, exit status 1 exactly when one is not met; --keep has the
# configs and JSON lines but no durability log.
set +e
tools/experiments/targets.py --tiny --keep "$TMP/tkeep" >"$TMP/tg" 2>"$TMP/tg.err"
rc=$?
set -e
[ $rc = 0 ] || [ $rc = 1 ] || fail "targets.py --tiny exited with $rc: $(cat "$TMP/tg" "$TMP/tg.err")"
python3 - "$TMP/tg" $rc <<'PY' || fail "targets.py --tiny: $(cat "$TMP/tg")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
rc = int(sys.argv[2])
assert re.fullmatch(r"machine: \d+ CPUs, \d+ GiB, .+; hot CRC32C [0-9.]+ GB/s", lines[0]), lines[0]
assert lines[1] == "pod: 2 hosts x 1 worker on CPUs 0 and 1, internal mode, 1 s runs after 0 s warmup"
assert lines[2] == "--tiny: short runs and 20000 YCSB tuples: NOT the targets' setting", lines[2]
head = lines.index("%-62s %-22s %s" % ("target", "measured", "met"))
targets = [("TPC-C 10/15, logging on: >= 100000 txn/s", r"(\d+)/s"),
           ("TPC-C 60/90: >= 80% of 10/15", r"(\d+)/s \(([0-9.]+)\)"),
           ("YCSB 10% multi-partition (50/50, 0.7): >= 150000 txn/s", r"(\d+)/s"),
           ("YCSB 100% multi-partition: >= 60% of 10%", r"(\d+)/s \(([0-9.]+)\)"),
           ("move-in round trip median < 10 us", r"([0-9.]+) us"),
           ("move-in round trip p99 < 100 us", r"([0-9.]+) us"),
           ("logging costs <= 10% (TPC-C 10/15 on / off)", r"([0-9.]+) of (\d+)/s"),
           ("locking + logging cost <= 35% (on / both off)", r"([0-9.]+) of (\d+)/s"),
           ("HWcc bytes per CXL-resident tuple <= 48 (after YCSB)", r"([0-9.]+) B"),
           ("resident set <= 1.5x data (TPC-C, worst host)", r"([0-9.]+)x")]
met = []
for (target, measured), line in zip(targets, lines[head + 1:]):
    m = re.fullmatch(re.escape(target) + r" +" + measured + r" +(yes|no)", line)
    assert m, (target, line)
    assert all(float(v) > 0 for v in m.groups()[:-1]), line
    met.append(m.groups()[-1])
assert len(met) == 10 and rc == (1 if "no" in met else 0), (met, rc)
tail = lines[head + 11:]
assert tail[0] == "" and re.fullmatch(
    r"  resident set without the shared region's pages \(RssShmem\): [0-9.]+x", tail[1]), tail
w = r"mean [0-9.]+ us, [0-9.]+% over 128 us"
assert re.fullmatch(rf"  reply waits of the 10/15 runs \(medians\): logging on {w}; "
                    rf"logging off {w}; locking and logging off {w}", tail[2]), tail[2]
assert re.fullmatch(r"  hot CRC32C before and after the runs: [0-9.]+ and [0-9.]+ GB/s "
                    r"\(the machine's spell\)", tail[3]), tail[3]
PY
grep -Eq '^  \[[0-9., ]+\] tpcc-60-90-bare-1$' "$TMP/tg.err" || fail "targets.py: no progress lines: $(cat "$TMP/tg.err")"
grep -q '^  loggers: 0$' "$TMP/tkeep/nolog.yaml" && grep -q '^  locking: false$' "$TMP/tkeep/bare.yaml" &&
  grep -q '^  huge_pages: true$' "$TMP/tkeep/ycsb.yaml" && [ -s "$TMP/tkeep/tpcc-10-15-1.json" ] &&
  [ -s "$TMP/tkeep/movein-1.txt" ] || fail "targets.py --keep: $(ls "$TMP/tkeep")"
[ -z "$(ls -d "$TMP"/tkeep/*-log-* 2>/dev/null)" ] || fail "targets.py --keep copied the durability logs"
no_pods targets.py "^$TEST_TAG-targets-"
pass "targets.py --tiny: every target with its figure and met or not (exit status 1 when one is not), the runs' notes, no pod left"
set +e
tools/experiments/targets.py --repeat 0 >"$TMP/tg" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q 'repeat wants a positive whole number' "$TMP/tg" || fail "targets.py --repeat 0: exit $rc: $(cat "$TMP/tg")"
pass "targets.py refuses --repeat 0"

# tools/experiments/moveback.sh: one multi-partition run moves host 0's tuples
# into CXL memory; every run has a throughput, the counts are whole numbers.
tools/experiments/moveback.sh --duration 1 --idle 1 --mp-runs 1 --tuples 20000 >"$TMP/mb" 2>&1 ||
  { cat "$TMP/mb" >&2; fail "moveback.sh exited with $?"; }
python3 - "$TMP/mb" <<'PY' || fail "moveback.sh: $(cat "$TMP/mb")"
import re, sys
rows = [l for l in open(sys.argv[1]).read().splitlines() if l != "loading 20000 tuples"]
assert rows[0] == "moveback_rate 10000, YCSB 95/5, 1 s runs, 2 hosts x 1 worker", rows[0]
want = [("0% multi-partition, fresh:", "/s"), ("100% multi-partition, run 1:", "/s"),
        ("host 0's tuples in CXL memory:", ""), ("... after 1 s idle:", ""),
        ("0% multi-partition, run 1:", "/s"), ("0% multi-partition, run 2:", "/s"),
        ("host 0's tuples in CXL memory:", "")]
assert len(rows) == 1 + len(want), rows
for (label, unit), row in zip(want, rows[1:]):
    m = re.fullmatch(re.escape(label) + r" +(\d+)" + re.escape(unit), row)
    assert m, (label, row)
    assert unit != "/s" or int(m.group(1)) > 0, row
assert int(rows[3].split()[-1]) > 0, "no tuple of host 0 in CXL memory after the multi-partition run"
PY
no_pods moveback.sh "^$TEST_TAG-moveback-"
pass "moveback.sh: each run's throughput, host 0's tuples in CXL memory after the multi-partition run, no pod left"

# tools/experiments/crowded.sh: one pair of this build against itself, small
# TPC-C tables: the 4-host pod and the two pods at once, then the means.
tools/experiments/crowded.sh --pairs 1 --duration 1 --warmup 0 \
  --tpcc "items: 2000;customers_per_district: 60" . . >"$TMP/cr" 2>&1 ||
  { cat "$TMP/cr" >&2; fail "crowded.sh exited with $?"; }
python3 - "$TMP/cr" <<'PY' || fail "crowded.sh: $(cat "$TMP/cr")"
import re, sys
text = open(sys.argv[1]).read()
assert "TPC-C 10/15, 1 s runs, 1 worker and 1 logger per host, 1 pairs\n" in text, text
side = r"A (\d+)/s wait ([0-9.]+) us  B (\d+)/s wait ([0-9.]+) us"
for label, mean in (("4 hosts", "4 hosts on 2 CPUs"), ("2 pods ", "2 pods on 2 CPUs ")):
    m = re.search(rf"^pair 1 {label}: {side}$", text, re.M)
    assert m and all(float(v) > 0 for v in m.groups()), label
    m = re.search(rf"^mean {mean}: {side}  B/A ([0-9.]+), B ahead in [01] of 1$", text, re.M)
    assert m and all(float(v) > 0 for v in m.groups()), mean
PY
no_pods crowded.sh "^$TEST_TAG-crowded-"
pass "crowded.sh: a pair on the 4-host pod and on two pods at once, throughput and reply waits above 0, the means, no pod left"

# tools/experiments/dm-lotus (dm-protocols with ford, motor and lotus):
# the three taking turns on SmallBank (tiny tables, 1 s a point, NIC model
# on): a row per protocol with a passed check, its fabric operations per
# transaction (lotus: no CAS, and a count of lock messages), a PNG, no memory node,
# compute node or NIC schedule left.
out=$TMP/dmp
tools/experiments/dm-lotus --tiny --workloads smallbank \
  --bin "$BIN_ABS" --out "$out" >"$TMP/dmp.out" 2>&1 ||
  { cat "$TMP/dmp.out" >&2; fail "dm-lotus --tiny exited with $?"; }
python3 - "$out/results.csv" <<'PY' || fail "dm-lotus results.csv: $(cat "$out/results.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [(r["panel"], r["protocol"]) for r in rows] == [("SmallBank", p) for p in ("ford", "motor", "lotus")], rows
for r in rows:
    assert r["check"] == "passed" and r["nic_model"] == "modelled", r
    assert float(r["committed_per_s"]) > 0 and float(r["round_trips_per_txn"]) > 0, r
    assert abs(float(r["memnode_atomics_per_txn"]) - float(r["cas_per_txn"]) - float(r["faa_per_txn"])) < 1e-3, r
# motor takes a commit timestamp from the clock record: one FAA more a read-write commit
assert float(rows[1]["faa_per_txn"]) > float(rows[0]["faa_per_txn"]), rows
# lotus locks in the compute nodes' tables: no CAS; its messages counted
# (none here: each host's SmallBank keys are its own, and so are their locks)
assert float(rows[2]["cas_per_txn"]) == 0 and float(rows[2]["messages_per_txn"]) >= 0, rows
assert rows[0]["messages_per_txn"] == "" and float(rows[0]["cas_per_txn"]) > 0, rows
PY
[ "$(head -c 8 "$out/dm-protocols.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "dm-protocols.png is not a PNG"
no_pods dm-lotus "^$TEST_TAG-dm-protocols-"
no_pods dm-lotus "^poddb-nic1-$TEST_TAG-"
pass "dm-lotus: ford, motor and lotus on SmallBank, checks passed, operations and messages per transaction, a PNG, no pod left"
