/* Tables: a schema, and per partition a B+-tree from key to local row plus a
 * sentinel row that stands for "past the last key" in next-key locking. */
#ifndef PODDB_STORAGE_TABLE_H
#define PODDB_STORAGE_TABLE_H

#include "poddb/proc.h"
#include "storage/btree.h"
#include "storage/row.h"

struct pod_partition {
    bt_header hdr;
    bt_tree tree;
    struct pod_row *sentinel; /* never in the tree; locked for gaps at the end */
    uint32_t owner;           /* host that owns the partition */
    struct pod_part_cxl *cxl; /* in a pod: the partition's CXL side (src/pod/pod.h) */
};

struct pod_table {
    uint32_t id;
    char *name;
    uint32_t key_size, tuple_size, ncols, nparts;
    uint64_t expected_rows; /* pod_table_def's: a hint, 0 when not known */
    pod_column *cols;
    pod_partition_fn partition;
    void *partition_ctx;
    struct pod_partition *parts;
    pod_db *db;
    size_t row_bytes;      /* header and tuple, rounded up to 8 */
    struct row_slab *rows; /* where rows come from (NULL: malloc, for rows over 4 KiB) */
};

static inline uint32_t table_partition_of(const pod_table *t, const void *key)
{
    if (!t->partition) return 0;
    uint32_t p = t->partition(key, t->nparts, t->partition_ctx);
    return p < t->nparts ? p : p % t->nparts; /* a division only for a bad answer */
}

/* A row with a zeroed tuple, unlocked, invalid. NULL when out of memory.
 * The row does not hold its key: the index does, and whoever works on a
 * row came to it by its key (a transaction keeps it in its access set). */
struct pod_row *row_alloc(const pod_table *t);
void row_free(const pod_table *t, struct pod_row *r);
/* row_free as an EBR callback: ebr_retire(..., row, row_free_cb, table). */
void row_free_cb(void *table, void *row);
/* Bytes of memory the table's rows take (with free rows kept for reuse). */
uint64_t table_row_memory(const pod_table *t, uint64_t keys);

/* The partition's index, in one place (a second index beside the tree, a
 * row hash, did not pay: the tree's upper levels stay cached, so a descent
 * misses about as often as bucket and row, and every insert paid twice). */

/* The partition's row of key, or NULL (hint: bt_lookup_at's, may be NULL). */
static inline struct pod_row *table_lookup(const pod_table *t, uint32_t part, const void *key,
                                           bt_hint *hint)
{
    uint64_t v;
    return bt_lookup_at(&t->parts[part].tree, key, &v, hint) == BT_OK
               ? (struct pod_row *)(uintptr_t)v
               : NULL;
}

/* Bring the index paths and rows of n keys (keys[i] in partition parts[i],
 * n <= BT_PREFETCH_MAX) into the cache together (bt_prefetch); a hint for
 * what a transaction reads next. hints (may be NULL): the leaf each key's
 * descent reached, as bt_prefetch gives it; rows (may be NULL): each key's
 * row, NULL where the key was not found. Inside the caller's EBR section. */
void table_prefetch(const pod_table *t, const uint32_t *parts, const void *const *keys,
                    unsigned n, bt_hint *hints, struct pod_row **rows);

/* Put a row into the partition's index under key: BT_OK, BT_EXISTS or an
 * index error. hint: the operation's leaf hint (bt_hint), or NULL. */
bt_status table_index_insert(pod_table *t, uint32_t part, const void *key, struct pod_row *row,
                             bt_hint *hint);
/* Take the row out of the partition's index (before handing it to EBR). */
void table_index_remove(pod_table *t, uint32_t part, const void *key);

/* For pod_db: create/free the table object (the db owns the list). */
pod_table *table_new(pod_db *db, uint32_t id, const pod_table_def *def, const bt_space *space,
                     uint32_t nhosts, char *err, size_t errlen);
void table_free(pod_table *t);

#endif
