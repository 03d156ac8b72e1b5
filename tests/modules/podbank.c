/* Procedures for the pod test (tests/unit/test_pod_mp.c): a bank whose
 * accounts are spread over every host's partitions, and an event table with
 * one counter per partition, maintained in the same transactions as the
 * inserts and deletes, so a scan that disagrees with its counter shows a
 * phantom or an insert/delete seen before (or after) its commit.
 *
 * Partition p of every table is owned by host p % hosts; account i lives in
 * partition i % NPARTS, an event (p, seq) and counter p in partition p. */
#include <stddef.h>

#include "poddb/proc.h"

#define NPARTS 8
#define BALANCE 100

static pod_table *acct, *ev, *cnt;

/* The memo makes a tuple large enough that an update of a part of it is
 * logged as a PATCH (docs/log-format.md), not as the whole tuple. */
struct account {
    int64_t balance;
    int64_t updates;
    unsigned char memo[48];
};

static void memo_fill(struct account *acc, int64_t id)
{
    for (size_t i = 0; i < sizeof acc->memo; i++) acc->memo[i] = (unsigned char)(id * 7 + (int64_t)i);
}

static void ev_key(unsigned char k[16], uint64_t part, uint64_t seq)
{
    pod_key_u64(k, part);
    pod_key_u64(k + 8, seq);
}

/* pb.load(host, hosts, accounts): create this host's accounts and counters. */
static int load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    int64_t host = a->v[0].u.i64, hosts = a->v[1].u.i64, n = a->v[2].u.i64;
    int64_t made = 0;
    for (int64_t i = 0; i < n; i++) {
        if ((i % NPARTS) % hosts != host) continue;
        unsigned char k[8];
        pod_key_u64(k, (uint64_t)i);
        struct account acc = {BALANCE, 0, {0}};
        memo_fill(&acc, i);
        POD_TRY(pod_insert(tx, acct, k, &acc));
        made++;
    }
    for (int64_t p = 0; p < NPARTS; p++) {
        if (p % hosts != host) continue;
        unsigned char k[8];
        pod_key_u64(k, (uint64_t)p);
        int64_t zero = 0;
        POD_TRY(pod_insert(tx, cnt, k, &zero));
    }
    pod_result_i64(res, made);
    return POD_OK;
}

/* pb.transfer(from, to, amount) -> from's new balance. */
static int transfer(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    unsigned char kf[8], kt[8];
    pod_key_u64(kf, (uint64_t)a->v[0].u.i64);
    pod_key_u64(kt, (uint64_t)a->v[1].u.i64);
    struct account f, t;
    int rc = pod_get_for_update(tx, acct, kf, &f);
    if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no account %lld",
                                              (long long)a->v[0].u.i64);
    rc = pod_get_for_update(tx, acct, kt, &t);
    if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no account %lld",
                                              (long long)a->v[1].u.i64);
    f.balance -= a->v[2].u.i64;
    t.balance += a->v[2].u.i64;
    f.updates++;
    t.updates++;
    POD_TRY(pod_put(tx, acct, kf, &f));
    POD_TRY(pod_put(tx, acct, kt, &t));
    pod_result_i64(res, f.balance);
    return POD_OK;
}

/* pb.transfer_ref(from, to, amount) -> from's new balance: pb.transfer in
 * place, each account read first (shared) and then updated through its
 * pointer: a read-then-write of one row, as a procedure that looks before
 * it writes does. */
static int transfer_ref(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    unsigned char k[2][8];
    int64_t delta[2] = {-a->v[2].u.i64, a->v[2].u.i64};
    int64_t bal = 0;
    for (int i = 0; i < 2; i++) {
        pod_key_u64(k[i], (uint64_t)a->v[i].u.i64);
        const struct account *seen;
        int rc = pod_get_ref(tx, acct, k[i], (const void **)&seen);
        if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no account %lld",
                                                  (long long)a->v[i].u.i64);
        if (seen->updates < 0) return pod_txn_fail(tx, POD_E_INTERNAL, "negative update count");
    }
    for (int i = 0; i < 2; i++) {
        struct account *acc;
        POD_TRY(pod_update_ref(tx, acct, k[i], (void **)&acc));
        acc->balance += delta[i];
        acc->updates++;
        if (i == 0) bal = acc->balance;
    }
    pod_result_i64(res, bal);
    return POD_OK;
}

/* pb.transfer_range(from, to, amount) -> from's new balance: pb.transfer
 * through pod_update_range: only from's balance (a part of its tuple is
 * saved, logged and published), to's update count and then its balance (the
 * saved range widens). */
static int transfer_range(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    unsigned char kf[8], kt[8];
    pod_key_u64(kf, (uint64_t)a->v[0].u.i64);
    pod_key_u64(kt, (uint64_t)a->v[1].u.i64);
    const uint32_t bal_at = offsetof(struct account, balance), upd_at = offsetof(struct account, updates);
    struct account *f, *t;
    int rc = pod_update_range(tx, acct, kf, bal_at, sizeof f->balance, (void **)&f);
    if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no account %lld",
                                              (long long)a->v[0].u.i64);
    rc = pod_update_range(tx, acct, kt, upd_at, sizeof t->updates, (void **)&t);
    if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no account %lld",
                                              (long long)a->v[1].u.i64);
    t->updates++;
    POD_TRY(pod_update_range(tx, acct, kt, bal_at, sizeof t->balance, (void **)&t));
    f->balance -= a->v[2].u.i64;
    t->balance += a->v[2].u.i64;
    pod_result_i64(res, f->balance);
    return POD_OK;
}

/* Accounts 0..n-1 read in the caller's transaction: sums, and an FNV-1a
 * hash of every present account's key and whole tuple. */
struct acct_sums {
    int64_t balance, updates, found;
    uint64_t hash;
};

static int read_accounts(pod_txn *tx, int64_t n, struct acct_sums *s)
{
    *s = (struct acct_sums){0, 0, 0, 0xcbf29ce484222325ull};
    for (int64_t i = 0; i < n; i++) {
        unsigned char k[8];
        pod_key_u64(k, (uint64_t)i);
        if (i % 16 == 0) { /* the next 16 accounts: two per partition, so each
                            * other host is asked to move several in at once */
            unsigned char ks[16][8];
            uint32_t m = n - i < 16 ? (uint32_t)(n - i) : 16;
            for (uint32_t j = 0; j < m; j++) pod_key_u64(ks[j], (uint64_t)i + j);
            POD_TRY(pod_prefetch(tx, acct, ks, m));
        }
        struct account acc;
        int rc = pod_get(tx, acct, k, &acc);
        if (rc < 0) return rc;
        if (rc != POD_OK) continue;
        s->balance += acc.balance;
        s->updates += acc.updates;
        s->found++;
        const unsigned char *b[2] = {k, (const unsigned char *)&acc};
        const size_t len[2] = {sizeof k, sizeof acc};
        for (int j = 0; j < 2; j++)
            for (size_t x = 0; x < len[j]; x++) s->hash = (s->hash ^ b[j][x]) * 0x100000001b3ull;
    }
    return POD_OK;
}

/* pb.total(accounts) -> (sum of balances, accounts found), one transaction. */
static int total(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    struct acct_sums s;
    POD_TRY(read_accounts(tx, a->v[0].u.i64, &s));
    pod_result_i64(res, s.balance);
    pod_result_i64(res, s.found);
    return POD_OK;
}

/* pb.digest(accounts) -> (sum of balances, sum of update counts, hash of
 * every account's key and whole tuple, accounts found), one transaction:
 * two pods agree on it only when every byte of every account does. */
static int digest(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    struct acct_sums s;
    POD_TRY(read_accounts(tx, a->v[0].u.i64, &s));
    pod_result_i64(res, s.balance);
    pod_result_i64(res, s.updates);
    pod_result_i64(res, (int64_t)s.hash);
    pod_result_i64(res, s.found);
    return POD_OK;
}

static int bump_counter(pod_txn *tx, uint64_t part, int64_t d)
{
    unsigned char k[8];
    pod_key_u64(k, part);
    int64_t c;
    int rc = pod_get_for_update(tx, cnt, k, &c);
    if (rc) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INVALID, "no counter %llu",
                                              (unsigned long long)part);
    c += d;
    return pod_put(tx, cnt, k, &c);
}

/* pb.ins(part, seq) -> 1 if inserted, 0 if it existed. */
static int ins(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    uint64_t p = (uint64_t)a->v[0].u.i64 % NPARTS;
    unsigned char k[16];
    ev_key(k, p, (uint64_t)a->v[1].u.i64);
    int64_t v = a->v[1].u.i64;
    int rc = pod_insert(tx, ev, k, &v);
    if (rc < 0) return rc;
    if (rc == POD_OK) POD_TRY(bump_counter(tx, p, 1));
    pod_result_i64(res, rc == POD_OK);
    return POD_OK;
}

struct first {
    bool found;
    unsigned char key[16];
};

static bool take_first(void *arg, const void *key, const void *tuple)
{
    (void)tuple;
    struct first *f = arg;
    f->found = true;
    memcpy(f->key, key, 16);
    return false;
}

/* pb.del(part) -> 1 if it deleted the partition's first event, else 0. */
static int del(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    uint64_t p = (uint64_t)a->v[0].u.i64 % NPARTS;
    unsigned char lo[16], hi[16];
    ev_key(lo, p, 0);
    ev_key(hi, p, UINT64_MAX);
    struct first f = {false, {0}};
    POD_TRY(pod_scan(tx, ev, lo, hi, 1, POD_SCAN_FOR_UPDATE, take_first, &f));
    if (f.found) {
        int rc = pod_delete(tx, ev, f.key);
        if (rc < 0) return rc;
        if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "a scanned key vanished");
        POD_TRY(bump_counter(tx, p, -1));
    }
    pod_result_i64(res, f.found);
    return POD_OK;
}

static bool count_rows(void *arg, const void *key, const void *tuple)
{
    (void)key;
    (void)tuple;
    (*(int64_t *)arg)++;
    return true;
}

/* pb.check(part) -> (forward count, reverse count, second forward count,
 * counter): all four equal unless something is wrong. */
static int check(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    uint64_t p = (uint64_t)a->v[0].u.i64 % NPARTS;
    unsigned char lo[16], hi[16], k[8];
    ev_key(lo, p, 0);
    ev_key(hi, p, UINT64_MAX);
    int64_t n1 = 0, n2 = 0, n3 = 0, c = -1;
    POD_TRY(pod_scan(tx, ev, lo, hi, 0, 0, count_rows, &n1));
    POD_TRY(pod_scan(tx, ev, lo, hi, 0, POD_SCAN_REVERSE, count_rows, &n2));
    pod_key_u64(k, p);
    int rc = pod_get(tx, cnt, k, &c);
    if (rc < 0) return rc;
    POD_TRY(pod_scan(tx, ev, lo, hi, 0, 0, count_rows, &n3));
    pod_result_i64(res, n1);
    pod_result_i64(res, n2);
    pod_result_i64(res, n3);
    pod_result_i64(res, c);
    return POD_OK;
}

static uint32_t part_by_first_u64(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    return (uint32_t)(pod_key_get_u64(key) % nparts);
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    pod_table_def da = {.name = "pb_acct", .key_size = 8, .tuple_size = sizeof(struct account),
                        .nparts = NPARTS, .partition = pod_part_be64};
    pod_table_def de = {.name = "pb_ev", .key_size = 16, .tuple_size = 8, .nparts = NPARTS,
                        .partition = part_by_first_u64};
    pod_table_def dc = {.name = "pb_cnt", .key_size = 8, .tuple_size = 8, .nparts = NPARTS,
                        .partition = pod_part_be64};
    if (!(acct = pod_table_create(db, &da, err, errlen)) ||
        !(ev = pod_table_create(db, &de, err, errlen)) ||
        !(cnt = pod_table_create(db, &dc, err, errlen)))
        return -1;
    static const enum pod_type i1[] = {POD_T_I64}, i2[] = {POD_T_I64, POD_T_I64},
                               i3[] = {POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[] = {
        {"pb.load", load, NULL, 3, i3, false},   {"pb.transfer", transfer, NULL, 3, i3, false},
        {"pb.transfer_ref", transfer_ref, NULL, 3, i3, false},
        {"pb.transfer_range", transfer_range, NULL, 3, i3, false},
        {"pb.total", total, NULL, 1, i1, true},  {"pb.digest", digest, NULL, 1, i1, true},
        {"pb.ins", ins, NULL, 2, i2, false},
        {"pb.del", del, NULL, 1, i1, false},     {"pb.check", check, NULL, 1, i1, true},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
