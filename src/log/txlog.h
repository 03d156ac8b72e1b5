/* What a transaction calls at commit: the logging hook of src/txn/txn.c.
 *
 *   struct log_worker *lw = log_txn_worker(db, worker_id);   NULL: not logging
 *   uint64_t epoch = log_commit_epoch(db, lw);                under the commit's locks
 *   ...for each written row, after its new epoch-version is set:
 *   log_txn_write(db, lw, table, key, ev, tuple);              tuple NULL: a delete
 *   log_txn_update(db, lw, table, key, ev, base_ev, before, lo, hi, after);  an update
 *
 * Epoch-versions (Tigon §3.5): a row written again in its epoch gets version
 * + 1, in a new epoch version 0. A row that is inserted is a new object
 * whose key may have been deleted earlier in the same epoch, so before the
 * rule is applied an inserted row starts from log_insert_ev_floor(): the
 * largest epoch-version any delete has produced (pod-wide, in HWcc). Without
 * it a key deleted and inserted again within one epoch could get a smaller
 * epoch-version than its delete, and recovery (highest wins) would lose the
 * insert. */
#ifndef PODDB_LOG_TXLOG_H
#define PODDB_LOG_TXLOG_H

#include <stdint.h>

#include "db/types.h"

struct log_worker;

/* The worker's log buffer, or NULL when this host does not log. */
struct log_worker *log_txn_worker(pod_db *db, int worker_id);
/* The commit epoch: E from the region (db->epoch without a log layer). */
uint64_t log_commit_epoch(pod_db *db, struct log_worker *lw);
/* Where an inserted row's epoch-version starts (0 without a log layer). */
uint64_t log_insert_ev_floor(pod_db *db);
/* Log a committed write of table t's row key (t->key_size bytes): the tuple
 * (t->tuple_size bytes), or a delete when tuple is NULL. No-op when lw is NULL
 * (a delete still raises the insert floor when the host has a log layer). */
void log_txn_write(pod_db *db, struct log_worker *lw, const pod_table *t, const void *key,
                   uint64_t ev, const void *tuple);
/* Log a committed update of a row whose previous committed version was
 * base_ev: before holds bytes lo..hi-1 of that version, the only ones the
 * update may have changed (after is the whole new tuple). Only the bytes
 * that changed are logged (a PATCH record), or the whole tuple when that is
 * not smaller. before NULL (no before-image: another host's tuple, written
 * in a copy) logs bytes lo..hi-1 as they are. No-op when lw is NULL. */
void log_txn_update(pod_db *db, struct log_worker *lw, const pod_table *t, const void *key,
                    uint64_t ev, uint64_t base_ev, const void *before, uint32_t lo, uint32_t hi,
                    const void *after);
/* A row of this host's whose delete committed (at epoch-version ev) is about
 * to leave its index: called before it does, so that the next checkpoint,
 * which will not find it in the tree, records the delete (checkpoint.c).
 * Also for a row another host deleted in CXL memory. */
void log_row_removed(pod_db *db, const pod_table *t, const void *key, uint64_t ev);
/* The worker will not commit for a while (it waits for work, or exits): hand
 * its buffer over and stop holding back the durable epoch. */
void log_worker_idle_hook(pod_db *db, int worker_id);
/* Between two attempts of a call that conflicted (no locks held, nothing of
 * it logged): once E has moved past the worker's epoch, hand its buffer
 * over and publish idle, as a worker that waits for work does. A call that
 * keeps retrying then holds back neither the durable epoch nor the replies
 * of others' commits that wait for it. */
void log_worker_retry_hook(pod_db *db, int worker_id);
/* The epoch of the worker's last commit (0 when it never committed). */
uint64_t log_last_commit_epoch(pod_db *db, int worker_id);

#endif
