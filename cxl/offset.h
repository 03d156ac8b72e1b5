/* Offset pointers: everything stored in the region refers to other region
 * memory by its byte offset from the region base, because every process maps
 * the region at its own address. Offset 0 is the superblock, so 0 doubles as
 * the null offset. */
#ifndef PODDB_CXL_OFFSET_H
#define PODDB_CXL_OFFSET_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t cxl_off;
#define CXL_NULL ((cxl_off)0)

/* The HWcc slices end at or below this offset (cxl/region.c refuses a
 * geometry that does not), so an 8-byte-aligned HWcc record's offset fits 32
 * bits counted in 8-byte units: a local row's shortcut (src/storage/row.h). */
#define CXL_HWCC_LIMIT (1ull << 35)

/* base + off, or NULL for the null offset. */
static inline void *cxl_at(void *base, cxl_off off)
{
    return off ? (char *)base + off : NULL;
}

/* The offset of p (which must point into the region at base), or CXL_NULL for NULL. */
static inline cxl_off cxl_off_of(const void *base, const void *p)
{
    return p ? (cxl_off)((const char *)p - (const char *)base) : CXL_NULL;
}

/* Offsets in cache lines, as stored in the 36-bit field of a HWcc record. */
static inline uint64_t cxl_off_to_lines(cxl_off off) { return off >> 6; }
static inline cxl_off cxl_lines_to_off(uint64_t lines) { return (cxl_off)(lines << 6); }

#endif
