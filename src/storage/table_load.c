#include "storage/table_load.h"

#include <string.h>

#include "engine/worker.h"
#include "txn/ebr.h"

enum table_install_result table_install(pod_table *t, const void *key, uint64_t ev,
                                        const void *tuple)
{
    bt_tree *tree = &t->parts[table_partition_of(t, key)].tree;
    uint64_t v;
    if (bt_lookup(tree, key, &v) == BT_OK) {
        struct pod_row *row = (struct pod_row *)(uintptr_t)v;
        if (row->epoch_version >= ev) return TABLE_NOT_NEWER;
        if (tuple) memcpy(row->tuple, tuple, t->tuple_size);
        row->epoch_version = ev;
        __atomic_store_n(&row->valid, tuple ? 1u : 0u, __ATOMIC_RELEASE);
        return TABLE_INSTALLED;
    }
    struct pod_row *row = row_alloc(t);
    if (!row) return TABLE_INSTALL_NOMEM;
    if (tuple) memcpy(row->tuple, tuple, t->tuple_size);
    memcpy(row_key(t, row), key, t->key_size);
    row->epoch_version = ev;
    row->valid = tuple ? 1u : 0u;
    bt_status st = bt_insert(tree, key, (uint64_t)(uintptr_t)row);
    if (st != BT_OK) { /* BT_EXISTS cannot happen: one thread per key */
        row_free(row);
        return TABLE_INSTALL_NOMEM;
    }
    return TABLE_INSTALLED;
}

static void row_free_cb(void *ctx, void *row)
{
    (void)ctx;
    row_free(row);
}

int table_drop_tombstone(pod_table *t, const void *key)
{
    bt_tree *tree = &t->parts[table_partition_of(t, key)].tree;
    uint64_t v;
    if (bt_lookup(tree, key, &v) != BT_OK) return 0;
    struct pod_row *row = (struct pod_row *)(uintptr_t)v;
    if (row_valid(row)) return 0;
    bt_remove(tree, key, NULL);
    struct pod_worker *w = pod_current_worker();
    if (w && w->db == t->db) ebr_retire(t->db->ebr, w->id, row, row_free_cb, NULL);
    else row_free(row);
    return 1;
}
