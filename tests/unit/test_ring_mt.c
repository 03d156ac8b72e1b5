/* The cross-host transport (cxl/ring.h): inbox rings and reply slots.
 *
 * Single process: FIFO order, a full ring says full, wrap-around many times,
 * the message size limit, a corrupt slot, argument checks, closed rings, the reply-slot state
 * machine, and several producer and consumer threads on one ring (this is
 * what ThreadSanitizer checks: within one process it sees every access).
 *
 * Several processes (one per host, on one region in SIMULATED NON-COHERENT
 * mode, so a missing flush or write-back gives wrong data): every host sends
 * numbered messages from several threads to every other host while several
 * threads of each receiver poll, and the receivers check each producer's
 * sequence is complete, in order and intact; a request/reply ping-pong in
 * both directions at once where waiting workers serve their inbox; the
 * deadlock that not serving causes (both waits time out, late replies are
 * dropped); a receiver that reads a slot without the flush sees the previous
 * lap's message; a reply wait against a silent host times out within its
 * bound, against a killed host fails fast with "not alive", and a restarted
 * host's old ring is refused. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cxl/ring.h"
#include "util/clock.h"
#include "util/mix.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define WAIT_MS 20000


/* Message k of producer (host, thread) to dest: its length and bytes are a
 * function of all four, so a lost, duplicated, misrouted or torn message shows. */
static void make_msg(struct cxl_msg *m, int host, int thread, int dest, uint64_t k)
{
    uint64_t h = pod_mix64(((uint64_t)host << 48) ^ ((uint64_t)thread << 40) ^ ((uint64_t)dest << 32) ^ k);
    m->type = (uint16_t)(0x100 + dest);
    m->from_host = 0xffff; /* send must stamp the real host */
    m->from_worker = (uint16_t)thread;
    m->len = (uint16_t)(1 + (h % CXL_MSG_MAX));
    m->req_id = k;
    for (int i = 0; i < m->len; i++) m->data[i] = (uint8_t)(pod_mix64(h + (uint64_t)(i >> 3)) >> ((i & 7) * 8));
}

static bool msg_ok(const struct cxl_msg *got, int dest, char *why, size_t n)
{
    struct cxl_msg want;
    make_msg(&want, got->from_host, got->from_worker, dest, got->req_id);
    if (got->type != want.type) {
        snprintf(why, n, "type %#x, want %#x", got->type, want.type);
        return false;
    }
    if (got->len != want.len) {
        snprintf(why, n, "len %u, want %u", got->len, want.len);
        return false;
    }
    if (memcmp(got->data, want.data, want.len) != 0) {
        snprintf(why, n, "payload differs");
        return false;
    }
    return true;
}

static struct cxl_region *open_host(struct pod_config *c, int host)
{
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, host, CXL_OPEN_CREATE, &err);
    if (!r) fprintf(stderr, "host %d: open: %s\n", host, err.msg);
    return r;
}

/* ======================================================================
 * single process
 * ====================================================================== */

static struct pod_config g_conf;
static struct cxl_region *g_r;

static void setup_one(void)
{
    tu_make_config(&g_conf, 2, 1 * GiB, 8 * MiB, true);
    g_r = open_host(&g_conf, 0);
    ck_assert_ptr_nonnull(g_r);
}

static void teardown_one(void)
{
    cxl_region_close(g_r);
    g_r = NULL;
}

static struct cxl_ring *make_ring(unsigned n)
{
    pod_err err = {{0}};
    struct cxl_ring *ring = cxl_ring_create(g_r, n, &err);
    ck_assert_msg(ring != NULL, "%s", err.msg);
    ck_assert_uint_eq(cxl_ring_nslots(ring), n);
    return ring;
}

/* Send messages first..first+n-1 of host 0's thread to the ring. */
static void send_msgs(struct cxl_ring *ring, int thread, uint64_t first, uint64_t n)
{
    struct cxl_msg m;
    for (uint64_t k = first; k < first + n; k++) {
        make_msg(&m, 0, thread, 0, k);
        ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_OK);
    }
}

/* Poll messages first..first+n-1 of host 0's thread, in order and intact. */
static void poll_msgs(struct cxl_ring *ring, int thread, uint64_t first, uint64_t n)
{
    struct cxl_msg got;
    for (uint64_t k = first; k < first + n; k++) {
        memset(&got, 0xee, sizeof got);
        ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
        ck_assert_uint_eq(got.req_id, k);
        ck_assert_uint_eq(got.from_host, 0); /* stamped by send */
        ck_assert_uint_eq(got.from_worker, thread);
        char why[128];
        ck_assert_msg(msg_ok(&got, 0, why, sizeof why), "message %llu: %s",
                      (unsigned long long)k, why);
    }
}

START_TEST(fifo_order)
{
    struct cxl_ring *ring = make_ring(16);
    struct cxl_msg m, got;
    send_msgs(ring, 3, 0, 10);
    poll_msgs(ring, 3, 0, 10);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_EMPTY);
    ck_assert_uint_eq(cxl_ring_head(ring), 10);
    /* A sender's handle (attach) on the same ring sees the same queue. */
    pod_err err = {{0}};
    struct cxl_ring *snd = cxl_ring_attach(g_r, 0, 1000, &err);
    ck_assert_msg(snd != NULL, "%s", err.msg);
    make_msg(&m, 0, 1, 0, 77);
    ck_assert_int_eq(cxl_ring_send(snd, &m), CXL_RING_OK);
    ck_assert_int_eq(cxl_ring_poll(snd, &got), CXL_RING_INVAL); /* not the owner's handle */
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
    ck_assert_uint_eq(got.req_id, 77);
    cxl_ring_close(snd);
    cxl_ring_close(ring);
}
END_TEST

START_TEST(full_ring_says_full)
{
    struct cxl_ring *ring = make_ring(8);
    struct cxl_msg m, got;
    send_msgs(ring, 0, 0, 8);
    make_msg(&m, 0, 0, 0, 8);
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_FULL);
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_FULL); /* still, and nothing lost */
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
    ck_assert_uint_eq(got.req_id, 0);
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_OK); /* one slot freed: one fits */
    make_msg(&m, 0, 0, 0, 9);
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_FULL);
    poll_msgs(ring, 0, 1, 8);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_EMPTY);
    cxl_ring_close(ring);
}
END_TEST

START_TEST(wrap_around)
{
    /* 4 slots, 100000 messages in bursts of 1..4: 25000 laps, order kept. */
    struct cxl_ring *ring = make_ring(4);
    struct cxl_msg m, got;
    uint64_t sent = 0, recv = 0, rnd = 12345;
    while (recv < 100000) {
        rnd = pod_mix64(rnd);
        int burst = 1 + (int)(rnd % 4);
        for (int i = 0; i < burst && sent - recv < 4 && sent < 100000; i++) {
            make_msg(&m, 0, 0, 0, sent);
            ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_OK);
            sent++;
        }
        if (sent - recv == 4) {
            ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_FULL);
        }
        int drain = 1 + (int)((rnd >> 8) % 4);
        for (int i = 0; i < drain && recv < sent; i++) {
            ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
            ck_assert_uint_eq(got.req_id, recv);
            char why[128];
            ck_assert_msg(msg_ok(&got, 0, why, sizeof why), "message %llu: %s",
                          (unsigned long long)recv, why);
            recv++;
        }
    }
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_EMPTY);
    ck_assert_uint_eq(cxl_ring_head(ring), 100000);
    cxl_ring_close(ring);
}
END_TEST

START_TEST(size_limit)
{
    struct cxl_ring *ring = make_ring(4);
    struct cxl_msg m, got;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < CXL_MSG_MAX; i++) m.data[i] = (uint8_t)(i * 7 + 1);
    m.len = CXL_MSG_MAX; /* exactly the limit: fine */
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_OK);
    m.len = CXL_MSG_MAX + 1;
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_TOOBIG);
    m.len = 0xffff;
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_TOOBIG);
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 0, &m), CXL_RING_TOOBIG);
    ck_assert_str_eq(cxl_ring_strerror(CXL_RING_TOOBIG), "message longer than 240 bytes");
    m.len = 0; /* an empty message is fine too */
    ck_assert_int_eq(cxl_ring_send(ring, &m), CXL_RING_OK);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
    ck_assert_uint_eq(got.len, CXL_MSG_MAX);
    ck_assert_mem_eq(got.data, m.data, CXL_MSG_MAX);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
    ck_assert_uint_eq(got.len, 0);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_EMPTY); /* refused ones never queued */
    cxl_ring_close(ring);
}
END_TEST

/* A slot with an impossible length (only memory corruption makes one) is
 * reported, and the ring goes on with the next message. */
START_TEST(corrupt_slot_does_not_stall)
{
    struct cxl_ring *ring = make_ring(4);
    struct cxl_msg got;
    send_msgs(ring, 0, 0, 2);
    uint16_t bad = CXL_MSG_MAX + 1;
    void *slot = (void *)cxl_ring_slot_addr(ring, 0);
    cxl_swcc_write(&g_r->swcc, (char *)slot + 6, &bad, sizeof bad); /* the len field */
    cxl_swcc_writeback(&g_r->swcc, slot, CXL_MSG_HDR);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_CORRUPT);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_OK);
    ck_assert_uint_eq(got.req_id, 1);
    ck_assert_int_eq(cxl_ring_poll(ring, &got), CXL_RING_EMPTY);
    cxl_ring_close(ring);
}
END_TEST

START_TEST(bad_arguments)
{
    pod_err err = {{0}};
    const unsigned bad[] = {0, 1, 3, 6, 100, CXL_RING_MAX_SLOTS * 2};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(cxl_ring_create(g_r, bad[i], &err));
        ck_assert_msg(strstr(err.msg, "power of two"), "%s", err.msg);
    }
    ck_assert_ptr_null(cxl_reply_area_create(g_r, 0, &err));
    ck_assert_ptr_null(cxl_reply_area_create(g_r, CXL_REPLY_MAX_WORKERS + 1, &err));
    ck_assert_msg(strstr(err.msg, "worker slots"), "%s", err.msg);

    /* An observer cannot own a ring. */
    struct cxl_region *obs = cxl_region_open(&g_conf, -1, 0, &err);
    ck_assert_msg(obs != NULL, "%s", err.msg);
    ck_assert_ptr_null(cxl_ring_create(obs, 8, &err));
    ck_assert_msg(strstr(err.msg, "not attached as a host"), "%s", err.msg);
    /* It may look at a ring but not send: it has no host id for replies. */
    struct cxl_ring *ring = make_ring(4);
    struct cxl_ring *peek = cxl_ring_attach(obs, 0, 1000, &err);
    ck_assert_msg(peek != NULL, "%s", err.msg);
    struct cxl_msg om = {0};
    ck_assert_int_eq(cxl_ring_send(peek, &om), CXL_RING_INVAL);
    ck_assert_int_eq(cxl_reply_post(obs, 0, 0, &om), CXL_RING_INVAL);
    cxl_ring_close(peek);
    cxl_region_close(obs);

    /* Hosts out of range; a host that never came up: bounded, and says why. */
    ck_assert_ptr_null(cxl_ring_attach(g_r, 2, 10, &err));
    ck_assert_msg(strstr(err.msg, "hosts 0..1"), "%s", err.msg);
    uint64_t t0 = pod_mono_ns();
    ck_assert_ptr_null(cxl_ring_attach(g_r, 1, 50, &err));
    uint64_t ms = (pod_mono_ns() - t0) / 1000000;
    ck_assert_msg(ms >= 50 && ms < 5000, "attach waited %llu ms", (unsigned long long)ms);
    ck_assert_msg(strstr(err.msg, "host 1 is not alive"), "%s", err.msg);
    /* This host is alive but has no ring (any more). */
    cxl_ring_close(ring);
    ck_assert_ptr_null(cxl_ring_attach(g_r, 0, 10, &err));
    ck_assert_msg(strstr(err.msg, "is alive but did not publish"), "%s", err.msg);

    struct cxl_msg m = {0};
    ck_assert_int_eq(cxl_reply_post(g_r, 1, 0, &m), CXL_RING_GONE); /* no reply area */
    ck_assert_int_eq(cxl_reply_post(g_r, 5, 0, &m), CXL_RING_INVAL);
}
END_TEST

START_TEST(closed_ring_is_gone)
{
    struct cxl_ring *ring = make_ring(8);
    pod_err err = {{0}};
    struct cxl_ring *snd = cxl_ring_attach(g_r, 0, 1000, &err);
    ck_assert_msg(snd != NULL, "%s", err.msg);
    struct cxl_msg m;
    make_msg(&m, 0, 0, 0, 1);
    ck_assert_int_eq(cxl_ring_send(snd, &m), CXL_RING_OK);
    cxl_ring_close(ring);
    ck_assert_int_eq(cxl_ring_send(snd, &m), CXL_RING_GONE);
    ck_assert_uint_eq(cxl_root_get(g_r, 0, CXL_ROOT_RING), CXL_NULL);
    ck_assert_ptr_null(cxl_ring_attach(g_r, 0, 10, &err));
    /* A new ring is a new ring: the old handle stays refused. */
    ring = make_ring(8);
    ck_assert_int_eq(cxl_ring_send(snd, &m), CXL_RING_GONE);
    cxl_ring_close(snd);
    cxl_ring_close(ring);
}
END_TEST

START_TEST(reply_slot_states)
{
    pod_err err = {{0}};
    struct cxl_replies *ra = cxl_reply_area_create(g_r, 4, &err);
    ck_assert_msg(ra != NULL, "%s", err.msg);
    struct cxl_msg m = {0}, got;
    ck_assert_uint_eq(cxl_reply_arm(ra, 4), 0); /* out of range */

    /* arm -> post -> wait */
    uint64_t id = cxl_reply_arm(ra, 2);
    ck_assert_uint_ne(id, 0);
    ck_assert_uint_lt(id, UINT64_C(1) << 62);
    m.type = 9;
    m.req_id = id;
    m.len = 5;
    memcpy(m.data, "hello", 5);
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 2, &m), CXL_RING_OK);
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 2, &m), CXL_RING_STALE); /* one reply per request */
    ck_assert_int_eq(cxl_reply_wait(ra, 2, id, 0, 1000000, &got, NULL, NULL, &err), CXL_RING_OK);
    ck_assert_uint_eq(got.type, 9);
    ck_assert_uint_eq(got.from_host, 0);
    ck_assert_uint_eq(got.req_id, id);
    ck_assert_uint_eq(got.len, 5);
    ck_assert_mem_eq(got.data, "hello", 5);
    /* Waiting again for a consumed reply is a caller bug, said at once. */
    ck_assert_int_eq(cxl_reply_wait(ra, 2, id, 0, 1000000, &got, NULL, NULL, &err),
                     CXL_RING_INVAL);
    char want[64];
    snprintf(want, sizeof want, "not waiting for request %llu", (unsigned long long)id);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    ck_assert_int_eq(cxl_reply_wait(ra, 2, id, 7, 1000, &got, NULL, NULL, &err), CXL_RING_INVAL);
    ck_assert_msg(strstr(err.msg, "hosts 0..1"), "%s", err.msg);

    /* A wait that times out frees the slot; the late reply is dropped. */
    uint64_t prev = id;
    id = cxl_reply_arm(ra, 2);
    ck_assert_uint_eq(id, prev + 1);
    uint64_t t0 = pod_mono_ns();
    ck_assert_int_eq(cxl_reply_wait(ra, 2, id, 0, 20000, &got, NULL, NULL, &err),
                     CXL_RING_TIMEOUT);
    uint64_t us = (pod_mono_ns() - t0) / 1000;
    ck_assert_msg(us >= 20000 && us < 5000000, "waited %llu us", (unsigned long long)us);
    snprintf(want, sizeof want, "no reply to request %llu", (unsigned long long)id);
    ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "within 20000 us"), "%s", err.msg);
    m.req_id = id;
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 2, &m), CXL_RING_STALE);

    /* Re-arming supersedes a request nobody answered: its reply is dropped. */
    uint64_t a = cxl_reply_arm(ra, 1), b = cxl_reply_arm(ra, 1);
    ck_assert_uint_eq(b, a + 1);
    m.req_id = a;
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 1, &m), CXL_RING_STALE);
    m.req_id = b;
    m.data[0] = 'j';
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 1, &m), CXL_RING_OK);
    ck_assert_int_eq(cxl_reply_wait(ra, 1, b, 0, 1000000, &got, NULL, NULL, &err), CXL_RING_OK);
    ck_assert_mem_eq(got.data, "jello", 5);

    /* Worker slots are independent; bad targets. */
    m.req_id = cxl_reply_arm(ra, 0);
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 3, &m), CXL_RING_STALE); /* never armed */
    m.req_id = 0;
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 0, &m), CXL_RING_STALE); /* no arm gives 0 */
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 4, &m), CXL_RING_INVAL);
    ck_assert_int_eq(cxl_reply_wait(ra, 9, 1, 0, 10, &got, NULL, NULL, &err), CXL_RING_INVAL);

    cxl_reply_area_close(ra);
    ck_assert_int_eq(cxl_reply_post(g_r, 0, 2, &m), CXL_RING_GONE);
}
END_TEST

/* ---- several threads on one ring ------------------------------------------ */

enum { MT_PROD = 4, MT_CONS = 2, MT_K = 20000 };

struct flow {
    struct cxl_ring *ring;       /* the owner's handle */
    struct cxl_ring *dest[POD_MAX_HOSTS];
    int host, nhosts, nprod, ncons;
    uint64_t k;                   /* messages per producer per destination */
    uint64_t expected;            /* messages this host must receive */
    uint64_t received;            /* atomic */
    uint32_t *seen;               /* [sender host][thread][k] */
    uint64_t deadline_ns;
    int failed;                   /* atomic */
    char why[256];
};

struct worker_arg {
    struct flow *f;
    int id;
};

static void flow_fail(struct flow *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void flow_fail(struct flow *f, const char *fmt, ...)
{
    if (__atomic_exchange_n(&f->failed, 1, __ATOMIC_ACQ_REL)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
}

static void *producer_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct flow *f = wa->f;
    struct cxl_msg m;
    for (uint64_t k = 0; k < f->k; k++) {
        for (int d = 0; d < f->nhosts; d++) {
            if (!f->dest[d]) continue;
            make_msg(&m, f->host, wa->id, d, k);
            int rc;
            while ((rc = cxl_ring_send(f->dest[d], &m)) == CXL_RING_FULL) {
                if (__atomic_load_n(&f->failed, __ATOMIC_ACQUIRE)) return NULL;
                if (pod_mono_ns() > f->deadline_ns) {
                    flow_fail(f, "producer %d: host %d's ring stayed full", wa->id, d);
                    return NULL;
                }
                sched_yield();
            }
            if (rc != CXL_RING_OK) {
                flow_fail(f, "producer %d: send to host %d: %s", wa->id, d, cxl_ring_strerror(rc));
                return NULL;
            }
        }
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct flow *f = wa->f;
    /* The last sequence number this thread saw from each producer. */
    int64_t last[POD_MAX_HOSTS][MT_PROD];
    for (int h = 0; h < POD_MAX_HOSTS; h++)
        for (int t = 0; t < MT_PROD; t++) last[h][t] = -1;
    struct cxl_msg m;
    while (__atomic_load_n(&f->received, __ATOMIC_ACQUIRE) < f->expected) {
        if (__atomic_load_n(&f->failed, __ATOMIC_ACQUIRE)) return NULL;
        int rc = cxl_ring_poll(f->ring, &m);
        if (rc == CXL_RING_EMPTY) {
            if (pod_mono_ns() > f->deadline_ns) {
                flow_fail(f, "consumer %d: only %llu of %llu messages arrived", wa->id,
                          (unsigned long long)__atomic_load_n(&f->received, __ATOMIC_ACQUIRE),
                          (unsigned long long)f->expected);
                return NULL;
            }
            sched_yield();
            continue;
        }
        if (rc != CXL_RING_OK) {
            flow_fail(f, "consumer %d: poll: %s", wa->id, cxl_ring_strerror(rc));
            return NULL;
        }
        int h = m.from_host, t = m.from_worker;
        if (h >= f->nhosts || t >= f->nprod || m.req_id >= f->k) {
            flow_fail(f, "message from host %d thread %d number %llu is impossible", h, t,
                      (unsigned long long)m.req_id);
            return NULL;
        }
        char why[128];
        if (!msg_ok(&m, f->host, why, sizeof why)) {
            flow_fail(f, "message %llu from host %d thread %d: %s", (unsigned long long)m.req_id,
                      h, t, why);
            return NULL;
        }
        if ((int64_t)m.req_id <= last[h][t]) {
            flow_fail(f, "consumer %d: message %llu from host %d thread %d after %lld",
                      wa->id, (unsigned long long)m.req_id, h, t, (long long)last[h][t]);
            return NULL;
        }
        last[h][t] = (int64_t)m.req_id;
        __atomic_fetch_add(&f->seen[((size_t)h * f->nprod + t) * f->k + m.req_id], 1,
                           __ATOMIC_RELAXED);
        __atomic_fetch_add(&f->received, 1, __ATOMIC_ACQ_REL);
    }
    return NULL;
}

/* Run nprod producers and ncons consumers on this host; check what arrived.
 * Returns 0 or 1 with the reason on stderr. */
static int flow_run(struct flow *f)
{
    pthread_t th[MT_PROD + MT_CONS];
    struct worker_arg wa[MT_PROD + MT_CONS];
    size_t nseen = (size_t)f->nhosts * f->nprod * f->k;
    f->seen = calloc(nseen, sizeof *f->seen);
    int n = 0;
    for (int i = 0; i < f->ncons; i++, n++) {
        wa[n] = (struct worker_arg){f, i};
        pthread_create(&th[n], NULL, consumer_main, &wa[n]);
    }
    for (int i = 0; i < f->nprod; i++, n++) {
        wa[n] = (struct worker_arg){f, i};
        pthread_create(&th[n], NULL, producer_main, &wa[n]);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    if (!f->failed) {
        /* Every producer sending here: each message exactly once. */
        for (int h = 0; h < f->nhosts && !f->failed; h++) {
            bool sends_here = f->nhosts == 1 || h != f->host;
            for (int t = 0; t < f->nprod && !f->failed; t++)
                for (uint64_t k = 0; k < f->k; k++) {
                    uint32_t c = f->seen[((size_t)h * f->nprod + t) * f->k + k];
                    if (c != (sends_here ? 1u : 0u)) {
                        flow_fail(f, "message %llu from host %d thread %d arrived %u times",
                                  (unsigned long long)k, h, t, c);
                        break;
                    }
                }
        }
    }
    struct cxl_msg m;
    if (!f->failed && cxl_ring_poll(f->ring, &m) != CXL_RING_EMPTY)
        flow_fail(f, "a message beyond the expected ones arrived");
    free(f->seen);
    if (f->failed) fprintf(stderr, "host %d: %s\n", f->host, f->why);
    return f->failed;
}

static void threads_on_one_ring(struct cxl_region *r)
{
    struct flow f = {.host = 0, .nhosts = 1, .nprod = MT_PROD, .ncons = MT_CONS, .k = MT_K};
    pod_err err = {{0}};
    f.ring = cxl_ring_create(r, 32, &err);
    ck_assert_msg(f.ring != NULL, "%s", err.msg);
    f.dest[0] = cxl_ring_attach(r, 0, 1000, &err);
    ck_assert_msg(f.dest[0] != NULL, "%s", err.msg);
    f.expected = (uint64_t)MT_PROD * MT_K;
    f.deadline_ns = pod_mono_ns() + 60ull * 1000000000ull;
    ck_assert_msg(flow_run(&f) == 0, "%s", f.why);
    ck_assert_uint_eq(f.received, f.expected);
    cxl_ring_close(f.dest[0]);
    cxl_ring_close(f.ring);
}

START_TEST(threads_on_one_ring_simulated) { threads_on_one_ring(g_r); }
END_TEST

/* Without simulation slots are plain memory: ThreadSanitizer sees every byte
 * a producer writes and a consumer reads, ordered only by the sequence words. */
START_TEST(threads_on_one_ring_coherent)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 1, 1 * GiB, 8 * MiB, false);
    struct cxl_region *r = open_host(c, 0);
    ck_assert_ptr_nonnull(r);
    threads_on_one_ring(r);
    cxl_region_close(r);
    free(c);
}
END_TEST

/* ======================================================================
 * several processes
 * ====================================================================== */

struct pod_run {
    struct pod_config c;
    int nhosts;
    int host; /* set in the child before fn runs */
};

/* Fork one child per host running fn; all must exit 0. */
static void run_hosts(struct pod_run *pr, int (*fn)(void *))
{
    int pids[POD_MAX_HOSTS];
    for (int h = 0; h < pr->nhosts; h++) {
        pr->host = h;
        pids[h] = tu_fork(fn, pr);
    }
    for (int h = 0; h < pr->nhosts; h++) {
        int rc = tu_wait_child(pids[h], 120000);
        ck_assert_msg(rc == 0, "host %d failed (exit %d)", h, rc);
    }
}

/* A new pod of nhosts hosts on a region of size (8 MiB of HWcc, simulated
 * coherence), fn run by each of its hosts. */
static void run_pod(int nhosts, uint64_t size, int (*fn)(void *))
{
    struct pod_run *pr = calloc(1, sizeof *pr);
    ck_assert_ptr_nonnull(pr);
    pr->nhosts = nhosts;
    tu_make_config(&pr->c, nhosts, size, 8 * MiB, true);
    run_hosts(pr, fn);
    free(pr);
}

/* ---- everyone sends to everyone -------------------------------------------- */

enum { A2A_SLOTS = 64 };

static int all_to_all_host(void *arg)
{
    struct pod_run *pr = arg;
    int host = pr->host;
    struct cxl_region *r = open_host(&pr->c, host);
    if (!r) return 1;
    pod_err err = {{0}};
    struct flow f = {.host = host, .nhosts = pr->nhosts, .nprod = 2, .ncons = 2,
                     .k = pr->nhosts == 2 ? 20000 : 5000};
    f.ring = cxl_ring_create(r, A2A_SLOTS, &err);
    if (!f.ring) {
        fprintf(stderr, "host %d: %s\n", host, err.msg);
        return 1;
    }
    for (int d = 0; d < pr->nhosts; d++) {
        if (d == host) continue;
        f.dest[d] = cxl_ring_attach(r, d, WAIT_MS, &err);
        if (!f.dest[d]) {
            fprintf(stderr, "host %d: %s\n", host, err.msg);
            return 1;
        }
    }
    f.expected = (uint64_t)(pr->nhosts - 1) * f.nprod * f.k;
    f.deadline_ns = pod_mono_ns() + 90ull * 1000000000ull;
    uint64_t t0 = pod_mono_ns();
    int rc = flow_run(&f);
    if (getenv("RING_TEST_VERBOSE"))
        fprintf(stderr, "host %d: received %llu messages in %.1f ms\n", host,
                (unsigned long long)f.received, (double)(pod_mono_ns() - t0) / 1e6);
    /* This host has everything from everyone, so nobody sends to it any more;
     * what it sent lives in the receivers' slices. Safe to leave. */
    for (int d = 0; d < pr->nhosts; d++) cxl_ring_close(f.dest[d]);
    cxl_ring_close(f.ring);
    cxl_region_close(r);
    return rc;
}

START_TEST(all_to_all_2_hosts)
{
    run_pod(2, 1 * GiB, all_to_all_host);
}
END_TEST

START_TEST(all_to_all_4_hosts)
{
    run_pod(4, 2 * GiB, all_to_all_host);
}
END_TEST

/* ---- request/reply ping-pong ------------------------------------------------ */

enum { PP_REQ = 1, PP_REP = 2, PP_DONE = 3, PP_ROUNDS = 3000 };

struct server {
    struct cxl_region *r;
    struct cxl_ring *own;
    bool serve;          /* false: the deadlock demonstration ignores its inbox */
    int peer_done;
    uint64_t served;
    int stale;           /* replies dropped because the requester gave up */
    int errors;
};

static void reply_payload(const struct cxl_msg *req, struct cxl_msg *rep)
{
    rep->len = req->len;
    for (int i = 0; i < req->len; i++) rep->data[i] = (uint8_t)(req->data[req->len - 1 - i] ^ 0x5a);
}

/* The poll callback: serve this host's inbox. */
static void serve_inbox(void *arg)
{
    struct server *s = arg;
    struct cxl_msg m, rep;
    for (int n = 0; n < 16; n++) {
        int rc = cxl_ring_poll(s->own, &m);
        if (rc == CXL_RING_EMPTY) return;
        if (rc != CXL_RING_OK) {
            s->errors++;
            return;
        }
        if (m.type == PP_DONE) {
            s->peer_done = 1;
            continue;
        }
        if (m.type != PP_REQ) {
            s->errors++;
            continue;
        }
        rep.type = PP_REP;
        rep.from_worker = 0;
        rep.req_id = m.req_id;
        reply_payload(&m, &rep);
        rc = cxl_reply_post(s->r, m.from_host, m.from_worker, &rep);
        if (rc == CXL_RING_STALE) s->stale++;
        else if (rc != CXL_RING_OK) s->errors++;
        else s->served++;
    }
}

/* Send, serving the inbox while the peer's ring is full. */
static int send_serving(struct server *s, struct cxl_ring *to, const struct cxl_msg *m)
{
    uint64_t deadline = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    int rc;
    while ((rc = cxl_ring_send(to, m)) == CXL_RING_FULL && pod_mono_ns() < deadline) {
        serve_inbox(s);
        sched_yield();
    }
    return rc;
}

/* One host of a 2-host pod set up for requests and replies: its region
 * (s->r), its ring (s->own) with 16 slots, its reply area (*ra) and the
 * peer's ring (*to). False, said on stderr, when one of them fails. */
static bool peer_setup(struct pod_run *pr, struct server *s, struct cxl_replies **ra,
                       struct cxl_ring **to)
{
    pod_err err = {{0}};
    *ra = NULL;
    *to = NULL;
    if (!(s->r = open_host(&pr->c, pr->host))) return false;
    s->own = cxl_ring_create(s->r, 16, &err);
    *ra = s->own ? cxl_reply_area_create(s->r, 1, &err) : NULL;
    *to = *ra ? cxl_ring_attach(s->r, 1 - pr->host, WAIT_MS, &err) : NULL;
    if (!*to) fprintf(stderr, "host %d: %s\n", pr->host, err.msg);
    return *to != NULL;
}

/* Wait (up to WAIT_MS) until the peer's reply area is up, so that the first
 * request can be answered (its ring is created before it). */
static void wait_reply_area(struct cxl_region *r, int peer)
{
    uint64_t dl = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (cxl_root_get(r, peer, CXL_ROOT_REPLY) == CXL_NULL && pod_mono_ns() < dl) usleep(100);
}

static int ping_pong_host(void *arg)
{
    struct pod_run *pr = arg;
    int host = pr->host, peer = 1 - host;
    pod_err err = {{0}};
    struct server s = {.serve = true};
    struct cxl_replies *ra;
    struct cxl_ring *to;
    if (!peer_setup(pr, &s, &ra, &to)) return 1;
    struct cxl_region *r = s.r;
    cxl_reply_area_doorbell(ra, s.own); /* a long wait sleeps until the reply rings */
    wait_reply_area(r, peer);

    uint64_t rnd = pod_mix64((uint64_t)host + 99);
    struct cxl_msg req, rep, want;
    for (int i = 0; i < PP_ROUNDS; i++) {
        rnd = pod_mix64(rnd);
        memset(&req, 0, CXL_MSG_HDR);
        req.type = PP_REQ;
        req.from_worker = 0;
        req.req_id = cxl_reply_arm(ra, 0);
        req.len = (uint16_t)(rnd % (CXL_MSG_MAX + 1));
        for (int j = 0; j < req.len; j++) req.data[j] = (uint8_t)pod_mix64(rnd + (uint64_t)j);
        int rc = send_serving(&s, to, &req);
        if (rc != CXL_RING_OK) {
            fprintf(stderr, "host %d: round %d: send: %s\n", host, i, cxl_ring_strerror(rc));
            return 1;
        }
        rc = cxl_reply_wait(ra, 0, req.req_id, peer, 10 * 1000 * 1000, &rep, serve_inbox, &s,
                            &err);
        if (rc != CXL_RING_OK) {
            fprintf(stderr, "host %d: round %d: %s\n", host, i, err.msg);
            return 1;
        }
        reply_payload(&req, &want);
        if (rep.type != PP_REP || rep.from_host != peer || rep.req_id != req.req_id ||
            rep.len != req.len || memcmp(rep.data, want.data, want.len) != 0) {
            fprintf(stderr, "host %d: round %d: wrong reply (type %u from %u id %llu len %u)\n",
                    host, i, rep.type, rep.from_host, (unsigned long long)rep.req_id, rep.len);
            return 1;
        }
    }
    struct cxl_msg done = {.type = PP_DONE};
    if (send_serving(&s, to, &done) != CXL_RING_OK) return 1;
    uint64_t dl = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (!s.peer_done && pod_mono_ns() < dl) {
        serve_inbox(&s);
        sched_yield();
    }
    if (!s.peer_done || s.errors || s.stale || s.served != PP_ROUNDS) {
        fprintf(stderr, "host %d: peer done %d, served %llu of %d, %d stale, %d errors\n", host,
                s.peer_done, (unsigned long long)s.served, PP_ROUNDS, s.stale, s.errors);
        return 1;
    }
    cxl_ring_close(to);
    cxl_reply_area_close(ra);
    cxl_ring_close(s.own);
    cxl_region_close(r);
    return 0;
}

START_TEST(ping_pong_both_ways)
{
    run_pod(2, 1 * GiB, ping_pong_host);
}
END_TEST

/* Both hosts send a request and wait without serving their inbox: neither
 * request is ever handled, both waits time out (this is the deadlock the
 * poll callback prevents), and the replies sent afterwards are dropped. */
static int deadlock_host(void *arg)
{
    struct pod_run *pr = arg;
    int host = pr->host, peer = 1 - host;
    pod_err err = {{0}};
    struct server s = {0};
    struct cxl_replies *ra;
    struct cxl_ring *to;
    if (!peer_setup(pr, &s, &ra, &to)) return 1;
    struct cxl_region *r = s.r;
    wait_reply_area(r, peer);
    struct cxl_msg req = {.type = PP_REQ, .len = 4}, rep;
    memcpy(req.data, "ping", 4);
    req.req_id = cxl_reply_arm(ra, 0);
    if (cxl_ring_send(to, &req) != CXL_RING_OK) return 1;
    int rc = cxl_reply_wait(ra, 0, req.req_id, peer, 200 * 1000, &rep, NULL, NULL, &err);
    if (rc != CXL_RING_TIMEOUT) {
        fprintf(stderr, "host %d: waiting without serving gave %s, want a timeout\n", host,
                cxl_ring_strerror(rc));
        return 1;
    }
    /* Serve only once both waits are over (root slot 0: "I timed out"). */
    cxl_root_publish(r, 0, 1);
    uint64_t dl = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (cxl_root_get(r, peer, 0) != 1 && pod_mono_ns() < dl) usleep(100);
    /* Now serve: the peer's request gets its reply, too late. */
    dl = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (s.stale + s.served == 0 && pod_mono_ns() < dl) {
        serve_inbox(&s);
        sched_yield();
    }
    if (s.stale != 1 || s.served != 0 || s.errors) {
        fprintf(stderr, "host %d: late reply: %d stale, %llu served, %d errors\n", host, s.stale,
                (unsigned long long)s.served, s.errors);
        return 1;
    }
    /* Wait for the peer to be done too before leaving (it may still post to us). */
    struct cxl_msg done = {.type = PP_DONE};
    cxl_ring_send(to, &done);
    while (!s.peer_done && pod_mono_ns() < dl) {
        serve_inbox(&s);
        sched_yield();
    }
    cxl_region_close(r);
    return s.peer_done ? 0 : 1;
}

START_TEST(waiting_without_serving_times_out)
{
    run_pod(2, 1 * GiB, deadlock_host);
}
END_TEST

/* ---- the flushes matter --------------------------------------------------- */

/* HWcc mailbox of host 0 (root slot 0). */
struct mailbox {
    uint64_t step; /* host 1 advances */
    uint64_t ack;  /* host 0 acknowledges */
};

struct stale_run {
    struct pod_run pr;
    bool sim;
};

static int stale_host(void *arg)
{
    struct stale_run *sr = arg;
    int host = sr->pr.host;
    struct cxl_region *r = open_host(&sr->pr.c, host);
    if (!r) return 1;
    pod_err err = {{0}};
    struct cxl_msg m, got, raw;
    if (host == 0) {
        cxl_off mb_off = cxl_zalloc(r, CXL_HWCC, sizeof(struct mailbox));
        struct mailbox *mb = cxl_ptr(r, mb_off);
        cxl_root_publish(r, 0, mb_off); /* before the ring: whoever sees the ring sees this */
        struct cxl_ring *own = cxl_ring_create(r, 2, &err);
        if (!own) {
            fprintf(stderr, "host 0: %s\n", err.msg);
            return 1;
        }
        if (!tu_wait_u64(&mb->step, 1, WAIT_MS)) return 1;
        for (uint64_t k = 1; k <= 2; k++) { /* positions 0 and 1: slots 0 and 1 */
            if (cxl_ring_poll(own, &got) != CXL_RING_OK || got.req_id != k) return 1;
            char why[128];
            if (!msg_ok(&got, 0, why, sizeof why)) {
                fprintf(stderr, "host 0: message %llu: %s\n", (unsigned long long)k, why);
                return 1;
            }
        }
        __atomic_store_n(&mb->ack, 1, __ATOMIC_RELEASE);
        if (!tu_wait_u64(&mb->step, 2, WAIT_MS)) return 1;
        /* Message 3 is published at position 2, in slot 0, where this host
         * read message 1. The wrong consume path: read without the flush. */
        uint64_t pos = cxl_ring_head(own);
        if (pos != 2) return 1;
        cxl_swcc_read(&r->swcc, &raw, cxl_ring_slot_addr(own, pos), sizeof raw);
        uint64_t want_raw = sr->sim ? 1 : 3;
        if (raw.req_id != want_raw) {
            fprintf(stderr, "host 0 (%s): read without flush saw message %llu, want %llu\n",
                    sr->sim ? "simulated" : "coherent", (unsigned long long)raw.req_id,
                    (unsigned long long)want_raw);
            return 1;
        }
        char why[128];
        if (!msg_ok(&raw, 0, why, sizeof why)) {
            fprintf(stderr, "host 0: the raw read is not a whole message: %s\n", why);
            return 1;
        }
        /* The protocol's path flushes and gets message 3 intact. */
        if (cxl_ring_poll(own, &got) != CXL_RING_OK || got.req_id != 3 ||
            !msg_ok(&got, 0, why, sizeof why)) {
            fprintf(stderr, "host 0: poll after the stale read did not give message 3\n");
            return 1;
        }
        __atomic_store_n(&mb->ack, 2, __ATOMIC_RELEASE);
        if (!tu_wait_u64(&mb->step, 3, WAIT_MS)) return 1;
    } else {
        struct cxl_ring *to = cxl_ring_attach(r, 0, WAIT_MS, &err);
        if (!to) {
            fprintf(stderr, "host 1: %s\n", err.msg);
            return 1;
        }
        struct mailbox *mb = cxl_ptr(r, cxl_root_get(r, 0, 0));
        for (uint64_t k = 1; k <= 2; k++) {
            make_msg(&m, 1, 0, 0, k);
            if (cxl_ring_send(to, &m) != CXL_RING_OK) return 1;
        }
        make_msg(&m, 1, 0, 0, 3);
        if (cxl_ring_send(to, &m) != CXL_RING_FULL) return 1; /* 2 slots */
        __atomic_store_n(&mb->step, 1, __ATOMIC_RELEASE);
        if (!tu_wait_u64(&mb->ack, 1, WAIT_MS)) return 1;
        if (cxl_ring_send(to, &m) != CXL_RING_OK) return 1;
        __atomic_store_n(&mb->step, 2, __ATOMIC_RELEASE);
        if (!tu_wait_u64(&mb->ack, 2, WAIT_MS)) return 1;
        __atomic_store_n(&mb->step, 3, __ATOMIC_RELEASE);
    }
    cxl_region_close(r);
    return 0;
}

static void run_stale(bool sim)
{
    struct stale_run *sr = calloc(1, sizeof *sr);
    sr->pr.nhosts = 2;
    sr->sim = sim;
    tu_make_config(&sr->pr.c, 2, 1 * GiB, 8 * MiB, sim);
    run_hosts(&sr->pr, stale_host);
    free(sr);
}

START_TEST(read_without_flush_is_stale_simulated) { run_stale(true); }
END_TEST

START_TEST(read_without_flush_is_fresh_coherent) { run_stale(false); }
END_TEST

/* ---- bounded waits: silent, killed, restarted hosts ------------------------ */

static int silent_host(void *arg)
{
    struct pod_config *c = arg;
    struct cxl_region *r = open_host(c, 1);
    if (!r) return 1;
    pod_err err = {{0}};
    if (!cxl_ring_create(r, 8, &err) || !cxl_reply_area_create(r, 1, &err)) return 1;
    pause(); /* never serves its inbox */
    return 0;
}

static int short_lived_host(void *arg)
{
    struct pod_config *c = arg;
    struct cxl_region *r = open_host(c, 1);
    if (!r) return 1;
    pod_err err = {{0}};
    if (!cxl_ring_create(r, 8, &err) || !cxl_reply_area_create(r, 1, &err)) return 1;
    cxl_root_publish(r, 0, 1); /* "up": the dead predecessor's roots meant nothing */
    usleep(300 * 1000);
    kill(getpid(), SIGKILL); /* dies without leaving the region */
    return 0;
}

struct reaper {
    int pid;
    bool reaped;
};

/* A killed child stays a zombie until its parent reaps it. cxl_host_alive
 * counts a zombie as dead (state Z in /proc/PID/stat), so the wait may end
 * before the poll callback reaps it; the test reaps it afterwards then. */
static void reap(void *arg)
{
    struct reaper *rp = arg;
    int st;
    if (!rp->reaped && waitpid(rp->pid, &st, WNOHANG) == rp->pid) rp->reaped = true;
}

/* Elapsed-time checks are loose (the machine may be busy with other work):
 * a timeout must not come early, and a dead host must be noticed long before
 * the wait's 10 s bound. With a doorbell the waiter sleeps on it after 1 ms:
 * the bounds must hold the same. */
static void bounded_waits(bool doorbell)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 2, 1 * GiB, 8 * MiB, true);
    int pid = tu_fork(silent_host, c);
    struct cxl_region *r = open_host(c, 0);
    ck_assert_ptr_nonnull(r);
    pod_err err = {{0}};
    struct cxl_replies *ra = cxl_reply_area_create(r, 1, &err);
    ck_assert_msg(ra != NULL, "%s", err.msg);
    struct cxl_ring *inbox = NULL;
    if (doorbell) {
        inbox = cxl_ring_create(r, 8, &err);
        ck_assert_msg(inbox != NULL, "%s", err.msg);
        cxl_reply_area_doorbell(ra, inbox);
    }
    struct cxl_ring *to = cxl_ring_attach(r, 1, WAIT_MS, &err);
    ck_assert_msg(to != NULL, "%s", err.msg);
    struct cxl_msg req = {.type = PP_REQ, .len = 1}, rep;

    /* 1. A host that is alive but does not answer: the timeout, on time. */
    req.req_id = cxl_reply_arm(ra, 0);
    ck_assert_int_eq(cxl_ring_send(to, &req), CXL_RING_OK);
    uint64_t t0 = pod_mono_ns();
    int rc = cxl_reply_wait(ra, 0, req.req_id, 1, 100 * 1000, &rep, NULL, NULL, &err);
    uint64_t ms = (pod_mono_ns() - t0) / 1000000;
    ck_assert_int_eq(rc, CXL_RING_TIMEOUT);
    ck_assert_msg(ms >= 100 && ms < 3000, "timed out after %llu ms", (unsigned long long)ms);
    ck_assert_msg(strstr(err.msg, "from host 1 within 100000 us"), "%s", err.msg);

    /* 2. The same host killed: the wait fails fast, long before its bound. */
    kill(pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(pid, 5000), -1);
    req.req_id = cxl_reply_arm(ra, 0);
    ck_assert_int_eq(cxl_ring_send(to, &req), CXL_RING_OK); /* its memory is still there */
    t0 = pod_mono_ns();
    rc = cxl_reply_wait(ra, 0, req.req_id, 1, 10 * 1000 * 1000, &rep, NULL, NULL, &err);
    ms = (pod_mono_ns() - t0) / 1000000;
    ck_assert_int_eq(rc, CXL_RING_DEAD);
    ck_assert_msg(ms < 2000, "noticed the dead host after %llu ms", (unsigned long long)ms);
    ck_assert_msg(strstr(err.msg, "host 1 is not alive"), "%s", err.msg);

    /* 3. Host 1 restarts: its slices are reset and it has a new ring; the old
     * handle must not write into them. Then it dies while we wait. */
    struct reaper rp = {tu_fork(short_lived_host, c), false};
    uint64_t dl = pod_mono_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (cxl_root_get(r, 1, 0) != 1 && pod_mono_ns() < dl) usleep(100);
    ck_assert_uint_eq(cxl_root_get(r, 1, 0), 1);
    ck_assert_int_eq(cxl_ring_send(to, &req), CXL_RING_GONE);
    cxl_ring_close(to);
    to = cxl_ring_attach(r, 1, WAIT_MS, &err);
    ck_assert_msg(to != NULL, "%s", err.msg);
    req.req_id = cxl_reply_arm(ra, 0);
    ck_assert_int_eq(cxl_ring_send(to, &req), CXL_RING_OK);
    t0 = pod_mono_ns();
    rc = cxl_reply_wait(ra, 0, req.req_id, 1, 10 * 1000 * 1000, &rep, reap, &rp, &err);
    ms = (pod_mono_ns() - t0) / 1000000;
    ck_assert_int_eq(rc, CXL_RING_DEAD);
    if (!rp.reaped) ck_assert_int_eq(tu_wait_child(rp.pid, 5000), -1);
    ck_assert_msg(ms < 5000, "noticed the death after %llu ms", (unsigned long long)ms);
    ck_assert_msg(strstr(err.msg, "host 1 is not alive"), "%s", err.msg);
    /* After any return the slot is free again. */
    ck_assert_uint_ne(cxl_reply_arm(ra, 0), 0);

    cxl_ring_close(to);
    cxl_reply_area_close(ra);
    if (inbox) cxl_ring_close(inbox);
    cxl_region_close(r);
    free(c);
}

START_TEST(bounded_waits_napping) { bounded_waits(false); }
END_TEST

START_TEST(bounded_waits_on_the_doorbell) { bounded_waits(true); }
END_TEST

int main(void)
{
    Suite *s = suite_create("ring");
    TCase *one = tu_tcase(s, "single process", 120);
    tcase_add_checked_fixture(one, setup_one, teardown_one);
    tcase_add_test(one, fifo_order);
    tcase_add_test(one, full_ring_says_full);
    tcase_add_test(one, wrap_around);
    tcase_add_test(one, size_limit);
    tcase_add_test(one, corrupt_slot_does_not_stall);
    tcase_add_test(one, bad_arguments);
    tcase_add_test(one, closed_ring_is_gone);
    tcase_add_test(one, reply_slot_states);
    tcase_add_test(one, threads_on_one_ring_simulated);
    tcase_add_test(one, threads_on_one_ring_coherent);

    TCase *mp = tu_tcase(s, "processes", 240);
    tcase_add_test(mp, all_to_all_2_hosts);
    tcase_add_test(mp, all_to_all_4_hosts);
    tcase_add_test(mp, ping_pong_both_ways);
    tcase_add_test(mp, waiting_without_serving_times_out);
    tcase_add_test(mp, read_without_flush_is_stale_simulated);
    tcase_add_test(mp, read_without_flush_is_fresh_coherent);
    tcase_add_test(mp, bounded_waits_napping);
    tcase_add_test(mp, bounded_waits_on_the_doorbell);

    return tu_run(s);
}
