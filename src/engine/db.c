#include "engine/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "engine/worker.h"
#include "log/txlog.h"
#include "storage/ebr.h"
#include "storage/table.h"
#include "store/record_store.h"
#include "txn/cc.h"
#include "txn/txn.h"

#define DEFAULT_MAX_RETRIES 100000

const char *pod_abort_cause_name(enum pod_abort_cause c)
{
    static const char *const names[POD_CAUSE_COUNT] = {"read_lock", "write_lock", "upgrade",
                                                       "next_key", "remote_busy", "hwcc_full",
                                                       "validation"};
    return (unsigned)c < POD_CAUSE_COUNT ? names[c] : "unknown";
}

void pod_causes_text(const uint32_t *by_cause, char *out, size_t len)
{
    size_t n = 0;
    out[0] = 0;
    for (int c = 0; c < POD_CAUSE_COUNT && n < len; c++)
        if (by_cause[c])
            n += (size_t)snprintf(out + n, len - n, "%s%s %u", n ? ", " : "",
                                  pod_abort_cause_name((enum pod_abort_cause)c), by_cause[c]);
    if (!n) snprintf(out, len, "none");
}

/* Local index nodes: cache-line aligned heap memory, freed through EBR. */
static void *node_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

static void node_free_cb(void *ctx, void *node)
{
    (void)ctx;
    free(node);
}

static void node_retire(void *ctx, void *node, size_t size)
{
    (void)size;
    pod_db *db = ctx;
    struct pod_worker *w = pod_current_worker();
    if (w && w->db == db) ebr_retire(db->ebr, w->id, node, node_free_cb, NULL);
    else free(node); /* setup or teardown: no concurrent reader */
}

/* db->hooks.run_workers (db/types.h): run body on every worker thread and wait for them. */
static int run_workers(pod_db *db, const int *cpus, int ncpus,
                       void (*body)(struct pod_worker *w, void *arg), void *arg, char *err,
                       size_t errlen)
{
    if (pod_workers_start(db, cpus, ncpus, body, arg, err, errlen)) return -1;
    pod_workers_join(db);
    return 0;
}

static struct pod_worker *worker_new(pod_db *db, int id)
{
    struct pod_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->db = db;
    w->id = id;
    w->cpu = -1;
    w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1) ^ (uint64_t)(uintptr_t)w;
    if (!(w->tx = txn_new(db, w))) {
        free(w);
        return NULL;
    }
    return w;
}

static void worker_free(struct pod_worker *w)
{
    if (!w) return;
    txn_free(w->tx);
    free(w);
}

/* A given store belongs to the database from pod_db_new on. */
static pod_db *refuse(const struct pod_db_options *o)
{
    if (o->store == POD_STORE_GIVEN && o->given_store) o->given_store->ops->destroy(o->given_store);
    return NULL;
}

pod_db *pod_db_new(const struct pod_db_options *o, char *err, size_t errlen)
{
    if (o->nworkers < 1 || o->nworkers > POD_MAX_WORKERS) {
        snprintf(err, errlen, "nworkers %d is out of range (1..%d)", o->nworkers, POD_MAX_WORKERS);
        return refuse(o);
    }
    if (o->lanes > 1 && (o->nworkers % o->lanes || o->store != POD_STORE_GIVEN ||
                         !o->given_store || !o->given_store->ops->attach)) {
        snprintf(err, errlen, "%d lanes per worker thread need %s", o->lanes,
                 o->nworkers % o->lanes ? "a number of workers that is a multiple of them"
                                        : "a record store whose workers have handles of their "
                                          "own (the dm store)");
        return refuse(o);
    }
    if (o->nhosts < 1 || o->host_id < 0 || o->host_id >= o->nhosts) {
        snprintf(err, errlen, "host %d of %d hosts is out of range", o->host_id, o->nhosts);
        return refuse(o);
    }
    pod_db *db = calloc(1, sizeof *db);
    if (!db) {
        snprintf(err, errlen, "out of memory creating the database");
        return refuse(o);
    }
    db->opt = *o;
    if (db->opt.max_retries <= 0) db->opt.max_retries = DEFAULT_MAX_RETRIES;
    if (db->opt.no_locking) db->opt.phantom_protection = false; /* no locks, no gap locks */
    db->epoch = 1;
    pthread_mutex_init(&db->admin_lock, NULL);
    db->space = (bt_space){NULL, node_alloc, node_retire, db};
    db->cc = &cc_tigon_2pl;
    if (o->store == POD_STORE_ARRAY) {
        pod_err e;
        if (!(db->store = rs_array_new(&e))) {
            snprintf(err, errlen, "%s", e.msg);
            pod_db_free(db);
            return NULL;
        }
        db->cc = &cc_rs_2pl;
    } else if (o->store == POD_STORE_GIVEN) {
        if (!o->given_store) {
            snprintf(err, errlen, "no record store given");
            pod_db_free(db);
            return NULL;
        }
        db->store = o->given_store;
        db->cc = &cc_rs_2pl;
    }
    if (db->store && o->cc == POD_CC_FORD) db->cc = &cc_ford;
    if (db->store && o->cc == POD_CC_MOTOR) db->cc = &cc_motor;
    if (db->store && o->cc == POD_CC_LOTUS) db->cc = &cc_lotus;
    /* What pod/ and log/, below this layer, call up into (db/types.h). */
    db->hooks = (struct pod_db_hooks){
        .row_removed = log_row_removed,
        .admin_begin = pod_admin_begin,
        .admin_end = pod_admin_end,
        .run_workers = run_workers,
    };
    /* One EBR slot per worker, and one for the admin worker. */
    if (!(db->ebr = ebr_domain_new(o->nworkers + 1))) goto nomem;
    if (!(db->workers = calloc((size_t)o->nworkers, sizeof *db->workers))) goto nomem;
    for (int i = 0; i < o->nworkers; i++)
        if (!(db->workers[i] = worker_new(db, i))) goto nomem;
    if (!(db->admin = worker_new(db, o->nworkers))) goto nomem;
    return db;
nomem:
    snprintf(err, errlen, "out of memory creating the database");
    pod_db_free(db);
    return NULL;
}

void pod_db_free(pod_db *db)
{
    if (!db) return;
    /* What is still retired first: a retired row goes back to its table's slab. */
    if (db->ebr) ebr_domain_free(db->ebr);
    for (uint32_t i = 0; i < db->ntables; i++) table_free(db->tables[i]);
    for (int i = 0; db->workers && i < db->opt.nworkers; i++) worker_free(db->workers[i]);
    worker_free(db->admin);
    if (db->cc && db->cc->stop) db->cc->stop(db);
    for (uint32_t i = 0; i < db->nprocs; i++) free((char *)db->procs[i].name);
    free(db->workers);
    free(db->threads);
    if (db->store) db->store->ops->destroy(db->store);
    pthread_mutex_destroy(&db->admin_lock);
    free(db);
}

pod_table *pod_table_create(pod_db *db, const pod_table_def *def, char *err, size_t errlen)
{
    if (db->nrunning) {
        snprintf(err, errlen, "tables must be created before workers start");
        return NULL;
    }
    if (db->ntables == POD_MAX_TABLES) {
        snprintf(err, errlen, "too many tables (at most %d)", POD_MAX_TABLES);
        return NULL;
    }
    if (def->name && pod_table_find(db, def->name)) {
        snprintf(err, errlen, "table %s already exists", def->name);
        return NULL;
    }
    pod_table *t = table_new(db, db->ntables, def, &db->space, (uint32_t)db->opt.nhosts, err,
                             errlen);
    if (!t) return NULL;
    if (db->cc->table_added && db->cc->table_added(db, t, err, errlen) != 0) {
        table_free(t);
        return NULL;
    }
    db->tables[db->ntables++] = t;
    return t;
}

int pod_db_nhosts(const pod_db *db) { return db->opt.nhosts; }
int pod_db_host_id(const pod_db *db) { return db->opt.host_id; }

pod_table *pod_table_find(pod_db *db, const char *name)
{
    for (uint32_t i = 0; i < db->ntables; i++)
        if (strcmp(db->tables[i]->name, name) == 0) return db->tables[i];
    return NULL;
}

int pod_proc_register(pod_db *db, const pod_proc_def *def, char *err, size_t errlen)
{
    if (!def->name || !*def->name || !def->fn) {
        snprintf(err, errlen, "a procedure needs a name and a function");
        return -1;
    }
    if (pod_proc_find(db, def->name) >= 0) {
        snprintf(err, errlen, "procedure %s is already registered", def->name);
        return -1;
    }
    if (db->nprocs == POD_MAX_PROCS) {
        snprintf(err, errlen, "too many procedures (at most %d)", POD_MAX_PROCS);
        return -1;
    }
    pod_proc_def *p = &db->procs[db->nprocs];
    *p = *def;
    if (!(p->name = strdup(def->name))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return (int)db->nprocs++;
}

int pod_proc_find(const pod_db *db, const char *name)
{
    for (uint32_t i = 0; i < db->nprocs; i++)
        if (strcmp(db->procs[i].name, name) == 0) return (int)i;
    return -1;
}

static void add_stats(struct pod_proc_stats *sum, const struct pod_proc_stats *s)
{
    sum->commits += __atomic_load_n(&s->commits, __ATOMIC_RELAXED);
    sum->user_aborts += __atomic_load_n(&s->user_aborts, __ATOMIC_RELAXED);
    sum->errors += __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
    sum->conflicts += __atomic_load_n(&s->conflicts, __ATOMIC_RELAXED);
    sum->gave_up += __atomic_load_n(&s->gave_up, __ATOMIC_RELAXED);
    for (int c = 0; c < POD_CAUSE_COUNT; c++)
        sum->by_cause[c] += __atomic_load_n(&s->by_cause[c], __ATOMIC_RELAXED);
}

void pod_db_proc_stats(const pod_db *db, int proc, struct pod_proc_stats *out)
{
    memset(out, 0, sizeof *out);
    if (proc < 0 || proc >= (int)db->nprocs) return;
    for (int i = 0; i < db->opt.nworkers; i++) add_stats(out, &db->workers[i]->stats[proc]);
    add_stats(out, &db->admin->stats[proc]);
}

void pod_db_print_stats(const pod_db *db, FILE *out)
{
    fprintf(out, "%-24s %10s %8s %7s %10s %10s %10s %8s %8s %11s %9s %10s %7s\n", "procedure",
            "commits", "aborts", "errors", "conflicts", "read_lock", "write_lock", "upgrade",
            "next_key", "remote_busy", "hwcc_full", "validation", "gave_up");
    for (uint32_t p = 0; p < db->nprocs; p++) {
        struct pod_proc_stats s;
        pod_db_proc_stats(db, (int)p, &s);
        if (!s.commits && !s.user_aborts && !s.errors && !s.conflicts) continue;
        fprintf(out, "%-24s %10llu %8llu %7llu %10llu %10llu %10llu %8llu %8llu %11llu %9llu %10llu "
                "%7llu\n",
                db->procs[p].name, (unsigned long long)s.commits,
                (unsigned long long)s.user_aborts, (unsigned long long)s.errors,
                (unsigned long long)s.conflicts,
                (unsigned long long)s.by_cause[POD_CAUSE_READ_LOCK],
                (unsigned long long)s.by_cause[POD_CAUSE_WRITE_LOCK],
                (unsigned long long)s.by_cause[POD_CAUSE_UPGRADE],
                (unsigned long long)s.by_cause[POD_CAUSE_NEXT_KEY],
                (unsigned long long)s.by_cause[POD_CAUSE_REMOTE_BUSY],
                (unsigned long long)s.by_cause[POD_CAUSE_HWCC_FULL],
                (unsigned long long)s.by_cause[POD_CAUSE_VALIDATION],
                (unsigned long long)s.gave_up);
    }
}
