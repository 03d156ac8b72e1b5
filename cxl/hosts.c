/* The host table in the control block: who is attached, and are they alive.
 *
 * A host is alive when its slot says STARTING/RUNNING/STOPPING and:
 *  - on this machine (same kernel boot id): its pid exists with the same
 *    process start time (so a reused pid is not mistaken for it). Only an
 *    answer that the process is gone (no such pid, ENOENT, a zombie) or
 *    another process (another start time) makes it dead: a read of
 *    /proc/PID/stat that fails otherwise (EMFILE, ENOMEM) leaves it alive;
 *  - on another machine of the pod: its heartbeat is younger than
 *    HEARTBEAT_TIMEOUT_NS (hosts of a pod must keep their clocks in sync
 *    within that margin, as NTP does). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cxl/region_priv.h"
#include "util/clock.h"
#include "util/log.h"

#define HEARTBEAT_PERIOD_NS (100ull * 1000 * 1000)
#define HEARTBEAT_TIMEOUT_NS (3ull * 1000 * 1000 * 1000)

uint64_t cxl_now_realtime_ns(void) { return pod_real_ns(); }

/* read(2) of a small file, NUL-terminated; the bytes read, or -1 with errno.
 * No stdio: nothing here may fail for want of a FILE or its buffer. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n;
    do n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    errno = e;
    if (n >= 0) buf[n] = 0;
    return n;
}

void cxl_read_boot_id(char out[40])
{
    memset(out, 0, 40);
    if (read_small("/proc/sys/kernel/random/boot_id", out, 40) < 0) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
}

/* What /proc/PID/stat says of a process. */
enum proc_probe {
    PROC_GONE,    /* no such process, or a zombie (killed, not yet reaped: dead for the pod) */
    PROC_FOUND,   /* alive, with its start time */
    PROC_UNKNOWN, /* the read failed for another reason (no descriptor free, ...) */
};

/* Field 22 of the text after the command name: the start time in clock
 * ticks since boot. The state (field 3) is the first character. */
static bool parse_stat(const char *buf, char *state, uint64_t *start)
{
    const char *p = strrchr(buf, ')'); /* the command name may contain spaces */
    if (!p || p[1] != ' ' || !p[2]) return false;
    *state = p[2];
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return false;
        p++;
    }
    char *end;
    errno = 0;
    *start = strtoull(p, &end, 10);
    return end != p && errno == 0;
}

static enum proc_probe proc_start_time(pid_t pid, uint64_t *start, int *err_no)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    ssize_t n = read_small(path, buf, sizeof buf);
    *err_no = n < 0 ? errno : 0;
    if (n == 0 || (n < 0 && (errno == ENOENT || errno == ESRCH))) return PROC_GONE;
    char state;
    if (n < 0 || !parse_stat(buf, &state, start)) return PROC_UNKNOWN;
    return (state == 'Z' || state == 'X') ? PROC_GONE : PROC_FOUND;
}

/* A failed read says nothing about the host: it is taken as alive (a host
 * declared dead freezes the pod's durable epoch), with one warning. */
static bool alive_unknown(int host, pid_t pid, int err_no)
{
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        pod_warn("cannot read /proc/%d/stat, the process of host %d: %s; the host is taken as "
                 "alive (a failed read never makes a host dead; said once)", (int)pid, host,
                 err_no ? strerror(err_no) : "unexpected contents");
    return true;
}

const char *cxl_host_state_name(uint32_t st)
{
    switch (st) {
    case CXL_HOST_FREE: return "free";
    case CXL_HOST_STARTING: return "starting";
    case CXL_HOST_RUNNING: return "running";
    case CXL_HOST_STOPPING: return "stopping";
    default: return "invalid";
    }
}

bool cxl_host_alive(const struct cxl_region *r, int host)
{
    if (host < 0 || host >= POD_MAX_HOSTS) return false;
    const struct cxl_host_slot *s = &r->ctl->hosts[host];
    uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if (st == CXL_HOST_FREE || st > CXL_HOST_STOPPING) return false;
    if (s->boot_id[0] && strncmp(s->boot_id, r->priv->boot_id, sizeof s->boot_id) == 0) {
        pid_t pid = s->pid;
        if (pid <= 0) return false;
        if (kill(pid, 0) != 0 && errno == ESRCH) return false;
        uint64_t start = 0;
        int err_no;
        switch (proc_start_time(pid, &start, &err_no)) {
        case PROC_GONE: return false;
        case PROC_FOUND: return start == s->proc_start; /* else the pid was reused */
        default: return alive_unknown(host, pid, err_no);
        }
    }
    uint64_t beat = __atomic_load_n(&s->heartbeat_ns, __ATOMIC_ACQUIRE);
    uint64_t now = cxl_now_realtime_ns();
    return beat + HEARTBEAT_TIMEOUT_NS > now;
}

int cxl_live_hosts(const struct cxl_region *r)
{
    int n = 0;
    for (uint32_t h = 0; h < r->sb->nhosts && h < POD_MAX_HOSTS; h++)
        n += cxl_host_alive(r, (int)h);
    return n;
}

bool cxl_host_shares_kernel(const struct cxl_region *r, int host)
{
    if (host < 0 || host >= (int)r->sb->nhosts || host >= POD_MAX_HOSTS) return false;
    const struct cxl_host_slot *s = &r->ctl->hosts[host];
    return strncmp(s->boot_id, r->priv->boot_id, sizeof s->boot_id) == 0;
}

bool cxl_hosts_share_kernel(const struct cxl_region *r)
{
    for (uint32_t h = 0; h < r->sb->nhosts && h < POD_MAX_HOSTS; h++) {
        const struct cxl_host_slot *s = &r->ctl->hosts[h];
        if ((int)h == r->host || !cxl_host_alive(r, (int)h)) continue;
        if (strncmp(s->boot_id, r->priv->boot_id, sizeof s->boot_id) != 0) return false;
    }
    return true;
}

int cxl_host_register(struct cxl_region *r, int host, pod_err *err)
{
    struct cxl_host_slot *s = &r->ctl->hosts[host];
    if (cxl_host_alive(r, host)) {
        pod_err_set(err, "host %d is already running (pid %d%s); a second server for the same "
                    "host id refuses to start",
                    host, s->pid,
                    strncmp(s->boot_id, r->priv->boot_id, sizeof s->boot_id) ? " on another machine"
                                                                               : "");
        return -1;
    }
    /* Without its own start time no host could tell this one alive. */
    uint64_t start = 0;
    int err_no;
    if (proc_start_time(getpid(), &start, &err_no) != PROC_FOUND) {
        pod_err_set(err, "cannot read /proc/%d/stat to register as host %d: %s", (int)getpid(),
                    host, err_no ? strerror(err_no) : "unexpected contents");
        return -1;
    }
    /* The slot is ours: a previous holder is dead. Clear its usage figures. */
    uint64_t now = cxl_now_realtime_ns();
    s->pid = (int32_t)getpid();
    s->proc_start = start;
    memcpy(s->boot_id, r->priv->boot_id, sizeof s->boot_id);
    s->attached_ns = now;
    __atomic_store_n(&s->hwcc_used, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->swcc_used, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->hwcc_objects, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->swcc_objects, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->hwcc_failures, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->swcc_failures, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->heartbeat_ns, now, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->heartbeat, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < CXL_MAX_ROOTS; i++)
        __atomic_store_n(&r->ctl->roots[host][i], CXL_NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, CXL_HOST_STARTING, __ATOMIC_RELEASE);
    return 0;
}

void cxl_host_unregister(struct cxl_region *r)
{
    if (r->host < 0) return;
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    if (s->pid == (int32_t)getpid()) __atomic_store_n(&s->state, CXL_HOST_FREE, __ATOMIC_RELEASE);
}

void cxl_region_set_state(struct cxl_region *r, enum cxl_host_state st)
{
    if (r->host < 0) return;
    __atomic_store_n(&r->ctl->hosts[r->host].state, (uint32_t)st, __ATOMIC_RELEASE);
}

void cxl_region_heartbeat(struct cxl_region *r)
{
    if (r->host < 0) return;
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    __atomic_store_n(&s->heartbeat_ns, cxl_now_realtime_ns(), __ATOMIC_RELEASE);
    __atomic_fetch_add(&s->heartbeat, 1, __ATOMIC_RELEASE);
}

static void *heartbeat_main(void *arg)
{
    struct cxl_region *r = arg;
    struct timespec nap = {0, (long)HEARTBEAT_PERIOD_NS};
    while (!__atomic_load_n(&r->priv->heartbeat_stop, __ATOMIC_ACQUIRE)) {
        cxl_region_heartbeat(r);
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int cxl_heartbeat_start(struct cxl_region *r, pod_err *err)
{
    int rc = pthread_create(&r->priv->heartbeat_thread, NULL, heartbeat_main, r);
    if (rc) {
        pod_err_set(err, "cannot start the heartbeat thread: %s", strerror(rc));
        return -1;
    }
    r->priv->heartbeat_running = true;
    return 0;
}

void cxl_heartbeat_stop(struct cxl_region *r)
{
    if (!r->priv->heartbeat_running) return;
    __atomic_store_n(&r->priv->heartbeat_stop, 1, __ATOMIC_RELEASE);
    pthread_join(r->priv->heartbeat_thread, NULL);
    r->priv->heartbeat_running = false;
}

void cxl_root_publish(struct cxl_region *r, int slot, cxl_off off)
{
    if (r->host < 0 || slot < 0 || slot >= CXL_MAX_ROOTS) return;
    __atomic_store_n(&r->ctl->roots[r->host][slot], off, __ATOMIC_RELEASE);
}

cxl_off cxl_root_get(const struct cxl_region *r, int host, int slot)
{
    if (host < 0 || host >= POD_MAX_HOSTS || slot < 0 || slot >= CXL_MAX_ROOTS) return CXL_NULL;
    return __atomic_load_n(&r->ctl->roots[host][slot], __ATOMIC_ACQUIRE);
}
