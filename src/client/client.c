/* The PodDB client library (include/poddb/client.h).
 *
 * A client owns one blocking stream socket, a send buffer (calls queued by
 * pod_client_send, written by pod_client_flush) and a receive buffer (bytes
 * read but not yet framed). Every wait goes through poll(), so a timeout can
 * bound it, and while a flush waits for room to write it also reads whatever
 * replies arrive: a long pipeline can never deadlock with a server that
 * stops reading because its own replies are not being read.
 *
 * Replies are matched by request id. pod_client_call waits for the reply to
 * its own call; replies to other pipelined calls that arrive first are kept
 * in a queue (in arrival order) for pod_client_recv. A reply owns a copy of
 * its frame; its rows are decoded when it is received into an array of
 * values (byte values point into the frame) and row offsets.
 *
 * Sends use MSG_NOSIGNAL: a server that went away is an error
 * ("connection closed by server"), never a SIGPIPE. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "net/proto.h"
#include "poddb/client.h"

#define READ_CHUNK (64u << 10)
/* A token's length, as the server accepts it (src/server/token.h). */
#define TOKEN_MIN 16
#define TOKEN_MAX 4096

struct pod_reply {
    uint64_t id;
    int status;
    char *msg;            /* NUL-terminated copy of the message */
    int nrows;
    uint32_t *row_start;  /* nrows + 1 indexes into vals */
    pod_value *vals;
    unsigned char *frame; /* the frame; byte values point into it */
};

struct pod_client {
    int fd;
    int timeout_ms;        /* 0: wait forever */
    uint64_t next_id;      /* the id of the next call; ids start at 1 */
    size_t pending;        /* calls sent whose replies the user has not received */

    struct pod_buf out;    /* queued calls; out_off bytes of it are written */
    size_t out_off;
    struct pod_buf in;     /* bytes received; in_off bytes of it are framed */
    size_t in_off;

    pod_reply **queue;     /* received but not yet handed out, arrival order */
    size_t qlen, qcap;
    uint64_t *abandoned;   /* ids of calls whose pod_client_call gave up */
    size_t nabandoned, abandoned_cap;

    bool broken;           /* no more I/O: dead_err says why */
    char dead_err[256];
    char err[512];
};

/* ---- errors ------------------------------------------------------------------ */

static void __attribute__((format(printf, 2, 3))) set_err(pod_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* The connection is unusable from now on (bytes already received are still
 * handed out, unless the stream itself is corrupt). */
static void __attribute__((format(printf, 2, 3))) set_dead(pod_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->dead_err, sizeof c->dead_err, fmt, ap);
    va_end(ap);
    c->broken = true;
    snprintf(c->err, sizeof c->err, "%s", c->dead_err);
}

static void report_dead(pod_client *c) { snprintf(c->err, sizeof c->err, "%s", c->dead_err); }

static void __attribute__((format(printf, 3, 4)))
set_errbuf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- time ---------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left of the client's timeout since start: -1 (no timeout), or >= 0. */
static int remaining_ms(const pod_client *c, int64_t start)
{
    if (c->timeout_ms <= 0) return -1;
    int64_t left = (int64_t)c->timeout_ms - (now_ms() - start);
    return left < 0 ? 0 : (int)left;
}

/* poll() one event set with EINTR handled: revents, 0 on timeout, -1 on error. */
static int wait_fd(pod_client *c, short events, int64_t start)
{
    for (;;) {
        struct pollfd p = {c->fd, events, 0};
        int n = poll(&p, 1, remaining_ms(c, start));
        if (n > 0) return p.revents ? p.revents : events;
        if (n == 0) return 0;
        if (errno == EINTR) continue;
        set_dead(c, "poll: %s", strerror(errno));
        return -1;
    }
}

/* ---- replies ------------------------------------------------------------------- */

void pod_reply_free(pod_reply *r)
{
    if (!r) return;
    free(r->msg);
    free(r->row_start);
    free(r->vals);
    free(r->frame);
    free(r);
}

uint64_t pod_reply_id(const pod_reply *r) { return r ? r->id : 0; }
int pod_reply_status(const pod_reply *r) { return r ? r->status : POD_E_INTERNAL; }
const char *pod_reply_message(const pod_reply *r) { return r && r->msg ? r->msg : ""; }
int pod_reply_nrows(const pod_reply *r) { return r ? r->nrows : 0; }

int pod_reply_ncols(const pod_reply *r, int row)
{
    if (!r || row < 0 || row >= r->nrows) return 0;
    return (int)(r->row_start[row + 1] - r->row_start[row]);
}

const pod_value *pod_reply_value(const pod_reply *r, int row, int col)
{
    if (col < 0 || col >= pod_reply_ncols(r, row)) return NULL;
    return &r->vals[r->row_start[row] + (uint32_t)col];
}

/* Build a reply from one complete frame (copied). NULL with the client marked
 * broken if the frame is malformed, or on out of memory. */
static pod_reply *make_reply(pod_client *c, const unsigned char *frame, size_t len)
{
    pod_reply *r = calloc(1, sizeof *r);
    if (!r || !(r->frame = malloc(len))) goto nomem;
    memcpy(r->frame, frame, len);
    struct pod_reply_frame f;
    char err[256];
    if (pod_proto_decode_reply(r->frame, len, &f, err, sizeof err) != 0) {
        set_dead(c, "malformed reply from server: %s", err);
        pod_reply_free(r);
        return NULL;
    }
    r->id = f.request_id;
    r->status = f.status;
    if (!(r->msg = malloc((size_t)f.msg_len + 1))) goto nomem;
    if (f.msg_len) memcpy(r->msg, f.msg, f.msg_len);
    r->msg[f.msg_len] = '\0';

    /* Count the values (decode_reply checked the rows: next_row cannot fail),
     * then decode them. Both arrays are bounded by the frame's size. */
    size_t total = 0;
    const unsigned char *cur = f.rows;
    for (uint32_t i = 0; i < f.nrows; i++) {
        int n = 0;
        if (pod_proto_next_row(&f, &cur, NULL, 0, &n) != 0) goto malformed;
        total += (size_t)n;
    }
    r->nrows = (int)f.nrows;
    if (!(r->row_start = malloc(((size_t)f.nrows + 1) * sizeof *r->row_start))) goto nomem;
    if (!(r->vals = malloc((total ? total : 1) * sizeof *r->vals))) goto nomem;
    cur = f.rows;
    size_t k = 0;
    for (uint32_t i = 0; i < f.nrows; i++) {
        int n = 0;
        r->row_start[i] = (uint32_t)k;
        if (pod_proto_next_row(&f, &cur, &r->vals[k], (int)(total - k), &n) != 0 ||
            (size_t)n > total - k)
            goto malformed;
        k += (size_t)n;
    }
    r->row_start[f.nrows] = (uint32_t)k;
    return r;
malformed:
    set_dead(c, "malformed reply from server: bad rows");
    pod_reply_free(r);
    return NULL;
nomem:
    set_dead(c, "out of memory receiving a reply of %zu bytes", len);
    pod_reply_free(r);
    return NULL;
}

/* ---- connecting ---------------------------------------------------------------- */

/* connect() with EINTR handled: an interrupted connect goes on in the
 * background; wait for it and collect its result. */
static int connect_fd(int fd, const struct sockaddr *sa, socklen_t salen)
{
    if (connect(fd, sa, salen) == 0) return 0;
    if (errno != EINTR) return -1;
    for (;;) {
        struct pollfd p = {fd, POLLOUT, 0};
        int n = poll(&p, 1, -1);
        if (n > 0) break;
        if (n < 0 && errno != EINTR) return -1;
    }
    int e = 0;
    socklen_t elen = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0) return -1;
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

static int connect_unix(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) {
        set_errbuf(err, errlen, "socket path is too long (%zu bytes, at most %zu): %.80s...", n,
                   sizeof sa.sun_path - 1, path);
        return -1;
    }
    memcpy(sa.sun_path, path, n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_errbuf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect_fd(fd, (const struct sockaddr *)&sa, sizeof sa) != 0) {
        set_errbuf(err, errlen, "cannot connect to %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* "tcp:HOST:PORT"; HOST may be a name, an IPv4 address or [an IPv6 address]. */
static int connect_tcp(const char *address, char *err, size_t errlen)
{
    const char *rest = address + 4;
    const char *colon = strrchr(rest, ':');
    if (!colon || colon == rest || !colon[1]) {
        set_errbuf(err, errlen, "bad address %s: expected tcp:HOST:PORT", address);
        return -1;
    }
    char host[256];
    size_t hlen = (size_t)(colon - rest);
    if (hlen >= 2 && rest[0] == '[' && rest[hlen - 1] == ']') {
        rest++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof host) {
        set_errbuf(err, errlen, "bad address %s: expected tcp:HOST:PORT", address);
        return -1;
    }
    memcpy(host, rest, hlen);
    host[hlen] = '\0';
    const char *port = colon + 1;

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        set_errbuf(err, errlen, "cannot resolve %s: %s", address,
                   rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        if (connect_fd(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        set_errbuf(err, errlen, "cannot connect to %s: %s", address,
                   strerror(last_errno ? last_errno : EADDRNOTAVAIL));
        return -1;
    }
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        set_errbuf(err, errlen, "%s: setting TCP_NODELAY: %s", address, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* A TCP connection gives the token of $POD_TOKEN_FILE or $POD_TOKEN, when
 * either is set. 0, or -1 with err. */
static int auth_from_env(pod_client *c, const char *address, char *err, size_t errlen)
{
    const char *file = getenv("POD_TOKEN_FILE"), *token = getenv("POD_TOKEN");
    int rc;
    if (file && *file) rc = pod_client_auth_file(c, file);
    else if (token && *token) rc = pod_client_auth(c, token, strlen(token));
    else return 0;
    if (rc == POD_OK) return 0;
    set_errbuf(err, errlen, "%s: %s (the token of $%s)", address, c->err,
               file && *file ? "POD_TOKEN_FILE" : "POD_TOKEN");
    return -1;
}

pod_client *pod_client_connect(const char *address, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!address || !*address) {
        set_errbuf(err, errlen, "no server address given");
        return NULL;
    }
    pod_client *c = calloc(1, sizeof *c);
    if (!c) {
        set_errbuf(err, errlen, "out of memory");
        return NULL;
    }
    bool tcp = strncmp(address, "tcp:", 4) == 0;
    c->fd = tcp ? connect_tcp(address, err, errlen) : connect_unix(address, err, errlen);
    if (c->fd < 0) {
        free(c);
        return NULL;
    }
    c->next_id = 1;
    if (tcp && auth_from_env(c, address, err, errlen) != 0) {
        pod_client_close(c);
        return NULL;
    }
    return c;
}

void pod_client_close(pod_client *c)
{
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    for (size_t i = 0; i < c->qlen; i++) pod_reply_free(c->queue[i]);
    free(c->queue);
    free(c->abandoned);
    pod_buf_free(&c->out);
    pod_buf_free(&c->in);
    free(c);
}

void pod_client_set_timeout(pod_client *c, int timeout_ms)
{
    if (c) c->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
}

const char *pod_client_error(const pod_client *c) { return c ? c->err : "no client"; }

size_t pod_client_pending(const pod_client *c) { return c ? c->pending : 0; }

/* ---- receiving ----------------------------------------------------------------- */

/* Read what the socket has (one recv, not waiting). 1: bytes read; 0: nothing
 * (interrupted, or would block); -1: the connection is dead. */
static int read_some(pod_client *c)
{
    if (c->in_off) {
        pod_buf_consume(&c->in, c->in_off);
        c->in_off = 0;
    }
    size_t want = READ_CHUNK;
    long size = pod_proto_frame_size(c->in.p, c->in.len);
    if (size == 0 && c->in.len >= 4) {
        /* A frame of known length is coming: make room for all of it. */
        size_t total = 4 + (size_t)(c->in.p[0] | (c->in.p[1] << 8) | (c->in.p[2] << 16) |
                                    ((size_t)c->in.p[3] << 24));
        if (total - c->in.len > want) want = total - c->in.len;
    }
    if (c->in.cap - c->in.len < want && pod_buf_reserve(&c->in, want) != 0) {
        set_dead(c, "out of memory receiving");
        return -1;
    }
    ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
    if (n > 0) {
        c->in.len += (size_t)n;
        return 1;
    }
    if (n == 0) {
        set_dead(c, "connection closed by server");
        return -1;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET)
        set_dead(c, "connection reset by server");
    else
        set_dead(c, "receive: %s", strerror(errno));
    return -1;
}

/* Frame the next reply out of the receive buffer: 1 (*out set), 0 (need more
 * bytes), -1 (the stream is corrupt: the client is broken). */
static int next_frame(pod_client *c, pod_reply **out)
{
    size_t avail = c->in.len - c->in_off;
    if (avail < 4) return 0;
    const unsigned char *p = c->in.p + c->in_off;
    long size = pod_proto_frame_size(p, avail);
    if (size == 0) return 0;
    if (size < 0) {
        uint32_t n = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24);
        set_dead(c, "malformed reply from server: length field %" PRIu32 " is out of range (1 .. %u)",
                 n, POD_PROTO_MAX_FRAME);
        c->in.len = c->in_off = 0;
        return -1;
    }
    pod_reply *r = make_reply(c, p, (size_t)size);
    if (!r) {
        c->in.len = c->in_off = 0;
        return -1;
    }
    c->in_off += (size_t)size;
    if (c->in_off == c->in.len) c->in.len = c->in_off = 0;
    *out = r;
    return 1;
}

static bool take_abandoned(pod_client *c, uint64_t id)
{
    for (size_t i = 0; i < c->nabandoned; i++) {
        if (c->abandoned[i] == id) {
            c->abandoned[i] = c->abandoned[--c->nabandoned];
            return true;
        }
    }
    return false;
}

/* Wait for the next reply to a call of ours (replies to calls whose
 * pod_client_call gave up are dropped). NULL on timeout or when broken. */
static pod_reply *receive_one(pod_client *c, int64_t start)
{
    for (;;) {
        pod_reply *r = NULL;
        int rc = next_frame(c, &r);
        if (rc < 0) return NULL;
        if (rc > 0) {
            if (r->id == 0) {
                /* The server answers request id 0 when it could not read a
                 * frame's header; it closes the connection after that. */
                set_dead(c, "server error: %s: %s", pod_status_name(r->status), r->msg);
                c->in.len = c->in_off = 0;
                pod_reply_free(r);
                return NULL;
            }
            if (r->id >= c->next_id) {
                set_dead(c, "reply for request id %" PRIu64 ", which was never sent", r->id);
                c->in.len = c->in_off = 0;
                pod_reply_free(r);
                return NULL;
            }
            if (take_abandoned(c, r->id)) {
                pod_reply_free(r);
                continue;
            }
            return r;
        }
        if (c->broken) {
            report_dead(c);
            return NULL;
        }
        int ev = wait_fd(c, POLLIN, start);
        if (ev < 0) return NULL;
        if (ev == 0) {
            set_err(c, "timed out after %d ms waiting for a reply", c->timeout_ms);
            return NULL;
        }
        read_some(c); /* a dead connection is noticed at the top of the loop */
    }
}

/* ---- sending ------------------------------------------------------------------- */

static int flush_from(pod_client *c, int64_t start)
{
    while (c->out_off < c->out.len) {
        if (c->broken) {
            report_dead(c);
            return -1;
        }
        int ev = wait_fd(c, POLLOUT | POLLIN, start);
        if (ev < 0) return -1;
        if (ev == 0) {
            set_err(c, "timed out after %d ms sending", c->timeout_ms);
            return -1;
        }
        /* Take in replies while writing: the server may be waiting for us to
         * read before it reads more. */
        if ((ev & (POLLIN | POLLHUP | POLLERR)) && read_some(c) < 0) continue;
        if (!(ev & (POLLOUT | POLLERR))) continue;
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            if (errno == EPIPE || errno == ECONNRESET)
                set_dead(c, "connection closed by server (%s)", strerror(errno));
            else
                set_dead(c, "send: %s", strerror(errno));
            report_dead(c);
            return -1;
        }
    }
    c->out.len = c->out_off = 0;
    return 0;
}

int pod_client_flush(pod_client *c)
{
    if (!c) return -1;
    if (c->broken) {
        report_dead(c);
        return -1;
    }
    return flush_from(c, now_ms());
}

uint64_t pod_client_send(pod_client *c, const char *proc, const pod_value *args, int nargs,
                         unsigned flags)
{
    if (!c) return 0;
    if (c->broken) {
        report_dead(c);
        return 0;
    }
    if (!proc || !*proc) {
        set_err(c, "no procedure name");
        return 0;
    }
    if (strlen(proc) > UINT16_MAX) {
        set_err(c, "procedure name is too long (%zu bytes, at most %d)", strlen(proc), UINT16_MAX);
        return 0;
    }
    if (nargs < 0 || nargs > UINT16_MAX || (nargs > 0 && !args)) {
        set_err(c, "%s: bad argument count %d (0 .. %d)", proc, nargs, UINT16_MAX);
        return 0;
    }
    if (flags > UINT8_MAX || (flags & ~(unsigned)POD_CALL_EARLY_REPLY)) {
        set_err(c, "%s: unknown call flags 0x%x", proc, flags);
        return 0;
    }
    for (int i = 0; i < nargs; i++) {
        if (pod_proto_value_size(&args[i]) == 0) {
            set_err(c, "%s: argument %d has unknown value type %d", proc, i + 1,
                    (int)args[i].type);
            return 0;
        }
        if (args[i].type == POD_T_BYTES && args[i].len && !args[i].u.bytes) {
            set_err(c, "%s: argument %d has %u bytes at NULL", proc, i + 1, args[i].len);
            return 0;
        }
    }
    uint64_t id = c->next_id;
    size_t before = c->out.len;
    if (pod_proto_encode_call(&c->out, id, (uint8_t)flags, proc, 0, args, nargs) != 0) {
        c->out.len = before;
        set_err(c, "%s: call too large (more than %u bytes) or out of memory", proc,
                POD_PROTO_MAX_FRAME);
        return 0;
    }
    c->next_id++;
    c->pending++;
    return id;
}

pod_reply *pod_client_recv(pod_client *c)
{
    if (!c) return NULL;
    int64_t start = now_ms();
    if (c->qlen) {
        pod_reply *r = c->queue[0];
        memmove(c->queue, c->queue + 1, (c->qlen - 1) * sizeof *c->queue);
        c->qlen--;
        c->pending--;
        return r;
    }
    if (c->pending == 0) {
        set_err(c, "no calls pending");
        return NULL;
    }
    /* Calls queued but not flushed could never be answered. If the
     * connection died, replies received before still are handed out. */
    if (c->out_off < c->out.len && !c->broken && flush_from(c, start) != 0 && !c->broken)
        return NULL;
    pod_reply *r = receive_one(c, start);
    if (r) c->pending--;
    return r;
}

static int enqueue(pod_client *c, pod_reply *r)
{
    if (c->qlen == c->qcap) {
        size_t cap = c->qcap ? 2 * c->qcap : 8;
        pod_reply **q = realloc(c->queue, cap * sizeof *q);
        if (!q) return -1;
        c->queue = q;
        c->qcap = cap;
    }
    c->queue[c->qlen++] = r;
    return 0;
}

/* pod_client_call gives up on id: its reply, when it comes, is dropped. */
static void abandon(pod_client *c, uint64_t id)
{
    c->pending--;
    if (c->broken) return;
    if (c->nabandoned == c->abandoned_cap) {
        size_t cap = c->abandoned_cap ? 2 * c->abandoned_cap : 4;
        uint64_t *a = realloc(c->abandoned, cap * sizeof *a);
        if (!a) {
            set_dead(c, "out of memory");
            return;
        }
        c->abandoned = a;
        c->abandoned_cap = cap;
    }
    c->abandoned[c->nabandoned++] = id;
}

pod_reply *pod_client_call_flags(pod_client *c, const char *proc, const pod_value *args,
                                 int nargs, unsigned flags)
{
    int64_t start = now_ms();
    uint64_t id = pod_client_send(c, proc, args, nargs, flags);
    if (id == 0) return NULL;
    if (flush_from(c, start) != 0) {
        abandon(c, id);
        return NULL;
    }
    for (;;) {
        pod_reply *r = receive_one(c, start);
        if (!r) {
            char keep[sizeof c->err];
            memcpy(keep, c->err, sizeof keep);
            abandon(c, id);
            memcpy(c->err, keep, sizeof keep);
            return NULL;
        }
        if (r->id == id) {
            c->pending--;
            return r;
        }
        if (enqueue(c, r) != 0) {
            pod_reply_free(r);
            set_dead(c, "out of memory queueing a reply");
            abandon(c, id);
            return NULL;
        }
    }
}

pod_reply *pod_client_call(pod_client *c, const char *proc, const pod_value *args, int nargs)
{
    return pod_client_call_flags(c, proc, args, nargs, 0);
}

/* ---- the TCP listener's token ------------------------------------------------ */

int pod_client_auth(pod_client *c, const void *token, size_t len)
{
    if (!c) return POD_E_INVALID;
    if (len > TOKEN_MAX || (len && !token)) {
        set_err(c, "a token has at most %d bytes", TOKEN_MAX);
        return POD_E_INVALID;
    }
    pod_value v = pod_v_bytes(token, (uint32_t)len);
    pod_reply *r = pod_client_call(c, "sys.auth", &v, 1);
    /* The call is written: its copy of the token goes. */
    if (c->out.len == 0 && c->out.p) explicit_bzero(c->out.p, c->out.cap);
    if (!r) return POD_E_INTERNAL;
    int status = pod_reply_status(r);
    if (status != POD_OK)
        set_err(c, "token refused: %s: %s", pod_status_name(status), pod_reply_message(r));
    pod_reply_free(r);
    return status;
}

int pod_client_auth_file(pod_client *c, const char *path)
{
    if (!c) return POD_E_INVALID;
    unsigned char buf[TOKEN_MAX + 3];
    size_t n = 0;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0) {
        set_err(c, "cannot read token file %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return POD_E_INVALID;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(c, "token file %s is not a regular file", path);
        close(fd);
        return POD_E_INVALID;
    }
    while (n < sizeof buf) {
        ssize_t r = read(fd, buf + n, sizeof buf - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            set_err(c, "cannot read token file %s: %s", path, strerror(errno));
            close(fd);
            explicit_bzero(buf, sizeof buf);
            return POD_E_INVALID;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    /* As the server reads its file: one trailing "\n" or "\r\n" is not the token's. */
    size_t len = n;
    if (len && buf[len - 1] == '\n') len--;
    if (len && n > len && buf[len - 1] == '\r') len--;
    int rc;
    if (len < TOKEN_MIN || len > TOKEN_MAX) {
        if (n == sizeof buf)
            set_err(c, "token file %s holds more than %d bytes (expected a token of %d..%d bytes)",
                    path, TOKEN_MAX, TOKEN_MIN, TOKEN_MAX);
        else
            set_err(c, "token file %s holds %zu bytes of token (expected %d..%d; a trailing "
                    "newline is not counted)", path, len, TOKEN_MIN, TOKEN_MAX);
        rc = POD_E_INVALID;
    } else {
        rc = pod_client_auth(c, buf, len);
    }
    explicit_bzero(buf, sizeof buf);
    return rc;
}
