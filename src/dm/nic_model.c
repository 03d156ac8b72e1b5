/* The NIC model (nic_model.h). Times are CLOCK_MONOTONIC nanoseconds, which
 * every process of the machine reads alike, so a schedule in a shared file
 * is one clock for all the compute nodes that use it. A reservation is a
 * CAS loop on the class's "next free" word: start at the later of the
 * batch's arrival and the word, end cost_c later, publish the end. Costs are
 * rounded up to whole nanoseconds (at most 1 ns per class per batch too
 * slow). */
#include "dm/nic_model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/cpu.h"
#include "util/fsperm.h"
#include "util/lanes.h"

#define MAX_NODES 16
#define SPIN_NS 100000ull      /* the last 100 us of a wait are spun */
#define STALE_NS 1000000000ull /* a schedule a second ahead is not this boot's: restart it */
#define SCHEDULE_BYTES 4096

enum { C_ATOMIC, C_RW, C_BYTES, NCLASSES };

/* A memory node's schedule: the end of the last reservation per class. */
struct schedule {
    uint64_t next_free[NCLASSES];
};

struct nic_model {
    struct nic_model_params p;
    uint64_t half_rtt_ns;
    double ns_per[NCLASSES]; /* per op, per op, per byte */
    struct schedule *node[MAX_NODES];
    bool shared[MAX_NODES];  /* node[i] is a mapping of a shared file, else malloc'd */
};

static bool rate_ok(double v) { return isfinite(v) && v > 0; }

struct nic_model *nic_model_new(const struct nic_model_params *p, pod_err *err)
{
    if (!(isfinite(p->rtt_us) && p->rtt_us >= 0 && p->rtt_us <= 1e6) ||
        !rate_ok(p->atomic_mops) || !rate_ok(p->rw_mops) || !rate_ok(p->gbps)) {
        pod_err_set(err, "NIC model: rtt %g us, atomics %g Mops/s, READ/WRITE %g Mops/s, %g Gb/s: "
                    "the round trip must be 0..1000000 us and every rate above 0", p->rtt_us,
                    p->atomic_mops, p->rw_mops, p->gbps);
        return NULL;
    }
    struct nic_model *m = calloc(1, sizeof *m);
    if (!m) {
        pod_err_set(err, "NIC model: out of memory");
        return NULL;
    }
    m->p = *p;
    m->half_rtt_ns = (uint64_t)llround(p->rtt_us * 500.0);
    m->ns_per[C_ATOMIC] = 1e3 / p->atomic_mops;
    m->ns_per[C_RW] = 1e3 / p->rw_mops;
    m->ns_per[C_BYTES] = 8.0 / p->gbps;
    return m;
}

void nic_model_free(struct nic_model *m)
{
    if (!m) return;
    for (int i = 0; i < MAX_NODES; i++) {
        if (m->shared[i]) munmap(m->node[i], SCHEDULE_BYTES);
        else free(m->node[i]);
    }
    free(m);
}

void nic_model_schedule_path(const char *pod, const char *memnode, char *buf, unsigned len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *s = (const unsigned char *)memnode; *s; s++)
        h = (h ^ *s) * 0x100000001b3ull;
    snprintf(buf, len, "/dev/shm/poddb-nic1-%s-%016llx", pod, (unsigned long long)h);
}

static struct schedule *map_shared(const char *path, pod_err *err)
{
    int fd = pod_create_private(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        pod_err_set(err, "NIC model: cannot open the schedule %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        pod_err_set(err, "NIC model: fstat %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (pod_check_trusted("NIC model schedule", path, &st, err) != 0) {
        close(fd);
        return NULL;
    }
    /* A fresh file is zero: every class free since boot. Growing it again
     * keeps what another compute node wrote. */
    if (st.st_size < SCHEDULE_BYTES && ftruncate(fd, SCHEDULE_BYTES) != 0) {
        pod_err_set(err, "NIC model: cannot size the schedule %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, SCHEDULE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        pod_err_set(err, "NIC model: cannot map the schedule %s: %s", path, strerror(errno));
        return NULL;
    }
    return p;
}

int nic_model_attach(struct nic_model *m, int node, const char *pod, const char *memnode,
                     pod_err *err)
{
    if (node < 0 || node >= MAX_NODES || m->node[node]) {
        pod_err_set(err, "NIC model: memory node %d is out of range or attached twice", node);
        return -1;
    }
    if (!pod) {
        m->node[node] = calloc(1, sizeof *m->node[node]);
        if (!m->node[node]) pod_err_set(err, "NIC model: out of memory");
        return m->node[node] ? 0 : -1;
    }
    char path[256];
    nic_model_schedule_path(pod, memnode ? memnode : "", path, sizeof path);
    if (!(m->node[node] = map_shared(path, err))) return -1;
    m->shared[node] = true;
    return 0;
}

/* Reserve cost_ns of a class from arrive on: its end. */
static uint64_t reserve(uint64_t *next_free, uint64_t arrive, uint64_t cost_ns)
{
    uint64_t old = __atomic_load_n(next_free, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t start = old > arrive && old - arrive < STALE_NS ? old : arrive;
        if (__atomic_compare_exchange_n(next_free, &old, start + cost_ns, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return start + cost_ns;
    }
}

uint64_t nic_model_done_at(struct nic_model *m, int node, const struct nic_batch *b,
                           uint64_t posted_ns)
{
    if (!m) return posted_ns;
    uint64_t arrive = posted_ns + m->half_rtt_ns, end = arrive;
    struct schedule *s = node >= 0 && node < MAX_NODES ? m->node[node] : NULL;
    if (!s) return end + m->half_rtt_ns;
    const double amount[NCLASSES] = {[C_ATOMIC] = b->atomics, [C_RW] = b->rw,
                                     [C_BYTES] = (double)b->bytes};
    for (int c = 0; c < NCLASSES; c++) {
        if (amount[c] <= 0) continue;
        uint64_t e = reserve(&s->next_free[c], arrive, (uint64_t)ceil(amount[c] * m->ns_per[c]));
        if (e > end) end = e;
    }
    return end + m->half_rtt_ns;
}

uint64_t nic_model_wait_until(uint64_t t)
{
    uint64_t t0 = pod_mono_ns(), now = t0;
    if (lanes_count() > 1) { /* the thread's other lanes run meanwhile */
        lanes_sleep_ns(t > now ? t - now : 0);
        return pod_mono_ns() - t0;
    }
    while (now < t) {
        if (t - now > 2 * SPIN_NS) {
            uint64_t ns = t - now - SPIN_NS;
            struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                                  .tv_nsec = (long)(ns % 1000000000ull)};
            nanosleep(&ts, NULL);
        } else {
            pod_cpu_relax();
        }
        now = pod_mono_ns();
    }
    return now - t0;
}
