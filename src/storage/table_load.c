#include "storage/table_load.h"

#include <string.h>

#include "storage/ebr.h"

enum table_install_result table_install(pod_table *t, const void *key, uint64_t ev,
                                        const void *tuple)
{
    uint32_t part = table_partition_of(t, key);
    struct pod_row *row = table_lookup(t, part, key, NULL);
    if (row) {
        if (row->epoch_version >= ev) return TABLE_NOT_NEWER;
        if (tuple) memcpy(row->tuple, tuple, t->tuple_size);
        row->epoch_version = ev;
        row_set_valid(row, tuple != NULL);
        return TABLE_INSTALLED;
    }
    if (!(row = row_alloc(t))) return TABLE_INSTALL_NOMEM;
    if (tuple) memcpy(row->tuple, tuple, t->tuple_size);
    row->epoch_version = ev;
    row->lock = tuple ? ROW_VALID : 0;
    bt_status st = table_index_insert(t, part, key, row, NULL);
    if (st != BT_OK) { /* BT_EXISTS cannot happen: one thread per key */
        row_free(t, row);
        return TABLE_INSTALL_NOMEM;
    }
    return TABLE_INSTALLED;
}

enum table_install_result table_patch(pod_table *t, const void *key, uint64_t ev,
                                      uint64_t base_ev, uint32_t offset, const void *bytes,
                                      uint32_t len)
{
    struct pod_row *row = table_lookup(t, table_partition_of(t, key), key, NULL);
    if (!row) return TABLE_NO_BASE;
    if (row->epoch_version >= ev) return TABLE_NOT_NEWER;
    if (row->epoch_version != base_ev || !row_valid(row)) return TABLE_NO_BASE;
    memcpy(row->tuple + offset, bytes, len);
    row->epoch_version = ev;
    return TABLE_INSTALLED;
}

int table_drop_tombstone(pod_table *t, const void *key, struct ebr_domain *ebr, int slot)
{
    uint32_t part = table_partition_of(t, key);
    struct pod_row *row = table_lookup(t, part, key, NULL);
    if (!row || row_valid(row)) return 0;
    table_index_remove(t, part, key);
    if (ebr) ebr_retire(ebr, slot, row, row_free_cb, t);
    else row_free(t, row);
    return 1;
}
