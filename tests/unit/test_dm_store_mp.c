/* The dm record store (src/store/dm_store.c) against real memory nodes
 * ($PODDB_BIN/poddb-memnode, else build/bin), on the providers shm and
 * tcp;ofi_rxm, two memory nodes per pod unless said otherwise:
 *  - the record-store conformance check (tests/unit/helpers/rs_conformance.h)
 *    in one compute-node process, and a second store of that process
 *    declaring one of its tables for another number of rows (the first
 *    store's sizing stands: no catalog mismatch) and reading it while the
 *    first store adds keys to its overflow chains; on shm also over one
 *    memory node; on both again with one backup of each memory node's
 *    records (every change also written to the other memory node);
 *  - a bank: a loader process creates the table and N accounts of INITIAL;
 *    then two compute-node processes (each its own database running rs-2pl
 *    over its own dm store on the same memory nodes) run transfers
 *    (pod_get_for_update / pod_put, about 10% aborting with POD_USER_ABORT
 *    after writing) and audits (a point read of every account, the total
 *    checked) at once for DM_MP_MS milliseconds (default 2000); a last
 *    process audits again and counts the accounts' records on each memory
 *    node. The total is exact, every process exits cleanly, conflicts were
 *    seen, both memory nodes hold accounts, and each account's record is on
 *    the memory node of its index entry;
 *  - a compute node killed with SIGKILL does not take the memory nodes down;
 *    one naming another pod is refused with a clear message, and so is a
 *    second one declaring the table with another tuple size, one naming the
 *    memory nodes in the other order, one naming only the first, and one
 *    naming the same memory node twice; after memory node 1 restarts
 *    (empty), compute nodes are refused, saying its records are lost, until
 *    both memory nodes have restarted: then a new pod opens.
 * Every socket, log and region is named /tmp/poddb-test-TAG-PID-* and removed. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "helpers/rs_conformance.h"
#include "helpers/testutil.h"
#include "poddb/proc.h"
#include "storage/table.h"
#include "store/dm_store.h"

#define POD_NAME "dmtest"
#define NACCT 48
#define INITIAL 1000
#define NCN 2
#define NMN 2 /* memory nodes of a pod */

static const char *const providers[] = {"shm", "tcp;ofi_rxm"};

/* ---- the memory node ---------------------------------------------------------- */

struct memnode {
    char sock[108], log[160];
    pid_t pid;
};

static const char *tag(void)
{
    const char *t = getenv("PODDB_TEST_TAG");
    return t && *t ? t : "manual";
}

static const char *bin_dir(void)
{
    const char *b = getenv("PODDB_BIN");
    return b && *b ? b : "build/bin";
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void print_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) fprintf(stderr, "  memnode| %s", line);
    fclose(f);
}

/* Start a memory node (memnode_wait_up waits until its socket answers). */
static void memnode_spawn(struct memnode *m, const char *provider)
{
    static int n;
    snprintf(m->sock, sizeof m->sock, "/tmp/poddb-test-%s-%d-%d-mn.sock", tag(), (int)getpid(), n);
    snprintf(m->log, sizeof m->log, "/tmp/poddb-test-%s-%d-%d-mn.log", tag(), (int)getpid(), n++);
    char bin[256];
    snprintf(bin, sizeof bin, "%s/poddb-memnode", bin_dir());
    ck_assert_msg(access(bin, X_OK) == 0, "%s is not built (make %s)", bin, bin);
    fflush(NULL);
    pid_t parent = getpid();
    m->pid = fork();
    ck_assert_int_ge(m->pid, 0);
    if (m->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int fd = open(m->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "--socket", m->sock, "--pod", POD_NAME, "--pool-size", "64MiB",
              "--provider", provider, (char *)NULL);
        _exit(127);
    }
}

static void memnode_wait_up(struct memnode *m, const char *provider)
{
    uint64_t until = now_ms() + 15000;
    for (;;) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", m->sock);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        bool up = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (fd >= 0) close(fd);
        if (up) return;
        int st;
        if (waitpid(m->pid, &st, WNOHANG) == m->pid || now_ms() > until) {
            print_log(m->log);
            m->pid = 0;
            ck_abort_msg("poddb-memnode (%s) did not come up", provider);
        }
        usleep(10000);
    }
}

/* The memory nodes of a pod. */
struct pod_mns {
    struct memnode m[NMN];
    const char *socks[NMN];
    int n;
};

/* n memory nodes, started at once. */
static void mns_start(struct pod_mns *p, const char *provider, int n)
{
    p->n = n;
    for (int i = 0; i < n; i++) {
        memnode_spawn(&p->m[i], provider);
        p->socks[i] = p->m[i].sock;
    }
    for (int i = 0; i < n; i++) memnode_wait_up(&p->m[i], provider);
}

/* After SIGTERM: it must exit 0 within 10 s. */
static void memnode_reap(struct memnode *m)
{
    int st = -1;
    if (m->pid > 0) {
        uint64_t until = now_ms() + 10000;
        while (waitpid(m->pid, &st, WNOHANG) == 0) {
            if (now_ms() > until) {
                kill(m->pid, SIGKILL);
                waitpid(m->pid, &st, 0);
                break;
            }
            usleep(5000);
        }
    }
    bool clean = m->pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!clean) print_log(m->log);
    unlink(m->sock);
    unlink(m->log);
    ck_assert_msg(clean, "poddb-memnode did not exit cleanly on SIGTERM (status 0x%x)", st);
}

/* Memory node i of p stops (SIGTERM, exit 0) and starts again, empty. */
static void memnode_restart(struct pod_mns *p, int i, const char *provider)
{
    kill(p->m[i].pid, SIGTERM);
    memnode_reap(&p->m[i]);
    memnode_spawn(&p->m[i], provider);
    p->socks[i] = p->m[i].sock;
    memnode_wait_up(&p->m[i], provider);
}

/* SIGTERM to all at once; each must exit 0 within 10 s. */
static void mns_stop(struct pod_mns *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->m[i].pid > 0) kill(p->m[i].pid, SIGTERM);
    for (int i = 0; i < p->n; i++) memnode_reap(&p->m[i]);
}

/* ---- the bank ----------------------------------------------------------------------- */

struct account {
    int64_t balance, owner;
};

enum { P_LOAD, P_TRANSFER, P_AUDIT, P_COUNT };

struct cn {
    pod_db *db;
    struct record_store *rs; /* the database's */
    pod_table *t;
    int proc[P_COUNT];
};

/* What each compute node reports (shared memory). */
struct cn_report {
    uint64_t transfers, forced, overdrawn, audits, conflicts, bad_audits;
    uint32_t on_mn[NMN]; /* accounts whose record is on each memory node */
    int64_t last_sum;
    double seconds;
    char msg[1024];
};

struct bank_run {
    const struct pod_mns *mns;
    const char *provider;
    int id;
    int ms;
    uint32_t tuple_size; /* of the table this node declares */
    uint64_t seed;
    struct cn_report *rep;
};

static int64_t arg(const pod_args *a, int i) { return a->v[i].u.i64; }

static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct cn *c = ctx;
    for (int64_t i = 0; i < arg(a, 0); i++) {
        unsigned char key[8];
        pod_key_u64(key, (uint64_t)i);
        struct account acc = {INITIAL, i};
        int rc = pod_insert(tx, c->t, key, &acc);
        if (rc < 0) return rc;
        if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "load %" PRId64 ": %s", i,
                                              pod_status_name(rc));
    }
    pod_result_i64(res, 0);
    return POD_OK;
}

static int get_acct(pod_txn *tx, struct cn *c, uint64_t k, struct account *out, bool upd)
{
    unsigned char key[8];
    pod_key_u64(key, k);
    int rc = upd ? pod_get_for_update(tx, c->t, key, out) : pod_get(tx, c->t, key, out);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "account %" PRIu64 ": %s", k,
                                          pod_status_name(rc));
    if (out->owner != (int64_t)k)
        return pod_txn_fail(tx, POD_E_INTERNAL, "account %" PRIu64 " holds owner %" PRId64, k,
                            out->owner);
    return POD_OK;
}

/* transfer(from, to, amount, force_abort): 0 done, 1 overdraw, 2 forced abort */
static int p_transfer(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct cn *c = ctx;
    uint64_t from = (uint64_t)arg(a, 0), to = (uint64_t)arg(a, 1);
    int64_t amount = arg(a, 2);
    struct account f, t;
    POD_TRY(get_acct(tx, c, from, &f, true));
    POD_TRY(get_acct(tx, c, to, &t, true));
    if (f.balance < amount) {
        pod_result_i64(res, 1);
        return POD_USER_ABORT;
    }
    f.balance -= amount;
    t.balance += amount;
    unsigned char key[8];
    pod_key_u64(key, from);
    POD_TRY(pod_put(tx, c->t, key, &f));
    pod_key_u64(key, to);
    POD_TRY(pod_put(tx, c->t, key, &t));
    if (arg(a, 3)) { /* written, then rolled back */
        pod_result_i64(res, 2);
        return POD_USER_ABORT;
    }
    pod_result_i64(res, 0);
    return POD_OK;
}

/* audit(): the sum of every account by point reads, and how many */
static int p_audit(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    struct cn *c = ctx;
    int64_t sum = 0, n = 0;
    for (uint64_t k = 0; k < NACCT; k++) {
        struct account acc;
        POD_TRY(get_acct(tx, c, k, &acc, false));
        sum += acc.balance;
        n++;
    }
    pod_result_i64(res, sum);
    pod_result_i64(res, n);
    return POD_OK;
}

static void cn_free(struct cn *c)
{
    if (c->db) pod_db_free(c->db);
    free(c);
}

/* A compute node: its dm store, database, table and procedures; NULL with msg. */
static struct cn *cn_open(const char *const *socks, int nmn, const char *provider, const char *pod,
                          uint32_t tuple_size, char *msg, size_t len)
{
    pod_err e;
    struct record_store *rs = rs_dm_open_many(socks, nmn, provider, pod, &e);
    if (!rs) {
        snprintf(msg, len, "%s", e.msg);
        return NULL;
    }
    struct cn *c = calloc(1, sizeof *c);
    c->rs = rs;
    char err[512];
    c->db = pod_db_new(&(struct pod_db_options){.nworkers = 1, .nhosts = 1,
                                                .phantom_protection = false,
                                                .store = POD_STORE_GIVEN, .given_store = rs},
                       err, sizeof err);
    if (!c->db) {
        rs->ops->destroy(rs);
        snprintf(msg, len, "pod_db_new: %s", err);
        free(c);
        return NULL;
    }
    c->t = pod_table_create(c->db, &(pod_table_def){.name = "accounts", .key_size = 8,
                                                     .tuple_size = tuple_size}, err, sizeof err);
    if (!c->t) {
        snprintf(msg, len, "pod_table_create: %s", err);
        cn_free(c);
        return NULL;
    }
    static const enum pod_type i64s[4] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    static const pod_proc_fn fns[P_COUNT] = {p_load, p_transfer, p_audit};
    static const char *const names[P_COUNT] = {"bank.load", "bank.transfer", "bank.audit"};
    static const int nargs[P_COUNT] = {1, 4, 0};
    for (int p = 0; p < P_COUNT; p++) {
        c->proc[p] = pod_proc_register(c->db, &(pod_proc_def){.name = names[p], .fn = fns[p],
                                                               .ctx = c, .nargs = nargs[p],
                                                               .arg_types = i64s},
                                       err, sizeof err);
        if (c->proc[p] < 0) {
            snprintf(msg, len, "pod_proc_register: %s", err);
            cn_free(c);
            return NULL;
        }
    }
    return c;
}

static int call(struct cn *c, int p, const pod_value *v, int n, pod_result *res, char *msg,
                size_t len)
{
    pod_args args = {n, v};
    struct pod_worker *w = pod_admin_begin(c->db);
    int rc = pod_call(w, c->proc[p], &args, res, msg, len);
    pod_admin_end(c->db);
    return rc;
}

static int64_t res_i64(const pod_result *res, int col)
{
    pod_value v;
    if (pod_result_get(res, 0, col, &v) != 0) return INT64_MIN;
    return v.u.i64;
}

/* An audit; 0 when it committed with the exact total. */
static int audit(struct cn *c, struct cn_report *r)
{
    pod_result *res = pod_result_new();
    char msg[256];
    int rc = call(c, P_AUDIT, NULL, 0, res, msg, sizeof msg);
    int64_t sum = res_i64(res, 0), n = res_i64(res, 1);
    pod_result_free(res);
    if (rc != POD_OK) {
        snprintf(r->msg, sizeof r->msg, "audit: %s: %s", pod_status_name(rc), msg);
        return -1;
    }
    r->audits++;
    r->last_sum = sum;
    if (sum != (int64_t)NACCT * INITIAL || n != NACCT) {
        r->bad_audits++;
        snprintf(r->msg, sizeof r->msg, "audit saw %" PRId64 " in %" PRId64 " accounts, not %d "
                 "in %d", sum, n, NACCT * INITIAL, NACCT);
        return -1;
    }
    return 0;
}

static int child_load(void *p)
{
    struct bank_run *b = p;
    struct cn *c = cn_open(b->mns->socks, b->mns->n, b->provider, POD_NAME,
                           sizeof(struct account), b->rep->msg, sizeof b->rep->msg);
    if (!c) return 1;
    pod_result *res = pod_result_new();
    pod_value v = pod_v_i64(NACCT);
    int rc = call(c, P_LOAD, &v, 1, res, b->rep->msg, sizeof b->rep->msg);
    pod_result_free(res);
    if (rc == POD_OK) rc = audit(c, b->rep);
    cn_free(c);
    return rc == POD_OK ? 0 : 1;
}

static int child_run(void *p)
{
    struct bank_run *b = p;
    struct cn_report *r = b->rep;
    struct cn *c = cn_open(b->mns->socks, b->mns->n, b->provider, POD_NAME,
                           sizeof(struct account), r->msg, sizeof r->msg);
    if (!c) return 1;
    uint64_t s = b->seed, t0 = now_ms();
    int fail = 0;
    pod_result *res = pod_result_new();
    while (!fail && now_ms() - t0 < (uint64_t)b->ms) {
        uint64_t x = tu_rand(&s);
        if (x % 10 == 0) {
            fail = audit(c, r);
            continue;
        }
        int64_t from = (int64_t)(tu_rand(&s) % NACCT), to = (int64_t)(tu_rand(&s) % (NACCT - 1));
        if (to >= from) to++;
        pod_value v[4] = {pod_v_i64(from), pod_v_i64(to), pod_v_i64((int64_t)(tu_rand(&s) % 300)),
                          pod_v_i64(tu_rand(&s) % 10 == 0)};
        pod_result_clear(res);
        char msg[256];
        int rc = call(c, P_TRANSFER, v, 4, res, msg, sizeof msg);
        if (rc == POD_OK) r->transfers++;
        else if (rc == POD_USER_ABORT && res_i64(res, 0) == 2) r->forced++;
        else if (rc == POD_USER_ABORT) r->overdrawn++;
        else {
            snprintf(r->msg, sizeof r->msg, "transfer: %s: %s", pod_status_name(rc), msg);
            fail = 1;
        }
    }
    pod_result_free(res);
    r->seconds = (double)(now_ms() - t0) / 1000.0;
    for (int p = 0; p < P_COUNT; p++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(c->db, c->proc[p], &st);
        r->conflicts += st.conflicts;
    }
    cn_free(c);
    return fail ? 1 : 0;
}

static int child_final(void *p)
{
    struct bank_run *b = p;
    struct cn *c = cn_open(b->mns->socks, b->mns->n, b->provider, POD_NAME,
                           sizeof(struct account), b->rep->msg, sizeof b->rep->msg);
    if (!c) return 1;
    int rc = audit(c, b->rep);
    for (uint64_t k = 0; k < NACCT; k++) { /* where the accounts' records are */
        unsigned char key[8];
        rs_loc loc;
        pod_key_u64(key, k);
        if (c->rs->ops->lookup(c->rs, c->t->id, key, &loc) != RS_OK ||
            rs_dm_loc_memnode(loc) != rs_dm_key_memnode(c->rs, c->t->id, key)) {
            snprintf(b->rep->msg, sizeof b->rep->msg, "account %" PRIu64 ": no record, or not "
                     "on the memory node of its index entry", k);
            rc = 1;
            break;
        }
        b->rep->on_mn[rs_dm_loc_memnode(loc)]++;
    }
    cn_free(c);
    return rc ? 1 : 0;
}

static void run_bank(const char *provider)
{
    struct pod_mns m;
    mns_start(&m, provider, NMN);
    struct cn_report *rep = mmap(NULL, sizeof(struct cn_report) * (NCN + 2),
                                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(rep != MAP_FAILED);
    memset(rep, 0, sizeof(struct cn_report) * (NCN + 2));
    uint64_t seed = tu_env_seed("DM_MP_SEED");
    int ms = tu_env_ms("DM_MP_MS", 2000);
    struct bank_run runs[NCN + 2];
    for (int i = 0; i < NCN + 2; i++)
        runs[i] = (struct bank_run){.mns = &m, .provider = provider, .id = i, .ms = ms,
                                    .seed = seed + 0x1000u * (uint64_t)i, .rep = &rep[i]};
    uint64_t t0 = now_ms();
    int st = tu_wait_child(tu_fork(child_load, &runs[0]), 60000);
    ck_assert_msg(st == 0, "[%s] loader exited %d: %s", provider, st, rep[0].msg);
    uint64_t t_load = now_ms() - t0;
    int pids[NCN];
    for (int i = 0; i < NCN; i++) pids[i] = tu_fork(child_run, &runs[1 + i]);
    int sts[NCN];
    for (int i = 0; i < NCN; i++) sts[i] = tu_wait_child(pids[i], ms + 60000);
    for (int i = 0; i < NCN; i++)
        ck_assert_msg(sts[i] == 0, "[%s] compute node %d (seed %" PRIu64 ") exited %d: %s",
                      provider, i, runs[1 + i].seed, sts[i], rep[1 + i].msg);
    /* the last audit, from a compute node that joins after them */
    st = tu_wait_child(tu_fork(child_final, &runs[NCN + 1]), 60000);
    ck_assert_msg(st == 0, "[%s] final audit exited %d: %s", provider, st, rep[NCN + 1].msg);
    uint64_t conflicts = 0, transfers = 0, audits = 0;
    for (int i = 0; i < NCN; i++) {
        struct cn_report *r = &rep[1 + i];
        printf("[%s] compute node %d: %.2f s, %" PRIu64 " transfers committed, %" PRIu64
               " forced aborts after writing, %" PRIu64 " overdraws, %" PRIu64 " audits exact, %"
               PRIu64 " conflicts retried\n", provider, i, r->seconds, r->transfers, r->forced,
               r->overdrawn, r->audits, r->conflicts);
        ck_assert_msg(r->transfers > 0 && r->forced > 0 && r->audits > 0,
                      "[%s] compute node %d did too little to test anything", provider, i);
        conflicts += r->conflicts;
        transfers += r->transfers;
        audits += r->audits;
    }
    printf("[%s] load %" PRIu64 " ms; final audit: %" PRId64 " in %d accounts (exact), %u and %u "
           "of them on memory nodes 0 and 1; %" PRIu64 " transfers, %" PRIu64 " audits, %" PRIu64
           " conflicts; whole run %" PRIu64 " ms\n", provider, t_load, rep[NCN + 1].last_sum,
           NACCT, rep[NCN + 1].on_mn[0], rep[NCN + 1].on_mn[1], transfers, audits, conflicts,
           now_ms() - t0);
    fflush(stdout);
    ck_assert_msg(conflicts > 0, "[%s] no conflicts between the compute nodes: the run tested "
                  "nothing concurrent", provider);
    ck_assert_msg(rep[NCN + 1].on_mn[0] > 0 && rep[NCN + 1].on_mn[1] > 0,
                  "[%s] the accounts are not spread over both memory nodes", provider);
    mns_stop(&m);
    munmap(rep, sizeof(struct cn_report) * (NCN + 2));
}

START_TEST(bank)
{
    run_bank(providers[_i]);
}
END_TEST

/* ---- the conformance check over a memory node -------------------------------------- */

struct conf_arg {
    const struct pod_mns *mns;
    const char *provider;
    uint32_t replicas;
};

#define GROW_KEYS 1500u /* appended to the table of many keys while another store reads it */

struct grow_arg {
    struct record_store *s;
    const rs_loc *want;
    int done;
};

static void *grow_table(void *p)
{
    struct grow_arg *g = p;
    unsigned char k[8];
    for (uint64_t v = RSC_MANY; v < RSC_MANY + GROW_KEYS; v++) {
        rsc_key(k, v);
        ck_assert_int_eq(g->s->ops->index_insert(g->s, RSC_TABLE + 3, k, g->want[v]), RS_OK);
    }
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* other's lookups and walks of the table of many keys while rs (another
 * endpoint: a compute node of its own to the memory node) appends buckets
 * to its chains: the keys present throughout are found, and walked once
 * each; a new key is walked at most once. */
static void read_while_growing(struct record_store *rs, struct record_store *other)
{
    const uint32_t t = RSC_TABLE + 3, n = RSC_MANY + GROW_KEYS;
    rs_loc *want = calloc(n, sizeof *want), loc;
    uint32_t *seen = calloc(n, sizeof *seen);
    ck_assert(want && seen);
    for (uint64_t v = 0; v < n; v++) /* what rsc_many left, and what comes */
        want[v] = v >= RSC_MANY ? 0x200000 + v : v % 2 ? 0x100000 + v : 0x1000 + v;
    struct grow_arg g = {.s = rs, .want = want};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, grow_table, &g), 0);
    unsigned char k[8];
    unsigned lookups = 0, walks = 0;
    for (uint64_t v = 0; !__atomic_load_n(&g.done, __ATOMIC_ACQUIRE); v = (v + 7) % RSC_MANY) {
        rsc_key(k, v);
        ck_assert_int_eq(other->ops->lookup(other, t, k, &loc), RS_OK);
        ck_assert(loc == want[v]);
        if (++lookups % 32 == 0) usleep(100); /* the inserting thread and the memory nodes'
                                                 progress threads need the cores too */
        if (lookups % 1000) continue;
        struct rsc_walk w = {.want = want, .seen = seen, .n = n};
        memset(seen, 0, n * sizeof *seen);
        ck_assert_int_eq(other->ops->walk(other, t, rsc_walk_visit, &w), RS_OK);
        ck_assert(!w.stray);
        for (uint64_t x = 0; x < n; x++) ck_assert(x < RSC_MANY ? seen[x] == 1 : seen[x] <= 1);
        walks++;
    }
    pthread_join(th, NULL);
    printf("dm store: %u lookups and %u walks while %u keys were added\n", lookups, walks,
           GROW_KEYS);
    fflush(stdout);
    rsc_walk_check(other, t, want, n);
    free(seen);
    free(want);
}

static int child_conformance(void *p)
{
    struct conf_arg *a = p;
    pod_err e;
    struct record_store *rs = rs_dm_open_cn(a->mns->socks, a->mns->n, a->provider, POD_NAME, 0,
                                            NULL, a->replicas, &e);
    if (!rs) {
        fprintf(stderr, "rs_dm_open_cn: %s\n", e.msg);
        return 1;
    }
    ck_assert_str_eq(rs->ops->name, "dm");
    ck_assert(!rs->ops->ordered);
    rs_conformance(rs); /* a failed assertion ends this process non-zero */
    /* Another compute node declaring the table of many keys for another
     * number of rows gets the table the first one laid out. */
    struct record_store *other = rs_dm_open_cn(a->mns->socks, a->mns->n, a->provider, POD_NAME,
                                               0, NULL, a->replicas, &e);
    ck_assert_msg(other != NULL, "%s", e.msg);
    ck_assert_msg(other->ops->table_add(other, &(struct rs_table_def){.id = RSC_TABLE + 3,
                  .key_size = 8, .tuple_size = 8, .rows_hint = 1u << 20}, &e) == 0, "%s", e.msg);
    read_while_growing(rs, other);
    other->ops->destroy(other);
    rs->ops->destroy(rs);
    return 0;
}

/* providers and memory nodes of the conformance runs */
static const struct {
    const char *provider;
    int nmn;
    uint32_t replicas; /* backups of each memory node's records */
} conf_runs[] = {{"shm", 1, 0}, {"shm", NMN, 0}, {"tcp;ofi_rxm", NMN, 0}, {"shm", NMN, 1},
                 {"tcp;ofi_rxm", NMN, 1}};

START_TEST(conformance)
{
    const char *prov = conf_runs[_i].provider;
    struct pod_mns m;
    mns_start(&m, prov, conf_runs[_i].nmn);
    struct conf_arg a = {&m, prov, conf_runs[_i].replicas};
    uint64_t t0 = now_ms();
    int st = tu_wait_child(tu_fork(child_conformance, &a), 60000);
    printf("[%s] record-store conformance over %d memory node(s), %u backup(s): %" PRIu64 " ms\n",
           prov, m.n, a.replicas, now_ms() - t0);
    ck_assert_msg(st == 0, "[%s] the conformance check failed (exit %d)", prov, st);
    mns_stop(&m);
}
END_TEST

/* ---- refusals ----------------------------------------------------------------------------- */

struct refuse_arg {
    const struct pod_mns *mns;
    const char *provider;
    struct cn_report *rep;
    /* child_refused: the compute node's pod and memory nodes */
    const char *pod;
    const char *socks[NMN];
    int n;
};

/* A compute node that must be refused: its message to rep->msg. */
static int child_refused(void *p)
{
    struct refuse_arg *a = p;
    pod_err e;
    struct record_store *rs = a->n == 1 ? rs_dm_open(a->socks[0], a->provider, a->pod, &e)
                                        : rs_dm_open_many(a->socks, a->n, a->provider, a->pod, &e);
    if (rs) {
        rs->ops->destroy(rs);
        return 1;
    }
    snprintf(a->rep->msg, sizeof a->rep->msg, "%s", e.msg);
    return 0;
}

/* A compute node of the pod with the bank's table, or NULL (said on stderr). */
static struct cn *cn_open_or_say(const struct refuse_arg *a, const char *who)
{
    char msg[256];
    struct cn *c = cn_open(a->mns->socks, a->mns->n, a->provider, POD_NAME,
                           sizeof(struct account), msg, sizeof msg);
    if (!c) fprintf(stderr, "%s: %s\n", who, msg);
    return c;
}

static int child_mismatch(void *p)
{
    struct refuse_arg *a = p;
    char msg[256];
    struct cn *first = cn_open_or_say(a, "first compute node");
    if (!first) return 2;
    struct cn *second = cn_open(a->mns->socks, a->mns->n, a->provider, POD_NAME,
                                sizeof(struct account) + 8, a->rep->msg, sizeof a->rep->msg);
    int rc = second ? 1 : 0;
    if (second) cn_free(second);
    /* the first one still works */
    pod_result *res = pod_result_new();
    pod_value v = pod_v_i64(NACCT);
    if (call(first, P_LOAD, &v, 1, res, msg, sizeof msg) != POD_OK) {
        fprintf(stderr, "load after the refusal: %s\n", msg);
        rc = 3;
    }
    pod_result_free(res);
    cn_free(first);
    return rc;
}

/* A compute node that dies in the middle of its work (SIGKILL, no fi_close). */
static int child_die(void *p)
{
    if (!cn_open_or_say(p, "dying compute node")) return 1;
    raise(SIGKILL); /* with its endpoint, store and database open */
    return 1;
}

/* What the shm provider of a process killed outright leaves: /dev/shm/PID:* */
static void remove_shm_leftovers(pid_t pid)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "%d:", (int)pid);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, (size_t)n) != 0) continue;
        char path[300];
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* A compute node of pod naming sockets[0..n) must be refused with a message
 * holding want. */
static void refused(const struct refuse_arg *base, const char *pod, const char *const *socks,
                    int n, const char *what, const char *want)
{
    struct refuse_arg a = *base;
    a.pod = pod;
    a.n = n;
    for (int i = 0; i < n; i++) a.socks[i] = socks[i];
    memset(a.rep, 0, sizeof *a.rep);
    int st = tu_wait_child(tu_fork(child_refused, &a), 30000);
    ck_assert_msg(st == 0, "[%s] %s: served (exit %d)", a.provider, what, st);
    printf("[%s] %s: %s\n", a.provider, what, a.rep->msg);
    ck_assert_msg(strstr(a.rep->msg, want), "[%s] %s: unclear refusal: %s", a.provider, what,
                  a.rep->msg);
}

START_TEST(refusals)
{
    const char *prov = providers[_i];
    struct pod_mns m;
    mns_start(&m, prov, NMN);
    struct cn_report *rep = mmap(NULL, sizeof *rep * 2, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(rep != MAP_FAILED);
    memset(rep, 0, sizeof *rep * 2);
    struct refuse_arg a = {.mns = &m, .provider = prov, .rep = &rep[0]},
                      b = {.mns = &m, .provider = prov, .rep = &rep[1]};
    int dead = tu_fork(child_die, &a);
    int st = tu_wait_child(dead, 30000);
    remove_shm_leftovers(dead);
    ck_assert_msg(st == -1, "[%s] the compute node meant to die exited %d", prov, st);
    refused(&a, "another-pod", m.socks, 1, "another pod",
            "belongs to pod \"" POD_NAME "\", not to pod \"another-pod\"");
    st = tu_wait_child(tu_fork(child_mismatch, &b), 30000);
    ck_assert_msg(st == 0, "[%s] catalog mismatch: child exited %d (%s)", prov, st, rep[1].msg);
    printf("[%s] another tuple size: %s\n", prov, rep[1].msg);
    ck_assert_msg(strstr(rep[1].msg, "catalog mismatch for table 0") &&
                  strstr(rep[1].msg, "tuples of 16 bytes") &&
                  strstr(rep[1].msg, "tuples of 24 bytes"),
                  "[%s] unclear refusal: %s", prov, rep[1].msg);
    /* the memory nodes in the other order, the first alone, the first twice */
    const char *swapped[NMN] = {m.socks[1], m.socks[0]}, *twice[NMN] = {m.socks[0], m.socks[0]};
    refused(&a, POD_NAME, swapped, NMN, "the memory nodes in the other order",
            "is memory node 1 of 2 of pod \"" POD_NAME "\", but this compute node names it "
            "memory node 0 of 2");
    refused(&a, POD_NAME, m.socks, 1, "only the first memory node",
            "is memory node 0 of 2 of pod \"" POD_NAME "\", but this compute node names it "
            "memory node 0 of 1");
    refused(&a, POD_NAME, twice, NMN, "one memory node twice", "are the same memory node");
    /* Memory node 1 restarts, its pool empty: the records it held are lost,
     * and every compute node from now on is told so, until every memory
     * node of the pod has restarted: then a new pod begins. */
    memnode_restart(&m, 1, prov);
    refused(&a, POD_NAME, m.socks, NMN, "memory node 1 restarted",
            "memory node 1 (" /* its socket */);
    ck_assert_msg(strstr(rep[0].msg, "has an empty pool") &&
                  strstr(rep[0].msg, "restarted and the records it held are lost"),
                  "[%s] %s", prov, rep[0].msg);
    refused(&a, POD_NAME, m.socks, NMN, "memory node 1 restarted, a second compute node",
            "belongs to another incarnation of pod \"" POD_NAME "\" than memory node 0");
    memnode_restart(&m, 0, prov);
    refused(&a, POD_NAME, m.socks, NMN, "memory node 0 restarted as well, after a refusal",
            "belongs to another incarnation");
    memnode_restart(&m, 0, prov);
    memnode_restart(&m, 1, prov);
    struct cn *c = cn_open_or_say(&a, "compute node of the restarted pod");
    ck_assert_msg(c != NULL, "[%s] every memory node restarted: a new pod is refused", prov);
    cn_free(c);
    fflush(stdout);
    mns_stop(&m); /* served on after the dead client and the refusals */
    munmap(rep, sizeof *rep * 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dm_store_mp");
    TCase *tc = tu_tcase(s, "conformance", 120);
    tcase_add_loop_test(tc, conformance, 0, (int)(sizeof conf_runs / sizeof conf_runs[0]));
    tc = tu_tcase(s, "refusals", 120);
    tcase_add_loop_test(tc, refusals, 0, 2);
    tc = tu_tcase(s, "bank", 180);
    tcase_add_loop_test(tc, bank, 0, 2);
    return tu_run(s);
}
