/* A local row: a tuple in its owner's DRAM (Tigon §3.3, Figure 3).
 * Indexed by the partition's B+-tree (key -> row address). */
#ifndef PODDB_STORAGE_ROW_H
#define PODDB_STORAGE_ROW_H

#include <stdint.h>

#include "cxl/offset.h"

struct pod_row {
    uint64_t lock;          /* 2PL lock word, see txn/lock.h */
    uint32_t latch;         /* local latch: guards moving the tuple to CXL and back */
    uint32_t valid;         /* 1: committed and present. 0: being inserted, or deleted */
    uint64_t epoch_version; /* epoch << 32 | version of the last committed write */
    cxl_off shortcut;       /* the tuple's HWcc record while it is in CXL memory, else 0 */
    _Alignas(8) unsigned char tuple[];
};

static inline uint32_t row_valid(const struct pod_row *r)
{
    return __atomic_load_n(&r->valid, __ATOMIC_ACQUIRE);
}

#endif
