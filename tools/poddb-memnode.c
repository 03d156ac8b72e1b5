/* poddb-memnode: a memory node of the disaggregated-memory mode. It allocates
 * a pool, registers it with libfabric, runs the progress loop that software
 * providers need at the target (shm, rxm), and serves bootstrap over a Unix
 * socket: its fabric address, the pool's key, base and size, the addressing
 * mode, and the pod it belongs to. Compute nodes do everything else with
 * one-sided operations (src/store/dm_store.c; layout in src/dm/pool.h). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conf/config.h"
#include "dm/fabric.h"
#include "dm/pool.h"
#include "util/clock.h"

#define MAX_CLIENTS 256

/* Set by the signal handler, read by the main and progress threads: atomic. */
static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; __atomic_store_n(&stop, 1, __ATOMIC_RELAXED); }
static bool stopping(void) { return __atomic_load_n(&stop, __ATOMIC_RELAXED); }

static void usage(FILE *out)
{
    fprintf(out,
            "usage: poddb-memnode --socket PATH --pod NAME [--pool-size SIZE] [--provider P]\n"
            "                     [--addr IP]\n"
            "A memory node of the disaggregated-memory mode: a pool that compute nodes reach\n"
            "with one-sided libfabric READ, WRITE, CAS and FAA.\n"
            "  --socket PATH     Unix socket for bootstrap (refused if a memory node serves it)\n"
            "  --pod NAME        the pod this memory node belongs to; clients of another are refused\n"
            "  --pool-size SIZE  pool bytes, e.g. 256MiB, 1GiB (default 256MiB; huge pages if possible)\n"
            "  --provider P      libfabric provider: shm (default), tcp;ofi_rxm, verbs;ofi_rxm\n"
            "  --addr IP         address to bind on IP providers (default 127.0.0.1)\n"
            "SIGTERM or SIGINT: a clean exit. A client that dies does not stop it.\n");
}

struct progress_arg {
    struct fab *f;
};

static void *progress_main(void *p)
{
    struct progress_arg *a = p;
    unsigned errors = 0;
    while (!stopping()) {
        pod_err e;
        if (fab_progress(a->f, 10, &e) != 0 && errors++ < 20)
            fprintf(stderr, "poddb-memnode: %s (serving on)\n", e.msg);
    }
    return NULL;
}

/* A socket path that no running memory node serves: a stale socket is
 * removed, anything else there is refused. */
static int claim_socket(const char *path, int *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        fprintf(stderr, "poddb-memnode: socket path %s is longer than %zu bytes\n", path,
                sizeof sa.sun_path - 1);
        return -1;
    }
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            fprintf(stderr, "poddb-memnode: socket path %s is taken by a file that is not a "
                    "socket; not removing it\n", path);
            return -1;
        }
        int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof sa) == 0) {
            close(c);
            fprintf(stderr, "poddb-memnode: socket path %s is in use by a running process\n",
                    path);
            return -1;
        }
        if (c >= 0) close(c);
        unlink(path); /* stale */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
        fprintf(stderr, "poddb-memnode: socket %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    *out = fd;
    return 0;
}

static void *alloc_pool(uint64_t size, bool *huge)
{
    const uint64_t h2m = 2ull << 20;
    *huge = false;
    if (size % h2m == 0) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
        if (p != MAP_FAILED) {
            *huge = true;
            return p;
        }
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, size, MADV_HUGEPAGE);
    return p;
}

static bool read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        got += (size_t)n;
    }
    return true;
}

static bool write_full(int fd, const void *buf, size_t len)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = send(fd, (const char *)buf + put, len - put, MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        put += (size_t)n;
    }
    return true;
}

struct memnode {
    const char *pod, *provider;
    struct fab *f;
    struct fab_region region;
    unsigned char name[FAB_NAME_MAX];
    size_t name_len;
    struct dm_cn_slot *slots; /* the pool's compute-node slots */
    int slot_fd[DM_CN_SLOTS]; /* the connection of each slot's compute node, or -1 */
};

/* The memory node alone writes a slot's conn word (pool.h): compute nodes
 * read it to learn whether the slot's compute node still lives. Its process
 * is gone when the kernel closed its connection: no lease to guess. */
static void slot_connected(struct memnode *m, unsigned slot, int fd)
{
    m->slot_fd[slot] = fd;
    uint64_t c = m->slots[slot].conn;
    __atomic_store_n(&m->slots[slot].conn, DM_CN_CONNECTED | ((c & ~DM_CN_CONNECTED) + 1),
                     __ATOMIC_RELEASE);
}

static void connection_closed(struct memnode *m, int fd)
{
    for (unsigned s = 1; s < DM_CN_SLOTS; s++)
        if (m->slot_fd[s] == fd) {
            m->slot_fd[s] = -1;
            __atomic_store_n(&m->slots[s].conn, m->slots[s].conn & ~DM_CN_CONNECTED,
                             __ATOMIC_RELEASE);
        }
    close(fd);
}

static pid_t peer_pid(int fd)
{
    struct ucred cr;
    socklen_t l = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 ? cr.pid : -1;
}

/* One client's request: 0 and the connection kept, or -1: close it. */
static int serve(struct memnode *m, int fd)
{
    struct dm_boot_req req;
    struct dm_boot_rep rep = {.magic = DM_BOOT_MAGIC};
    snprintf(rep.pod, sizeof rep.pod, "%s", m->pod);
    snprintf(rep.provider, sizeof rep.provider, "%s", m->provider);
    /* A connection closed before its first byte is a probe of whether the
     * socket is served (tools/pod up and status; another memory node's
     * claim_socket): not worth a line in the log. */
    char first;
    if (recv(fd, &first, 1, MSG_PEEK) == 0) return -1;
    if (!read_full(fd, &req, sizeof req)) {
        fprintf(stderr, "poddb-memnode: a connection (pid %d) closed without a bootstrap request\n",
                (int)peer_pid(fd));
        return -1;
    }
    req.pod[DM_POD_NAME_MAX - 1] = 0;
    req.provider[sizeof req.provider - 1] = 0;
    if (req.magic != DM_BOOT_MAGIC || req.version != DM_BOOT_VERSION) {
        rep.status = 1;
        snprintf(rep.msg, sizeof rep.msg, "memory node of pod %s: not a bootstrap request of "
                 "version %u", m->pod, DM_BOOT_VERSION);
    } else if (strcmp(req.pod, m->pod) != 0) {
        rep.status = 2;
        snprintf(rep.msg, sizeof rep.msg, "this memory node belongs to pod \"%s\", not to pod "
                 "\"%s\"", m->pod, req.pod);
    } else if (strcmp(req.provider, m->provider) != 0) {
        rep.status = 3;
        snprintf(rep.msg, sizeof rep.msg, "this memory node of pod %s serves provider \"%s\", "
                 "not \"%s\"", m->pod, m->provider, req.provider);
    } else if (req.cn_slot >= DM_CN_SLOTS) {
        rep.status = 4;
        snprintf(rep.msg, sizeof rep.msg, "compute node slot %u is out of range (hosts 0..%u)",
                 req.cn_slot, DM_CN_SLOTS - 2);
    } else if (req.cn_slot && m->slot_fd[req.cn_slot] >= 0) {
        rep.status = 5;
        snprintf(rep.msg, sizeof rep.msg, "a compute node of host %u (pid %d) is connected "
                 "already: two servers of one host?", req.cn_slot - 1,
                 (int)peer_pid(m->slot_fd[req.cn_slot]));
    } else {
        memcpy(rep.name, m->name, m->name_len);
        rep.name_len = (uint32_t)m->name_len;
        rep.region = m->region;
    }
    if (rep.status)
        fprintf(stderr, "poddb-memnode: refused a client (pid %d): %s\n", (int)peer_pid(fd),
                rep.msg);
    /* Before the reply: the compute node reads its connection id next. */
    if (!rep.status && req.cn_slot) slot_connected(m, req.cn_slot, fd);
    if (!write_full(fd, &rep, sizeof rep)) return -1; /* the caller closes: slot let go */
    return rep.status ? -1 : 0;
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *pod = NULL, *provider = "shm", *addr = NULL;
    uint64_t pool_size = 256ull << 20;
    static const struct option lo[] = {
        {"socket", required_argument, 0, 's'},   {"pod", required_argument, 0, 'p'},
        {"pool-size", required_argument, 0, 'z'}, {"provider", required_argument, 0, 'P'},
        {"addr", required_argument, 0, 'a'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 's': sock = optarg; break;
        case 'p': pod = optarg; break;
        case 'P': provider = optarg; break;
        case 'a': addr = optarg; break;
        case 'z':
            if (pod_parse_size(optarg, &pool_size) != 0) {
                fprintf(stderr, "poddb-memnode: --pool-size %s: not a size (e.g. 1GiB)\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !sock || !pod || !*pod) {
        if (optind < argc) fprintf(stderr, "poddb-memnode: unexpected argument %s\n", argv[optind]);
        else fprintf(stderr, "poddb-memnode: --socket and --pod are required\n");
        usage(stderr);
        return 2;
    }
    if (strlen(pod) >= DM_POD_NAME_MAX) {
        fprintf(stderr, "poddb-memnode: pod name %s is longer than %d bytes\n", pod,
                DM_POD_NAME_MAX - 1);
        return 2;
    }
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    if (pool_size < DM_POOL_MIN || pool_size > phys || pool_size >= (1ull << 48)) {
        fprintf(stderr, "poddb-memnode: a pool of %llu bytes is %s (this machine has %llu bytes "
                "of memory; at least %llu)\n", (unsigned long long)pool_size,
                pool_size < DM_POOL_MIN ? "too small" : "too large", (unsigned long long)phys,
                (unsigned long long)DM_POOL_MIN);
        return 1;
    }
    pool_size &= ~(uint64_t)4095;

    signal(SIGPIPE, SIG_IGN);
    int lfd;
    if (claim_socket(sock, &lfd) != 0) return 1;
    if (!strcmp(provider, "shm")) {
        int swept = fab_shm_sweep();
        if (swept)
            printf("poddb-memnode: removed %d shm region%s left by killed processes\n", swept,
                   swept == 1 ? "" : "s");
    }
    int rc = 1;
    bool huge;
    unsigned char *pool = alloc_pool(pool_size, &huge);
    struct memnode m = {.pod = pod, .provider = provider};
    pod_err e;
    pthread_t prog;
    bool prog_started = false;
    if (!pool) {
        fprintf(stderr, "poddb-memnode: cannot allocate a pool of %llu bytes: %s\n",
                (unsigned long long)pool_size, strerror(errno));
        goto out;
    }
    /* The header, before any client can reach the pool. */
    struct dm_pool_header *h = (struct dm_pool_header *)(void *)pool;
    h->magic = DM_POOL_MAGIC;
    h->version = DM_LAYOUT_VERSION;
    h->header_bytes = DM_HEADER_BYTES;
    h->pool_size = pool_size;
    h->cursor = DM_DATA_START;
    snprintf(h->pod, sizeof h->pod, "%s", pod);
    m.slots = (struct dm_cn_slot *)(void *)(pool + DM_CN_SLOTS_OFF);
    /* Connection ids start at this start's time in microseconds: higher
     * than any id an earlier run of this memory node gave (pool.h). */
    uint64_t first_id = (pod_real_ns() / 1000) & DM_CONN_ID_MASK;
    for (unsigned i = 0; i < DM_CN_SLOTS; i++) {
        m.slot_fd[i] = -1;
        m.slots[i].conn = first_id;
    }

    m.f = fab_open(&(struct fab_open_opts){.provider = provider, .node = addr, .server = true,
                                           .staging = 4096}, &e);
    if (!m.f) {
        fprintf(stderr, "poddb-memnode: %s\n", e.msg);
        goto out;
    }
    m.name_len = sizeof m.name;
    if (fab_name(m.f, m.name, &m.name_len, &e) != 0 ||
        fab_expose(m.f, pool, pool_size, &m.region, &e) != 0) {
        fprintf(stderr, "poddb-memnode: %s\n", e.msg);
        goto out;
    }
    /* After fab_open: libfabric's providers install handlers of their own
     * (exit(1) on SIGTERM), which would skip the clean exit. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct progress_arg pa = {m.f};
    if (pthread_create(&prog, NULL, progress_main, &pa) != 0) {
        fprintf(stderr, "poddb-memnode: cannot start the progress thread\n");
        goto out;
    }
    prog_started = true;
    printf("poddb-memnode: pod %s, provider %s, pool %llu bytes (%s), %s addressing, key 0x%llx, "
           "socket %s: ready\n", pod, provider, (unsigned long long)pool_size,
           huge ? "2 MiB huge pages" : "4 KiB pages",
           m.region.base ? "virtual-address" : "offset", (unsigned long long)m.region.key, sock);
    fflush(stdout);

    struct pollfd pfd[MAX_CLIENTS + 1];
    int n = 1;
    pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    while (!stopping()) {
        int r = poll(pfd, (nfds_t)n, 200);
        if (r < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "poddb-memnode: poll: %s\n", strerror(errno));
            break;
        }
        for (int i = n - 1; i >= 1; i--) {
            if (!pfd[i].revents) continue;
            char b[64];
            if (read(pfd[i].fd, b, sizeof b) > 0) continue; /* nothing is expected; ignore */
            connection_closed(&m, pfd[i].fd); /* EOF: the client is gone: the pool stays */
            pfd[i] = pfd[--n];
        }
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd < 0) continue;
            struct timeval tv = {.tv_sec = 2};
            setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            if (n == MAX_CLIENTS + 1 || serve(&m, cfd) != 0) {
                connection_closed(&m, cfd);
                continue;
            }
            pfd[n++] = (struct pollfd){.fd = cfd, .events = POLLIN};
        }
    }
    for (int i = 1; i < n; i++) connection_closed(&m, pfd[i].fd);
    rc = 0;
    printf("poddb-memnode: pod %s: stopping (cursor at %llu of %llu bytes)\n", pod,
           (unsigned long long)__atomic_load_n(&h->cursor, __ATOMIC_ACQUIRE),
           (unsigned long long)pool_size);
out:
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    if (prog_started) pthread_join(prog, NULL);
    fab_close(m.f);
    close(lfd);
    unlink(sock);
    if (pool) munmap(pool, pool_size);
    return rc;
}
