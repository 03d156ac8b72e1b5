/* The 2PL lock of a local row wherever it lives: in the row's own word, or in
 * the HWcc record of its CXL copy once the owner moved it there (LOCK_MOVED,
 * src/storage/lock.h). Every call is NO_WAIT.
 *
 * *in_cxl tells the caller where the lock was taken, which is where it must
 * be released (or upgraded, downgraded): a lock taken in the record stays
 * there (a row whose record is locked is never moved out); a lock taken in
 * the row's word may move into the record at any time (the owner transfers
 * the readers when it moves the row in; a write-locked row is never moved),
 * which the release functions detect.
 *
 * The record of a moved row is only read inside a cross-host EBR critical
 * section, so one that is being moved out stays readable; a move-out keeps
 * the record write-locked forever, so taking a lock on it fails and the
 * caller looks at the row's word again. */
#ifndef PODDB_POD_ROWLOCK_H
#define PODDB_POD_ROWLOCK_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "cxl/record_ops.h"
#include "cxl/region.h"
#include "pod/cxl_index.h"
#include "storage/lock.h"
#include "storage/row.h"
#include "util/cpu.h"

enum { ROWLOCK_READ = 1, ROWLOCK_WRITE = 2 };

static inline cxl_record *rowlock_record(const struct cxl_region *r, const struct pod_row *row)
{
    cxl_off off = row_shortcut(row);
    return off ? (cxl_record *)cxl_ptr(r, off) : NULL;
}

/* Where rowlock_try finds a moved row's record: r (NULL outside a pod), and
 * with ix set (engine.shortcut_pointers: false) the partition's CXL index,
 * searched for key by the given worker instead of following the row's
 * shortcut. The shortcut is still read, to check that the entry found is
 * this row's (a dead row's key may be in the index again, as a new row). */
struct rowlock_at {
    const struct cxl_region *r;
    const struct cxl_index *ix;
    const void *key;
    int worker;
};

static inline cxl_record *rowlock_find(const struct rowlock_at *at, const struct pod_row *row)
{
    if (!at->ix) return rowlock_record(at->r, row);
    uint64_t off;
    if (cxl_index_lookup(at->ix, at->worker, at->key, &off) != BT_OK ||
        off != row_shortcut(row))
        return NULL;
    return (cxl_record *)cxl_ptr(at->r, off);
}

static inline bool rowlock_moved(const struct pod_row *row)
{
    return __atomic_load_n(&row->lock, __ATOMIC_ACQUIRE) & LOCK_MOVED;
}

/* Take a lock of mode want (ROWLOCK_READ/WRITE), the record found as at
 * says. at->r may be NULL outside a pod (then rows never move). */
static inline bool rowlock_try_at(const struct rowlock_at *at, struct pod_row *row, int want,
                                  bool *in_cxl)
{
    const struct cxl_region *r = at->r;
    for (int tries = 0; tries < 64; tries++) {
        if (want == ROWLOCK_WRITE ? lock_try_write(&row->lock) : lock_try_read(&row->lock)) {
            *in_cxl = false;
            return true;
        }
        uint32_t v = __atomic_load_n(&row->lock, __ATOMIC_ACQUIRE);
        if (!(v & LOCK_MOVED) || !r) {
            /* A plain conflict, unless the word changed under us (retry). */
            if (v & LOCK_W) return false;
            if (want == ROWLOCK_WRITE && (v & LOCK_READERS)) return false;
            continue;
        }
        cxl_record *rec = rowlock_find(at, row);
        if (!rec) continue; /* being moved out: the word clears soon */
        if (want == ROWLOCK_WRITE ? rec_try_write_lock(rec) : rec_try_read_lock(rec)) {
            *in_cxl = true;
            return true;
        }
        /* Still the live lock? Then it is a real conflict. */
        if ((__atomic_load_n(&row->lock, __ATOMIC_ACQUIRE) & LOCK_MOVED) &&
            rowlock_record(r, row) == rec)
            return false;
    }
    return false;
}

/* The same, the record found by the row's shortcut. */
static inline bool rowlock_try(const struct cxl_region *r, struct pod_row *row, int want,
                               bool *in_cxl)
{
    struct rowlock_at at = {r, NULL, NULL, 0};
    return rowlock_try_at(&at, row, want, in_cxl);
}

/* The owner moving row into CXL memory (src/pod/movement.c), holding the
 * row's latch and a read lock of its own on the row, with rec (at off)
 * write-locked as a guard: point the row at rec and freeze its word
 * (LOCK_MOVED), so that every lock from now on goes to rec. Returns how many
 * readers the word held besides the caller; the caller then hands them to
 * rec (rec_init_lock, which replaces the guard) and only after that releases
 * the latch. A reader that lets go in between finds the guard in rec, with
 * no reader of its own there: rowlock_release_moved_read waits for the
 * hand-over. */
static inline unsigned rowlock_freeze(struct pod_row *row, cxl_off off)
{
    row_set_shortcut(row, off);
    uint32_t v = __atomic_load_n(&row->lock, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&row->lock, &v, v | LOCK_MOVED, true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
    }
    return (unsigned)((v & LOCK_READERS) - 1);
}

/* Release in rec a read lock that was taken in row's word and moved into
 * rec (the word had LOCK_MOVED when the read lock was let go there). Until
 * the owner has handed the frozen readers to rec (rowlock_freeze), rec holds
 * only its guard, and a release there would change nothing: the hand-over
 * would then count a reader that is gone, for good (every write lock and
 * upgrade refused, the tuple never moved out). So wait for the hand-over,
 * which the release of the row's latch publishes: the owner does a few
 * stores between freezing the word and releasing it. A failure with the
 * latch free is no such window; nothing can be done about it then. */
static inline bool rowlock_release_moved_read(const struct pod_row *row, cxl_record *rec)
{
    for (unsigned spins = 1;; spins++) {
        bool latched = __atomic_load_n(&row->lock, __ATOMIC_ACQUIRE) & ROW_LATCH;
        if (rec_release_read(rec)) return true;
        if (!latched) return false;
        pod_cpu_relax();
        if (!(spins & 1023)) sched_yield();
    }
}

/* Shared -> exclusive, for the only reader. */
static inline bool rowlock_upgrade(const struct cxl_region *r, struct pod_row *row, bool *in_cxl)
{
    if (!*in_cxl) {
        if (lock_try_upgrade(&row->lock)) return true;
        if (!r || !rowlock_moved(row)) return false;
        /* Our read lock was moved into the record (or is being moved: then
         * the record holds the mover's guard and the upgrade fails). Only
         * an upgrade there makes the lock the record's; a read lock that
         * stays is released through the word (rowlock_release_moved_read). */
        if (!rec_try_upgrade(rowlock_record(r, row))) return false;
        *in_cxl = true;
        return true;
    }
    return rec_try_upgrade(rowlock_record(r, row));
}

static inline void rowlock_release(const struct cxl_region *r, struct pod_row *row, int held,
                                   bool in_cxl)
{
    if (in_cxl) {
        cxl_record *rec = rowlock_record(r, row);
        if (held == ROWLOCK_WRITE) rec_release_write(rec);
        else rec_release_read(rec);
        return;
    }
    if (held == ROWLOCK_WRITE) {
        lock_release_write(&row->lock);
    } else if (lock_release_read(&row->lock) & LOCK_MOVED) {
        rowlock_release_moved_read(row, rowlock_record(r, row));
    }
}

/* Exclusive -> shared. */
static inline void rowlock_downgrade(const struct cxl_region *r, struct pod_row *row, bool in_cxl)
{
    if (in_cxl) rec_downgrade(rowlock_record(r, row));
    else lock_downgrade(&row->lock);
}

#endif
