/* Pod-mode recovery exchange through the region; see route.h. */
#include "log/route.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cxl/region.h"
#include "log/emptylog.h"
#include "log/log_priv.h"
#include "util/clock.h"
#include "util/log.h"

enum {
    PH_ARRIVED = 1,  /* durable published */
    PH_STAGED = 2,   /* records for the others are in the region */
    PH_DONE = 3,     /* received everything meant for this host */
    PH_SKIPPED = 4,  /* had no history, met no recovery: serves without one */
};

#define WAIT_MESSAGE_NS (5ull * 1000 * 1000 * 1000)

struct route_block { /* in the host's HWcc slice; fields read by every host */
    uint64_t phase;  /* atomic, release after the fields it announces */
    struct log_durable_view view;
    uint64_t history; /* this host has a log history (segments, checkpoint or record) */
    struct {
        cxl_off off;
        uint64_t len, count;
    } to[POD_MAX_HOSTS];
};

struct route {
    struct log_host *lh;
    struct cxl_region *r;
    int host, nhosts;
    cxl_off self_off;
    struct route_block *self;
    cxl_off staged[POD_MAX_HOSTS];
    int timeout_ms;
};

static struct route_block *block_of(struct route *rt, int h)
{
    cxl_off off = cxl_root_get(rt->r, h, CXL_ROOT_RECOVERY);
    return off == CXL_NULL ? NULL : cxl_ptr(rt->r, off);
}

static const char *phase_name(uint64_t ph)
{
    switch (ph) {
    case PH_ARRIVED: return "its durable epoch";
    case PH_STAGED: return "its records for the other hosts";
    case PH_DONE: return "that it received its records";
    default: return "?";
    }
}

/* Wait until every host's block says phase >= want. */
static int wait_all(struct route *rt, uint64_t want, pod_err *err)
{
    uint64_t start = pod_mono_ns(), next_msg = start + WAIT_MESSAGE_NS;
    for (;;) {
        int missing = -1;
        for (int h = 0; h < rt->nhosts && missing < 0; h++) {
            struct route_block *b = block_of(rt, h);
            if (!b || __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE) < want) missing = h;
        }
        if (missing < 0) return 0;
        struct route_block *mb = block_of(rt, missing);
        if (mb && __atomic_load_n(&mb->phase, __ATOMIC_ACQUIRE) == PH_SKIPPED) {
            pod_err_set(err, "recovery: host %d started without taking part in recovery (it has "
                        "no log history and saw no recovery going on); in pod mode the hosts must "
                        "recover together: stop every host and start them again", missing);
            return -1;
        }
        uint64_t now = pod_mono_ns();
        uint32_t st = __atomic_load_n(&rt->r->ctl->hosts[missing].state, __ATOMIC_ACQUIRE);
        if (st != CXL_HOST_FREE && !cxl_host_alive(rt->r, missing)) {
            pod_err_set(err, "recovery: host %d died before publishing %s; restart the whole pod",
                        missing, phase_name(want));
            return -1;
        }
        if (rt->timeout_ms && now - start > (uint64_t)rt->timeout_ms * 1000000ull) {
            pod_err_set(err, "recovery: host %d did not publish %s within %d ms", missing,
                        phase_name(want), rt->timeout_ms);
            return -1;
        }
        if (now >= next_msg) {
            pod_info("recovery: waiting for host %d to publish %s (pod-mode recovery needs "
                     "every host of the pod)", missing, phase_name(want));
            next_msg = now + WAIT_MESSAGE_NS;
        }
        struct timespec nap = {0, 200000};
        nanosleep(&nap, NULL);
    }
}

/* Host h's block says it has history and has not finished recovering. */
static bool recovering_with_history(struct route *rt, int h)
{
    struct route_block *b = block_of(rt, h);
    if (!b) return false;
    uint64_t ph = __atomic_load_n(&b->phase, __ATOMIC_SEQ_CST);
    return ph >= PH_ARRIVED && ph < PH_DONE && __atomic_load_n(&b->history, __ATOMIC_ACQUIRE);
}

void log_durable_combine(const struct log_durable_view *v, int n, uint64_t *end, uint64_t *start)
{
    uint64_t rec = 0, marked = n > 0 ? UINT64_MAX : 0, top = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].recorded > rec) rec = v[i].recorded;
        if (v[i].marked < marked) marked = v[i].marked;
        if (v[i].marked_max > top) top = v[i].marked_max;
    }
    if (marked == UINT64_MAX) marked = 0; /* no host has a segment: no mark either */
    *end = marked > rec ? marked : rec;
    *start = top > *end ? top : *end;
}

struct route *route_begin(struct log_host *lh, const struct log_durable_view *local, bool history,
                          int timeout_ms, uint64_t *pod_durable, uint64_t *pod_start,
                          bool *skipped, pod_err *err)
{
    *skipped = false;
    struct route *rt = calloc(1, sizeof *rt);
    if (!rt) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    rt->lh = lh;
    rt->r = lh->o.region;
    rt->host = lh->o.host;
    rt->nhosts = lh->o.conf->nhosts;
    rt->timeout_ms = timeout_ms;
    rt->self_off = cxl_zalloc(rt->r, CXL_HWCC, sizeof *rt->self);
    if (rt->self_off == CXL_NULL) {
        pod_err_set(err, "recovery: no HWcc memory for the %zu-byte exchange block",
                    sizeof *rt->self);
        free(rt);
        return NULL;
    }
    rt->self = cxl_ptr(rt->r, rt->self_off);
    rt->self->view = *local;
    rt->self->history = history;
    __atomic_store_n(&rt->self->phase, PH_ARRIVED, __ATOMIC_RELEASE);
    cxl_root_publish(rt->r, CXL_ROOT_RECOVERY, rt->self_off);
    /* A full barrier (an RMW, which TSan understands) between publishing
     * ourselves and looking at the others: of two hosts starting together,
     * at least one sees the other. */
    __atomic_exchange_n(&rt->self->phase, PH_ARRIVED, __ATOMIC_SEQ_CST);
    bool others_recovering = false;
    for (int h = 0; h < rt->nhosts; h++) {
        if (h == rt->host) continue;
        struct route_block *b = block_of(rt, h);
        uint64_t ph = b ? __atomic_load_n(&b->phase, __ATOMIC_SEQ_CST) : 0;
        if (history && ph >= PH_DONE) {
            /* Recovered or serving without us: the pod did not restart as a whole. */
            if (ph == PH_SKIPPED && (lh->logged_hosts >> h & 1))
                pod_err_set(err, "recovery: host %d started with an empty log directory and "
                            "serves, but this host's %s lists it among the hosts that logged in "
                            "this pod: its log was removed or replaced. Stop every host; start "
                            "host %d again once its log is restored, or with --allow-empty-log "
                            "to go on without it (docs/durability.md, \"An empty log directory\")",
                            h, DURABLE_FILE_NAME, h);
            else
                pod_err_set(err, "recovery: host %d is already serving; in pod mode a host with "
                            "log history cannot join a running pod: stop every host and start "
                            "them together", h);
            cxl_root_publish(rt->r, CXL_ROOT_RECOVERY, CXL_NULL);
            cxl_free(rt->r, CXL_HWCC, rt->self_off);
            free(rt);
            return NULL;
        }
        others_recovering = others_recovering || recovering_with_history(rt, h);
    }
    if (!history && !others_recovering) {
        /* Nothing to recover here and nobody recovering: serve at once (a host
         * with history that arrives later finds this and refuses). */
        __atomic_store_n(&rt->self->phase, PH_SKIPPED, __ATOMIC_SEQ_CST);
        *skipped = true;
        free(rt); /* the block stays published */
        return NULL;
    }
    if (wait_all(rt, PH_ARRIVED, err)) {
        route_end(rt);
        return NULL;
    }
    struct log_durable_view views[POD_MAX_HOSTS];
    int lister = -1;
    for (int h = 0; h < rt->nhosts; h++) { /* published before PH_ARRIVED (release) */
        views[h] = block_of(rt, h)->view;
        lh->logged_hosts |= views[h].hosts | (block_of(rt, h)->history ? 1u << h : 0);
        if (lister < 0 && h != rt->host && (views[h].hosts >> rt->host & 1)) lister = h;
    }
    /* Without history, and not started so on purpose (--allow-empty-log
     * recovers as a host with history), but another host's record lists
     * this one: its log is gone (log/emptylog.h; here the evidence comes
     * from hosts whose directories this machine cannot read). */
    if (!history && lh->logging && lister >= 0) {
        pod_error("log directory %s holds no log, but host %d logged in this pod before: host "
                  "%d's %s lists it among the hosts that logged", lh->dir, rt->host, lister,
                  DURABLE_FILE_NAME);
        emptylog_refuse(lh->o.conf, rt->host, err);
        __atomic_store_n(&rt->r->ctl->hosts[rt->host].log_dir_lost, 1, __ATOMIC_SEQ_CST);
        route_end(rt);
        return NULL;
    }
    log_durable_combine(views, rt->nhosts, pod_durable, pod_start);
    pod_info("recovery: every host arrived; committed end of the pod's history: epoch %" PRIu64
             " (this host recorded %" PRIu64 ", its loggers marked %" PRIu64 "..%" PRIu64
             "); the pod goes on from epoch %" PRIu64, *pod_durable, local->recorded,
             local->marked == UINT64_MAX ? 0 : local->marked, local->marked_max, *pod_start);
    return rt;
}

int route_send(struct route *rt, const struct logrec_list out[], pod_err *err)
{
    struct cxl_swcc *sw = &rt->r->swcc;
    for (int h = 0; h < rt->nhosts; h++) {
        if (h == rt->host || out[h].count == 0) continue;
        cxl_off off = cxl_alloc(rt->r, CXL_SWCC, out[h].bytes);
        if (off == CXL_NULL) {
            pod_err_set(err, "recovery: %" PRIu64 " bytes of records for host %d do not fit this "
                        "host's SWcc slice (staging is one round: give the region more room)",
                        out[h].bytes, h);
            return -1;
        }
        rt->staged[h] = off;
        char *dst = cxl_ptr(rt->r, off);
        size_t pos = 0;
        for (const struct logrec_chunk *c = out[h].head; c; c = c->next) {
            cxl_swcc_write(sw, dst + pos, c->data, c->used);
            pos += c->used;
        }
        cxl_swcc_writeback(sw, dst, pos);
        rt->self->to[h].off = off;
        rt->self->to[h].len = pos;
        rt->self->to[h].count = out[h].count;
    }
    __atomic_store_n(&rt->self->phase, PH_STAGED, __ATOMIC_RELEASE);
    return wait_all(rt, PH_STAGED, err);
}

int route_receive(struct route *rt, bool (*deliver)(void *ctx, const struct logrec_entry *e),
                  void *ctx, pod_err *err)
{
    struct cxl_swcc *sw = &rt->r->swcc;
    for (int h = 0; h < rt->nhosts; h++) {
        if (h == rt->host) continue;
        struct route_block *b = block_of(rt, h);
        uint64_t len = b->to[rt->host].len, count = b->to[rt->host].count;
        if (!len) continue;
        const char *src = cxl_ptr(rt->r, b->to[rt->host].off);
        unsigned char *buf = malloc(len);
        if (!buf) {
            pod_err_set(err, "recovery: out of memory receiving %" PRIu64 " bytes from host %d",
                        len, h);
            return -1;
        }
        cxl_swcc_flush(sw, src, len); /* another host wrote it: drop stale lines */
        cxl_swcc_read(sw, buf, src, len);
        uint64_t pos = 0, n = 0;
        while (pos < len) {
            const struct logrec_entry *e = (const struct logrec_entry *)(buf + pos);
            if (e->size < sizeof *e || e->size > len - pos ||
                logrec_entry_size(e->key_len, e->tuple_len) != e->size) {
                pod_err_set(err, "recovery: malformed record %" PRIu64 " from host %d", n, h);
                free(buf);
                return -1;
            }
            if (!deliver(ctx, e)) {
                pod_err_set(err, "recovery: cannot take record %" PRIu64 " from host %d (unknown "
                            "table or out of memory)", n, h);
                free(buf);
                return -1;
            }
            pos += e->size;
            n++;
        }
        free(buf);
        if (n != count) {
            pod_err_set(err, "recovery: host %d staged %" PRIu64 " records for us, %" PRIu64
                        " arrived", h, count, n);
            return -1;
        }
    }
    __atomic_store_n(&rt->self->phase, PH_DONE, __ATOMIC_RELEASE);
    return wait_all(rt, PH_DONE, err);
}

void route_end(struct route *rt)
{
    if (!rt) return;
    for (int h = 0; h < POD_MAX_HOSTS; h++)
        if (rt->staged[h] != CXL_NULL) cxl_free(rt->r, CXL_SWCC, rt->staged[h]);
    /* The block stays published (phase DONE, or where a failure left it): a
     * host that attaches later sees that recovery happened without it. */
    free(rt);
}
