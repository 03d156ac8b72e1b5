/* Cross-host EBR: src/storage/ebr.c's domain with its announcement slots and
 * global epoch in the control block (HWcc memory), one view per host process.
 *
 * Why the single-process argument of ebr.c carries over: the slots and the
 * global epoch are ordinary words of a MAP_SHARED mapping in HWcc memory, and
 * every access to them is a seq_cst atomic (loads, stores, the CAS on the
 * epoch, the fence in ebr_retire). Cache coherence across the hosts' CPUs is
 * what HWcc memory provides, so the single total order of seq_cst operations
 * spans all hosts exactly as it spans threads. The retired lists are private
 * (process DRAM), and each host only ever retires memory of its own slice, so
 * the free (cxl_free) runs on the owner as the allocator requires.
 *
 * Each view scans all nhosts * POD_MAX_WORKERS slots when it tries to advance
 * the epoch (ebr_collect; amortised: every EBR_COLLECT_EVERY exits of a slot
 * or when its list grows). Slots of workers that do not exist stay 0. */
#include "pod/xebr.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/tsan.h"

struct xebr_class {
    struct xebr *x;
    size_t bytes;
};

struct xebr {
    struct cxl_region *r;
    struct ebr_domain *d;
    int host;
    bool leaking;                 /* closing: pending HWcc blocks are not freed */
    pthread_mutex_t class_mu;     /* serialises additions to classes */
    unsigned nclasses;            /* atomic: entries of classes that are filled in */
    struct xebr_class classes[XEBR_MAX_CLASSES];
    struct xebr_class unpoisoned; /* bytes = 0: too many distinct sizes */
    uint64_t hwcc_retired_bytes;  /* atomic */
    uint64_t hwcc_freed_bytes;    /* atomic */
    uint64_t leaked;              /* blocks not freed at close */
    char tsan_handover;           /* TSan: frees release it, allocations acquire it */
};

static void bad_worker(const struct xebr *x, int worker)
{
    pod_error("xebr: worker %d of host %d is outside 0..%d", worker, x->host,
              POD_MAX_WORKERS - 1);
    abort();
}

static inline int slot_of(const struct xebr *x, int worker)
{
    if ((unsigned)worker >= POD_MAX_WORKERS) bad_worker(x, worker);
    return xebr_slot(x->host, worker);
}

struct xebr *xebr_open(struct cxl_region *r, pod_err *err)
{
    if (!r || r->host < 0 || !r->ctl || !r->sb) {
        pod_err_set(err, "cross-host EBR needs a region attached as a host (not an observer)");
        return NULL;
    }
    uint32_t nhosts = r->sb->nhosts;
    if (nhosts < 1 || nhosts > POD_MAX_HOSTS || (uint32_t)r->host >= nhosts) {
        pod_err_set(err, "cross-host EBR: host %d is not in a pod of %u hosts", r->host, nhosts);
        return NULL;
    }
    struct xebr *x = calloc(1, sizeof *x);
    if (!x) {
        pod_err_set(err, "cross-host EBR: out of memory");
        return NULL;
    }
    x->r = r;
    x->host = r->host;
    x->unpoisoned.x = x;
    pthread_mutex_init(&x->class_mu, NULL);
    /* worker_epoch is [POD_MAX_HOSTS][POD_MAX_WORKERS] padded words: exactly
     * EBR_SLOT_BYTES apart, host-major, as xebr_slot numbers them. */
    _Static_assert(sizeof(struct cxl_padded_u64) == EBR_SLOT_BYTES, "slot layout");
    x->d = ebr_domain_new_ext((int)nhosts * POD_MAX_WORKERS, &r->ctl->worker_epoch[0][0],
                              &r->ctl->ebr_epoch.v);
    if (!x->d) {
        pthread_mutex_destroy(&x->class_mu);
        free(x);
        pod_err_set(err, "cross-host EBR: out of memory");
        return NULL;
    }
    /* This host id's previous holder (if any) is dead: its pins mean nothing. */
    for (int w = 0; w < POD_MAX_WORKERS; w++)
        __atomic_store_n(&r->ctl->worker_epoch[r->host][w].v, 0, __ATOMIC_SEQ_CST);
    return x;
}

void xebr_close(struct xebr *x, int drain_timeout_ms)
{
    if (!x) return;
    size_t left = 0;
    for (int w = 0; w < POD_MAX_WORKERS; w++) {
        int s = xebr_slot(x->host, w);
        if (ebr_active(x->d, s))
            pod_warn("xebr: closing while worker %d of host %d is in a critical section", w,
                     x->host);
        if (ebr_pending(x->d, s)) left += ebr_drain(x->d, s, drain_timeout_ms);
    }
    x->leaking = true;
    ebr_domain_free(x->d); /* runs the free functions of what is left: hwcc_free leaks */
    if (left)
        pod_warn("xebr: host %d closed with %zu retired objects still pending (another host is "
                 "in a critical section); %llu HWcc blocks left unfreed",
                 x->host, left, (unsigned long long)x->leaked);
    pthread_mutex_destroy(&x->class_mu);
    free(x);
}

struct cxl_region *xebr_region(const struct xebr *x)
{
    return x->r;
}

void xebr_enter(struct xebr *x, int worker)
{
    ebr_enter(x->d, slot_of(x, worker));
}

void xebr_exit(struct xebr *x, int worker)
{
    ebr_exit(x->d, slot_of(x, worker));
}

bool xebr_active(const struct xebr *x, int worker)
{
    return ebr_active(x->d, slot_of(x, worker)) != 0;
}

void xebr_retire(struct xebr *x, int worker, void *obj, void (*free_fn)(void *ctx, void *obj),
                 void *ctx)
{
    ebr_retire(x->d, slot_of(x, worker), obj, free_fn, ctx);
}

/* ---- HWcc blocks ---------------------------------------------------------- */

static void hwcc_free(void *ctx, void *obj)
{
    struct xebr_class *c = ctx;
    struct xebr *x = c->x;
    if (x->leaking) {
        x->leaked++;
        return;
    }
    /* No reader on any host can be inside obj any more: plain stores. */
    if (c->bytes) memset(obj, XEBR_POISON_BYTE, c->bytes);
    TSAN_RELEASE(&x->tsan_handover);
    cxl_free(x->r, CXL_HWCC, cxl_off_in(x->r, obj));
    __atomic_fetch_add(&x->hwcc_freed_bytes, c->bytes, __ATOMIC_RELAXED);
}

static struct xebr_class *class_for(struct xebr *x, size_t bytes)
{
    unsigned n = __atomic_load_n(&x->nclasses, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (x->classes[i].bytes == bytes) return &x->classes[i];
    pthread_mutex_lock(&x->class_mu);
    n = x->nclasses;
    struct xebr_class *c = NULL;
    for (unsigned i = 0; i < n && !c; i++)
        if (x->classes[i].bytes == bytes) c = &x->classes[i];
    if (!c && n < XEBR_MAX_CLASSES) {
        c = &x->classes[n];
        c->x = x;
        c->bytes = bytes;
        __atomic_store_n(&x->nclasses, n + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&x->class_mu);
    return c ? c : &x->unpoisoned;
}

void *xebr_alloc_hwcc(struct xebr *x, size_t bytes)
{
    cxl_off off = cxl_alloc(x->r, CXL_HWCC, bytes);
    if (off == CXL_NULL) return NULL;
    void *p = cxl_ptr(x->r, off);
    TSAN_ACQUIRE(&x->tsan_handover);
    memset(p, 0, bytes);
    return p;
}

void xebr_retire_hwcc(struct xebr *x, int worker, void *obj, size_t bytes)
{
    if (!obj) return;
    struct xebr_class *c = class_for(x, bytes);
    __atomic_fetch_add(&x->hwcc_retired_bytes, c->bytes, __ATOMIC_RELAXED);
    ebr_retire(x->d, slot_of(x, worker), obj, hwcc_free, c);
}

/* ---- collection and stats -------------------------------------------------- */

void xebr_collect(struct xebr *x, int worker)
{
    ebr_collect(x->d, slot_of(x, worker));
}

size_t xebr_drain(struct xebr *x, int worker, int timeout_ms)
{
    return ebr_drain(x->d, slot_of(x, worker), timeout_ms);
}

size_t xebr_pending(const struct xebr *x, int worker)
{
    return ebr_pending(x->d, slot_of(x, worker));
}

uint64_t xebr_epoch(const struct xebr *x)
{
    return ebr_epoch(x->d);
}

void xebr_get_stats(const struct xebr *x, struct xebr_stats *out)
{
    /* Only this host's slots have lists in this view, so the domain's sums
     * are this process's figures. */
    struct ebr_stats st;
    ebr_get_stats(x->d, &st);
    out->retired = st.retired;
    out->freed = st.freed;
    out->pending = st.pending;
    out->hwcc_retired_bytes = __atomic_load_n(&x->hwcc_retired_bytes, __ATOMIC_RELAXED);
    out->hwcc_freed_bytes = __atomic_load_n(&x->hwcc_freed_bytes, __ATOMIC_RELAXED);
    out->epoch = st.epoch;
}
