/* poddb-server under a storm of random and mutated frames.
 *
 * A real server ($PODDB_BIN/poddb-server) gets N known keys (table safe),
 * then for PODDB_FUZZ_SECONDS (default 5) several threads throw frames at it
 * over many short-lived and long-lived connections: valid calls with random
 * procedures, argument counts and types; the same with bit flips, changed
 * bytes, truncations, extra bytes, changed counts and length fields; random
 * bytes; partial frames; bursts closed without reading. The client side never
 * waits without a bound (non-blocking sockets, poll with timeouts).
 *
 * What must hold:
 *   - every reply the server sends is a well-formed REPLY frame;
 *   - on a connection whose frames are all framed correctly (the length
 *     field matches), every frame is answered exactly once, with its request
 *     id (0 for frames too short for a header), and the connection stays usable;
 *   - afterwards sys.ping answers, all N keys read back exactly, no
 *     connection is left open, the server is idle, still alive, has no
 *     sanitizer report in its output, and stops cleanly on SIGTERM.
 *
 * PODDB_FUZZ_SEED=n repeats a run's choices (thread timing still varies). */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/server_harness.h"
#include "helpers/testutil.h"

#define NKNOWN 400
#define NTHREADS 3
#define CALL_TIMEOUT_MS 20000
#define ANSWER_TIMEOUT_MS 15000 /* a framed call must be answered within this */

static struct sh_server S;
static int fuzz_seconds = 5;
static uint64_t fuzz_seed;

/* ---- randomness --------------------------------------------------------------- */

static uint32_t rn(uint64_t *s, uint32_t n) { return n ? (uint32_t)(tu_rand(s) % n) : 0; }
static bool chance(uint64_t *s, int percent) { return rn(s, 100) < (uint32_t)percent; }

/* ---- the known keys ------------------------------------------------------------- */

static void known_key(int i, char *k) { snprintf(k, 32, "known-%05d", i); }
static uint32_t known_value(int i, unsigned char *v)
{
    uint32_t n = (uint32_t)(1 + (i * 37) % 128);
    for (uint32_t j = 0; j < n; j++) v[j] = (unsigned char)(i ^ (j * 11));
    return n;
}

/* ---- frame generation --------------------------------------------------------------- */

static const char *const proc_names[] = {
    "kv.get", "kv.put", "kv.insert", "kv.delete", "kv.scan", "kv.multi", "sys.ping",
    "sys.stats", "sys.config", "sys.procs", "sys.tables", "kv.nope", "sys.", "k",
};
#define NPROC_NAMES (sizeof proc_names / sizeof proc_names[0])
/* never "safe": the known keys must survive */
static const char *const tables[] = {"kv", "big", "nosuch", ""};
static const char *const ops[] = {"get", "put", "insert", "delete", "bogus"};

struct gen {
    unsigned char store[8][1200]; /* backing for byte arguments */
    int nstore;
};

static pod_value gen_bytes(uint64_t *r, struct gen *g, int kind)
{
    unsigned char *p = g->store[g->nstore++ % 8];
    uint32_t n;
    switch (kind) {
    case 0: { /* table */
        const char *t = tables[rn(r, 4)];
        return pod_v_str(t);
    }
    case 1: /* key: a small key space, sometimes too long */
        n = chance(r, 5) ? 60 + rn(r, 10) : rn(r, 4);
        for (uint32_t i = 0; i < n; i++) p[i] = (unsigned char)("abcdefgh\x00\x01\x7f\x80\xc0\xfe\xff Z"[rn(r, 16)]);
        return pod_v_bytes(p, n);
    case 2: /* value, sometimes too long for kv (1024) */
        n = chance(r, 5) ? 1000 + rn(r, 200) : rn(r, 64);
        for (uint32_t i = 0; i < n; i++) p[i] = (unsigned char)tu_rand(r);
        return pod_v_bytes(p, n);
    default: { /* an operation name for kv.multi */
        return pod_v_str(ops[rn(r, 5)]);
    }
    }
}

static pod_value gen_value(uint64_t *r, struct gen *g, int kind_hint)
{
    switch (rn(r, 10)) {
    case 0: return (pod_value){POD_T_NULL, 0, {0}};
    case 1: return pod_v_i64(chance(r, 50) ? (int64_t)rn(r, 20) - 2 : (int64_t)tu_rand(r));
    case 2: return pod_v_f64((double)(int64_t)tu_rand(r) / 1e9);
    default: return gen_bytes(r, g, kind_hint);
    }
}

/* Append one call frame (valid as far as framing goes) to b. */
static void gen_call(uint64_t *r, struct pod_buf *b, uint64_t id)
{
    struct gen g = {.nstore = 0};
    pod_value args[16];
    int n = 0;
    const char *name = NULL;
    uint32_t proc_id = 0;
    if (chance(r, 10)) {
        proc_id = chance(r, 80) ? rn(r, 14) : (uint32_t)tu_rand(r); /* by id */
    } else {
        name = proc_names[rn(r, NPROC_NAMES)];
    }
    const char *nm = name ? name : "";
    if (!strcmp(nm, "kv.multi")) {
        int nops = 1 + (int)rn(r, 3);
        for (int o = 0; o < nops && n < 13; o++) {
            args[n++] = chance(r, 90) ? gen_bytes(r, &g, 3) : gen_value(r, &g, 3);
            args[n++] = gen_value(r, &g, 0);
            args[n++] = gen_value(r, &g, 1);
            if (chance(r, 60)) args[n++] = gen_value(r, &g, 2);
        }
    } else if (!strcmp(nm, "kv.scan")) {
        args[n++] = gen_value(r, &g, 0);
        args[n++] = chance(r, 50) ? (pod_value){POD_T_NULL, 0, {0}} : gen_value(r, &g, 1);
        args[n++] = chance(r, 50) ? (pod_value){POD_T_NULL, 0, {0}} : gen_value(r, &g, 1);
        if (chance(r, 70)) args[n++] = pod_v_i64(chance(r, 80) ? (int64_t)rn(r, 30) : (int64_t)tu_rand(r));
        if (chance(r, 50)) args[n++] = chance(r, 80) ? pod_v_i64(rn(r, 2)) : gen_value(r, &g, 1);
    } else {
        int want = !strcmp(nm, "kv.put") || !strcmp(nm, "kv.insert") ? 3
                   : nm[0] == 'k'                                   ? 2
                                                                    : 0;
        if (chance(r, 15)) want = (int)rn(r, 6);
        static const int kinds[] = {0, 1, 2, 1, 2, 1};
        for (int i = 0; i < want; i++) args[n++] = chance(r, 85) ? gen_bytes(r, &g, kinds[i]) : gen_value(r, &g, kinds[i]);
    }
    if (chance(r, 2)) { /* a huge argument count: nulls are one byte each */
        int many = 4000 + (int)rn(r, 200);
        pod_value *big = calloc((size_t)many, sizeof *big);
        if (big) {
            pod_proto_encode_call(b, id, 0, name ? name : "kv.multi", 0, big, many);
            free(big);
        }
        return;
    }
    pod_proto_encode_call(b, id, chance(r, 20) ? POD_CALL_EARLY_REPLY : 0, name, proc_id, args, n);
}

/* Mutate the frame at b->p + off (len bytes) in place, keeping the length
 * field right (the stream stays framed). Frames stay >= 5 bytes. */
static void mutate_framed(uint64_t *r, struct pod_buf *b, size_t off)
{
    size_t len = b->len - off;
    int nmut = 1 + (int)rn(r, 3);
    for (int m = 0; m < nmut; m++) {
        unsigned char *f = b->p + off;
        switch (rn(r, 8)) {
        case 0: /* bit flips after the length field */
        case 1:
            for (int k = 0, nk = 1 + (int)rn(r, 4); k < nk; k++) {
                size_t pos = 4 + rn(r, (uint32_t)(len - 4));
                f[pos] ^= (unsigned char)(1u << rn(r, 8));
            }
            break;
        case 2: /* a random byte */
            f[4 + rn(r, (uint32_t)(len - 4))] = (unsigned char)tu_rand(r);
            break;
        case 3: /* truncate */
            if (len > 5) len = 5 + rn(r, (uint32_t)(len - 5));
            break;
        case 4: { /* append random bytes */
            uint32_t add = 1 + rn(r, 16);
            b->len = off + len; /* reserve past what the frame is now */
            if (pod_buf_reserve(b, add) != 0) break;
            f = b->p + off;
            for (uint32_t k = 0; k < add; k++) f[len + k] = (unsigned char)tu_rand(r);
            len += add;
            break;
        }
        case 5: /* a random 16- or 32-bit count somewhere in the body (nargs, name_len, lengths) */
            if (len >= 20) {
                size_t pos = 16 + rn(r, (uint32_t)(len - 19));
                uint32_t v = chance(r, 50) ? 0xffffffffu - rn(r, 4) : (uint32_t)tu_rand(r);
                if (chance(r, 50)) pod_proto_put_u16(f + pos, (uint16_t)v);
                else pod_proto_put_u32(f + pos, v);
            }
            break;
        case 6: /* header fields: kind, flags, reserved */
            f[4 + rn(r, 4)] = (unsigned char)(chance(r, 50) ? rn(r, 4) : tu_rand(r));
            break;
        default: /* a value type byte somewhere */
            if (len > 18) f[18 + rn(r, (uint32_t)(len - 18))] = (unsigned char)rn(r, 6);
            break;
        }
    }
    b->len = off + len;
    pod_proto_put_u32(b->p + off, (uint32_t)(len - 4));
}

/* Mutations that break the framing: a wrong or out-of-range length field. */
static void mutate_unframed(uint64_t *r, struct pod_buf *b, size_t off)
{
    unsigned char *f = b->p + off;
    uint32_t len = (uint32_t)(b->len - off - 4);
    switch (rn(r, 5)) {
    case 0: pod_proto_put_u32(f, 0); break;
    case 1: pod_proto_put_u32(f, POD_PROTO_MAX_FRAME + 1 + rn(r, 1000)); break;
    case 2: pod_proto_put_u32(f, (uint32_t)tu_rand(r)); break;
    case 3: pod_proto_put_u32(f, len + 1 + rn(r, 64)); break; /* waits for more */
    default: pod_proto_put_u32(f, len > 1 ? len - 1 - rn(r, len - 1) : 1); break;
    }
}

/* ---- connections ---------------------------------------------------------------- */

struct fconn {
    int fd;
    struct pod_buf in, frame;
    bool closed;     /* EOF or reset seen */
    uint64_t replies;
    uint64_t id_sum;  /* of reply ids, to compare with what was sent */
};

struct worker {
    int idx;
    uint64_t rng;
    uint64_t deadline_ms;
    /* counters */
    uint64_t frames, replies, conns, closed_by_server;
    char fail[512];
};

static void fail_once(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_once(struct worker *w, const char *fmt, ...)
{
    if (w->fail[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->fail, sizeof w->fail, fmt, ap);
    va_end(ap);
}

/* A new connection of worker w, counted; false when it cannot connect (a
 * failure of the test when must: the modes that expect a working server). */
static bool fc_open(struct worker *w, struct fconn *c, bool must)
{
    memset(c, 0, sizeof *c);
    c->fd = sh_raw_connect(S.sock);
    if (c->fd < 0) {
        if (must) fail_once(w, "connect: %s", strerror(errno));
        return false;
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    w->conns++;
    return true;
}

static void fc_close(struct fconn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    pod_buf_free(&c->in);
    pod_buf_free(&c->frame);
}

/* Read what is there (waiting up to wait_ms for the first bytes) and check
 * every complete reply. */
static void fc_drain(struct worker *w, struct fconn *c, int wait_ms)
{
    while (!c->closed) {
        struct pollfd p = {c->fd, POLLIN, 0};
        int pr = poll(&p, 1, wait_ms);
        if (pr <= 0) return;
        wait_ms = 0;
        if (pod_buf_reserve(&c->in, 65536) != 0) return;
        ssize_t n = recv(c->fd, c->in.p + c->in.len, 65536, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            c->closed = true;
            w->closed_by_server++;
            break;
        }
        c->in.len += (size_t)n;
        for (;;) {
            long fs = pod_proto_frame_size(c->in.p, c->in.len);
            if (fs == 0) break;
            if (fs < 0) {
                fail_once(w, "the server sent an unframeable reply (length field %02x%02x%02x%02x)",
                          c->in.p[3], c->in.p[2], c->in.p[1], c->in.p[0]);
                c->closed = true;
                return;
            }
            struct pod_reply_frame rep;
            char err[256];
            if (pod_proto_decode_reply(c->in.p, (size_t)fs, &rep, err, sizeof err) != 0)
                fail_once(w, "malformed reply from the server: %s", err);
            else if (rep.status < POD_E_NOT_DURABLE || rep.status > POD_EXISTS)
                fail_once(w, "reply with unknown status %d", rep.status);
            c->replies++;
            c->id_sum += rep.request_id;
            w->replies++;
            pod_buf_consume(&c->in, (size_t)fs);
        }
    }
}

/* Send everything without blocking forever: while the socket is full, read
 * replies (the server may be waiting for us). false: closed, or no progress
 * for timeout_ms. */
static bool fc_send(struct worker *w, struct fconn *c, const unsigned char *p, size_t n,
                    int timeout_ms)
{
    uint64_t last = sh_now_ms();
    while (n && !c->closed) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            last = sh_now_ms();
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EINTR) {
            c->closed = true;
            return false;
        }
        if (sh_now_ms() - last > (uint64_t)timeout_ms) return false;
        struct pollfd pf = {c->fd, POLLOUT | POLLIN, 0};
        poll(&pf, 1, 50);
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) fc_drain(w, c, 0);
    }
    return n == 0;
}

/* ---- storm modes -------------------------------------------------------------- */

/* A few frames (mostly mutated) on a fresh connection; maybe read; close. */
static void mode_short(struct worker *w)
{
    uint64_t *r = &w->rng;
    struct fconn c;
    if (!fc_open(w, &c, true)) return;
    struct pod_buf b = {0};
    int nf = 1 + (int)rn(r, 4);
    for (int i = 0; i < nf; i++) {
        size_t off = b.len;
        gen_call(r, &b, tu_rand(r));
        if (b.len == off) continue;
        if (chance(r, 70)) mutate_framed(r, &b, off);
        else if (chance(r, 40)) mutate_unframed(r, &b, off);
        w->frames++;
    }
    if (chance(r, 30) && b.len > 1) b.len = 1 + rn(r, (uint32_t)b.len - 1); /* cut anywhere */
    fc_send(w, &c, b.p, b.len, 2000);
    if (chance(r, 50)) fc_drain(w, &c, (int)rn(r, 30));
    pod_buf_free(&b);
    fc_close(&c);
}

/* Random bytes. */
static void mode_garbage(struct worker *w)
{
    uint64_t *r = &w->rng;
    struct fconn c;
    if (!fc_open(w, &c, false)) return;
    uint32_t n = 1 + rn(r, chance(r, 80) ? 64 : 8192);
    unsigned char *p = malloc(n);
    for (uint32_t i = 0; i < n; i++) p[i] = (unsigned char)tu_rand(r);
    if (chance(r, 50) && n >= 4) pod_proto_put_u32(p, rn(r, n)); /* a plausible length */
    fc_send(w, &c, p, n, 1000);
    fc_drain(w, &c, (int)rn(r, 20));
    free(p);
    fc_close(&c);
}

/* Many frames in one write, then close without reading (or reading a little). */
static void mode_burst(struct worker *w)
{
    uint64_t *r = &w->rng;
    struct fconn c;
    if (!fc_open(w, &c, false)) return;
    struct pod_buf b = {0};
    int nf = 20 + (int)rn(r, 150);
    for (int i = 0; i < nf; i++) {
        size_t off = b.len;
        gen_call(r, &b, (uint64_t)i + 1);
        if (b.len > off && chance(r, 50)) mutate_framed(r, &b, off);
        w->frames++;
    }
    fc_send(w, &c, b.p, b.len, 2000);
    if (chance(r, 30)) fc_drain(w, &c, 5);
    if (chance(r, 30)) shutdown(c.fd, SHUT_WR);
    pod_buf_free(&b);
    fc_close(&c);
}

/* A long-lived connection whose frames all stay framed: every frame is
 * answered exactly once (ids checked by sum and count), and at the end a
 * ping still works. */
static void mode_session(struct worker *w)
{
    uint64_t *r = &w->rng;
    struct fconn c;
    if (!fc_open(w, &c, true)) return;
    uint64_t sent = 0, id_sum = 0;
    uint64_t until = sh_now_ms() + 20 + rn(r, 150);
    struct pod_buf b = {0};
    while (sh_now_ms() < until && sh_now_ms() < w->deadline_ms && !c.closed) {
        b.len = 0;
        int nf = 1 + (int)rn(r, 8);
        for (int i = 0; i < nf; i++) {
            size_t off = b.len;
            gen_call(r, &b, 1 + tu_rand(r) % 1000000);
            if (b.len == off) continue;
            if (chance(r, 60)) mutate_framed(r, &b, off);
            size_t flen = b.len - off;
            id_sum += flen >= POD_PROTO_HEADER ? (uint64_t)b.p[off + 8] | (uint64_t)b.p[off + 9] << 8 |
                                                      (uint64_t)b.p[off + 10] << 16 |
                                                      (uint64_t)b.p[off + 11] << 24 |
                                                      (uint64_t)b.p[off + 12] << 32 |
                                                      (uint64_t)b.p[off + 13] << 40 |
                                                      (uint64_t)b.p[off + 14] << 48 |
                                                      (uint64_t)b.p[off + 15] << 56
                                                : 0;
            sent++;
            w->frames++;
        }
        /* sometimes in small pieces */
        if (chance(r, 20)) {
            for (size_t pos = 0; pos < b.len && !c.closed;) {
                size_t k = 1 + rn(r, 40);
                if (k > b.len - pos) k = b.len - pos;
                if (!fc_send(w, &c, b.p + pos, k, 10000)) break;
                pos += k;
            }
        } else if (!fc_send(w, &c, b.p, b.len, 10000)) {
            if (!c.closed) fail_once(w, "session: the server stopped reading for 10 s");
            break;
        }
        fc_drain(w, &c, 0);
    }
    pod_buf_free(&b);
    if (!c.closed) {
        /* every frame answered, and the connection still usable */
        struct pod_buf p = {0};
        pod_proto_encode_call(&p, 4242, 0, "sys.ping", 0, NULL, 0);
        fc_send(w, &c, p.p, p.len, 10000);
        pod_buf_free(&p);
        sent++;
        id_sum += 4242;
        uint64_t end = sh_now_ms() + ANSWER_TIMEOUT_MS;
        while (c.replies < sent && !c.closed && sh_now_ms() < end) fc_drain(w, &c, 100);
    }
    if (c.closed)
        fail_once(w, "session: the server closed a connection whose frames were all framed "
                     "(%" PRIu64 " of %" PRIu64 " answered)", c.replies, sent);
    else if (c.replies != sent)
        fail_once(w, "session: %" PRIu64 " frames sent, %" PRIu64 " answered within %d ms", sent,
                  c.replies, ANSWER_TIMEOUT_MS);
    else if (c.id_sum != id_sum)
        fail_once(w, "session: the reply ids do not match the request ids");
    fc_close(&c);
}

/* Half a frame, a pause, then the rest or a close. */
static void mode_partial(struct worker *w)
{
    uint64_t *r = &w->rng;
    struct fconn c;
    if (!fc_open(w, &c, false)) return;
    struct pod_buf b = {0};
    gen_call(r, &b, 77);
    w->frames++;
    size_t cut = b.len > 1 ? 1 + rn(r, (uint32_t)b.len - 1) : b.len;
    fc_send(w, &c, b.p, cut, 1000);
    sh_sleep_ms((int)rn(r, 10));
    if (chance(r, 50)) {
        fc_send(w, &c, b.p + cut, b.len - cut, 1000);
        uint64_t end = sh_now_ms() + ANSWER_TIMEOUT_MS;
        while (c.replies < 1 && !c.closed && sh_now_ms() < end) fc_drain(w, &c, 100);
        if (c.replies != 1) fail_once(w, "partial: a frame sent in two parts was not answered");
    }
    pod_buf_free(&b);
    fc_close(&c);
}

static void *storm(void *arg)
{
    struct worker *w = arg;
    while (sh_now_ms() < w->deadline_ms && !w->fail[0]) {
        switch (rn(&w->rng, 12)) {
        case 0: case 1: case 2: case 3: mode_short(w); break;
        case 4: case 5: mode_garbage(w); break;
        case 6: case 7: mode_burst(w); break;
        case 8: case 9: mode_session(w); break;
        default: mode_partial(w); break;
        }
    }
    return NULL;
}

/* ---- the test --------------------------------------------------------------------- */

static pod_client *conn(void)
{
    char err[256];
    pod_client *c = pod_client_connect(S.sock, err, sizeof err);
    ck_assert_msg(c != NULL, "connect: %s", err);
    pod_client_set_timeout(c, CALL_TIMEOUT_MS);
    return c;
}

static int64_t open_connections(pod_client *c)
{
    pod_reply *r = pod_client_call(c, "sys.stats", NULL, 0);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "sys.stats: %s", pod_client_error(c));
    const pod_value *v = pod_reply_value(r, 0, 2);
    ck_assert(v && v->type == POD_T_I64);
    int64_t n = v->u.i64;
    pod_reply_free(r);
    return n;
}

static void check_alive(const char *when)
{
    const char *san = sh_sanitizer_error(&S);
    bool alive = sh_alive(&S);
    if (!alive || san) {
        sh_dump_log(&S, when);
        ck_abort_msg("%s: the server %s%s%s", when, alive ? "is alive" : "died",
                     san ? "; sanitizer report: " : "", san ? san : "");
    }
}

START_TEST(test_fuzz_storm)
{
    ck_assert_int_eq(sh_prepare(&S, 2, 0, NULL), 0);
    if (sh_start(&S, 30000) != 0) {
        sh_dump_log(&S, "start");
        ck_abort_msg("the server did not start");
    }
    pod_client *c = conn();
    for (int i = 0; i < NKNOWN; i++) {
        char k[32];
        unsigned char v[128];
        known_key(i, k);
        uint32_t n = known_value(i, v);
        pod_value a[] = {pod_v_str("safe"), pod_v_str(k), pod_v_bytes(v, n)};
        pod_reply *r = pod_client_call(c, "kv.put", a, 3);
        ck_assert_msg(r && pod_reply_status(r) == POD_OK, "put %d", i);
        pod_reply_free(r);
    }
    pod_client_close(c);

    fprintf(stderr, "fuzz: %d s, seed %" PRIu64 " (PODDB_FUZZ_SEED to repeat)\n", fuzz_seconds,
            fuzz_seed);
    struct worker w[NTHREADS];
    pthread_t th[NTHREADS];
    uint64_t deadline = sh_now_ms() + (uint64_t)fuzz_seconds * 1000;
    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].idx = i;
        w[i].rng = fuzz_seed + (uint64_t)i * 0x1234567ull;
        w[i].deadline_ms = deadline;
        ck_assert_int_eq(pthread_create(&th[i], NULL, storm, &w[i]), 0);
    }
    /* watch the server while the storm goes on */
    while (sh_now_ms() < deadline) {
        sh_sleep_ms(200);
        if (!sh_alive(&S) || sh_sanitizer_error(&S)) break;
    }
    uint64_t frames = 0, replies = 0, conns = 0, closed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        frames += w[i].frames;
        replies += w[i].replies;
        conns += w[i].conns;
        closed += w[i].closed_by_server;
    }
    fprintf(stderr, "fuzz: %" PRIu64 " frames on %" PRIu64 " connections, %" PRIu64
            " replies, %" PRIu64 " connections closed by the server\n",
            frames, conns, replies, closed);
    check_alive("after the storm");
    for (int i = 0; i < NTHREADS; i++)
        ck_assert_msg(!w[i].fail[0], "storm thread %d: %s", i, w[i].fail);

    /* everything committed before is still there, exactly */
    c = conn();
    pod_reply *r = pod_client_call(c, "sys.ping", NULL, 0);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "sys.ping after the storm");
    pod_reply_free(r);
    for (int i = 0; i < NKNOWN; i++) {
        char k[32];
        unsigned char v[128];
        known_key(i, k);
        uint32_t n = known_value(i, v);
        pod_value a[] = {pod_v_str("safe"), pod_v_str(k)};
        r = pod_client_call(c, "kv.get", a, 2);
        ck_assert_msg(r && pod_reply_status(r) == POD_OK, "known key %d is gone", i);
        const pod_value *got = pod_reply_value(r, 0, 0);
        ck_assert_msg(got && got->type == POD_T_BYTES && got->len == n &&
                          memcmp(got->u.bytes, v, n) == 0,
                      "known key %d has a different value", i);
        pod_reply_free(r);
    }
    pod_value nul = {POD_T_NULL, 0, {0}};
    pod_value sa[] = {pod_v_str("safe"), nul, nul};
    r = pod_client_call(c, "kv.scan", sa, 3);
    ck_assert_msg(r && pod_reply_nrows(r) == NKNOWN, "table safe has %d rows, expected %d",
                  r ? pod_reply_nrows(r) : -1, NKNOWN);
    pod_reply_free(r);

    /* no connection of the storm is left, and the server is idle */
    uint64_t end = sh_now_ms() + 10000;
    int64_t open;
    while ((open = open_connections(c)) != 1 && sh_now_ms() < end) sh_sleep_ms(50);
    long hz = sysconf(_SC_CLK_TCK), t0 = sh_cpu_ticks(S.pid);
    sh_sleep_ms(1000);
    long idle_ms = (sh_cpu_ticks(S.pid) - t0) * 1000 / hz;
    pod_client_close(c);
    check_alive("at the end");
    ck_assert_msg(open == 1, "%" PRId64 " connections still open after the storm (1 expected)",
                  open);
    ck_assert_msg(idle_ms < 300, "the idle server used %ld ms of CPU in 1 s (a busy loop?)",
                  idle_ms);

    /* and it stops cleanly (LeakSanitizer runs at its exit) */
    int st = sh_stop(&S, SIGTERM, 20000);
    const char *san = sh_sanitizer_error(&S);
    if (st != 0 || san) sh_dump_log(&S, "stop");
    ck_assert_msg(st == 0, "the server did not exit cleanly after the storm (wait status %d)", st);
    ck_assert_msg(!san, "sanitizer report: %s", san);
    sh_remove_region(&S);
}
END_TEST

int main(void)
{
    sh_init();
    const char *secs = getenv("PODDB_FUZZ_SECONDS");
    if (secs && atoi(secs) > 0) fuzz_seconds = atoi(secs);
    const char *seed = getenv("PODDB_FUZZ_SEED");
    fuzz_seed = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    Suite *s = suite_create("server_fuzz");
    TCase *tc = tu_tcase(s, "storm", fuzz_seconds + 90);
    tcase_add_test(tc, test_fuzz_storm);
    return tu_run(s);
}
