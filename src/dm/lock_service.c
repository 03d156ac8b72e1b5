/* Lotus's lock requests between compute nodes: see lock_service.h. */
#include "dm/lock_service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dm/fabric.h"
#include "dm/nic_model.h"
#include "util/clock.h"

#define LK_MAGIC 0x4b434f4cu /* "LOCK" */
#define LK_NAME_MAX 96u      /* a reply address (fab_name): shm's and tcp's are shorter */
#define LK_ACQUIRE 1u
#define LK_RELEASE 2u
#define LK_REPLY 3u
#define LK_RELEASE_CN 4u     /* every lock of compute node `cn` given back; answered */
#define MAX_OWNERS 256u      /* a holder names its compute node in 8 bits */
#define CLIENTS_CAP 8192u    /* reply addresses a service keeps: compute nodes x lanes */

struct lk_req {
    uint32_t magic, kind;
    uint32_t cn, lane;       /* the sender: where the reply goes */
    uint64_t seq;            /* the sender's call; its reply repeats it */
    uint64_t holder;         /* LT_HOLDER */
    uint64_t write_mask;     /* acquire: bit i set, hash[i] a write lock */
    uint32_t n, name_len;
    unsigned char name[LK_NAME_MAX];
    uint64_t hash[LK_BATCH];
};

struct lk_rep {
    uint32_t magic, kind;
    uint64_t seq;
    uint32_t granted;        /* the first `granted` were taken */
    int32_t why;             /* the next one's lt_result */
};

static uint32_t req_bytes(uint32_t n) { return (uint32_t)offsetof(struct lk_req, hash) + 8 * n; }

/* ---- the service ---------------------------------------------------------------- */

struct client_slot {
    uint64_t id;             /* cn << 32 | lane, + 1; 0: free */
    int peer;                /* its reply address at the service's endpoint */
    uint32_t name_len;
    unsigned char name[LK_NAME_MAX];
};

struct lock_service {
    struct fab *f;
    struct lock_table *t;
    pthread_t th;
    bool stop;
    struct client_slot *clients; /* open addressing over id */
    struct lock_service_stats st;
};

/* The reply address of the request's sender: learnt from the request, again
 * when it changed (the sender's compute node restarted). */
static int reply_peer(struct lock_service *s, const struct lk_req *q, pod_err *err)
{
    uint64_t id = ((uint64_t)q->cn << 32 | q->lane) + 1;
    for (uint32_t i = 0, h = (uint32_t)(id * 0x9e3779b97f4a7c15ull >> 51); i < CLIENTS_CAP;
         i++, h = (h + 1) & (CLIENTS_CAP - 1)) {
        struct client_slot *c = &s->clients[h];
        if (c->id && c->id != id) continue;
        if (c->id && c->name_len == q->name_len && !memcmp(c->name, q->name, q->name_len))
            return c->peer;
        int p = fab_msg_peer_add(s->f, q->name, q->name_len, err);
        if (p < 0) return -1;
        c->id = id;
        c->peer = p;
        c->name_len = q->name_len;
        memcpy(c->name, q->name, q->name_len);
        return p;
    }
    pod_err_set(err, "lock service: more than %u clients", CLIENTS_CAP);
    return -1;
}

static void serve(struct lock_service *s, const struct lk_req *q, uint32_t len)
{
    if (len < req_bytes(0) || q->magic != LK_MAGIC || q->n > LK_BATCH || len < req_bytes(q->n) ||
        q->name_len > LK_NAME_MAX ||
        (q->kind != LK_ACQUIRE && q->kind != LK_RELEASE && q->kind != LK_RELEASE_CN)) {
        __atomic_fetch_add(&s->st.bad, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&s->st.locks, q->n, __ATOMIC_RELAXED);
    if (q->kind == LK_RELEASE) {
        for (uint32_t i = 0; i < q->n; i++) lock_table_release(s->t, q->hash[i], q->holder);
        __atomic_fetch_add(&s->st.releases, 1, __ATOMIC_RELAXED);
        return;
    }
    struct lk_rep r = {.magic = LK_MAGIC, .kind = LK_REPLY, .seq = q->seq, .why = LT_OK};
    if (q->kind == LK_RELEASE_CN) /* granted: how many were released */
        r.granted = (uint32_t)lock_table_release_cn(s->t, q->cn);
    for (; q->kind == LK_ACQUIRE && r.granted < q->n; r.granted++) {
        enum lt_result res = lock_table_acquire(s->t, q->hash[r.granted],
                                                q->write_mask >> r.granted & 1, q->holder);
        if (res != LT_OK) {
            r.why = res;
            break;
        }
    }
    __atomic_fetch_add(&s->st.acquires, 1, __ATOMIC_RELAXED);
    pod_err e;
    int p = reply_peer(s, q, &e);
    /* Unanswered, the client times out and releases what it asked for. */
    if (p < 0 || fab_send(s->f, p, &r, sizeof r, &e) != 0)
        __atomic_fetch_add(&s->st.unanswered, 1, __ATOMIC_RELAXED);
}

static void *service_main(void *arg)
{
    struct lock_service *s = arg;
    struct lk_req q;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        uint32_t len;
        pod_err e;
        int rc = fab_recv(s->f, &q, sizeof q, &len, 50, &e);
        if (rc == 1) serve(s, &q, len);
        else if (rc < 0) __atomic_fetch_add(&s->st.bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

struct lock_service *lock_service_start(const struct lock_service_opts *o, pod_err *err)
{
    struct lock_service *s = calloc(1, sizeof *s);
    if (s) s->clients = calloc(CLIENTS_CAP, sizeof *s->clients);
    if (!s || !s->clients) {
        if (s) free(s);
        pod_err_set(err, "lock service: out of memory");
        return NULL;
    }
    if (!(s->t = lock_table_new(o->table_bytes, err))) goto fail;
    s->f = fab_open(&(struct fab_open_opts){.provider = o->provider,
                                            .op_timeout_ms = o->reply_timeout_ms > 0
                                                                 ? o->reply_timeout_ms
                                                                 : 1000,
                                            .staging = 65536, .msg_slots = 256,
                                            .msg_bytes = sizeof(struct lk_req)},
                    err);
    if (!s->f) goto fail;
    if (pthread_create(&s->th, NULL, service_main, s) != 0) {
        pod_err_set(err, "lock service: cannot start its thread");
        goto fail;
    }
    return s;
fail:
    fab_close(s->f);
    lock_table_free(s->t);
    free(s->clients);
    free(s);
    return NULL;
}

void lock_service_stop(struct lock_service *s)
{
    if (!s) return;
    __atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
    pthread_join(s->th, NULL);
    fab_close(s->f);
    lock_table_free(s->t);
    free(s->clients);
    free(s);
}

struct lock_table *lock_service_table(struct lock_service *s) { return s->t; }

int lock_service_name(struct lock_service *s, void *buf, size_t *len, pod_err *err)
{
    return fab_name(s->f, buf, len, err);
}

void lock_service_stats(struct lock_service *s, struct lock_service_stats *out)
{
    out->acquires = __atomic_load_n(&s->st.acquires, __ATOMIC_RELAXED);
    out->releases = __atomic_load_n(&s->st.releases, __ATOMIC_RELAXED);
    out->locks = __atomic_load_n(&s->st.locks, __ATOMIC_RELAXED);
    out->bad = __atomic_load_n(&s->st.bad, __ATOMIC_RELAXED);
    out->unanswered = __atomic_load_n(&s->st.unanswered, __ATOMIC_RELAXED);
}

/* ---- a client ------------------------------------------------------------------- */

struct lock_client {
    struct fab *f;
    uint32_t cn, lane;
    uint64_t seq;
    int timeout_ms;
    uint64_t rtt_ns;         /* NIC model: the least an answered request takes */
    uint64_t sent_ns;        /* when the request awaited was sent */
    int owner[MAX_OWNERS];   /* fab message peer of each compute node's service, or -1 */
    uint32_t name_len;
    unsigned char name[LK_NAME_MAX];
    struct lk_req q;
};

struct lock_client *lock_client_new(const char *provider, uint32_t cn, uint32_t lane,
                                    int timeout_ms, pod_err *err)
{
    struct lock_client *c = calloc(1, sizeof *c);
    if (!c) {
        pod_err_set(err, "lock client: out of memory");
        return NULL;
    }
    c->cn = cn;
    c->lane = lane;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    for (uint32_t i = 0; i < MAX_OWNERS; i++) c->owner[i] = -1;
    c->f = fab_open(&(struct fab_open_opts){.provider = provider, .op_timeout_ms = c->timeout_ms,
                                            .staging = 65536, .msg_slots = 8,
                                            .msg_bytes = sizeof(struct lk_req)},
                    err);
    size_t nl = LK_NAME_MAX;
    if (!c->f || fab_name(c->f, c->name, &nl, err) != 0) {
        lock_client_free(c);
        return NULL;
    }
    c->name_len = (uint32_t)nl;
    return c;
}

void lock_client_free(struct lock_client *c)
{
    if (!c) return;
    fab_close(c->f);
    free(c);
}

int lock_client_owner(struct lock_client *c, uint32_t owner, const void *name, size_t len,
                      pod_err *err)
{
    if (owner >= MAX_OWNERS) {
        pod_err_set(err, "lock client: no compute node %u", owner);
        return -1;
    }
    int p = fab_msg_peer_add(c->f, name, len, err);
    if (p < 0) return -1;
    c->owner[owner] = p;
    return 0;
}

bool lock_client_knows(const struct lock_client *c, uint32_t owner)
{
    return owner < MAX_OWNERS && c->owner[owner] >= 0;
}

void lock_client_forget(struct lock_client *c, uint32_t owner)
{
    if (owner < MAX_OWNERS) c->owner[owner] = -1;
}

void lock_client_model_rtt(struct lock_client *c, uint64_t rtt_ns) { c->rtt_ns = rtt_ns; }

/* The request of n locks, sent to owner. */
static int send_req(struct lock_client *c, uint32_t kind, uint32_t owner, uint64_t holder,
                    const uint64_t *hash, uint64_t write_mask, uint32_t n, pod_err *err)
{
    if (owner >= MAX_OWNERS || c->owner[owner] < 0) {
        pod_err_set(err, "lock client: the address of compute node %u's lock service is unknown",
                    owner);
        return -1;
    }
    if (n > LK_BATCH) {
        pod_err_set(err, "lock client: %u locks in one request, at most %u", n, LK_BATCH);
        return -1;
    }
    struct lk_req *q = &c->q;
    *q = (struct lk_req){.magic = LK_MAGIC, .kind = kind, .cn = c->cn, .lane = c->lane,
                         .seq = ++c->seq, .holder = holder, .write_mask = write_mask, .n = n,
                         .name_len = c->name_len};
    memcpy(q->name, c->name, c->name_len);
    if (n) memcpy(q->hash, hash, 8 * (size_t)n);
    c->sent_ns = c->rtt_ns ? pod_mono_ns() : 0;
    return fab_send(c->f, c->owner[owner], q, req_bytes(n), err);
}

/* The reply to the request just sent: 0, or -1 with err. */
static int await_reply(struct lock_client *c, uint32_t owner, struct lk_rep *out, pod_err *err)
{
    for (;;) {
        struct lk_rep r;
        uint32_t len;
        int rc = fab_recv(c->f, &r, sizeof r, &len, c->timeout_ms, err);
        if (rc < 0) return -1;
        if (rc == 0) {
            pod_err_set(err, "lock client: compute node %u's lock service did not answer within "
                        "%d ms", owner, c->timeout_ms);
            return -1;
        }
        if (len != sizeof r || r.magic != LK_MAGIC || r.kind != LK_REPLY) {
            pod_err_set(err, "lock client: a message from compute node %u that is no reply",
                        owner);
            return -1;
        }
        if (r.seq != c->seq) continue; /* a reply to a call given up on */
        *out = r;
        if (c->rtt_ns) nic_model_wait_until(c->sent_ns + c->rtt_ns);
        return 0;
    }
}

int lock_client_acquire(struct lock_client *c, uint32_t owner, uint64_t holder,
                        const uint64_t *hash, uint64_t write_mask, uint32_t n, uint32_t *granted,
                        enum lt_result *why, pod_err *err)
{
    *granted = 0;
    *why = LT_OK;
    struct lk_rep r;
    if (send_req(c, LK_ACQUIRE, owner, holder, hash, write_mask, n, err) != 0 ||
        await_reply(c, owner, &r, err) != 0)
        return -1;
    if (r.granted > n) {
        pod_err_set(err, "lock client: compute node %u granted %u of %u locks", owner, r.granted,
                    n);
        return -1;
    }
    *granted = r.granted;
    if (r.granted == n) return 0;
    *why = (enum lt_result)r.why;
    return 1;
}

int lock_client_release_cn(struct lock_client *c, uint32_t owner, size_t *released, pod_err *err)
{
    struct lk_rep r;
    if (send_req(c, LK_RELEASE_CN, owner, 0, NULL, 0, 0, err) != 0 ||
        await_reply(c, owner, &r, err) != 0)
        return -1;
    if (released) *released = r.granted;
    return 0;
}

int lock_client_release(struct lock_client *c, uint32_t owner, uint64_t holder,
                        const uint64_t *hash, uint32_t n, pod_err *err)
{
    return send_req(c, LK_RELEASE, owner, holder, hash, 0, n, err);
}
