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
 * bytes) AND no call of it is still queued or running: workers hold a
 * reference. A connection whose unsent replies pass OUT_HIGH stops being read
 * until they drain below OUT_LOW (a slow reader never grows the server without
 * bound, and everyone else keeps being served).
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

#include "bench/host.h"
#include "cxl/region.h"
#include "engine/result.h"
#include "engine/watchdog.h"
#include "engine/worker.h"
#include "log/log.h"
#include "log/txlog.h"
#include "net/proto.h"
#include "pod/pod.h"
#include "server/startcheck.h"
#include "server/token.h"
#include "txn/txn.h"
#include "storage/row_slab.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/cpu.h"

#define MAX_ARGS 4096
#define OUT_HIGH (8u << 20)
#define OUT_LOW (1u << 20)
/* Calls of one connection queued or running. With the 8 MiB output mark this
 * bounds what a client that does not read can make the server hold: 8 MiB
 * plus the replies of at most this many calls. */
#define MAX_INFLIGHT_PER_CONN 128
#define READ_CHUNK 65536
#define SHUTDOWN_GRACE_MS 10000

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
    uint32_t inflight;      /* calls queued or running (under out_lock) */
    struct pod_buf in;
    pthread_mutex_t out_lock;
    struct pod_buf out;     /* encoded replies not yet written (under out_lock) */
    struct conn *next_ready;
    struct conn *next_released; /* on the loop's list of connections with released replies */
    bool released;
    struct conn *prev, *next; /* all connections */
};

struct request {
    struct request *next;
    struct conn *conn;
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
    size_t len;
    unsigned char frame[];
};

/* One per worker: its commit epochs never decrease, so the queue is in epoch
 * order and the loop releases a prefix. */
struct held_queue {
    pthread_mutex_t lock;
    struct held_reply *head, *tail;
    size_t len;
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
    struct pod_bench *bench;    /* the workloads and bench.* procedures (src/bench/host.h) */
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
    uint64_t shed, shed_warned_ns;
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
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pod_err_set(err, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Loopback only: the protocol has no authentication. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 512) != 0) {
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
        pod_buf_free(&c->in);
        pod_buf_free(&c->out);
        pthread_mutex_destroy(&c->out_lock);
        free(c);
    }
}

/* Best effort, without blocking: the peer may still read what we owe it. */
static void flush_nowait(struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && errno == EINTR)) break;
        if (n > 0) pod_buf_consume(&c->out, (size_t)n);
    }
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
        flush_nowait(c);
        pthread_mutex_lock(&c->out_lock);
        bool pending = c->out.len > 0;
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

/* Write what is buffered. Called by the loop only. Returns false if c was
 * freed (the peer is gone and nothing of it is pending). */
static bool conn_flush(struct pod_server *s, struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    bool failed = false;
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            pod_buf_consume(&c->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        failed = true; /* the peer is gone: drop what it will never read */
        c->out.len = 0;
        break;
    }
    bool backlog = c->out.len > 0;
    bool resume = !c->closing && !c->reading && c->out.len < OUT_LOW &&
                  c->inflight < MAX_INFLIGHT_PER_CONN / 2;
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

/* Append an encoded reply. From a worker the call is done (inflight--); the
 * worker flushes after its batch. From the loop, the loop flushes. */
static void conn_reply(struct conn *c, const struct pod_buf *frame, bool from_worker)
{
    pthread_mutex_lock(&c->out_lock);
    if (pod_buf_reserve(&c->out, frame->len) == 0) {
        memcpy(c->out.p + c->out.len, frame->p, frame->len);
        c->out.len += frame->len;
    }
    if (from_worker) c->inflight--;
    pthread_mutex_unlock(&c->out_lock);
}

static void reply_error(struct conn *c, uint64_t id, int status,
                        const char *msg)
{
    struct pod_buf b = {0};
    if (pod_proto_encode_reply(&b, id, status, msg, NULL) == 0) conn_reply(c, &b, false);
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
 * are none, the worker has no bench work and the server is not stopping.
 * Returns the number taken; 0 when there are none (without block, or bench
 * work arrived); -1 once the server stops and the queue is empty.
 * In a pod an idle worker sleeps on its host's inbox doorbell
 * (pod_idle_sleep): another host's request, a queued call, a bench job or
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

static bool worker_has_work(void *arg)
{
    const struct idle_wait *iw = arg;
    return __atomic_load_n(&iw->s->q_head, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&iw->s->q_stop, __ATOMIC_SEQ_CST) ||
           pod_bench_has_work(iw->s->bench, iw->w->id);
}

static int dequeue_batch(struct pod_server *s, struct pod_worker *w, struct request **out, int max,
                         bool block)
{
    bool pod = s->db->pod != NULL;
    /* Spin briefly before sleeping: a call arriving within ~20 us is taken
     * without a futex wake-up (the common case under load). */
    for (int i = 0; block && i < 2000 && !__atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE); i++) {
        if (pod && (i & 63) == 0) pod_serve(w, 16);
        pod_cpu_relax();
    }
    if (!block && !__atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&s->q_stop, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&s->q_lock);
    uint64_t idle_since = 0; /* the last time this wait served a request (0: not yet asleep) */
    struct idle_wait iw = {s, w};
    while (block && !s->q_head && !s->q_stop && !pod_bench_has_work(s->bench, w->id)) {
        /* About to sleep: hand the log buffer over and publish idle, or the
         * durable epoch (and the replies held for it, maybe our own) would
         * wait for this worker's next commit. Here, under the queue lock,
         * every time: another worker may have taken the call we saw, and
         * serving the inbox may have committed. */
        log_worker_idle_hook(s->db, w->id);
        if (!pod) {
            pthread_cond_wait(&s->q_cond, &s->q_lock);
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

/* For bench work (pod_bench_work): stop when calls wait or the server stops. */
static bool worker_yield(void *arg)
{
    struct pod_server *s = arg;
    return __atomic_load_n(&s->q_head, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&s->q_stop, __ATOMIC_ACQUIRE);
}

/* A bench job started: wake the workers sleeping in dequeue_batch. */
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
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) pod_buf_consume(&c->out, (size_t)n);
        else if (!(n < 0 && errno == EINTR)) break;
    }
    /* The loop also re-arms reading after backpressure and closes dead peers. */
    bool hand_over = (c->out.len || __atomic_load_n(&c->loop_watch, __ATOMIC_ACQUIRE)) &&
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
static __thread struct running_batch *tls_batch;

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
    for (int i = from; i < upto; i++) {
        if (b->held[i]) continue;
        bool first = true;
        for (int j = from; j < i && first; j++) first = b->held[j] || b->r[j]->conn != b->r[i]->conn;
        if (first) worker_flush(s, b->r[i]->conn);
    }
    for (int i = from; i < upto; i++) {
        if (!b->held[i]) __atomic_fetch_sub(&b->r[i]->conn->refs, 1, __ATOMIC_RELEASE);
        free(b->r[i]);
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
    struct running_batch *b = tls_batch;
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

/* Run a batch of calls and hand their replies to the connections (or hold
 * them until their epoch is durable). */
static void run_batch(struct pod_server *s, struct pod_worker *w, struct request **batch, int n,
                      pod_result *res, struct pod_buf *out)
{
    char msg[512];
    struct running_batch b = {.r = batch, .n = n};
    tls_batch = &b;
    /* Counted as waiting before any is checked against the persisted epoch
     * (on_durable reads the count after that grows). */
    if (s->hold_replies) log_host_waiters_add(s->log, n);
    for (int i = 0; i < b.n; i++) {
        struct request *r = batch[i];
        pod_args args = {r->nargs, r->args};
        b.at = i;
        int rc = pod_call(w, r->proc, &args, res, msg, sizeof msg);
        out->len = 0;
        if (pod_proto_encode_reply(out, r->id, rc, rc < 0 ? msg : "", rc < 0 ? NULL : res)) {
            out->len = 0;
            snprintf(msg, sizeof msg, "%s: the result does not fit a %u-byte frame",
                     s->db->procs[r->proc].name, POD_PROTO_MAX_FRAME);
            pod_proto_encode_reply(out, r->id, POD_E_INVALID, msg, NULL);
        }
        b.held[i] = false;
        /* A call that read and wrote no table (sys.*) has nothing to wait for. */
        if (s->hold_replies && !(r->flags & POD_CALL_EARLY_REPLY) && txn_touched_tables(w->tx)) {
            uint64_t e = reply_epoch(s, w, rc);
            struct held_reply *h;
            if (e >= log_host_persisted(s->log) && (h = malloc(sizeof *h + out->len))) {
                h->next = NULL;
                h->conn = r->conn;
                h->epoch = e;
                h->len = out->len;
                memcpy(h->frame, out->p, out->len);
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
            while (e >= log_host_persisted(s->log)) {
                struct timespec nap = {0, 100000};
                nanosleep(&nap, NULL);
            }
        }
        conn_reply(r->conn, out, true);
    }
    batch_finish(s, w, &b, b.n);
    tls_batch = NULL;
}

/* Calls from the socket first; bench work (a load, run or check job of
 * src/bench/host.c) in between, which yields as soon as calls are queued. */
static void worker_body(struct pod_worker *w, void *arg)
{
    struct pod_server *s = arg;
    pod_result *res = pod_result_new();
    struct pod_buf out = {0};
    struct request *batch[BATCH];
    while (res) {
        bool bench = pod_bench_has_work(s->bench, w->id);
        if (bench) pod_bench_work(s->bench, w, worker_yield, s);
        int n = dequeue_batch(s, w, batch, BATCH, !bench);
        if (n < 0) break;
        if (n > 0) run_batch(s, w, batch, n, res, &out);
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
        while (list) {
            struct held_reply *h = list;
            list = h->next;
            struct pod_buf frame = {h->frame, h->len, h->len};
            conn_reply(h->conn, &frame, true);
            /* The loop is the only one that frees connections, so dropping
             * the reference here cannot free it under us. */
            __atomic_fetch_sub(&h->conn->refs, 1, __ATOMIC_RELEASE);
            if (!h->conn->released) {
                h->conn->released = true;
                h->conn->next_released = touched;
                touched = h->conn;
            }
            free(h);
        }
    }
    while (touched) {
        struct conn *c = touched;
        touched = c->next_released;
        c->released = false;
        if (!c->dead) conn_flush(s, c);
    }
    return left;
}

/* At shutdown, after the workers stopped: replies whose epochs never became
 * durable are dropped (the client sees no reply: not acknowledged). */
static size_t drop_held(struct pod_server *s)
{
    size_t n = 0;
    for (int wi = 0; s->held && wi < s->db->opt.nworkers; wi++) {
        struct held_queue *q = &s->held[wi];
        for (struct held_reply *h = q->head, *next; h; h = next) {
            next = h->next;
            __atomic_fetch_sub(&h->conn->refs, 1, __ATOMIC_RELEASE);
            pthread_mutex_lock(&h->conn->out_lock);
            h->conn->inflight--;
            pthread_mutex_unlock(&h->conn->out_lock);
            free(h);
            n++;
        }
        q->head = q->tail = NULL;
        q->len = 0;
    }
    if (n && s->log) log_host_waiters_add(s->log, -(int64_t)n);
    return n;
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
        reply_error(c, cf.request_id, status, msg);
        return auth == POD_AUTH_ANSWER;
    }
    if (!decoded) {
        reply_error(c, cf.request_id, POD_E_INVALID, err);
        return true;
    }
    int proc = find_proc(s, &cf, err, sizeof err);
    if (proc < 0) {
        reply_error(c, cf.request_id, POD_E_INVALID, err);
        return true;
    }
    /* Copy the frame (the connection's buffer moves on) and the decoded
     * arguments after it, pointing into the copy. */
    size_t args_off = (len + 7) & ~(size_t)7;
    struct request *r = malloc(sizeof *r + args_off + (size_t)cf.nargs * sizeof(pod_value));
    if (!r) {
        reply_error(c, cf.request_id, POD_E_NOMEM, "server out of memory");
        return true;
    }
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

static bool conn_full(struct conn *c)
{
    pthread_mutex_lock(&c->out_lock);
    bool full = c->out.len > OUT_HIGH || c->inflight >= MAX_INFLIGHT_PER_CONN;
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
            reply_error(c, 0, POD_E_INVALID, "unframeable input: frame length out of range; closing");
            conn_close(s, c);
            return false;
        }
        if (!pod_auth_frame_ok(&s->auth, c->auth, c->in.p + off, c->in.len - off, &status, msg,
                               sizeof msg)) {
            reply_error(c, 0, status, msg);
            conn_close(s, c);
            return false;
        }
        if (fs == 0) break;
        if (!handle_frame(s, c, c->in.p + off, (size_t)fs, s->args)) {
            conn_close(s, c);
            return false;
        }
        off += (size_t)fs;
        if ((full = conn_full(c))) break; /* the rest waits in c->in */
    }
    pod_buf_consume(&c->in, off);
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
        if (!process_frames(s, c)) return;
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
    if (!(s->db = pod_db_new(&o, msg, sizeof msg)) || pod_builtin_sys_init(s->db, msg, sizeof msg) ||
        pod_builtin_kv_init(s->db, c, msg, sizeof msg) || pod_modules_load(s->db, c, msg, sizeof msg) ||
        !(s->bench = pod_bench_new(s->db, c, s->host, msg, sizeof msg))) {
        pod_err_set(err, "%s", msg);
        return -1;
    }
    pod_bench_set_waker(s->bench, wake_workers, s);
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
            flush_nowait(c);
            pthread_mutex_lock(&c->out_lock);
            bool pending = c->out.len > 0;
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
    for (struct conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        /* refs == 1: no call queued or running, not on the ready list. */
        if (c->closing && !c->want_write && __atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) == 1)
            conn_close(s, c);
    }
}

static void run_loop(struct pod_server *s)
{
    struct epoll_event evs[64];
    bool stopping = false;
    uint64_t stop_deadline = 0;
    for (;;) {
        int n = epoll_wait(s->epfd, evs, 64, stopping || s->nclosing ? 10 : 1000);
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
                    cxl_region_set_state(s->region, CXL_HOST_STOPPING);
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
        /* A worker may drop a closing connection's last call reference
         * without telling the loop (it cannot touch the connection after);
         * free those here. */
        if (s->nclosing) sweep_closing(s);
        free_dead(s);
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
    s->held = aligned_alloc(64, (size_t)hc->workers * sizeof *s->held);
    if (!s->held) {
        pod_err_set(err, "out of memory");
        return -1;
    }
    memset(s->held, 0, (size_t)hc->workers * sizeof *s->held);
    for (int i = 0; i < hc->workers; i++) pthread_mutex_init(&s->held[i].lock, NULL);
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
 * (the epoch thread keeps running), then drop what is still held. */
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
    size_t dropped = drop_held(s);
    if (dropped)
        pod_warn("shutdown: %zu replies dropped: their epochs did not become durable within "
                 "%llu ms (those calls were not acknowledged)", dropped,
                 (unsigned long long)wait_ms);
}

int pod_server_main(const struct pod_config *c, int host, const struct pod_server_flags *f)
{
    pod_err err = {{0}};
    struct pod_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->conf = c;
    s->host = host;
    if (f) s->flags = *f;
    s->epfd = s->evfd = s->sigfd = s->unix_fd = s->tcp_fd = s->durable_fd = -1;
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->info.conf = c;
    s->info.host = host;
    s->info.started_ns = pod_real_ns();
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
    s->region = cxl_region_open(c, host, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
    if (!s->region) goto out;
    pod_info("attached to region %s as host %d (generation %llu%s)", c->region.path, host,
             (unsigned long long)s->region->sb->generation,
             s->region->formatted_now ? ", formatted it" : "");
    /* Every table exists: join the pod (other hosts reach our partitions
     * through CXL memory from now on). */
    if (c->nhosts > 1 && !(s->pod = pod_host_attach(s->db, s->region, c, &err))) goto out;
    if ((s->durable_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        pod_err_set(&err, "eventfd: %s", strerror(errno));
        goto out;
    }
    if (start_log(s, &err)) goto out;
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
    pod_bench_autoload(s->bench);
    if (c->engine.slow_call_ms && !(s->watchdog = pod_watchdog_start(s->db, c->engine.slow_call_ms, &err)))
        pod_warn("%s; slow calls are not reported", err.msg);
    cxl_region_set_state(s->region, CXL_HOST_RUNNING);
    pod_info("serving on %s%s%s with %d worker%s", hc->socket_path, hc->tcp_port ? " and tcp " : "",
             hc->tcp_port ? "127.0.0.1" : "", hc->workers, hc->workers == 1 ? "" : "s");
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
    pod_bench_free(s->bench);
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
