/* poddb-bench: drive a running pod and measure it.
 *
 * Today: the `kv` workload in client mode — single-key kv.get/kv.put calls on
 * a config-declared kv table over the servers' sockets, from C connections
 * each keeping D calls in flight. TPC-C, YCSB, SmallBank and the internal mode
 * arrive with the workload issue. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#include "conf/config.h"
#include "poddb/client.h"
#include "util/hist.h"
#include "util/json.h"
#include "util/clock.h"

static const char usage[] =
    "usage: poddb-bench --conf FILE --workload kv [options]\n"
    "\n"
    "Drives the servers of a running pod (start them with poddb-server or tools/pod)\n"
    "and prints throughput and latency; --json prints the same as one JSON line.\n"
    "\n"
    "Options:\n"
    "  -c, --conf FILE          the pod's config (sockets, tables)\n"
    "  -w, --workload NAME      kv (tpcc, ycsb, smallbank: not built yet)\n"
    "  -m, --mode MODE          client (internal: not built yet)\n"
    "  -H, --host N             drive host N only (default: every host, round robin)\n"
    "  -d, --duration S         measured seconds (default 10)\n"
    "      --warmup S           seconds before measuring (default 1)\n"
    "  -C, --connections N      connections (default 1)\n"
    "  -D, --depth N            calls in flight per connection (default 1: unpipelined)\n"
    "      --table NAME         kv table (default: the config's first)\n"
    "      --keys N             keys loaded and used (default 100000)\n"
    "      --value-size B       value bytes (default 100)\n"
    "      --read-ratio R       share of kv.get among calls, 0..1 (default 1)\n"
    "      --no-load            do not load the keys (they are there already)\n"
    "      --early              ask for replies before durability (not durable)\n"
    "  -j, --json               one JSON line instead of the table\n"
    "  -q, --quiet              no live progress on stderr\n"
    "  -h, --help               this text\n";

struct opts {
    const char *conf_path, *workload, *mode, *table;
    int host, connections, depth, value_size;
    double duration, warmup, read_ratio;
    uint64_t keys;
    bool json, quiet, load, early;
};

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
static void *conn_main(void *arg)
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

static void print_result(const struct opts *o, const struct pod_config *conf, double secs,
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

static int parse(int argc, char **argv, struct opts *o)
{
    enum { O_WARMUP = 1000, O_TABLE, O_KEYS, O_VSIZE, O_RR, O_NOLOAD, O_EARLY };
    static const struct option lo[] = {
        {"conf", required_argument, 0, 'c'},     {"workload", required_argument, 0, 'w'},
        {"mode", required_argument, 0, 'm'},     {"host", required_argument, 0, 'H'},
        {"duration", required_argument, 0, 'd'}, {"warmup", required_argument, 0, O_WARMUP},
        {"connections", required_argument, 0, 'C'}, {"depth", required_argument, 0, 'D'},
        {"table", required_argument, 0, O_TABLE}, {"keys", required_argument, 0, O_KEYS},
        {"value-size", required_argument, 0, O_VSIZE}, {"read-ratio", required_argument, 0, O_RR},
        {"no-load", no_argument, 0, O_NOLOAD},   {"early", no_argument, 0, O_EARLY},
        {"json", no_argument, 0, 'j'},           {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    *o = (struct opts){.workload = "kv", .mode = "client", .host = -1, .connections = 1,
                       .depth = 1, .value_size = 100, .duration = 10, .warmup = 1,
                       .read_ratio = 1, .keys = 100000, .load = true};
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
    while ((c = getopt_long(argc, argv, "c:w:m:H:d:C:D:jqh", lo, NULL)) != -1) {
        switch (c) {
        case 'c': o->conf_path = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'm': o->mode = optarg; break;
        case 'H': NUM(host, TO_INT, 0, POD_MAX_HOSTS - 1, "--host"); break;
        case 'd': NUM(duration, strtod, 0.1, 86400, "--duration"); break;
        case O_WARMUP: NUM(warmup, strtod, 0, 3600, "--warmup"); break;
        case 'C': NUM(connections, TO_INT, 1, 1024, "--connections"); break;
        case 'D': NUM(depth, TO_INT, 1, 4096, "--depth"); break;
        case O_TABLE: o->table = optarg; break;
        case O_KEYS: NUM(keys, TO_U64, 1, 1000000000, "--keys"); break;
        case O_VSIZE: NUM(value_size, TO_INT, 0, 1 << 20, "--value-size"); break;
        case O_RR: NUM(read_ratio, strtod, 0, 1, "--read-ratio"); break;
        case O_NOLOAD: o->load = false; break;
        case O_EARLY: o->early = true; break;
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
    if (strcmp(o->workload, "kv") != 0) {
        fprintf(stderr, "poddb-bench: workload '%s' is not built yet (today: kv)\n", o->workload);
        return -1;
    }
    if (strcmp(o->mode, "client") != 0) {
        fprintf(stderr, "poddb-bench: mode '%s' is not built yet (today: client)\n", o->mode);
        return -1;
    }
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
        return 1;
    }
    if (o.host >= conf->nhosts) {
        fprintf(stderr, "poddb-bench: --host %d: the pod has hosts 0..%d\n", o.host, conf->nhosts - 1);
        return 2;
    }
    if (!o.table) {
        if (!conf->ntables) {
            fprintf(stderr, "poddb-bench: %s declares no kv table (add one under tables:)\n",
                    o.conf_path);
            return 2;
        }
        o.table = conf->tables[0].name;
    }
    for (int i = 0; i < conf->ntables; i++)
        if (!strcmp(conf->tables[i].name, o.table) &&
            (uint32_t)o.value_size > conf->tables[i].value_size) {
            fprintf(stderr, "poddb-bench: --value-size %d exceeds table %s's value_size %u\n",
                    o.value_size, o.table, conf->tables[i].value_size);
            return 2;
        }
    /* Until cross-host transactions exist every host serves its own data: load
     * each host that will be driven. */
    for (int h = 0; o.load && h < conf->nhosts; h++)
        if ((o.host < 0 || o.host == h) && load_keys(&o, conf->hosts[h].socket_path)) return 1;

    struct conn_thread *t = calloc((size_t)o.connections, sizeof *t);
    for (int i = 0; i < o.connections; i++) {
        t[i].o = &o;
        t[i].id = i;
        t[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        int h = o.host >= 0 ? o.host : i % conf->nhosts;
        t[i].address = conf->hosts[h].socket_path;
        hist_init(&t[i].lat);
        pthread_create(&t[i].th, NULL, conn_main, &t[i]);
    }
    struct timespec tick = {0, 100 * 1000 * 1000};
    for (double w = 0; w < o.warmup; w += 0.1) nanosleep(&tick, NULL);
    __atomic_store_n(&g_phase, 1, __ATOMIC_RELAXED);
    uint64_t t0 = pod_mono_ns(), last_print = t0, last_done = 0;
    bool tty = isatty(STDERR_FILENO);
    for (;;) {
        nanosleep(&tick, NULL);
        uint64_t now = pod_mono_ns(), done = 0;
        bool failed = false;
        for (int i = 0; i < o.connections; i++) {
            done += __atomic_load_n(&t[i].done, __ATOMIC_RELAXED);
            failed |= t[i].failed;
        }
        if (failed) break;
        if (!o.quiet && now - last_print >= 1000000000ull) {
            /* On a terminal the line is rewritten; in a log, one line a second. */
            fprintf(stderr, "%s%5.1f s  %10.0f calls/s%s", tty ? "\r" : "",
                    (double)(now - t0) / 1e9,
                    (double)(done - last_done) * 1e9 / (double)(now - last_print), tty ? "" : "\n");
            last_print = now;
            last_done = done;
        }
        if ((double)(now - t0) / 1e9 >= o.duration) break;
    }
    double secs = (double)(pod_mono_ns() - t0) / 1e9;
    __atomic_store_n(&g_phase, 2, __ATOMIC_RELAXED);
    if (!o.quiet && tty) fprintf(stderr, "\n");
    struct hist all;
    hist_init(&all);
    uint64_t done = 0, errors = 0;
    int rc = 0;
    for (int i = 0; i < o.connections; i++) {
        pthread_join(t[i].th, NULL);
        if (t[i].failed) {
            fprintf(stderr, "poddb-bench: connection %d: %s\n", i, t[i].err);
            rc = 1;
        }
        hist_merge(&all, &t[i].lat);
        done += t[i].done;
        errors += t[i].errors;
    }
    if (!rc) print_result(&o, conf, secs, done, errors, &all);
    free(t);
    free(conf);
    return rc;
}
