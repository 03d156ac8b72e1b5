/* Raw coherence primitives: flush (invalidate), write-back and non-temporal copy
 * of address ranges, with the instruction chosen once from CPUID.
 *
 * The x86 instructions are compiled through per-function target attributes, so
 * this file needs no -m flags and runs on any x86-64; only the instructions the
 * CPU reports are ever executed. PODDB_COHERENCE_IMPL=clwb|clflushopt|clflush|fence
 * caps the choice (for tests and comparisons); cxl_coherence_select does the same
 * at run time. */
#include "cxl/coherence.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

/* One flavour of the primitives. *_lines touch every line overlapping
 * [p, p+len) without fencing; the public functions add the fence. */
struct coh_impl {
    const char *flush_name;
    const char *wb_name;
    void (*flush_lines)(const void *p, size_t len);
    void (*wb_lines)(const void *p, size_t len);
};

/* Fallback levels, best first; a "ceiling" picks the best level not above it. */
enum coh_level { LVL_CLWB = 0, LVL_CLFLUSHOPT, LVL_CLFLUSH, LVL_FENCE, LVL_COUNT };
static const char *const level_names[LVL_COUNT] = {"clwb", "clflushopt", "clflush", "fence"};

static void lines_nop(const void *p, size_t len)
{
    (void)p;
    (void)len;
}

#if defined(__x86_64__)

#define FOR_EACH_LINE(p, len, stmt)                                                   \
    do {                                                                              \
        if ((len) == 0) break;                                                        \
        uintptr_t a_ = (uintptr_t)(p) & ~(uintptr_t)(CXL_LINE - 1);                   \
        uintptr_t e_ = (uintptr_t)(p) + (len);                                        \
        for (; a_ < e_; a_ += CXL_LINE) { stmt; }                                     \
    } while (0)

static void lines_clflush(const void *p, size_t len)
{
    FOR_EACH_LINE(p, len, _mm_clflush((const void *)a_));
}

__attribute__((target("clflushopt"))) static void lines_clflushopt(const void *p, size_t len)
{
    FOR_EACH_LINE(p, len, __builtin_ia32_clflushopt((void *)a_));
}

__attribute__((target("clwb"))) static void lines_clwb(const void *p, size_t len)
{
    FOR_EACH_LINE(p, len, __builtin_ia32_clwb((void *)a_));
}

static bool cpu_has(enum coh_level lvl)
{
    unsigned a, b, c, d;
    switch (lvl) {
    case LVL_CLWB:
    case LVL_CLFLUSHOPT:
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        return (b >> (lvl == LVL_CLWB ? 24 : 23)) & 1;
    default:
        return true; /* clflush is part of x86-64; a fence always exists */
    }
}

static void (*const level_fn[LVL_COUNT])(const void *, size_t) = {
    lines_clwb, lines_clflushopt, lines_clflush, lines_nop};

#else /* !__x86_64__: only a full fence; correct on coherent machines only */

static bool cpu_has(enum coh_level lvl)
{
    return lvl == LVL_FENCE;
}

static void (*const level_fn[LVL_COUNT])(const void *, size_t) = {
    lines_nop, lines_nop, lines_nop, lines_nop};

#endif

/* All impls are built at init into this table; g_impl points into it. */
static struct coh_impl g_impls[LVL_COUNT];
static const struct coh_impl *g_impl;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int level_by_name(const char *name)
{
    for (int i = 0; i < LVL_COUNT; i++)
        if (strcmp(name, level_names[i]) == 0) return i;
    return -1;
}

/* The impl for each ceiling: write-back uses the best supported level at or
 * below it; flush the same but never clwb (clwb keeps the line cached). The
 * search always ends: "fence" is supported everywhere. */
static void build_impls(void)
{
    for (int ceil = 0; ceil < LVL_COUNT; ceil++) {
        int wb = ceil, fl = ceil < LVL_CLFLUSHOPT ? LVL_CLFLUSHOPT : ceil;
        while (!cpu_has((enum coh_level)wb)) wb++;
        while (!cpu_has((enum coh_level)fl)) fl++;
        g_impls[ceil] = (struct coh_impl){level_names[fl], level_names[wb], level_fn[fl],
                                          level_fn[wb]};
    }
}

static void coh_init(void)
{
    build_impls();
    int ceil = LVL_CLWB;
    const char *env = getenv("PODDB_COHERENCE_IMPL");
    if (env && *env && strcmp(env, "auto") != 0) {
        int l = level_by_name(env);
        if (l < 0)
            pod_warn("PODDB_COHERENCE_IMPL=%s is not one of auto, clwb, clflushopt, clflush, "
                     "fence; using auto",
                     env);
        else
            ceil = l;
    }
    __atomic_store_n(&g_impl, &g_impls[ceil], __ATOMIC_RELEASE);
    pod_debug("coherence primitives: flush=%s writeback=%s", g_impls[ceil].flush_name,
              g_impls[ceil].wb_name);
}

static inline const struct coh_impl *impl(void)
{
    const struct coh_impl *p = __atomic_load_n(&g_impl, __ATOMIC_ACQUIRE);
    if (__builtin_expect(p == NULL, 0)) {
        pthread_once(&g_once, coh_init);
        p = __atomic_load_n(&g_impl, __ATOMIC_ACQUIRE);
    }
    return p;
}

int cxl_coherence_select(const char *name, pod_err *err)
{
    pthread_once(&g_once, coh_init);
    int l = (name == NULL || strcmp(name, "auto") == 0) ? LVL_CLWB : level_by_name(name);
    if (l < 0) {
        pod_err_set(err,
                    "Unknown coherence implementation '%s': expected auto, clwb, clflushopt, "
                    "clflush or fence.",
                    name);
        return -1;
    }
    if (name != NULL && !cpu_has((enum coh_level)l)) {
        pod_err_set(err, "This CPU does not support %s (CPUID), so it cannot be selected.",
                    name);
        return -1;
    }
    __atomic_store_n(&g_impl, &g_impls[l], __ATOMIC_RELEASE);
    return 0;
}

const char *cxl_flush_impl_name(void)
{
    return impl()->flush_name;
}

const char *cxl_writeback_impl_name(void)
{
    return impl()->wb_name;
}

#if defined(__x86_64__)
#define STORE_FENCE() _mm_sfence()
/* After a flush the caller reads, and SFENCE does not order later loads: MFENCE
 * keeps a load from being satisfied by the line before its invalidation. */
#define FLUSH_FENCE() _mm_mfence()
#else
#define STORE_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define FLUSH_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

void cxl_flush_range(const void *p, size_t len)
{
    impl()->flush_lines(p, len);
    FLUSH_FENCE();
}

void cxl_writeback_range(const void *p, size_t len)
{
    impl()->wb_lines(p, len);
    STORE_FENCE();
}

#if defined(__x86_64__)

void cxl_nt_copy(void *dst, const void *src, size_t len)
{
    char *d = dst;
    const char *s = src;
    const struct coh_impl *im = impl();

    /* Head: bytes up to 8-byte alignment go through the cache and are written
     * back below; then one 8-byte NT store if needed to reach 16-byte alignment. */
    size_t head = (size_t)(-(uintptr_t)d & 7);
    if (head > len) head = len;
    if (head) {
        memcpy(d, s, head);
        im->wb_lines(d, head);
        d += head, s += head, len -= head;
    }
    if (((uintptr_t)d & 15) && len >= 8) {
        long long v;
        memcpy(&v, s, 8);
        _mm_stream_si64((long long *)d, v);
        d += 8, s += 8, len -= 8;
    }
    /* Body: aligned 16-byte NT stores (unaligned loads from src). */
    for (; len >= 64; d += 64, s += 64, len -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    for (; len >= 16; d += 16, s += 16, len -= 16)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    if (len >= 8) {
        long long v;
        memcpy(&v, s, 8);
        _mm_stream_si64((long long *)d, v);
        d += 8, s += 8, len -= 8;
    }
    /* Tail: fewer than 8 bytes, cached store + write-back. */
    if (len) {
        memcpy(d, s, len);
        im->wb_lines(d, len);
    }
    _mm_sfence();
}

#else

void cxl_nt_copy(void *dst, const void *src, size_t len)
{
    memcpy(dst, src, len);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

#endif
