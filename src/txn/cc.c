/* The stored-procedure API (include/poddb/proc.h) and the worker's
 * transaction calls (txn.h), passed on to the database's protocol (cc.h). */
#include "txn/cc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "storage/table.h"
#include "store/record_store.h"
#include "txn/txn.h"
#include "util/log.h"

struct pod_txn *txn_new(pod_db *db, struct pod_worker *w) { return db->cc->txn_new(db, w); }

struct record_store *cc_store_handle(pod_db *db, struct pod_worker *w)
{
    struct record_store *s = db->store;
    if (!s || !s->ops->attach) return s;
    pod_err e;
    struct record_store *h = s->ops->attach(s, &e);
    if (h) return h;
    pod_warn("worker %d shares the %s store's connection with the other workers: %s", w->id,
             s->ops->name, e.msg);
    return s;
}

void txn_free(struct pod_txn *tx)
{
    if (tx) cc_of(tx)->txn_free(tx);
}

void txn_begin(struct pod_txn *tx) { cc_of(tx)->begin(tx); }
void txn_commit(struct pod_txn *tx) { cc_of(tx)->commit(tx); }
void txn_abort(struct pod_txn *tx) { cc_of(tx)->abort(tx); }
int txn_status(const struct pod_txn *tx) { return cc_of(tx)->status(tx); }
enum pod_abort_cause txn_abort_cause(const struct pod_txn *tx) { return cc_of(tx)->abort_cause(tx); }
const char *txn_message(const struct pod_txn *tx)
{
    return cc_of(tx)->message((struct pod_txn *)tx);
}
bool txn_touched_tables(const struct pod_txn *tx) { return cc_of(tx)->touched_tables(tx); }
void txn_describe_conflict(const struct pod_txn *tx, char *out, size_t n)
{
    if (cc_of(tx)->describe_conflict) cc_of(tx)->describe_conflict(tx, out, n);
    else snprintf(out, n, "not recorded by %s", cc_of(tx)->name);
}

pod_db *pod_txn_db(pod_txn *tx) { return cc_of(tx)->db(tx); }

int pod_txn_fail(pod_txn *tx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc_of(tx)->message(tx), CC_MSG_LEN, fmt, ap);
    va_end(ap);
    return status;
}

int pod_get(pod_txn *tx, pod_table *t, const void *key, void *tuple_out)
{
    return cc_of(tx)->get(tx, t, key, tuple_out, false);
}

int pod_get_for_update(pod_txn *tx, pod_table *t, const void *key, void *tuple_out)
{
    return cc_of(tx)->get(tx, t, key, tuple_out, true);
}

int pod_get_ref(pod_txn *tx, pod_table *t, const void *key, const void **tuple)
{
    return cc_of(tx)->get_ref(tx, t, key, tuple);
}

int pod_update_ref(pod_txn *tx, pod_table *t, const void *key, void **tuple)
{
    return cc_of(tx)->update_range(tx, t, key, true, 0, 0, tuple);
}

int pod_update_range(pod_txn *tx, pod_table *t, const void *key, uint32_t off, uint32_t len,
                     void **tuple)
{
    return cc_of(tx)->update_range(tx, t, key, false, off, len, tuple);
}

int pod_put(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    return cc_of(tx)->put(tx, t, key, tuple);
}

int pod_insert(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    return cc_of(tx)->insert(tx, t, key, tuple);
}

int pod_delete(pod_txn *tx, pod_table *t, const void *key)
{
    return cc_of(tx)->remove(tx, t, key);
}

int pod_prefetch(pod_txn *tx, pod_table *t, const void *keys, uint32_t n)
{
    return cc_of(tx)->prefetch(tx, t, keys, n);
}

int pod_scan(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
             unsigned flags, pod_scan_fn fn, void *arg)
{
    return cc_of(tx)->scan(tx, t, lo, hi, limit, flags, fn, arg);
}

/* Tigon/SiloR: a tuple written again in the same epoch gets version + 1,
 * in a new epoch version 0. */
uint64_t txn_next_epoch_version(uint64_t ev, uint64_t epoch)
{
    return (ev >> 32) == epoch ? ev + 1 : epoch << 32;
}

/* ---- argument checks -------------------------------------------------------- */

static int check_table(pod_txn *tx, const pod_db *db, const pod_table *t)
{
    if (!t || t->db != db)
        return pod_txn_fail(tx, POD_E_INVALID, "table handle does not belong to this database");
    return POD_OK;
}

int cc_check_key(pod_txn *tx, const pod_db *db, const pod_table *t, const void *key)
{
    int rc = check_table(tx, db, t);
    if (rc) return rc;
    if (!key) return pod_txn_fail(tx, POD_E_INVALID, "%s: key is NULL", t->name);
    return POD_OK;
}

int cc_check_range(pod_txn *tx, const pod_table *t, uint32_t off, uint32_t len)
{
    if (len == 0 || off > t->tuple_size || len > t->tuple_size - off)
        return pod_txn_fail(tx, POD_E_INVALID, "%s: bytes %" PRIu32 "+%" PRIu32
                            " are not within its %" PRIu32 "-byte tuples", t->name, off, len,
                            t->tuple_size);
    return POD_OK;
}

int cc_check_scan(pod_txn *tx, const pod_db *db, const pod_table *t, const void *lo,
                  const void *hi, uint32_t *part)
{
    int rc = check_table(tx, db, t);
    if (rc) return rc;
    *part = 0;
    if (lo) *part = table_partition_of(t, lo);
    else if (hi) *part = table_partition_of(t, hi);
    else if (t->nparts > 1)
        return pod_txn_fail(tx, POD_E_INVALID,
                            "%s: an unbounded scan needs lo or hi to pick a partition", t->name);
    if (lo && hi && table_partition_of(t, hi) != *part)
        return pod_txn_fail(tx, POD_E_INVALID, "%s: the scan range crosses partitions", t->name);
    if (lo && hi && memcmp(lo, hi, t->key_size) > 0) return 1; /* empty range */
    return POD_OK;
}
