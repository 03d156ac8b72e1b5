/* Cross-host epoch-based reclamation over the CXL region's control block.
 *
 * One EBR domain for the whole pod (Tigon §3.6): the announcement slots are
 * r->ctl->worker_epoch (slot of worker w of host h = h * POD_MAX_WORKERS + w,
 * one 64-byte HWcc line each) and the global epoch is r->ctl->ebr_epoch. Every
 * host process makes its own view of that domain with xebr_open; retired
 * lists stay private to the process (and each slot's list to the thread using
 * that slot), so an object is always freed by the host that retired it, which
 * must be the host that owns its memory (only the owner may cxl_free).
 *
 * The rule is the three-epoch rule of src/storage/ebr.h, now across processes:
 * the global epoch advances only when every slot of every host is idle or
 * pinned at the current epoch, and an object retired at epoch e is freed once
 * the global epoch reaches e + 2. So a reader on any host that entered its
 * slot before an unlink keeps the unlinked memory readable until it exits.
 *
 * Protocol for readers of shared structures (e.g. a CXL index):
 *     xebr_enter(x, w); ...read...; xebr_exit(x, w);
 * and for the owner that unlinks an object:
 *     unlink it (atomic store), then xebr_retire / xebr_retire_hwcc.
 *
 * Threading: worker w's slot is used by one thread at a time (the worker
 * thread). Nesting of enter/exit on a slot only counts. ebr_* rules apply.
 *
 * Limits: a host that dies inside a critical section leaves its slot pinned
 * and the global epoch never moves again, so nothing is freed pod-wide until
 * the pod restarts (PodDB is fail-stop: a dead host restarts the pod). A
 * process that attaches as host h clears h's slots (the previous holder of
 * the id is dead). */
#ifndef PODDB_POD_XEBR_H
#define PODDB_POD_XEBR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cxl/region.h"
#include "storage/ebr.h"
#include "util/err.h"

/* Byte written over HWcc memory freed through xebr_retire_hwcc before it goes
 * back to the allocator. Bits 0 and 1 are clear, so a poisoned B+-tree node
 * reads as an unlocked, live node holding keys and values 0xA4A4...: a reader
 * that (through an EBR bug) reads freed memory gets garbage that its checks
 * can see, instead of silently restarting on an "obsolete" node. */
#define XEBR_POISON_BYTE 0xA4

struct xebr;

/* The slot index of worker w of host h. */
static inline int xebr_slot(int host, int worker)
{
    return host * POD_MAX_WORKERS + worker;
}

/* This process's view of the pod's EBR domain. r must be attached as a host
 * (r->host >= 0). Clears this host's announcement slots, so call it once per
 * host process, before any worker of this host runs. NULL with err set on
 * failure. */
struct xebr *xebr_open(struct cxl_region *r, pod_err *err);
/* Drain what this host's slots retired (waiting up to drain_timeout_ms for
 * other hosts to leave their critical sections), then free the view. What is
 * still pending after that is NOT freed (another host may still be reading
 * it): it is leaked and logged; the slice is zeroed when the host id is next
 * attached. No thread of this process may use the view any more. Must run
 * before cxl_region_close. NULL is a no-op. */
void xebr_close(struct xebr *x, int drain_timeout_ms);

struct cxl_region *xebr_region(const struct xebr *x);

/* Critical sections of worker w (0..POD_MAX_WORKERS-1) of this host. */
void xebr_enter(struct xebr *x, int worker);
void xebr_exit(struct xebr *x, int worker);
bool xebr_active(const struct xebr *x, int worker);

/* Retire obj: free_fn(ctx, obj) runs on this process, from an exit/collect/
 * drain of the same worker, once no reader on any host can still hold it
 * (or from xebr_close for what is still pending then: free_fn decides). */
void xebr_retire(struct xebr *x, int worker, void *obj, void (*free_fn)(void *ctx, void *obj),
                 void *ctx);
/* A zeroed block of `bytes` bytes in this host's HWcc slice (cxl_alloc), for
 * an object that will be freed through xebr_retire_hwcc; NULL when the HWcc
 * budget or the slice is exhausted. Same as cxl_zalloc, except that under
 * ThreadSanitizer it tells TSan that a block freed by one thread and reused
 * by another was handed over (mimalloc, which does that, is not
 * instrumented). Any thread of this host. */
void *xebr_alloc_hwcc(struct xebr *x, size_t bytes);

/* Retire a block of this host's HWcc slice (from cxl_alloc/cxl_zalloc) of
 * `bytes` bytes: when safe, it is overwritten with XEBR_POISON_BYTE and
 * cxl_free'd. A view knows at most XEBR_MAX_CLASSES distinct sizes; blocks of
 * further sizes are freed without poisoning. */
#define XEBR_MAX_CLASSES 16
void xebr_retire_hwcc(struct xebr *x, int worker, void *obj, size_t bytes);

/* Try to advance the global epoch and free what is safe on w's list. */
void xebr_collect(struct xebr *x, int worker);
/* Advance/free until w's list is empty or timeout_ms passes (0: one try,
 * < 0: forever). Returns how many of w's objects are still pending. Call it
 * outside a critical section of w. */
size_t xebr_drain(struct xebr *x, int worker, int timeout_ms);
size_t xebr_pending(const struct xebr *x, int worker);

struct xebr_stats {
    uint64_t retired, freed, pending; /* objects, this process's slots */
    uint64_t hwcc_retired_bytes;      /* bytes passed to xebr_retire_hwcc */
    uint64_t hwcc_freed_bytes;        /* ... of which freed so far */
    uint64_t epoch;                   /* the pod-wide global epoch */
};
void xebr_get_stats(const struct xebr *x, struct xebr_stats *out);
uint64_t xebr_epoch(const struct xebr *x);

#endif
