/* The 2PL lock word of a local row, NO_WAIT: every attempt either succeeds at
 * once or fails, and a failed attempt aborts the transaction (Tigon §3.4).
 * Bit 31 is the exclusive (write) lock; the low bits count shared (read)
 * holders. Bit 30 (LOCK_MOVED) says the row's lock lives in the HWcc record of
 * its CXL copy (row->shortcut) instead: the owner set it when it moved the row
 * into CXL memory, copying the lock state there, and from then on the word is
 * frozen (every attempt below fails; src/pod/rowlock.h goes to the record)
 * until the row is moved out. So one lock word is live at any time. The
 * word's bits, with the row's latch and valid bits beside the lock's, are
 * laid out in storage/row.h. */
#ifndef PODDB_STORAGE_LOCK_H
#define PODDB_STORAGE_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/row.h"

/* Every function keeps the word's other bits (ROW_LATCH, ROW_VALID), which
 * others may change at any time: a mover can take the latch before a
 * writer locks the row and release it while the writer holds the lock, so
 * even the write lock's holder changes the word only with atomic
 * read-modify-writes (a plain store of a value read earlier could put back
 * a latch released meanwhile). */
static inline bool lock_try_read(uint32_t *w)
{
    uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (!(v & (LOCK_W | LOCK_MOVED)))
        if (__atomic_compare_exchange_n(w, &v, v + 1, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return true;
    return false;
}

static inline bool lock_try_write(uint32_t *w)
{
    uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (!(v & LOCK_STATE))
        if (__atomic_compare_exchange_n(w, &v, v | LOCK_W, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return true;
    return false;
}

/* Shared -> exclusive; only the sole reader can upgrade. */
static inline bool lock_try_upgrade(uint32_t *w)
{
    uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    while ((v & LOCK_STATE) == 1)
        if (__atomic_compare_exchange_n(w, &v, (v - 1) | LOCK_W, true, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return true;
    return false;
}

/* Returns the word before the release: if it had LOCK_MOVED, the lock had
 * been moved to CXL meanwhile and must be released there (the frozen count is
 * never read again, so decrementing it is harmless). */
static inline uint32_t lock_release_read(uint32_t *w)
{
    return __atomic_fetch_sub(w, 1, __ATOMIC_RELEASE);
}
static inline void lock_release_write(uint32_t *w)
{
    __atomic_fetch_and(w, ~LOCK_W, __ATOMIC_RELEASE);
}

/* Exclusive -> shared (the caller held the exclusive lock; a write-locked
 * row is never moved, so the lock bits are still just LOCK_W): one atomic
 * add clears LOCK_W and counts one reader. */
static inline void lock_downgrade(uint32_t *w) { __atomic_fetch_add(w, 1u - LOCK_W, __ATOMIC_RELEASE); }

#endif
