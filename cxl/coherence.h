/* Coherence primitives for software-coherent (SWcc) CXL memory.
 *
 * Tigon §3.2: SWcc memory is cacheable but not kept coherent across hosts by
 * hardware. A reader that may hold a stale copy invalidates the lines before it
 * reads them (flush-before-read, clflushopt); a writer writes its dirty lines
 * back (clwb) before publishing. All synchronisation (latches, bitmaps) lives in
 * HWcc memory; these primitives only move bytes between a host's cache and
 * the device.
 *
 * Two layers:
 *  - raw primitives on any address (cxl_flush_range, cxl_writeback_range,
 *    cxl_nt_copy), chosen once at startup from CPUID with a portable fallback;
 *  - a per-host SWcc view (struct cxl_swcc) that every protocol access goes
 *    through. On real hardware a view is the shared address itself. In the
 *    simulated non-coherent mode the host reads and writes a private copy of
 *    the SWcc area (a write-back cache that never evicts), refreshed only by
 *    cxl_swcc_flush and published only by cxl_swcc_writeback/nt_write, so a
 *    missing flush or write-back shows up as a wrong answer in tests. */
#ifndef PODDB_CXL_COHERENCE_H
#define PODDB_CXL_COHERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define CXL_LINE 64

/* ---- raw primitives ------------------------------------------------------ */

/* Which instruction each primitive uses on this CPU (for logs and inspect). */
const char *cxl_flush_impl_name(void);     /* "clflushopt", "clflush" or "fence" */
const char *cxl_writeback_impl_name(void); /* "clwb", "clflushopt", "clflush" or "fence" */

/* Invalidate the lines covering [p, p+len) (writing back dirty ones), then
 * fence, so the next read fetches from memory. */
void cxl_flush_range(const void *p, size_t len);
/* Write back dirty lines covering [p, p+len), keeping them cached, then fence. */
void cxl_writeback_range(const void *p, size_t len);
/* Copy with non-temporal stores (bypassing this host's cache), then fence. */
void cxl_nt_copy(void *dst, const void *src, size_t len);

/* Cap the instructions used from now on (tests, comparisons): "auto" or NULL
 * (best available), "clwb", "clflushopt", "clflush" or "fence" (a fence alone is
 * only correct on coherent hardware). Flush never uses clwb. The environment
 * variable PODDB_COHERENCE_IMPL sets the initial choice the same way. Fails if
 * the name is unknown or the CPU lacks that instruction. */
int cxl_coherence_select(const char *name, pod_err *err);

/* ---- the per-host SWcc view --------------------------------------------- */

struct cxl_swcc_sim; /* private: the simulated cache */

struct cxl_swcc {
    char *base;   /* the SWcc area as mapped by this process */
    size_t size;
    struct cxl_swcc_sim *sim; /* NULL on real hardware */
    /* Optional libpmem2 memcpy for non-temporal copies on DAX mappings with
     * cache-line or byte granularity (on page granularity pmem2's memcpy is an
     * msync, so the view uses cxl_nt_copy instead). Signature of
     * pmem2_memcpy_fn. */
    void *(*pmem_memcpy)(void *dst, const void *src, size_t len, unsigned flags);
};

/* Set up the view of [base, base+size). With simulate=true, allocate the
 * private cache (lazily backed: untouched memory costs nothing). */
int cxl_swcc_init(struct cxl_swcc *s, void *base, size_t size, bool simulate, pod_err *err);
void cxl_swcc_fini(struct cxl_swcc *s);

/* Slow paths of the inline functions below (simulation only). */
const void *cxl_swcc_sim_view(struct cxl_swcc *s, const void *p, size_t len);
void *cxl_swcc_sim_wview(struct cxl_swcc *s, void *p, size_t len);

/* A readable view of the shared bytes [p, p+len): the address to read them
 * at. Valid until the next flush of those lines by this host. */
static inline const void *cxl_swcc_view(struct cxl_swcc *s, const void *p, size_t len)
{
    if (__builtin_expect(s->sim != NULL, 0)) return cxl_swcc_sim_view(s, p, len);
    return p;
}

/* A writable view of [p, p+len); writes through it reach other hosts only
 * after cxl_swcc_writeback (or a flush) of those lines. */
static inline void *cxl_swcc_wview(struct cxl_swcc *s, void *p, size_t len)
{
    if (__builtin_expect(s->sim != NULL, 0)) return cxl_swcc_sim_wview(s, p, len);
    return p;
}

/* Copy out of / into SWcc memory through the view. */
void cxl_swcc_read(struct cxl_swcc *s, void *dst, const void *src, size_t len);
void cxl_swcc_write(struct cxl_swcc *s, void *dst, const void *src, size_t len);

/* Flush-before-read: drop this host's copies of the lines (writing dirty ones
 * back first) so the next view reads memory. */
void cxl_swcc_flush(struct cxl_swcc *s, const void *p, size_t len);
/* Publish this host's writes to [p, p+len) to memory; copies stay cached. */
void cxl_swcc_writeback(struct cxl_swcc *s, const void *p, size_t len);
/* Write [src, src+len) to shared dst with non-temporal stores: straight to
 * memory, dropping any cached copy of the lines. */
void cxl_swcc_nt_write(struct cxl_swcc *s, void *dst, const void *src, size_t len);

#endif
