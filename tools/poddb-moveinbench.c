/* poddb-moveinbench: the time of one cross-host move-in round trip.
 *
 * Starts a pod of 2 poddb-server processes (1 worker each, pinned to the
 * given CPUs) on a fresh region, loads distinct keys into host 1's DRAM
 * (tests/modules/moveinbench.c), then has host 0 read them one by one, each
 * read timed inside host 0's worker from the call to its return: CXL index
 * miss, POD_MSG_MOVE_IN to host 1, host 1 moves the tuple in and replies,
 * host 0 finds the record, locks it and reads the row. Prints the median,
 * p99, mean, min and max over all keys, and checks with sys.pod that host 1
 * really moved that many tuples in. Everything it creates (region, sockets,
 * logs) is removed at the end. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "poddb/client.h"

static const char usage[] =
    "usage: poddb-moveinbench [options]\n"
    "\n"
    "Measures cross-host move-in round trips on a pod of 2 hosts x 1 worker that\n"
    "it starts itself: host 0 reads distinct keys that live only in host 1's DRAM,\n"
    "each read timed until the tuple is usable (median, p99, mean, min, max).\n"
    "\n"
    "Options:\n"
    "  -n, --keys N       keys to move in and time (default 20000)\n"
    "  -b, --batch N      keys per call (one transaction) on host 0 (default 200)\n"
    "  -g, --gap-us N     pause between two reads, in microseconds (default 0:\n"
    "                     back to back; with a pause host 1's worker goes idle and\n"
    "                     sleeps until host 0's next request rings its inbox)\n"
    "  -c, --cpus A,B     the CPUs of host 0 and host 1 (default 0,1)\n"
    "  -B, --bin DIR      where poddb-server is (default: this program's directory)\n"
    "  -m, --module PATH  the benchmark's procedure module\n"
    "                     (default build/test/modules/moveinbench.so)\n"
    "  -k, --keep         keep the temporary directory (config, server logs)\n"
    "  -h, --help         this text\n";

struct opts {
    long keys, batch, gap_us;
    int cpu[2];
    char bin[512], module[512];
    bool keep;
};

static char dir[] = "/tmp/poddb-moveinbench-XXXXXX";
static char region[256];
static pid_t pids[2];

static void stop_servers(void)
{
    for (int h = 0; h < 2; h++)
        if (pids[h] > 0) kill(pids[h], SIGTERM);
    for (int h = 0; h < 2; h++) {
        if (pids[h] <= 0) continue;
        int st;
        for (int i = 0; i < 300 && waitpid(pids[h], &st, WNOHANG) == 0; i++) usleep(20000);
        if (waitpid(pids[h], &st, WNOHANG) == 0) {
            kill(pids[h], SIGKILL);
            waitpid(pids[h], &st, 0);
        }
        pids[h] = 0;
    }
    if (region[0]) unlink(region);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("poddb-moveinbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    stop_servers();
    fprintf(stderr, "poddb-moveinbench: the servers' logs are in %s\n", dir);
    exit(1);
}

static pod_reply *call(pod_client *c, const char *proc, const pod_value *v, int n)
{
    pod_reply *r = pod_client_call(c, proc, v, n);
    if (!r) die("%s: %s", proc, pod_client_error(c));
    if (pod_reply_status(r) < 0) die("%s: %s", proc, pod_reply_message(r));
    return r;
}

static double sys_pod(pod_client *c, const char *name)
{
    pod_reply *r = call(c, "sys.pod", NULL, 0);
    double out = -1;
    for (int i = 0; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *v = pod_reply_value(r, i, 1);
        if (k && v && k->len == strlen(name) && memcmp(k->u.bytes, name, k->len) == 0) {
            char buf[32] = {0};
            memcpy(buf, v->u.bytes, v->len < 31 ? v->len : 31);
            out = strtod(buf, NULL);
        }
    }
    pod_reply_free(r);
    return out;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void parse(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        {"keys", required_argument, 0, 'n'}, {"batch", required_argument, 0, 'b'},
        {"gap-us", required_argument, 0, 'g'}, {"cpus", required_argument, 0, 'c'},
        {"bin", required_argument, 0, 'B'},  {"module", required_argument, 0, 'm'},
        {"keep", no_argument, 0, 'k'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (struct opts){20000, 200, 0, {0, 1}, "", "build/test/modules/moveinbench.so", false};
    char *slash = strrchr(argv[0], '/');
    snprintf(o->bin, sizeof o->bin, "%.*s", slash ? (int)(slash - argv[0]) : 1,
             slash ? argv[0] : ".");
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "n:b:g:c:B:m:kh", lo, NULL)) != -1) {
        switch (c) {
        case 'n': case 'b': case 'g': {
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < (c == 'g' ? 0 : 1) || v > 10000000) {
                fprintf(stderr, "poddb-moveinbench: --%s: '%s' is not a number in %d..10000000\n",
                        c == 'n' ? "keys" : c == 'b' ? "batch" : "gap-us", optarg, c == 'g' ? 0 : 1);
                exit(2);
            }
            *(c == 'n' ? &o->keys : c == 'b' ? &o->batch : &o->gap_us) = v;
            break;
        }
        case 'c':
            if (sscanf(optarg, "%d,%d", &o->cpu[0], &o->cpu[1]) != 2 || o->cpu[0] < 0 ||
                o->cpu[1] < 0) {
                fprintf(stderr, "poddb-moveinbench: --cpus: '%s' is not two CPU numbers A,B\n",
                        optarg);
                exit(2);
            }
            break;
        case 'B': snprintf(o->bin, sizeof o->bin, "%s", optarg); break;
        case 'm': snprintf(o->module, sizeof o->module, "%s", optarg); break;
        case 'k': o->keep = true; break;
        case 'h': fputs(usage, stdout); exit(0);
        default: fprintf(stderr, "Try 'poddb-moveinbench --help'.\n"); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-moveinbench: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    if (o->batch > 100000) o->batch = 100000;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(argc, argv, &o);
    char module[4096];
    if (!realpath(o.module, module)) {
        fprintf(stderr, "poddb-moveinbench: module %s: %s (build it: make %s)\n", o.module,
                strerror(errno), "build/test/modules/moveinbench.so");
        return 2;
    }
    char server[1024];
    snprintf(server, sizeof server, "%s/poddb-server", o.bin);
    if (access(server, X_OK) != 0) {
        fprintf(stderr, "poddb-moveinbench: %s: %s (give --bin DIR)\n", server, strerror(errno));
        return 2;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, "poddb-moveinbench: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(region, sizeof region, "/dev/shm/poddb-moveinbench-%d", (int)getpid());
    char conf[600], sock[2][600], logf[2][600];
    snprintf(conf, sizeof conf, "%s/pod.yaml", dir);
    FILE *f = fopen(conf, "w");
    if (!f) die("%s: %s", conf, strerror(errno));
    fprintf(f,
            "region: {path: %s, kind: shm, size: 2GiB, hwcc_budget: 256MiB}\n"
            "host_defaults:\n  workers: 1\n  loggers: 0\n  socket: %s/h{host}.sock\n"
            "  log_dir: %s/log-{host}\n"
            "hosts:\n  - {cpus: \"%d\"}\n  - {cpus: \"%d\"}\n"
            "modules:\n  - %s\n",
            region, dir, dir, o.cpu[0], o.cpu[1], module);
    if (fclose(f)) die("%s: %s", conf, strerror(errno));
    for (int h = 0; h < 2; h++) {
        snprintf(sock[h], sizeof sock[h], "%s/h%d.sock", dir, h);
        snprintf(logf[h], sizeof logf[h], "%s/server-%d.log", dir, h);
        pid_t p = fork();
        if (p < 0) die("fork: %s", strerror(errno));
        if (p == 0) {
            FILE *lf = freopen(logf[h], "w", stdout);
            if (!lf || dup2(fileno(stdout), 2) < 0) _exit(127);
            char hs[16];
            snprintf(hs, sizeof hs, "%d", h);
            execl(server, server, "--conf", conf, "--host", hs, (char *)NULL);
            _exit(127);
        }
        pids[h] = p;
    }
    pod_client *c[2];
    for (int h = 0; h < 2; h++) {
        char err[256];
        c[h] = NULL;
        for (int i = 0; i < 600 && !c[h]; i++) {
            int st;
            if (waitpid(pids[h], &st, WNOHANG) == pids[h]) {
                pids[h] = 0;
                die("host %d exited at start (log: %s)", h, logf[h]);
            }
            if (!(c[h] = pod_client_connect(sock[h], err, sizeof err))) usleep(100000);
        }
        if (!c[h]) die("host %d did not come up in 60 s: %s (log: %s)", h, err, logf[h]);
        pod_client_set_timeout(c[h], 120000);
        pod_reply_free(call(c[h], "sys.ping", NULL, 0));
    }
    /* Host 1 owns the odd keys: 2*i+1 for i < keys. */
    long total = 2 * o.keys;
    for (long first = 0; first < total; first += 20000) {
        long n = total - first < 20000 ? total - first : 20000;
        pod_value v[4] = {pod_v_i64(1), pod_v_i64(2), pod_v_i64(first), pod_v_i64(n)};
        pod_reply_free(call(c[1], "mb.load", v, 4));
    }
    long long moved0 = (long long)sys_pod(c[1], "moved_in");
    uint64_t *ns = malloc((size_t)o.keys * sizeof *ns);
    if (!ns) die("out of memory");
    long got = 0;
    for (long i = 0; i < o.keys; i += o.batch) {
        long n = o.keys - i < o.batch ? o.keys - i : o.batch;
        pod_value v[4] = {pod_v_i64(2 * i + 1), pod_v_i64(n), pod_v_i64(2), pod_v_i64(o.gap_us)};
        pod_reply *r = call(c[0], "mb.get", v, 4);
        if (pod_reply_nrows(r) != n) die("mb.get returned %d rows for %ld keys", pod_reply_nrows(r), n);
        for (int j = 0; j < n; j++) ns[got++] = (uint64_t)pod_reply_value(r, j, 0)->u.i64;
        pod_reply_free(r);
    }
    long long moved = (long long)sys_pod(c[1], "moved_in") - moved0;
    long long waits = (long long)sys_pod(c[0], "waits");
    double wait_us = sys_pod(c[0], "wait_us_avg");
    for (int h = 0; h < 2; h++) pod_client_close(c[h]);
    stop_servers();
    if (moved < o.keys)
        die("host 1 moved %lld tuples in for %ld reads: not every read was a move-in", moved, o.keys);
    qsort(ns, (size_t)got, sizeof *ns, cmp_u64);
    double sum = 0;
    long fast = 0;
    for (long i = 0; i < got; i++) {
        sum += (double)ns[i];
        fast += ns[i] < 10000;
    }
    printf("move-in round trips: %ld keys, 2 hosts x 1 worker (CPUs %d and %d), batch %ld, "
           "gap %ld us\n", got, o.cpu[0], o.cpu[1], o.batch, o.gap_us);
    printf("  median %.2f us  p90 %.2f us  p99 %.2f us  mean %.2f us  min %.2f us  max %.2f us\n",
           (double)ns[got / 2] / 1e3, (double)ns[(size_t)((double)got * 0.90)] / 1e3,
           (double)ns[(size_t)((double)got * 0.99)] / 1e3, sum / (double)got / 1e3,
           (double)ns[0] / 1e3, (double)ns[got - 1] / 1e3);
    printf("  %.1f%% of the move-ins took less than 10 us\n", 100.0 * (double)fast / (double)got);
    printf("  host 1 moved in %lld tuples; host 0 waited for %lld replies, %.1f us each on "
           "average (sys.pod wait_us_avg: send to reply)\n", moved, waits, wait_us);
    free(ns);
    if (o.keep) {
        printf("  config and logs kept in %s\n", dir);
    } else {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "poddb-moveinbench: could not remove %s\n", dir);
    }
    return 0;
}
