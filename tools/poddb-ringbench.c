/* poddb-ringbench: round-trip latency of the cross-host transport (cxl/ring.h).
 *
 * Two processes attach to one region as hosts 0 and 1. Host 0 (the requester)
 * arms its reply slot, sends a request into host 1's inbox ring and busy-waits
 * for the reply; host 1 busy-polls its inbox and posts each reply into host
 * 0's reply slot. Every round trip is timed with CLOCK_MONOTONIC and the
 * distribution is printed (or one JSON line). Real workers poll their inbox
 * between transactions and while they wait, so busy polling is what a
 * cross-host move-in request sees on an otherwise idle host. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conf/config.h"
#include "cxl/numa.h"
#include "cxl/region.h"
#include "cxl/ring.h"
#include "util/log.h"

static const char usage[] =
    "usage: poddb-ringbench [--conf FILE] [options]\n"
    "\n"
    "Measures the round trip of the cross-host transport: host 0 sends a request into\n"
    "host 1's inbox ring, host 1 (busy polling) posts the reply into host 0's reply\n"
    "slot, host 0 (busy waiting) reads it. Two processes, one per host, pinned to\n"
    "their own CPUs. Prints the median, p90, p99, p99.9 and max in microseconds.\n"
    "\n"
    "Without --conf it runs on a temporary region in /dev/shm with a unique name,\n"
    "removed when it ends (also on errors and on SIGINT/SIGTERM).\n"
    "\n"
    "Options:\n"
    "  -c, --conf FILE      use this pod's region as hosts 0 and 1. Those hosts must\n"
    "                       not be running; if no host of the pod is alive the region\n"
    "                       is formatted anew, as a pod start would. It is left in place.\n"
    "  -n, --messages N     round trips to measure (default 100000)\n"
    "  -w, --warmup N       round trips before measuring (default 10000)\n"
    "  -p, --payload BYTES  request and reply payload, 0..240 (default 64)\n"
    "  -s, --slots N        slots of host 1's inbox ring, a power of two (default 256)\n"
    "      --cpus A,B       pin host 0 to CPU A and host 1 to CPU B; 'none': no pinning\n"
    "                       (default: the config's CPU lists, else CPUs 0 and 1 if the\n"
    "                       machine has them)\n"
    "      --simulate       simulated non-coherent SWcc (temporary region only)\n"
    "  -j, --json           print one JSON line instead of the table\n"
    "  -h, --help           this text\n";

enum { MSG_REQ = 1, MSG_STOP = 2 };

struct bench {
    struct pod_config *c;
    bool temp;                 /* c describes our temporary region */
    uint64_t messages, warmup;
    unsigned payload, slots;
    int cpus[2][256], ncpus[2];
    int result_fd;             /* host 0 writes struct result here */
};

struct result {
    int ok;
    char err[600];
    bool pinned[2];
    uint64_t n;
    double total_s;
    double mean_us, median_us, p90_us, p99_us, p999_us, min_us, max_us;
};

static pid_t g_child[2];
static char g_temp_path[POD_PATH_MAX];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cleanup(void)
{
    for (int i = 0; i < 2; i++)
        if (g_child[i] > 0) {
            kill(g_child[i], SIGKILL);
            waitpid(g_child[i], NULL, 0);
            g_child[i] = 0;
        }
    if (g_temp_path[0]) {
        unlink(g_temp_path);
        g_temp_path[0] = 0;
    }
}

static void on_signal(int sig)
{
    /* Only async-signal-safe calls: kill, waitpid, unlink, _exit. */
    for (int i = 0; i < 2; i++)
        if (g_child[i] > 0) {
            kill(g_child[i], SIGKILL);
            waitpid(g_child[i], NULL, 0);
        }
    if (g_temp_path[0]) unlink(g_temp_path);
    _exit(128 + sig);
}

/* The child dies with the parent: the parent removes the region. */
static void die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
}

static bool pin(struct bench *b, int host)
{
    if (b->ncpus[host] == 0) return false;
    pod_err err = {{0}};
    if (cxl_pin_thread(b->cpus[host], b->ncpus[host], &err)) {
        pod_warn("host %d runs unpinned: %s", host, err.msg);
        return false;
    }
    return true;
}

/* ---- host 1: serve the inbox ------------------------------------------------ */

static int server_main(struct bench *b)
{
    pod_log_set_role("ringbench host 1");
    pin(b, 1);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(b->c, 1, CXL_OPEN_CREATE, &err);
    if (!r) {
        pod_error("%s", err.msg);
        return 1;
    }
    struct cxl_ring *own = cxl_ring_create(r, b->slots, &err);
    if (!own) {
        pod_error("%s", err.msg);
        cxl_region_close(r);
        return 1;
    }
    struct cxl_msg m, rep;
    uint64_t idle = 0, last_check = now_ns();
    int rc = 0;
    for (;;) {
        int prc = cxl_ring_poll(own, &m);
        if (prc == CXL_RING_EMPTY) {
            /* Busy polling; now and then make sure the requester is still there. */
            if ((++idle & 4095) == 0 && now_ns() - last_check > 200000000ull) {
                last_check = now_ns();
                if (!cxl_host_alive(r, 0) && cxl_root_get(r, 0, CXL_ROOT_REPLY) != CXL_NULL) {
                    pod_error("host 0 is gone; stopping");
                    rc = 1;
                    break;
                }
            }
            continue;
        }
        if (prc != CXL_RING_OK) {
            pod_error("poll: %s", cxl_ring_strerror(prc));
            rc = 1;
            break;
        }
        if (m.type == MSG_STOP) break;
        memcpy(&rep, &m, CXL_MSG_HDR + m.len); /* echo: same id and payload */
        rep.from_worker = 0;
        int prc2 = cxl_reply_post(r, m.from_host, m.from_worker, &rep);
        if (prc2 != CXL_RING_OK && prc2 != CXL_RING_STALE) {
            pod_error("reply: %s", cxl_ring_strerror(prc2));
            rc = 1;
            break;
        }
    }
    cxl_ring_close(own);
    cxl_region_close(r);
    return rc;
}

/* ---- host 0: send requests, time round trips ---------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest sample with at least q of the samples at or below it. */
static double quantile_us(const uint64_t *v, uint64_t n, double q)
{
    uint64_t k = (uint64_t)(q * (double)n + 0.999999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return (double)v[k - 1] / 1000.0;
}

static int client_run(struct bench *b, struct result *res)
{
    pod_err err = {{0}};
    res->pinned[0] = pin(b, 0);
    struct cxl_region *r = cxl_region_open(b->c, 0, CXL_OPEN_CREATE, &err);
    if (!r) {
        snprintf(res->err, sizeof res->err, "host 0: %s", err.msg);
        return 1;
    }
    int rc = 1;
    uint64_t *lat = NULL;
    struct cxl_ring *to = NULL;
    struct cxl_replies *ra = cxl_reply_area_create(r, 1, &err);
    if (!ra) goto out;
    to = cxl_ring_attach(r, 1, 20000, &err);
    if (!to) goto out;
    lat = malloc(b->messages * sizeof *lat);
    if (!lat) {
        pod_err_set(&err, "out of memory for %llu samples", (unsigned long long)b->messages);
        goto out;
    }
    struct cxl_msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = MSG_REQ;
    req.len = (uint16_t)b->payload;
    uint64_t total = b->warmup + b->messages, t_start = 0;
    for (uint64_t i = 0; i < total; i++) {
        if (i == b->warmup) t_start = now_ns();
        for (unsigned j = 0; j < b->payload; j++) req.data[j] = (uint8_t)(i + j);
        uint64_t t0 = now_ns();
        req.req_id = cxl_reply_arm(ra, 0);
        int src;
        while ((src = cxl_ring_send(to, &req)) == CXL_RING_FULL) { /* not with one in flight */ }
        if (src != CXL_RING_OK) {
            pod_err_set(&err, "send: %s", cxl_ring_strerror(src));
            goto out;
        }
        int wrc = cxl_reply_wait(ra, 0, req.req_id, 1, 10000000, &rep, NULL, NULL, &err);
        uint64_t t1 = now_ns();
        if (wrc != CXL_RING_OK) goto out;
        if (rep.req_id != req.req_id || rep.len != req.len ||
            memcmp(rep.data, req.data, req.len) != 0) {
            pod_err_set(&err, "round trip %llu: the reply does not echo the request",
                        (unsigned long long)i);
            goto out;
        }
        if (i >= b->warmup) lat[i - b->warmup] = t1 - t0;
    }
    uint64_t t_end = now_ns();
    uint64_t n = b->messages;
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) sum += (double)lat[i];
    qsort(lat, n, sizeof *lat, cmp_u64);
    res->n = n;
    res->total_s = (double)(t_end - t_start) / 1e9;
    res->mean_us = sum / (double)n / 1000.0;
    res->min_us = (double)lat[0] / 1000.0;
    res->median_us = quantile_us(lat, n, 0.5);
    res->p90_us = quantile_us(lat, n, 0.9);
    res->p99_us = quantile_us(lat, n, 0.99);
    res->p999_us = quantile_us(lat, n, 0.999);
    res->max_us = (double)lat[n - 1] / 1000.0;
    rc = 0;
out:
    if (to) {
        struct cxl_msg stop = {.type = MSG_STOP};
        uint64_t dl = now_ns() + 1000000000ull;
        while (cxl_ring_send(to, &stop) == CXL_RING_FULL && now_ns() < dl) {}
    }
    if (rc) snprintf(res->err, sizeof res->err, "host 0: %s", err.msg);
    free(lat);
    cxl_ring_close(to);
    cxl_reply_area_close(ra);
    cxl_region_close(r);
    return rc;
}

static int client_main(struct bench *b)
{
    pod_log_set_role("ringbench host 0");
    struct result res;
    memset(&res, 0, sizeof res);
    int rc = client_run(b, &res);
    res.ok = rc == 0;
    ssize_t w = write(b->result_fd, &res, sizeof res);
    return rc || w != (ssize_t)sizeof res;
}

/* ---- the parent --------------------------------------------------------------- */

static int make_temp_config(struct pod_config *c, bool sim)
{
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "poddb-ringbench (temporary pod)");
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(c->region.path, sizeof c->region.path, "/dev/shm/poddb-ringbench-%d-%ld-%d",
                 (int)getpid(), (long)time(NULL), attempt);
        int fd = open(c->region.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            snprintf(g_temp_path, sizeof g_temp_path, "%s", c->region.path);
            break;
        }
        if (errno != EEXIST) {
            fprintf(stderr, "poddb-ringbench: cannot create %s: %s\n", c->region.path,
                    strerror(errno));
            return -1;
        }
    }
    if (!g_temp_path[0]) return -1;
    c->region.kind = POD_REGION_SHM;
    c->region.size = 1ull << 30; /* sparse: only touched pages cost memory */
    c->region.hwcc_budget = 8ull << 20;
    c->region.numa_node = -1;
    c->region.simulate_noncoherent = sim;
    c->nhosts = 2;
    for (int h = 0; h < 2; h++) {
        c->hosts[h].workers = 1;
        c->hosts[h].loggers = 0;
        snprintf(c->hosts[h].socket_path, POD_PATH_MAX, "/tmp/poddb-ringbench-%d-%d.sock",
                 (int)getpid(), h); /* never created: the benchmark runs no server */
        snprintf(c->hosts[h].log_dir, POD_PATH_MAX, "/tmp/poddb-ringbench-log-%d", h);
    }
    c->engine.epoch_ms = 10;
    c->engine.moveout_threshold = 0.9;
    c->engine.coherence = POD_COH_FULL;
    c->engine.phantom_protection = true;
    return 0;
}

static bool cpu_available(int cpu)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 && cpu >= 0 && cpu < CPU_SETSIZE &&
           CPU_ISSET(cpu, &set);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return false;
    *out = v;
    return true;
}

static void print_table(const struct bench *b, const struct result *res, double load)
{
    const struct pod_config *c = b->c;
    printf("poddb-ringbench: %llu round trips (after %llu warm-up), payload %u B, %u-slot ring\n",
           (unsigned long long)res->n, (unsigned long long)b->warmup, b->payload, b->slots);
    printf("  region   %s (%s)\n", c->region.path, b->temp ? "temporary, removed" : "from config");
    printf("  SWcc     %s; flush=%s writeback=%s\n",
           c->region.simulate_noncoherent ? "simulated non-coherent" : "real (coherent hardware)",
           cxl_flush_impl_name(), cxl_writeback_impl_name());
    for (int h = 0; h < 2; h++) {
        printf("  host %d   ", h);
        if (!res->pinned[h] || b->ncpus[h] == 0) {
            printf("not pinned\n");
            continue;
        }
        printf("CPU%s", b->ncpus[h] > 1 ? "s" : "");
        for (int i = 0; i < b->ncpus[h]; i++) printf("%s%d", i ? "," : " ", b->cpus[h][i]);
        printf("\n");
    }
    printf("  round trip (us): median %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
           res->median_us, res->p90_us, res->p99_us, res->p999_us, res->max_us);
    printf("                   min %.2f  mean %.2f  (%.0f round trips/s)\n", res->min_us,
           res->mean_us, (double)res->n / res->total_s);
    bool met = res->median_us < 10.0 && res->p99_us < 100.0;
    printf("  target median < 10 us and p99 < 100 us: %s\n", met ? "met" : "NOT met");
    /* The tail is mostly other processes taking the benchmark's CPUs. */
    printf("  load average before the run: %.2f\n", load);
}

/* One JSON line (written directly: every value is a number or a fixed word,
 * and microseconds read better with three decimals than with %.17g). */
static void print_json(const struct bench *b, const struct result *res, double load)
{
    printf("{\"tool\":\"poddb-ringbench\",\"messages\":%llu,\"warmup\":%llu,\"payload\":%u,"
           "\"slots\":%u,\"swcc\":\"%s\",\"flush\":\"%s\",\"writeback\":\"%s\",\"cpus\":[",
           (unsigned long long)res->n, (unsigned long long)b->warmup, b->payload, b->slots,
           b->c->region.simulate_noncoherent ? "simulated" : "real", cxl_flush_impl_name(),
           cxl_writeback_impl_name());
    for (int h = 0; h < 2; h++) {
        printf("%s", h ? "," : "");
        if (!res->pinned[h] || b->ncpus[h] == 0) {
            printf("null");
            continue;
        }
        if (b->ncpus[h] == 1) {
            printf("%d", b->cpus[h][0]);
            continue;
        }
        printf("[");
        for (int i = 0; i < b->ncpus[h]; i++) printf("%s%d", i ? "," : "", b->cpus[h][i]);
        printf("]");
    }
    printf("],\"median_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
           "\"max_us\":%.3f,\"min_us\":%.3f,\"mean_us\":%.3f,\"round_trips_per_s\":%.0f,"
           "\"loadavg_before\":%.2f,\"target_met\":%s}\n",
           res->median_us, res->p90_us, res->p99_us, res->p999_us, res->max_us, res->min_us,
           res->mean_us, (double)res->n / res->total_s, load,
           res->median_us < 10.0 && res->p99_us < 100.0 ? "true" : "false");
}

int main(int argc, char **argv)
{
    pod_log_set_role("poddb-ringbench");
    if (!getenv("PODDB_LOG")) pod_log_set_level(POD_LOG_WARN);
    static const struct option opts[] = {{"conf", required_argument, 0, 'c'},
                                         {"messages", required_argument, 0, 'n'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"payload", required_argument, 0, 'p'},
                                         {"slots", required_argument, 0, 's'},
                                         {"cpus", required_argument, 0, 'C'},
                                         {"simulate", no_argument, 0, 'S'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    struct bench b = {.messages = 100000, .warmup = 10000, .payload = 64, .slots = 256};
    const char *conf = NULL, *cpus = NULL;
    bool json = false, sim = false;
    uint64_t v;
    int o;
    while ((o = getopt_long(argc, argv, "c:n:w:p:s:jh", opts, NULL)) != -1) {
        switch (o) {
        case 'c': conf = optarg; break;
        case 'n':
            if (!parse_u64(optarg, &v) || v < 1 || v > 100000000) {
                fprintf(stderr, "poddb-ringbench: --messages must be 1..100000000, not '%s'\n",
                        optarg);
                return 2;
            }
            b.messages = v;
            break;
        case 'w':
            if (!parse_u64(optarg, &v) || v > 100000000) {
                fprintf(stderr, "poddb-ringbench: --warmup must be 0..100000000, not '%s'\n",
                        optarg);
                return 2;
            }
            b.warmup = v;
            break;
        case 'p':
            if (!parse_u64(optarg, &v) || v > CXL_MSG_MAX) {
                fprintf(stderr, "poddb-ringbench: --payload must be 0..%d bytes, not '%s' (a "
                                "message is one %d-byte slot)\n",
                        CXL_MSG_MAX, optarg, CXL_MSG_SLOT);
                return 2;
            }
            b.payload = (unsigned)v;
            break;
        case 's':
            if (!parse_u64(optarg, &v) || v < CXL_RING_MIN_SLOTS || v > CXL_RING_MAX_SLOTS ||
                (v & (v - 1))) {
                fprintf(stderr, "poddb-ringbench: --slots must be a power of two in %u..%u, "
                                "not '%s'\n",
                        CXL_RING_MIN_SLOTS, CXL_RING_MAX_SLOTS, optarg);
                return 2;
            }
            b.slots = (unsigned)v;
            break;
        case 'C': cpus = optarg; break;
        case 'S': sim = true; break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-ringbench: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    if (conf && sim) {
        fprintf(stderr, "poddb-ringbench: --simulate applies to the temporary region only; set "
                        "region.simulate_noncoherent in %s instead\n",
                conf);
        return 2;
    }

    /* CPUs: --cpus, else the config's lists, else 0 and 1 when present. */
    if (cpus && strcmp(cpus, "none") == 0) {
        b.ncpus[0] = b.ncpus[1] = 0;
    } else if (cpus) {
        int a, c2;
        char tail;
        if (sscanf(cpus, "%d,%d%c", &a, &c2, &tail) != 2 || a < 0 || c2 < 0) {
            fprintf(stderr, "poddb-ringbench: --cpus wants two CPU numbers 'A,B' or 'none', "
                            "not '%s'\n",
                    cpus);
            return 2;
        }
        b.cpus[0][0] = a;
        b.cpus[1][0] = c2;
        b.ncpus[0] = b.ncpus[1] = 1;
    }

    struct pod_config *c = calloc(1, sizeof *c);
    if (!c) return 1;
    pod_err err = {{0}};
    if (conf) {
        if (pod_config_load(conf, c, &err)) {
            fprintf(stderr, "poddb-ringbench: %s\n", err.msg);
            free(c);
            return 1;
        }
        if (c->nhosts < 2) {
            fprintf(stderr, "poddb-ringbench: %s describes %d host; the benchmark needs two\n",
                    conf, c->nhosts);
            free(c);
            return 1;
        }
        if (!cpus)
            for (int h = 0; h < 2; h++) {
                b.ncpus[h] = c->hosts[h].ncpus;
                memcpy(b.cpus[h], c->hosts[h].cpus, sizeof b.cpus[h]);
            }
    } else {
        if (make_temp_config(c, sim)) {
            free(c);
            return 1;
        }
        b.temp = true;
    }
    if (!cpus && b.ncpus[0] == 0 && b.ncpus[1] == 0 && cpu_available(0) && cpu_available(1)) {
        b.cpus[0][0] = 0;
        b.cpus[1][0] = 1;
        b.ncpus[0] = b.ncpus[1] = 1;
    }
    b.c = c;

    double load = -1;
    getloadavg(&load, 1);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "poddb-ringbench: pipe: %s\n", strerror(errno));
        cleanup();
        free(c);
        return 1;
    }
    b.result_fd = pfd[1];
    pid_t parent = getpid();
    fflush(NULL);
    for (int h = 1; h >= 0; h--) { /* the server first: it publishes the ring */
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "poddb-ringbench: fork: %s\n", strerror(errno));
            cleanup();
            free(c);
            return 1;
        }
        if (pid == 0) {
            die_with_parent(parent);
            close(pfd[0]);
            if (h == 1) close(pfd[1]); /* only host 0 reports */
            _exit(h == 1 ? server_main(&b) : client_main(&b));
        }
        g_child[h] = pid;
    }
    close(pfd[1]);

    struct result res;
    memset(&res, 0, sizeof res);
    ssize_t got = read(pfd[0], &res, sizeof res);
    close(pfd[0]);
    int status[2] = {0, 0};
    /* Host 0 sent the stop message; give host 1 a moment, then make sure. */
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 5000; i++) {
            if (waitpid(g_child[h], &status[h], WNOHANG) == g_child[h]) {
                g_child[h] = 0;
                break;
            }
            usleep(1000);
        }
    }
    cleanup();
    /* Host 1 pins itself the same way (and warns when it cannot). */
    res.pinned[1] = b.ncpus[1] > 0;
    for (int i = 0; i < b.ncpus[1]; i++) res.pinned[1] = res.pinned[1] && cpu_available(b.cpus[1][i]);
    int rc = 0;
    if (got != (ssize_t)sizeof res || !res.ok) {
        fprintf(stderr, "poddb-ringbench: %s\n",
                got == (ssize_t)sizeof res ? res.err : "host 0 ended without a result");
        rc = 1;
    } else if (json) {
        print_json(&b, &res, load);
    } else {
        print_table(&b, &res, load);
    }
    free(c);
    return rc;
}
