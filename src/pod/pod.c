/* The host context of the pod layer: attach/detach, the per-partition CXL
 * state, requests over the rings, serving the inbox (src/pod/pod.h). */
#include "pod/pod_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record_ops.h"
#include "db/types.h"
#include "storage/lock.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/log.h"

#define INBOX_SLOTS 1024

struct cxl_region *pod_host_region(const struct pod_host *ph) { return ph->r; }
enum pod_coherence pod_host_coherence(const struct pod_host *ph) { return ph->coh; }

static void free_parts(pod_db *db)
{
    for (uint32_t i = 0; i < db->ntables; i++) {
        pod_table *t = db->tables[i];
        for (uint32_t p = 0; t->parts && p < t->nparts; p++) {
            struct pod_part_cxl *pc = t->parts[p].cxl;
            if (!pc) continue;
            cxl_index_close(pc->ix);
            free(pc);
            t->parts[p].cxl = NULL;
        }
    }
}

/* The owner's side of one partition: its CXL index and sentinel record; the
 * local sentinel's lock moves into the record for good. */
static int own_partition(struct pod_host *ph, pod_table *t, uint32_t p, pod_err *err)
{
    struct pod_part_cxl *pc = t->parts[p].cxl;
    if (!(pc->ix = cxl_index_create(ph->r, ph->x, t->id, p, t->key_size, 0, err))) return -1;
    uint64_t zero = 0;
    cxl_off soff = rec_create(ph->r, ph->coh, &zero, sizeof zero, 1, 0);
    if (soff == CXL_NULL) {
        pod_err_set(err, "table %s partition %u: host %d's HWcc budget is exhausted (sentinel)",
                    t->name, p, ph->host);
        return -1;
    }
    struct pod_row *s = t->parts[p].sentinel;
    row_set_shortcut(s, soff);
    __atomic_fetch_or(&s->lock, LOCK_MOVED, __ATOMIC_RELEASE);
    pc->sentinel = pod_rec(ph, soff);
    cxl_index_set_sentinel(pc->ix, soff);
    return 0;
}

struct pod_host *pod_host_attach(pod_db *db, struct cxl_region *r, const struct pod_config *c,
                                 pod_err *err)
{
    if (db->opt.nworkers + 1 > POD_MAX_WORKERS) {
        pod_err_set(err, "a host of a pod runs at most %d workers (one slot is the admin's)",
                    POD_MAX_WORKERS - 1);
        return NULL;
    }
    struct pod_host *ph = calloc(1, sizeof *ph);
    if (!ph) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    ph->db = db;
    ph->r = r;
    ph->conf = c;
    ph->coh = c->engine.coherence;
    ph->host = r->host;
    ph->nhosts = (int)r->sb->nhosts;
    pthread_mutex_init(&ph->peers_lock, NULL);
    pthread_mutex_init(&ph->moveout_lock, NULL);
    ph->moveout_at = (uint64_t)(c->engine.moveout_threshold * (double)r->sb->hwcc_quota);
    ph->moveout_to = ph->moveout_at / 10 * 9;
    for (uint32_t i = 0; i < db->ntables; i++) {
        pod_table *t = db->tables[i];
        if (t->key_size > POD_MSG_KEY_MAX) {
            pod_err_set(err, "table %s: in a pod of several hosts a key has at most %d bytes "
                        "(it travels inline in a %d-byte CXL message); this one has %u",
                        t->name, POD_MSG_KEY_MAX, CXL_MSG_SLOT, t->key_size);
            goto fail;
        }
    }
    if (!(ph->x = xebr_open(r, err))) goto fail;
    if (!(ph->inbox = cxl_ring_create(r, INBOX_SLOTS, err))) goto fail;
    if (!(ph->replies = cxl_reply_area_create(r, (unsigned)db->opt.nworkers + 1, err))) goto fail;
    cxl_reply_area_doorbell(ph->replies, ph->inbox);
    for (uint32_t i = 0; i < db->ntables; i++) {
        pod_table *t = db->tables[i];
        for (uint32_t p = 0; p < t->nparts; p++) {
            if (!(t->parts[p].cxl = calloc(1, sizeof(struct pod_part_cxl)))) {
                pod_err_set(err, "out of memory");
                goto fail;
            }
            if (t->parts[p].owner == (uint32_t)ph->host && own_partition(ph, t, p, err))
                goto fail;
        }
    }
    db->pod = ph;
    return ph;
fail:
    free_parts(db);
    if (ph->replies) cxl_reply_area_close(ph->replies);
    if (ph->inbox) cxl_ring_close(ph->inbox);
    if (ph->x) xebr_close(ph->x, 100);
    pthread_mutex_destroy(&ph->peers_lock);
    pthread_mutex_destroy(&ph->moveout_lock);
    free(ph);
    return NULL;
}

void pod_host_detach(struct pod_host *ph)
{
    if (!ph) return;
    pod_db *db = ph->db;
    /* Rows stay in DRAM; their CXL copies die with the region. Forget the
     * shortcuts so that table_free sees plain rows. */
    for (uint32_t i = 0; i < db->ntables; i++) {
        pod_table *t = db->tables[i];
        for (uint32_t p = 0; p < t->nparts; p++) {
            struct pod_row *s = t->parts[p].sentinel;
            s->lock &= ~LOCK_STATE;
            s->shortcut = 0;
        }
    }
    cxl_ring_close(ph->inbox);
    cxl_reply_area_close(ph->replies);
    for (int h = 0; h < POD_MAX_HOSTS; h++)
        if (ph->peers[h]) cxl_ring_close(ph->peers[h]);
    xebr_close(ph->x, 1000);
    free_parts(db);
    db->pod = NULL;
    pthread_mutex_destroy(&ph->peers_lock);
    pthread_mutex_destroy(&ph->moveout_lock);
    free(ph);
}

struct pod_part_cxl *pod_part(struct pod_host *ph, pod_table *t, uint32_t part, int worker,
                              pod_err *err)
{
    (void)worker;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    if (__atomic_load_n(&pc->sentinel, __ATOMIC_ACQUIRE)) return pc;
    int owner = (int)t->parts[part].owner;
    struct cxl_index *ix = __atomic_load_n(&pc->ix, __ATOMIC_ACQUIRE);
    if (!ix) {
        struct cxl_index *mine = cxl_index_open(ph->r, ph->x, owner, t->id, part, err);
        if (!mine) {
            pod_err_set(err, "table %s partition %u lives on host %d, which has not published "
                        "it (is host %d running?)", t->name, part, owner, owner);
            return NULL;
        }
        struct cxl_index *expect = NULL;
        if (__atomic_compare_exchange_n(&pc->ix, &expect, mine, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            ix = mine;
        else {
            cxl_index_close(mine); /* another worker opened it first */
            ix = expect;
        }
    }
    cxl_off soff = cxl_index_sentinel(ix);
    if (soff == CXL_NULL) {
        pod_err_set(err, "table %s partition %u: host %d is still setting it up", t->name, part,
                    owner);
        return NULL;
    }
    __atomic_store_n(&pc->sentinel, pod_rec(ph, soff), __ATOMIC_RELEASE);
    return pc;
}

/* ---- requests ------------------------------------------------------------------ */

static struct cxl_ring *peer(struct pod_host *ph, int host, pod_err *err)
{
    struct cxl_ring *ring = __atomic_load_n(&ph->peers[host], __ATOMIC_ACQUIRE);
    if (ring) return ring;
    pthread_mutex_lock(&ph->peers_lock);
    if (!(ring = ph->peers[host])) {
        ring = cxl_ring_attach(ph->r, host, 1000, err);
        if (ring) __atomic_store_n(&ph->peers[host], ring, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ph->peers_lock);
    return ring;
}

void pod_req_init(struct pod_req_msg *rq, const pod_table *t, uint32_t part, const void *key,
                  uint16_t flags)
{
    rq->table = t->id;
    rq->part = part;
    rq->rec = CXL_NULL;
    rq->flags = flags;
    rq->count = 0;
    rq->reserved = 0;
    rq->key_len = key ? (uint16_t)t->key_size : 0;
    if (key) {
        memcpy(rq->key, key, t->key_size);
        rq->flags |= POD_RQ_HAS_KEY;
    }
}

static void serve_cb(void *arg) { pod_serve(arg, 4); }

/* Put m into owner's inbox; a full ring is retried while serving our own. */
static int send_msg(struct pod_worker *w, int owner, struct cxl_msg *m, pod_err *err)
{
    struct pod_host *ph = w->db->pod;
    struct cxl_ring *ring = peer(ph, owner, err);
    if (!ring) return -1;
    uint64_t deadline = 0;
    for (;;) {
        int rc = cxl_ring_send(ring, m);
        if (rc == CXL_RING_OK) break;
        if (rc != CXL_RING_FULL) {
            pod_err_set(err, "cannot send to host %d: %s", owner, cxl_ring_strerror(rc));
            return -1;
        }
        uint64_t now = pod_mono_ns();
        if (!deadline) deadline = now + POD_REPLY_TIMEOUT_US * 1000ull;
        if (now > deadline || !cxl_host_alive(ph->r, owner)) {
            pod_err_set(err, "host %d's inbox stayed full for %d s (is it running?)", owner,
                        POD_REPLY_TIMEOUT_US / 1000000);
            return -1;
        }
        pod_serve(w, 8);
    }
    pod_count(&ph->st.msgs_sent, 1);
    return 0;
}

static size_t req_len(const struct pod_req_msg *rq)
{
    return offsetof(struct pod_req_msg, key) + rq->key_len;
}

static unsigned wait_bucket(uint64_t us)
{
    unsigned b = us < 2 ? 0 : 63u - (unsigned)__builtin_clzll(us);
    return b < POD_WAIT_BUCKETS ? b : POD_WAIT_BUCKETS - 1;
}

uint64_t pod_wait_quantile_us(const struct pod_host_stats *st, double q)
{
    uint64_t n = 0;
    for (unsigned b = 0; b < POD_WAIT_BUCKETS; b++) n += st->wait_hist[b];
    if (!n) return 0;
    uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0; /* the want-th shortest wait */
    if (want < 1) want = 1;
    for (unsigned b = 0; b < POD_WAIT_BUCKETS; b++)
        if ((seen += st->wait_hist[b]) >= want) return 2ull << b;
    return 2ull << (POD_WAIT_BUCKETS - 1);
}

uint64_t pod_waits_at_least(const struct pod_host_stats *st, uint64_t us)
{
    uint64_t n = 0;
    for (unsigned b = wait_bucket(us); b < POD_WAIT_BUCKETS; b++) n += st->wait_hist[b];
    return n;
}

int pod_request(struct pod_worker *w, int owner, int type, const struct pod_req_msg *rq,
                cxl_off *rec, pod_err *err)
{
    struct pod_host *ph = w->db->pod;
    uint64_t id = cxl_reply_arm(ph->replies, (unsigned)w->id);
    if (!id) {
        pod_err_set(err, "worker %d: reply slot busy (protocol bug)", w->id);
        return POD_RS_ERROR;
    }
    struct cxl_msg m;
    m.type = (uint16_t)type;
    m.from_worker = (uint16_t)w->id;
    m.len = (uint16_t)req_len(rq);
    m.req_id = id;
    memcpy(m.data, rq, m.len);
    if (send_msg(w, owner, &m, err)) {
        /* Nobody will answer: let the slot go (an immediate bounded wait). */
        struct cxl_msg junk;
        pod_err e2;
        cxl_reply_wait(ph->replies, (unsigned)w->id, id, owner, 0, &junk, NULL, NULL, &e2);
        return POD_RS_ERROR;
    }
    uint64_t t0 = pod_mono_ns();
    struct cxl_msg out;
    pod_call_doing(w, owner); /* for the watchdog: what the call waits for */
    int rc = cxl_reply_wait(ph->replies, (unsigned)w->id, id, owner, POD_REPLY_TIMEOUT_US, &out,
                            serve_cb, w, err);
    pod_call_doing(w, POD_CALL_RUNNING);
    uint64_t waited = pod_mono_ns() - t0;
    pod_count(&ph->st.waits, 1);
    pod_count(&ph->st.wait_ns, waited);
    pod_count(&ph->st.wait_hist[wait_bucket(waited / 1000)], 1);
    if (rc != CXL_RING_OK) return POD_RS_ERROR;
    const struct pod_reply_msg *rp = (const struct pod_reply_msg *)out.data;
    if (rec) *rec = rp->rec;
    if (rp->status == POD_RS_ERROR)
        pod_err_set(err, "host %d: %.*s", owner, (int)sizeof rp->msg, rp->msg);
    return rp->status;
}

int pod_send_unlink(struct pod_worker *w, int owner, const pod_table *t, uint32_t part,
                    const void *key, cxl_off rec, pod_err *err)
{
    struct pod_req_msg rq;
    pod_req_init(&rq, t, part, key, 0);
    rq.rec = rec;
    struct cxl_msg m;
    m.type = POD_MSG_UNLINK;
    m.from_worker = (uint16_t)w->id;
    m.len = (uint16_t)req_len(&rq);
    m.req_id = 0;
    memcpy(m.data, &rq, m.len);
    return send_msg(w, owner, &m, err);
}

/* ---- serving ------------------------------------------------------------------ */

int pod_serve(struct pod_worker *w, int max)
{
    struct pod_host *ph = w->db->pod;
    if (!ph) return 0;
    int n = 0;
    struct cxl_msg m;
    while (n < max && cxl_ring_poll(ph->inbox, &m) == CXL_RING_OK) {
        pod_handle(w, &m);
        n++;
    }
    if (n) pod_count(&ph->st.msgs_served, (uint64_t)n);
    return n;
}

int pod_between(struct pod_worker *w)
{
    struct pod_host *ph = w->db->pod;
    if (!ph) return 0;
    int n = pod_serve(w, 16);
    struct cxl_usage u;
    cxl_usage_get(ph->r, ph->host, CXL_HWCC, &u);
    if (u.used > ph->moveout_at) pod_moveout(w, false);
    else pod_moveback(w);
    return n;
}

void pod_idle_spin(struct pod_worker *w, void *const *work)
{
    if (!w->db->pod) return;
    uint64_t until = pod_mono_ns() + POD_IDLE_SPIN_NS;
    for (unsigned i = 1; !__atomic_load_n(work, __ATOMIC_ACQUIRE); i++) {
        if ((i & 31) == 0) {
            uint64_t now = pod_mono_ns();
            if (pod_between(w) > 0) until = now + POD_IDLE_SPIN_NS; /* served: spin on */
            else if (now >= until) break;
        }
        pod_cpu_relax();
    }
}

void pod_idle_sleep(struct pod_worker *w, uint64_t idle_ns, bool (*has_work)(void *arg),
                    void *arg)
{
    struct pod_host *ph = w->db->pod;
    if (!ph) return;
    uint64_t t = POD_IDLE_SLEEP_NS;
    if (!cxl_hosts_share_kernel(ph->r)) /* their sends cannot ring our doorbell */
        t = idle_ns >= POD_IDLE_SLOW_AFTER_NS ? POD_IDLE_POLL_SLOW_NS : POD_IDLE_POLL_NS;
    else if (ph->conf->engine.moveback_rate) /* the CLOCK hand steps while idle */
        t = POD_IDLE_POLL_SLOW_NS;
    cxl_ring_sleep(ph->inbox, t, has_work, arg);
}

void pod_wake_idle(struct pod_host *ph)
{
    if (ph) cxl_ring_wake(ph->inbox);
}

void pod_host_get_stats(const struct pod_host *ph, struct pod_host_stats *out)
{
    const uint64_t *src = (const uint64_t *)&ph->st;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
