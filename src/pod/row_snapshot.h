/* Reading a local row's committed tuple outside a transaction, wherever the
 * tuple lives (added by the durability layer for its checkpoints,
 * src/log/checkpoint.c; the pod layer's rules are in docs/pod.md).
 *
 * A row the owner moved into CXL memory has its 2PL lock in the HWcc record
 * (LOCK_MOVED, src/storage/lock.h), and once another host wrote it there
 * (is-dirty) its current tuple and epoch-version are in the SWcc row, not in
 * the owner's DRAM; a row another host inserted is valid only there. So a
 * reader takes a shared lock where it lives (src/pod/rowlock.h) and reads the
 * CXL row when it is dirty, else the DRAM row. Outside a pod (db->pod NULL)
 * this is a shared lock on the row's word and a copy from DRAM.
 *
 * The caller holds the row pointer from its partition's B+-tree inside the
 * critical sections of pod_snapshot_enter (the db's EBR keeps the row, the
 * pod's cross-host EBR keeps its record readable). */
#ifndef PODDB_POD_ROW_SNAPSHOT_H
#define PODDB_POD_ROW_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "db/types.h"
#include "storage/row.h"

enum pod_snapshot_status {
    POD_SNAP_OK = 0,     /* tuple and epoch-version copied */
    POD_SNAP_ABSENT = 1, /* not a live tuple (deleted, or an insert not committed) */
    POD_SNAP_BUSY = -1,  /* a writer holds the row now (NO_WAIT): try again later; a
                            row that stays busy may be dead: look its key up again */
    POD_SNAP_ERROR = -2, /* the CXL row does not fit the table (a bug): nothing copied */
    POD_SNAP_OLDER = 2,  /* live, but its epoch-version is below min_ev: not copied */
};

/* Enter / leave the critical sections of worker id `worker` of this host
 * (the admin worker's id is fine) that keep rows and CXL records readable. */
void pod_snapshot_enter(pod_db *db, int worker);
void pod_snapshot_exit(pod_db *db, int worker);

/* Copy local row `row` of table t (t->tuple_size bytes into tuple) and its
 * epoch-version under a shared lock, taken and released here; a live row
 * whose epoch-version is below min_ev (0: none is) is left out
 * (POD_SNAP_OLDER: a delta checkpoint does not need it). */
enum pod_snapshot_status pod_row_snapshot(pod_db *db, const pod_table *t, struct pod_row *row,
                                          uint64_t min_ev, void *tuple, uint64_t *epoch_version);

/* True when a delta checkpoint may leave `row` out without locking it: its
 * lock is live in its own word (not moved into CXL memory, where another
 * host may have written the tuple unseen by DRAM), no writer holds it, and
 * its epoch-version is below min_ev, the previous checkpoint's start epoch.
 * Safe without the shared lock: a write that commits later was locked after
 * this look, so its epoch is at least the current checkpoint's start (Es)
 * and its record stays in the log; min_ev's writes are all committed (the
 * previous checkpoint waited for them). What this saves is two atomic
 * read-modify-writes on each unchanged row's line, which also dirty it (a
 * delta's visit of an unchanged row: 38 -> 30 ns). A row this does not
 * clear goes through pod_row_snapshot. */
static inline bool pod_row_unchanged(const struct pod_row *row, uint64_t min_ev)
{
    uint32_t v = __atomic_load_n(&row->lock, __ATOMIC_ACQUIRE);
    return !(v & (LOCK_W | LOCK_MOVED)) &&
           __atomic_load_n(&row->epoch_version, __ATOMIC_RELAXED) < min_ev;
}

#endif
