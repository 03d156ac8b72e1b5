/* Epoch-based reclamation: three-epoch scheme (Fraser 2004; Silo).
 *
 * State. G is the global epoch (one uint64_t, only ever increased by a CAS
 * from e to e+1). Slot i has an announcement word A[i] on its own cache line:
 * 0 when the slot is outside a critical section, else p+1 where p is the
 * value of G it read when it entered (its pinned epoch). Each slot also has a
 * private FIFO of retired entries (obj, free_fn, ctx, tag), where tag is the
 * value of G read by ebr_retire after the object was unlinked; tags in a FIFO
 * never decrease (G is monotonic and read by the same thread).
 *
 *   enter:   p = load(G); store(A[i], p+1)            -- both seq_cst
 *   exit:    store(A[i], 0)                            -- release
 *   retire:  fence(seq_cst); tag = load(G); append
 *   advance: e = load(G); if every A[j] is 0 or e+1: CAS(G, e, e+1)
 *   free:    pop entries with tag + 2 <= load(G)
 *
 * Invariant. If G >= tag+2, no reader that could have obtained a pointer to
 * the object is still inside the critical section in which it obtained it.
 *
 * Why. Let U be the unlink of object O (an atomic store/RMW by the caller on
 * the location readers load O's pointer from), F the seq_cst fence in
 * ebr_retire after U, and R_W its load of G, which read tag = e. Take any
 * reader whose pointer load P read O, i.e. a value older than U. In the single
 * total order S of seq_cst operations, P precedes F (had P followed F, the
 * fence rule would make P see U or later), so P <S F <S R_W <S CAS(G: e -> e+1)
 * (R_W read a value older than the CAS wrote). The reader entered with
 * load(G) = x, then store A = x+1, then P, all seq_cst, so its load of G
 * precedes R_W in S too and x <= e. For G to reach e+2, some thread must have
 * read G = e+1 (after the CAS e -> e+1 in S) and then scanned A[reader],
 * requiring it to be 0 or e+2. The reader's store A = x+1 precedes P, hence
 * precedes that scan in S, so the scan reads x+1 (<= e+1: the advance fails)
 * or a value the reader stored later, which it only does after exiting that
 * critical section. So G reaches e+2 only after every such reader has left.
 * A reader whose announcement the scan does not see stored it after the scan,
 * so its P follows U's fence and cannot return O. Nested enters keep the
 * outermost (older) pin, which is only more conservative.
 *
 * Happens-before for the free (what ThreadSanitizer checks): the reader's
 * reads of O precede its exit (release store to A); the advancer's scan
 * (acquire) reads that store or a later store of the same thread (an enter,
 * seq_cst, also release); the advancer's CAS (release) heads the chain of
 * CASes on G read by the freeing thread's acquire load of G. So the reads of O
 * happen before free_fn.
 *
 * A reader that reads G, stalls, and announces a stale epoch after G moved on
 * is still safe (the argument above only needs x <= e) and merely blocks the
 * next advance until it exits. A participant stuck inside a critical section
 * blocks all advancing, so nothing retired afterwards is freed (ebr_drain
 * times out) until it leaves.
 *
 * Cost. enter: a load of G and a seq_cst store to a private line (on x86
 * mov + mfence or xchg); exit: a plain store. Nothing is shared-written on
 * the read path except the slot's own line. retire: a fence, a load and an
 * append to a 4 KiB chunk (chunks are recycled). collect: one scan of the
 * announcement words plus at most one CAS on G (two when that lets the
 * slot's oldest entry go), then frees from the FIFO head. */
#include "storage/ebr.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>

#include "util/log.h"
#include "util/tsan.h"

struct ebr_entry {
    void *obj;
    void (*fn)(void *ctx, void *obj);
    void *ctx;
    uint64_t tag; /* G when retired */
};

#define EBR_CHUNK_BYTES 4096
#define EBR_CHUNK_ENTRIES ((EBR_CHUNK_BYTES - sizeof(void *)) / sizeof(struct ebr_entry))
#define EBR_MAX_SPARE 8 /* spare chunks kept per slot */

struct ebr_chunk {
    struct ebr_chunk *next;
    struct ebr_entry e[EBR_CHUNK_ENTRIES];
};

/* Private per-slot state; only its owner thread writes it. retired/freed are
 * also read by ebr_get_stats from other threads (atomic). */
struct ebr_local {
    unsigned nest;       /* critical-section nesting depth */
    unsigned exits;      /* outermost exits, for amortised collection */
    bool collecting;     /* inside ebr_collect (free_fn may re-enter) */
    struct ebr_chunk *head, *tail;  /* FIFO: pop at head[head_i], push at tail[tail_i] */
    size_t head_i, tail_i;
    struct ebr_chunk *spare;
    unsigned nspare;
    uint64_t retired, freed;        /* atomic (written by the owner only) */
    uint64_t collect_at;            /* collect from exit once pending reaches this */
} __attribute__((aligned(64)));

struct ebr_domain {
    uint64_t *global;    /* G: &own_global or external */
    char *slots;         /* nslots * EBR_SLOT_BYTES; A[i] at slots + i * EBR_SLOT_BYTES */
    struct ebr_local *local;
    int nslots;
    bool own_slots;
    /* Own G on a line of its own (the fields above are read-only after
     * creation and read by every thread). */
    uint64_t own_global __attribute__((aligned(64)));
    /* TSan: every exit releases it, every free acquires it first. G and
     * the slots may be shared with other processes (src/pod/xebr.c), whose
     * scan can be what ends a grace period: TSan, following one process,
     * then sees no edge from a reader of this process that exited to the
     * free, and reports the free as a race with the reader's last read
     * (test_pod_mp, 2 workers per host). The edge is what the invariant
     * above guarantees for every critical section that ended. */
    char tsan_exits;
};

static inline uint64_t *slot_word(const struct ebr_domain *d, int slot)
{
    return (uint64_t *)(d->slots + (size_t)slot * EBR_SLOT_BYTES);
}

static inline uint64_t local_pending(const struct ebr_local *l)
{
    return l->retired - l->freed; /* owner's own values */
}

/* ---- creation ---------------------------------------------------------------- */

static void *alloc_lines(size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

struct ebr_domain *ebr_domain_new_ext(int nslots, void *slots_mem, uint64_t *global)
{
    if (nslots <= 0) return NULL;
    struct ebr_domain *d = alloc_lines(sizeof *d);
    if (!d) return NULL;
    d->nslots = nslots;
    d->global = global ? global : &d->own_global;
    if (slots_mem) {
        d->slots = slots_mem;
    } else {
        d->slots = alloc_lines((size_t)nslots * EBR_SLOT_BYTES);
        d->own_slots = true;
    }
    d->local = alloc_lines((size_t)nslots * sizeof(struct ebr_local));
    if (!d->slots || !d->local) {
        if (d->own_slots) free(d->slots);
        free(d->local);
        free(d);
        return NULL;
    }
    for (int i = 0; i < nslots; i++) d->local[i].collect_at = EBR_COLLECT_PENDING;
    return d;
}

struct ebr_domain *ebr_domain_new_at(int nslots, void *slots_mem)
{
    return ebr_domain_new_ext(nslots, slots_mem, NULL);
}

struct ebr_domain *ebr_domain_new(int nslots)
{
    return ebr_domain_new_ext(nslots, NULL, NULL);
}

/* ---- retired FIFO ------------------------------------------------------------ */

static inline bool fifo_empty(const struct ebr_local *l)
{
    return l->head == l->tail && l->head_i == l->tail_i;
}

static struct ebr_chunk *chunk_get(struct ebr_local *l)
{
    struct ebr_chunk *c = l->spare;
    if (c) {
        l->spare = c->next;
        l->nspare--;
    } else {
        c = malloc(sizeof *c);
        if (!c) {
            pod_error("ebr: out of memory for a retired-list chunk");
            abort();
        }
    }
    c->next = NULL;
    return c;
}

static void chunk_put(struct ebr_local *l, struct ebr_chunk *c)
{
    if (l->nspare >= EBR_MAX_SPARE) {
        free(c);
        return;
    }
    c->next = l->spare;
    l->spare = c;
    l->nspare++;
}

static inline void fifo_push(struct ebr_local *l, const struct ebr_entry *e)
{
    if (!l->tail) {
        l->head = l->tail = chunk_get(l);
        l->head_i = l->tail_i = 0;
    } else if (l->tail_i == EBR_CHUNK_ENTRIES) {
        struct ebr_chunk *c = chunk_get(l);
        l->tail->next = c;
        l->tail = c;
        l->tail_i = 0;
    }
    l->tail->e[l->tail_i++] = *e;
}

/* Head entry; the FIFO must not be empty. */
static inline const struct ebr_entry *fifo_head(struct ebr_local *l)
{
    if (l->head_i == EBR_CHUNK_ENTRIES) { /* head chunk used up, head != tail */
        struct ebr_chunk *c = l->head;
        l->head = c->next;
        l->head_i = 0;
        chunk_put(l, c);
    }
    return &l->head->e[l->head_i];
}

static inline void fifo_pop(struct ebr_local *l)
{
    l->head_i++;
    if (l->head == l->tail && l->head_i == l->tail_i) l->head_i = l->tail_i = 0; /* reuse */
}

/* Pop the head and run its free_fn. The FIFO is consistent before the call,
 * so free_fn may retire more objects on this slot. */
static inline void free_head(struct ebr_domain *d, struct ebr_local *l)
{
    struct ebr_entry e = *fifo_head(l);
    fifo_pop(l);
    TSAN_ACQUIRE(&d->tsan_exits);
    e.fn(e.ctx, e.obj);
    __atomic_store_n(&l->freed, l->freed + 1, __ATOMIC_RELEASE);
}

/* ---- critical sections ----------------------------------------------------- */

void ebr_enter(struct ebr_domain *d, int slot)
{
    struct ebr_local *l = &d->local[slot];
    if (l->nest++ > 0) return;
    uint64_t p = __atomic_load_n(d->global, __ATOMIC_SEQ_CST);
    /* seq_cst: later reads of shared data cannot move before the announcement. */
    __atomic_store_n(slot_word(d, slot), p + 1, __ATOMIC_SEQ_CST);
}

void ebr_exit(struct ebr_domain *d, int slot)
{
    struct ebr_local *l = &d->local[slot];
    if (--l->nest > 0) return;
    TSAN_RELEASE(&d->tsan_exits);
    __atomic_store_n(slot_word(d, slot), 0, __ATOMIC_RELEASE);
    if (++l->exits % EBR_COLLECT_EVERY == 0 || local_pending(l) >= l->collect_at)
        ebr_collect(d, slot);
}

int ebr_active(const struct ebr_domain *d, int slot)
{
    return d->local[slot].nest > 0;
}

/* ---- retire / advance / free ----------------------------------------------- */

void ebr_retire(struct ebr_domain *d, int slot, void *obj,
                void (*free_fn)(void *ctx, void *obj), void *ctx)
{
    struct ebr_local *l = &d->local[slot];
    /* Order the caller's unlink (possibly a mere release store) before the read
     * of G; without it the unlink could become visible only after G moved on. */
#if defined(__SANITIZE_THREAD__)
    /* TSan rejects fences; a seq_cst RMW on G is a full barrier too (lock xadd
     * on x86) at the cost of writing G's line, acceptable in TSan builds. */
    uint64_t tag = __atomic_fetch_add(d->global, 0, __ATOMIC_SEQ_CST);
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t tag = __atomic_load_n(d->global, __ATOMIC_SEQ_CST);
#endif
    struct ebr_entry e = {.obj = obj, .fn = free_fn, .ctx = ctx, .tag = tag};
    fifo_push(l, &e);
    __atomic_store_n(&l->retired, l->retired + 1, __ATOMIC_RELAXED);
}

/* One attempt to move G from its current value e to e+1: succeeds when every
 * slot is inactive or pinned at e. Returns G as this thread now knows it. */
static uint64_t try_advance(struct ebr_domain *d)
{
    uint64_t e = __atomic_load_n(d->global, __ATOMIC_SEQ_CST);
    for (int i = 0; i < d->nslots; i++) {
        uint64_t a = __atomic_load_n(slot_word(d, i), __ATOMIC_SEQ_CST);
        if (a != 0 && a != e + 1) return e;
    }
    if (__atomic_compare_exchange_n(d->global, &e, e + 1, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        return e + 1;
    return e; /* someone else moved it: e was updated to the current value */
}

void ebr_collect(struct ebr_domain *d, int slot)
{
    struct ebr_local *l = &d->local[slot];
    if (l->collecting) return; /* called from a free_fn of this slot */
    l->collecting = true;

    uint64_t g = __atomic_load_n(d->global, __ATOMIC_ACQUIRE);
    if (fifo_empty(l)) {
        try_advance(d); /* nothing of ours; help the others along */
    } else {
        /* Up to two advances if that is what the oldest entry waits for. */
        for (int k = 0; k < 2 && fifo_head(l)->tag + 2 > g; k++) {
            uint64_t ng = try_advance(d);
            if (ng == g) break;
            g = ng;
        }
        /* Acquire load: synchronizes with the CAS that made it >= tag + 2. */
        g = __atomic_load_n(d->global, __ATOMIC_ACQUIRE);
        while (!fifo_empty(l) && fifo_head(l)->tag + 2 <= g) free_head(d, l);
    }
    l->collect_at = local_pending(l) + EBR_COLLECT_PENDING;
    l->collecting = false;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

size_t ebr_drain(struct ebr_domain *d, int slot, int timeout_ms)
{
    struct ebr_local *l = &d->local[slot];
    if (l->collecting) return (size_t)local_pending(l); /* from a free_fn: no waiting */
    uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    long sleep_ns = 1000;
    for (int round = 0;; round++) {
        ebr_collect(d, slot);
        if (fifo_empty(l) || timeout_ms == 0) break;
        if (timeout_ms > 0 && now_ns() >= deadline) break;
        if (round < 16) {
            sched_yield();
        } else {
            struct timespec ts = {0, sleep_ns};
            while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
            }
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
    }
    return (size_t)local_pending(l);
}

/* ---- teardown and stats ------------------------------------------------------ */

void ebr_domain_free(struct ebr_domain *d)
{
    if (!d) return;
    for (int i = 0; i < d->nslots; i++) {
        struct ebr_local *l = &d->local[i];
        if (l->nest) pod_warn("ebr: domain freed while slot %d is in a critical section", i);
        l->collecting = true; /* a free_fn calling back into this slot must not collect */
        while (l->tail && !fifo_empty(l)) free_head(d, l);
        for (struct ebr_chunk *c = l->head; c;) {
            struct ebr_chunk *n = c->next;
            free(c);
            c = n;
        }
        for (struct ebr_chunk *c = l->spare; c;) {
            struct ebr_chunk *n = c->next;
            free(c);
            c = n;
        }
    }
    if (d->own_slots) free(d->slots);
    free(d->local);
    free(d);
}

uint64_t ebr_epoch(const struct ebr_domain *d)
{
    return __atomic_load_n(d->global, __ATOMIC_ACQUIRE);
}

size_t ebr_pending(const struct ebr_domain *d, int slot)
{
    const struct ebr_local *l = &d->local[slot];
    /* freed first: freed <= retired at every instant, and retired only grows. */
    uint64_t f = __atomic_load_n(&l->freed, __ATOMIC_ACQUIRE);
    uint64_t r = __atomic_load_n(&l->retired, __ATOMIC_RELAXED);
    return (size_t)(r - f);
}

void ebr_get_stats(const struct ebr_domain *d, struct ebr_stats *out)
{
    uint64_t retired = 0, freed = 0;
    for (int i = 0; i < d->nslots; i++) {
        const struct ebr_local *l = &d->local[i];
        uint64_t f = __atomic_load_n(&l->freed, __ATOMIC_ACQUIRE);
        uint64_t r = __atomic_load_n(&l->retired, __ATOMIC_RELAXED);
        freed += f;
        retired += r;
    }
    out->retired = retired;
    out->freed = freed;
    out->pending = retired - freed;
    out->epoch = ebr_epoch(d);
}
