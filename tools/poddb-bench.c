/* poddb-bench: run a benchmark on a running pod and measure it
 * (docs/benchmarks.md has the figures and the exact commands).
 *
 * TPC-C, YCSB and SmallBank come from the config's `workloads:` section,
 * which every server loaded at start. The servers load their own partitions
 * on request (bench.load, with a progress bar here); internal mode has each
 * server's workers generate and run the transactions themselves for the
 * duration (bench.run; no socket in the path: how the papers measure);
 * client mode generates them here and drives every host over its socket with
 * pipelined connections. --check runs the workload's consistency checker on
 * every host afterwards. The `kv` workload is single-key kv.get/kv.put calls
 * on a config-declared kv table (client mode only). */
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/client_mode.h"
#include "bench/control.h"
#include "bench/driver.h"
#include "bench/knobs.h"
#include "bench/results.h"
#include "conf/config.h"
#include "poddb/client.h"
#include "util/clock.h"
#include "util/hist.h"
#include "util/json.h"

static const char usage[] =
    "usage: poddb-bench --conf FILE --workload tpcc|ycsb|smallbank [knobs]\n"
    "                   --duration SECONDS [--warmup SECONDS]\n"
    "                   [--mode internal|client] [--check] [--json]\n"
    "       poddb-bench --conf FILE --workload kv [kv options]\n"
    "\n"
    "Runs a benchmark on a running pod (start one poddb-server per host first) and\n"
    "prints committed transactions per second, aborts per second by cause,\n"
    "latency percentiles, data movement and HWcc use, and the configuration;\n"
    "--json prints the same as one JSON line. tpcc, ycsb and smallbank must be in\n"
    "the config's workloads: section (docs/configuration.md). Each host loads its\n"
    "own partitions when they are not loaded yet (with a progress bar).\n"
    "\n"
    "Options:\n"
    "  -c, --conf FILE          the pod's config (sockets, workloads, kv tables)\n"
    "  -w, --workload NAME      tpcc, ycsb, smallbank, or kv\n"
    "  -m, --mode MODE          internal (default for tpcc/ycsb/smallbank): every\n"
    "                           server's workers generate and run the transactions\n"
    "                           themselves, no socket in the path; client (kv: the\n"
    "                           only mode): this program generates them and sends\n"
    "                           them to every host over its socket, pipelined\n"
    "  -d, --duration S         measured seconds (default 10)\n"
    "      --warmup S           seconds run before measuring (default 1)\n"
    "      --check              after the run, check the workload's consistency on\n"
    "                           every host: TPC-C conditions 1-4; YCSB rows and\n"
    "                           column counters = committed read-modify-writes;\n"
    "                           SmallBank audit total = initial total + money\n"
    "                           created by committed calls. Exit status 1 if not\n"
    "      --no-load            do not load: fail if a host is not loaded (kv: the\n"
    "                           keys are there already)\n"
    "  -T, --timeout S          wait at most S seconds for any reply (default 120)\n"
    "  -j, --json               one JSON line on stdout instead of the table\n"
    "  -q, --quiet              no progress on stderr\n"
    "  -h, --help               this text\n"
    "\n"
    "Run knobs (this run only; the config's values are the defaults and the data\n"
    "does not change):\n"
    "      --remote NO/PAY      tpcc: % of NewOrders with an item from another\n"
    "                           warehouse / % of Payments of another warehouse's\n"
    "                           customer (config default 10/15; the papers: 0/0 to\n"
    "                           60/90)\n"
    "      --remote-new-order P, --remote-payment P   the same one at a time\n"
    "      --read-pct P         ycsb: % reads among the 10 operations (50 = 50/50,\n"
    "                           95 = 95/5)\n"
    "      --theta X            ycsb, smallbank: Zipfian skew in [0, 1) (ycsb 0.7 or\n"
    "                           0.99 as in Tigon; smallbank 0 = the hot set)\n"
    "      --multi-partition P  ycsb: % of transactions with half of their\n"
    "                           operations in one other partition\n"
    "      --hot-pct P          smallbank: % of account picks from the hot set\n"
    "      --remote-pct P       smallbank: % of Amalgamate/SendPayment with the\n"
    "                           second account in another partition\n"
    "      --knob KEY=VALUE     any knob by its config key (repeatable)\n"
    "\n"
    "Client mode (and kv):\n"
    "  -C, --connections N      connections in all, dealt round robin over the\n"
    "                           hosts (default: 4 per host; kv: 1)\n"
    "  -D, --depth N            calls in flight per connection (default 8; kv: 1)\n"
    "\n"
    "kv workload:\n"
    "  -H, --host N             drive host N only (default: every host)\n"
    "      --table NAME         kv table (default: the config's first)\n"
    "      --keys N             keys loaded and used (default 100000)\n"
    "      --value-size B       value bytes (default 100)\n"
    "      --read-ratio R       share of kv.get among calls, 0..1 (default 1)\n"
    "      --early              ask for replies before durability (not durable)\n"
    "\n"
    "With remote shares above 0 transactions reach other hosts' partitions through\n"
    "the CXL region: 'remote calls' counts them, 'moved/s' the tuples moved into\n"
    "and out of CXL memory per second, 'reply waits' the workers' waits for other\n"
    "hosts' replies (per second, mean, share over 128 us), 'HWcc use' the hosts'\n"
    "HWcc quotas in use.\n"
    "\n"
    "Exit status: 0 done; 1 the run failed, a host did not answer, or --check\n"
    "found an inconsistency; 2 bad usage or config.\n";

#define MAX_KNOB_ARGS 32

struct opts {
    const char *conf_path, *workload, *mode, *table;
    int host, connections, depth, value_size;
    double duration, warmup, read_ratio, timeout;
    uint64_t keys;
    bool json, quiet, load, early, check;
    int nknobs;
    const char *knob_opt[MAX_KNOB_ARGS]; /* the option that set it, for messages */
    char knob_key[MAX_KNOB_ARGS][48], knob_val[MAX_KNOB_ARGS][48];
};

/* ---- kv: single-key calls on a kv table (client mode only) --------------------- */

struct conn_thread {
    pthread_t th;
    const struct opts *o;
    const char *address;
    int id;
    uint64_t rng;
    /* counters read by the progress printer (atomic) */
    uint64_t done, errors;
    struct hist lat;         /* measured window only */
    char err[256];
    bool failed;
};

static volatile int g_phase; /* 0 warmup, 1 measure, 2 stop */

static void key_of(uint64_t i, char *buf) { snprintf(buf, 24, "key%012" PRIu64, i); }

static uint64_t send_one(struct conn_thread *t, pod_client *c, char *value)
{
    char key[24];
    key_of(pod_rand(&t->rng) % t->o->keys, key);
    pod_value a[3] = {pod_v_str(t->o->table), pod_v_str(key),
                      pod_v_bytes(value, (uint32_t)t->o->value_size)};
    bool read = (double)(pod_rand(&t->rng) % 1000000) / 1e6 < t->o->read_ratio;
    return pod_client_send(c, read ? "kv.get" : "kv.put", a, read ? 2 : 3,
                           t->o->early ? POD_CALL_EARLY_REPLY : 0);
}

/* One connection keeping `depth` calls in flight. Send times are kept in a
 * ring indexed by request id (ids are consecutive per connection). */
static void *kv_conn_main(void *arg)
{
    struct conn_thread *t = arg;
    const struct opts *o = t->o;
    pod_client *c = pod_client_connect(t->address, t->err, sizeof t->err);
    if (!c) {
        t->failed = true;
        return NULL;
    }
    char *value = malloc((size_t)o->value_size);
    size_t ring = 1;
    while (ring < (size_t)o->depth * 2) ring <<= 1;
    uint64_t *sent_at = calloc(ring, sizeof *sent_at);
    memset(value, 'v', (size_t)o->value_size);
    int unflushed = 0, flush_every = o->depth >= 4 ? o->depth / 4 : 1;
    for (int i = 0; i < o->depth; i++) {
        uint64_t id = send_one(t, c, value);
        sent_at[id & (ring - 1)] = pod_mono_ns();
    }
    pod_client_flush(c);
    while (__atomic_load_n(&g_phase, __ATOMIC_RELAXED) < 2) {
        pod_reply *r = pod_client_recv(c);
        if (!r) {
            snprintf(t->err, sizeof t->err, "%s", pod_client_error(c));
            t->failed = true;
            break;
        }
        uint64_t lat = pod_mono_ns() - sent_at[pod_reply_id(r) & (ring - 1)];
        if (pod_reply_status(r) != POD_OK) __atomic_fetch_add(&t->errors, 1, __ATOMIC_RELAXED);
        pod_reply_free(r);
        if (__atomic_load_n(&g_phase, __ATOMIC_RELAXED) == 1) {
            hist_add(&t->lat, lat);
            __atomic_fetch_add(&t->done, 1, __ATOMIC_RELAXED);
        }
        uint64_t id = send_one(t, c, value);
        sent_at[id & (ring - 1)] = pod_mono_ns();
        /* Flush in batches, but never leave nothing on the wire to wait for. */
        if (++unflushed >= flush_every || pod_client_pending(c) <= (size_t)unflushed) {
            pod_client_flush(c);
            unflushed = 0;
        }
    }
    free(sent_at);
    free(value);
    pod_client_close(c);
    return NULL;
}

static int load_keys(const struct opts *o, const char *address)
{
    char err[256], key[24];
    pod_client *c = pod_client_connect(address, err, sizeof err);
    if (!c) {
        fprintf(stderr, "poddb-bench: %s\n", err);
        return -1;
    }
    char *value = malloc((size_t)o->value_size);
    memset(value, 'v', (size_t)o->value_size);
    uint64_t t0 = pod_mono_ns(), last = t0;
    int rc = 0;
    for (uint64_t i = 0; i < o->keys && !rc; i++) {
        key_of(i, key);
        pod_value a[3] = {pod_v_str(o->table), pod_v_str(key),
                          pod_v_bytes(value, (uint32_t)o->value_size)};
        pod_client_send(c, "kv.put", a, 3, POD_CALL_EARLY_REPLY);
        if (pod_client_pending(c) >= 256 || i + 1 == o->keys) {
            pod_client_flush(c);
            while (pod_client_pending(c) > (i + 1 == o->keys ? 0 : 128)) {
                pod_reply *r = pod_client_recv(c);
                if (!r || pod_reply_status(r) != POD_OK) {
                    fprintf(stderr, "poddb-bench: loading: %s\n",
                            r ? pod_reply_message(r) : pod_client_error(c));
                    rc = -1;
                }
                pod_reply_free(r);
                if (rc) break;
            }
        }
        uint64_t now = pod_mono_ns();
        if (!o->quiet && (now - last > 500000000ull || i + 1 == o->keys)) {
            fprintf(stderr, "\rloading %s on %s: %" PRIu64 "/%" PRIu64 " keys (%.0f%%)", o->table,
                    address, i + 1, o->keys, 100.0 * (double)(i + 1) / (double)o->keys);
            last = now;
        }
    }
    if (!o->quiet) fprintf(stderr, "\n");
    free(value);
    pod_client_close(c);
    return rc;
}

static void print_kv_result(const struct opts *o, const struct pod_config *conf, double secs,
                         uint64_t done, uint64_t errors, const struct hist *h)
{
    double rate = (double)done / secs;
    if (o->json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_obj_begin(&w);
        json_kv_str(&w, "workload", o->workload);
        json_kv_str(&w, "mode", o->mode);
        json_kv_str(&w, "table", o->table);
        json_kv_i64(&w, "hosts", o->host >= 0 ? 1 : conf->nhosts);
        json_kv_i64(&w, "connections", o->connections);
        json_kv_i64(&w, "depth", o->depth);
        json_kv_u64(&w, "keys", o->keys);
        json_kv_i64(&w, "value_size", o->value_size);
        json_kv_f64(&w, "read_ratio", o->read_ratio);
        json_kv_bool(&w, "early_reply", o->early);
        json_kv_f64(&w, "duration_s", secs);
        json_kv_u64(&w, "calls", done);
        json_kv_u64(&w, "errors", errors);
        json_kv_f64(&w, "calls_per_s", rate);
        json_kv_f64(&w, "latency_mean_us", hist_mean(h) / 1e3);
        json_kv_f64(&w, "latency_p50_us", (double)hist_quantile(h, 0.50) / 1e3);
        json_kv_f64(&w, "latency_p90_us", (double)hist_quantile(h, 0.90) / 1e3);
        json_kv_f64(&w, "latency_p99_us", (double)hist_quantile(h, 0.99) / 1e3);
        json_kv_f64(&w, "latency_max_us", (double)h->max / 1e3);
        json_kv_str(&w, "config", conf->source);
        json_obj_end(&w);
        fputc('\n', stdout);
        return;
    }
    printf("workload      kv on table %s: %.0f%% kv.get, %" PRIu64 " keys, %d-byte values\n",
           o->table, o->read_ratio * 100, o->keys, o->value_size);
    printf("mode          client: %d connection%s x %d in flight%s, %s\n", o->connections,
           o->connections == 1 ? "" : "s", o->depth, o->early ? " (early replies)" : "",
           o->host >= 0 ? "one host" : "all hosts");
    printf("config        %s (%d hosts)\n", conf->source, conf->nhosts);
    printf("measured      %.1f s after %.1f s warmup\n", secs, o->warmup);
    printf("calls/s       %.0f\n", rate);
    printf("errors        %" PRIu64 "\n", errors);
    printf("latency (us)  mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", hist_mean(h) / 1e3,
           (double)hist_quantile(h, 0.5) / 1e3, (double)hist_quantile(h, 0.9) / 1e3,
           (double)hist_quantile(h, 0.99) / 1e3, (double)h->max / 1e3);
}

static int run_kv(struct opts *o, const struct pod_config *conf)
{
    if (o->host >= conf->nhosts) {
        fprintf(stderr, "poddb-bench: --host %d: the pod has hosts 0..%d\n", o->host, conf->nhosts - 1);
        return 2;
    }
    if (!o->table) {
        if (!conf->ntables) {
            fprintf(stderr, "poddb-bench: %s declares no kv table (add one under tables:)\n",
                    o->conf_path);
            return 2;
        }
        o->table = conf->tables[0].name;
    }
    for (int i = 0; i < conf->ntables; i++)
        if (!strcmp(conf->tables[i].name, o->table) &&
            (uint32_t)o->value_size > conf->tables[i].value_size) {
            fprintf(stderr, "poddb-bench: --value-size %d exceeds table %s's value_size %u\n",
                    o->value_size, o->table, conf->tables[i].value_size);
            return 2;
        }
    /* Until cross-host transactions exist every host serves its own data: load
     * each host that will be driven. */
    for (int h = 0; o->load && h < conf->nhosts; h++)
        if ((o->host < 0 || o->host == h) && load_keys(o, conf->hosts[h].socket_path)) return 1;

    struct conn_thread *t = calloc((size_t)o->connections, sizeof *t);
    for (int i = 0; i < o->connections; i++) {
        t[i].o = o;
        t[i].id = i;
        t[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        int h = o->host >= 0 ? o->host : i % conf->nhosts;
        t[i].address = conf->hosts[h].socket_path;
        hist_init(&t[i].lat);
        pthread_create(&t[i].th, NULL, kv_conn_main, &t[i]);
    }
    struct timespec tick = {0, 100 * 1000 * 1000};
    for (double w = 0; w < o->warmup; w += 0.1) nanosleep(&tick, NULL);
    __atomic_store_n(&g_phase, 1, __ATOMIC_RELAXED);
    uint64_t t0 = pod_mono_ns(), last_print = t0, last_done = 0;
    bool tty = isatty(STDERR_FILENO);
    for (;;) {
        nanosleep(&tick, NULL);
        uint64_t now = pod_mono_ns(), done = 0;
        bool failed = false;
        for (int i = 0; i < o->connections; i++) {
            done += __atomic_load_n(&t[i].done, __ATOMIC_RELAXED);
            failed |= t[i].failed;
        }
        if (failed) break;
        if (!o->quiet && now - last_print >= 1000000000ull) {
            /* On a terminal the line is rewritten; in a log, one line a second. */
            fprintf(stderr, "%s%5.1f s  %10.0f calls/s%s", tty ? "\r" : "",
                    (double)(now - t0) / 1e9,
                    (double)(done - last_done) * 1e9 / (double)(now - last_print), tty ? "" : "\n");
            last_print = now;
            last_done = done;
        }
        if ((double)(now - t0) / 1e9 >= o->duration) break;
    }
    double secs = (double)(pod_mono_ns() - t0) / 1e9;
    __atomic_store_n(&g_phase, 2, __ATOMIC_RELAXED);
    if (!o->quiet && tty) fprintf(stderr, "\n");
    struct hist all;
    hist_init(&all);
    uint64_t done = 0, errors = 0;
    int rc = 0;
    for (int i = 0; i < o->connections; i++) {
        pthread_join(t[i].th, NULL);
        if (t[i].failed) {
            fprintf(stderr, "poddb-bench: connection %d: %s\n", i, t[i].err);
            rc = 1;
        }
        hist_merge(&all, &t[i].lat);
        done += t[i].done;
        errors += t[i].errors;
    }
    if (!rc) print_kv_result(o, conf, secs, done, errors, &all);
    free(t);
    return rc;
}
/* ---- workloads: progress on stderr ------------------------------------------------- */

struct progress {
    const struct opts *o;
    bool tty;
    struct bench_pod *pod;
    enum bench_wl wl;
    uint64_t last_ns, last_done;
    double last_elapsed;
    bool measuring;
    /* statistics at the start of the measured window (taken from the progress calls) */
    bool have_start;
    struct bench_sysstats start;
    uint64_t start_ns;
    char failed[512];
};

static void progress_line(struct progress *p, const char *text)
{
    if (p->o->quiet) return;
    fprintf(stderr, "%s%s%s", p->tty ? "\r\033[K" : "", text, p->tty ? "" : "\n");
}

static void progress_done(struct progress *p)
{
    if (!p->o->quiet && p->tty) fputc('\n', stderr);
}

static void snapshot_start(struct progress *p)
{
    if (p->have_start) return;
    if (bench_pod_sysstats(p->pod, p->wl, &p->start))
        snprintf(p->failed, sizeof p->failed, "%s", p->pod->err);
    p->start_ns = pod_mono_ns();
    p->have_start = true;
}

/* Loading and checking: a bar over the rows (or partitions) of every host. */
static void job_progress(void *arg, const struct bench_status *st, int nhosts)
{
    struct progress *p = arg;
    uint64_t now = pod_mono_ns();
    uint64_t done = 0, total = 0;
    bool running = false;
    for (int h = 0; h < nhosts; h++) {
        if (!strcmp(st[h].job, "load")) {
            done += st[h].wl[p->wl].rows;
            total += st[h].wl[p->wl].total;
        } else {
            done += st[h].done;
            total += st[h].total;
        }
        running |= !strcmp(st[h].state, "running");
    }
    /* on a terminal 4 times a second, in a log every 5 s and at the end */
    if (running && now - p->last_ns < (p->tty ? 250000000ull : 5000000000ull)) return;
    p->last_ns = now;
    double f = total ? (double)done / (double)total : 1.0;
    char bar[41], line[256];
    int fill = (int)(f * 40);
    for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
    bar[40] = 0;
    snprintf(line, sizeof line, "%s %s [%s] %3.0f%%  %" PRIu64 "/%" PRIu64 " %s",
             !strcmp(st[0].job, "load") ? "loading" : "checking", bench_wl_name(p->wl), bar,
             100 * f, done, total, !strcmp(st[0].job, "load") ? "rows" : "partitions");
    progress_line(p, line);
}

/* Internal mode: the commits of every host once a second. */
static void run_progress(void *arg, const struct bench_status *st, int nhosts)
{
    struct progress *p = arg;
    uint64_t now = pod_mono_ns(), done = 0;
    bool measuring = true;
    double elapsed = 0;
    for (int h = 0; h < nhosts; h++) {
        done += st[h].done;
        measuring &= !strcmp(st[h].phase, "measure");
        if (st[h].elapsed_s > elapsed) elapsed = st[h].elapsed_s;
    }
    if (measuring) snapshot_start(p);
    if (!measuring || !p->measuring) {
        if (measuring) {
            p->measuring = true;
            p->last_ns = now;
            p->last_done = done;
            return;
        }
        char line[96];
        snprintf(line, sizeof line, "%5.1f s  warmup", elapsed);
        if (now - p->last_ns >= 1000000000ull) {
            progress_line(p, line);
            p->last_ns = now;
        }
        return;
    }
    if (now - p->last_ns < 1000000000ull) return;
    char line[128];
    snprintf(line, sizeof line, "%5.1f s  %10.0f committed/s", elapsed,
             (double)(done - p->last_done) * 1e9 / (double)(now - p->last_ns));
    progress_line(p, line);
    p->last_ns = now;
    p->last_done = done;
}

/* Client mode: called every 100 ms. */
static void client_progress(void *arg, double elapsed, bool measuring, uint64_t done)
{
    struct progress *p = arg;
    uint64_t now = pod_mono_ns();
    if (measuring && !p->measuring) {
        snapshot_start(p);
        p->measuring = true;
        p->last_ns = now;
        p->last_done = done;
        return;
    }
    if (now - p->last_ns < 1000000000ull) return;
    char line[128];
    if (!measuring) snprintf(line, sizeof line, "%5.1f s  warmup", elapsed);
    else
        snprintf(line, sizeof line, "%5.1f s  %10.0f committed/s", elapsed,
                 (double)(done - p->last_done) * 1e9 / (double)(now - p->last_ns));
    progress_line(p, line);
    p->last_ns = now;
    p->last_done = done;
}

/* ---- workloads: the outcome ---------------------------------------------------------- */

struct outcome {
    const struct opts *o;
    const struct pod_config *conf;
    enum bench_wl wl;
    bool internal;
    char knobs[256];
    struct bench_run_result r;
    /* aborts: retried conflicts by cause and give-ups, in the measured window */
    uint64_t conflicts[POD_CAUSE_COUNT], gave_up;
    /* pod statistics (sys.stats), per second over the window; known only when every host has them */
    bool moved_known, hwcc_known, waits_known;
    double moved_in_s, moved_out_s;
    /* replies waited for from other hosts in the window: per second, mean
     * wait, share of waits over 128 us (all hosts; docs/pod.md) */
    double waits_s, wait_us_mean, waits_long_share;
    int64_t hwcc_used, hwcc_quota;
    /* the compute nodes' record stores (mode: dm), per transaction committed in
     * the window: READ, WRITE, CAS, FAA, round trips */
    bool store_known;
    double store_per_txn[5];
    /* messages to other compute nodes per committed transaction (lotus) */
    bool messages_known;
    double messages_per_txn;
    /* --check */
    const char *check;        /* "passed", "FAILED", "not run" */
    char check_text[4096];
};

/* k: v, or null when the pod did not report it (a pod of one host). */
static void json_kv_known(struct json_writer *w, const char *k, bool known, double v)
{
    json_key(w, k);
    if (known) json_f64(w, v);
    else json_null(w);
}

static double per_s(const struct outcome *x, uint64_t n)
{
    return x->r.measured_s > 0 ? (double)n / x->r.measured_s : 0;
}

static int total_workers(const struct pod_config *c)
{
    int n = 0;
    for (int h = 0; h < c->nhosts; h++) n += c->hosts[h].workers;
    return n;
}

static void describe_pod(const struct pod_config *c, char *buf, size_t n)
{
    bool same = true;
    for (int h = 1; h < c->nhosts; h++) same &= c->hosts[h].workers == c->hosts[0].workers;
    if (same)
        snprintf(buf, n, "%d host%s x %d worker%s", c->nhosts, c->nhosts == 1 ? "" : "s",
                 c->hosts[0].workers, c->hosts[0].workers == 1 ? "" : "s");
    else
        snprintf(buf, n, "%d hosts, %d workers in all", c->nhosts, total_workers(c));
}

/* mode: dm with dm.nic_model on: the fabric's costs, and so every figure of
 * the run, are modelled (docs/dm.md, "The NIC model"). */
static bool nic_modelled(const struct pod_config *c)
{
    return c->mode == POD_MODE_DM && c->dm.nic_model.enabled;
}

static void print_table(const struct outcome *x)
{
    const struct opts *o = x->o;
    const struct bench_run_result *r = &x->r;
    const struct bench_tally *m = &r->measured;
    char pod[96];
    describe_pod(x->conf, pod, sizeof pod);
    uint64_t commits = bench_tally_sum(m->commits), calls = bench_tally_sum(m->calls);
    uint64_t ua = bench_tally_sum(m->user_aborts), er = bench_tally_sum(m->errors);
    printf("workload      %s  (%s)\n", bench_wl_name(x->wl), x->knobs);
    printf("pod           %s, config %s\n", pod, x->conf->source);
    const char *modelled = nic_modelled(x->conf) ? "  (modelled)" : "";
    if (*modelled)
        printf("NIC model     on (modelled: rtt %g us; per memory node CAS/FAA %g Mops/s, "
               "READ/WRITE %g Mops/s, %g Gb/s): throughput and latency below are modelled\n",
               x->conf->dm.nic_model.rtt_us, x->conf->dm.nic_model.atomic_mops,
               x->conf->dm.nic_model.rw_mops, x->conf->dm.nic_model.gbps);
    if (x->internal)
        printf("mode          internal: the servers' workers generate the transactions (%d "
               "terminal%s)\n", r->terminals, r->terminals == 1 ? "" : "s");
    else
        printf("mode          client: %d connection%s x %d in flight over the sockets\n",
               o->connections, o->connections == 1 ? "" : "s", o->depth);
    printf("measured      %.1f s after %.1f s warmup; %" PRIu64 " calls\n", r->measured_s,
           o->warmup, calls);
    printf("committed/s   %.0f%s\n", per_s(x, commits), modelled);
    printf("aborts/s      conflicts (retried):");
    for (int c = 0; c < POD_CAUSE_COUNT; c++)
        printf("%s%s %.1f", c == 0 ? " " : c == 4 ? "\n                " : "  ",
               pod_abort_cause_name((enum pod_abort_cause)c), per_s(x, x->conflicts[c]));
    printf("\n");
    if (x->wl == BENCH_TPCC)
        printf("              rolled back: spec 1%% NewOrder %.1f  other user aborts %.1f;  "
               "errors %.1f (gave up %.1f)\n", per_s(x, m->rollbacks), per_s(x, ua - m->rollbacks),
               per_s(x, er), per_s(x, x->gave_up));
    else
        printf("              rolled back: user aborts %.1f;  errors %.1f (gave up %.1f)\n",
               per_s(x, ua), per_s(x, er), per_s(x, x->gave_up));
    printf("latency (us)  mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f%s\n",
           hist_mean(&r->lat) / 1e3, (double)hist_quantile(&r->lat, 0.5) / 1e3,
           (double)hist_quantile(&r->lat, 0.9) / 1e3, (double)hist_quantile(&r->lat, 0.99) / 1e3,
           r->lat.n ? (double)r->lat.max / 1e3 : 0.0, modelled);
    printf("remote calls  %" PRIu64 " (%" PRIu64 " committed)\n", m->remote_calls, m->remote_commits);
    /* sys.stats has no pod rows on a pod of one host (nothing moves there),
     * nor on compute nodes (mode: dm: nothing moves, no CXL memory). */
    const char *no_pod = x->conf->mode == POD_MODE_DM ? "mode dm: records stay on the memory node"
                                                      : "one-host pod";
    if (x->moved_known)
        printf("moved/s       in %.1f  out %.1f tuples (into / out of CXL memory, all hosts)\n",
               x->moved_in_s, x->moved_out_s);
    else
        printf("moved/s       in n/a  out n/a (a host reports no pod counters: %s)\n", no_pod);
    if (x->waits_known)
        printf("reply waits   %.0f/s, mean %.1f us, %.1f%% over 128 us (for other hosts' "
               "replies, all hosts)\n",
               x->waits_s, x->wait_us_mean, 100.0 * x->waits_long_share);
    else
        printf("reply waits   n/a (a host reports no pod counters: %s)\n", no_pod);
    if (x->hwcc_known)
        printf("HWcc use      %.1f MiB of %.1f MiB (%.1f%%) at the end, all hosts' quotas\n",
               (double)x->hwcc_used / 1048576.0, (double)x->hwcc_quota / 1048576.0,
               x->hwcc_quota ? 100.0 * (double)x->hwcc_used / (double)x->hwcc_quota : 0.0);
    else
        printf("HWcc use      n/a (a host reports no pod counters: %s)\n", no_pod);
    if (x->store_known)
        printf("fabric ops    per committed txn: READ %.1f  WRITE %.1f  CAS %.1f  FAA %.1f;  "
               "round trips %.1f (all compute nodes, aborted attempts included)\n",
               x->store_per_txn[0], x->store_per_txn[1], x->store_per_txn[2], x->store_per_txn[3],
               x->store_per_txn[4]);
    if (x->messages_known)
        printf("messages      %.1f per committed txn to other compute nodes (lock requests and "
               "releases)\n", x->messages_per_txn);
    printf("per type      %-28s %12s %10s %10s\n", "", "committed/s", "aborts/s", "errors/s");
    for (int t = 0; t < bench_ntypes(x->wl); t++)
        printf("              %-28s %12.0f %10.1f %10.1f\n", bench_type_name(x->wl, t),
               per_s(x, m->commits[t]), per_s(x, m->user_aborts[t]), per_s(x, m->errors[t]));
    printf("per second   ");
    for (uint32_t i = 0; i < r->nsec && i < 20; i++) printf(" %" PRIu64, r->per_sec[i]);
    printf("%s\n", r->nsec > 20 ? " ..." : "");
    printf("check         %s\n", x->check);
    if (x->check_text[0]) fputs(x->check_text, stdout);
    if (er) printf("first error   %s\n", r->first_error);
}

static void json_counts(struct json_writer *w, const struct outcome *x, const uint64_t *v)
{
    json_obj_begin(w);
    for (int t = 0; t < bench_ntypes(x->wl); t++) json_kv_u64(w, bench_type_name(x->wl, t), v[t]);
    json_obj_end(w);
}

static void print_json(const struct outcome *x)
{
    const struct opts *o = x->o;
    const struct bench_run_result *r = &x->r;
    const struct bench_tally *m = &r->measured;
    uint64_t commits = bench_tally_sum(m->commits);
    struct json_writer w;
    json_init(&w, stdout);
    json_obj_begin(&w);
    json_kv_str(&w, "workload", bench_wl_name(x->wl));
    json_kv_str(&w, "mode", x->internal ? "internal" : "client");
    json_kv_str(&w, "config", x->conf->source);
    json_kv_i64(&w, "hosts", x->conf->nhosts);
    json_key(&w, "workers");
    json_arr_begin(&w);
    for (int h = 0; h < x->conf->nhosts; h++) json_i64(&w, x->conf->hosts[h].workers);
    json_arr_end(&w);
    json_kv_i64(&w, "terminals", r->terminals);
    if (!x->internal) {
        json_kv_i64(&w, "connections", o->connections);
        json_kv_i64(&w, "depth", o->depth);
    }
    json_kv_str(&w, "knobs", x->knobs);
    json_kv_f64(&w, "duration_s", r->measured_s);
    json_kv_f64(&w, "warmup_s", o->warmup);
    json_kv_u64(&w, "calls", bench_tally_sum(m->calls));
    json_kv_u64(&w, "committed", commits);
    /* null unless the figures are modelled (mode: dm, dm.nic_model on) */
    json_key(&w, "nic_model");
    if (nic_modelled(x->conf)) {
        json_obj_begin(&w);
        json_kv_str(&w, "figures", "modelled");
        json_kv_f64(&w, "rtt_us", x->conf->dm.nic_model.rtt_us);
        json_kv_f64(&w, "atomic_mops", x->conf->dm.nic_model.atomic_mops);
        json_kv_f64(&w, "rw_mops", x->conf->dm.nic_model.rw_mops);
        json_kv_f64(&w, "gbps", x->conf->dm.nic_model.gbps);
        json_obj_end(&w);
    } else {
        json_null(&w);
    }
    json_kv_f64(&w, "committed_per_s", per_s(x, commits));
    json_key(&w, "aborts_per_s");
    json_obj_begin(&w);
    for (int c = 0; c < POD_CAUSE_COUNT; c++)
        json_kv_f64(&w, pod_abort_cause_name((enum pod_abort_cause)c), per_s(x, x->conflicts[c]));
    uint64_t ua = bench_tally_sum(m->user_aborts);
    json_kv_f64(&w, "rollback", per_s(x, m->rollbacks));
    json_kv_f64(&w, "user_abort", per_s(x, ua - m->rollbacks));
    json_kv_f64(&w, "error", per_s(x, bench_tally_sum(m->errors)));
    json_kv_f64(&w, "gave_up", per_s(x, x->gave_up));
    json_obj_end(&w);
    json_key(&w, "latency_us");
    json_obj_begin(&w);
    json_kv_f64(&w, "mean", hist_mean(&r->lat) / 1e3);
    json_kv_f64(&w, "p50", (double)hist_quantile(&r->lat, 0.5) / 1e3);
    json_kv_f64(&w, "p90", (double)hist_quantile(&r->lat, 0.9) / 1e3);
    json_kv_f64(&w, "p99", (double)hist_quantile(&r->lat, 0.99) / 1e3);
    json_kv_f64(&w, "max", r->lat.n ? (double)r->lat.max / 1e3 : 0.0);
    json_obj_end(&w);
    json_key(&w, "commits");
    json_counts(&w, x, m->commits);
    json_key(&w, "user_aborts");
    json_counts(&w, x, m->user_aborts);
    json_key(&w, "errors");
    json_counts(&w, x, m->errors);
    json_kv_u64(&w, "remote_calls", m->remote_calls);
    json_kv_u64(&w, "remote_commits", m->remote_commits);
    json_kv_known(&w, "moved_in_per_s", x->moved_known, x->moved_in_s);
    json_kv_known(&w, "moved_out_per_s", x->moved_known, x->moved_out_s);
    json_kv_known(&w, "reply_waits_per_s", x->waits_known, x->waits_s);
    json_kv_known(&w, "reply_wait_us_mean", x->waits_known, x->wait_us_mean);
    json_kv_known(&w, "reply_waits_over_128us_share", x->waits_known, x->waits_long_share);
    json_key(&w, "hwcc_used_bytes");
    if (x->hwcc_known) json_i64(&w, x->hwcc_used);
    else json_null(&w);
    json_key(&w, "hwcc_quota_bytes");
    if (x->hwcc_known) json_i64(&w, x->hwcc_quota);
    else json_null(&w);
    /* mode: dm: fabric operations and round trips per committed transaction */
    json_key(&w, "store_ops_per_txn");
    if (x->store_known) {
        static const char *const kinds[4] = {"read", "write", "cas", "faa"};
        json_obj_begin(&w);
        for (int k = 0; k < 4; k++) json_kv_f64(&w, kinds[k], x->store_per_txn[k]);
        json_obj_end(&w);
    } else {
        json_null(&w);
    }
    json_kv_known(&w, "round_trips_per_txn", x->store_known, x->store_per_txn[4]);
    json_kv_known(&w, "messages_per_txn", x->messages_known, x->messages_per_txn);
    json_key(&w, "per_second");
    json_arr_begin(&w);
    for (uint32_t i = 0; i < r->nsec; i++) json_u64(&w, r->per_sec[i]);
    json_arr_end(&w);
    json_kv_str(&w, "first_error", r->first_error);
    json_kv_str(&w, "check", x->check);
    json_kv_str(&w, "check_report", x->check_text);
    json_obj_end(&w);
    fputc('\n', stdout);
}

/* ---- workloads: --check --------------------------------------------------------------- */

static void say(struct outcome *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct outcome *x, const char *fmt, ...)
{
    size_t used = strlen(x->check_text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->check_text + used, sizeof x->check_text - used, fmt, ap);
    va_end(ap);
}

/* The consistency verdict: every host's own result, and for YCSB and
 * SmallBank the change since before the run against what committed. */
static bool judge_check(struct outcome *x, int nhosts, const struct bench_check_result *before,
                        const struct bench_check_result *after)
{
    bool ok = true;
    uint64_t units = 0, rows = 0, expected = 0;
    int64_t sum_before = 0, sum_after = 0;
    for (int h = 0; h < nhosts; h++) {
        units += after[h].units;
        rows += after[h].rows;
        expected += after[h].expected_rows;
        sum_after += after[h].sum;
        if (before) sum_before += before[h].sum;
        if (after[h].failures) {
            ok = false;
            say(x, "              host %d: %" PRIu64 " failure%s:\n", h, after[h].failures,
                after[h].failures == 1 ? "" : "s");
            for (const char *l = after[h].report; *l;) {
                const char *e = strchr(l, '\n');
                int n = e ? (int)(e - l) : (int)strlen(l);
                say(x, "                %.*s\n", n, l);
                l += n + (e ? 1 : 0);
            }
        }
    }
    const struct bench_tally *all = &x->r.all;
    switch (x->wl) {
    case BENCH_TPCC:
        say(x, "              TPC-C conditions 1-4 on %" PRIu64 " warehouse%s: %s\n", units,
            units == 1 ? "" : "s", ok ? "hold" : "DO NOT HOLD");
        break;
    case BENCH_YCSB:
        say(x, "              usertable rows: %" PRIu64 " (expected %" PRIu64 ")\n", rows, expected);
        if (sum_after - sum_before != (int64_t)all->rmw_ops) ok = false;
        say(x, "              column counters grew by %" PRId64 ", committed read-modify-writes "
            "%" PRIu64 ": %s\n", sum_after - sum_before, all->rmw_ops,
            sum_after - sum_before == (int64_t)all->rmw_ops ? "equal" : "DIFFERENT");
        break;
    case BENCH_SMALLBANK:
        say(x, "              balance rows: %" PRIu64 " (expected %" PRIu64 ")\n", rows, expected);
        if (sum_after - sum_before != all->net) ok = false;
        say(x, "              audit total %" PRId64 " -> %" PRId64 " (change %" PRId64 "), money "
            "created by committed calls %" PRId64 ": %s\n", sum_before, sum_after,
            sum_after - sum_before, all->net, sum_after - sum_before == all->net ? "equal" : "DIFFERENT");
        break;
    default:
        break;
    }
    return ok;
}

/* ---- workloads: the run ----------------------------------------------------------------- */

static int apply_knobs(const struct opts *o, struct bench_knobs *k)
{
    for (int i = 0; i < o->nknobs; i++) {
        char err[256];
        if (bench_knobs_set(k, o->knob_key[i], o->knob_val[i], err, sizeof err)) {
            fprintf(stderr, "poddb-bench: %s: %s\n", o->knob_opt[i], err);
            return -1;
        }
    }
    return 0;
}

static void pod_rates(struct outcome *x, const struct bench_sysstats *a, uint64_t a_ns,
                      const struct bench_sysstats *b, uint64_t b_ns)
{
    double secs = (double)(b_ns - a_ns) / 1e9;
    x->moved_known = a->known[BENCH_MOVED_IN] && b->known[BENCH_MOVED_IN] &&
                     a->known[BENCH_MOVED_OUT] && b->known[BENCH_MOVED_OUT] && secs > 0;
    if (x->moved_known) {
        x->moved_in_s = (double)(b->pod[BENCH_MOVED_IN] - a->pod[BENCH_MOVED_IN]) / secs;
        x->moved_out_s = (double)(b->pod[BENCH_MOVED_OUT] - a->pod[BENCH_MOVED_OUT]) / secs;
    }
    x->waits_known = secs > 0;
    for (int k = BENCH_WAITS; k <= BENCH_WAITS_LONG; k++)
        x->waits_known = x->waits_known && a->known[k] && b->known[k];
    if (x->waits_known) {
        double n = (double)(b->pod[BENCH_WAITS] - a->pod[BENCH_WAITS]);
        x->waits_s = n / secs;
        x->wait_us_mean = n > 0 ? (double)(b->pod[BENCH_WAIT_NS] - a->pod[BENCH_WAIT_NS]) / n / 1e3
                                : 0.0;
        x->waits_long_share =
            n > 0 ? (double)(b->pod[BENCH_WAITS_LONG] - a->pod[BENCH_WAITS_LONG]) / n : 0.0;
    }
    x->hwcc_known = b->known[BENCH_HWCC_USED] && b->known[BENCH_HWCC_QUOTA];
    x->hwcc_used = b->pod[BENCH_HWCC_USED];
    x->hwcc_quota = b->pod[BENCH_HWCC_QUOTA];
    /* Per commit of the workload's procedures between the two snapshots
     * (the servers' own counts: the same window as the operations). */
    uint64_t commits = 0;
    for (int t = 0; t < bench_ntypes(x->wl); t++) commits += b->procs[t].commits - a->procs[t].commits;
    x->store_known = commits > 0;
    for (int k = 0; k < 5; k++) {
        int s = BENCH_STORE_READS + k;
        x->store_known = x->store_known && a->known[s] && b->known[s];
        if (x->store_known)
            x->store_per_txn[k] = (double)(b->pod[s] - a->pod[s]) / (double)commits;
    }
    x->messages_known = commits > 0 && a->known[BENCH_CC_MESSAGES] && b->known[BENCH_CC_MESSAGES];
    if (x->messages_known)
        x->messages_per_txn =
            (double)(b->pod[BENCH_CC_MESSAGES] - a->pod[BENCH_CC_MESSAGES]) / (double)commits;
}

static int run_workload(struct opts *o, const struct pod_config *conf, enum bench_wl wl)
{
    bool internal = strcmp(o->mode, "client") != 0;
    struct bench_knobs k;
    bench_knobs_from_conf(&k, conf, wl);
    if (!bench_wl_enabled(conf, wl)) {
        fprintf(stderr, "poddb-bench: %s has no workloads.%s section (add it; see "
                "docs/configuration.md)\n", conf->source, bench_wl_name(wl));
        return 2;
    }
    if (apply_knobs(o, &k)) return 2;
    char err[512];
    struct bench_workload *w = malloc(sizeof *w);
    struct outcome *x = calloc(1, sizeof *x);
    struct bench_check_result *before = calloc(POD_MAX_HOSTS, sizeof *before);
    struct bench_check_result *after = calloc(POD_MAX_HOSTS, sizeof *after);
    struct bench_sysstats *end_stats = malloc(sizeof *end_stats);
    struct progress *pg = calloc(1, sizeof *pg);
    struct bench_pod pod;
    int rc = 1;
    bool connected = false;
    if (!w || !x || !before || !after || !end_stats || !pg) {
        fprintf(stderr, "poddb-bench: out of memory\n");
        goto out;
    }
    if (bench_workload_init(w, conf, &k, err, sizeof err)) {
        fprintf(stderr, "poddb-bench: %s\n", err);
        rc = 2;
        goto out;
    }
    x->o = o;
    x->conf = conf;
    x->wl = wl;
    x->internal = internal;
    x->check = "not run";
    bench_knobs_format(&k, x->knobs, sizeof x->knobs);
    bench_run_result_init(&x->r);
    *pg = (struct progress){.o = o, .tty = isatty(STDERR_FILENO), .pod = &pod, .wl = wl};

    if (bench_pod_connect(&pod, conf, (int)(o->timeout * 1000))) {
        fprintf(stderr, "poddb-bench: %s\n", pod.err);
        goto out;
    }
    connected = true;
    bool loaded_now;
    if (bench_pod_load(&pod, wl, o->load, job_progress, pg, &loaded_now)) {
        progress_done(pg);
        fprintf(stderr, "poddb-bench: loading: %s\n", pod.err);
        goto out;
    }
    if (loaded_now) progress_done(pg);
    /* YCSB and SmallBank are checked against their state before the run. */
    if (o->check && wl != BENCH_TPCC && bench_pod_check(&pod, wl, before, NULL, NULL)) {
        fprintf(stderr, "poddb-bench: check before the run: %s\n", pod.err);
        goto out;
    }
    uint64_t session = bench_pod_session(&pod);
    if (!session) {
        fprintf(stderr, "poddb-bench: %s\n", pod.err);
        goto out;
    }
    pg->last_ns = pod_mono_ns();
    if (internal) {
        if (bench_pod_run(&pod, wl, o->duration, o->warmup, session, x->knobs, run_progress, pg,
                          &x->r)) {
            progress_done(pg);
            fprintf(stderr, "poddb-bench: %s\n", pod.err);
            goto out;
        }
        memcpy(x->conflicts, x->r.conflicts, sizeof x->conflicts);
        x->gave_up = x->r.gave_up;
    } else {
        struct bench_client_opts co = {.connections = o->connections, .depth = o->depth,
                                       .duration_s = o->duration, .warmup_s = o->warmup,
                                       .session = session, .timeout_ms = (int)(o->timeout * 1000)};
        if (bench_client_run(conf, w, &co, client_progress, pg, &x->r, err, sizeof err)) {
            progress_done(pg);
            fprintf(stderr, "poddb-bench: %s\n", err);
            goto out;
        }
    }
    progress_done(pg);
    uint64_t end_ns = pod_mono_ns();
    if (pg->failed[0] || bench_pod_sysstats(&pod, wl, end_stats)) {
        fprintf(stderr, "poddb-bench: sys.stats: %s\n", pg->failed[0] ? pg->failed : pod.err);
        goto out;
    }
    if (pg->have_start) {
        pod_rates(x, &pg->start, pg->start_ns, end_stats, end_ns);
        if (!internal) /* the servers' conflict counters over the window */
            for (int t = 0; t < bench_ntypes(wl); t++) {
                for (int c = 0; c < POD_CAUSE_COUNT; c++)
                    x->conflicts[c] += end_stats->procs[t].by_cause[c] - pg->start.procs[t].by_cause[c];
                x->gave_up += end_stats->procs[t].gave_up - pg->start.procs[t].gave_up;
            }
    }
    rc = 0;
    if (o->check) {
        if (bench_pod_check(&pod, wl, after, job_progress, pg)) {
            progress_done(pg);
            fprintf(stderr, "poddb-bench: check: %s\n", pod.err);
            rc = 1;
            goto out;
        }
        progress_done(pg);
        bool ok = judge_check(x, conf->nhosts, wl == BENCH_TPCC ? NULL : before, after);
        x->check = ok ? "passed" : "FAILED";
        if (!ok) rc = 1;
    }
    if (o->json) print_json(x);
    else print_table(x);
    fflush(stdout);
    uint64_t errors = bench_tally_sum(x->r.all.errors);
    if (errors && !o->quiet)
        fprintf(stderr, "poddb-bench: WARNING: %" PRIu64 " call%s failed with an error (first: %s)\n",
                errors, errors == 1 ? "" : "s", x->r.first_error);
    if (rc && !o->quiet) {
        fprintf(stderr, "poddb-bench: CHECK FAILED: %s is inconsistent after the run:\n",
                bench_wl_name(wl));
        fputs(x->check_text, stderr);
    }
out:
    if (connected) bench_pod_close(&pod);
    if (x) bench_run_result_free(&x->r);
    free(pg);
    free(end_stats);
    free(after);
    free(before);
    free(x);
    free(w);
    return rc;
}

/* ---- options ------------------------------------------------------------------------------ */

static int add_knob(struct opts *o, const char *opt, const char *key, const char *val)
{
    if (o->nknobs == MAX_KNOB_ARGS || strlen(key) >= sizeof o->knob_key[0] ||
        strlen(val) >= sizeof o->knob_val[0]) {
        fprintf(stderr, "poddb-bench: %s: too many or too long knob settings\n", opt);
        return -1;
    }
    o->knob_opt[o->nknobs] = opt;
    snprintf(o->knob_key[o->nknobs], sizeof o->knob_key[0], "%s", key);
    snprintf(o->knob_val[o->nknobs], sizeof o->knob_val[0], "%s", val);
    o->nknobs++;
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    enum { O_WARMUP = 1000, O_TABLE, O_KEYS, O_VSIZE, O_RR, O_NOLOAD, O_EARLY, O_CHECK, O_REMOTE,
           O_REMOTE_NO, O_REMOTE_PAY, O_READ_PCT, O_THETA, O_MP, O_HOT_PCT, O_REMOTE_PCT, O_KNOB };
    static const struct option lo[] = {
        {"conf", required_argument, 0, 'c'},     {"workload", required_argument, 0, 'w'},
        {"mode", required_argument, 0, 'm'},     {"host", required_argument, 0, 'H'},
        {"duration", required_argument, 0, 'd'}, {"warmup", required_argument, 0, O_WARMUP},
        {"connections", required_argument, 0, 'C'}, {"depth", required_argument, 0, 'D'},
        {"table", required_argument, 0, O_TABLE}, {"keys", required_argument, 0, O_KEYS},
        {"value-size", required_argument, 0, O_VSIZE}, {"read-ratio", required_argument, 0, O_RR},
        {"no-load", no_argument, 0, O_NOLOAD},   {"early", no_argument, 0, O_EARLY},
        {"check", no_argument, 0, O_CHECK},      {"timeout", required_argument, 0, 'T'},
        {"remote", required_argument, 0, O_REMOTE},
        {"remote-new-order", required_argument, 0, O_REMOTE_NO},
        {"remote-payment", required_argument, 0, O_REMOTE_PAY},
        {"read-pct", required_argument, 0, O_READ_PCT}, {"theta", required_argument, 0, O_THETA},
        {"multi-partition", required_argument, 0, O_MP},
        {"hot-pct", required_argument, 0, O_HOT_PCT},
        {"remote-pct", required_argument, 0, O_REMOTE_PCT},
        {"knob", required_argument, 0, O_KNOB},
        {"json", no_argument, 0, 'j'},           {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    *o = (struct opts){.workload = NULL, .mode = NULL, .host = -1, .connections = -1,
                       .depth = -1, .value_size = 100, .duration = 10, .warmup = 1,
                       .read_ratio = 1, .keys = 100000, .load = true, .timeout = 120};
    int c;
    char *end;
#define NUM(field, conv, lo_, hi_, name)                                                        \
    do {                                                                                       \
        o->field = conv(optarg, &end);                                                         \
        if (*end || end == optarg || o->field < (lo_) || o->field > (hi_)) {                  \
            fprintf(stderr, "poddb-bench: %s '%s' must be a number in %g..%g\n", name, optarg, \
                    (double)(lo_), (double)(hi_));                                             \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
#define TO_INT(s, e) (int)strtol(s, e, 10)
#define TO_U64(s, e) strtoull(s, e, 10)
#define KNOB(opt, key) \
    if (add_knob(o, opt, key, optarg)) return -1; \
    break
    while ((c = getopt_long(argc, argv, "c:w:m:H:d:C:D:T:jqh", lo, NULL)) != -1) {
        switch (c) {
        case 'c': o->conf_path = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'm': o->mode = optarg; break;
        case 'H': NUM(host, TO_INT, 0, POD_MAX_HOSTS - 1, "--host"); break;
        case 'd': NUM(duration, strtod, 0.1, BENCH_MAX_SECONDS, "--duration"); break;
        case O_WARMUP: NUM(warmup, strtod, 0, 3600, "--warmup"); break;
        case 'C': NUM(connections, TO_INT, 1, 1024, "--connections"); break;
        case 'D': NUM(depth, TO_INT, 1, 4096, "--depth"); break;
        case 'T': NUM(timeout, strtod, 1, 86400, "--timeout"); break;
        case O_TABLE: o->table = optarg; break;
        case O_KEYS: NUM(keys, TO_U64, 1, 1000000000, "--keys"); break;
        case O_VSIZE: NUM(value_size, TO_INT, 0, 1 << 20, "--value-size"); break;
        case O_RR: NUM(read_ratio, strtod, 0, 1, "--read-ratio"); break;
        case O_NOLOAD: o->load = false; break;
        case O_EARLY: o->early = true; break;
        case O_CHECK: o->check = true; break;
        case O_REMOTE: {
            char no[48], pay[48];
            const char *slash = strchr(optarg, '/');
            if (!slash || slash == optarg || !slash[1] || (size_t)(slash - optarg) >= sizeof no ||
                strlen(slash + 1) >= sizeof pay) {
                fprintf(stderr, "poddb-bench: --remote '%s' must be NEWORDER/PAYMENT percentages, "
                        "like 10/15\n", optarg);
                return -1;
            }
            snprintf(no, sizeof no, "%.*s", (int)(slash - optarg), optarg);
            snprintf(pay, sizeof pay, "%s", slash + 1);
            if (add_knob(o, "--remote", "remote_new_order_pct", no) ||
                add_knob(o, "--remote", "remote_payment_pct", pay))
                return -1;
            break;
        }
        case O_REMOTE_NO: KNOB("--remote-new-order", "remote_new_order_pct");
        case O_REMOTE_PAY: KNOB("--remote-payment", "remote_payment_pct");
        case O_READ_PCT: KNOB("--read-pct", "read_pct");
        case O_THETA: KNOB("--theta", "theta");
        case O_MP: KNOB("--multi-partition", "multi_partition_pct");
        case O_HOT_PCT: KNOB("--hot-pct", "hot_pct");
        case O_REMOTE_PCT: KNOB("--remote-pct", "remote_pct");
        case O_KNOB: {
            const char *eq = strchr(optarg, '=');
            char key[48];
            if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof key) {
                fprintf(stderr, "poddb-bench: --knob '%s' must be KEY=VALUE\n", optarg);
                return -1;
            }
            snprintf(key, sizeof key, "%.*s", (int)(eq - optarg), optarg);
            if (add_knob(o, "--knob", key, eq + 1)) return -1;
            break;
        }
        case 'j': o->json = true; break;
        case 'q': o->quiet = true; break;
        case 'h': fputs(usage, stdout); exit(0);
        default: fputs(usage, stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-bench: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!o->conf_path) {
        fprintf(stderr, "poddb-bench: --conf FILE is required\n");
        return -1;
    }
    if (!o->workload) {
        fprintf(stderr, "poddb-bench: --workload tpcc|ycsb|smallbank|kv is required\n");
        return -1;
    }
    bool kv = !strcmp(o->workload, "kv");
    if (!kv && bench_wl_parse(o->workload, strlen(o->workload)) < 0) {
        fprintf(stderr, "poddb-bench: unknown workload '%s' (expected tpcc, ycsb, smallbank or kv)\n",
                o->workload);
        return -1;
    }
    if (!o->mode) o->mode = kv ? "client" : "internal";
    if (strcmp(o->mode, "client") && strcmp(o->mode, "internal")) {
        fprintf(stderr, "poddb-bench: unknown mode '%s' (expected internal or client)\n", o->mode);
        return -1;
    }
    if (kv && strcmp(o->mode, "client")) {
        fprintf(stderr, "poddb-bench: the kv workload runs in client mode only\n");
        return -1;
    }
    if (kv && (o->nknobs || o->check)) {
        fprintf(stderr, "poddb-bench: %s does not apply to the kv workload\n",
                o->check ? "--check" : o->knob_opt[0]);
        return -1;
    }
    if (!kv && (o->host >= 0 || o->table || o->early)) {
        fprintf(stderr, "poddb-bench: --host, --table and --early apply to the kv workload only\n");
        return -1;
    }
    if (!kv && !strcmp(o->mode, "internal") && (o->connections > 0 || o->depth > 0)) {
        fprintf(stderr, "poddb-bench: --connections and --depth apply to client mode only\n");
        return -1;
    }
    if (o->depth < 0) o->depth = kv ? 1 : 8;
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o)) return 2;
    struct pod_config *conf = malloc(sizeof *conf);
    pod_err perr = {{0}};
    if (!conf || pod_config_load(o.conf_path, conf, &perr)) {
        fprintf(stderr, "poddb-bench: %s\n", conf ? perr.msg : "out of memory");
        free(conf);
        return 2;
    }
    if (o.connections < 0) o.connections = !strcmp(o.workload, "kv") ? 1 : 4 * conf->nhosts;
    int rc = !strcmp(o.workload, "kv")
                 ? run_kv(&o, conf)
                 : run_workload(&o, conf, (enum bench_wl)bench_wl_parse(o.workload, strlen(o.workload)));
    free(conf);
    return rc;
}
