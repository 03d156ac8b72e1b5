/* Transactions, deterministically: two workers' transactions are interleaved
 * by hand in one thread, so every conflict and every anomaly is exact. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "storage/lock.h"
#include "txn/leaf_memo.h"
#include "txn/txn.h"
#include "helpers/testutil.h"

struct acct {
    int64_t balance;
    int64_t version;
};

static pod_db *db;
static pod_table *T;
static struct pod_txn *A, *B;

static void key(unsigned char k[8], uint64_t v) { pod_key_u64(k, v); }

static void open_db_with(bool phantom, bool no_locking)
{
    char err[256];
    struct pod_db_options o = {.nworkers = 2, .host_id = 0, .nhosts = 1,
                               .phantom_protection = phantom, .no_locking = no_locking};
    db = pod_db_new(&o, err, sizeof err);
    ck_assert_msg(db != NULL, "%s", err);
    static const pod_column cols[] = {{"balance", POD_COL_I64, 0, 8},
                                      {"version", POD_COL_I64, 8, 8}};
    pod_table_def def = {.name = "acct", .key_size = 8, .tuple_size = sizeof(struct acct),
                         .ncols = 2, .cols = cols, .nparts = 1};
    T = pod_table_create(db, &def, err, sizeof err);
    ck_assert_msg(T != NULL, "%s", err);
    A = db->workers[0]->tx;
    B = db->workers[1]->tx;
}

static void open_db(bool phantom) { open_db_with(phantom, false); }
static void setup_on(void) { open_db(true); }
static void setup_off(void) { open_db(false); }
static void setup_no_locking(void) { open_db_with(true, true); }
static void teardown(void) { pod_db_free(db); }

/* Insert even keys lo..hi, committed. */
static void load_even(uint64_t lo, uint64_t hi)
{
    txn_begin(A);
    for (uint64_t i = lo; i <= hi; i += 2) {
        unsigned char k[8];
        key(k, i);
        struct acct a = {(int64_t)i * 10, 0};
        ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    }
    ck_assert_int_eq(txn_status(A), POD_OK);
    txn_commit(A);
}

static int64_t balance_of(struct pod_txn *tx, uint64_t k, int *rc)
{
    unsigned char kb[8];
    key(kb, k);
    struct acct a = {-1, -1};
    *rc = pod_get(tx, T, kb, &a);
    return a.balance;
}

START_TEST(crud_and_read_your_writes)
{
    load_even(0, 20);
    unsigned char k[8];
    struct acct a;
    int rc;
    txn_begin(A);
    ck_assert_int_eq(balance_of(A, 4, &rc), 40);
    ck_assert_int_eq(rc, POD_OK);
    balance_of(A, 5, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    key(k, 4);
    a = (struct acct){7, 1};
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_EXISTS);
    ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK);
    ck_assert_int_eq(balance_of(A, 4, &rc), 7); /* own write */
    key(k, 5);
    ck_assert_int_eq(pod_put(A, T, k, &a), POD_NOT_FOUND);
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    ck_assert_int_eq(balance_of(A, 5, &rc), 7); /* own insert */
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_EXISTS);
    key(k, 6);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK);
    balance_of(A, 6, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND); /* own delete */
    ck_assert_int_eq(pod_delete(A, T, k), POD_NOT_FOUND);
    a.balance = 66;
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK); /* delete then insert */
    key(k, 8);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK);
    txn_commit(A);

    txn_begin(B);
    ck_assert_int_eq(balance_of(B, 4, &rc), 7);
    ck_assert_int_eq(balance_of(B, 5, &rc), 7);
    ck_assert_int_eq(balance_of(B, 6, &rc), 66);
    balance_of(B, 8, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    ck_assert_int_eq(balance_of(B, 10, &rc), 100);
    txn_commit(B);
}
END_TEST

START_TEST(abort_undoes_everything)
{
    load_even(0, 10);
    unsigned char k[8];
    struct acct a = {999, 9};
    int rc;
    txn_begin(A);
    key(k, 2);
    ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK);
    ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK); /* second write keeps the first undo */
    key(k, 3);
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    key(k, 4);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK);
    key(k, 7);
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK); /* inserted then deleted */
    txn_abort(A);

    txn_begin(B);
    ck_assert_int_eq(balance_of(B, 2, &rc), 20);
    balance_of(B, 3, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    ck_assert_int_eq(balance_of(B, 4, &rc), 40);
    balance_of(B, 7, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    txn_commit(B);
    /* Nothing is left locked: A can write everything. */
    txn_begin(A);
    for (uint64_t i = 0; i <= 10; i += 2) {
        key(k, i);
        ck_assert_int_eq(pod_get_for_update(A, T, k, &a), POD_OK);
    }
    txn_commit(A);
}
END_TEST

/* pod_get_ref / pod_update_ref: the row in place, a write through the
 * pointer is the transaction's write (committed, or undone on abort). */
START_TEST(tuples_in_place)
{
    load_even(0, 10);
    unsigned char k[8];
    int rc;
    const void *ro;
    void *rw;
    txn_begin(A);
    key(k, 4);
    ck_assert_int_eq(pod_get_ref(A, T, k, &ro), POD_OK);
    ck_assert_int_eq(((const struct acct *)ro)->balance, 40);
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_OK); /* upgrade */
    ((struct acct *)rw)->balance += 1;
    ck_assert_int_eq(balance_of(A, 4, &rc), 41); /* read your write */
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_OK); /* the before-image stays */
    ((struct acct *)rw)->balance += 1;
    key(k, 5);
    ck_assert_int_eq(pod_get_ref(A, T, k, &ro), POD_NOT_FOUND);
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_NOT_FOUND);
    key(k, 6);
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_OK);
    ((struct acct *)rw)->balance = 7;
    txn_abort(A);
    txn_begin(B);
    ck_assert_int_eq(balance_of(B, 4, &rc), 40);
    ck_assert_int_eq(balance_of(B, 6, &rc), 60);
    txn_commit(B);

    txn_begin(A);
    key(k, 4);
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_OK);
    ((struct acct *)rw)->balance = 44;
    key(k, 8);
    ck_assert_int_eq(pod_get_ref(A, T, k, NULL), POD_E_INVALID);
    txn_abort(A); /* the NULL made the transaction fail */
    txn_begin(A);
    key(k, 4);
    ck_assert_int_eq(pod_update_ref(A, T, k, &rw), POD_OK);
    ((struct acct *)rw)->balance = 44;
    txn_commit(A);
    txn_begin(B);
    ck_assert_int_eq(balance_of(B, 4, &rc), 44);
    txn_commit(B);
}
END_TEST

/* Account k's committed (balance, version), read by B, are these. */
static void check_acct(uint64_t k, int64_t balance, int64_t version)
{
    unsigned char kb[8];
    key(kb, k);
    struct acct a = {-1, -1};
    txn_begin(B);
    ck_assert_int_eq(pod_get(B, T, kb, &a), POD_OK);
    txn_commit(B);
    ck_assert_int_eq(a.balance, balance);
    ck_assert_int_eq(a.version, version);
}

/* pod_update_range: only the range is saved, and an abort restores exactly
 * the bytes written; several ranges of one row widen the saved range both
 * ways; pod_update_ref after a range saves the rest too; bad ranges fail. */
START_TEST(tuple_ranges_in_place)
{
    load_even(0, 10);
    const uint32_t BAL = offsetof(struct acct, balance), VER = offsetof(struct acct, version);
    unsigned char k[8];
    void *p;
    struct acct a;

    txn_begin(A); /* right, then left of it, then inside: aborted */
    key(k, 4);
    ck_assert_int_eq(pod_update_range(A, T, k, VER, 8, &p), POD_OK);
    ((struct acct *)p)->version = 77;
    ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK); /* read your write */
    ck_assert_int_eq(a.balance, 40);
    ck_assert_int_eq(a.version, 77);
    ck_assert_int_eq(pod_update_range(A, T, k, BAL, 8, &p), POD_OK);
    ((struct acct *)p)->balance = 41;
    ck_assert_int_eq(pod_update_range(A, T, k, 4, 8, &p), POD_OK); /* inside what is saved */
    memset((unsigned char *)p + 4, 0xee, 8);
    txn_abort(A);
    check_acct(4, 40, 0);

    txn_begin(A); /* left, then right of it: aborted */
    key(k, 2);
    ck_assert_int_eq(pod_update_range(A, T, k, BAL, 8, &p), POD_OK);
    ((struct acct *)p)->balance = 5;
    ck_assert_int_eq(pod_update_range(A, T, k, VER, 8, &p), POD_OK);
    ((struct acct *)p)->version = 6;
    txn_abort(A);
    check_acct(2, 20, 0);

    txn_begin(A); /* a range, then the whole tuple: aborted */
    key(k, 8);
    ck_assert_int_eq(pod_update_range(A, T, k, VER, 8, &p), POD_OK);
    ((struct acct *)p)->version = 1;
    ck_assert_int_eq(pod_update_ref(A, T, k, &p), POD_OK);
    ((struct acct *)p)->balance = 0;
    txn_abort(A);
    check_acct(8, 80, 0);

    txn_begin(A); /* committed: the range changed, the rest as it was */
    key(k, 6);
    ck_assert_int_eq(pod_update_range(A, T, k, VER, 8, &p), POD_OK);
    ((struct acct *)p)->version = 99;
    txn_commit(A);
    check_acct(6, 60, 99);

    key(k, 5);
    txn_begin(A);
    ck_assert_int_eq(pod_update_range(A, T, k, VER, 8, &p), POD_NOT_FOUND);
    txn_abort(A);
    key(k, 6);
    const uint32_t bad[][2] = {{12, 8}, {0, 0}, {16, 1}, {UINT32_MAX, 2}, {8, UINT32_MAX}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        txn_begin(A);
        ck_assert_int_eq(pod_update_range(A, T, k, bad[i][0], bad[i][1], &p), POD_E_INVALID);
        txn_abort(A);
    }
    txn_begin(A);
    ck_assert_int_eq(pod_update_range(A, T, k, 0, 8, NULL), POD_E_INVALID);
    txn_abort(A);
    check_acct(6, 60, 99);
}
END_TEST

/* The start of no_wait_conflicts and no_locking_takes_no_locks: the even keys
 * 0..10 loaded, A and B begun, A has read key 2 (in k, a) for update. */
static void a_reads_2_for_update(unsigned char k[8], struct acct *a)
{
    load_even(0, 10);
    txn_begin(A);
    txn_begin(B);
    key(k, 2);
    ck_assert_int_eq(pod_get_for_update(A, T, k, a), POD_OK);
}

START_TEST(no_wait_conflicts)
{
    unsigned char k[8];
    struct acct a;
    a_reads_2_for_update(k, &a);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_CONFLICT);
    ck_assert_int_eq(txn_abort_cause(B), POD_CAUSE_READ_LOCK);
    key(k, 4); /* the conflict is sticky: the attempt is doomed */
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_CONFLICT);
    txn_abort(B);

    txn_begin(B);
    key(k, 4);
    ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK); /* shared locks share */
    ck_assert_int_eq(pod_put(A, T, k, &a), POD_CONFLICT); /* upgrade: B reads it too */
    ck_assert_int_eq(txn_abort_cause(A), POD_CAUSE_UPGRADE);
    txn_abort(A);
    txn_begin(A);
    ck_assert_int_eq(pod_get_for_update(A, T, k, &a), POD_CONFLICT);
    ck_assert_int_eq(txn_abort_cause(A), POD_CAUSE_WRITE_LOCK);
    txn_abort(A);
    ck_assert_int_eq(pod_put(B, T, k, &a), POD_OK); /* sole reader upgrades */
    txn_commit(B);
}
END_TEST

/* The benchmark-only mode: the conflicts of no_wait_conflicts do not happen,
 * no lock word is ever set, and commits and aborts still work. */
START_TEST(no_locking_takes_no_locks)
{
    ck_assert(!db->opt.phantom_protection); /* no locks, so no gap locks either */
    unsigned char k[8];
    struct acct a;
    a_reads_2_for_update(k, &a);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK);
    a.balance = 7;
    ck_assert_int_eq(pod_put(B, T, k, &a), POD_OK);
    key(k, 3);
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    txn_commit(B);
    txn_commit(A);
    txn_begin(A);
    int rc;
    ck_assert_int_eq(balance_of(A, 2, &rc), 7);
    ck_assert_int_eq(balance_of(A, 3, &rc), 7);
    key(k, 4);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK);
    txn_abort(A); /* undone */
    txn_begin(A);
    ck_assert_int_eq(balance_of(A, 4, &rc), 40);
    txn_commit(A);
    for (uint64_t i = 0; i <= 10; i++) { /* nothing left locked */
        key(k, i);
        uint64_t v;
        if (bt_lookup(&T->parts[0].tree, k, &v) == BT_OK)
            ck_assert_uint_eq(((struct pod_row *)(uintptr_t)v)->lock & LOCK_STATE, 0);
    }
}
END_TEST

/* Collect the keys a scan visits. */
struct keys {
    uint64_t k[64];
    int n;
};

static bool collect(void *arg, const void *k, const void *tuple)
{
    (void)tuple;
    struct keys *ks = arg;
    if (ks->n < 64) ks->k[ks->n++] = pod_key_get_u64(k);
    return true;
}

/* Counts the rows a scan visits and checks they come in key order. */
struct row_count {
    int64_t n;
    uint64_t first, last;
    bool reverse, out_of_order;
};

static bool count_rows(void *arg, const void *k, const void *tuple)
{
    (void)tuple;
    struct row_count *c = arg;
    uint64_t v = pod_key_get_u64(k);
    if (c->n && (c->reverse ? v >= c->last : v <= c->last)) c->out_of_order = true;
    if (!c->n) c->first = v;
    c->last = v;
    c->n++;
    return true;
}

static int scan_keys(struct pod_txn *tx, uint64_t lo, uint64_t hi, uint32_t limit,
                     unsigned flags, struct keys *out)
{
    unsigned char l[8], h[8];
    key(l, lo);
    key(h, hi);
    out->n = 0;
    return pod_scan(tx, T, l, h, limit, flags, collect, out);
}

START_TEST(scans_in_both_directions)
{
    load_even(0, 40);
    struct keys ks;
    txn_begin(A);
    ck_assert_int_eq(scan_keys(A, 5, 15, 0, 0, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 5);
    ck_assert_uint_eq(ks.k[0], 6);
    ck_assert_uint_eq(ks.k[4], 14);
    ck_assert_int_eq(scan_keys(A, 6, 14, 0, POD_SCAN_REVERSE, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 5);
    ck_assert_uint_eq(ks.k[0], 14);
    ck_assert_uint_eq(ks.k[4], 6);
    ck_assert_int_eq(scan_keys(A, 0, 40, 3, 0, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 3);
    ck_assert_uint_eq(ks.k[2], 4);
    ck_assert_int_eq(scan_keys(A, 0, 40, 2, POD_SCAN_REVERSE, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 2);
    ck_assert_uint_eq(ks.k[0], 40);
    ck_assert_uint_eq(ks.k[1], 38);
    ck_assert_int_eq(scan_keys(A, 41, 100, 0, 0, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 0);
    ck_assert_int_eq(scan_keys(A, 20, 10, 0, 0, &ks), POD_OK); /* empty range */
    ck_assert_int_eq(ks.n, 0);
    ks.n = 0;
    ck_assert_int_eq(pod_scan(A, T, NULL, NULL, 0, 0, collect, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 21);
    /* A scan sees the transaction's own inserts and not its own deletes. */
    unsigned char k[8];
    struct acct a = {1, 1};
    key(k, 9);
    ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    key(k, 10);
    ck_assert_int_eq(pod_delete(A, T, k), POD_OK);
    ck_assert_int_eq(scan_keys(A, 8, 12, 0, 0, &ks), POD_OK);
    ck_assert_int_eq(ks.n, 3);
    ck_assert_uint_eq(ks.k[1], 9);
    ck_assert_uint_eq(ks.k[2], 12);
    txn_commit(A);
}
END_TEST

START_TEST(phantoms_are_prevented)
{
    load_even(0, 40);
    struct keys first, second;
    unsigned char k[8];
    struct acct a = {5, 5};
    int rc;
    txn_begin(A);
    ck_assert_int_eq(scan_keys(A, 10, 20, 0, 0, &first), POD_OK);
    /* Insert inside the scanned range, at its end, and just past it. */
    uint64_t tries[] = {15, 11, 19, 21};
    for (size_t i = 0; i < 4; i++) {
        txn_begin(B);
        key(k, tries[i]);
        ck_assert_int_eq(pod_insert(B, T, k, &a), POD_CONFLICT);
        ck_assert_int_eq(txn_abort_cause(B), POD_CAUSE_NEXT_KEY);
        txn_abort(B);
    }
    /* Far away is fine. */
    txn_begin(B);
    key(k, 31);
    ck_assert_int_eq(pod_insert(B, T, k, &a), POD_OK);
    txn_commit(B);
    /* A deletion inside the range conflicts on the row itself. */
    txn_begin(B);
    key(k, 14);
    ck_assert_int_eq(pod_delete(B, T, k), POD_CONFLICT);
    txn_abort(B);
    ck_assert_int_eq(scan_keys(A, 10, 20, 0, 0, &second), POD_OK);
    ck_assert_int_eq(first.n, second.n);
    ck_assert_int_eq(memcmp(first.k, second.k, sizeof(uint64_t) * (size_t)first.n), 0);

    /* A lookup of a missing key locks the gap: nobody can insert it. */
    balance_of(A, 25, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    txn_begin(B);
    key(k, 25);
    ck_assert_int_eq(pod_insert(B, T, k, &a), POD_CONFLICT);
    txn_abort(B);
    balance_of(A, 25, &rc);
    ck_assert_int_eq(rc, POD_NOT_FOUND);
    txn_commit(A);
    /* After A commits the gap is free. */
    txn_begin(B);
    ck_assert_int_eq(pod_insert(B, T, k, &a), POD_OK);
    txn_commit(B);
}
END_TEST

START_TEST(reverse_scan_protects_its_range)
{
    load_even(0, 40);
    struct keys ks;
    unsigned char k[8];
    struct acct a = {5, 5};
    txn_begin(A);
    ck_assert_int_eq(scan_keys(A, 10, 20, 0, POD_SCAN_REVERSE, &ks), POD_OK);
    uint64_t tries[] = {21, 15, 9 + 2}; /* above hi, inside, at the bottom */
    for (size_t i = 0; i < 3; i++) {
        txn_begin(B);
        key(k, tries[i]);
        ck_assert_msg(pod_insert(B, T, k, &a) == POD_CONFLICT, "insert %llu",
                      (unsigned long long)tries[i]);
        txn_abort(B);
    }
    txn_commit(A);
}
END_TEST

START_TEST(phantoms_without_protection)
{
    /* The switch is real: without next-key locks the same interleaving lets
     * an insert into the scanned range commit, and the second scan differs. */
    load_even(0, 40);
    struct keys first, second;
    unsigned char k[8];
    struct acct a = {5, 5};
    txn_begin(A);
    ck_assert_int_eq(scan_keys(A, 10, 20, 0, 0, &first), POD_OK);
    txn_begin(B);
    key(k, 15);
    ck_assert_int_eq(pod_insert(B, T, k, &a), POD_OK);
    txn_commit(B);
    ck_assert_int_eq(scan_keys(A, 10, 20, 0, 0, &second), POD_OK);
    ck_assert_int_eq(second.n, first.n + 1);
    txn_commit(A);
}
END_TEST

START_TEST(large_transactions_find_their_own_locks)
{
    /* Past 16 accesses a transaction finds its locks through a hash index. */
    load_even(0, 3998); /* 2000 rows */
    unsigned char k[8];
    struct acct a;
    txn_begin(A);
    for (uint64_t i = 0; i <= 3998; i += 2) {
        key(k, i);
        ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 0; i <= 3998; i += 2) { /* upgrades: A is the sole reader */
        key(k, i);
        a = (struct acct){(int64_t)i, 1};
        ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 1; i < 400; i += 2) { /* inserts: own gap locks found */
        key(k, i);
        a = (struct acct){-1, 2};
        ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    }
    key(k, 1000);
    ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
    ck_assert_int_eq(a.balance, 1000); /* own write */
    txn_begin(B);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_CONFLICT); /* still locked */
    txn_abort(B);
    txn_abort(A);
    txn_begin(B);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK);
    ck_assert_int_eq(a.balance, 10000); /* undone */
    key(k, 1);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_NOT_FOUND);
    txn_commit(B);
    /* After the big one, A's index is large; smaller transactions use a
     * part of it sized to them, and grow it again as they grow. */
    for (uint64_t n = 20; n <= 200; n += 60) {
        txn_begin(A);
        for (uint64_t i = 0; i < 2 * n; i += 2) {
            key(k, i);
            ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
        }
        for (uint64_t i = 0; i < 2 * n; i += 2) { /* each found as A's own read lock */
            key(k, i);
            a = (struct acct){(int64_t)n, 3};
            ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK);
        }
        txn_begin(B);
        key(k, 2 * n - 2);
        ck_assert_int_eq(pod_get(B, T, k, &a), POD_CONFLICT);
        txn_abort(B);
        ck_assert_int_eq(txn_status(A), POD_OK);
        txn_commit(A);
    }
}
END_TEST

/* An insert locks its next key for an instant and gives the lock back; in a
 * transaction past 16 accesses that takes its entry out of the hash index
 * (the newest's slot is emptied, nothing is rebuilt). Every access before
 * and after must still be found. */
/* The row word holds the latch and valid bits beside the lock: every lock
 * operation keeps them, and they never make a lock attempt fail. */
START_TEST(row_word_lock_keeps_latch_and_valid)
{
    struct pod_row row = {0};
    uint32_t *w = &row.lock;
    row_set_valid(&row, 1);
    __atomic_fetch_or(w, ROW_LATCH, __ATOMIC_RELAXED);
    ck_assert(lock_try_write(w));
    ck_assert(!lock_try_read(w));
    ck_assert(!lock_try_write(w));
    lock_downgrade(w);
    ck_assert_uint_eq(*w, ROW_LATCH | ROW_VALID | 1);
    ck_assert(lock_try_upgrade(w));
    ck_assert_uint_eq(*w, ROW_LATCH | ROW_VALID | LOCK_W);
    lock_release_write(w);
    ck_assert_uint_eq(*w, ROW_LATCH | ROW_VALID);
    ck_assert(lock_try_read(w) && lock_try_read(w));
    ck_assert(!lock_try_upgrade(w)); /* two readers */
    ck_assert(!lock_try_write(w));
    ck_assert_uint_eq(lock_release_read(w) & LOCK_STATE, 2);
    ck_assert(lock_try_upgrade(w));
    row_set_valid(&row, 0);
    ck_assert(!row_valid(&row));
    lock_release_write(w);
    ck_assert_uint_eq(*w, ROW_LATCH);
    row_set_shortcut(&row, 8ull << 30);
    ck_assert_uint_eq(row_shortcut(&row), 8ull << 30);
    row_set_shortcut(&row, CXL_HWCC_LIMIT - 8);
    ck_assert_uint_eq(row_shortcut(&row), CXL_HWCC_LIMIT - 8);
}
END_TEST

START_TEST(instant_gap_locks_keep_the_access_index)
{
    load_even(0, 98); /* 50 rows */
    unsigned char k[8];
    struct acct a;
    txn_begin(A);
    for (uint64_t i = 0; i <= 60; i += 2) { /* 31 read locks: the index is in use */
        key(k, i);
        ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 1001; i < 1200; i += 2) { /* each next key (the end) locked for an instant */
        key(k, i);
        a = (struct acct){(int64_t)i, 4};
        ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 71; i < 98; i += 2) { /* next keys 72..98: not held, instant locks */
        key(k, i);
        a = (struct acct){(int64_t)i, 5};
        ck_assert_int_eq(pod_insert(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 0; i <= 60; i += 2) { /* the reads: found, upgraded in place */
        key(k, i);
        a = (struct acct){(int64_t)i, 6};
        ck_assert_int_eq(pod_put(A, T, k, &a), POD_OK);
    }
    for (uint64_t i = 1001; i < 1200; i += 2) { /* own inserts: found, present */
        key(k, i);
        ck_assert_int_eq(pod_get(A, T, k, &a), POD_OK);
        ck_assert_int_eq(a.balance, (int64_t)i);
        ck_assert_int_eq(pod_insert(A, T, k, &a), POD_EXISTS);
    }
    key(k, 72); /* the instant lock on 72 is gone: B may lock it */
    txn_begin(B);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK);
    key(k, 71);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_CONFLICT); /* A's insert */
    txn_abort(B);
    ck_assert_int_eq(txn_status(A), POD_OK);
    txn_commit(A);
    txn_begin(B);
    key(k, 1199);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK);
    ck_assert_int_eq(a.balance, 1199);
    key(k, 60);
    ck_assert_int_eq(pod_get(B, T, k, &a), POD_OK);
    ck_assert_int_eq(a.version, 6);
    txn_commit(B);
}
END_TEST

/* ---- pod_call: retries, user aborts, errors, statistics ------------------- */

struct flaky {
    int conflicts_left;
    int calls;
};

static int flaky_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    struct flaky *f = ctx;
    f->calls++;
    unsigned char k[8];
    key(k, 2);
    struct acct v;
    POD_TRY(pod_get(tx, T, k, &v));
    if (f->conflicts_left > 0) {
        f->conflicts_left--;
        return POD_CONFLICT; /* as if a lock had been denied */
    }
    pod_result_i64(res, v.balance);
    return POD_OK;
}

static int abort_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    (*(int *)ctx)++;
    unsigned char k[8];
    key(k, (uint64_t)a->v[0].u.i64);
    struct acct v = {123456, 0};
    POD_TRY(pod_put(tx, T, k, &v));
    return POD_USER_ABORT;
}

/* Ignores the conflict its first get returns and tries to commit anyway. */
static int careless_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)res;
    (void)ctx;
    unsigned char k[8];
    key(k, 4);
    struct acct v = {777, 0};
    pod_get(tx, T, k, &v);
    pod_put(tx, T, k, &v);
    return POD_OK;
}

START_TEST(call_retries_and_counts)
{
    load_even(0, 10);
    char err[256], msg[256];
    struct flaky f = {3, 0};
    int aborts = 0;
    pod_proc_def d1 = {"flaky", flaky_proc, &f, 0, NULL, true};
    static const enum pod_type t_i64[] = {POD_T_I64};
    pod_proc_def d2 = {"abort", abort_proc, &aborts, 1, t_i64, false};
    int p1 = pod_proc_register(db, &d1, err, sizeof err);
    int p2 = pod_proc_register(db, &d2, err, sizeof err);
    ck_assert_int_ge(p1, 0);
    ck_assert_int_ge(p2, 0);
    ck_assert_int_eq(pod_proc_register(db, &d1, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "already registered"), "%s", err);
    ck_assert_int_eq(pod_proc_find(db, "abort"), p2);

    struct pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    pod_args none = {0, NULL};
    ck_assert_int_eq(pod_call(w, p1, &none, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(f.calls, 4); /* 3 conflicts retried, then commit */
    pod_value v;
    ck_assert_int_eq(pod_result_get(res, 0, 0, &v), 0);
    ck_assert_int_eq(v.u.i64, 20);

    pod_value arg = pod_v_i64(2);
    pod_args one = {1, &arg};
    ck_assert_int_eq(pod_call(w, p2, &one, res, msg, sizeof msg), POD_USER_ABORT);
    ck_assert_int_eq(aborts, 1); /* not retried */
    ck_assert_int_eq(pod_call(w, p2, &none, res, msg, sizeof msg), POD_E_INVALID);
    ck_assert_msg(strstr(msg, "takes 1 argument, got 0"), "%s", msg);
    pod_value bad = pod_v_str("x");
    pod_args wrong = {1, &bad};
    ck_assert_int_eq(pod_call(w, p2, &wrong, res, msg, sizeof msg), POD_E_INVALID);
    ck_assert_msg(strstr(msg, "argument 1 must be int64, got bytes"), "%s", msg);
    ck_assert_int_eq(pod_call(w, 999, &none, res, msg, sizeof msg), POD_E_INVALID);
    pod_admin_end(db);

    struct pod_proc_stats s1, s2;
    pod_db_proc_stats(db, p1, &s1);
    pod_db_proc_stats(db, p2, &s2);
    ck_assert_uint_eq(s1.commits, 1);
    ck_assert_uint_eq(s1.conflicts, 3);
    ck_assert_uint_eq(s2.user_aborts, 1);
    ck_assert_uint_eq(s2.errors, 2);
    ck_assert_uint_eq(s2.commits, 0);
    /* The aborted write was undone. */
    int rc;
    txn_begin(A);
    ck_assert_int_eq(balance_of(A, 2, &rc), 20);
    txn_commit(A);
    pod_result_free(res);
}
END_TEST

START_TEST(call_never_commits_a_doomed_attempt)
{
    char err[256], msg[256];
    pod_db_free(db);
    struct pod_db_options o = {.nworkers = 2, .host_id = 0, .nhosts = 1,
                               .phantom_protection = true, .max_retries = 5};
    db = pod_db_new(&o, err, sizeof err);
    pod_table_def def = {.name = "acct", .key_size = 8, .tuple_size = sizeof(struct acct),
                         .nparts = 1};
    T = pod_table_create(db, &def, err, sizeof err);
    A = db->workers[0]->tx;
    load_even(0, 10);
    pod_proc_def d = {"careless", careless_proc, NULL, 0, NULL, false};
    int p = pod_proc_register(db, &d, err, sizeof err);
    /* Worker 1's transaction holds key 4: every attempt of careless conflicts. */
    struct pod_txn *holder = db->workers[1]->tx;
    txn_begin(holder);
    unsigned char k[8];
    key(k, 4);
    struct acct a;
    ck_assert_int_eq(pod_get_for_update(holder, T, k, &a), POD_OK);
    struct pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    pod_args none = {0, NULL};
    ck_assert_int_eq(pod_call(w, p, &none, res, msg, sizeof msg), POD_E_RETRIES);
    ck_assert_msg(strstr(msg, "gave up after 5 conflicts"), "%s", msg);
    pod_admin_end(db);
    struct pod_proc_stats s;
    pod_db_proc_stats(db, p, &s);
    ck_assert_uint_eq(s.commits, 0);
    ck_assert_uint_eq(s.conflicts, 5);
    ck_assert_uint_eq(s.by_cause[POD_CAUSE_READ_LOCK], 5);
    ck_assert_uint_eq(s.gave_up, 1);
    ck_assert_int_eq(a.balance, 40);
    txn_commit(holder);
    pod_result_free(res);
}
END_TEST

/* Answers [hosts, host id, host of partition 0, 1, ..., 7] as a module's
 * procedure would find them, through its transaction. */
static int where_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    const pod_table *t = ctx;
    pod_db *d = pod_txn_db(tx);
    pod_result_i64(res, pod_db_nhosts(d));
    pod_result_i64(res, pod_db_host_id(d));
    for (uint32_t p = 0; p < 8; p++) pod_result_i64(res, pod_table_part_host(t, p));
    return POD_OK;
}

/* Host 2 of a pod of 3 (without a region: only the accessors are used). */
START_TEST(procedures_see_hosts_and_placement)
{
    ck_assert_int_eq(pod_db_nhosts(db), 1);
    ck_assert_int_eq(pod_db_host_id(db), 0);
    ck_assert_int_eq(pod_table_part_host(T, 0), 0);
    ck_assert_int_eq(pod_table_part_host(T, 1), -1); /* T has one partition */

    char err[256], msg[256];
    pod_db_free(db);
    struct pod_db_options o = {.nworkers = 1, .host_id = 2, .nhosts = 3};
    db = pod_db_new(&o, err, sizeof err);
    ck_assert_msg(db != NULL, "%s", err);
    pod_table_def def = {.name = "seven", .key_size = 8, .tuple_size = 8, .nparts = 7,
                         .partition = pod_part_be64};
    pod_table *seven = pod_table_create(db, &def, err, sizeof err);
    ck_assert_msg(seven != NULL, "%s", err);
    pod_proc_def d = {"where", where_proc, seven, 0, NULL, true};
    int p = pod_proc_register(db, &d, err, sizeof err);
    ck_assert_int_ge(p, 0);
    struct pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    pod_args none = {0, NULL};
    ck_assert_int_eq(pod_call(w, p, &none, res, msg, sizeof msg), POD_OK);
    pod_admin_end(db);
    static const int64_t want[] = {3, 2, 0, 1, 2, 0, 1, 2, 0, -1};
    ck_assert_int_eq(pod_result_ncols(res, 0), 10);
    for (int i = 0; i < 10; i++) {
        pod_value v;
        ck_assert_int_eq(pod_result_get(res, 0, i, &v), 0);
        ck_assert_msg(v.u.i64 == want[i], "value %d: %lld, expected %lld", i,
                      (long long)v.u.i64, (long long)want[i]);
    }
    pod_result_free(res);
}
END_TEST

START_TEST(results_rows_and_bytes)
{
    struct pod_result *r = pod_result_new();
    ck_assert_int_eq(pod_result_nrows(r), 0);
    char buf[16] = "hello";
    pod_result_i64(r, 42);
    pod_result_str(r, buf);
    memcpy(buf, "XXXXX", 5); /* the result has its own copy */
    for (int i = 0; i < 100; i++) {
        pod_result_row(r);
        pod_result_i64(r, i);
        pod_result_f64(r, i * 0.5);
    }
    ck_assert_int_eq(pod_result_nrows(r), 101);
    ck_assert_int_eq(pod_result_ncols(r, 0), 2);
    pod_value v;
    ck_assert_int_eq(pod_result_get(r, 0, 1, &v), 0);
    ck_assert_int_eq(v.type, POD_T_BYTES);
    ck_assert_int_eq(v.len, 5);
    ck_assert_int_eq(memcmp(v.u.bytes, "hello", 5), 0);
    ck_assert_int_eq(pod_result_get(r, 100, 1, &v), 0);
    ck_assert(v.u.f64 == 49.5);
    ck_assert_int_eq(pod_result_get(r, 100, 2, &v), -1);
    pod_result_clear(r);
    ck_assert_int_eq(pod_result_nrows(r), 0);
    pod_result_free(r);
}
END_TEST

START_TEST(table_definitions_are_checked)
{
    char err[256];
    pod_table_def bad_key = {.name = "x", .tuple_size = 8, .nparts = 1};
    ck_assert_ptr_null(pod_table_create(db, &bad_key, err, sizeof err));
    ck_assert_msg(strstr(err, "key_size 0 is out of range"), "%s", err);
    pod_table_def dup = {.name = "acct", .key_size = 8, .tuple_size = 8, .nparts = 1};
    ck_assert_ptr_null(pod_table_create(db, &dup, err, sizeof err));
    ck_assert_msg(strstr(err, "already exists"), "%s", err);
    static const pod_column over[] = {{"a", POD_COL_I64, 4, 8}};
    pod_table_def ov = {.name = "y", .key_size = 8, .tuple_size = 8, .ncols = 1, .cols = over,
                        .nparts = 1};
    ck_assert_ptr_null(pod_table_create(db, &ov, err, sizeof err));
    ck_assert_msg(strstr(err, "ends past"), "%s", err);
    pod_table_def odd = {.name = "z", .key_size = 8, .tuple_size = 8, .nparts = 1,
                         .index_node_size = 1020};
    ck_assert_ptr_null(pod_table_create(db, &odd, err, sizeof err));
    ck_assert_msg(strstr(err, "index_node_size 1020 is not a multiple of 8"), "%s", err);
    pod_table_def tiny = {.name = "z", .key_size = 40, .tuple_size = 8, .nparts = 1,
                          .index_node_size = 128}; /* 2 keys of 40 bytes */
    ck_assert_ptr_null(pod_table_create(db, &tiny, err, sizeof err));
    ck_assert_msg(strstr(err, "at least 4 keys of 40 bytes"), "%s", err);
    ck_assert_ptr_null(pod_table_find(db, "z"));
    ck_assert_ptr_eq(pod_table_find(db, "acct"), T);
    ck_assert_int_eq(pod_table_col_index(T, "version"), 1);
    ck_assert_int_eq(pod_table_col_index(T, "nope"), -1);
}
END_TEST

/* A table with 1 KiB index nodes (several levels of them) reads, scans and
 * deletes like any other. */
START_TEST(bigger_index_nodes)
{
    char err[256];
    pod_table_def def = {.name = "wide_nodes", .key_size = 8, .tuple_size = 8, .nparts = 1,
                         .index_node_size = 1024};
    pod_table *W = pod_table_create(db, &def, err, sizeof err);
    ck_assert_msg(W != NULL, "%s", err);
    enum { N = 20000 };
    unsigned char k[8], lo[8], hi[8];
    for (int64_t i = 0; i < N; i += 1000) {
        txn_begin(A);
        for (int64_t j = i; j < i + 1000; j++) {
            key(k, (uint64_t)j * 2);
            ck_assert_int_eq(pod_insert(A, W, k, &j), POD_OK);
        }
        txn_commit(A);
    }
    txn_begin(A);
    int64_t v;
    key(k, 2 * 12345);
    ck_assert_int_eq(pod_get(A, W, k, &v), POD_OK);
    ck_assert_int_eq(v, 12345);
    key(k, 2 * 12345 + 1);
    ck_assert_int_eq(pod_get(A, W, k, &v), POD_NOT_FOUND);
    struct row_count c = {0};
    ck_assert_int_eq(pod_scan(A, W, NULL, NULL, 0, 0, count_rows, &c), POD_OK);
    ck_assert(c.n == N && c.first == 0 && c.last == 2 * (N - 1) && !c.out_of_order);
    key(lo, 1001);
    key(hi, 1101);
    c = (struct row_count){.reverse = true};
    ck_assert_int_eq(pod_scan(A, W, lo, hi, 0, POD_SCAN_REVERSE, count_rows, &c), POD_OK);
    ck_assert(c.n == 50 && c.first == 1100 && c.last == 1002 && !c.out_of_order);
    for (int64_t j = 0; j < N; j += 2) {
        key(k, (uint64_t)j * 2);
        ck_assert_int_eq(pod_delete(A, W, k), POD_OK);
    }
    txn_commit(A);
    txn_begin(A);
    c = (struct row_count){0};
    ck_assert_int_eq(pod_scan(A, W, NULL, NULL, 0, 0, count_rows, &c), POD_OK);
    ck_assert(c.n == N / 2 && c.first == 2 && c.last == 2 * (N - 1) && !c.out_of_order);
    txn_commit(A);
}
END_TEST

/* A partition function whose answer is out of range: the table wraps it. */
static uint32_t part_too_big(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    return nparts + (uint32_t)pod_key_get_u64(key);
}

START_TEST(partitioned_scans_stay_in_one_partition)
{
    {
        char err2[256];
        pod_table_def def = {.name = "wrapped", .key_size = 8, .tuple_size = 8, .nparts = 2,
                             .partition = part_too_big};
        pod_table *Wt = pod_table_create(db, &def, err2, sizeof err2);
        ck_assert_msg(Wt != NULL, "%s", err2);
        unsigned char k[8];
        int64_t v = 5, got = 0;
        txn_begin(A);
        for (uint64_t i = 0; i < 4; i++) {
            key(k, i);
            ck_assert_int_eq(pod_insert(A, Wt, k, &v), POD_OK);
        }
        txn_commit(A);
        txn_begin(A);
        key(k, 3);
        ck_assert_int_eq(pod_get(A, Wt, k, &got), POD_OK);
        ck_assert_int_eq(got, 5);
        txn_commit(A);
    }
    char err[256];
    pod_table_def def = {.name = "parted", .key_size = 16, .tuple_size = 8, .nparts = 4,
                         .partition = pod_part_be64};
    pod_table *P = pod_table_create(db, &def, err, sizeof err);
    ck_assert_msg(P != NULL, "%s", err);
    unsigned char lo[16], hi[16];
    pod_key_u64(lo, 1);
    pod_key_u64(lo + 8, 0);
    pod_key_u64(hi, 2);
    pod_key_u64(hi + 8, 0);
    txn_begin(A);
    int64_t v = 1;
    ck_assert_int_eq(pod_insert(A, P, lo, &v), POD_OK);
    ck_assert_int_eq(pod_scan(A, P, lo, hi, 0, 0, NULL, NULL), POD_E_INVALID);
    ck_assert_msg(strstr(txn_message(A), "crosses partitions"), "%s", txn_message(A));
    ck_assert_int_eq(pod_scan(A, P, NULL, NULL, 0, 0, NULL, NULL), POD_E_INVALID);
    txn_abort(A);
}
END_TEST

/* pod_prefetch leaves the leaves it reached to the reads that follow
 * (src/txn/leaf_memo.h). Those reads must still see what changed in
 * between: rows another transaction inserted and deleted next to the
 * prefetched keys, and this transaction's own inserts. */
START_TEST(prefetched_reads_see_changes)
{
    load_even(0, 3998); /* 2 000 rows: ~70 leaves */
    enum { N = 40 };
    unsigned char keys[N][8];
    /* Present (even) and missing (odd) keys, flipped or not by B below. */
    for (int i = 0; i < N; i++) key(keys[i], (uint64_t)i * 100 + (uint64_t)(i / 2 % 2));
    txn_begin(A);
    ck_assert_int_eq(pod_prefetch(A, T, keys, N), POD_OK);
    int found = 0;
    /* B flips every other key: an odd one is inserted, an even one deleted,
     * and its neighbour key+1 the other way round. */
    txn_begin(B);
    for (int i = 0; i < N; i += 2) {
        uint64_t k = (uint64_t)i * 100 + (uint64_t)(i / 2 % 2);
        unsigned char kk[8], kn[8];
        key(kk, k);
        key(kn, k + 1);
        struct acct a = {-(int64_t)k, 1};
        if (k % 2) {
            ck_assert_int_eq(pod_insert(B, T, kk, &a), POD_OK);
            ck_assert_int_eq(pod_delete(B, T, kn), POD_OK);
        } else {
            ck_assert_int_eq(pod_delete(B, T, kk), POD_OK);
            ck_assert_int_eq(pod_insert(B, T, kn, &a), POD_OK);
        }
    }
    ck_assert_int_eq(txn_status(B), POD_OK);
    txn_commit(B);
    for (int i = 0; i < N; i++) {
        uint64_t k = (uint64_t)i * 100 + (uint64_t)(i / 2 % 2);
        bool present = (k % 2 == 0) != (i % 2 == 0); /* flipped by B */
        struct acct got;
        int rc = pod_get(A, T, keys[i], &got);
        ck_assert_msg(rc == (present ? POD_OK : POD_NOT_FOUND), "key %llu: %d",
                      (unsigned long long)k, rc);
        if (present) ck_assert_int_eq(got.balance, i % 2 ? (int64_t)k * 10 : -(int64_t)k);
        found += present;
    }
    ck_assert_int_eq(found, N / 2);
    /* A run of inserts continues in the leaf of the last one; each is there. */
    for (uint64_t k = 4001; k < 4400; k += 2) {
        unsigned char kk[8];
        key(kk, k);
        struct acct a = {(int64_t)k, 2};
        ck_assert_int_eq(pod_insert(A, T, kk, &a), POD_OK);
        struct acct got;
        ck_assert_int_eq(pod_get(A, T, kk, &got), POD_OK);
        ck_assert_int_eq(got.balance, (int64_t)k);
    }
    ck_assert_int_eq(txn_status(A), POD_OK);
    txn_commit(A);
    txn_begin(A);
    for (uint64_t k = 3990; k < 4400; k++) {
        unsigned char kk[8];
        key(kk, k);
        bool present = k < 4000 ? k % 2 == 0 : k % 2 == 1;
        ck_assert_int_eq(pod_get(A, T, kk, NULL), present ? POD_OK : POD_NOT_FOUND);
    }
    txn_commit(A);
}
END_TEST

/* A remembered leaf is found only for its tree and only in the transaction
 * that remembered it: a later one could meet a freed leaf. */
START_TEST(leaf_memo_is_per_transaction)
{
    static struct leaf_memo m;
    bt_tree t1, t2;
    char leaf[64];
    bt_hint h = {.tree = &t1, .leaf = leaf, .v = 4}, got = {0};
    unsigned char k[8], k2[8];
    key(k, 5);
    key(k2, 6);
    leaf_memo_begin(&m);
    ck_assert(!leaf_memo_get(&m, &t1, k, 8, &got));
    leaf_memo_put(&m, k, 8, &h);
    ck_assert(leaf_memo_get(&m, &t1, k, 8, &got));
    ck_assert_ptr_eq(got.leaf, leaf);
    ck_assert(got.tree == &t1 && got.v == 4);
    ck_assert(!leaf_memo_get(&m, &t2, k, 8, &got));
    leaf_memo_put(&m, NULL, 0, &(bt_hint){.tree = &t2, .leaf = leaf, .v = 8}); /* the tree's last insert */
    ck_assert(leaf_memo_get(&m, &t2, NULL, 0, &got));
    ck_assert(got.tree == &t2 && got.v == 8);
    leaf_memo_begin(&m);
    ck_assert(!leaf_memo_get(&m, &t1, k, 8, &got));
    ck_assert(!leaf_memo_get(&m, &t2, NULL, 0, &got));
    ck_assert(!leaf_memo_get(&m, &t1, k2, 8, &got));
}
END_TEST

START_TEST(keys_sort_naturally)
{
    unsigned char a[8], b[8];
    pod_key_i64(a, -5);
    pod_key_i64(b, 3);
    ck_assert_int_lt(memcmp(a, b, 8), 0);
    ck_assert_int_eq(pod_key_get_i64(a), -5);
    pod_key_u64(a, 255);
    pod_key_u64(b, 256);
    ck_assert_int_lt(memcmp(a, b, 8), 0);
    unsigned char s1[8], s2[8];
    pod_key_str(s1, "ab", 8);
    pod_key_str(s2, "abc", 8);
    ck_assert_int_lt(memcmp(s1, s2, 8), 0);
    ck_assert_int_eq(s1[7], 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn");
    TCase *on = tu_tcase(s, "phantom protection on", 0);
    tcase_add_checked_fixture(on, setup_on, teardown);
    tcase_add_test(on, crud_and_read_your_writes);
    tcase_add_test(on, abort_undoes_everything);
    tcase_add_test(on, tuples_in_place);
    tcase_add_test(on, tuple_ranges_in_place);
    tcase_add_test(on, no_wait_conflicts);
    tcase_add_test(on, scans_in_both_directions);
    tcase_add_test(on, phantoms_are_prevented);
    tcase_add_test(on, reverse_scan_protects_its_range);
    tcase_add_test(on, large_transactions_find_their_own_locks);
    tcase_add_test(on, call_retries_and_counts);
    tcase_add_test(on, call_never_commits_a_doomed_attempt);
    tcase_add_test(on, procedures_see_hosts_and_placement);
    tcase_add_test(on, results_rows_and_bytes);
    tcase_add_test(on, table_definitions_are_checked);
    tcase_add_test(on, bigger_index_nodes);
    tcase_add_test(on, partitioned_scans_stay_in_one_partition);
    tcase_add_test(on, keys_sort_naturally);
    tcase_add_test(on, prefetched_reads_see_changes);
    tcase_add_test(on, leaf_memo_is_per_transaction);
    tcase_add_test(on, instant_gap_locks_keep_the_access_index);
    tcase_add_test(on, row_word_lock_keeps_latch_and_valid);
    TCase *off = tu_tcase(s, "phantom protection off", 0);
    tcase_add_checked_fixture(off, setup_off, teardown);
    tcase_add_test(off, phantoms_without_protection);
    TCase *nl = tu_tcase(s, "benchmark-only mode without locks", 0);
    tcase_add_checked_fixture(nl, setup_no_locking, teardown);
    tcase_add_test(nl, no_locking_takes_no_locks);
    return tu_run(s);
}
