/* A local row: a tuple in its owner's DRAM (Tigon §3.3, Figure 3).
 * Indexed by the partition's B+-tree (key -> row address). */
#ifndef PODDB_STORAGE_ROW_H
#define PODDB_STORAGE_ROW_H

#include <stdint.h>

#include "cxl/offset.h"

struct pod_row {
    uint32_t lock;          /* 2PL lock word, see txn/lock.h */
    uint16_t latch;         /* local latch: guards moving the tuple to CXL and back */
    uint16_t valid;         /* 1: committed and present. 0: being inserted, or deleted */
    uint64_t epoch_version; /* epoch << 32 | version of the last committed write */
    cxl_off shortcut;       /* the tuple's HWcc record while it is in CXL memory, else 0 */
    _Alignas(8) unsigned char tuple[];
};

/* 24 bytes: with a 72-byte TPC-C order line, 96, one of mimalloc's size
 * classes (32 bytes of header made it 104, in the 112-byte class). */
_Static_assert(sizeof(struct pod_row) == 24, "the row header is 24 bytes");

static inline unsigned row_valid(const struct pod_row *r)
{
    return __atomic_load_n(&r->valid, __ATOMIC_ACQUIRE);
}

#endif
