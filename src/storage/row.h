/* A local row: a tuple in its owner's DRAM (Tigon §3.3, Figure 3).
 * Indexed by the partition's B+-tree (key -> row address). */
#ifndef PODDB_STORAGE_ROW_H
#define PODDB_STORAGE_ROW_H

#include <assert.h>
#include <stdint.h>

#include "cxl/offset.h"

/* The row word (pod_row.lock): the 2PL lock (storage/lock.h) and two flags that
 * share its 32 bits, changed only with atomics that keep the other bits.
 *   bit  31     LOCK_W       exclusive (write) lock
 *   bit  30     LOCK_MOVED   the lock lives in the CXL record (storage/lock.h)
 *   bit  29     ROW_LATCH    orders the row's movements (pod_row_latch_try)
 *   bit  28     ROW_VALID    committed and present; clear while being
 *                            inserted and once deleted
 *   bits 27..0  LOCK_READERS shared (read) holders: a host's workers */
#define LOCK_W (1u << 31)
#define LOCK_MOVED (1u << 30)
#define ROW_LATCH (1u << 29)
#define ROW_VALID (1u << 28)
#define LOCK_READERS (ROW_VALID - 1)
#define LOCK_STATE (LOCK_W | LOCK_MOVED | LOCK_READERS)

struct pod_row {
    uint32_t lock;          /* the row word, above */
    uint32_t shortcut;      /* the tuple's HWcc record while it is in CXL memory, in
                             * 8-byte units from the region base (row_shortcut), else 0 */
    uint64_t epoch_version; /* epoch << 32 | version of the last committed write */
    _Alignas(8) unsigned char tuple[];
};

/* 16 bytes: a 72-byte TPC-C order line takes 88 (its table's row slab,
 * storage/row_slab.c; in mimalloc's classes 96). */
_Static_assert(sizeof(struct pod_row) == 16, "the row header is 16 bytes");

static inline cxl_off row_shortcut(const struct pod_row *r)
{
    return (cxl_off)__atomic_load_n(&r->shortcut, __ATOMIC_ACQUIRE) << 3;
}

static inline void row_set_shortcut(struct pod_row *r, cxl_off off)
{
    assert(off % 8 == 0 && off < CXL_HWCC_LIMIT);
    __atomic_store_n(&r->shortcut, (uint32_t)(off >> 3), __ATOMIC_RELEASE);
}

/* A committed write's epoch-version. Stored under the row's exclusive lock
 * but read without it by delta checkpoints (pod_row_unchanged), hence
 * atomic: a plain store on x86. */
static inline void row_set_epoch_version(struct pod_row *r, uint64_t ev)
{
    __atomic_store_n(&r->epoch_version, ev, __ATOMIC_RELAXED);
}

static inline unsigned row_valid(const struct pod_row *r)
{
    return (__atomic_load_n(&r->lock, __ATOMIC_ACQUIRE) & ROW_VALID) != 0;
}

/* Publishes the tuple written before it when it makes the row valid; an
 * update's commit finds the bit set already and needs no atomic write. */
static inline void row_set_valid(struct pod_row *r, unsigned valid)
{
    if (!(__atomic_load_n(&r->lock, __ATOMIC_RELAXED) & ROW_VALID) == !valid) return;
    if (valid) __atomic_fetch_or(&r->lock, ROW_VALID, __ATOMIC_RELEASE);
    else __atomic_fetch_and(&r->lock, ~ROW_VALID, __ATOMIC_RELEASE);
}

#endif
