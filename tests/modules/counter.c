/* A stored-procedure module, as a user would write one: a table of named
 * counters and counter.incr(name, delta) -> the new value. Built by the
 * Makefile as build/test/modules/counter.so; include/poddb/proc.h is the
 * whole API it uses. */
#include "poddb/proc.h"

#define NAME_BYTES 32

static pod_table *counters;

static int incr(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    if (a->v[0].len > NAME_BYTES)
        return pod_txn_fail(tx, POD_E_INVALID, "counter names have at most %d bytes", NAME_BYTES);
    unsigned char key[NAME_BYTES] = {0};
    memcpy(key, a->v[0].u.bytes, a->v[0].len);
    int64_t value = 0;
    int rc = pod_get_for_update(tx, counters, key, &value);
    if (rc < 0) return rc;
    value += a->v[1].u.i64;
    POD_TRY(rc == POD_NOT_FOUND ? pod_insert(tx, counters, key, &value)
                                : pod_put(tx, counters, key, &value));
    pod_result_i64(res, value);
    return POD_OK;
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    pod_table_def def = {.name = "counters", .key_size = NAME_BYTES, .tuple_size = sizeof(int64_t),
                         .nparts = 1};
    if (!(counters = pod_table_create(db, &def, err, errlen))) return -1;
    static const enum pod_type types[] = {POD_T_BYTES, POD_T_I64};
    pod_proc_def p = {"counter.incr", incr, NULL, 2, types, false};
    return pod_proc_register(db, &p, err, errlen) < 0 ? -1 : 0;
}
