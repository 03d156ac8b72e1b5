/* The generic kv.* procedures on the tables declared under `tables:` in the
 * config (docs/procedures.md).
 *
 * A kv table stores byte-string keys of at most key_size bytes and values of
 * at most value_size bytes. Inside the engine the key is fixed-width: the
 * bytes padded with zeros, then one byte holding the length, so that "a" and
 * "a\0" differ and memcmp order is the byte-wise order of the keys (a prefix
 * sorts first). Partitions split the key space by first byte (range
 * partitioning), so a scan visits partitions in key order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/result.h"
#include "server/server.h"
#include "storage/table.h"

#define KV_MAX_TABLES POD_MAX_KV_TABLES
/* A reply must fit a frame (16 MiB); scans stop with an error past this. */
#define POD_PROTO_RESULT_BUDGET (15u << 20)

struct kv_table {
    pod_table *t;
    uint32_t key_size, value_size; /* the user-visible maxima */
};

static struct kv_table kv_tables[KV_MAX_TABLES];
static int kv_ntables;

/* Range partitioning on the first key byte. */
static uint32_t kv_partition(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    return (uint32_t)(((const unsigned char *)key)[0] * (uint64_t)nparts / 256);
}

static struct kv_table *find_kv(pod_txn *tx, const pod_value *name, int *rc)
{
    for (int i = 0; i < kv_ntables; i++) {
        const char *tn = pod_table_name(kv_tables[i].t);
        if (strlen(tn) == name->len && memcmp(tn, name->u.bytes, name->len) == 0)
            return &kv_tables[i];
    }
    *rc = pod_txn_fail(tx, POD_E_INVALID, "no kv table '%.*s' (tables are declared in the "
                       "config; see sys.tables)", (int)(name->len > 64 ? 64 : name->len),
                       (const char *)name->u.bytes);
    return NULL;
}

static int encode_key(pod_txn *tx, const struct kv_table *kt, const pod_value *k,
                      unsigned char *out)
{
    if (k->type != POD_T_BYTES)
        return pod_txn_fail(tx, POD_E_INVALID, "a key must be bytes");
    if (k->len > kt->key_size)
        return pod_txn_fail(tx, POD_E_INVALID, "key of %u bytes is longer than table %s's "
                            "key_size %u", k->len, pod_table_name(kt->t), kt->key_size);
    memcpy(out, k->u.bytes, k->len);
    memset(out + k->len, 0, kt->key_size - k->len);
    out[kt->key_size] = (unsigned char)k->len;
    return POD_OK;
}

static int encode_value(pod_txn *tx, const struct kv_table *kt, const pod_value *v,
                        unsigned char *tuple)
{
    if (v->type != POD_T_BYTES)
        return pod_txn_fail(tx, POD_E_INVALID, "a value must be bytes");
    if (v->len > kt->value_size)
        return pod_txn_fail(tx, POD_E_INVALID, "value of %u bytes is longer than table %s's "
                            "value_size %u", v->len, pod_table_name(kt->t), kt->value_size);
    uint32_t n = v->len;
    memcpy(tuple, &n, 4);
    memcpy(tuple + 4, v->u.bytes, n);
    memset(tuple + 4 + n, 0, kt->value_size - n);
    return POD_OK;
}

static uint32_t tuple_len(const unsigned char *tuple)
{
    uint32_t n;
    memcpy(&n, tuple, 4);
    return n;
}

/* One operation of kv.get/put/insert/delete on (table, key[, value]). For a
 * get that finds the key, the value is appended to res. */
enum kv_op { KV_GET, KV_PUT, KV_INSERT, KV_DELETE };

static int kv_apply(pod_txn *tx, enum kv_op op, const pod_value *a, pod_result *res)
{
    int rc = POD_OK;
    struct kv_table *kt = find_kv(tx, &a[0], &rc);
    if (!kt) return rc;
    unsigned char key[BT_MAX_KEY_WIDTH];
    POD_TRY(encode_key(tx, kt, &a[1], key));
    uint32_t tsz = pod_table_tuple_size(kt->t);
    unsigned char *tuple = malloc(tsz);
    if (!tuple) return pod_txn_fail(tx, POD_E_NOMEM, "out of memory");
    switch (op) {
    case KV_GET:
        rc = pod_get(tx, kt->t, key, tuple);
        if (rc == POD_OK && pod_result_bytes(res, tuple + 4, tuple_len(tuple)))
            rc = pod_txn_fail(tx, POD_E_NOMEM, "out of memory for the result");
        break;
    case KV_PUT: /* insert or overwrite */
        if ((rc = encode_value(tx, kt, &a[2], tuple))) break;
        rc = pod_put(tx, kt->t, key, tuple);
        if (rc == POD_NOT_FOUND) rc = pod_insert(tx, kt->t, key, tuple);
        break;
    case KV_INSERT:
        if ((rc = encode_value(tx, kt, &a[2], tuple))) break;
        rc = pod_insert(tx, kt->t, key, tuple);
        break;
    case KV_DELETE:
        rc = pod_delete(tx, kt->t, key);
        break;
    }
    free(tuple);
    return rc;
}

static int kv_get(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    return kv_apply(tx, KV_GET, a->v, res);
}
static int kv_put(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    return kv_apply(tx, KV_PUT, a->v, res);
}
static int kv_insert(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    return kv_apply(tx, KV_INSERT, a->v, res);
}
static int kv_delete(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    return kv_apply(tx, KV_DELETE, a->v, res);
}

/* ---- kv.scan ---------------------------------------------------------------- */

struct scan_out {
    pod_result *res;
    const struct kv_table *kt;
    uint64_t bytes, rows, limit;
    bool too_big;
};

static bool scan_row(void *arg, const void *key, const void *tuple)
{
    struct scan_out *o = arg;
    const unsigned char *k = key;
    uint32_t klen = k[o->kt->key_size], vlen = tuple_len(tuple);
    o->bytes += klen + vlen + 16;
    if (o->bytes > POD_PROTO_RESULT_BUDGET) {
        o->too_big = true;
        return false;
    }
    if (o->rows++) pod_result_row(o->res);
    pod_result_bytes(o->res, k, klen);
    pod_result_bytes(o->res, (const unsigned char *)tuple + 4, vlen);
    return !o->limit || o->rows < o->limit;
}

/* kv.scan(table, lo, hi[, limit[, reverse]]): rows [key, value] with
 * lo <= key <= hi; lo or hi null = unbounded. */
static int kv_scan(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    if (a->n < 3 || a->n > 5)
        return pod_txn_fail(tx, POD_E_INVALID,
                            "kv.scan takes table, lo, hi[, limit[, reverse]] (got %d arguments)",
                            a->n);
    int rc = POD_OK;
    struct kv_table *kt = find_kv(tx, &a->v[0], &rc);
    if (!kt) return rc;
    unsigned char lo[BT_MAX_KEY_WIDTH], hi[BT_MAX_KEY_WIDTH];
    bool has_lo = a->v[1].type != POD_T_NULL, has_hi = a->v[2].type != POD_T_NULL;
    if (has_lo) POD_TRY(encode_key(tx, kt, &a->v[1], lo));
    if (has_hi) POD_TRY(encode_key(tx, kt, &a->v[2], hi));
    int64_t limit = 0;
    bool reverse = false;
    if (a->n >= 4) {
        if (a->v[3].type != POD_T_I64 || a->v[3].u.i64 < 0)
            return pod_txn_fail(tx, POD_E_INVALID, "kv.scan: limit must be an int64 >= 0");
        limit = a->v[3].u.i64;
    }
    if (a->n == 5) {
        if (a->v[4].type != POD_T_I64)
            return pod_txn_fail(tx, POD_E_INVALID, "kv.scan: reverse must be an int64 (0 or 1)");
        reverse = a->v[4].u.i64 != 0;
    }
    uint32_t nparts = kt->t->nparts;
    uint32_t p_lo = has_lo ? kv_partition(lo, nparts, NULL) : 0;
    uint32_t p_hi = has_hi ? kv_partition(hi, nparts, NULL) : nparts - 1;
    struct scan_out o = {res, kt, 0, 0, (uint64_t)limit, false};
    /* One scan per partition, in key order; bounds apply in the end partitions. */
    for (uint32_t i = 0; p_lo <= p_hi && i <= p_hi - p_lo; i++) {
        uint32_t p = reverse ? p_hi - i : p_lo + i;
        unsigned char plo[BT_MAX_KEY_WIDTH], phi[BT_MAX_KEY_WIDTH];
        uint32_t w = kt->key_size + 1;
        /* The partition's own key range: first bytes [ceil(p*256/n), ceil((p+1)*256/n)). */
        memset(plo, 0, w);
        plo[0] = (unsigned char)((p * 256u + nparts - 1) / nparts);
        memset(phi, 0xff, w);
        phi[0] = (unsigned char)(((p + 1) * 256u + nparts - 1) / nparts - 1);
        const unsigned char *l = (has_lo && p == p_lo) ? lo : plo;
        const unsigned char *h = (has_hi && p == p_hi) ? hi : phi;
        /* pod_scan takes a 32-bit limit; a bigger one is as good as none. */
        int64_t rest = limit ? limit - (int64_t)o.rows : 0;
        if (limit && rest <= 0) break;
        uint32_t left = rest > (int64_t)UINT32_MAX ? 0 : (uint32_t)rest;
        rc = pod_scan(tx, kt->t, l, h, left, reverse ? POD_SCAN_REVERSE : 0, scan_row, &o);
        if (rc < 0) return rc;
        if (o.too_big)
            return pod_txn_fail(tx, POD_E_INVALID,
                                "kv.scan: the result passed %u bytes after %llu rows; use a "
                                "limit and continue from the last key",
                                POD_PROTO_RESULT_BUDGET, (unsigned long long)o.rows);
    }
    return POD_OK;
}

/* ---- kv.multi -------------------------------------------------------------------
 * kv.multi(op, args..., op, args..., ...) runs the operations as one
 * transaction: "get" t k | "put" t k v | "insert" t k v | "delete" t k. Each
 * adds one result row: [status] or, for a get that found the key, [0, value]. */
static int kv_multi_ops(pod_txn *tx, const pod_args *a, pod_result *res, pod_result *scratch)
{
    static const struct {
        const char *name;
        enum kv_op op;
        int nargs;
    } ops[] = {{"get", KV_GET, 2}, {"put", KV_PUT, 3}, {"insert", KV_INSERT, 3},
               {"delete", KV_DELETE, 2}};
    if (a->n == 0) return pod_txn_fail(tx, POD_E_INVALID, "kv.multi needs at least one operation");
    int row = 0;
    for (int i = 0; i < a->n;) {
        const pod_value *opv = &a->v[i];
        int k = -1;
        for (int j = 0; j < 4 && opv->type == POD_T_BYTES; j++)
            if (strlen(ops[j].name) == opv->len && memcmp(ops[j].name, opv->u.bytes, opv->len) == 0)
                k = j;
        if (k < 0)
            return pod_txn_fail(tx, POD_E_INVALID, "kv.multi: argument %d must be an operation "
                                "(get, put, insert, delete)", i + 1);
        if (i + 1 + ops[k].nargs > a->n)
            return pod_txn_fail(tx, POD_E_INVALID, "kv.multi: %s at argument %d needs %d "
                                "arguments", ops[k].name, i + 1, ops[k].nargs);
        for (int j = 1; j <= ops[k].nargs; j++)
            if (a->v[i + j].type != POD_T_BYTES)
                return pod_txn_fail(tx, POD_E_INVALID, "kv.multi: argument %d must be bytes",
                                    i + j + 1);
        if (row++) pod_result_row(res);
        /* The status comes first in the row, so a get runs into the scratch result. */
        pod_result_clear(scratch);
        int rc = kv_apply(tx, ops[k].op, &a->v[i + 1], scratch);
        if (rc < 0) return rc;
        pod_result_i64(res, rc);
        pod_value v;
        if (rc == POD_OK && pod_result_get(scratch, 0, 0, &v) == 0)
            pod_result_bytes(res, v.u.bytes, v.len);
        i += 1 + ops[k].nargs;
    }
    return POD_OK;
}

static int kv_multi(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    pod_result *scratch = pod_result_new();
    if (!scratch) return pod_txn_fail(tx, POD_E_NOMEM, "out of memory");
    int rc = kv_multi_ops(tx, a, res, scratch);
    pod_result_free(scratch);
    return rc;
}

int pod_builtin_kv_init(pod_db *db, const struct pod_config *c, char *err, size_t errlen)
{
    kv_ntables = 0;
    for (int i = 0; i < c->ntables; i++) {
        const struct pod_kv_table_conf *tc = &c->tables[i];
        pod_table_def def = {.name = tc->name, .key_size = tc->key_size + 1,
                             .tuple_size = tc->value_size + 4, .nparts = tc->partitions,
                             .partition = kv_partition};
        pod_table *t = pod_table_create(db, &def, err, errlen);
        if (!t) return -1;
        kv_tables[kv_ntables++] = (struct kv_table){t, tc->key_size, tc->value_size};
    }
    static const enum pod_type t2[] = {POD_T_BYTES, POD_T_BYTES};
    static const enum pod_type t3[] = {POD_T_BYTES, POD_T_BYTES, POD_T_BYTES};
    const pod_proc_def defs[] = {
        {"kv.get", kv_get, NULL, 2, t2, true},
        {"kv.put", kv_put, NULL, 3, t3, false},
        {"kv.insert", kv_insert, NULL, 3, t3, false},
        {"kv.delete", kv_delete, NULL, 2, t2, false},
        {"kv.scan", kv_scan, NULL, -1, NULL, true},
        {"kv.multi", kv_multi, NULL, -1, NULL, false},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
