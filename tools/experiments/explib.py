"""Shared machinery of the experiment scripts in tools/experiments/.

A study is a list of points. Each point is one pod configuration (generated
from a base config: the machine layout, with a unique region, sockets and log
directories) and one poddb-bench run on it. For every point and repetition the
study brings a fresh pod up with tools/pod, runs poddb-bench --json --check,
reads each host's sys.pod counters, and brings the pod down (always, also on
errors and signals). It then writes, in the results folder:

  results.csv   one row per point: the median over the repetitions, min, max
  runs.csv      one row per repetition
  bench.jsonl   poddb-bench's JSON line of every repetition, as printed
  configs/      the generated configs
  logs/         the server logs of points that failed
  plot.gp, STUDY.png   the gnuplot script and its plot
  meta.txt      command line, machine, load average, git revision

Scripts that manage their pods themselves (targets.py: several pods up at
once, taking turns) use the same pieces through Pods and Pod below: configs
written from dicts, pods up and down with tools/pod (always down at the end),
poddb-bench's JSON line.

Python 3 standard library only; gnuplot draws the plots. docs/experiments.md
describes the studies."""

import argparse
import csv
import glob
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20
GiB = 1 << 30
SLICE = 32 * MiB  # the region's slice alignment (cxl/region.c)

# Duration, repetitions and data scale of the three modes. Data sizes are per
# host (YCSB) or per worker (TPC-C warehouses), so a pod's data grows with it
# as in Tigon (3 warehouses per host = one per worker; 2.4M YCSB tuples on 8 hosts).
MODES = {
    "tiny": dict(duration=1.0, warmup=0.5, runs=1,
                 tpcc=dict(items=2000, customers_per_district=60), ycsb_per_host=2000),
    "quick": dict(duration=3.0, warmup=1.0, runs=1,
                  tpcc=dict(), ycsb_per_host=100000),
    "full": dict(duration=30.0, warmup=5.0, runs=3,
                 tpcc=dict(), ycsb_per_host=300000),
}
DEFAULT_BASE = {"tiny": "conf/pod.yaml", "quick": "conf/pod.yaml", "full": "conf/numa-8host.yaml"}

CSV_FIELDS = [
    "study", "panel", "series", "x", "x_label", "workload", "mode", "hosts",
    "workers_per_host", "knobs", "settings", "run", "runs", "committed_per_s",
    "committed_min", "committed_max", "latency_mean_us", "latency_p50_us",
    "latency_p99_us", "conflicts_per_s", "errors_per_s", "remote_commits_per_s",
    "moved_in_per_s", "moved_out_per_s", "hwcc_used_bytes", "check",
]
CONFLICT_CAUSES = ("read_lock", "write_lock", "upgrade", "next_key", "remote_busy", "hwcc_full",
                   "validation")


class ExpError(Exception):
    """A problem to print as 'STUDY: MESSAGE' with exit status 1."""


class Interrupted(Exception):
    pass


def _on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def say(msg=""):
    print(msg, flush=True)


def note(msg):
    print(f"  note: {msg}", flush=True)


# ---- points ---------------------------------------------------------------------------

class Point:
    """One measurement: a pod configuration and a poddb-bench run on it.

    panel, series, x, x_label place it in the plot (x numeric; x_label is the
    tick text). workload is tpcc or ycsb; knobs is a dict of poddb-bench run
    knobs (config keys); engine a dict of engine.* keys; region a dict of
    region.* keys (hwcc_budget); hosts the number of hosts (None: the base's);
    loggers overrides every host's loggers; bench_mode internal or client;
    settings a short text for the CSV (what the point varies)."""

    def __init__(self, panel, series, x, x_label, workload, knobs=None, engine=None,
                 region=None, hosts=None, loggers=None, bench_mode="internal",
                 bench_args=None, settings=""):
        self.panel, self.series, self.x, self.x_label = panel, series, x, str(x_label)
        self.workload = workload
        self.knobs = dict(knobs or {})
        self.engine = dict(engine or {})
        self.region = dict(region or {})
        self.hosts = hosts
        self.loggers = loggers
        self.bench_mode = bench_mode
        self.bench_args = list(bench_args or [])
        self.settings = settings

    def name(self):
        s = f"{self.panel} / {self.series} / {self.x_label}"
        return s


# ---- configs ------------------------------------------------------------------------

def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    return json.dumps(s)  # a JSON string is a valid double-quoted YAML scalar


def yaml_block(d, indent=0):
    out = []
    pad = " " * indent
    for k, v in d.items():
        if isinstance(v, dict):
            if v:
                out.append(f"{pad}{k}:")
                out.extend(yaml_block(v, indent + 2))
            else:
                out.append(f"{pad}{k}: {{}}")
        elif isinstance(v, list):
            out.append(f"{pad}{k}:")
            for item in v:
                if not isinstance(item, dict):  # a scalar item
                    out.append(f"{pad}  - {yaml_scalar(item)}")
                    continue
                lines = yaml_block(item, indent + 4)
                lines[0] = pad + "  - " + lines[0].lstrip()
                out.extend(lines)
        else:
            out.append(f"{pad}{k}: {yaml_scalar(v)}")
    return out


def region_tag():
    """The start of the region file names: $PODDB_EXP_TAG (tests set it so that
    their cleanup finds what a crash leaves), else poddb-exp-PID."""
    return os.environ.get("PODDB_EXP_TAG") or f"poddb-exp-{os.getpid()}"


def round_up(n, a):
    return (n + a - 1) // a * a


def parse_size(text):
    """'10MB' -> 10000000, '64MiB' -> 67108864 (the units of docs/configuration.md)."""
    units = {"B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": MiB, "MiB": MiB, "G": GiB, "GiB": GiB,
             "T": 1 << 40, "TiB": 1 << 40, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    t = text.strip()
    i = len(t)
    while i > 0 and not t[i - 1].isdigit():
        i -= 1
    num, unit = t[:i].strip(), t[i:].strip() or "B"
    if not num.isdigit() or unit not in units:
        raise ExpError(f"bad size {text!r}: a whole number and a unit like 10MB or 64MiB")
    return int(num) * units[unit]


def region_need(nhosts, max_workers, hwcc_budget):
    """The smallest region.size the server accepts (cxl/region.c)."""
    threads = max_workers + 2
    quota = (hwcc_budget - 4096) // nhosts
    slice_ = round_up(quota + quota // 4, SLICE) + threads * SLICE
    return SLICE + nhosts * slice_ + nhosts * (threads + 1) * SLICE


class Base:
    """The machine layout taken from the base config (poddb-region config --json)."""

    def __init__(self, path, bindir):
        if not os.path.isfile(path):
            raise ExpError(f"base config {path}: no such file")
        r = subprocess.run([os.path.join(bindir, "poddb-region"), "config", "--conf", path,
                            "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise ExpError(f"base config {path}: {r.stderr.strip()}")
        cfg = json.loads(r.stdout)
        self.path = path
        self.region = cfg["region"]
        self.hosts = cfg["hosts"]

    def check_machine(self, nhosts):
        usable = os.sched_getaffinity(0)
        for h in self.hosts[:nhosts]:
            missing = sorted(set(h["cpus"]) - usable)
            if missing:
                raise ExpError(
                    f"the base config {self.path} pins host {h['id']} to CPUs {h['cpu_list']}, "
                    f"but this machine lets us use only {len(usable)} CPUs "
                    f"({','.join(map(str, sorted(usable)))}): use --quick (conf/pod.yaml) or "
                    "--base FILE with this machine's layout")


class Experiment:
    """Options, results folder and the run loop of one study."""

    def __init__(self, name, title, description, add_args=None):
        self.name, self.title = name, title
        ap = argparse.ArgumentParser(
            prog=f"tools/experiments/{name}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            description=f"{title}\n\n{description}",
            epilog="Results go to results/%s-TIMESTAMP/ (--out): results.csv, runs.csv, "
                   "bench.jsonl, %s.png, plot.gp, configs/, meta.txt. Each point runs on a "
                   "fresh pod brought up and down with tools/pod. docs/experiments.md "
                   "describes every study." % (name, name))
        g = ap.add_mutually_exclusive_group()
        g.add_argument("--quick", action="store_const", dest="mode", const="quick",
                       help="a few minutes on a 2-core machine: 3 s per point, small data, "
                            "few points, base conf/pod.yaml")
        g.add_argument("--tiny", action="store_const", dest="mode", const="tiny",
                       help="seconds: 1 s per point, tiny data, two or three points (for "
                            "the test of the scripts; the figures mean nothing)")
        g.add_argument("--full", action="store_const", dest="mode", const="full",
                       help="the paper's setting (the default): 30 s per point after 5 s "
                            "warmup, 3 runs, the paper's data scale and every point, base "
                            "conf/numa-8host.yaml (a NUMA box; see --base)")
        ap.add_argument("--base", metavar="FILE",
                        help="config whose machine layout to use: region kind, size, "
                             "numa_node and hwcc_budget; each host's cpus, workers and "
                             "loggers (default: conf/pod.yaml for --quick/--tiny, "
                             "conf/numa-8host.yaml for --full)")
        ap.add_argument("--out", metavar="DIR",
                        help="results folder (default results/%s-TIMESTAMP)" % name)
        ap.add_argument("--duration", type=float, metavar="S", help="measured seconds per run")
        ap.add_argument("--warmup", type=float, metavar="S", help="warmup seconds per run")
        ap.add_argument("--runs", type=int, metavar="N",
                        help="repetitions per point (the CSV has the median, min, max)")
        ap.add_argument("--workloads", metavar="LIST",
                        help="only these panels' workloads, e.g. tpcc or ycsb")
        ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra engine key for every point, e.g. "
                             "--set engine.epoch_ms=20 (repeatable)")
        ap.add_argument("--bin", metavar="DIR",
                        help="the poddb programs (default $PODDB_BIN, else build/bin)")
        ap.add_argument("--scratch", metavar="DIR",
                        help="where sockets, logs and pod state go while running (default "
                             "a new directory under $TMPDIR or /tmp; the log directories "
                             "need a real disk for meaningful durability figures)")
        ap.add_argument("--replot", metavar="DIR",
                        help="run nothing: draw the plot again from DIR/results.csv (a "
                             "results folder of this study)")
        ap.add_argument("--verbose", action="store_true",
                        help="show poddb-bench's progress and the pod's messages")
        if add_args:
            add_args(ap)
        self.ap = ap

    # -- setup -----------------------------------------------------------------------

    def parse(self, argv=None):
        a = self.ap.parse_args(argv)
        a.mode = a.mode or "full"
        m = MODES[a.mode]
        self.a = a
        self.mode = a.mode
        self.duration = a.duration if a.duration is not None else m["duration"]
        self.warmup = a.warmup if a.warmup is not None else m["warmup"]
        self.runs = a.runs if a.runs is not None else m["runs"]
        if self.duration <= 0 or self.warmup < 0 or self.runs < 1:
            raise ExpError("--duration must be > 0, --warmup >= 0, --runs >= 1")
        self.bin = a.bin or os.environ.get("PODDB_BIN") or os.path.join(ROOT, "build/bin")
        self.bin = os.path.abspath(self.bin)
        for p in ("poddb-server", "poddb-bench", "poddb-cli", "poddb-region"):
            if not os.access(os.path.join(self.bin, p), os.X_OK):
                raise ExpError(f"{self.bin}/{p} not found: build with `make` (or --bin DIR)")
        if not shutil.which("gnuplot"):
            raise ExpError("gnuplot not found: install gnuplot-nox (tools/install-deps)")
        base = a.base or os.path.join(ROOT, DEFAULT_BASE[a.mode])
        self.base = Base(base, self.bin)
        self.workload_filter = set(a.workloads.split(",")) if a.workloads else None
        self.extra_engine = {}
        for kv in a.set:
            k, sep, v = kv.partition("=")
            if not sep or not k.startswith("engine.") or not v:
                raise ExpError(f"--set {kv}: want engine.KEY=VALUE")
            self.extra_engine[k[len("engine."):]] = v
        return a

    def data(self):
        return MODES[self.mode]

    def max_hosts(self):
        return len(self.base.hosts)

    # -- configs ---------------------------------------------------------------------

    def host_entries(self, nhosts, oversubscribe=False):
        hs = self.base.hosts
        if nhosts <= len(hs):
            return [dict(h) for h in hs[:nhosts]]
        if not oversubscribe:
            raise ExpError(f"{nhosts} hosts but the base config has {len(hs)}")
        # More hosts than the base lays out: unpinned, the base's first host's shape.
        return [dict(id=i, workers=hs[0]["workers"], loggers=hs[0]["loggers"], cpus=[],
                     cpu_list="") for i in range(nhosts)]

    def config_text(self, p, idx, hosts):
        """The YAML of point p (index idx) with these host entries."""
        nh = len(hosts)
        workers = sum(h["workers"] for h in hosts)
        maxw = max(h["workers"] for h in hosts)
        reg = self.base.region
        budget = p.region.get("hwcc_budget", reg["hwcc_budget"])
        budget_bytes = parse_size(budget) if isinstance(budget, str) else int(budget)
        d = self.data()
        wl = {}
        data_bytes = 0
        if p.workload == "tpcc":
            t = dict(warehouses=workers, **d["tpcc"])
            wl["tpcc"] = t
            items = t.get("items", 100000)
            cust = t.get("customers_per_district", 3000)
            data_bytes = workers * (items * 400 + cust * 10 * 1200) + items * 100
        elif p.workload == "ycsb":
            n = d["ycsb_per_host"] * nh
            wl["ycsb"] = dict(tuples=n, partitions=nh, theta=0.7)
            data_bytes = n * 1200
        else:
            raise ExpError(f"unknown workload {p.workload}")
        region = dict(path=reg["path"] if reg["kind"] == "devdax" else
                      f"/dev/shm/{region_tag()}-{self.name}-{idx}",
                      kind=reg["kind"])
        size = reg["size"]
        if reg["kind"] != "devdax":
            need = region_need(nh, maxw, budget_bytes) + data_bytes
            size = max(size, round_up(need, 256 * MiB))
        region["size"] = size
        region["hwcc_budget"] = budget
        region["numa_node"] = "none" if reg["numa_node"] < 0 else reg["numa_node"]
        region["simulate_noncoherent"] = reg["simulate_noncoherent"]
        cfg = dict(region=region)
        cfg["host_defaults"] = dict(socket=os.path.join(self.scratch, f"p{idx}-{{host}}.sock"),
                                    log_dir=self.log_dir(idx, "{host}"))
        entries = []
        for h in hosts:
            e = dict(workers=h["workers"],
                     loggers=p.loggers if p.loggers is not None else h["loggers"])
            if h["cpu_list"]:
                e["cpus"] = h["cpu_list"]
            entries.append(e)
        cfg["hosts"] = entries
        cfg["workloads"] = wl
        engine = dict(self.extra_engine)
        engine.update(p.engine)
        if engine:
            cfg["engine"] = engine
        head = [f"# generated by tools/experiments/{self.name} ({self.mode} mode): {p.name()}",
                f"# machine layout from {self.base.path}"]
        return "\n".join(head + yaml_block(cfg)) + "\n"

    def validate(self, conf, p):
        """Parse the config with the servers' parser; a key it does not know is the
        clear error the ablation studies need when the server predates their knobs."""
        r = subprocess.run([os.path.join(self.bin, "poddb-region"), "config", "--conf", conf],
                           capture_output=True, text=True)
        if r.returncode != 0:
            msg = r.stderr.strip()
            keys = ", ".join(f"engine.{k}: {yaml_scalar(v)}" for k, v in p.engine.items())
            hint = ""
            if "engine." in msg and p.engine:
                hint = ("\n  (this build of the server does not know these engine keys and "
                        "cannot run this study; docs/configuration.md lists the keys it knows)")
            raise ExpError(f"the server rejects the config of point '{p.name()}'"
                           + (f" ({keys})" if keys else "") + f":\n  {msg}{hint}")

    # -- the pod ---------------------------------------------------------------------

    def pod(self, *args, check=True):
        return pod_tool(self.bin, *args, check=check, verbose=self.a.verbose)

    def pod_counters(self, conf, nhosts):
        """Each host's sys.pod counters summed over the hosts (None in a 1-host pod)."""
        total = {}
        for h in range(nhosts):
            r = subprocess.run([os.path.join(self.bin, "poddb-cli"), "--conf", conf, "--host",
                                str(h), "-t", "10000", "call", "sys.pod"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                continue
            for line in r.stdout.splitlines():
                k, _, v = line.partition("\t")
                try:
                    total[k] = total.get(k, 0) + float(v)
                except ValueError:
                    pass
        return total or None

    def bench(self, conf, p):
        cmd = [os.path.join(self.bin, "poddb-bench"), "--conf", conf, "--workload", p.workload,
               "--mode", p.bench_mode, "--duration", str(self.duration), "--warmup",
               str(self.warmup), "--check", "--json"]
        if not self.a.verbose:
            cmd.append("--quiet")
        for k, v in p.knobs.items():
            cmd += ["--knob", f"{k}={v}"]
        cmd += p.bench_args
        t0 = time.monotonic()
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=None if self.a.verbose else subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        line, j = last_json(r.stdout)
        return r.returncode, j, line, (r.stderr or "").strip(), wall

    # -- the run loop ------------------------------------------------------------------

    def run(self, points, xlabel, panels=None, notes=()):
        """Run every point, write the CSVs and the plot, print where they are.
        Exit status: 0, or 1 when a point failed or its check did not pass."""
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _on_signal)
        if self.workload_filter:
            points = [p for p in points if p.workload in self.workload_filter]
        if not points:
            raise ExpError("no points to run (see --workloads)")
        oversub = getattr(self.a, "oversubscribe", False)
        for p in points:  # before anything is written
            self.base.check_machine(len(self.host_entries(p.hosts or len(self.base.hosts),
                                                          oversubscribe=oversub)))
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.out = os.path.abspath(self.a.out or os.path.join(ROOT, "results",
                                                              f"{self.name}-{stamp}"))
        os.makedirs(os.path.join(self.out, "configs"), exist_ok=True)
        self.scratch = self.a.scratch or tempfile.mkdtemp(prefix=f"poddb-exp-{self.name}-")
        os.makedirs(self.scratch, exist_ok=True)
        os.environ["PODDB_RUN_DIR"] = os.path.join(self.scratch, "run")

        # Configs first, all validated before anything runs.
        plan = []
        try:
            for i, p in enumerate(points):
                hosts = self.host_entries(p.hosts or len(self.base.hosts), oversubscribe=oversub)
                conf = os.path.join(self.out, "configs", f"point{i:02d}.yaml")
                with open(conf, "w") as f:
                    f.write(self.config_text(p, i, hosts))
                self.validate(conf, p)
                plan.append((p, conf, len(hosts), hosts[0]["workers"]))
        except ExpError:
            if not self.a.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)
            raise

        load0 = os.getloadavg()
        meta = [f"study: {self.name} ({self.title})",
                f"command: {' '.join([sys.argv[0]] + sys.argv[1:])}",
                f"mode: {self.mode}; {self.duration:g} s measured after {self.warmup:g} s "
                f"warmup, {self.runs} run(s) per point",
                f"base: {self.base.path}",
                f"machine: {os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}, "
                f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}",
                f"git: {git_rev()}",
                f"started: {time.strftime('%Y-%m-%d %H:%M:%S')}"]
        meta += [f"note: {n}" for n in notes]
        say(f"== {self.title}")
        for line in meta[2:len(meta) - len(notes)]:
            say(f"   {line}")
        say(f"   {len(points)} points x {self.runs} run(s); results in {self.out}")
        for n in notes:
            note(n)

        rows, run_rows, failures = [], [], 0
        jsonl = open(os.path.join(self.out, "bench.jsonl"), "w")
        up_conf = None
        try:
            for i, (p, conf, nh, wph) in enumerate(plan):
                per_run = []
                for run in range(self.runs):
                    # Every run on a fresh pod and an empty log (a server recovers
                    # what its log directory holds): tuples moved into the region,
                    # HWcc use and TPC-C's growing tables do not carry over.
                    self.remove_logs(i, nh)
                    up_conf = conf  # set first: a signal during up still brings it down
                    self.pod("up", "--conf", conf)
                    before = self.pod_counters(conf, nh)
                    rc, j, line, err, wall = self.bench(conf, p)
                    after = self.pod_counters(conf, nh)
                    if line:
                        jsonl.write(line + "\n")
                        jsonl.flush()
                    row = self.row(p, nh, wph, run + 1, j, before, after, wall)
                    tag = f"  [{i + 1}/{len(plan)}] {p.name()}" + (
                        f" run {run + 1}" if self.runs > 1 else "")
                    if rc == 0 and j is not None and row["check"] == "passed":
                        say(f"{tag}: {row['committed_per_s']:.0f} committed/s, p50 "
                            f"{row['latency_p50_us']:.0f} us, check passed")
                    else:
                        failures += 1
                        why = (j or {}).get("first_error") or (err.splitlines()[-1] if err else "")
                        row["check"] = row["check"] or "failed"
                        say(f"{tag}: FAILED (poddb-bench exit {rc}, check {row['check']})"
                            + (f": {why}" if why else ""))
                        self.keep_logs(conf, i, nh)
                    per_run.append(row)
                    run_rows.append(row)
                    down = self.pod("down", "--conf", conf, check=False)
                    up_conf = None
                    self.remove_logs(i, nh)
                    if down.returncode != 0:
                        failures += 1
                        say(f"{tag}: the pod did not stop cleanly (tools/pod down exit "
                            f"{down.returncode}); server logs in {self.out}/logs")
                        self.keep_logs(conf, i, nh)
                rows.append(aggregate(per_run))
        except (KeyboardInterrupt, Interrupted) as e:
            say(f"\n{self.name}: interrupted ({e or 'SIGINT'}); stopping the pod")
            failures += 1
        finally:
            jsonl.close()
            if up_conf:
                self.pod("down", "--conf", up_conf, check=False)
            if not self.a.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)

        load1 = os.getloadavg()
        self.load = (load0[0], load1[0])
        meta.append(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
        meta.append(f"finished: {time.strftime('%Y-%m-%d %H:%M:%S')}; {failures} failure(s)")
        meta.append(f"plot: {self.meta_line()}")
        with open(os.path.join(self.out, "meta.txt"), "w") as f:
            f.write("\n".join(meta) + "\n")
        write_csv(os.path.join(self.out, "results.csv"), rows)
        write_csv(os.path.join(self.out, "runs.csv"), run_rows)
        png = None
        if any(r["committed_per_s"] != "" for r in rows):
            try:
                png = self.plot(rows, panels(rows) if panels else default_panels(rows, xlabel))
            except ExpError as e:
                say(f"{self.name}: {e}")
                failures += 1
        say(f"== results: {self.out}")
        say(f"   results.csv ({len(rows)} rows), runs.csv, bench.jsonl, meta.txt"
            + (f", {os.path.basename(png)}" if png else ""))
        say(f"   load average {load0[0]:.2f} at start, {load1[0]:.2f} at end "
            f"({os.cpu_count()} CPUs)")
        if failures:
            say(f"== {failures} run(s) failed or did not pass --check (see above)")
            return 1
        return 0

    def log_dir(self, idx, h):
        return os.path.join(self.scratch, f"p{idx}-log-{h}")

    def remove_logs(self, idx, nh):
        """The durability logs of point idx's hosts (in the scratch directory; a
        run writes up to hundreds of MB)."""
        for h in range(nh):
            shutil.rmtree(self.log_dir(idx, h), ignore_errors=True)

    def keep_logs(self, conf, i, nh):
        if not conf:
            return
        d = os.path.join(self.out, "logs", f"point{i:02d}")
        os.makedirs(d, exist_ok=True)
        for h in range(nh):
            r = subprocess.run([os.path.join(ROOT, "tools/pod"), "logs", str(h), "--conf", conf,
                                "--bin", self.bin], capture_output=True, text=True)
            with open(os.path.join(d, f"host{h}.log"), "w") as f:
                f.write(r.stdout + r.stderr)

    def row(self, p, nh, wph, run, j, before, after, wall):
        row = dict(study=self.name, panel=p.panel, series=p.series, x=p.x, x_label=p.x_label,
                   workload=p.workload, mode=p.bench_mode, hosts=nh, workers_per_host=wph,
                   knobs=" ".join(f"{k}={v}" for k, v in p.knobs.items()),
                   settings=p.settings, run=run, runs=1)
        if j is None:
            row.update({k: "" for k in CSV_FIELDS if k not in row})
            return row
        dur = j.get("duration_s") or self.duration
        lat = j.get("latency_us", {})
        ab = j.get("aborts_per_s", {})
        row.update(committed_per_s=j["committed_per_s"], committed_min=j["committed_per_s"],
                   committed_max=j["committed_per_s"], latency_mean_us=lat.get("mean", ""),
                   latency_p50_us=lat.get("p50", ""), latency_p99_us=lat.get("p99", ""),
                   conflicts_per_s=sum(ab.get(c, 0) for c in CONFLICT_CAUSES),
                   errors_per_s=ab.get("error", 0),
                   remote_commits_per_s=j.get("remote_commits", 0) / dur,
                   check=j.get("check", ""))
        # Data movement: poddb-bench's figures when it has them, else the change
        # of the hosts' sys.pod counters over the whole bench call (warmup and
        # check included: an approximation).
        for k in ("moved_in", "moved_out"):
            v = j.get(f"{k}_per_s")
            if v is None and before and after and k in after:
                v = (after[k] - before.get(k, 0)) / wall
            row[f"{k}_per_s"] = "" if v is None else v
        hw = j.get("hwcc_used_bytes")
        if hw is None and after:
            hw = after.get("hwcc_used")
        row["hwcc_used_bytes"] = "" if hw is None else int(hw)
        return row

    # -- plots -------------------------------------------------------------------------

    def plot(self, rows, panels, subtitle=None):
        png = os.path.join(self.out, f"{self.name}.png")
        gp = os.path.join(self.out, "plot.gp")
        with open(gp, "w") as f:
            f.write(gnuplot_script(self.title, panels, png, self.mode,
                                   subtitle or self.meta_line()))
        r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(png):
            raise ExpError(f"gnuplot failed on {gp}: {r.stderr.strip()}")
        return png

    def meta_line(self):
        h = self.base.hosts
        w = h[0]["workers"]
        return (f"{self.mode} mode, {self.duration:g} s/point, {self.runs} run(s); "
                f"{os.cpu_count()} CPUs, load avg {self.load[0]:.1f}-{self.load[1]:.1f}; "
                f"base {os.path.relpath(self.base.path, ROOT)} "
                f"({len(h)} hosts x {w} worker{'s' if w != 1 else ''})")


# ---- pods and poddb-bench, for every script ----------------------------------------------

def pod_tool(bindir, *args, check=True, verbose=False, env=None):
    """tools/pod ARGS with the programs of bindir (env: more variables for it and
    the servers it starts); ExpError when it fails and check."""
    cmd = [os.path.join(ROOT, "tools/pod"), *args, "--bin", bindir]
    r = subprocess.run(cmd, capture_output=not verbose, text=True,
                       env=dict(os.environ, **env) if env else None)
    if check and r.returncode != 0:
        out = "" if verbose else (r.stdout + r.stderr).strip()
        raise ExpError(f"tools/pod {' '.join(args)} failed (exit {r.returncode})"
                       + (f":\n{out}" if out else ""))
    return r


def last_json(stdout):
    """(line, dict) of the last line of poddb-bench --json's output; dict is None
    when that line is not JSON."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    try:
        return line, json.loads(line)
    except ValueError:
        return line, None


_podtool = None


def podtool():
    """tools/pod as a module: its Pod knows where a pod's run directory (pid
    files, server logs) is and which of its servers run."""
    global _podtool
    if _podtool is None:
        loader = importlib.machinery.SourceFileLoader("poddb_podtool",
                                                      os.path.join(ROOT, "tools/pod"))
        _podtool = importlib.util.module_from_spec(
            importlib.util.spec_from_loader(loader.name, loader))
        loader.exec_module(_podtool)
    return _podtool


class Pod:
    """A pod that is up (Pods.up): its servers, their threads, procedure calls."""

    def __init__(self, conf, bindir):
        self.conf, self.bin = conf, bindir
        self.paused = False

    def pids(self):
        """The servers' process ids, host 0 first."""
        tp = podtool().Pod(self.conf, self.bin)
        pids = []
        for h in tp.ids():
            s = tp.server(h)
            if s is None:
                raise ExpError(f"host {h} of {self.conf} is not running")
            pids.append(s[0])
        return pids

    def signal(self, sig):
        for pid in self.pids():
            os.kill(pid, sig)

    def pause(self):
        """Stop both servers (SIGSTOP) so that pods can take turns on the
        machine: a stopped pod takes no CPU (an idle one still wakes now and
        then) and keeps its data. Only between benchmark runs: nothing may wait
        on it."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def thread_ticks(self):
        """{"KIND#TID": ticks} for every thread of the pod's servers, KIND the
        thread's name without its trailing number (pod-worker, pod-ckpt, ...),
        ticks its user + system time (see kind_seconds)."""
        out = {}
        for pid in self.pids():
            for task in glob.glob(f"/proc/{pid}/task/*"):
                try:
                    with open(f"{task}/comm") as f:
                        kind = f.read().strip().rstrip("0123456789")
                    with open(f"{task}/stat") as f:
                        st = f.read().rpartition(")")[2].split()
                except OSError:
                    continue  # the thread ended
                out[f"{kind}#{os.path.basename(task)}"] = int(st[11]) + int(st[12])
        return out

    def call(self, h, *call):
        """poddb-cli's output of a procedure call on host h."""
        r = subprocess.run([os.path.join(self.bin, "poddb-cli"), "--conf", self.conf, "--host",
                            str(h), "call", *call], capture_output=True, text=True)
        if r.returncode != 0:
            raise ExpError(f"{' '.join(call)} on host {h}: {r.stderr.strip()}")
        return r.stdout


def kind_seconds(kind, before, after):
    """The CPU seconds the threads of kind took between two thread_ticks()."""
    ticks = sum(t - before.get(k, 0) for k, t in after.items() if k.startswith(kind + "#"))
    return ticks / os.sysconf("SC_CLK_TCK")


class Pods:
    """The private pods of a script: a scratch directory (WORK) for their
    configs, sockets and logs, regions named after the script and its process
    (or $PODDB_EXP_TAG), every pod brought down at the end (close, or the end
    of a with block), also on errors and signals. With keep, WORK is copied
    there first, but for the pods' durability logs (a few TPC-C runs leave
    gigabytes of segments and checkpoints)."""

    def __init__(self, name, bindir, keep=None):
        self.name, self.bin, self.keep = name, bindir, keep
        self.tag = f"{os.environ.get('PODDB_EXP_TAG') or 'poddb'}-{name}-{os.getpid()}"
        self.work = tempfile.mkdtemp(prefix=f"poddb-{name}.")
        self.up_pods = []

    def __enter__(self):
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _on_signal)
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def path(self, name):
        return os.path.join(self.work, name)

    def config(self, name, cfg):
        """Write WORK/name.yaml: cfg (a dict as in the YAML) with the region on
        /dev/shm and the sockets and logs in WORK filled in; returns its path."""
        cfg = dict(cfg)
        cfg["region"] = dict(path=f"/dev/shm/{self.tag}-{name}", kind="shm", **cfg["region"])
        hd = dict(socket=self.path(f"{name}-{{host}}.sock"),
                  log_dir=self.path(f"{name}-log-{{host}}"))
        hd.update(cfg.get("host_defaults", {}))
        cfg["host_defaults"] = hd
        conf = self.path(f"{name}.yaml")
        with open(conf, "w") as f:
            f.write("\n".join(yaml_block(cfg)) + "\n")
        return conf

    def pod2(self, name, loggers, ycsb_tuples, engine=None, host_defaults=None, tpcc=None):
        """The config of a 2-host pod, 1 worker per host on CPUs 0 and 1, a
        4 GiB region with 256 MiB of HWcc, 10 ms epochs, TPC-C with 2
        warehouses (tpcc: more workloads.tpcc keys), YCSB with ycsb_tuples and
        skew 0.7; engine and host_defaults: more keys of those sections."""
        return self.config(name, dict(
            region=dict(size="4GiB", hwcc_budget="256MiB"),
            host_defaults=dict(workers=1, loggers=loggers, **(host_defaults or {})),
            hosts=[dict(cpus="0"), dict(cpus="1")],
            workloads=dict(tpcc=dict(warehouses=2, **(tpcc or {})),
                           ycsb=dict(tuples=ycsb_tuples, theta=0.7)),
            engine=dict(epoch_ms=10, **(engine or {}))))

    def up(self, conf, env=None):
        """Start the pod of conf (its log directories emptied first; the servers
        get env in their environment); returns its Pod."""
        for d in glob.glob(conf[:-len(".yaml")] + "-log-*"):
            shutil.rmtree(d, ignore_errors=True)
        self.up_pods.append(conf)  # first: a signal during up still brings it down
        pod_tool(self.bin, "up", "--conf", conf, env=env)
        return Pod(conf, self.bin)

    def down(self, pod):
        """Stop a pod (resumed first if paused)."""
        pod.paused = False
        self._down(pod.conf)

    def _down(self, conf):
        try:  # SIGCONT first: a paused server cannot stop
            tp = podtool().Pod(conf, self.bin)
            for h in tp.ids():
                s = tp.server(h)
                if s:
                    os.kill(s[0], signal.SIGCONT)
        except Exception:  # noqa: BLE001 - whatever it is, still try tools/pod down
            pass
        pod_tool(self.bin, "down", "--conf", conf, check=False)
        if conf in self.up_pods:
            self.up_pods.remove(conf)

    def close(self):
        for conf in list(self.up_pods):
            self._down(conf)
        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            for e in os.listdir(self.work):
                if "-log-" in e:
                    continue
                src = self.path(e)
                if os.path.isdir(src):
                    shutil.copytree(src, os.path.join(self.keep, e), dirs_exist_ok=True)
                else:
                    shutil.copy(src, self.keep)
        shutil.rmtree(self.work, ignore_errors=True)
        # the regions, and the NIC model's schedules of the dm pods (named
        # after the pod, which ends with the tag's end: dm-protocols)
        for f in (glob.glob(f"/dev/shm/{self.tag}-*") +
                  glob.glob(f"/dev/shm/poddb-nic1-*{self.tag[-16:]}-*")):
            try:
                os.unlink(f)
            except OSError:
                pass


def bench_json(bindir, conf, args, out=None):
    """poddb-bench --conf conf --json ARGS; its JSON line (a dict). out: a file
    that gets the JSON line, and out.err its messages. ExpError when it fails,
    with the last lines of its messages."""
    r = subprocess.run([os.path.join(bindir, "poddb-bench"), "--conf", conf, "--json", *args],
                       capture_output=True, text=True)
    line, j = last_json(r.stdout)
    if out:
        with open(out, "w") as f:
            f.write(r.stdout)
        with open(out + ".err", "w") as f:
            f.write(r.stderr)
    if r.returncode != 0 or j is None:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise ExpError(f"poddb-bench {' '.join(args)} failed (exit {r.returncode})"
                       + (f":\n{tail}" if tail else ""))
    return j


# ---- results ------------------------------------------------------------------------------

def aggregate(per_run):
    """One row for a point: the median of each figure over its runs, min and max of
    the throughput, the worst check."""
    if len(per_run) == 1:
        return dict(per_run[0])
    out = dict(per_run[0])
    out["run"] = ""
    out["runs"] = len(per_run)
    for k in ("committed_per_s", "latency_mean_us", "latency_p50_us", "latency_p99_us",
              "conflicts_per_s", "errors_per_s", "remote_commits_per_s", "moved_in_per_s",
              "moved_out_per_s", "hwcc_used_bytes"):
        vals = [r[k] for r in per_run if r[k] != ""]
        out[k] = statistics.median(vals) if vals else ""
    tp = [r["committed_per_s"] for r in per_run if r["committed_per_s"] != ""]
    out["committed_min"] = min(tp) if tp else ""
    out["committed_max"] = max(tp) if tp else ""
    bad = [r["check"] for r in per_run if r["check"] != "passed"]
    out["check"] = bad[0] if bad else "passed"
    return out


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt(r.get(k, "")) for k in CSV_FIELDS})


def fmt(v):
    if isinstance(v, float):
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"
    return v


def git_rev():
    r = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


# ---- gnuplot ------------------------------------------------------------------------------

def default_panels(rows, xlabel, y="committed_per_s", ylabel="committed transactions/s",
                   logx=False):
    """One panel per distinct panel name, one curve per series, the throughput on y
    with the min-max range of the runs as error bars."""
    panels = []
    for name in dict.fromkeys(r["panel"] for r in rows):
        prs = [r for r in rows if r["panel"] == name]
        curves = [dict(title=s, rows=[r for r in prs if r["series"] == s], y=y,
                       err=y == "committed_per_s")
                  for s in dict.fromkeys(r["series"] for r in prs)]
        xl = xlabel.get(name, "") if isinstance(xlabel, dict) else xlabel
        panels.append(dict(title=name, xlabel=xl, ylabel=ylabel,
                           curves=curves, logx=logx))
    return panels


def gq(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def gnuplot_script(title, panels, png, mode, meta):
    n = len(panels)
    cols = min(n, 2)
    nrows = (n + cols - 1) // cols
    w, h = max(560 * cols, 800), 400 * nrows + 40  # wide enough for the subtitle
    out = [f"set terminal pngcairo size {w},{h} font 'sans,9' noenhanced",
           f"set output {gq(png)}",
           "set datafile separator ','",
           "set grid ytics lc rgb '#dddddd'",
           "set key top right box opaque",
           "set yrange [0:*]",
           "set offsets graph 0.05, graph 0.05, graph 0.10, 0",
           "set linetype 1 lc rgb '#1b6ca8' lw 2 pt 7 ps 1",
           "set linetype 2 lc rgb '#d1495b' lw 2 pt 5 ps 1",
           "set linetype 3 lc rgb '#2e933c' lw 2 pt 9 ps 1.2",
           "set linetype 4 lc rgb '#edae49' lw 2 pt 13 ps 1.2",
           "set linetype 5 lc rgb '#6a4c93' lw 2 pt 11 ps 1.2"]
    blocks = []
    for pi, pn in enumerate(panels):
        for ci, c in enumerate(pn["curves"]):
            lines = []
            for r in c["rows"]:
                yv = r.get(c["y"], "")
                if yv == "" or yv is None:
                    continue
                lo = r.get("committed_min", yv) if c.get("err") else yv
                hi = r.get("committed_max", yv) if c.get("err") else yv
                lines.append(f"{r['x']},{yv},{lo},{hi},{gq(r['x_label'])}")
            blocks.append((f"$p{pi}c{ci}", lines))
    for name, lines in blocks:
        out.append(f"{name} << EOD")
        out.extend(lines or ["nan,nan,nan,nan,\"\""])
        out.append("EOD")
    mt = f"{title}\\n{meta}"
    out.append(f"set multiplot layout {nrows},{cols} title \"{mt}\"")
    for pi, pn in enumerate(panels):
        out.append(f"set title {gq(pn['title'])}")
        out.append(f"set xlabel {gq(pn.get('xlabel', ''))}")
        out.append(f"set ylabel {gq(pn.get('ylabel', ''))}")
        out.append("set logscale x" if pn.get("logx") else "unset logscale x")
        out.append("set logscale y; set yrange [*:*]" if pn.get("logy")
                   else "unset logscale y; set yrange [0:*]")
        plots = []
        for ci, c in enumerate(pn["curves"]):
            style = "yerrorlines" if c.get("err") else "linespoints"
            using = "1:2:3:4:xtic(5)" if c.get("err") else "1:2:xtic(5)"
            plots.append(f"$p{pi}c{ci} using {using} with {style} lt {ci + 1} "
                         f"title {gq(c['title'])}")
        out.append("plot " + ", \\\n     ".join(plots))
    out.append("unset multiplot")
    return "\n".join(out) + "\n"


# ---- entry point ----------------------------------------------------------------------

def read_csv(path):
    """The rows of a results.csv, numbers as numbers."""
    text = ("study", "panel", "series", "x_label", "workload", "mode", "knobs", "settings",
            "check")
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k, v in r.items():
                if k not in text and v != "":
                    r[k] = float(v)
            rows.append(r)
    return rows


def replot(exp, b):
    d = os.path.abspath(exp.a.replot)
    rows = read_csv(os.path.join(d, "results.csv"))
    if not rows:
        raise ExpError(f"{d}/results.csv has no rows")
    sub = None
    try:
        with open(os.path.join(d, "meta.txt")) as f:
            sub = next((l[len("plot: "):].strip() for l in f if l.startswith("plot: ")), None)
    except OSError:
        pass
    exp.out = d
    panels = b.get("panels")
    png = exp.plot(rows, panels(rows) if panels else default_panels(rows, b["xlabel"]),
                   sub or f"{exp.mode} mode")
    say(f"== plot: {png}")
    return 0


def exit_status(fn, *args):
    """fn(*args), its return value the exit status, with stdout flushed here:
    when the reader of stdout goes away (`STUDY | head`) the program ends
    quietly with 141, the status of a program killed by SIGPIPE, instead of
    a traceback (a study's pods are brought down on the way out, as on any
    error)."""
    try:
        try:
            rc = fn(*args)
        except SystemExit as e:  # argparse's --help and usage errors
            rc = e.code
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        try:  # nothing more may reach the closed pipe, not even at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return 141


def main(exp, build_points, argv=None):
    """Parse options, build the points and run them. build_points(exp) returns a
    dict: points, xlabel, and optionally panels (rows -> panel list) and notes.
    Exit status 0, 1 (a failure or a failed check), 2 (bad usage), 141 (stdout
    closed)."""
    return exit_status(_main, exp, build_points, argv)


def _main(exp, build_points, argv):
    try:
        exp.parse(argv)
        b = build_points(exp)
        if exp.a.replot:
            return replot(exp, b)
        return exp.run(b["points"], b["xlabel"], b.get("panels"), b.get("notes", ()))
    except ExpError as e:
        print(f"{exp.name}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def int_list(text, what):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ExpError(f"{what}: want a comma-separated list of whole numbers, got {text!r}")


# ---- building points ----------------------------------------------------------------------

def tpcc_shares(text, default):
    """'0/0,10/15' -> ['0/0', '10/15'], checked."""
    shares = text.split(",") if text else list(default)
    for s in shares:
        no, _, pay = s.partition("/")
        if not (no.isdigit() and pay.isdigit() and int(no) <= 100 and int(pay) <= 100):
            raise ExpError(f"TPC-C remote share {s!r}: want NO/PAY like 10/15 (percentages)")
    return shares


def pct_list(text, default, what):
    vals = int_list(text, what) if text else list(default)
    for v in vals:
        if not 0 <= v <= 100:
            raise ExpError(f"{what}: {v} is not a percentage")
    return vals


def tpcc_point(panel, series, share, settings="", **kw):
    """TPC-C at remote share NO/PAY; x is the NewOrder share."""
    no, _, pay = share.partition("/")
    return Point(panel, series, int(no), share, "tpcc",
                 knobs=dict(remote_new_order_pct=no, remote_payment_pct=pay),
                 settings=(settings + " " if settings else "") + f"remote {share}", **kw)


def ycsb_point(panel, series, mp, read_pct, settings="", x=None, x_label=None, theta=None,
               **kw):
    """YCSB with read_pct% reads and mp% multi-partition transactions; x is mp."""
    knobs = dict(read_pct=read_pct, multi_partition_pct=mp)
    if theta is not None:
        knobs["theta"] = theta
    return Point(panel, series, mp if x is None else x, f"{mp}%" if x_label is None else x_label,
                 "ycsb", knobs=knobs,
                 settings=(settings + " " if settings else "") + f"read {read_pct}% mp {mp}%",
                 **kw)


def size_list(text, default, what):
    vals = text.split(",") if text else list(default)
    for v in vals:
        parse_size(v)
    return vals
