/* The per-host SWcc view (struct cxl_swcc) and its simulated non-coherent mode.
 *
 * Real mode: the view is the shared memory itself and the operations are the
 * raw primitives of coherence.c.
 *
 * Simulated mode: this host has a private write-back cache of the SWcc area that
 * never evicts: a lazily backed private copy ("shadow") of the area plus one
 * valid and one dirty bit per cache line. A view fills missing lines from shared
 * memory; a writable view also marks them dirty; writeback copies dirty lines to
 * shared memory; flush does the same and then drops the lines; nt_write goes to
 * shared memory and drops the lines. Lines are the hardware's 64-byte lines
 * (absolute addresses), clipped to the area, and the shadow keeps the area's
 * alignment modulo 64.
 *
 * Threads of one host share the cache: every fill, dirty marking, write-back and
 * invalidation of a line happens under that line's stripe lock, and bitmap words
 * (shared by 64 lines of different stripes) are changed with atomic RMWs. */
#include <errno.h>
#include <libpmem2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cxl/coherence.h"
#include "util/log.h"

#define SIM_STRIPES 1024 /* power of two */

struct sim_stripe {
    pthread_mutex_t m;
} __attribute__((aligned(64))); /* one lock per cache line: no false sharing */

struct cxl_swcc_sim {
    char *map;        /* the private mapping (shadow area) */
    size_t map_len;
    char *shadow;     /* shadow address of base */
    uintptr_t line0;  /* absolute line number of base */
    size_t nlines;
    uint64_t *valid;  /* bitmaps, one bit per line, in one mapping */
    uint64_t *dirty;
    size_t bm_len;
    struct sim_stripe stripes[SIM_STRIPES];
};

/* ---- bitmaps -------------------------------------------------------------- */

/* Bits are set and cleared only under the line's stripe lock; lock-free tests
 * use acquire so a set valid bit also publishes the filled bytes. */
static inline bool bit_get(const uint64_t *bm, size_t i)
{
    return (__atomic_load_n(&bm[i >> 6], __ATOMIC_ACQUIRE) >> (i & 63)) & 1;
}

static inline void bit_set(uint64_t *bm, size_t i)
{
    __atomic_fetch_or(&bm[i >> 6], UINT64_C(1) << (i & 63), __ATOMIC_ACQ_REL);
}

static inline void bit_clear(uint64_t *bm, size_t i)
{
    __atomic_fetch_and(&bm[i >> 6], ~(UINT64_C(1) << (i & 63)), __ATOMIC_ACQ_REL);
}

/* Mask of the bits of word w that fall in lines [first, last]. */
static inline uint64_t word_mask(size_t w, size_t first, size_t last)
{
    uint64_t m = ~UINT64_C(0);
    if (first >> 6 == w) m &= ~UINT64_C(0) << (first & 63);
    if (last >> 6 == w) m &= ~UINT64_C(0) >> (63 - (last & 63));
    return m;
}

/* ---- lines ---------------------------------------------------------------- */

struct span {
    size_t first, last; /* line indices, inclusive */
};

static void __attribute__((noreturn))
sim_out_of_range(const struct cxl_swcc *s, const char *op, const void *p, size_t len)
{
    pod_error("cxl_swcc_%s: [%p, %p + %zu) is outside the simulated SWcc area [%p, %p + %zu); "
              "every SWcc access must stay inside the area given to cxl_swcc_init",
              op, p, p, len, (void *)s->base, (void *)s->base, s->size);
    abort();
}

/* Abort unless [p, p+len) lies in the area (p may be its end when len is 0). */
static void sim_check(const struct cxl_swcc *s, const char *op, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)s->base;
    if (a < b || a - b > s->size || len > s->size - (a - b)) sim_out_of_range(s, op, p, len);
}

/* Check [p, p+len) (len > 0) and return its lines. */
static struct span sim_span(const struct cxl_swcc *s, const char *op, const void *p, size_t len)
{
    sim_check(s, op, p, len);
    uintptr_t a = (uintptr_t)p;
    return (struct span){(a >> 6) - s->sim->line0, ((a + len - 1) >> 6) - s->sim->line0};
}

/* Offset from base and length of line i, clipped to the area. */
static inline void line_extent(const struct cxl_swcc *s, size_t i, size_t *off, size_t *n)
{
    uintptr_t b = (uintptr_t)s->base, e = b + s->size;
    uintptr_t lo = (uintptr_t)(s->sim->line0 + i) << 6, hi = lo + CXL_LINE;
    if (lo < b) lo = b;
    if (hi > e) hi = e;
    *off = lo - b;
    *n = hi - lo;
}

static inline pthread_mutex_t *line_lock(struct cxl_swcc_sim *sim, size_t i)
{
    return &sim->stripes[i & (SIM_STRIPES - 1)].m;
}

/* The following take the line's lock held. Copies to and from shared memory are
 * plain memcpy: another host writing concurrently can tear the data (protocols
 * exclude that with HWcc latches) but cannot make us fault. */
static void line_fill(struct cxl_swcc *s, size_t i)
{
    struct cxl_swcc_sim *sim = s->sim;
    if (bit_get(sim->valid, i)) return;
    size_t off, n;
    line_extent(s, i, &off, &n);
    memcpy(sim->shadow + off, s->base + off, n);
    bit_set(sim->valid, i);
}

static void line_writeback(struct cxl_swcc *s, size_t i)
{
    struct cxl_swcc_sim *sim = s->sim;
    if (!bit_get(sim->dirty, i)) return;
    size_t off, n;
    line_extent(s, i, &off, &n);
    memcpy(s->base + off, sim->shadow + off, n);
    bit_clear(sim->dirty, i);
}

static void line_drop(struct cxl_swcc *s, size_t i)
{
    line_writeback(s, i);
    bit_clear(s->sim->valid, i);
}

/* Run op on each line of [first, last] whose bit is set in bm_a or bm_b,
 * skipping clear bitmap words without locking (a line that is neither valid nor
 * dirty has nothing to write back or drop). */
static void for_each_cached(struct cxl_swcc *s, struct span sp, const uint64_t *bm_a,
                            const uint64_t *bm_b, void (*op)(struct cxl_swcc *, size_t))
{
    struct cxl_swcc_sim *sim = s->sim;
    for (size_t w = sp.first >> 6; w <= sp.last >> 6; w++) {
        uint64_t bits = __atomic_load_n(&bm_a[w], __ATOMIC_ACQUIRE);
        if (bm_b) bits |= __atomic_load_n(&bm_b[w], __ATOMIC_ACQUIRE);
        bits &= word_mask(w, sp.first, sp.last);
        while (bits) {
            size_t i = (w << 6) + (size_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            pthread_mutex_t *m = line_lock(sim, i);
            pthread_mutex_lock(m);
            op(s, i);
            pthread_mutex_unlock(m);
        }
    }
}

/* True if every line of sp has its bit set in bm (lock-free fast path). */
static bool all_set(const uint64_t *bm, struct span sp)
{
    for (size_t w = sp.first >> 6; w <= sp.last >> 6; w++) {
        uint64_t m = word_mask(w, sp.first, sp.last);
        if ((__atomic_load_n(&bm[w], __ATOMIC_ACQUIRE) & m) != m) return false;
    }
    return true;
}

/* ---- setup ---------------------------------------------------------------- */

static void *anon_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int cxl_swcc_init(struct cxl_swcc *s, void *base, size_t size, bool simulate, pod_err *err)
{
    *s = (struct cxl_swcc){.base = base, .size = size};
    if (base == NULL || size == 0) {
        pod_err_set(err, "The SWcc area is empty (base %p, size %zu); it needs a mapped base "
                         "address and a non-zero size.",
                    base, size);
        return -1;
    }
    if ((uintptr_t)base + size < (uintptr_t)base) {
        pod_err_set(err, "The SWcc area [%p, +%zu) wraps around the address space.", base, size);
        return -1;
    }
    if (!simulate) return 0;

    struct cxl_swcc_sim *sim;
    int rc = posix_memalign((void **)&sim, 64, sizeof *sim);
    if (rc != 0) {
        pod_err_set(err, "Cannot allocate the simulated SWcc cache state: %s.", strerror(rc));
        return -1;
    }
    memset(sim, 0, sizeof *sim);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t mis = (uintptr_t)base & (CXL_LINE - 1);
    sim->line0 = (uintptr_t)base >> 6;
    sim->nlines = (((uintptr_t)base + size - 1) >> 6) - sim->line0 + 1;
    sim->map_len = (mis + size + page - 1) / page * page;
    size_t words = (sim->nlines + 63) / 64;
    sim->bm_len = (2 * words * sizeof(uint64_t) + page - 1) / page * page;
    sim->map = anon_map(sim->map_len);
    uint64_t *bms = anon_map(sim->bm_len);
    if (sim->map == NULL || bms == NULL) {
        pod_err_set(err,
                    "Cannot reserve %zu bytes of address space for the simulated SWcc cache: "
                    "%s.",
                    sim->map_len + sim->bm_len, strerror(errno));
        if (sim->map) munmap(sim->map, sim->map_len);
        if (bms) munmap(bms, sim->bm_len);
        free(sim);
        return -1;
    }
    sim->shadow = sim->map + mis;
    sim->valid = bms;
    sim->dirty = bms + words;
    for (int i = 0; i < SIM_STRIPES; i++) pthread_mutex_init(&sim->stripes[i].m, NULL);
    s->sim = sim;
    return 0;
}

void cxl_swcc_fini(struct cxl_swcc *s)
{
    struct cxl_swcc_sim *sim = s->sim;
    if (sim) {
        for (int i = 0; i < SIM_STRIPES; i++) pthread_mutex_destroy(&sim->stripes[i].m);
        munmap(sim->map, sim->map_len);
        munmap(sim->valid, sim->bm_len);
        free(sim);
    }
    *s = (struct cxl_swcc){0};
}

/* ---- simulated operations -------------------------------------------------- */

static inline char *shadow_of(const struct cxl_swcc *s, const void *p)
{
    return s->sim->shadow + ((const char *)p - s->base);
}

const void *cxl_swcc_sim_view(struct cxl_swcc *s, const void *p, size_t len)
{
    if (len == 0) {
        sim_check(s, "view", p, 0);
        return shadow_of(s, p);
    }
    struct span sp = sim_span(s, "view", p, len);
    struct cxl_swcc_sim *sim = s->sim;
    if (all_set(sim->valid, sp)) return shadow_of(s, p);
    for (size_t i = sp.first; i <= sp.last; i++) {
        if (bit_get(sim->valid, i)) continue;
        pthread_mutex_t *m = line_lock(sim, i);
        pthread_mutex_lock(m);
        line_fill(s, i);
        pthread_mutex_unlock(m);
    }
    return shadow_of(s, p);
}

/* Lines are marked dirty when the view is taken, not at each store: stores made
 * through the pointer are published by the next writeback/flush of the lines,
 * and must not run concurrently with another thread's writeback/flush of them
 * (cxl_swcc_write is the line-atomic alternative). */
void *cxl_swcc_sim_wview(struct cxl_swcc *s, void *p, size_t len)
{
    if (len == 0) {
        sim_check(s, "wview", p, 0);
        return shadow_of(s, p);
    }
    struct span sp = sim_span(s, "wview", p, len);
    struct cxl_swcc_sim *sim = s->sim;
    if (all_set(sim->dirty, sp)) return shadow_of(s, p); /* dirty implies valid */
    for (size_t i = sp.first; i <= sp.last; i++) {
        if (bit_get(sim->dirty, i)) continue;
        pthread_mutex_t *m = line_lock(sim, i);
        pthread_mutex_lock(m);
        line_fill(s, i);
        bit_set(sim->dirty, i);
        pthread_mutex_unlock(m);
    }
    return shadow_of(s, p);
}

/* Byte range of line i that intersects [p, p+len), as offsets from base. */
static inline void line_part(const struct cxl_swcc *s, size_t i, const void *p, size_t len,
                             size_t *off, size_t *n, bool *whole)
{
    size_t loff, ln;
    line_extent(s, i, &loff, &ln);
    size_t a = (size_t)((const char *)p - s->base), b = a + len;
    size_t lo = a > loff ? a : loff, hi = b < loff + ln ? b : loff + ln;
    *off = lo;
    *n = hi - lo;
    *whole = lo == loff && hi == loff + ln;
}

/* Read and write copy line by line under the line's lock, so they are atomic with
 * respect to fills, write-backs and other reads/writes of this host's threads;
 * one loop does all three copies, what differs is what each does to a line. */
enum sim_copy_kind { SIM_READ, SIM_WRITE, SIM_NT_WRITE };

static void sim_copy(struct cxl_swcc *s, enum sim_copy_kind k, void *dst, const void *src,
                     size_t len)
{
    if (len == 0) return;
    static const char *const what[] = {"read", "write", "nt_write"};
    const void *p = k == SIM_READ ? src : dst; /* the side in the region */
    struct span sp = sim_span(s, what[k], p, len);
    struct cxl_swcc_sim *sim = s->sim;
    size_t p_off = (size_t)((const char *)p - s->base);
    for (size_t i = sp.first; i <= sp.last; i++) {
        size_t off, n;
        bool whole;
        line_part(s, i, p, len, &off, &n, &whole);
        pthread_mutex_t *m = line_lock(sim, i);
        pthread_mutex_lock(m);
        switch (k) {
        case SIM_READ:
            line_fill(s, i);
            memcpy((char *)dst + (off - p_off), sim->shadow + off, n);
            break;
        case SIM_WRITE:
            if (!whole) line_fill(s, i); /* a fully overwritten line needs no fill */
            memcpy(sim->shadow + off, (const char *)src + (off - p_off), n);
            bit_set(sim->valid, i);
            bit_set(sim->dirty, i);
            break;
        case SIM_NT_WRITE:
            /* As on hardware, a dirty cached line is written back before the
             * non-temporal bytes land; a fully overwritten one is just discarded. */
            if (!whole) line_writeback(s, i);
            memcpy(s->base + off, (const char *)src + (off - p_off), n);
            bit_clear(sim->dirty, i);
            bit_clear(sim->valid, i);
            break;
        }
        pthread_mutex_unlock(m);
    }
}

/* ---- the view API ---------------------------------------------------------- */

void cxl_swcc_read(struct cxl_swcc *s, void *dst, const void *src, size_t len)
{
    if (s->sim) sim_copy(s, SIM_READ, dst, src, len);
    else memcpy(dst, src, len);
}

void cxl_swcc_write(struct cxl_swcc *s, void *dst, const void *src, size_t len)
{
    if (s->sim) sim_copy(s, SIM_WRITE, dst, src, len);
    else memcpy(dst, src, len);
}

void cxl_swcc_flush(struct cxl_swcc *s, const void *p, size_t len)
{
    if (!s->sim) {
        cxl_flush_range(p, len);
        return;
    }
    if (len == 0) return;
    struct span sp = sim_span(s, "flush", p, len);
    for_each_cached(s, sp, s->sim->valid, s->sim->dirty, line_drop);
}

void cxl_swcc_writeback(struct cxl_swcc *s, const void *p, size_t len)
{
    if (!s->sim) {
        cxl_writeback_range(p, len);
        return;
    }
    if (len == 0) return;
    struct span sp = sim_span(s, "writeback", p, len);
    for_each_cached(s, sp, s->sim->dirty, NULL, line_writeback);
}

void cxl_swcc_nt_write(struct cxl_swcc *s, void *dst, const void *src, size_t len)
{
    if (s->sim) sim_copy(s, SIM_NT_WRITE, dst, src, len);
    else if (s->pmem_memcpy) s->pmem_memcpy(dst, src, len, PMEM2_F_MEM_NONTEMPORAL);
    else cxl_nt_copy(dst, src, len);
}
