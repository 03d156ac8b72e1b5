/* The 2PL lock word of a row, NO_WAIT: every attempt either succeeds at once
 * or fails, and a failed attempt aborts the transaction (Tigon §3.4). Bit 63
 * is the exclusive (write) lock; the low bits count shared (read) holders. */
#ifndef PODDB_TXN_LOCK_H
#define PODDB_TXN_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#define LOCK_W (1ull << 63)

static inline bool lock_try_read(uint64_t *w)
{
    uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (!(v & LOCK_W))
        if (__atomic_compare_exchange_n(w, &v, v + 1, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return true;
    return false;
}

static inline bool lock_try_write(uint64_t *w)
{
    uint64_t v = 0;
    return __atomic_compare_exchange_n(w, &v, LOCK_W, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Shared -> exclusive; only the sole reader can upgrade. */
static inline bool lock_try_upgrade(uint64_t *w)
{
    uint64_t v = 1;
    return __atomic_compare_exchange_n(w, &v, LOCK_W, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void lock_release_read(uint64_t *w) { __atomic_fetch_sub(w, 1, __ATOMIC_RELEASE); }
static inline void lock_release_write(uint64_t *w) { __atomic_store_n(w, 0, __ATOMIC_RELEASE); }

/* Exclusive -> shared (the caller held the exclusive lock). */
static inline void lock_downgrade(uint64_t *w) { __atomic_store_n(w, 1, __ATOMIC_RELEASE); }

#endif
