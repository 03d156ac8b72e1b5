/* The database's procedures and workers as include/poddb/proc.h shows them
 * to workloads: by number, without the engine's structs. */
#include <stddef.h>

#include "engine/db.h"
#include "engine/worker.h"
#include "storage/table.h"
#include "store/record_store.h"

int pod_proc_count(const pod_db *db) { return (int)db->nprocs; }

const char *pod_proc_name(const pod_db *db, int proc)
{
    return proc >= 0 && proc < (int)db->nprocs ? db->procs[proc].name : NULL;
}

void *pod_proc_ctx(const pod_db *db, int proc)
{
    return proc >= 0 && proc < (int)db->nprocs ? db->procs[proc].ctx : NULL;
}

void pod_proc_set_ctx(pod_db *db, int proc, void *ctx)
{
    if (proc >= 0 && proc < (int)db->nprocs) db->procs[proc].ctx = ctx;
}

int pod_db_nworkers(const pod_db *db) { return db->opt.nworkers; }
pod_db *pod_worker_db(const struct pod_worker *w) { return w->db; }
int pod_worker_id(const struct pod_worker *w) { return w->id; }

/* A database without a record store keeps its tables in B+-trees. */
bool pod_table_ordered(const pod_table *t)
{
    const struct record_store *rs = t->db->store;
    return !rs || rs->ops->ordered;
}
