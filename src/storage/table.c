#include "storage/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/row_slab.h"

/* Rows are not cache-line aligned: that would cost a larger block for every
 * size that is not a multiple of 64. Only one host's workers touch its rows. */
struct pod_row *row_alloc(const pod_table *t)
{
    return t->rows ? row_slab_alloc(t->rows) : calloc(1, t->row_bytes);
}

void row_free(const pod_table *t, struct pod_row *r)
{
    if (!r) return;
    if (t->rows) row_slab_free(t->rows, r);
    else free(r);
}

void row_free_cb(void *table, void *row) { row_free(table, row); }

uint64_t table_row_memory(const pod_table *t, uint64_t keys)
{
    return t->rows ? row_slab_bytes(t->rows) : keys * t->row_bytes;
}

#define PREFETCH_ROW_BYTES 512u /* the row's lock word and the start of its tuple */

void table_prefetch(const pod_table *t, const uint32_t *parts, const void *const *keys,
                    unsigned n, bt_hint *hints, struct pod_row **rows_out)
{
    const bt_tree *trees[BT_PREFETCH_MAX];
    uint64_t rows[BT_PREFETCH_MAX];
    if (n == 0) return;
    if (n > BT_PREFETCH_MAX) n = BT_PREFETCH_MAX;
    for (unsigned i = 0; i < n; i++) trees[i] = &t->parts[parts[i]].tree;
    bt_prefetch(trees, keys, n, rows, hints);
    size_t bytes = t->row_bytes;
    if (bytes > PREFETCH_ROW_BYTES) bytes = PREFETCH_ROW_BYTES;
    for (unsigned i = 0; i < n; i++) {
        const char *r = (const char *)(uintptr_t)rows[i];
        if (rows_out) rows_out[i] = (struct pod_row *)(uintptr_t)r;
        if (!r) continue;
        /* Every cache line the row's first bytes touch (rows are 8-aligned). */
        const char *line = (const char *)((uintptr_t)r & ~(uintptr_t)63);
        for (; line < r + bytes; line += 64) __builtin_prefetch(line);
    }
}

bt_status table_index_insert(pod_table *t, uint32_t part, const void *key, struct pod_row *row,
                             bt_hint *hint)
{
    return bt_insert_at(&t->parts[part].tree, key, (uint64_t)(uintptr_t)row, hint);
}

void table_index_remove(pod_table *t, uint32_t part, const void *key)
{
    bt_remove(&t->parts[part].tree, key, NULL);
}

uint32_t pod_part_be64(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    return nparts ? (uint32_t)(pod_key_get_u64(key) % nparts) : 0;
}

static int col_check(const pod_table_def *def, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < def->ncols; i++) {
        const pod_column *c = &def->cols[i];
        if (!c->name || !*c->name) {
            snprintf(err, errlen, "table %s: column %u has no name", def->name, i);
            return -1;
        }
        uint32_t want = c->type == POD_COL_I32 ? 4 : c->type == POD_COL_BYTES ? c->size : 8;
        if (c->type < POD_COL_I64 || c->type > POD_COL_I32 || c->size != want || c->size == 0) {
            snprintf(err, errlen, "table %s: column %s has type %d and size %u", def->name,
                     c->name, (int)c->type, c->size);
            return -1;
        }
        if ((uint64_t)c->offset + c->size > def->tuple_size) {
            snprintf(err, errlen, "table %s: column %s (offset %u, size %u) ends past the %u-byte "
                     "tuple", def->name, c->name, c->offset, c->size, def->tuple_size);
            return -1;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(def->cols[j].name, c->name) == 0) {
                snprintf(err, errlen, "table %s: column %s appears twice", def->name, c->name);
                return -1;
            }
    }
    return 0;
}

pod_table *table_new(pod_db *db, uint32_t id, const pod_table_def *def, const bt_space *space,
                     uint32_t nhosts, char *err, size_t errlen)
{
    if (!def->name || !*def->name) {
        snprintf(err, errlen, "a table needs a name");
        return NULL;
    }
    if (def->key_size == 0 || def->key_size > BT_MAX_KEY_WIDTH) {
        snprintf(err, errlen, "table %s: key_size %u is out of range (1..%u)", def->name,
                 def->key_size, BT_MAX_KEY_WIDTH);
        return NULL;
    }
    if (def->tuple_size == 0 || def->tuple_size > POD_MAX_TUPLE_SIZE) {
        snprintf(err, errlen, "table %s: tuple_size %u is out of range (1..%u)", def->name,
                 def->tuple_size, POD_MAX_TUPLE_SIZE);
        return NULL;
    }
    if (def->ncols && !def->cols) {
        snprintf(err, errlen, "table %s: ncols is %u but cols is NULL", def->name, def->ncols);
        return NULL;
    }
    if (col_check(def, err, errlen)) return NULL;
    pod_table *t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->id = id;
    t->db = db;
    t->key_size = def->key_size;
    t->tuple_size = def->tuple_size;
    t->nparts = def->nparts ? def->nparts : 1;
    t->expected_rows = def->expected_rows;
    t->partition = def->partition;
    t->partition_ctx = def->partition_ctx;
    t->row_bytes = (sizeof(struct pod_row) + def->tuple_size + 7) & ~(size_t)7;
    if (t->row_bytes <= ROW_SLAB_MAX_BLOCK && !(t->rows = row_slab_new(t->row_bytes))) goto nomem;
    t->name = strdup(def->name);
    t->cols = calloc(def->ncols ? def->ncols : 1, sizeof *t->cols);
    t->parts = calloc(t->nparts, sizeof *t->parts);
    if (!t->name || !t->cols || !t->parts) goto nomem;
    for (uint32_t i = 0; i < def->ncols; i++) {
        t->cols[i] = def->cols[i];
        if (!(t->cols[i].name = strdup(def->cols[i].name))) goto nomem;
        t->ncols = i + 1;
    }
    for (uint32_t p = 0; p < t->nparts; p++) {
        struct pod_partition *pt = &t->parts[p];
        pt->owner = nhosts ? p % nhosts : 0;
        bt_config bc = {def->key_size, def->index_node_size};
        bt_status st = bt_create(&pt->tree, &pt->hdr, space, &bc);
        if (st == BT_INVALID && def->index_node_size) {
            snprintf(err, errlen, "table %s: index_node_size %u is not a multiple of 8 from %u to "
                     "%u holding at least 4 keys of %u bytes", def->name, def->index_node_size,
                     BT_MIN_NODE_SIZE, BT_MAX_NODE_SIZE, def->key_size);
            table_free(t);
            return NULL;
        }
        if (st != BT_OK) {
            snprintf(err, errlen, "table %s: index: %s", def->name, bt_status_name(st));
            table_free(t);
            return NULL;
        }
        if (!(pt->sentinel = row_alloc(t))) goto nomem;
    }
    return t;
nomem:
    snprintf(err, errlen, "table %s: out of memory", def->name);
    table_free(t);
    return NULL;
}

/* Drop every row and index node. No transaction may be running, and no
 * row of the table may wait in EBR (pod_db_free drains it first). */
static bool free_row_visit(void *arg, const void *key, uint64_t value)
{
    (void)key;
    row_free(arg, (struct pod_row *)(uintptr_t)value);
    return true;
}

void table_free(pod_table *t)
{
    if (!t) return;
    for (uint32_t p = 0; t->parts && p < t->nparts; p++) {
        struct pod_partition *pt = &t->parts[p];
        if (pt->tree.hdr) {
            /* A slab's rows all go with it. */
            if (!t->rows) bt_scan_forward(&pt->tree, NULL, true, free_row_visit, t);
            bt_destroy(&pt->tree);
        }
        row_free(t, pt->sentinel);
    }
    row_slab_destroy(t->rows);
    for (uint32_t i = 0; i < t->ncols; i++) free((char *)t->cols[i].name);
    free(t->cols);
    free(t->parts);
    free(t->name);
    free(t);
}

const char *pod_table_name(const pod_table *t) { return t->name; }
uint32_t pod_table_key_size(const pod_table *t) { return t->key_size; }
uint32_t pod_table_tuple_size(const pod_table *t) { return t->tuple_size; }
uint32_t pod_table_ncols(const pod_table *t) { return t->ncols; }
int pod_table_part_host(const pod_table *t, uint32_t part)
{
    return part < t->nparts ? (int)t->parts[part].owner : -1;
}
const pod_column *pod_table_col(const pod_table *t, uint32_t i)
{
    return i < t->ncols ? &t->cols[i] : NULL;
}
int pod_table_col_index(const pod_table *t, const char *name)
{
    for (uint32_t i = 0; i < t->ncols; i++)
        if (strcmp(t->cols[i].name, name) == 0) return (int)i;
    return -1;
}
