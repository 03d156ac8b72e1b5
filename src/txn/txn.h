/* A transaction of one worker: strict 2PL with NO_WAIT and next-key locking.
 * The operations themselves are the public API in include/poddb/proc.h. */
#ifndef PODDB_TXN_TXN_H
#define PODDB_TXN_TXN_H

#include "db/types.h"
#include "storage/table.h"

struct pod_txn *txn_new(pod_db *db, struct pod_worker *w);
void txn_free(struct pod_txn *tx);
void txn_begin(struct pod_txn *tx);
/* Make the writes visible and release every lock. */
void txn_commit(struct pod_txn *tx);
/* Undo the writes and release every lock. */
void txn_abort(struct pod_txn *tx);
/* POD_OK, or the sticky POD_CONFLICT that doomed this attempt. */
int txn_status(const struct pod_txn *tx);
enum pod_abort_cause txn_abort_cause(const struct pod_txn *tx);
const char *txn_message(const struct pod_txn *tx);
/* The lock the last attempt's conflict met, in words (out: n bytes). */
void txn_describe_conflict(const struct pod_txn *tx, char *out, size_t n);
/* Whether the last transaction begun asked for a table operation. One that
 * did not (a sys.* call) read nothing committed: its reply need not wait
 * for durability. */
bool txn_touched_tables(const struct pod_txn *tx);

#endif
