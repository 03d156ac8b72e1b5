#!/usr/bin/env python3
"""The performance targets (docs/performance.md): runs each measurement on a
private 2-host pod (1 worker per host, CPUs 0 and 1, logging on with 10 ms
epochs, poddb-bench --mode internal) and prints the target, the measured value
and whether it is met. Exit status 0 when every target is met, 1 when one is
not, 2 on an error. The pods, configs and bench runs go through explib.py."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explib as x  # noqa: E402

USAGE = "tools/experiments/targets.py [--duration S] [--repeat N] [--quick | --tiny] " \
        "[--bin DIR] [--keep DIR] [--help]"
DESCRIPTION = """\
Measures the targets of docs/performance.md on 2 hosts x 1 worker (CPUs 0
and 1): TPC-C 10/15 and 60/90 (1 warehouse per host), YCSB with 1,000,000
tuples (50/50, skew 0.7, 10% and 100% multi-partition), the cross-host
move-in round trip, the cost of logging (loggers 0 vs 1), the cost of
concurrency control and logging together (engine.locking false and loggers 0
vs both on), HWcc bytes per CXL-resident tuple and resident set vs data.
Each of the three TPC-C pods runs the same 10/15, 60/90 sequence, so that
the ratios compare runs that met the same amount of data, and they take
turns (the others paused with SIGSTOP), one pair of runs each per round in
a rotating order, so that the two ratios (medians of the rounds' ratios)
compare runs of the same spell of the VM. The YCSB pod runs
with huge_pages: true (its fixed-size table on transparent huge pages); the
TPC-C pods with the default, false."""
EPILOG = """\
Every figure depends on the machine: run it on an otherwise idle machine
(the script prints the load average before each run). A VM's speed drifts
by tens of percent over hours; the script prints poddb-crcbench's hot
CRC32C rate before and after the runs as a gauge of the spell it ran in
(this project's VM: 26-27 GB/s when fast, 18-22 GB/s in slow spells).
After the table it also prints the runs behind each median and the waits
for the other host's replies in the TPC-C 10/15 runs (mean, share over
128 us) with logging on, off, and with locking and logging off, and the CPU
seconds the checkpointers took in each logging-on 10/15 run: a large
checkpoint in the measured 10 s moves the logging ratio most (in one fast
spell: 0.81-0.85 with one, 0.87-0.95 without)."""

PROGRAMS = ("poddb-server", "poddb-bench", "poddb-cli", "poddb-region", "poddb-moveinbench",
            "poddb-crcbench")
MODULE = os.path.join(x.ROOT, "build/test/modules/moveinbench.so")
# The three TPC-C pods: logging on; off; locking and logging off. Their runs
# are tpcc-10-15-R, tpcc-10-15-nolog-R, tpcc-10-15-bare-R (and 60-90).
TPCC_PODS = (("on", 1, True), ("nolog", 0, True), ("bare", 0, False))
ROW = "%-62s %-22s %s"


def parse(argv):
    ap = argparse.ArgumentParser(prog="tools/experiments/targets.py", usage=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description=DESCRIPTION, epilog=EPILOG)
    ap.add_argument("--duration", type=int, default=None, metavar="S",
                    help="seconds per throughput run (default 10; 1 s warmup first)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="take every throughput figure and the move-in round trip N times "
                         "(runs of a pair alternate) and use the median (default 1); single "
                         "runs on a 2-core VM vary by about 10%%")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true",
                   help="3-second runs and 200,000 YCSB tuples (a smoke run, not the targets' "
                        "setting; says so in the output)")
    g.add_argument("--tiny", action="store_true",
                   help="1-second runs without warmup, a few thousand rows, 2,000 move-ins "
                        "(for the test of the script; the figures mean nothing)")
    ap.add_argument("--bin", metavar="DIR", default=os.path.join(x.ROOT, "build/bin"),
                    help="programs (default build/bin)")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep configs, bench JSON lines and server logs in DIR (not the "
                         "pods' durability logs)")
    a = ap.parse_args(argv)
    if a.duration is not None and a.duration < 1:
        ap.error("--duration wants whole seconds")
    if a.repeat < 1:
        ap.error("--repeat wants a positive whole number")
    a.warmup, a.ycsb_tuples, a.tpcc, a.moveins = 1, 1000000, {}, None
    if a.quick:
        a.duration, a.ycsb_tuples = a.duration or 3, 200000
    if a.tiny:
        a.duration, a.warmup, a.ycsb_tuples, a.moveins = a.duration or 1, 0, 20000, 2000
        a.tpcc = dict(x.MODES["tiny"]["tpcc"])
    a.duration = a.duration or 10
    a.bin = os.path.abspath(a.bin)
    return a


def load_average():
    return "%.2f, %.2f, %.2f" % os.getloadavg()


def median(values):
    """The lower middle one of the values (as they were printed)."""
    return sorted(values, key=float)[(len(values) - 1) // 2]


def ratio(a, b):
    return "%.2f" % (float(a) / float(b))


def crc_gauge(bindir):
    """poddb-crcbench's hot rate (GB/s): the machine's speed right now."""
    r = subprocess.run([os.path.join(bindir, "poddb-crcbench"), "--total", "512"],
                       capture_output=True, text=True)
    m = re.search(r"^ *hot .* ([0-9.]+) GB/s", r.stdout, re.M)
    return m.group(1) if m else "?"


def machine_line(crc):
    mem = model = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = "%.0f GiB" % (int(line.split()[1]) / 1048576)
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"machine: {os.cpu_count()} CPUs, {mem}, {model}; hot CRC32C {crc} GB/s"


class Targets:
    def __init__(self, a, pods):
        self.a, self.pods = a, pods
        self.runs_txt = []  # the runs behind the medians, and the notes after the table
        self.failed = False

    # -- runs ---------------------------------------------------------------------------

    def bench(self, pod, name, *args):
        """One measured run, its JSON line in WORK/NAME.json; its committed/s."""
        print(f"  [{load_average()}] {name}", file=sys.stderr, flush=True)
        j = x.bench_json(self.a.bin, pod.conf, ["--duration", str(self.a.duration), "--warmup",
                                                str(self.a.warmup), *args],
                         out=self.pods.path(f"{name}.json"))
        return self.committed(name, j)

    def json(self, name):
        with open(self.pods.path(f"{name}.json")) as f:
            return json.loads(f.read().strip().splitlines()[-1])

    def committed(self, name, j=None):
        return str(round((j or self.json(name))["committed_per_s"]))

    def load(self, pod, workload):
        """Fill a fresh pod: a 1 s run without warmup."""
        x.bench_json(self.a.bin, pod.conf, ["--workload", workload, "--duration", "1",
                                            "--warmup", "0", *(["--remote", "0/0"]
                                                               if workload == "tpcc" else [])])

    def runs(self, name, values):
        """Note every value behind a median."""
        if self.a.repeat > 1:
            self.runs_txt.append(f"  runs of {name}: {' '.join(values)}")

    def median_ratio(self, a, b):
        """The median over the rounds of A-r / B-r (the rounds' ratios noted with
        the runs)."""
        v = [ratio(self.committed(f"{a}-{r}"), self.committed(f"{b}-{r}"))
             for r in range(1, self.a.repeat + 1)]
        self.runs(f"{a} / {b} by round", v)
        return median(v)

    def row(self, target, measured, met):
        print(ROW % (target, measured, "yes" if met else "no"), flush=True)
        self.failed |= not met

    # -- the measurements -------------------------------------------------------------

    def tpcc(self):
        """The three TPC-C pods are loaded and then take turns, paused while the
        others run: round r runs each pod's r-th pair of runs, 10/15 then 60/90,
        in an order that rotates, so that the ratios of the targets compare runs
        of the same spell of the VM, whose speed drifts by tens of percent over
        minutes (docs/performance.md). Every pod runs the same sequence, so its
        r-th runs meet the same amount of data: TPC-C inserts all the time, and a
        pod's throughput falls as its data grows."""
        a = self.a
        print("TPC-C: three pods taking turns (logging on; off; locking and logging off)",
              file=sys.stderr, flush=True)
        pods = {}
        for p, loggers, locking in TPCC_PODS:
            conf = self.pods.pod2(p, loggers, a.ycsb_tuples, engine=dict(locking=locking),
                                  tpcc=a.tpcc)
            pods[p] = self.pods.up(conf)
            self.load(pods[p], "tpcc")
            pods[p].pause()
        ticks = {}
        for r in range(1, a.repeat + 1):
            for i in range(3):
                p = TPCC_PODS[(r - 1 + i) % 3][0]
                sfx = "" if p == "on" else f"-{p}"
                pods[p].resume()
                ticks[p, r, 0] = pods[p].thread_ticks()
                self.bench(pods[p], f"tpcc-10-15{sfx}-{r}", "--workload", "tpcc", "--remote",
                           "10/15")
                ticks[p, r, 1] = pods[p].thread_ticks()
                self.bench(pods[p], f"tpcc-60-90{sfx}-{r}", "--workload", "tpcc", "--remote",
                           "60/90")
                pods[p].pause()
        m = {}
        for p, _, _ in TPCC_PODS:
            sfx = "" if p == "on" else f"-{p}"
            for share in ("10-15", "60-90"):
                v = [self.committed(f"tpcc-{share}{sfx}-{r}") for r in range(1, a.repeat + 1)]
                self.runs(f"tpcc-{share}{sfx}", v)
                m[p, share] = median(v)
        # How much checkpointing each logging-on 10/15 run held (both hosts'
        # pod-ckpt threads): what moves the logging ratio most from run to run
        # (a run that holds a large checkpoint loses 12-18%, one without ~1-2%).
        self.runs("checkpointers' CPU seconds in tpcc-10-15",
                  ["%.2f" % x.kind_seconds("pod-ckpt", ticks["on", r, 0], ticks["on", r, 1])
                   for r in range(1, a.repeat + 1)])
        self.t1015, self.t6090 = m["on", "10-15"], m["on", "60-90"]
        self.t1015_nolog, self.t1015_bare = m["nolog", "10-15"], m["bare", "10-15"]
        self.r_log = self.median_ratio("tpcc-10-15", "tpcc-10-15-nolog")
        self.r_bare = self.median_ratio("tpcc-10-15", "tpcc-10-15-bare")
        # Resident set vs data, on the TPC-C pod with logging after its runs
        pods["on"].resume()
        self.rss, self.rss_private = self.resident(pods["on"])
        for pod in pods.values():
            self.pods.down(pod)

    def resident(self, pod):
        """The worst host's resident set / its data, with and without the shared
        region's pages (RssShmem)."""
        worst = worst_private = 0.0
        for h, pid in enumerate(pod.pids()):
            with open(f"/proc/{pid}/status") as f:
                st = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f
                      if l.startswith(("VmRSS", "RssShmem"))}
            data = 0
            for line in pod.call(h, "sys.tables").splitlines():
                f = line.split("\t")
                data += int(f[4]) * (int(f[1]) + int(f[2]))
            worst = max(worst, st["VmRSS"] / data)
            worst_private = max(worst_private, (st["VmRSS"] - st["RssShmem"]) / data)
        return "%.2f" % worst, "%.2f" % worst_private

    def ycsb(self):
        """YCSB's table has a fixed size and is read at random: its rows go on
        huge pages (huge_pages, docs/configuration.md); TPC-C's pods keep the
        default."""
        a = self.a
        print("YCSB, logging on", file=sys.stderr, flush=True)
        conf = self.pods.pod2("ycsb", 1, a.ycsb_tuples, engine=dict(locking=True),
                              host_defaults=dict(huge_pages=True), tpcc=a.tpcc)
        pod = self.pods.up(conf)
        self.load(pod, "ycsb")
        v10, v100 = [], []
        for r in range(1, a.repeat + 1):
            v10.append(self.bench(pod, f"ycsb-10-{r}", "--workload", "ycsb", "--read-pct", "50",
                                  "--multi-partition", "10"))
            v100.append(self.bench(pod, f"ycsb-100-{r}", "--workload", "ycsb", "--read-pct",
                                   "50", "--multi-partition", "100"))
        self.y10, self.y100 = median(v10), median(v100)
        self.runs("ycsb-10", v10)
        self.runs("ycsb-100", v100)
        r = subprocess.run([os.path.join(a.bin, "poddb-region"), "inspect", "--conf", conf,
                            "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise x.ExpError(f"poddb-region inspect: {r.stderr.strip()}")
        self.hwcc = "%.1f" % json.loads(r.stdout)["resident"]["hwcc_bytes_per_tuple"]
        self.pods.down(pod)

    def movein(self):
        a = self.a
        print("move-in round trip", file=sys.stderr, flush=True)
        med, p99 = [], []
        for r in range(1, a.repeat + 1):
            cmd = [os.path.join(a.bin, "poddb-moveinbench"), "--bin", a.bin, "--module", MODULE]
            if a.moveins:
                cmd += ["--keys", str(a.moveins)]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
            with open(self.pods.path(f"movein-{r}.txt"), "w") as f:
                f.write(out.stdout)
            if out.returncode != 0:
                raise x.ExpError("poddb-moveinbench failed:\n"
                                 + "\n".join(out.stdout.strip().splitlines()[-5:]))
            for name, v in (("median", med), ("p99", p99)):
                m = re.search(rf"\b{name} ([0-9.]+) us", out.stdout)
                if m:
                    v.append(m.group(1))
        self.med = median(med) if med else None
        self.p99 = median(p99) if p99 else None
        self.runs("movein-median-us", med)
        self.runs("movein-p99-us", p99)

    def reply_waits(self):
        """The waits for the other host's replies in the 10/15 runs (poddb-bench's
        JSON): their tail is where background threads cost the workers most (a
        worker or owner off its CPU while a logger or checkpointer runs)."""
        def waits(sfx):
            means, shares = [], []
            for r in range(1, self.a.repeat + 1):
                d = self.json(f"tpcc-10-15{sfx}-{r}")
                if d.get("reply_wait_us_mean") is None:
                    return "n/a"
                means.append(d["reply_wait_us_mean"])
                shares.append(100 * d["reply_waits_over_128us_share"])
            return (f"mean {statistics.median_low(means):.1f} us, "
                    f"{statistics.median_low(shares):.1f}% over 128 us")
        return ("  reply waits of the 10/15 runs (medians): logging on " + waits("")
                + "; logging off " + waits("-nolog") + "; locking and logging off "
                + waits("-bare"))

    def table(self):
        print()
        print(ROW % ("target", "measured", "met"))
        t1015, t6090, y10, y100 = self.t1015, self.t6090, self.y10, self.y100
        self.row("TPC-C 10/15, logging on: >= 100000 txn/s", f"{t1015}/s",
                 float(t1015) >= 100000)
        self.row("TPC-C 60/90: >= 80% of 10/15", f"{t6090}/s ({ratio(t6090, t1015)})",
                 float(ratio(t6090, t1015)) >= 0.8)
        self.row("YCSB 10% multi-partition (50/50, 0.7): >= 150000 txn/s", f"{y10}/s",
                 float(y10) >= 150000)
        self.row("YCSB 100% multi-partition: >= 60% of 10%", f"{y100}/s ({ratio(y100, y10)})",
                 float(ratio(y100, y10)) >= 0.6)
        self.row("move-in round trip median < 10 us", f"{self.med or '?'} us",
                 float(self.med or 1e9) <= 9.999)
        self.row("move-in round trip p99 < 100 us", f"{self.p99 or '?'} us",
                 float(self.p99 or 1e9) <= 99.999)
        self.row("logging costs <= 10% (TPC-C 10/15 on / off)",
                 f"{self.r_log} of {self.t1015_nolog}/s", float(self.r_log) >= 0.9)
        self.row("locking + logging cost <= 35% (on / both off)",
                 f"{self.r_bare} of {self.t1015_bare}/s", float(self.r_bare) >= 0.65)
        self.row("HWcc bytes per CXL-resident tuple <= 48 (after YCSB)", f"{self.hwcc} B",
                 float(self.hwcc) <= 48)
        self.row("resident set <= 1.5x data (TPC-C, worst host)", f"{self.rss}x",
                 float(self.rss) <= 1.5)


def check(a):
    for p in PROGRAMS:
        if not os.access(os.path.join(a.bin, p), os.X_OK):
            raise x.ExpError(f"{a.bin}/{p} not found: run make")
    if not os.path.isfile(MODULE):
        raise x.ExpError("the move-in benchmark's module is missing: "
                         "make build/test/modules/moveinbench.so")
    if os.cpu_count() < 2 or not {0, 1} <= os.sched_getaffinity(0):
        raise x.ExpError(f"needs 2 CPUs (0 and 1); this machine lets us use "
                         f"{sorted(os.sched_getaffinity(0))}")


def main(argv):
    a = parse(argv)
    try:
        check(a)
        with x.Pods("targets", a.bin, keep=a.keep) as pods:
            t = Targets(a, pods)
            crc_before = crc_gauge(a.bin)
            print(machine_line(crc_before))
            print(f"pod: 2 hosts x 1 worker on CPUs 0 and 1, internal mode, {a.duration} s runs "
                  f"after {a.warmup} s warmup"
                  + (f", median of {a.repeat}" if a.repeat > 1 else ""))
            if a.quick or a.tiny:
                print(f"--{'quick' if a.quick else 'tiny'}: short runs and {a.ycsb_tuples} YCSB "
                      "tuples: NOT the targets' setting")
            sys.stdout.flush()
            t.tpcc()
            t.ycsb()
            t.movein()
            t.table()
            t.runs_txt.append("  resident set without the shared region's pages (RssShmem): "
                              f"{t.rss_private}x")
            t.runs_txt.append(t.reply_waits())
            t.runs_txt.append(f"  hot CRC32C before and after the runs: {crc_before} and "
                              f"{crc_gauge(a.bin)} GB/s (the machine's spell)")
            with open(pods.path("runs.txt"), "w") as f:
                f.write("\n".join(t.runs_txt) + "\n")
            print()
            print("\n".join(t.runs_txt))
            return 1 if t.failed else 0
    except x.ExpError as e:
        print(f"targets.py: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, x.Interrupted):
        return 2


if __name__ == "__main__":
    sys.exit(x.exit_status(main, sys.argv[1:]))
