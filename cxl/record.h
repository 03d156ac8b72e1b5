/* The layout of a tuple that lives in CXL memory (Tigon §3.2, Figure 3):
 * an 8-byte HWcc record in hardware-coherent memory and an SWcc row in
 * software-coherent memory. The disaggregated-memory mode reuses this layout.
 *
 * HWcc record, one 64-bit word, changed only with atomics:
 *
 *   bit  63      HWcc-latch     exclusive latch; also guards the SWcc bitmap
 *   bits 62..55  2PL lock       bit 62 = write lock, bits 61..55 = readers (0..127)
 *   bit  54      has-next-key   the next key in the CXL index is the next key
 *                               in the owner's local index (next-key locking)
 *   bit  53      is-dirty       written since it was moved to CXL memory
 *   bit  52      clock          set by non-owner accesses (CLOCK move-out)
 *   bits 51..36  SWcc bitmap    bit h: host h may read the row from its cache
 *   bits 35..0   SWcc row       offset of the SWcc row in cache lines
 *
 * SWcc row: cache-line aligned; is-valid and epoch-version, then the tuple. */
#ifndef PODDB_CXL_RECORD_H
#define PODDB_CXL_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "cxl/offset.h"

typedef uint64_t cxl_record;

#define REC_LATCH (1ull << 63)
#define REC_LOCK_W (1ull << 62)
#define REC_LOCK_R_SHIFT 55
#define REC_LOCK_R_ONE (1ull << REC_LOCK_R_SHIFT)
#define REC_LOCK_R_MASK (0x7full << REC_LOCK_R_SHIFT) /* up to 127 readers */
#define REC_LOCK_MASK (REC_LOCK_W | REC_LOCK_R_MASK)
#define REC_HAS_NEXT (1ull << 54)
#define REC_DIRTY (1ull << 53)
#define REC_CLOCK (1ull << 52)
#define REC_BITMAP_SHIFT 36
#define REC_BITMAP_MASK (0xffffull << REC_BITMAP_SHIFT)
#define REC_ROW_MASK ((1ull << 36) - 1)

/* The SWcc row's offset (bytes from the region base) of a record value. */
static inline cxl_off rec_row_off(cxl_record v) { return cxl_lines_to_off(v & REC_ROW_MASK); }

/* A record value pointing at row_off (cache-line aligned), everything else clear. */
static inline cxl_record rec_make(cxl_off row_off) { return cxl_off_to_lines(row_off) & REC_ROW_MASK; }

static inline unsigned rec_readers(cxl_record v)
{
    return (unsigned)((v & REC_LOCK_R_MASK) >> REC_LOCK_R_SHIFT);
}

static inline bool rec_host_may_cache(cxl_record v, int host)
{
    return (v >> (REC_BITMAP_SHIFT + host)) & 1;
}

/* The SWcc row header; the tuple follows (tuple_size bytes, fixed per table). */
struct cxl_swcc_row {
    uint32_t valid;          /* 1: committed and present */
    uint32_t tuple_size;
    uint64_t epoch_version;  /* epoch << 32 | version */
    _Alignas(8) unsigned char tuple[];
};

#endif
