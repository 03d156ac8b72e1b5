/* The in-process array store (record_store.h): records in chunks of this
 * process's memory, each the record word followed by its row (the layout of
 * cxl/record.h, as a memory node keeps them), and a B+-tree per table from
 * key to location. A location is (chunk + 1) << 32 | offset in the chunk. */
#include "store/record_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record.h"
#include "storage/btree.h"

#define CHUNK_BYTES (4u << 20)
#define MAX_CHUNKS 65536u /* of at least CHUNK_BYTES: 256 GiB */

struct array_table {
    uint32_t key_size, tuple_size;
    uint32_t rec_bytes;      /* word, row header, tuple: a multiple of 8 */
    bt_header hdr;
    bt_tree tree;
    uint64_t freed;          /* records given back (kept: see record_store.h) */
    rs_loc sentinel;
};

struct array_store {
    struct record_store base;
    bt_local_space space;    /* the trees' nodes */
    struct array_table **tables;
    uint32_t ntables;        /* slots in tables */
    pthread_mutex_t mu;      /* allocation */
    unsigned char *chunk[MAX_CHUNKS]; /* published with release, read with acquire */
    uint32_t nchunks;        /* under mu */
    uint32_t used, cap;      /* of the last chunk, under mu */
};

#define WORD_BYTES 8u

static inline struct array_store *as_of(struct record_store *s) { return (struct array_store *)s; }

static inline unsigned char *rec_at(struct array_store *a, rs_loc loc)
{
    unsigned char *c = __atomic_load_n(&a->chunk[(loc >> 32) - 1], __ATOMIC_ACQUIRE);
    return c + (uint32_t)loc;
}
static inline uint64_t *word_at(struct array_store *a, rs_loc loc)
{
    return (uint64_t *)(void *)rec_at(a, loc);
}
static inline struct cxl_swcc_row *row_at(struct array_store *a, rs_loc loc)
{
    return (struct cxl_swcc_row *)(void *)(rec_at(a, loc) + WORD_BYTES);
}

static struct array_table *table_of(struct array_store *a, uint32_t id)
{
    return id < a->ntables ? a->tables[id] : NULL;
}

static int alloc(struct record_store *s, uint32_t table, const void *key, rs_loc *loc);

static int table_add(struct record_store *s, const struct rs_table_def *def, pod_err *err)
{
    struct array_store *a = as_of(s);
    if (table_of(a, def->id)) {
        pod_err_set(err, "record store: table %u added twice", def->id);
        return -1;
    }
    uint64_t bytes = ((uint64_t)WORD_BYTES + sizeof(struct cxl_swcc_row) + def->tuple_size + 7) &
                     ~(uint64_t)7;
    if (bytes > UINT32_MAX / 2) {
        pod_err_set(err, "record store: tuples of %u bytes are too large", def->tuple_size);
        return -1;
    }
    if (def->id >= a->ntables) {
        uint32_t n = def->id + 1;
        struct array_table **t = realloc(a->tables, n * sizeof *t);
        if (!t) goto nomem;
        memset(t + a->ntables, 0, (n - a->ntables) * sizeof *t);
        a->tables = t;
        a->ntables = n;
    }
    struct array_table *t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->key_size = def->key_size;
    t->tuple_size = def->tuple_size;
    t->rec_bytes = (uint32_t)bytes;
    bt_status st = bt_create(&t->tree, &t->hdr, &a->space.space,
                             &(bt_config){.key_width = def->key_size});
    if (st != BT_OK) {
        free(t);
        pod_err_set(err, "record store: index of table %u: %s", def->id, bt_status_name(st));
        return -1;
    }
    a->tables[def->id] = t;
    if (alloc(s, def->id, NULL, &t->sentinel) != RS_OK) {
        pod_err_set(err, "record store: out of memory for table %u's sentinel", def->id);
        return -1;
    }
    return 0;
nomem:
    pod_err_set(err, "record store: out of memory");
    return -1;
}

static rs_loc sentinel(struct record_store *s, uint32_t table)
{
    return table_of(as_of(s), table)->sentinel;
}

static int lookup(struct record_store *s, uint32_t table, const void *key, rs_loc *loc)
{
    return bt_lookup(&table_of(as_of(s), table)->tree, key, loc) == BT_OK ? RS_OK : RS_MISSING;
}

static int neighbour(struct record_store *s, uint32_t table, const void *key, bool inclusive,
                     bool backward, void *key_out, rs_loc *loc)
{
    const bt_tree *t = &table_of(as_of(s), table)->tree;
    bt_status st = backward ? bt_prev(t, key, inclusive, key_out, loc)
                            : bt_next(t, key, inclusive, key_out, loc);
    return st == BT_OK ? RS_OK : RS_MISSING;
}

static int index_insert(struct record_store *s, uint32_t table, const void *key, rs_loc loc)
{
    bt_status st = bt_insert(&table_of(as_of(s), table)->tree, key, loc);
    return st == BT_OK ? RS_OK : st == BT_EXISTS ? RS_EXISTS : RS_NOMEM;
}

static int index_remove(struct record_store *s, uint32_t table, const void *key)
{
    return bt_remove(&table_of(as_of(s), table)->tree, key, NULL) == BT_OK ? RS_OK : RS_MISSING;
}

/* In key order (the B+-tree's scan, with its guarantees under writes). */
static int walk(struct record_store *s, uint32_t table, rs_walk_fn fn, void *arg)
{
    bt_status st = bt_scan_forward(&table_of(as_of(s), table)->tree, NULL, true, fn, arg);
    return st == BT_OK ? RS_OK : RS_NOMEM;
}

static uint64_t word_read(struct record_store *s, rs_loc loc)
{
    return __atomic_load_n(word_at(as_of(s), loc), __ATOMIC_ACQUIRE);
}

static bool word_cas(struct record_store *s, rs_loc loc, uint64_t *expected, uint64_t desired)
{
    return __atomic_compare_exchange_n(word_at(as_of(s), loc), expected, desired, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static uint64_t word_faa(struct record_store *s, rs_loc loc, uint64_t add)
{
    return __atomic_fetch_add(word_at(as_of(s), loc), add, __ATOMIC_ACQ_REL);
}

/* A row's bytes are read by protocols that take no lock to read (ford,
 * motor) while their writer changes them: copied with relaxed atomics, 8
 * bytes at once where both sides are aligned, so that such a read is a
 * torn read (which those protocols detect) and not a data race. */
static void copy_out(void *dst, const unsigned char *shared, uint32_t len)
{
    unsigned char *d = dst;
    uint32_t i = 0;
    if ((((uintptr_t)d | (uintptr_t)shared) & 7) == 0)
        for (; i + 8 <= len; i += 8) {
            uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(shared + i),
                                         __ATOMIC_RELAXED);
            memcpy(d + i, &w, 8);
        }
    for (; i < len; i++) d[i] = __atomic_load_n(shared + i, __ATOMIC_RELAXED);
}

static void copy_in(unsigned char *shared, const void *src, uint32_t len)
{
    const unsigned char *b = src;
    uint32_t i = 0;
    if ((((uintptr_t)b | (uintptr_t)shared) & 7) == 0)
        for (; i + 8 <= len; i += 8) {
            uint64_t w;
            memcpy(&w, b + i, 8);
            __atomic_store_n((uint64_t *)(void *)(shared + i), w, __ATOMIC_RELAXED);
        }
    for (; i < len; i++) __atomic_store_n(shared + i, b[i], __ATOMIC_RELAXED);
}

/* The header is read before the tuple and written after it (acquire,
 * release): record_store.h's order. */
static void row_read(struct record_store *s, rs_loc loc, struct rs_row_head *head, void *buf,
                     uint32_t off, uint32_t len)
{
    struct cxl_swcc_row *r = row_at(as_of(s), loc);
    if (head) {
        head->epoch_version = __atomic_load_n(&r->epoch_version, __ATOMIC_ACQUIRE);
        head->valid = __atomic_load_n(&r->valid, __ATOMIC_ACQUIRE);
    }
    if (len) copy_out(buf, r->tuple + off, len);
}

static void row_write(struct record_store *s, rs_loc loc, const struct rs_row_head *head,
                      const void *buf, uint32_t off, uint32_t len)
{
    struct cxl_swcc_row *r = row_at(as_of(s), loc);
    if (len) copy_in(r->tuple + off, buf, len);
    if (head) {
        __atomic_store_n(&r->epoch_version, head->epoch_version, __ATOMIC_RELEASE);
        __atomic_store_n(&r->valid, head->valid, __ATOMIC_RELEASE);
    }
}

static int alloc(struct record_store *s, uint32_t table, const void *key, rs_loc *loc)
{
    (void)key; /* one memory: no placement */
    struct array_store *a = as_of(s);
    struct array_table *t = table_of(a, table);
    pthread_mutex_lock(&a->mu);
    if (!a->nchunks || a->cap - a->used < t->rec_bytes) {
        uint32_t cap = t->rec_bytes > CHUNK_BYTES ? t->rec_bytes : CHUNK_BYTES;
        unsigned char *c = a->nchunks < MAX_CHUNKS ? aligned_alloc(64, cap) : NULL;
        if (!c) {
            pthread_mutex_unlock(&a->mu);
            return RS_NOMEM;
        }
        memset(c, 0, cap);
        __atomic_store_n(&a->chunk[a->nchunks++], c, __ATOMIC_RELEASE);
        a->used = 0;
        a->cap = cap;
    }
    *loc = ((uint64_t)a->nchunks << 32) | a->used;
    a->used += t->rec_bytes;
    pthread_mutex_unlock(&a->mu);
    row_at(a, *loc)->tuple_size = t->tuple_size;
    return RS_OK;
}

static void free_rec(struct record_store *s, uint32_t table, rs_loc loc)
{
    (void)loc;
    __atomic_fetch_add(&table_of(as_of(s), table)->freed, 1, __ATOMIC_RELAXED);
}

static void destroy(struct record_store *s)
{
    struct array_store *a = as_of(s);
    if (!a) return;
    for (uint32_t i = 0; i < a->ntables; i++) {
        if (!a->tables[i]) continue;
        bt_destroy(&a->tables[i]->tree);
        free(a->tables[i]);
    }
    free(a->tables);
    bt_local_space_fini(&a->space);
    for (uint32_t i = 0; i < a->nchunks; i++) free(a->chunk[i]);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static const struct rs_ops array_ops = {
    .name = "array",
    .ordered = true,
    .table_add = table_add,
    .sentinel = sentinel,
    .lookup = lookup,
    .neighbour = neighbour,
    .index_insert = index_insert,
    .index_remove = index_remove,
    .walk = walk,
    .word_read = word_read,
    .word_cas = word_cas,
    .word_faa = word_faa,
    .row_read = row_read,
    .row_write = row_write,
    .alloc = alloc,
    .free = free_rec,
    .batch = rs_batch_in_order,
    .destroy = destroy,
};

struct record_store *rs_array_new(pod_err *err)
{
    struct array_store *a = calloc(1, sizeof *a);
    if (!a) {
        pod_err_set(err, "record store: out of memory");
        return NULL;
    }
    a->base.ops = &array_ops;
    bt_local_space_init(&a->space);
    pthread_mutex_init(&a->mu, NULL);
    return &a->base;
}
