#include "workloads/common/procs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void *wl_ctx_get(pod_db *db, const char *first)
{
    return pod_proc_ctx(db, pod_proc_find(db, first));
}

void wl_ctx_free(pod_db *db, const char *first, const char *prefix)
{
    int p = pod_proc_find(db, first);
    if (p < 0) return;
    free(pod_proc_ctx(db, p));
    size_t n = strlen(prefix);
    for (int i = 0; i < pod_proc_count(db); i++)
        if (strncmp(pod_proc_name(db, i), prefix, n) == 0) pod_proc_set_ctx(db, i, NULL);
}

int wl_call(pod_db *db, struct pod_worker *wk, int proc, const pod_args *args, pod_result *res,
            char *msg, size_t msglen)
{
    if (wk) return pod_call(wk, proc, args, res, msg, msglen);
    struct pod_worker *a = pod_admin_begin(db);
    int rc = pod_call(a, proc, args, res, msg, msglen);
    pod_admin_end(db);
    return rc;
}

int wl_call_i64(pod_db *db, struct pod_worker *wk, int proc, const int64_t *args, int nargs,
                pod_result *res, char *msg, size_t msglen)
{
    pod_value v[4];
    if (nargs < 0 || nargs > 4) {
        snprintf(msg, msglen, "%d arguments (at most 4)", nargs);
        return POD_E_INVALID;
    }
    for (int i = 0; i < nargs; i++) v[i] = pod_v_i64(args[i]);
    pod_args a = {nargs, v};
    return wl_call(db, wk, proc, &a, res, msg, msglen);
}

int wl_unit_loaded(pod_txn *tx, pod_table *t, const void *key)
{
    const void *tuple;
    int rc = pod_get_ref(tx, t, key, &tuple);
    return rc == POD_OK ? 1 : rc == POD_NOT_FOUND ? 0 : rc;
}
