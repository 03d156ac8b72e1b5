/* The server's event loop.
 *
 * Threads: the main thread runs an epoll loop over the listeners, the client
 * connections, an eventfd that workers ring when replies are ready, and a
 * signalfd for SIGTERM/SIGINT. It reads and decodes frames, answers framing
 * and lookup errors and sys.auth (a TCP connection's token: token.h) itself,
 * and queues calls; the host's worker threads take
 * calls off the queue, run them (pod_call), encode the reply into the
 * connection's output buffer and ring the eventfd; the main thread writes.
 *
 * A connection lives until the client closes it (or it sends unframeable
 * bytes, or passes a limit) AND no call of it is still queued or running:
 * workers hold a reference. A connection whose unsent replies pass its
 * output mark (OUT_HIGH, less under a small server.max_conn_buffered), or
 * with server.max_calls_per_conn calls in flight, stops being read until
 * they drain (backpressure: everyone else keeps being served).
 *
 * Limits (docs/configuration.md, "server"): what each connection makes the
 * server hold is counted in bytes (conn.bytes, and their sum in
 * info.buffered): its partial input, the copies of its calls queued or
 * running, its unsent replies and its replies held for group commit. Pausing
 * the reads bounds what a client can send, but not the replies of the calls
 * it already sent: a connection over server.max_conn_buffered, or the one
 * that holds the most while the server is over server.max_buffered, is sent
 * an error frame (request id 0, POD_E_LIMIT, naming the limit) and closed
 * (conn_kill): nothing more is read, its replies and calls not yet started
 * are dropped. After large frees the allocators give memory back to the
 * system (trim_memory).
 *
 * Group commit (docs/durability.md): when the host logs, the reply of a call
 * is not written at once but held in its worker's queue with the epoch it
 * must wait for (its commit epoch; for a call that did not commit, the epoch
 * it ended in, since what it read may not be durable yet). The epoch thread
 * rings an eventfd each time the persisted durable epoch grows, and the loop
 * moves every held reply whose epoch is below it to its connection. A call
 * with POD_CALL_EARLY_REPLY (or engine.reply_before_durable) is answered at
 * once: that reply promises nothing about durability.
 *
 * Shutdown (SIGTERM/SIGINT): stop accepting, stop reading, let queued and
 * running calls finish (bounded), stop workers, wait (bounded) until the held
 * replies are durable and flush what can be written, stop the loggers, leave
 * the region (the host slot goes back to free). */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <mimalloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cxl/region.h"
#include "dm/nic_model.h"
#include "engine/result.h"
#include "engine/watchdog.h"
#include "engine/worker.h"
#include "log/log.h"
#include "log/txlog.h"
#include "net/proto.h"
#include "pod/pod.h"
#include "server/startcheck.h"
#include "server/token.h"
#include "store/dm_store.h"
#include "txn/txn.h"
#include "storage/row_slab.h"
#include "util/lanes.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/cpu.h"

#define MAX_ARGS 4096
/* Unsent replies above which a connection is not read, and below which it is
 * read again; at most a quarter and a 32nd of server.max_conn_buffered. */
#define OUT_HIGH (8u << 20)
#define OUT_LOW (1u << 20)
#define READ_CHUNK 65536
/* A buffer this large is given back once it is empty (or, for input, holds
 * less than a read): a connection that once moved a large frame does not
 * keep its memory. */
#define SHRINK_ABOVE (4u * READ_CHUNK)
/* A connection closed for a limit gets this long to take its error frame. */
#define KILL_LINGER_NS (10ull * 1000 * 1000 * 1000)
/* Memory is given back to the system once this much less is held than at
 * the peak since the last time, at most once a second. */
#define TRIM_AFTER_BYTES (16ull << 20)
#define TRIM_EVERY_NS (1000ull * 1000 * 1000)
#define WARN_EVERY_NS (10ull * 1000 * 1000 * 1000)
#define SHUTDOWN_GRACE_MS 10000
/* The loop sleeps at most LOOP_SLEEP_MS. A wake-up more than STALL_SLACK_NS
 * later than it asked for means that the server did not run (a stopped or
 * starved process, a paused machine): that time is not counted against a
 * held reply's engine.durable_wait_ms, since the epoch thread did not run
 * either and the durable epoch could not move. Over STALL_WARN_NS: logged. */
#define LOOP_SLEEP_MS 1000
#define STALL_SLACK_NS (1000ull * 1000 * 1000)
#define STALL_WARN_NS (5000ull * 1000 * 1000)

struct conn {
    int fd;
    int refs;               /* the loop's one + one per queued/running call (atomic) */
    bool closing;           /* no more reads; close once refs drop to the loop's */
    bool reading;           /* EPOLLIN armed */
    bool want_write;        /* EPOLLOUT armed */
    bool flush_queued;      /* on the ready list */
    uint32_t armed;         /* epoll events currently registered */
    int loop_watch;         /* atomic: reading paused or closing; the loop wants every reply */
    bool dead;              /* freed in this batch of events: ignore its events */
    uint8_t auth;           /* enum pod_conn_auth: TCP connections need the token first */
    uint64_t accepted_ns;   /* pod_mono_ns(): server.auth_timeout_ms counts from here */
    uint32_t inflight;      /* calls queued or running (under out_lock) */
    uint64_t bytes;         /* atomic: what it makes the server hold (server.max_conn_buffered) */
    int over;               /* atomic: it passed server.max_conn_buffered; the loop closes it */
    int killed;             /* atomic, set under out_lock: closed for a limit (conn_kill) */
    uint64_t kill_deadline; /* killed: dropped at this pod_mono_ns() even if not written */
    struct pod_buf in;
    pthread_mutex_t out_lock;
    struct pod_buf out;     /* encoded replies; those from out_at on not yet written
                               (under out_lock) */
    size_t out_at;
    size_t out_head;        /* bytes at the start of out that finish a frame partly sent
                               (under out_lock) */
    struct conn *next_ready;
    struct conn *next_released; /* on the loop's list of connections with released replies */
    bool released;
    struct conn *prev, *next; /* all connections */
};

struct request {
    struct request *next;
    struct conn *conn;
    size_t size;            /* its allocation, counted in conn->bytes */
    uint64_t id;
    int proc;
    int nargs;
    uint8_t flags;          /* POD_CALL_EARLY_REPLY */
    pod_value *args;        /* point into frame */
    unsigned char frame[];  /* a copy of the frame */
};

/* A reply waiting for its epoch to become durable (group commit). It holds
 * its call's reference on the connection and counts as in flight. */
struct held_reply {
    struct held_reply *next;
    struct conn *conn;
    uint64_t epoch;         /* released once epoch < the persisted durable epoch */
    uint64_t since;         /* pod_mono_ns() when it was held (engine.durable_wait_ms) */
    uint64_t stalled;       /* the server's stalled_ns then */
    uint64_t id;            /* the call's request id */
    size_t len;
    unsigned char frame[];
};

/* One per worker: its commit epochs never decrease, so the queue is in epoch
 * order and the loop releases a prefix. */
struct held_queue {
    pthread_mutex_t lock;
    struct held_reply *head, *tail;
    size_t len;
    struct running_batch *running; /* the worker's batch of calls (its own; give_back_queued) */
} __attribute__((aligned(64)));

struct pod_server {
    const struct pod_config *conf;
    int host;
    struct pod_server_flags flags;
    struct cxl_region *region;
    pod_db *db;
    struct log_host *log;
    bool hold_replies;          /* the host logs and replies wait for durability */
    struct held_queue *held;    /* [workers] */
    int durable_fd;             /* eventfd rung by the epoch thread */
    struct pod_host *pod;       /* NULL in a pod of one host */
    const struct pod_worker_job *job; /* the background job's hook (NULL: none) */
    void *job_state;            /* what its open returned */
    struct pod_watchdog *watchdog; /* logs calls that run long (engine.slow_call_ms) */
    int epfd, evfd, sigfd, unix_fd, tcp_fd;
    char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct conn *conns;
    /* the call queue */
    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;
    struct request *q_head, *q_tail;
    size_t q_len;
    bool q_stop;
    int q_running;
    /* connections with replies to write, filled by workers */
    pthread_mutex_t ready_lock;
    struct conn *ready;
    bool stopping;
    int nclosing;               /* connections closing, waiting for their calls */
    struct conn *dead;          /* retired during this batch of events */
    int spare_fd;               /* reserved for shedding connections when out of descriptors */
    pod_value args[MAX_ARGS];   /* decoded arguments of the frame being handled */
    struct pod_auth auth;       /* the TCP listener's token (token.h) */
    uint64_t auth_next_ns;      /* the loop's next look for expire_unauthenticated */
    uint64_t shed, shed_warned_ns;
    /* limits (server section of the config) */
    uint64_t max_conn, max_total;
    uint32_t max_calls;
    size_t out_high, out_low;
    int over_total;             /* atomic: a charge passed max_total; the loop was rung */
    uint64_t limit_warned_ns, limit_unwarned;
    /* memory given back (trim_memory) */
    bool mimalloc;              /* malloc is mimalloc's (else glibc's or a sanitizer's) */
    uint64_t peak, trimmed_ns;  /* the loop's: info.buffered's peak since the last trim */
    uint64_t trim_gen;          /* atomic: bumped by each trim; workers follow */
    /* replies held too long (engine.durable_wait_ms) */
    uint64_t durable_wait_ns;   /* 0: wait for ever */
    uint64_t expire_next_ns, durable_warned_ns, durable_unwarned;
    /* how long the server did not run (LOOP_SLEEP_NS): atomic, written by the loop */
    uint64_t stalled_ns, loop_woke_ns;
    struct pod_server_info info;
};

static struct pod_server *g_server;

const struct pod_server_info *pod_server_info(void) { return g_server ? &g_server->info : NULL; }

static void count(uint64_t *c, int64_t d) { __atomic_fetch_add(c, (uint64_t)d, __ATOMIC_RELAXED); }

/* ---- listeners ---------------------------------------------------------------- */

/* bind with the socket file 0660 (the user and its group may connect): the
 * umask makes it so from the start, the chmod whatever the umask was. Other
 * threads create files meanwhile only through pod_create_private, which sets
 * their mode itself. */
static int bind_private(int fd, const struct sockaddr_un *sa)
{
    mode_t old = umask(0117);
    int rc = bind(fd, (const struct sockaddr *)sa, sizeof *sa);
    int e = errno;
    umask(old);
    if (rc == 0 && chmod(sa->sun_path, 0660) != 0) {
        e = errno;
        unlink(sa->sun_path);
        rc = -1;
    }
    errno = e;
    return rc;
}

/* A socket file left by a dead server is removed; one that answers belongs to
 * a live server, and anything but a socket is someone's file (the start
 * checked this before; here it is checked again, when the bind finds the
 * path taken). */
static int listen_unix(struct pod_server *s, const char *path, pod_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        pod_err_set(err, "socket path %s is too long", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pod_err_set(err, "socket: %s", strerror(errno));
        return -1;
    }
    if (bind_private(fd, &sa) != 0) {
        if (errno != EADDRINUSE) {
            pod_err_set(err, "cannot listen on %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        int state = pod_socket_probe(path, err);
        if (state < 0) {
            close(fd);
            return -1;
        }
        if (state == POD_SOCKET_STALE) {
            pod_info("removing stale socket %s", path);
            unlink(path);
        }
        if (bind_private(fd, &sa) != 0) {
            pod_err_set(err, "cannot listen on %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (listen(fd, 512) != 0) {
        pod_err_set(err, "cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        unlink(path);
        return -1;
    }
    snprintf(s->unix_path, sizeof s->unix_path, "%s", path);
    return fd;
}

static int listen_tcp(int port, pod_err *err)
{
    int fd = pod_tcp_bind_loopback(port, SOCK_NONBLOCK, err);
    if (fd >= 0 && listen(fd, 512) != 0) {
        pod_err_set(err, "cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- connections ------------------------------------------------------------ */

/* Arm the events the connection wants; a system call only when they change. */
static void conn_events(struct pod_server *s, struct conn *c)
{
    /* Once closing, the peer's half-close must not be armed: it stays
     * signalled (level-triggered) and would spin the loop. */
    uint32_t want = (c->reading ? EPOLLIN | EPOLLRDHUP : 0) | (c->want_write ? EPOLLOUT : 0);
    if (want == c->armed) return;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->armed = want;
}

/* Out of descriptors, the listener stays readable and epoll would report it
 * again at once: give back the spare descriptor, accept the newcomer and close
 * it at once (it sees the connection closed rather than hanging), take the
 * spare again, and say so at most once a second. */
static bool shed_connection(struct pod_server *s, int lfd)
{
    if (s->spare_fd >= 0) {
        close(s->spare_fd);
        s->spare_fd = -1;
    }
    /* EMFILE comes before the queue is looked at: maybe nobody is waiting. */
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    s->shed++;
    uint64_t now = pod_real_ns();
    if (now - s->shed_warned_ns > 1000000000ull) {
        pod_warn("out of file descriptors: refused %llu connection(s) (raise the limit: ulimit -n)",
                 (unsigned long long)s->shed);
        s->shed_warned_ns = now;
        s->shed = 0;
    }
    return true;
}

static void accept_all(struct pod_server *s, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                if (shed_connection(s, lfd)) continue;
                return;
            }
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                pod_warn("accept: %s", strerror(errno));
            return;
        }
        if (lfd == s->tcp_fd) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->auth = lfd == s->tcp_fd ? POD_CONN_TCP_WAITING : POD_CONN_UNIX;
        c->accepted_ns = pod_mono_ns();
        c->refs = 1;
        c->reading = true;
        c->armed = EPOLLIN | EPOLLRDHUP;
        pthread_mutex_init(&c->out_lock, NULL);
        struct epoll_event ev = {.events = c->armed, .data.ptr = c};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        count(&s->info.connections_total, 1);
        count(&s->info.connections_open, 1);
    }
}

/* ---- what the connections make the server hold ------------------------------ */

/* n more bytes held for c (any thread). When c passes its limit it is marked
 * for the loop (the caller makes sure the loop looks at it: conn_flush);
 * when the server passes its own, the loop is rung (enforce_total). */
static void charge(struct pod_server *s, struct conn *c, size_t n)
{
    uint64_t mine = __atomic_add_fetch(&c->bytes, n, __ATOMIC_RELAXED);
    uint64_t all = __atomic_add_fetch(&s->info.buffered, n, __ATOMIC_RELAXED);
    if (mine > s->max_conn && !__atomic_load_n(&c->over, __ATOMIC_RELAXED))
        __atomic_store_n(&c->over, 1, __ATOMIC_RELEASE);
    if (all > s->max_total && !__atomic_exchange_n(&s->over_total, 1, __ATOMIC_ACQ_REL)) {
        uint64_t one = 1;
        ssize_t w = write(s->evfd, &one, sizeof one);
        (void)w;
    }
}

static void uncharge(struct pod_server *s, struct conn *c, size_t n)
{
    __atomic_sub_fetch(&c->bytes, n, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&s->info.buffered, n, __ATOMIC_RELAXED);
}

static bool conn_over(const struct conn *c) { return __atomic_load_n(&c->over, __ATOMIC_ACQUIRE); }
static bool conn_killed(const struct conn *c)
{
    return __atomic_load_n(&c->killed, __ATOMIC_ACQUIRE);
}

/* An empty buffer that grew large is given back; an input buffer holding
 * less than a read is moved into a small one. */
static void buf_shrink(struct pod_buf *b)
{
    if (b->cap <= SHRINK_ABOVE) return;
    if (!b->len) {
        pod_buf_free(b);
        return;
    }
    if (b->len > READ_CHUNK) return;
    unsigned char *p = malloc(READ_CHUNK);
    if (!p) return;
    memcpy(p, b->p, b->len);
    free(b->p);
    b->p = p;
    b->cap = READ_CHUNK;
}

/* Bytes of c's output not written yet (under out_lock). */
static size_t out_pending(const struct conn *c) { return c->out.len - c->out_at; }

/* n bytes of c's output were written (under out_lock): follow the frame
 * boundaries (conn_kill keeps the rest of a frame partly written). The
 * written bytes leave the front of the buffer once they are as many as
 * those left: each byte is moved once at most on average, however long the
 * backlog of a slow reader (a move of the rest after every send made
 * writing n bytes cost n squared over the socket's buffer size). */
static void out_consume(struct pod_server *s, struct conn *c, size_t n)
{
    for (size_t at = 0; at < n;) {
        if (!c->out_head) {
            /* a frame starts here: its length */
            const unsigned char *f = c->out.p + c->out_at + at;
            c->out_head = 4 + ((size_t)f[0] | (size_t)f[1] << 8 | (size_t)f[2] << 16 |
                               (size_t)f[3] << 24);
        }
        size_t t = n - at < c->out_head ? n - at : c->out_head;
        at += t;
        c->out_head -= t;
    }
    c->out_at += n;
    if (c->out_at == c->out.len) {
        c->out_at = c->out.len = 0;
    } else if (c->out_at >= out_pending(c)) {
        memmove(c->out.p, c->out.p + c->out_at, out_pending(c));
        c->out.len -= c->out_at;
        c->out_at = 0;
    }
    uncharge(s, c, n);
    if (!c->out_at) buf_shrink(&c->out);
}

/* Write c's output (under out_lock) until it is all written or the socket
 * takes no more: 0; -1 when the peer is gone. */
static int out_send(struct pod_server *s, struct conn *c)
{
    while (out_pending(c)) {
        ssize_t n = send(c->fd, c->out.p + c->out_at, out_pending(c), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) out_consume(s, c, (size_t)n);
        else if (n < 0 && errno == EINTR) continue;
        else return n < 0 && errno == EAGAIN ? 0 : -1;
    }
    return 0;
}

/* Drop c's output that is not written (under out_lock). */
static void out_drop(struct pod_server *s, struct conn *c)
{
    uncharge(s, c, out_pending(c));
    c->out.len = c->out_at = c->out_head = 0;
    buf_shrink(&c->out);
}

/* Retire a connection: its descriptor goes at once, its memory at the end of
 * the current batch of epoll events (a later event of the batch may still
 * name it; handlers skip dead connections). */
static void conn_free(struct pod_server *s, struct conn *c)
{
    if (c->closing) s->nclosing--;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = true;
    c->next = s->dead;
    s->dead = c;
    count(&s->info.connections_open, -1);
}

static void free_dead(struct pod_server *s)
{
    while (s->dead) {
        struct conn *c = s->dead;
        s->dead = c->next;
        /* No call of it is left: what it holds is its input and output. */
        uncharge(s, c, __atomic_load_n(&c->bytes, __ATOMIC_RELAXED));
        pod_buf_free(&c->in);
        pod_buf_free(&c->out);
        pthread_mutex_destroy(&c->out_lock);
        free(c);
    }
}

/* Best effort, without blocking: the peer may still read what we owe it. */
static void flush_nowait(struct pod_server *s, struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    out_send(s, c);
    pthread_mutex_unlock(&c->out_lock);
}

/* Stop reading. The connection is freed once no call of it is queued or
 * running, no reply of it waits on the ready list (refs back to the loop's
 * own), and its replies are written (a half-closed client still reads them)
 * or cannot be (the peer is gone). Returns false if c was freed. */
static bool conn_close(struct pod_server *s, struct conn *c)
{
    if (!c->closing) {
        c->closing = true;
        s->nclosing++;
        c->reading = false;
        __atomic_store_n(&c->loop_watch, 1, __ATOMIC_RELEASE);
        shutdown(c->fd, SHUT_RD);
    }
    if (__atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) == 1) {
        flush_nowait(s, c);
        pthread_mutex_lock(&c->out_lock);
        bool pending = out_pending(c) > 0;
        pthread_mutex_unlock(&c->out_lock);
        if (!pending) {
            conn_free(s, c);
            return false;
        }
        c->want_write = true;
    }
    conn_events(s, c);
    return true;
}

static bool process_frames(struct pod_server *s, struct conn *c);
static bool conn_kill(struct pod_server *s, struct conn *c, bool server_limit);

/* Write what is buffered. Called by the loop only. Returns false if c was
 * freed (the peer is gone and nothing of it is pending), or closed for its
 * limit. */
static bool conn_flush(struct pod_server *s, struct conn *c)
{
    if (conn_over(c) && !conn_killed(c)) {
        conn_kill(s, c, false);
        return false;
    }
    pthread_mutex_lock(&c->out_lock);
    bool failed = out_send(s, c) != 0;
    if (failed) out_drop(s, c); /* the peer is gone: what it will never read goes */
    bool backlog = out_pending(c) > 0;
    bool resume = !c->closing && !c->reading && out_pending(c) < s->out_low &&
                  c->inflight < (s->max_calls + 1) / 2;
    pthread_mutex_unlock(&c->out_lock);
    c->want_write = backlog && !failed;
    if (resume && !s->stopping) {
        c->reading = true;
        __atomic_store_n(&c->loop_watch, 0, __ATOMIC_RELEASE);
        /* Frames that arrived while paused are already buffered: no EPOLLIN
         * will announce them. */
        if (c->in.len && !process_frames(s, c)) return false;
    }
    if (failed || (c->closing && !backlog)) return conn_close(s, c);
    conn_events(s, c);
    return true;
}

/* Append an encoded reply and count it, unless the connection was closed for
 * a limit (then it is dropped). charged: its bytes are counted already (a
 * held reply moving to the output): they are let go if it is dropped. From
 * a worker the call is done (inflight--); the worker flushes after its batch.
 * From the loop, the loop flushes. */
static void conn_reply(struct pod_server *s, struct conn *c, const struct pod_buf *frame,
                       bool from_worker, bool charged)
{
    pthread_mutex_lock(&c->out_lock);
    bool kept = false;
    if (!conn_killed(c) && pod_buf_reserve(&c->out, frame->len) == 0) {
        memcpy(c->out.p + c->out.len, frame->p, frame->len);
        c->out.len += frame->len;
        kept = true;
        if (!charged) charge(s, c, frame->len);
    }
    if (!kept && charged) uncharge(s, c, frame->len);
    if (from_worker) c->inflight--;
    pthread_mutex_unlock(&c->out_lock);
}

static void reply_error(struct pod_server *s, struct conn *c, uint64_t id, int status,
                        const char *msg)
{
    struct pod_buf b = {0};
    if (pod_proto_encode_reply(&b, id, status, msg, NULL) == 0) conn_reply(s, c, &b, false, false);
    pod_buf_free(&b);
}

/* ---- the call queue ----------------------------------------------------------- */

static void enqueue(struct pod_server *s, struct request *r)
{
    pthread_mutex_lock(&s->q_lock);
    r->next = NULL;
    if (s->q_tail) s->q_tail->next = r;
    else __atomic_store_n(&s->q_head, r, __ATOMIC_RELEASE);
    s->q_tail = r;
    s->q_len++;
    pthread_cond_signal(&s->q_cond);
    pthread_mutex_unlock(&s->q_lock);
    pod_wake_idle(s->pod);
}

/* Take up to max queued calls for worker w. With block, wait while there
 * are none, the worker has no background job work and the server is not
 * stopping. Returns the number taken; 0 when there are none (without block,
 * or job work arrived); -1 once the server stops and the queue is empty.
 * In a pod an idle worker sleeps on its host's inbox doorbell
 * (pod_idle_sleep): another host's request, a queued call, job work or
 * shutdown wakes it, so an idle pod takes no CPU (every host on one kernel;
 * a host on another kernel cannot ring it, and then it polls as src/pod/pod.h
 * says). Waking it costs the first request a futex wake-up; a worker that
 * just served a request polls on for POD_IDLE_SPIN_NS first (pod_idle_spin),
 * since a remote transaction's next request tends to follow within
 * microseconds. */
struct idle_wait {
    struct pod_server *s;
    struct pod_worker *w;
};

/* The loop gave memory back to the system (trim_memory). mimalloc keeps a
 * heap per thread, and what a worker allocated (replies) returns to the
 * system only when that worker collects its heap: an idle worker does so
 * before it sleeps again. */
static __thread uint64_t tls_trim_seen;
static bool trim_pending(struct pod_server *s)
{
    return __atomic_load_n(&s->trim_gen, __ATOMIC_ACQUIRE) != tls_trim_seen;
}
static void worker_trim(struct pod_server *s)
{
    tls_trim_seen = __atomic_load_n(&s->trim_gen, __ATOMIC_ACQUIRE);
    if (s->mimalloc) mi_collect(true);
}

/* Whether the background job has work for worker w. */
static bool job_has_work(struct pod_server *s, int worker)
{
    return s->job_state && s->job->has_work(s->job_state, worker);
}

static bool worker_has_work(void *arg)
{
    const struct idle_wait *iw = arg;
    return __atomic_load_n(&iw->s->q_head, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&iw->s->q_stop, __ATOMIC_SEQ_CST) ||
           job_has_work(iw->s, iw->w->id) || trim_pending(iw->s);
}

static int dequeue_batch(struct pod_server *s, struct pod_worker *w, struct request **out, int max,
                         bool block)
{
    bool pod = s->db->pod != NULL;
    /* Spin briefly before sleeping: a call arriving within ~20 us is taken
     * without a futex wake-up (the common case under load). */
    bool lanes = lanes_count() > 1; /* this thread's other workers run while this one waits */
    for (int i = 0; block && i < 2000 && !__atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE); i++) {
        if (pod && (i & 63) == 0) pod_serve(w, 16);
        if (lanes) lanes_yield();
        else pod_cpu_relax();
    }
    if (!block && !__atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&s->q_stop, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&s->q_lock);
    uint64_t idle_since = 0; /* the last time this wait served a request (0: not yet asleep) */
    struct idle_wait iw = {s, w};
    lanes_set_idle(true);
    while (block && !s->q_head && !s->q_stop && !job_has_work(s, w->id)) {
        /* About to sleep: hand the log buffer over and publish idle, or the
         * durable epoch (and the replies held for it, maybe our own) would
         * wait for this worker's next commit. Here, under the queue lock,
         * every time: another worker may have taken the call we saw, and
         * serving the inbox may have committed. */
        log_worker_idle_hook(s->db, w->id);
        if (trim_pending(s)) {
            pthread_mutex_unlock(&s->q_lock);
            worker_trim(s);
            pthread_mutex_lock(&s->q_lock);
            continue;
        }
        if (!pod) {
            /* a lane sleeps (the whole thread) only when its thread's other
             * lanes are idle too; else it looks again on its next turn */
            if (lanes && lanes_others_busy()) {
                pthread_mutex_unlock(&s->q_lock);
                lanes_yield();
                pthread_mutex_lock(&s->q_lock);
            } else {
                pthread_cond_wait(&s->q_cond, &s->q_lock);
            }
            continue;
        }
        uint64_t now = pod_mono_ns();
        if (!idle_since) idle_since = now;
        pthread_mutex_unlock(&s->q_lock);
        pod_idle_sleep(w, now - idle_since, worker_has_work, &iw);
        /* pod: after serving another host, poll on before sleeping again (src/pod/pod.h) */
        if (pod_between(w) > 0) {
            pod_idle_spin(w, (void *const *)&s->q_head);
            idle_since = pod_mono_ns();
        }
        pthread_mutex_lock(&s->q_lock);
    }
    lanes_set_idle(false);
    if (!s->q_head && s->q_stop) {
        pthread_mutex_unlock(&s->q_lock);
        return -1;
    }
    int n = 0;
    while (s->q_head && n < max) {
        struct request *r = s->q_head;
        __atomic_store_n(&s->q_head, r->next, __ATOMIC_RELAXED); /* read unlocked by spinners */
        out[n++] = r;
    }
    if (!s->q_head) s->q_tail = NULL;
    s->q_len -= (size_t)n;
    s->q_running += n;
    pthread_mutex_unlock(&s->q_lock);
    return n;
}

static void requests_done(struct pod_server *s, int n)
{
    pthread_mutex_lock(&s->q_lock);
    s->q_running -= n;
    pthread_mutex_unlock(&s->q_lock);
}

/* For the background job's work: stop when calls wait or the server stops. */
static bool worker_yield(void *arg)
{
    struct pod_server *s = arg;
    return __atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&s->q_stop, __ATOMIC_ACQUIRE);
}

/* Job work appeared (or memory was given back): wake the workers sleeping
 * in dequeue_batch. */
static void wake_workers(void *arg)
{
    struct pod_server *s = arg;
    pthread_mutex_lock(&s->q_lock);
    pthread_cond_broadcast(&s->q_cond);
    pthread_mutex_unlock(&s->q_lock);
    pod_wake_idle(s->pod);
}

/* After a batch: write a connection's replies from the worker itself (one
 * send for all of them); whatever the socket does not take goes to the loop. */
static void worker_flush(struct pod_server *s, struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    out_send(s, c);
    /* The loop also re-arms reading after backpressure, closes dead peers
     * and connections over their limit. */
    bool hand_over = (out_pending(c) || __atomic_load_n(&c->loop_watch, __ATOMIC_ACQUIRE) ||
                      conn_over(c)) &&
                     !c->flush_queued;
    if (hand_over) {
        c->flush_queued = true;
        __atomic_fetch_add(&c->refs, 1, __ATOMIC_ACQ_REL); /* the ready list's reference */
    }
    pthread_mutex_unlock(&c->out_lock);
    if (hand_over) {
        pthread_mutex_lock(&s->ready_lock);
        c->next_ready = s->ready;
        s->ready = c;
        pthread_mutex_unlock(&s->ready_lock);
        uint64_t one = 1;
        ssize_t w = write(s->evfd, &one, sizeof one);
        (void)w;
    }
}

#define BATCH 64

/* The epoch a finished call's reply must wait for. */
static uint64_t reply_epoch(struct pod_server *s, struct pod_worker *w, int rc)
{
    /* Committed: its commit epoch. Not committed: what it read was committed
     * in an epoch below the current one. */
    return rc >= 0 ? log_last_commit_epoch(s->db, w->id) : log_host_epoch(s->log);
}

/* The batch of calls a worker runs. Calls [done, at) have finished and
 * their replies are encoded (held ones in hhead..htail) but not yet handed
 * on; [at + 1, n) have not started. */
struct running_batch {
    struct request **r;
    int n, at, done;
    bool held[BATCH];
    struct held_reply *hhead, *htail;
    size_t nheld;
};

/* Hand on what calls [b->done, upto) left: held replies to the worker's
 * queue, the others to their connections (one flush per connection), and
 * drop the calls' references (a held reply keeps its call's reference
 * until it is released). */
static void batch_finish(struct pod_server *s, struct pod_worker *w, struct running_batch *b,
                         int upto)
{
    int from = b->done;
    if (upto <= from) return;
    size_t n = (size_t)(upto - from);
    /* The calls' copies go (below); counted out while every connection is
     * still held by its call or by a held reply not queued yet. */
    for (int i = from; i < upto; i++) uncharge(s, b->r[i]->conn, b->r[i]->size);
    /* A held reply that put its connection over its limit: the loop must
     * hear of it, now, while the reply (not queued yet) holds the
     * connection (the ready list then holds its own reference). */
    for (int i = from; i < upto; i++)
        if (b->held[i] && conn_over(b->r[i]->conn)) worker_flush(s, b->r[i]->conn);
    if (s->hold_replies && n > b->nheld) log_host_waiters_add(s->log, -(int64_t)(n - b->nheld));
    if (b->hhead) {
        struct held_queue *q = &s->held[w->id];
        pthread_mutex_lock(&q->lock);
        if (q->tail) q->tail->next = b->hhead;
        else q->head = b->hhead;
        q->tail = b->htail;
        q->len += b->nheld;
        pthread_mutex_unlock(&q->lock);
    }
    b->hhead = b->htail = NULL;
    b->nheld = 0;
    /* Once queued, a held reply's connection may be gone: not touched. */
    for (int i = from; i < upto; i++) {
        if (b->held[i]) continue;
        bool first = true;
        for (int j = from; j < i && first; j++) first = b->held[j] || b->r[j]->conn != b->r[i]->conn;
        if (first) worker_flush(s, b->r[i]->conn);
    }
    for (int i = from; i < upto; i++) {
        struct request *r = b->r[i];
        if (!b->held[i]) __atomic_fetch_sub(&r->conn->refs, 1, __ATOMIC_RELEASE);
        free(r);
    }
    requests_done(s, (int)n);
    b->done = upto;
}

/* pod_worker.on_retrying: the running call has kept retrying for a while.
 * The calls before it in the batch have their replies handed on now
 * (rather than when the batch ends), and the calls after it go back to the
 * head of the queue, in their order, where another worker finds them: one
 * call that keeps conflicting must not hold up the others while a worker
 * idles. Replies may come in any order (docs/protocol.md). */
static void give_back_queued(struct pod_worker *w, void *arg)
{
    struct pod_server *s = arg;
    struct running_batch *b = s->held[w->id].running;
    if (!b) return;
    batch_finish(s, w, b, b->at);
    if (b->at + 1 >= b->n) return;
    int first = b->at + 1, k = b->n - first;
    if (s->hold_replies) log_host_waiters_add(s->log, -k); /* run_batch counted them */
    for (int i = first; i + 1 < b->n; i++) b->r[i]->next = b->r[i + 1];
    pthread_mutex_lock(&s->q_lock);
    b->r[b->n - 1]->next = s->q_head;
    if (!s->q_head) s->q_tail = b->r[b->n - 1];
    __atomic_store_n(&s->q_head, b->r[first], __ATOMIC_RELEASE);
    s->q_len += (size_t)k;
    s->q_running -= k;
    pthread_cond_broadcast(&s->q_cond);
    pthread_mutex_unlock(&s->q_lock);
    pod_wake_idle(s->pod);
    count(&s->info.calls_handed_back, k);
    b->n = first;
}

/* The message of a reply that waited for epoch e to become durable for
 * longer than engine.durable_wait_ms, or (at_shutdown) until the server
 * shut down. It must not say that the call failed: it may have committed,
 * and may yet become durable. */
static void not_durable_msg(struct pod_server *s, uint64_t e, bool at_shutdown, const char *why,
                            char *buf, size_t len)
{
    char when[96];
    if (at_shutdown)
        snprintf(when, sizeof when, "before the server shut down (");
    else
        snprintf(when, sizeof when, "within %u ms (engine.durable_wait_ms; ",
                 s->conf->engine.durable_wait_ms);
    snprintf(buf, len,
             "not acknowledged: the pod's durable epoch did not pass this call's epoch %llu "
             "%sthis host's durable epoch is %llu): %s. The outcome is unknown: the call may "
             "have committed in memory, but it is not durable and could be lost in a crash",
             (unsigned long long)e, when, (unsigned long long)log_host_persisted(s->log), why);
}

/* Run a batch of calls and hand their replies to the connections (or hold
 * them until their epoch is durable). */
static void run_batch(struct pod_server *s, struct pod_worker *w, struct request **batch, int n,
                      pod_result *res, struct pod_buf *out)
{
    char msg[512];
    struct running_batch b = {.r = batch, .n = n};
    s->held[w->id].running = &b;
    /* Counted as waiting before any is checked against the persisted epoch
     * (on_durable reads the count after that grows). */
    if (s->hold_replies) log_host_waiters_add(s->log, n);
    for (int i = 0; i < b.n; i++) {
        struct request *r = batch[i];
        pod_args args = {r->nargs, r->args};
        b.at = i;
        b.held[i] = false;
        if (conn_killed(r->conn) || conn_over(r->conn)) {
            /* Closed for a limit, or over it (the loop closes it soon): its
             * calls not started yet are dropped. */
            pthread_mutex_lock(&r->conn->out_lock);
            r->conn->inflight--;
            pthread_mutex_unlock(&r->conn->out_lock);
            continue;
        }
        int rc = pod_call(w, r->proc, &args, res, msg, sizeof msg);
        out->len = 0;
        if (pod_proto_encode_reply(out, r->id, rc, rc < 0 ? msg : "", rc < 0 ? NULL : res)) {
            out->len = 0;
            snprintf(msg, sizeof msg, "%s: the result does not fit a %u-byte frame",
                     s->db->procs[r->proc].name, POD_PROTO_MAX_FRAME);
            pod_proto_encode_reply(out, r->id, POD_E_INVALID, msg, NULL);
        }
        /* A call that read and wrote no table (sys.*) has nothing to wait for. */
        if (s->hold_replies && !(r->flags & POD_CALL_EARLY_REPLY) && txn_touched_tables(w->tx)) {
            uint64_t e = reply_epoch(s, w, rc);
            struct held_reply *h;
            if (e >= log_host_persisted(s->log) && (h = malloc(sizeof *h + out->len))) {
                h->next = NULL;
                h->conn = r->conn;
                h->epoch = e;
                h->since = pod_mono_ns();
                h->stalled = __atomic_load_n(&s->stalled_ns, __ATOMIC_RELAXED);
                h->id = r->id;
                h->len = out->len;
                memcpy(h->frame, out->p, out->len);
                charge(s, r->conn, h->len);
                if (b.htail) b.htail->next = h;
                else b.hhead = h;
                b.htail = h;
                b.nheld++;
                b.held[i] = true;
                continue;
            }
            /* Already durable (or no memory to hold it: then wait here,
             * idle, so that our own records can become durable). */
            if (e >= log_host_persisted(s->log)) log_worker_idle_hook(s->db, w->id);
            uint64_t t0 = pod_mono_ns();
            while (e >= log_host_persisted(s->log)) {
                if (s->durable_wait_ns && pod_mono_ns() - t0 >= s->durable_wait_ns) {
                    char why[1024], nd[2048];
                    log_host_why_not_durable(s->log, why, sizeof why);
                    not_durable_msg(s, e, false, why[0] ? why : "the reason is not known", nd,
                                    sizeof nd);
                    out->len = 0;
                    pod_proto_encode_reply(out, r->id, POD_E_NOT_DURABLE, nd, NULL);
                    count(&s->info.not_durable_replies, 1);
                    break;
                }
                struct timespec nap = {0, 100000};
                nanosleep(&nap, NULL);
            }
        }
        conn_reply(s, r->conn, out, true, false);
    }
    batch_finish(s, w, &b, b.n);
    s->held[w->id].running = NULL;
}

/* Calls from the socket first; the background job's work (struct
 * pod_worker_job: the benchmark jobs) in between, which yields as soon as
 * calls are queued. */
static void worker_body(struct pod_worker *w, void *arg)
{
    struct pod_server *s = arg;
    pod_result *res = pod_result_new();
    struct pod_buf out = {0};
    struct request *batch[BATCH];
    /* a thread's lanes share the queued calls between them */
    int max = BATCH / (lanes_count() > 1 ? (int)lanes_count() : 1);
    if (max < 1) max = 1;
    while (res) {
        bool job = job_has_work(s, w->id);
        if (job) s->job->work(s->job_state, w, worker_yield, s);
        int n = dequeue_batch(s, w, batch, max, !job);
        if (n < 0) break;
        if (n > 0) run_batch(s, w, batch, n, res, &out);
        /* After a large result, its buffers go back (a worker that ran one
         * big scan does not keep its size). */
        if (out.cap > SHRINK_ABOVE) pod_buf_free(&out);
        if (res->bytes_cap > SHRINK_ABOVE) {
            pod_result_free(res);
            res = pod_result_new();
        }
    }
    pod_buf_free(&out);
    pod_result_free(res);
}

/* Called from the epoch thread: the persisted durable epoch grew. */
static void on_durable(void *arg, uint64_t persisted)
{
    (void)persisted;
    struct pod_server *s = arg;
    /* Nothing held, nothing to release: the loop sleeps on. A reply held
     * meanwhile was counted before it was checked against the new value
     * (run_batch; the count, the value's store and both loads are seq_cst),
     * so one of the two sees the other. */
    if (log_host_waiters(s->log) <= 0) return;
    uint64_t one = 1;
    ssize_t w = write(s->durable_fd, &one, sizeof one);
    (void)w;
}

/* A call whose reply goes nowhere is done. */
static void call_done(struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    c->inflight--;
    pthread_mutex_unlock(&c->out_lock);
}

/* The loop: hand held replies taken off the queues to their connections, as
 * they are, or (why != NULL) replaced by POD_E_NOT_DURABLE errors saying
 * why (not_durable_msg); their connections are added to *touched
 * (flush_touched). */
static void hand_held(struct pod_server *s, struct held_reply *list, const char *why,
                      bool at_shutdown, struct conn **touched)
{
    char msg[2048];
    struct pod_buf err = {0};
    while (list) {
        struct held_reply *h = list;
        list = h->next;
        struct conn *c = h->conn;
        if (why) {
            uncharge(s, c, h->len);
            not_durable_msg(s, h->epoch, at_shutdown, why, msg, sizeof msg);
            err.len = 0;
            if (pod_proto_encode_reply(&err, h->id, POD_E_NOT_DURABLE, msg, NULL) == 0)
                conn_reply(s, c, &err, true, false);
            else
                call_done(c);
        } else {
            struct pod_buf frame = {h->frame, h->len, h->len};
            conn_reply(s, c, &frame, true, true);
        }
        /* The loop is the only one that frees connections, so dropping the
         * reference here cannot free it under us. */
        __atomic_fetch_sub(&c->refs, 1, __ATOMIC_RELEASE);
        if (!c->released) {
            c->released = true;
            c->next_released = *touched;
            *touched = c;
        }
        free(h);
    }
    pod_buf_free(&err);
}

static void flush_touched(struct pod_server *s, struct conn *touched)
{
    while (touched) {
        struct conn *c = touched;
        touched = c->next_released;
        c->released = false;
        if (!c->dead) conn_flush(s, c);
    }
}

/* The loop: hand every held reply whose epoch is durable to its connection.
 * Returns how many replies are still held. */
static size_t release_durable(struct pod_server *s)
{
    uint64_t v;
    ssize_t rd = read(s->durable_fd, &v, sizeof v);
    (void)rd;
    if (!s->hold_replies) return 0;
    uint64_t persisted = log_host_persisted(s->log);
    struct conn *touched = NULL;
    size_t left = 0;
    for (int wi = 0; wi < s->db->opt.nworkers; wi++) {
        struct held_queue *q = &s->held[wi];
        pthread_mutex_lock(&q->lock);
        struct held_reply *list = q->head, *last = NULL;
        size_t n = 0;
        for (struct held_reply *h = list; h && h->epoch < persisted; h = h->next) {
            last = h;
            n++;
        }
        if (last) {
            q->head = last->next;
            if (!q->head) q->tail = NULL;
            last->next = NULL;
            q->len -= n;
        } else {
            list = NULL;
        }
        left += q->len;
        pthread_mutex_unlock(&q->lock);
        if (n) log_host_waiters_add(s->log, -(int64_t)n);
        hand_held(s, list, NULL, false, &touched);
    }
    flush_touched(s, touched);
    return left;
}

/* How long h has waited while the server ran (STALL_SLACK_NS). */
static uint64_t held_for(const struct pod_server *s, const struct held_reply *h, uint64_t now)
{
    uint64_t waited = now - h->since;
    uint64_t stalled = __atomic_load_n(&s->stalled_ns, __ATOMIC_RELAXED) - h->stalled;
    return waited > stalled ? waited - stalled : 0;
}

/* The loop, after each wake-up from a sleep of at most timeout_ms: the time
 * since the last wake-up beyond that (the loop's own work included) is a
 * stall of the server when it passes STALL_SLACK_NS. */
static void note_stall(struct pod_server *s, int timeout_ms)
{
    uint64_t now = pod_mono_ns();
    uint64_t gap = s->loop_woke_ns ? now - s->loop_woke_ns : 0;
    uint64_t asked = (uint64_t)timeout_ms * 1000000ull;
    s->loop_woke_ns = now;
    if (gap <= asked + STALL_SLACK_NS) return;
    uint64_t stall = gap - asked;
    __atomic_fetch_add(&s->stalled_ns, stall, __ATOMIC_RELAXED);
    count(&s->info.stalls, 1);
    if (stall > STALL_WARN_NS)
        pod_warn("the server did not run for %.1f s (the process was stopped or starved of "
                 "CPU, or the machine paused): replies held for the durable epoch wait that "
                 "much longer before engine.durable_wait_ms ends them",
                 (double)stall / 1e9);
}

/* Detach from every worker's queue the replies held at least min_ns while
 * the server ran (min_ns 0: all of them). Each queue is in the order its
 * replies were held, so they are a prefix of it. */
static struct held_reply *take_held(struct pod_server *s, uint64_t min_ns, uint64_t now,
                                    size_t *n_out)
{
    struct held_reply *list = NULL, **tail = &list;
    size_t n = 0;
    for (int wi = 0; wi < s->db->opt.nworkers; wi++) {
        struct held_queue *q = &s->held[wi];
        pthread_mutex_lock(&q->lock);
        while (q->head && (!min_ns || held_for(s, q->head, now) >= min_ns)) {
            struct held_reply *h = q->head;
            q->head = h->next;
            h->next = NULL;
            *tail = h;
            tail = &h->next;
            q->len--;
            n++;
        }
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->lock);
    }
    *n_out = n;
    return list;
}

/* Answer n taken replies POD_E_NOT_DURABLE, saying why (and, at_shutdown,
 * that the server shut down). */
static void answer_taken(struct pod_server *s, struct held_reply *list, size_t n,
                         const char *why, bool at_shutdown)
{
    if (!n) return;
    log_host_waiters_add(s->log, -(int64_t)n);
    struct conn *touched = NULL;
    hand_held(s, list, why, at_shutdown, &touched);
    flush_touched(s, touched);
    count(&s->info.not_durable_replies, (int64_t)n);
}

/* The loop: replies held longer than engine.durable_wait_ms (the pod's
 * durable epoch stopped: a host died or stopped, a log directory was lost,
 * a logger is stuck) are answered POD_E_NOT_DURABLE, saying why if it is
 * known. Each worker's queue is in the order its replies were held, so
 * the expired ones are a prefix. Looked at every tenth of the wait. */
static void expire_held(struct pod_server *s)
{
    if (!s->hold_replies || !s->durable_wait_ns) return;
    uint64_t now = pod_mono_ns();
    if (now < s->expire_next_ns) return;
    uint64_t period = s->durable_wait_ns / 10;
    if (period < 10000000ull) period = 10000000ull;
    if (period > 1000000000ull) period = 1000000000ull;
    s->expire_next_ns = now + period;
    release_durable(s); /* what became durable goes as it is */
    size_t n;
    struct held_reply *list = take_held(s, s->durable_wait_ns, now, &n);
    if (!n) return;
    char why[1024];
    log_host_why_not_durable(s->log, why, sizeof why);
    if (!why[0]) snprintf(why, sizeof why, "the reason is not known (see the servers' logs)");
    answer_taken(s, list, n, why, false);
    s->durable_unwarned += n;
    if (now - s->durable_warned_ns >= WARN_EVERY_NS || !s->durable_warned_ns) {
        pod_warn("%llu repl%s waited more than engine.durable_wait_ms (%u ms) for the pod's "
                 "durable epoch (this host's is %llu) and %s answered POD_E_NOT_DURABLE "
                 "(outcome unknown): %s",
                 (unsigned long long)s->durable_unwarned, s->durable_unwarned == 1 ? "y" : "ies",
                 s->conf->engine.durable_wait_ms,
                 (unsigned long long)log_host_persisted(s->log),
                 s->durable_unwarned == 1 ? "was" : "were", why);
        s->durable_warned_ns = now;
        s->durable_unwarned = 0;
    }
}

/* The loop: a connection closed for a limit keeps none of its held replies
 * (their calls are done: nobody will read them). */
static void drop_held_of(struct pod_server *s, struct conn *c)
{
    if (!s->hold_replies) return;
    size_t n = 0;
    for (int wi = 0; wi < s->db->opt.nworkers; wi++) {
        struct held_queue *q = &s->held[wi];
        struct held_reply *mine = NULL;
        pthread_mutex_lock(&q->lock);
        struct held_reply **at = &q->head, *prev = NULL;
        while (*at) {
            struct held_reply *h = *at;
            if (h->conn != c) {
                prev = h;
                at = &h->next;
                continue;
            }
            *at = h->next;
            h->next = mine;
            mine = h;
            q->len--;
            n++;
        }
        q->tail = prev;
        pthread_mutex_unlock(&q->lock);
        while (mine) {
            struct held_reply *h = mine;
            mine = h->next;
            uncharge(s, c, h->len);
            call_done(c);
            __atomic_fetch_sub(&c->refs, 1, __ATOMIC_RELEASE);
            free(h);
        }
    }
    if (n) log_host_waiters_add(s->log, -(int64_t)n);
}

/* A server that failed after it started: the replies still held are dropped
 * (the client sees no reply: not acknowledged). A clean shutdown answers
 * them (answer_held). */
static size_t drop_held(struct pod_server *s)
{
    size_t n = 0;
    for (int wi = 0; s->held && wi < s->db->opt.nworkers; wi++) {
        struct held_queue *q = &s->held[wi];
        for (struct held_reply *h = q->head, *next; h; h = next) {
            next = h->next;
            uncharge(s, h->conn, h->len);
            call_done(h->conn);
            __atomic_fetch_sub(&h->conn->refs, 1, __ATOMIC_RELEASE);
            free(h);
            n++;
        }
        q->head = q->tail = NULL;
        q->len = 0;
    }
    if (n && s->log) log_host_waiters_add(s->log, -(int64_t)n);
    return n;
}

/* ---- limits --------------------------------------------------------------------- */

/* "64.0 MiB", for messages. */
static const char *fmt_bytes(uint64_t n, char *buf, size_t len)
{
    if (n >= 1ull << 30) snprintf(buf, len, "%.2f GiB", (double)n / (double)(1ull << 30));
    else if (n >= 1ull << 20) snprintf(buf, len, "%.1f MiB", (double)n / (double)(1ull << 20));
    else if (n >= 1ull << 10) snprintf(buf, len, "%.1f KiB", (double)n / 1024.0);
    else snprintf(buf, len, "%llu bytes", (unsigned long long)n);
    return buf;
}

/* Close c for a limit: its replies not yet written are dropped (but the rest
 * of a frame partly written, so that the stream stays framed), then an error
 * frame (request id 0, POD_E_LIMIT) names the limit; nothing more is read,
 * its held replies are dropped and its calls not started yet are not run
 * (run_batch). It gets KILL_LINGER_NS to take the error (sweep_closing).
 * Returns false if c was freed. */
static bool conn_kill(struct pod_server *s, struct conn *c, bool server_limit)
{
    uint64_t held = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    /* What it held goes now: the peak the next trim compares with. */
    uint64_t total = __atomic_load_n(&s->info.buffered, __ATOMIC_RELAXED);
    if (total > s->peak) s->peak = total;
    char msg[400], mine[32], lim[32], all[32];
    fmt_bytes(held, mine, sizeof mine);
    if (server_limit)
        snprintf(msg, sizeof msg,
                 "closing the connection: the server holds %s for its clients, more than "
                 "server.max_buffered (%s), and this connection the most of it (%s of "
                 "partial input, calls in flight and replies not read yet)",
                 fmt_bytes(total, all, sizeof all), fmt_bytes(s->max_total, lim, sizeof lim),
                 mine);
    else
        snprintf(msg, sizeof msg,
                 "closing the connection: it made the server hold %s (partial input, calls in "
                 "flight and replies not read yet), more than server.max_conn_buffered (%s); "
                 "read the replies as they come, or have fewer calls in flight",
                 mine, fmt_bytes(s->max_conn, lim, sizeof lim));
    struct pod_buf frame = {0};
    bool encoded = pod_proto_encode_reply(&frame, 0, POD_E_LIMIT, msg, NULL) == 0;
    pthread_mutex_lock(&c->out_lock);
    __atomic_store_n(&c->killed, 1, __ATOMIC_RELEASE);
    if (out_pending(c) > c->out_head) {
        uncharge(s, c, out_pending(c) - c->out_head);
        c->out.len = c->out_at + c->out_head;
        if (!c->out_head) c->out.len = c->out_at = 0;
    }
    buf_shrink(&c->out);
    if (encoded && pod_buf_reserve(&c->out, frame.len) == 0) {
        memcpy(c->out.p + c->out.len, frame.p, frame.len);
        c->out.len += frame.len;
        charge(s, c, frame.len);
    }
    pthread_mutex_unlock(&c->out_lock);
    pod_buf_free(&frame);
    uncharge(s, c, c->in.len);
    pod_buf_free(&c->in);
    drop_held_of(s, c);
    c->kill_deadline = pod_mono_ns() + KILL_LINGER_NS;
    count(server_limit ? &s->info.server_limit_closes : &s->info.conn_limit_closes, 1);
    uint64_t now = pod_mono_ns();
    s->limit_unwarned++;
    if (now - s->limit_warned_ns >= WARN_EVERY_NS || !s->limit_warned_ns) {
        pod_warn("%s (%llu connection%s closed for a limit since the last such message)", msg,
                 (unsigned long long)s->limit_unwarned, s->limit_unwarned == 1 ? "" : "s");
        s->limit_warned_ns = now;
        s->limit_unwarned = 0;
    }
    return conn_close(s, c);
}

/* The loop: while the server holds more than server.max_buffered, close the
 * connection that holds the most (what closed ones still hold is on its way
 * out and does not count). */
static void enforce_total(struct pod_server *s)
{
    __atomic_store_n(&s->over_total, 0, __ATOMIC_RELEASE);
    for (;;) {
        uint64_t total = __atomic_load_n(&s->info.buffered, __ATOMIC_RELAXED);
        if (total <= s->max_total) return;
        struct conn *victim = NULL;
        uint64_t most = 0, going = 0;
        for (struct conn *c = s->conns; c; c = c->next) {
            uint64_t b = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
            if (conn_killed(c)) going += b;
            else if (b > most) {
                most = b;
                victim = c;
            }
        }
        if (!victim || total - going <= s->max_total) return;
        conn_kill(s, victim, true);
    }
}

/* Give freed memory back to the system: malloc's (mimalloc, which the
 * server links and which replaces malloc, keeps freed pages for reuse; else
 * glibc's malloc_trim), in this thread's heap and, as they go idle, in the
 * workers' (trim_pending). */
static void trim_memory(struct pod_server *s)
{
    if (s->mimalloc) {
        mi_collect(true);
        __atomic_add_fetch(&s->trim_gen, 1, __ATOMIC_RELEASE);
        wake_workers(s);
    } else {
        malloc_trim(0);
    }
}

/* The loop, after each round: a trim once the connections hold
 * TRIM_AFTER_BYTES less than at their peak since the last one (at most once
 * a second; the loop wakes at least once a second). */
static void maybe_trim(struct pod_server *s)
{
    uint64_t total = __atomic_load_n(&s->info.buffered, __ATOMIC_RELAXED);
    if (total > s->peak) s->peak = total;
    if (s->peak - total < TRIM_AFTER_BYTES) return;
    uint64_t now = pod_mono_ns();
    if (now - s->trimmed_ns < TRIM_EVERY_NS) return;
    trim_memory(s);
    s->peak = total;
    s->trimmed_ns = now;
}

/* ---- reading frames ------------------------------------------------------------- */

static int find_proc(struct pod_server *s, const struct pod_call_frame *cf, char *err,
                     size_t errlen)
{
    if (!cf->name) {
        if (cf->proc_id < s->db->nprocs) return (int)cf->proc_id;
        snprintf(err, errlen, "no procedure with id %u (see sys.procs)", cf->proc_id);
        return -1;
    }
    for (uint32_t i = 0; i < s->db->nprocs; i++) {
        const char *n = s->db->procs[i].name;
        if (strlen(n) == cf->name_len && memcmp(n, cf->name, cf->name_len) == 0) return (int)i;
    }
    snprintf(err, errlen, "unknown procedure '%.*s' (see sys.procs)",
             (int)(cf->name_len > 100 ? 100 : cf->name_len), cf->name);
    return -1;
}

/* Handle one complete frame: queue the call, or answer the error. false:
 * the connection is to be closed once the answer is sent. */
static bool handle_frame(struct pod_server *s, struct conn *c, const unsigned char *frame,
                         size_t len, pod_value *args)
{
    struct pod_call_frame cf = {0};
    cf.args = args;
    char err[256], msg[512];
    int status;
    count(&s->info.requests_total, 1);
    bool decoded = pod_proto_decode_call(frame, len, &cf, MAX_ARGS, err, sizeof err) == 0;
    enum pod_auth_action auth = pod_auth_gate(&s->auth, s->db, &c->auth, decoded ? &cf : NULL,
                                              &status, msg, sizeof msg);
    if (!decoded) count(&s->info.bad_frames, 1);
    if (auth != POD_AUTH_PASS) {
        reply_error(s, c, cf.request_id, status, msg);
        return auth == POD_AUTH_ANSWER;
    }
    if (!decoded) {
        reply_error(s, c, cf.request_id, POD_E_INVALID, err);
        return true;
    }
    int proc = find_proc(s, &cf, err, sizeof err);
    if (proc < 0) {
        reply_error(s, c, cf.request_id, POD_E_INVALID, err);
        return true;
    }
    /* Copy the frame (the connection's buffer moves on) and the decoded
     * arguments after it, pointing into the copy. */
    size_t args_off = (len + 7) & ~(size_t)7;
    size_t size = sizeof(struct request) + args_off + (size_t)cf.nargs * sizeof(pod_value);
    struct request *r = malloc(size);
    if (!r) {
        reply_error(s, c, cf.request_id, POD_E_NOMEM, "server out of memory");
        return true;
    }
    r->size = size;
    charge(s, c, size);
    memcpy(r->frame, frame, len);
    r->args = (pod_value *)(r->frame + args_off);
    for (int i = 0; i < cf.nargs; i++) {
        r->args[i] = cf.args[i];
        if (r->args[i].type == POD_T_BYTES)
            r->args[i].u.bytes = r->frame + ((const unsigned char *)cf.args[i].u.bytes - frame);
    }
    r->conn = c;
    r->id = cf.request_id;
    r->proc = proc;
    r->nargs = cf.nargs;
    r->flags = cf.flags;
    __atomic_fetch_add(&c->refs, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&c->out_lock);
    c->inflight++;
    pthread_mutex_unlock(&c->out_lock);
    enqueue(s, r);
    return true;
}

static bool conn_full(struct pod_server *s, struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    bool full = out_pending(c) > s->out_high || c->inflight >= s->max_calls;
    pthread_mutex_unlock(&c->out_lock);
    return full;
}

/* Stop reading until replies drain (conn_flush resumes). */
static void conn_pause(struct pod_server *s, struct conn *c)
{
    c->reading = false;
    __atomic_store_n(&c->loop_watch, 1, __ATOMIC_RELEASE);
    conn_events(s, c);
}

/* Handle the complete frames buffered in c->in, stopping (and pausing the
 * connection) as soon as it has as much in flight as it may. Returns false if
 * c was closed. */
static bool process_frames(struct pod_server *s, struct conn *c)
{
    size_t off = 0;
    bool full = false;
    for (;;) {
        int status;
        char msg[512];
        long fs = pod_proto_frame_size(c->in.p + off, c->in.len - off);
        if (fs < 0) {
            count(&s->info.bad_frames, 1);
            reply_error(s, c, 0, POD_E_INVALID,
                        "unframeable input: frame length out of range; closing");
            conn_close(s, c);
            return false;
        }
        if (!pod_auth_frame_ok(&s->auth, c->auth, c->in.p + off, c->in.len - off, &status, msg,
                               sizeof msg)) {
            reply_error(s, c, 0, status, msg);
            conn_close(s, c);
            return false;
        }
        if (fs == 0) break;
        if (!handle_frame(s, c, c->in.p + off, (size_t)fs, s->args)) {
            conn_close(s, c);
            return false;
        }
        off += (size_t)fs;
        if (conn_over(c)) { /* its input and calls: conn_kill drops c->in */
            conn_kill(s, c, false);
            return false;
        }
        if ((full = conn_full(s, c))) break; /* the rest waits in c->in */
    }
    pod_buf_consume(&c->in, off);
    uncharge(s, c, off);
    buf_shrink(&c->in);
    if (full) conn_pause(s, c);
    return true;
}

static void conn_read(struct pod_server *s, struct conn *c)
{
    while (c->reading) {
        if (pod_buf_reserve(&c->in, READ_CHUNK) != 0) {
            conn_close(s, c);
            return;
        }
        ssize_t n = recv(c->fd, c->in.p + c->in.len, READ_CHUNK, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) { /* closed by the client (or an error): its calls still finish */
            conn_close(s, c);
            return;
        }
        c->in.len += (size_t)n;
        charge(s, c, (size_t)n);
        if (!process_frames(s, c)) return;
        if (conn_over(c)) { /* a partial frame larger than its limit */
            conn_kill(s, c, false);
            return;
        }
        if ((size_t)n < READ_CHUNK) break;
    }
    conn_flush(s, c);
}

/* Connections with replies from workers. */
static void flush_ready(struct pod_server *s)
{
    uint64_t v;
    ssize_t r = read(s->evfd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&s->ready_lock);
    struct conn *list = s->ready;
    s->ready = NULL;
    pthread_mutex_unlock(&s->ready_lock);
    while (list) {
        struct conn *c = list;
        list = c->next_ready;
        pthread_mutex_lock(&c->out_lock);
        c->flush_queued = false;
        pthread_mutex_unlock(&c->out_lock);
        __atomic_fetch_sub(&c->refs, 1, __ATOMIC_ACQ_REL);
        conn_flush(s, c);
    }
}

/* ---- setup and the loop --------------------------------------------------------- */

/* dm.nic_model on: the store's fabric operations cost what an RDMA NIC's
 * would (docs/dm.md, "The NIC model"), and the log says that figures are
 * modelled. */
static int dm_nic_model(struct record_store *st, const struct pod_config *c, pod_err *err)
{
    const struct nic_model_params p = {.rtt_us = c->dm.nic_model.rtt_us,
                                       .atomic_mops = c->dm.nic_model.atomic_mops,
                                       .rw_mops = c->dm.nic_model.rw_mops,
                                       .gbps = c->dm.nic_model.gbps};
    if (rs_dm_nic_model(st, &p, err) != 0) return -1;
    pod_info("NIC model on: fabric costs are modelled (rtt %g us; per memory node CAS/FAA %g "
             "Mops/s, READ/WRITE %g Mops/s, %g Gb/s)", p.rtt_us, p.atomic_mops, p.rw_mops,
             p.gbps);
    return 0;
}

static int build_db(struct pod_server *s, pod_err *err)
{
    const struct pod_config *c = s->conf;
    char msg[512];
    struct pod_db_options o = {.nworkers = c->hosts[s->host].workers,
                               .host_id = s->host,
                               .nhosts = c->nhosts,
                               .phantom_protection = c->engine.phantom_protection,
                               .no_locking = !c->engine.locking,
                               .max_retries = (int)c->engine.max_retries,
                               .retry_timeout_ms = c->engine.retry_timeout_ms};
    if (c->mode == POD_MODE_DM) { /* dm.protocol over the memory nodes' records */
        o.store = POD_STORE_GIVEN;
        const char *mns[POD_MAX_MEMNODES];
        for (int i = 0; i < c->dm.nmemnodes && i < POD_MAX_MEMNODES; i++)
            mns[i] = c->dm.memnodes[i];
        o.cc = c->dm.protocol == POD_DM_FORD    ? POD_CC_FORD
               : c->dm.protocol == POD_DM_MOTOR ? POD_CC_MOTOR
               : c->dm.protocol == POD_DM_LOTUS ? POD_CC_LOTUS
                                                : POD_CC_RS_2PL;
        o.versions = (uint32_t)c->dm.versions;
        if (c->dm.nic_model.enabled) o.msg_rtt_ns = (uint64_t)(c->dm.nic_model.rtt_us * 1000.0);
        /* each worker thread runs dm.inflight workers as lanes */
        if ((int64_t)o.nworkers * c->dm.inflight > POD_MAX_WORKERS) {
            pod_err_set(err, "hosts[%d].workers (%d) times dm.inflight (%d) is %d: at most %d "
                        "transactions in flight per compute node", s->host, o.nworkers,
                        c->dm.inflight, o.nworkers * c->dm.inflight, POD_MAX_WORKERS);
            return -1;
        }
        o.lanes = c->dm.inflight;
        o.nworkers *= c->dm.inflight;
        o.undo_log_bytes = (uint32_t)c->dm.undo_log_size;
        if (!(o.given_store = rs_dm_open_cn(mns, c->dm.nmemnodes, c->dm.provider, c->dm.pod,
                                            (uint32_t)s->host + 1, pod_dm_protocol_name(c->dm.protocol),
                                            (uint32_t)c->dm.replicas, err)))
            return -1;
        char backups[48] = "";
        if (c->dm.replicas > 0)
            snprintf(backups, sizeof backups, ", %d backup%s of each", c->dm.replicas,
                     c->dm.replicas == 1 ? "" : "s");
        pod_info("compute node of pod \"%s\": records on %d memory node%s%s (the first %s) over %s",
                 c->dm.pod, c->dm.nmemnodes, c->dm.nmemnodes == 1 ? "" : "s", backups,
                 c->dm.memnodes[0], c->dm.provider);
        if (c->dm.nic_model.enabled && dm_nic_model(o.given_store, c, err) != 0) {
            o.given_store->ops->destroy(o.given_store);
            return -1;
        }
    }
    if (!(s->db = pod_db_new(&o, msg, sizeof msg)) || pod_builtin_sys_init(s->db, msg, sizeof msg) ||
        pod_builtin_kv_init(s->db, c, msg, sizeof msg) || pod_modules_load(s->db, c, msg, sizeof msg) ||
        (s->job &&
         !(s->job_state = s->job->open(s->db, c, s->host, wake_workers, s, msg, sizeof msg)))) {
        pod_err_set(err, "%s", msg);
        return -1;
    }
    for (int i = 0; i < s->db->opt.nworkers; i++) s->db->workers[i]->on_retrying = give_back_queued;
    return 0;
}

static int add_fd(struct pod_server *s, int fd, void *tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
    return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Tags for the loop's own descriptors (connections are struct conn pointers). */
static char TAG_UNIX, TAG_TCP, TAG_EVENT, TAG_SIGNAL, TAG_DURABLE;

static bool drained(struct pod_server *s)
{
    pthread_mutex_lock(&s->q_lock);
    bool idle = !s->q_head && s->q_running == 0;
    pthread_mutex_unlock(&s->q_lock);
    return idle;
}

/* At shutdown every call that was taken has run: give each client its replies
 * (they say which calls committed), waiting up to SHUTDOWN_FLUSH_MS in all
 * for slow readers. */
#define SHUTDOWN_FLUSH_MS 2000
static void flush_at_shutdown(struct pod_server *s)
{
    uint64_t deadline = pod_mono_ns() + SHUTDOWN_FLUSH_MS * 1000000ull;
    for (struct conn *c = s->conns; c; c = c->next) {
        for (;;) {
            flush_nowait(s, c);
            pthread_mutex_lock(&c->out_lock);
            bool pending = out_pending(c) > 0;
            pthread_mutex_unlock(&c->out_lock);
            uint64_t now = pod_mono_ns();
            if (!pending || now >= deadline) break;
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) <= 0 ||
                (p.revents & (POLLERR | POLLHUP)))
                break;
        }
    }
}

static void sweep_closing(struct pod_server *s)
{
    uint64_t now = pod_mono_ns();
    for (struct conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (!c->closing) continue;
        /* refs == 1: no call queued or running, not on the ready list. */
        bool idle = __atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) == 1;
        if (idle && conn_killed(c) && c->want_write && now >= c->kill_deadline) {
            /* Closed for a limit and its error not taken in time: drop it. */
            pthread_mutex_lock(&c->out_lock);
            out_drop(s, c);
            pthread_mutex_unlock(&c->out_lock);
            conn_free(s, c);
        } else if (idle && !c->want_write) {
            conn_close(s, c);
        }
    }
}

/* The loop, about once a second: TCP connections that have not given their
 * token within server.auth_timeout_ms get an error and are closed (a client
 * that connects and says nothing must not hold a connection for ever). */
static void expire_unauthenticated(struct pod_server *s)
{
    uint64_t wait = (uint64_t)s->conf->server.auth_timeout_ms * 1000000ull;
    uint64_t now = pod_mono_ns();
    if (s->tcp_fd < 0 || !wait || now < s->auth_next_ns) return;
    s->auth_next_ns = now + (wait / 10 < 1000000000ull ? wait / 10 : 1000000000ull);
    char msg[160];
    for (struct conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing || c->auth != POD_CONN_TCP_WAITING || now - c->accepted_ns < wait) continue;
        snprintf(msg, sizeof msg, "no sys.auth with the host's token within %u ms "
                 "(server.auth_timeout_ms): closing", s->conf->server.auth_timeout_ms);
        reply_error(s, c, 0, POD_E_AUTH, msg);
        count(&s->info.auth_timeouts, 1);
        conn_close(s, c);
    }
}

static void run_loop(struct pod_server *s)
{
    struct epoll_event evs[64];
    bool stopping = false;
    uint64_t stop_deadline = 0;
    for (;;) {
        int timeout = stopping || s->nclosing ? 10 : LOOP_SLEEP_MS;
        /* Look for replies held too long (expire_held) every tenth of the
         * wait (a worker may hold one while the loop sleeps). */
        if (s->durable_wait_ns && s->hold_replies) {
            uint64_t ms = s->durable_wait_ns / 10000000ull;
            if (ms < (uint64_t)timeout) timeout = ms < 10 ? 10 : (int)ms;
        }
        int n = epoll_wait(s->epfd, evs, 64, timeout);
        note_stall(s, timeout);
        if (n < 0 && errno != EINTR) {
            pod_error("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &TAG_UNIX) accept_all(s, s->unix_fd);
            else if (tag == &TAG_TCP) accept_all(s, s->tcp_fd);
            else if (tag == &TAG_EVENT) flush_ready(s);
            else if (tag == &TAG_DURABLE) release_durable(s);
            else if (tag == &TAG_SIGNAL) {
                struct signalfd_siginfo si;
                if (read(s->sigfd, &si, sizeof si) == sizeof si && !stopping) {
                    pod_info("signal %u: shutting down (finishing calls in progress)", si.ssi_signo);
                    stopping = true;
                    stop_deadline = pod_real_ns() + SHUTDOWN_GRACE_MS * 1000000ull;
                    if (s->region) cxl_region_set_state(s->region, CXL_HOST_STOPPING);
                    /* Stop accepting and reading: nothing new starts. */
                    epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->unix_fd, NULL);
                    close(s->unix_fd);
                    s->unix_fd = -1;
                    unlink(s->unix_path);
                    if (s->tcp_fd >= 0) {
                        epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->tcp_fd, NULL);
                        close(s->tcp_fd);
                        s->tcp_fd = -1;
                    }
                    s->stopping = true;
                    for (struct conn *c = s->conns; c; c = c->next) {
                        c->reading = false;
                        __atomic_store_n(&c->loop_watch, 1, __ATOMIC_RELEASE);
                        conn_events(s, c);
                    }
                }
            } else {
                struct conn *c = tag;
                if (c->dead) continue;
                if ((evs[i].events & EPOLLOUT) && !conn_flush(s, c)) continue;
                if (c->closing) continue;
                if ((evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && c->reading)
                    conn_read(s, c);
                else if (evs[i].events & (EPOLLHUP | EPOLLERR)) conn_close(s, c);
            }
        }
        expire_held(s);
        expire_unauthenticated(s);
        if (__atomic_load_n(&s->info.buffered, __ATOMIC_RELAXED) > s->max_total ||
            __atomic_load_n(&s->over_total, __ATOMIC_ACQUIRE))
            enforce_total(s);
        /* A worker may drop a closing connection's last call reference
         * without telling the loop (it cannot touch the connection after);
         * free those here. */
        if (s->nclosing) sweep_closing(s);
        free_dead(s);
        maybe_trim(s);
        if (stopping && (drained(s) || pod_real_ns() > stop_deadline)) {
            flush_ready(s);
            if (!drained(s)) pod_warn("shutdown: calls still running after %d ms", SHUTDOWN_GRACE_MS);
            break;
        }
    }
}

/* huge_pages: large tables take their rows in 2 MiB chunks advised for
 * transparent huge pages (row_slab.h). Warns when the kernel gives none
 * (docs/configuration.md says when the key pays). */
static void use_huge_pages(const struct pod_host_conf *hc)
{
    if (!hc->huge_pages) return;
    row_slab_use_huge_pages(true);
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
        mode[strcspn(mode, "\n")] = 0;
        fclose(f);
    }
    if (!f || strstr(mode, "[never]"))
        pod_warn("huge_pages: true, but this kernel gives no transparent huge pages "
                 "(/sys/kernel/mm/transparent_hugepage/enabled: %s); rows stay on 4 KiB pages",
                 f ? mode : "missing");
    else
        pod_info("huge_pages: large tables' rows on transparent huge pages");
}

/* One queue of held replies per worker. */
static int held_queues_new(struct pod_server *s, pod_err *err)
{
    int n = s->db->opt.nworkers;
    if (!(s->held = aligned_alloc(64, (size_t)n * sizeof *s->held))) {
        pod_err_set(err, "out of memory");
        return -1;
    }
    memset(s->held, 0, (size_t)n * sizeof *s->held);
    for (int i = 0; i < n; i++) pthread_mutex_init(&s->held[i].lock, NULL);
    return 0;
}

/* The durability layer: recover what the log directory holds, then start
 * epochs, loggers and checkpoints. */
static int start_log(struct pod_server *s, pod_err *err)
{
    const struct pod_config *c = s->conf;
    const struct pod_host_conf *hc = &c->hosts[s->host];
    struct log_host_options lo = {.conf = c, .host = s->host, .region = s->region, .db = s->db,
                                  .pod_mode = s->db->pod != NULL,
                                  .checkpoint_after = c->engine.checkpoint_after,
                                  .cpus = hc->cpus, .ncpus = hc->ncpus,
                                  .allow_empty_log = s->flags.allow_empty_log};
    if (!(s->log = log_host_open(&lo, err))) return -1;
    if (log_host_recover(s->log, &s->info.recovery, err)) return -1;
    s->hold_replies = log_host_logging(s->log) && !c->engine.reply_before_durable;
    if (log_host_start(s->log, on_durable, s, err)) return -1;
    if (!log_host_logging(s->log))
        pod_info("logging is off (loggers: 0): nothing is durable, replies go out at commit");
    else if (!s->hold_replies)
        pod_warn("engine.reply_before_durable is set: replies go out before their epoch is "
                 "durable, so an acknowledged transaction can be LOST in a crash");
    else
        pod_info("logging to %s with %d logger%s, %d ms epochs; replies wait for durability",
                 hc->log_dir, hc->loggers, hc->loggers == 1 ? "" : "s", c->engine.epoch_ms);
    return 0;
}

/* After the workers stopped: give the last replies time to become durable
 * (the epoch thread keeps running), then answer what is still held. */
static void wait_held_durable(struct pod_server *s)
{
    if (!s->hold_replies) return;
    uint64_t wait_ms = 2000 + 20ull * (uint64_t)s->conf->engine.epoch_ms;
    if (release_durable(s) > 0) log_host_close_epoch(s->log);
    uint64_t deadline = pod_mono_ns() + wait_ms * 1000000ull;
    while (release_durable(s) > 0 && pod_mono_ns() < deadline) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    char why[1024];
    log_host_why_not_durable(s->log, why, sizeof why);
    if (!why[0]) snprintf(why, sizeof why, "the reason is not known");
    /* Every reply still held: the client learns that its call was not
     * acknowledged, rather than seeing the connection close. */
    size_t n;
    struct held_reply *list = take_held(s, 0, 0, &n);
    answer_taken(s, list, n, why, true);
    if (n)
        pod_warn("shutdown: %zu repl%s answered POD_E_NOT_DURABLE: their epochs did not become "
                 "durable within %llu ms (those calls were not acknowledged): %s", n,
                 n == 1 ? "y" : "ies", (unsigned long long)wait_ms, why);
}

int pod_server_main(const struct pod_config *c, int host, const struct pod_server_flags *f,
                    const struct pod_worker_job *job)
{
    pod_err err = {{0}};
    struct pod_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->conf = c;
    s->host = host;
    s->job = job;
    if (f) s->flags = *f;
    s->epfd = s->evfd = s->sigfd = s->unix_fd = s->tcp_fd = s->durable_fd = -1;
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->info.conf = c;
    s->info.host = host;
    s->info.started_ns = pod_real_ns();
    s->max_conn = c->server.max_conn_buffered;
    s->max_total = c->server.max_buffered;
    s->max_calls = c->server.max_calls_per_conn;
    s->out_high = OUT_HIGH < s->max_conn / 4 ? OUT_HIGH : s->max_conn / 4;
    s->out_low = OUT_LOW < s->out_high / 8 ? OUT_LOW : s->out_high / 8;
    s->durable_wait_ns = (uint64_t)c->engine.durable_wait_ms * 1000000ull;
    /* Does malloc come from mimalloc (linked, and replacing malloc) or from
     * elsewhere (glibc, a sanitizer)? trim_memory asks the one in use. */
    void *probe = malloc(64);
    s->mimalloc = probe && mi_is_in_heap_region(probe);
    free(probe);
    pthread_mutex_init(&s->q_lock, NULL);
    pthread_cond_init(&s->q_cond, NULL);
    pthread_mutex_init(&s->ready_lock, NULL);
    g_server = s;
    int rc = 1;
    const struct pod_host_conf *hc = &c->hosts[host];

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL); /* every thread started below inherits it */

    use_huge_pages(hc);
    /* Whatever can refuse the start is found before anything is created:
     * the TCP token file, the socket, the TCP port and the log directory
     * here, the tables and modules in build_db (process memory only), the
     * region in its open. */
    struct pod_start_undo undo;
    if (pod_auth_load(&s->auth, c, host, &err) || pod_start_check(c, host, &undo, &err) ||
        build_db(s, &err))
        goto out;
    if (c->mode == POD_MODE_CXL) {
        s->region = cxl_region_open(c, host, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
        if (!s->region) goto out;
        pod_info("attached to region %s as host %d (generation %llu%s)", c->region.path, host,
                 (unsigned long long)s->region->sb->generation,
                 s->region->formatted_now ? ", formatted it" : "");
        /* Every table exists: join the pod (other hosts reach our partitions
         * through CXL memory from now on). */
        if (c->nhosts > 1 && !(s->pod = pod_host_attach(s->db, s->region, c, &err))) goto out;
    }
    if ((s->durable_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        pod_err_set(&err, "eventfd: %s", strerror(errno));
        goto out;
    }
    if (held_queues_new(s, &err)) goto out;
    if (c->mode == POD_MODE_CXL && start_log(s, &err)) goto out;
    if (c->mode == POD_MODE_DM && c->dm.replicas > 0)
        pod_warn("mode: dm keeps each record on %d memory nodes (dm.replicas: %d) and no log on "
                 "the compute nodes: committed transactions live only in the memory nodes' "
                 "memory, and replies go out at commit",
                 c->dm.replicas + 1, c->dm.replicas);
    else if (c->mode == POD_MODE_DM)
        pod_warn("mode: dm has no log and no replication (dm.replicas: 0): committed transactions "
                 "live only in the memory node's memory (a memory node that stops loses them), "
                 "and replies go out at commit");
    if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (s->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        pod_err_set(&err, "epoll/eventfd/signalfd: %s", strerror(errno));
        goto out;
    }
    if ((s->unix_fd = listen_unix(s, hc->socket_path, &err)) < 0) goto out;
    if (hc->tcp_port && (s->tcp_fd = listen_tcp(hc->tcp_port, &err)) < 0) goto out;
    add_fd(s, s->unix_fd, &TAG_UNIX);
    if (s->tcp_fd >= 0) add_fd(s, s->tcp_fd, &TAG_TCP);
    add_fd(s, s->evfd, &TAG_EVENT);
    add_fd(s, s->sigfd, &TAG_SIGNAL);
    add_fd(s, s->durable_fd, &TAG_DURABLE);
    char msg[256];
    if (pod_workers_start(s->db, hc->cpus, hc->ncpus, worker_body, s, msg, sizeof msg)) {
        pod_err_set(&err, "%s", msg);
        goto out;
    }
    if (s->job_state && s->job->started) s->job->started(s->job_state);
    if (c->engine.slow_call_ms && !(s->watchdog = pod_watchdog_start(s->db, c->engine.slow_call_ms, &err)))
        pod_warn("%s; slow calls are not reported", err.msg);
    if (s->region) cxl_region_set_state(s->region, CXL_HOST_RUNNING);
    char lanes[64] = "";
    if (s->db->opt.lanes > 1)
        snprintf(lanes, sizeof lanes, ", each with %d transactions in flight (dm.inflight)",
                 s->db->opt.lanes);
    pod_info("serving on %s%s%s with %d worker%s%s", hc->socket_path,
             hc->tcp_port ? " and tcp " : "", hc->tcp_port ? "127.0.0.1" : "", hc->workers,
             hc->workers == 1 ? "" : "s", lanes);
    if (hc->tcp_port)
        pod_info("tcp listener on 127.0.0.1:%d (calls need the token of %s)", hc->tcp_port,
                 hc->tcp_token_file);
    run_loop(s);

    pthread_mutex_lock(&s->q_lock);
    __atomic_store_n(&s->q_stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->q_cond);
    pthread_mutex_unlock(&s->q_lock);
    pod_wake_idle(s->pod);
    pod_workers_join(s->db);
    pod_watchdog_stop(s->watchdog);
    s->watchdog = NULL;
    wait_held_durable(s);
    flush_ready(s);
    flush_at_shutdown(s);
    rc = 0;
out:
    if (rc) pod_error("%s", err.msg);
    while (s->conns) conn_free(s, s->conns);
    free_dead(s);
    for (struct request *r = s->q_head, *n; r; r = n) { /* only after a failed start */
        n = r->next;
        free(r);
    }
    if (s->unix_fd >= 0) {
        close(s->unix_fd);
        unlink(s->unix_path);
    }
    if (s->tcp_fd >= 0) close(s->tcp_fd);
    if (s->sigfd >= 0) close(s->sigfd);
    if (s->evfd >= 0) close(s->evfd);
    if (s->epfd >= 0) close(s->epfd);
    if (s->spare_fd >= 0) close(s->spare_fd);
    pod_watchdog_stop(s->watchdog);
    if (s->job_state) s->job->close(s->job_state);
    drop_held(s);
    bool claimed = s->log != NULL && hc->loggers > 0;
    log_host_free(s->log); /* stops the loggers: everything logged is synced */
    /* A failed start takes back what it created (the host slot is still
     * ours, so no server of this host claims the directory meanwhile). */
    if (rc && s->region) pod_start_undo_log_dir(&undo, hc->log_dir, claimed);
    if (s->durable_fd >= 0) close(s->durable_fd);
    if (s->held)
        for (int i = 0; i < c->hosts[host].workers; i++) pthread_mutex_destroy(&s->held[i].lock);
    free(s->held);
    if (s->pod) pod_host_detach(s->pod);
    if (s->db) pod_db_free(s->db);
    bool drop_region = rc && s->region && s->region->created_now;
    if (s->region) cxl_region_close(s->region);
    if (drop_region) pod_start_undo_region(c);
    if (!rc) pod_info("stopped cleanly");
    g_server = NULL;
    pthread_mutex_destroy(&s->q_lock);
    pthread_cond_destroy(&s->q_cond);
    pthread_mutex_destroy(&s->ready_lock);
    pod_auth_forget(&s->auth);
    free(s);
    return rc;
}
