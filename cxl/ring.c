/* Inbox rings and reply slots over the shared region (cxl/ring.h,
 * docs/transport.md).
 *
 * Ring: Dmitry Vyukov's bounded MPMC queue, split across the two kinds of
 * memory. In HWcc memory: the producers' claim counter (tail), the consumers'
 * read position (head) and one sequence word per slot; in SWcc memory: the
 * 256-byte slots. Slot i at position p (i = p mod n) is
 *   free for the producer of position p     when seq[i] == p,
 *   ready for the consumer of position p    when seq[i] == p + 1,
 * and the consumer frees it for the next lap with seq[i] = p + n. Positions are
 * 64-bit and compared by signed difference, so even a wrap of the counters is
 * handled. A producer claims position p with a CAS on tail (after seeing the
 * slot free), writes the slot through the SWcc view, writes it back and then
 * publishes seq = p + 1 with a release store; a consumer sees p + 1 with an
 * acquire load, claims p with a CAS on head (several threads of the owner may
 * poll), flushes the slot's lines, reads, and releases the slot. The per-slot
 * sequence makes slot reuse safe (no ABA: a stale producer or consumer sees a
 * sequence of another lap and backs off) and gives backpressure for free (the
 * slot of position p is not free until position p - n was consumed).
 *
 * Reply slot: one 64-bit state word per worker in HWcc, (id << 2) | phase,
 * phase IDLE -> ARMED (the requester, before sending request id) -> WRITING
 * (the replier, by CAS from ARMED with the same id) -> READY (release store
 * after the payload's write-back) -> IDLE (the requester, after reading). A
 * requester that gives up moves ARMED back to IDLE by CAS, so a late reply
 * loses its CAS and is dropped instead of overwriting a newer one. */
#include "cxl/ring.h"
#include "util/cpu.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define RING_MAGIC 0x474e495242444f50ull   /* "PODBRING" */
#define REPLY_MAGIC 0x504c505242444f50ull  /* "PODBRPLP" */
#define CLOSED_MAGIC 0x44534f4c43444f50ull /* "PODCLOSD" */

/* ---- shared layout (HWcc) ------------------------------------------------ */

struct ring_hdr {
    /* line 0: read-mostly, written once before publication */
    uint64_t magic;       /* RING_MAGIC while open (atomic) */
    uint64_t incarnation; /* unique per create: a recreated ring at the same offset differs */
    uint32_t nslots;
    uint32_t slot_size;
    cxl_off slots;        /* SWcc: nslots * CXL_MSG_SLOT, 64-byte aligned */
    uint8_t pad0[32];
    /* line 1: producers */
    uint64_t tail __attribute__((aligned(CXL_CACHELINE)));
    /* line 2: consumers */
    uint64_t head __attribute__((aligned(CXL_CACHELINE)));
    /* line 3: the doorbell (cxl_ring_sleep): owner threads asleep, and a
     * futex word senders bump and wake when some are. Written only around
     * sleeps, so a busy pod's senders only read it. */
    uint32_t sleepers __attribute__((aligned(CXL_CACHELINE)));
    uint32_t doorbell;
    /* lines 4..: one sequence word per slot */
    uint64_t seq[] __attribute__((aligned(CXL_CACHELINE)));
};

struct reply_hdr {
    uint64_t magic;
    uint64_t incarnation;
    uint32_t nworkers;
    uint32_t slot_size;
    cxl_off slots; /* SWcc: nworkers * CXL_MSG_SLOT, 64-byte aligned */
    cxl_off doorbell; /* HWcc: the header of the ring whose doorbell waiters
                       * sleep on (cxl_reply_area_doorbell), or CXL_NULL */
} __attribute__((aligned(CXL_CACHELINE)));

/* One per worker, alone on its cache line: the worker spins on it. */
struct reply_state {
    uint64_t v;
} __attribute__((aligned(CXL_CACHELINE)));

enum { PH_IDLE = 0, PH_ARMED = 1, PH_WRITING = 2, PH_READY = 3 };
#define ST(id, ph) (((id) << 2) | (uint64_t)(ph))
#define ST_ID(s) ((s) >> 2)
#define ST_PH(s) ((unsigned)((s) & 3))

/* ---- process-local handles --------------------------------------------- */

struct cxl_ring {
    struct cxl_region *r;
    int host;             /* the ring's owner */
    bool own;             /* this handle belongs to the owner (may poll) */
    uint32_t mask;
    uint64_t incarnation;
    cxl_off hdr_off;
    struct ring_hdr *hdr;
    char *slots;
};

struct cxl_replies {
    struct cxl_region *r;
    unsigned nworkers;
    cxl_off hdr_off;
    struct reply_hdr *hdr;
    struct reply_state *state;
    char *slots;
    struct cxl_ring *inbox; /* waiters sleep on its doorbell, or NULL */
};

const char *cxl_ring_strerror(int rc)
{
    switch (rc) {
    case CXL_RING_OK: return "ok";
    case CXL_RING_EMPTY: return "ring empty";
    case CXL_RING_FULL: return "ring full";
    case CXL_RING_TIMEOUT: return "timed out waiting for a reply";
    case CXL_RING_STALE: return "nobody waits for this reply any more";
    case CXL_RING_TOOBIG: return "message longer than 240 bytes";
    case CXL_RING_GONE: return "the ring or reply area is closed or its host restarted";
    case CXL_RING_DEAD: return "the other host is not alive";
    case CXL_RING_INVAL: return "invalid argument";
    case CXL_RING_CORRUPT: return "corrupt message slot";
    default: return "unknown ring status";
    }
}
_Static_assert(CXL_MSG_MAX == 240, "update cxl_ring_strerror");

/* ---- helpers ------------------------------------------------------------- */


/* A hardware full fence (MFENCE on x86; ThreadSanitizer rejects
 * __atomic_thread_fence, and the fence orders cache-line flushes, which TSan
 * does not model anyway). */
static inline void full_fence(void)
{
#if defined(__x86_64__)
    _mm_mfence();
#elif !defined(__SANITIZE_THREAD__)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Unique enough per create: time, pid and a process-local counter. */
static uint64_t new_incarnation(void)
{
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t v = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    v ^= (uint64_t)getpid() << 40;
    v += __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ull;
    return v ? v : 1;
}

/* Allocate len bytes at a 64-byte aligned offset that owns all its cache
 * lines (SWcc lines are written back whole, so a line must never be shared
 * with another object). */
static cxl_off alloc_lines(struct cxl_region *r, enum cxl_area a, size_t len)
{
    cxl_off raw = cxl_zalloc(r, a, len + CXL_CACHELINE);
    if (raw == CXL_NULL) return CXL_NULL;
    return (raw + CXL_CACHELINE - 1) & ~(cxl_off)(CXL_CACHELINE - 1);
}

static int check_host(struct cxl_region *r, const char *what, pod_err *err)
{
    if (r == NULL || r->host < 0) {
        pod_err_set(err, "cannot create %s: the region is not attached as a host (an "
                         "observer cannot own a ring)",
                    what);
        return -1;
    }
    return 0;
}

/* Is [off, off+len) inside host's slice of area a? */
static bool in_slice(const struct cxl_region *r, cxl_off off, uint64_t len, int host,
                     enum cxl_area a)
{
    enum cxl_area got;
    if (off == CXL_NULL || cxl_owner_of(r, off, &got) != host || got != a) return false;
    if (len == 0) return true;
    enum cxl_area got2;
    return cxl_owner_of(r, off + len - 1, &got2) == host && got2 == a;
}

/* Write a message into a slot through the SWcc view and write it back. */
static void slot_write(struct cxl_region *r, char *slot, const struct cxl_msg *m)
{
    struct cxl_msg h;
    memcpy(&h, m, CXL_MSG_HDR);
    h.from_host = (uint16_t)r->host;
    cxl_swcc_write(&r->swcc, slot, &h, CXL_MSG_HDR);
    cxl_swcc_write(&r->swcc, slot + CXL_MSG_HDR, m->data, m->len);
    cxl_swcc_writeback(&r->swcc, slot, CXL_MSG_HDR + (size_t)m->len);
}

/* Flush-before-read a slot into *out. The whole slot (4 lines) is flushed in
 * one call, before the length is known: flushing the header line, reading the
 * length and then flushing the payload's lines costs a second fence, which
 * measured slower (2.1 us instead of 1.45 us per round trip with 64-byte
 * payloads, docs/transport.md). Returns CXL_RING_CORRUPT on an impossible
 * length. */
static int slot_read(struct cxl_region *r, const char *slot, struct cxl_msg *out)
{
    /* The flush must not start before the load that saw the slot published
     * (clflushopt is not ordered with older loads of other lines; a line
     * fetched before that load could be stale): a full fence. */
    if (!r->swcc.sim) full_fence();
    cxl_swcc_flush(&r->swcc, slot, CXL_MSG_SLOT);
    cxl_swcc_read(&r->swcc, out, slot, CXL_MSG_HDR);
    if (out->len > CXL_MSG_MAX) return CXL_RING_CORRUPT;
    cxl_swcc_read(&r->swcc, out->data, slot + CXL_MSG_HDR, out->len);
    return CXL_RING_OK;
}

/* ---- rings ---------------------------------------------------------------- */

static size_t ring_hdr_size(unsigned nslots)
{
    return sizeof(struct ring_hdr) + (size_t)nslots * sizeof(uint64_t);
}

struct cxl_ring *cxl_ring_create(struct cxl_region *r, unsigned nslots, pod_err *err)
{
    if (check_host(r, "an inbox ring", err)) return NULL;
    if (nslots < CXL_RING_MIN_SLOTS || nslots > CXL_RING_MAX_SLOTS || (nslots & (nslots - 1))) {
        pod_err_set(err, "ring size %u is invalid: it must be a power of two between %u and %u",
                    nslots, CXL_RING_MIN_SLOTS, CXL_RING_MAX_SLOTS);
        return NULL;
    }
    struct cxl_ring *ring = calloc(1, sizeof *ring);
    if (!ring) {
        pod_err_set(err, "out of memory for a ring handle");
        return NULL;
    }
    cxl_off hoff = alloc_lines(r, CXL_HWCC, ring_hdr_size(nslots));
    if (hoff == CXL_NULL) {
        pod_err_set(err, "host %d cannot allocate %zu bytes of HWcc memory for its %u-slot inbox "
                         "ring: its HWcc quota (%llu bytes) is used up",
                    r->host, ring_hdr_size(nslots) + CXL_CACHELINE, nslots,
                    (unsigned long long)r->sb->hwcc_quota);
        free(ring);
        return NULL;
    }
    cxl_off soff = alloc_lines(r, CXL_SWCC, (size_t)nslots * CXL_MSG_SLOT);
    if (soff == CXL_NULL) {
        pod_err_set(err, "host %d cannot allocate %zu bytes of SWcc memory for its %u ring slots",
                    r->host, (size_t)nslots * CXL_MSG_SLOT + CXL_CACHELINE, nslots);
        free(ring);
        return NULL; /* the header stays allocated: harmless, and freed at re-attach */
    }
    struct ring_hdr *h = cxl_ptr(r, hoff);
    h->incarnation = new_incarnation();
    h->nslots = nslots;
    h->slot_size = CXL_MSG_SLOT;
    h->slots = soff;
    __atomic_store_n(&h->tail, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->head, 0, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < nslots; i++) __atomic_store_n(&h->seq[i], i, __ATOMIC_RELAXED);
    __atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);

    *ring = (struct cxl_ring){.r = r, .host = r->host, .own = true, .mask = nslots - 1,
                              .incarnation = h->incarnation, .hdr_off = hoff, .hdr = h,
                              .slots = cxl_ptr(r, soff)};
    cxl_root_publish(r, CXL_ROOT_RING, hoff);
    return ring;
}

struct cxl_ring *cxl_ring_attach(struct cxl_region *r, int host, int timeout_ms, pod_err *err)
{
    if (r == NULL || host < 0 || host >= (int)r->sb->nhosts) {
        pod_err_set(err, "cannot attach to the inbox of host %d: the pod has hosts 0..%d", host,
                    r ? (int)r->sb->nhosts - 1 : -1);
        return NULL;
    }
    uint64_t deadline = now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    cxl_off hoff;
    struct timespec nap = {0, 200 * 1000};
    for (;;) {
        hoff = cxl_root_get(r, host, CXL_ROOT_RING);
        if (hoff != CXL_NULL) {
            const struct ring_hdr *h = cxl_ptr(r, hoff);
            if (in_slice(r, hoff, sizeof *h, host, CXL_HWCC) &&
                __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == RING_MAGIC)
                break;
        }
        if (now_ns() >= deadline) {
            if (!cxl_host_alive(r, host))
                pod_err_set(err, "host %d has no inbox ring: host %d is not alive", host, host);
            else
                pod_err_set(err, "host %d is alive but did not publish its inbox ring within "
                                 "%d ms",
                            host, timeout_ms);
            return NULL;
        }
        nanosleep(&nap, NULL);
    }
    struct ring_hdr *h = cxl_ptr(r, hoff);
    uint32_t n = h->nslots;
    if (n < CXL_RING_MIN_SLOTS || n > CXL_RING_MAX_SLOTS || (n & (n - 1)) ||
        h->slot_size != CXL_MSG_SLOT ||
        !in_slice(r, hoff, ring_hdr_size(n), host, CXL_HWCC) ||
        !in_slice(r, h->slots, (uint64_t)n * CXL_MSG_SLOT, host, CXL_SWCC) ||
        (h->slots & (CXL_CACHELINE - 1))) {
        pod_err_set(err, "host %d's inbox ring at offset %#llx is malformed (%u slots of %u "
                         "bytes at %#llx)",
                    host, (unsigned long long)hoff, n, h->slot_size,
                    (unsigned long long)h->slots);
        return NULL;
    }
    struct cxl_ring *ring = calloc(1, sizeof *ring);
    if (!ring) {
        pod_err_set(err, "out of memory for a ring handle");
        return NULL;
    }
    *ring = (struct cxl_ring){.r = r, .host = host, .own = false, .mask = n - 1,
                              .incarnation = h->incarnation, .hdr_off = hoff, .hdr = h,
                              .slots = cxl_ptr(r, h->slots)};
    return ring;
}

void cxl_ring_close(struct cxl_ring *ring)
{
    if (!ring) return;
    if (ring->own) {
        if (cxl_root_get(ring->r, ring->host, CXL_ROOT_RING) == ring->hdr_off)
            cxl_root_publish(ring->r, CXL_ROOT_RING, CXL_NULL);
        __atomic_store_n(&ring->hdr->magic, CLOSED_MAGIC, __ATOMIC_RELEASE);
    }
    free(ring);
}

unsigned cxl_ring_nslots(const struct cxl_ring *ring) { return ring->mask + 1; }

uint64_t cxl_ring_head(const struct cxl_ring *ring)
{
    return __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
}

const void *cxl_ring_slot_addr(const struct cxl_ring *ring, uint64_t pos)
{
    return ring->slots + (size_t)(pos & ring->mask) * CXL_MSG_SLOT;
}

static void ring_doorbell(struct ring_hdr *h);

int cxl_ring_send(struct cxl_ring *ring, const struct cxl_msg *m)
{
    if (m->len > CXL_MSG_MAX) return CXL_RING_TOOBIG;
    if (ring->r->host < 0) return CXL_RING_INVAL; /* an observer has no host id to reply to */
    struct ring_hdr *h = ring->hdr;
    /* The owner closed it or restarted (its slices were reset; a new ring may
     * sit at the same offset): never write into it. */
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != RING_MAGIC ||
        __atomic_load_n(&h->incarnation, __ATOMIC_RELAXED) != ring->incarnation)
        return CXL_RING_GONE;
    uint64_t pos = __atomic_load_n(&h->tail, __ATOMIC_RELAXED);
    uint64_t *seqw;
    for (;;) {
        seqw = &h->seq[pos & ring->mask];
        uint64_t seq = __atomic_load_n(seqw, __ATOMIC_ACQUIRE);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&h->tail, &pos, pos + 1, true, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
            /* pos now holds the current tail: retry there */
        } else if (dif < 0) {
            /* the slot still holds the message of position pos - n */
            return CXL_RING_FULL;
        } else {
            /* another producer took pos: catch up */
            pos = __atomic_load_n(&h->tail, __ATOMIC_RELAXED);
        }
    }
    slot_write(ring->r, ring->slots + (size_t)(pos & ring->mask) * CXL_MSG_SLOT, m);
    /* Publish with a full barrier (an exchange), then look for sleepers: a
     * sleeper counts itself before it looks at the ring (cxl_ring_sleep), so
     * one of the two sees the other. */
    __atomic_exchange_n(seqw, pos + 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->sleepers, __ATOMIC_SEQ_CST)) ring_doorbell(h);
    return CXL_RING_OK;
}

/* ---- sleeping on the doorbell --------------------------------------------- */

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE: the word is in a shared mapping, and the threads of
     * every host process on this kernel meet on it. */
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static void ring_doorbell(struct ring_hdr *h)
{
    __atomic_fetch_add(&h->doorbell, 1, __ATOMIC_SEQ_CST);
    futex(&h->doorbell, FUTEX_WAKE, INT32_MAX, NULL);
}

void cxl_ring_wake(struct cxl_ring *ring)
{
    struct ring_hdr *h = ring->hdr;
    full_fence(); /* whatever the caller published first is seen by a sleeper */
    if (__atomic_load_n(&h->sleepers, __ATOMIC_SEQ_CST)) ring_doorbell(h);
}

/* A message is published at the head (or being claimed by a poller). */
static bool ring_nonempty(const struct cxl_ring *own)
{
    const struct ring_hdr *h = own->hdr;
    uint64_t pos = __atomic_load_n(&h->head, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&h->seq[pos & own->mask], __ATOMIC_SEQ_CST) == pos + 1;
}

bool cxl_ring_sleep(struct cxl_ring *own, uint64_t timeout_ns, bool (*has_work)(void *arg),
                    void *arg)
{
    if (!own->own) return false;
    struct ring_hdr *h = own->hdr;
    __atomic_fetch_add(&h->sleepers, 1, __ATOMIC_SEQ_CST);
    uint32_t bell = __atomic_load_n(&h->doorbell, __ATOMIC_SEQ_CST);
    bool slept = false;
    if (!ring_nonempty(own) && !(has_work && has_work(arg))) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000ull),
                              (long)(timeout_ns % 1000000000ull)};
        futex(&h->doorbell, FUTEX_WAIT, bell, &ts); /* EAGAIN: rung meanwhile */
        slept = true;
    }
    __atomic_fetch_sub(&h->sleepers, 1, __ATOMIC_SEQ_CST);
    return slept;
}

int cxl_ring_poll(struct cxl_ring *own, struct cxl_msg *out)
{
    if (!own->own) return CXL_RING_INVAL;
    struct ring_hdr *h = own->hdr;
    uint64_t pos = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
    uint64_t *seqw;
    for (;;) {
        seqw = &h->seq[pos & own->mask];
        uint64_t seq = __atomic_load_n(seqw, __ATOMIC_ACQUIRE);
        int64_t dif = (int64_t)(seq - (pos + 1));
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&h->head, &pos, pos + 1, true, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (dif < 0) {
            return CXL_RING_EMPTY; /* not yet published (or not yet claimed) */
        } else {
            pos = __atomic_load_n(&h->head, __ATOMIC_RELAXED); /* another poller took it */
        }
    }
    int rc = slot_read(own->r, own->slots + (size_t)(pos & own->mask) * CXL_MSG_SLOT, out);
    /* Free the slot for the producer of position pos + n (also after a corrupt
     * slot: one bad message must not stall the ring). */
    __atomic_store_n(seqw, pos + own->mask + 1, __ATOMIC_RELEASE);
    return rc;
}

/* ---- reply slots ------------------------------------------------------------ */

struct cxl_replies *cxl_reply_area_create(struct cxl_region *r, unsigned nworkers, pod_err *err)
{
    if (check_host(r, "a reply area", err)) return NULL;
    if (nworkers < 1 || nworkers > CXL_REPLY_MAX_WORKERS) {
        pod_err_set(err, "a reply area needs 1..%u worker slots, not %u", CXL_REPLY_MAX_WORKERS,
                    nworkers);
        return NULL;
    }
    struct cxl_replies *ra = calloc(1, sizeof *ra);
    if (!ra) {
        pod_err_set(err, "out of memory for a reply area handle");
        return NULL;
    }
    size_t hlen = sizeof(struct reply_hdr) + (size_t)nworkers * sizeof(struct reply_state);
    cxl_off hoff = alloc_lines(r, CXL_HWCC, hlen);
    if (hoff == CXL_NULL) {
        pod_err_set(err, "host %d cannot allocate %zu bytes of HWcc memory for %u reply slots: "
                         "its HWcc quota (%llu bytes) is used up",
                    r->host, hlen + CXL_CACHELINE, nworkers,
                    (unsigned long long)r->sb->hwcc_quota);
        free(ra);
        return NULL;
    }
    cxl_off soff = alloc_lines(r, CXL_SWCC, (size_t)nworkers * CXL_MSG_SLOT);
    if (soff == CXL_NULL) {
        pod_err_set(err, "host %d cannot allocate %zu bytes of SWcc memory for %u reply slots",
                    r->host, (size_t)nworkers * CXL_MSG_SLOT + CXL_CACHELINE, nworkers);
        free(ra);
        return NULL;
    }
    struct reply_hdr *h = cxl_ptr(r, hoff);
    h->incarnation = new_incarnation();
    h->nworkers = nworkers;
    h->slot_size = CXL_MSG_SLOT;
    h->slots = soff;
    /* Request ids start at a random point of their 62-bit space, so a late
     * reply meant for this host's previous incarnation (before a restart)
     * cannot match a new request's id. */
    uint64_t first = (h->incarnation * 0x9e3779b97f4a7c15ull) >> 3;
    struct reply_state *st = (struct reply_state *)(h + 1);
    for (unsigned w = 0; w < nworkers; w++)
        __atomic_store_n(&st[w].v, ST(first, PH_IDLE), __ATOMIC_RELAXED);
    __atomic_store_n(&h->magic, REPLY_MAGIC, __ATOMIC_RELEASE);
    *ra = (struct cxl_replies){.r = r, .nworkers = nworkers, .hdr_off = hoff, .hdr = h,
                               .state = st, .slots = cxl_ptr(r, soff)};
    cxl_root_publish(r, CXL_ROOT_REPLY, hoff);
    return ra;
}

void cxl_reply_area_close(struct cxl_replies *ra)
{
    if (!ra) return;
    if (cxl_root_get(ra->r, ra->r->host, CXL_ROOT_REPLY) == ra->hdr_off)
        cxl_root_publish(ra->r, CXL_ROOT_REPLY, CXL_NULL);
    __atomic_store_n(&ra->hdr->magic, CLOSED_MAGIC, __ATOMIC_RELEASE);
    free(ra);
}

uint64_t cxl_reply_arm(struct cxl_replies *ra, unsigned worker)
{
    if (worker >= ra->nworkers) return 0;
    uint64_t *w = &ra->state[worker].v;
    uint64_t s = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    for (;;) {
        if (ST_PH(s) == PH_WRITING) return 0; /* a replier is writing: wait for it first */
        uint64_t id = ST_ID(s) + 1;
        if (id >= (UINT64_C(1) << 62)) id = 1; /* 62-bit ids; never 0 */
        /* CAS, not a store: a replier may move ARMED to WRITING meanwhile. */
        if (__atomic_compare_exchange_n(w, &s, ST(id, PH_ARMED), false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return id;
    }
}

int cxl_reply_post(struct cxl_region *r, int to_host, unsigned to_worker, const struct cxl_msg *m)
{
    if (m->len > CXL_MSG_MAX) return CXL_RING_TOOBIG;
    if (r->host < 0) return CXL_RING_INVAL;
    if (to_host < 0 || to_host >= (int)r->sb->nhosts) return CXL_RING_INVAL;
    cxl_off hoff = cxl_root_get(r, to_host, CXL_ROOT_REPLY);
    if (hoff == CXL_NULL || !in_slice(r, hoff, sizeof(struct reply_hdr), to_host, CXL_HWCC))
        return CXL_RING_GONE;
    struct reply_hdr *h = cxl_ptr(r, hoff);
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != REPLY_MAGIC) return CXL_RING_GONE;
    uint32_t n = h->nworkers;
    if (to_worker >= n) return CXL_RING_INVAL;
    if (!in_slice(r, h->slots, (uint64_t)n * CXL_MSG_SLOT, to_host, CXL_SWCC)) return CXL_RING_GONE;
    uint64_t id = m->req_id & ((UINT64_C(1) << 62) - 1);
    if (id != m->req_id || id == 0) return CXL_RING_STALE; /* no arm ever gave this id */
    uint64_t *w = &((struct reply_state *)(h + 1))[to_worker].v;
    uint64_t expect = ST(id, PH_ARMED);
    if (!__atomic_compare_exchange_n(w, &expect, ST(id, PH_WRITING), false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return CXL_RING_STALE;
    slot_write(r, (char *)cxl_ptr(r, h->slots) + (size_t)to_worker * CXL_MSG_SLOT, m);
    /* A CAS, not a store: if the requester took the slot back (it judged this
     * host dead), the reply must not overwrite its newer state. */
    expect = ST(id, PH_WRITING);
    if (!__atomic_compare_exchange_n(w, &expect, ST(id, PH_READY), false, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED))
        return CXL_RING_STALE;
    /* The requester may sleep on its inbox's doorbell: the CAS above is
     * ordered before the look at its sleepers (cxl_ring_sleep counts itself
     * before it looks at the slot). */
    cxl_off bell = __atomic_load_n(&h->doorbell, __ATOMIC_ACQUIRE);
    if (bell != CXL_NULL && in_slice(r, bell, sizeof(struct ring_hdr), to_host, CXL_HWCC)) {
        struct ring_hdr *rh = cxl_ptr(r, bell);
        full_fence();
        if (__atomic_load_n(&rh->sleepers, __ATOMIC_SEQ_CST)) ring_doorbell(rh);
    }
    return CXL_RING_OK;
}

void cxl_reply_area_doorbell(struct cxl_replies *ra, struct cxl_ring *inbox)
{
    ra->inbox = inbox && inbox->own && inbox->host == ra->r->host ? inbox : NULL;
    __atomic_store_n(&ra->hdr->doorbell, ra->inbox ? ra->inbox->hdr_off : CXL_NULL,
                     __ATOMIC_RELEASE);
}

#define SPIN_NS (20ull * 1000)        /* busy-poll this long */
#define YIELD_NS (1000ull * 1000)      /* then yield the CPU until this long */
#define NAP_NS (20 * 1000)             /* then sleep this long between checks */
#define DOZE_NS (1000ull * 1000)       /* or sleep on the doorbell at most this long */

struct reply_watch {
    const uint64_t *w;
    uint64_t armed;
};

/* The reply is being written or is there (the slot left ARMED). */
static bool reply_moved(void *arg)
{
    const struct reply_watch *rw = arg;
    return __atomic_load_n(rw->w, __ATOMIC_SEQ_CST) != rw->armed;
}
#define ALIVE_FIRST_NS (1000ull * 1000)
#define ALIVE_EVERY_NS (5000ull * 1000)

int cxl_reply_wait(struct cxl_replies *ra, unsigned worker, uint64_t id, int from_host,
                   int timeout_us, struct cxl_msg *out, cxl_poll_fn *poll, void *poll_arg,
                   pod_err *err)
{
    if (worker >= ra->nworkers) {
        pod_err_set(err, "worker %u has no reply slot: host %d's reply area has %u", worker,
                    ra->r->host, ra->nworkers);
        return CXL_RING_INVAL;
    }
    if (from_host < 0 || from_host >= (int)ra->r->sb->nhosts) {
        pod_err_set(err, "cannot wait for a reply from host %d: the pod has hosts 0..%u",
                    from_host, ra->r->sb->nhosts - 1);
        return CXL_RING_INVAL;
    }
    uint64_t *w = &ra->state[worker].v;
    uint64_t t0 = now_ns();
    uint64_t deadline = t0 + (uint64_t)(timeout_us > 0 ? timeout_us : 0) * 1000ull;
    uint64_t next_alive = t0 + ALIVE_FIRST_NS;
    for (uint64_t now = t0;;) {
        uint64_t s = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (ST_ID(s) != id || ST_PH(s) == PH_IDLE) {
            pod_err_set(err, "worker %u of host %d is not waiting for request %llu (its slot is "
                             "at request %llu, %s); arm the slot before sending",
                        worker, ra->r->host, (unsigned long long)id,
                        (unsigned long long)ST_ID(s), ST_PH(s) == PH_IDLE ? "idle" : "busy");
            return CXL_RING_INVAL;
        }
        if (ST_PH(s) == PH_READY) {
            int rc = slot_read(ra->r, ra->slots + (size_t)worker * CXL_MSG_SLOT, out);
            __atomic_store_n(w, ST(id, PH_IDLE), __ATOMIC_RELEASE);
            if (rc == CXL_RING_OK && out->req_id != id) rc = CXL_RING_CORRUPT;
            if (rc != CXL_RING_OK)
                pod_err_set(err, "the reply to request %llu in worker %u's slot is corrupt "
                                 "(length %u, request id %llu)",
                            (unsigned long long)id, worker, out->len,
                            (unsigned long long)out->req_id);
            return rc;
        }
        /* ARMED, or WRITING: the reply is being written. */
        if (now >= deadline && ST_PH(s) == PH_ARMED) {
            if (__atomic_compare_exchange_n(w, &s, ST(id, PH_IDLE), false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                pod_err_set(err, "no reply to request %llu (worker %u of host %d) from host %d "
                                 "within %d us",
                            (unsigned long long)id, worker, ra->r->host, from_host, timeout_us);
                return CXL_RING_TIMEOUT;
            }
            continue; /* a replier got in first: take its reply */
        }
        if (now >= next_alive) {
            next_alive = now + ALIVE_EVERY_NS;
            if (!cxl_host_alive(ra->r, from_host)) {
                /* Take the slot back even from a dead writer: it will never finish. */
                if (__atomic_compare_exchange_n(w, &s, ST(id, PH_IDLE), false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE)) {
                    pod_err_set(err, "no reply to request %llu (worker %u of host %d): host %d "
                                     "is not alive",
                                (unsigned long long)id, worker, ra->r->host, from_host);
                    return CXL_RING_DEAD;
                }
                continue; /* the reply arrived just now */
            }
        }
        if (poll) poll(poll_arg);
        uint64_t waited = now - t0;
        if (waited < SPIN_NS) {
            for (int i = 0; i < 16; i++) pod_cpu_relax();
        } else if (waited < YIELD_NS) {
            sched_yield();
        } else if (ra->inbox && ST_PH(s) == PH_ARMED && cxl_host_shares_kernel(ra->r, from_host)) {
            /* Asleep until the reply is posted or a request reaches our inbox
             * (both ring the doorbell), or the next deadline or alive check. */
            uint64_t until = next_alive < deadline ? next_alive : deadline;
            uint64_t t = until > now ? until - now : 0;
            struct reply_watch rw = {w, s};
            cxl_ring_sleep(ra->inbox, t < DOZE_NS ? t : DOZE_NS, reply_moved, &rw);
        } else {
            struct timespec nap = {0, NAP_NS};
            nanosleep(&nap, NULL);
        }
        now = now_ns();
    }
}
