/* What every record store (src/store/record_store.h) must do, as Check
 * assertions on a store given by the caller: its index (lookup, lookup_many, insert,
 * remove, and neighbour where it is ordered; walk; a table of far more keys
 * than its rows_hint), the record word's CAS and FAA (also from several
 * threads at once), row reads and writes of the header and of byte ranges,
 * allocation, each table's sentinel, and batches. Tables 900.. are used; the
 * store must be empty of them. */
#ifndef PODDB_TESTS_RS_CONFORMANCE_H
#define PODDB_TESTS_RS_CONFORMANCE_H

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record.h"
#include "store/record_store.h"

#define RSC_TABLE 900u
#define RSC_THREADS 4
#define RSC_ROUNDS 20000
#define RSC_MANY 3000u /* keys of the table declared for 1 row: chains in a hash index */

static inline void rsc_key(unsigned char *k, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) k[i] = (unsigned char)v; /* big-endian: memcmp order */
}

static inline uint64_t rsc_key_value(const unsigned char *k)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | k[i];
    return v;
}

/* A walk's tally: keys 0..n-1 expected with want[key] (0: absent). */
struct rsc_walk {
    const rs_loc *want;
    uint32_t *seen;
    uint64_t n, visits, stop_after; /* stop_after 0: never */
    bool stray;                     /* a key out of range or a location not wanted */
};

static inline bool rsc_walk_visit(void *arg, const void *key, rs_loc loc)
{
    struct rsc_walk *w = arg;
    uint64_t v = rsc_key_value(key);
    if (v >= w->n || w->want[v] != loc) w->stray = true;
    else w->seen[v]++;
    return ++w->visits != w->stop_after;
}

/* walk sees exactly the present keys, each once with its location; a
 * visitor returning false stops it there. */
static inline void rsc_walk_check(struct record_store *s, uint32_t table, const rs_loc *want,
                                  uint64_t n)
{
    uint32_t *seen = calloc(n, sizeof *seen);
    ck_assert(seen != NULL);
    struct rsc_walk w = {.want = want, .seen = seen, .n = n};
    ck_assert_int_eq(s->ops->walk(s, table, rsc_walk_visit, &w), RS_OK);
    ck_assert(!w.stray);
    uint64_t present = 0;
    for (uint64_t v = 0; v < n; v++) {
        ck_assert_msg(seen[v] == (want[v] != 0), "key %llu seen %u times by a walk",
                      (unsigned long long)v, seen[v]);
        present += want[v] != 0;
    }
    if (present) {
        w = (struct rsc_walk){.want = want, .seen = seen, .n = n,
                              .stop_after = present > 5 ? 5 : present};
        ck_assert_int_eq(s->ops->walk(s, table, rsc_walk_visit, &w), RS_OK);
        ck_assert_uint_eq(w.visits, w.stop_after);
    }
    free(seen);
}

static inline void rsc_index(struct record_store *s, bool ordered)
{
    const struct rs_ops *o = s->ops;
    pod_err e;
    struct rs_table_def def = {.id = RSC_TABLE, .key_size = 8, .tuple_size = 24};
    ck_assert_msg(o->table_add(s, &def, &e) == 0, "%s", e.msg);
    ck_assert_int_ne(o->table_add(s, &def, &e), 0); /* added twice by one user */
    /* the sentinel: a record of its own, the same every time, unlocked, invalid */
    rs_loc sent = o->sentinel(s, RSC_TABLE);
    ck_assert(sent != 0 && o->sentinel(s, RSC_TABLE) == sent);
    ck_assert_uint_eq(o->word_read(s, sent), 0);
    struct rs_row_head sh;
    o->row_read(s, sent, &sh, NULL, 0, 0);
    ck_assert_uint_eq(sh.valid, 0);
    unsigned char k[8], got[8];
    rs_loc locs[64], loc;
    for (uint64_t i = 0; i < 64; i++) { /* even keys 0, 2, .. 126 */
        rsc_key(k, 2 * i);
        ck_assert_int_eq(o->alloc(s, RSC_TABLE, k, &locs[i]), RS_OK);
        ck_assert(locs[i] != 0 && locs[i] != sent);
        for (uint64_t j = 0; j < i; j++) ck_assert(locs[j] != locs[i]);
        ck_assert_int_eq(o->index_insert(s, RSC_TABLE, k, locs[i]), RS_OK);
        ck_assert_int_eq(o->index_insert(s, RSC_TABLE, k, locs[i]), RS_EXISTS);
    }
    for (uint64_t i = 0; i < 128; i++) {
        rsc_key(k, i);
        int rc = o->lookup(s, RSC_TABLE, k, &loc);
        ck_assert_int_eq(rc, i % 2 ? RS_MISSING : RS_OK);
        if (rc == RS_OK) ck_assert(loc == locs[i / 2]);
    }
    if (ordered) {
        rsc_key(k, 5);
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, k, false, false, got, &loc), RS_OK);
        rsc_key(k, 6);
        ck_assert(memcmp(got, k, 8) == 0 && loc == locs[3]);
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, k, true, false, got, &loc), RS_OK);
        ck_assert(loc == locs[3]); /* inclusive: itself */
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, k, false, true, got, &loc), RS_OK);
        ck_assert(loc == locs[2]); /* backward: 4 */
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, NULL, true, false, got, &loc), RS_OK);
        ck_assert(loc == locs[0]);
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, NULL, true, true, got, &loc), RS_OK);
        ck_assert(loc == locs[63]);
        rsc_key(k, 126);
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, k, false, false, got, &loc), RS_MISSING);
    }
    for (uint64_t i = 0; i < 64; i += 2) {
        rsc_key(k, 2 * i);
        ck_assert_int_eq(o->index_remove(s, RSC_TABLE, k), RS_OK);
        ck_assert_int_eq(o->index_remove(s, RSC_TABLE, k), RS_MISSING);
        ck_assert_int_eq(o->lookup(s, RSC_TABLE, k, &loc), RS_MISSING);
    }
    if (ordered) { /* 0 was removed: the first is now 2 */
        ck_assert_int_eq(o->neighbour(s, RSC_TABLE, NULL, true, false, got, &loc), RS_OK);
        ck_assert(loc == locs[1]);
    }
    rs_loc want[128] = {0}; /* keys 2, 6, .. 126 are left */
    for (uint64_t i = 1; i < 64; i += 2) want[2 * i] = locs[i];
    rsc_walk_check(s, RSC_TABLE, want, 128);
}

/* A table declared for one row (a hash index of the fewest buckets) given
 * far more keys: all found, walked once each, removable, insertable again;
 * a duplicate is refused wherever in the table its key is. The index takes
 * any non-zero location: these name no records. */
static inline void rsc_many(struct record_store *s)
{
    const struct rs_ops *o = s->ops;
    const uint32_t t = RSC_TABLE + 3;
    pod_err e;
    ck_assert_msg(o->table_add(s, &(struct rs_table_def){.id = t, .key_size = 8, .tuple_size = 8,
                                                          .rows_hint = 1}, &e) == 0, "%s", e.msg);
    rs_loc *want = calloc(RSC_MANY, sizeof *want), loc;
    ck_assert(want != NULL);
    unsigned char k[8];
    for (uint64_t v = 0; v < RSC_MANY; v++) {
        rsc_key(k, v);
        want[v] = 0x1000 + v;
        ck_assert_int_eq(o->index_insert(s, t, k, want[v]), RS_OK);
    }
    for (uint64_t v = 0; v < RSC_MANY; v++) {
        rsc_key(k, v);
        if (v % 4 == 0) ck_assert_int_eq(o->index_insert(s, t, k, 1), RS_EXISTS);
        ck_assert_int_eq(o->lookup(s, t, k, &loc), RS_OK);
        ck_assert(loc == want[v]);
    }
    rsc_walk_check(s, t, want, RSC_MANY);
    for (uint64_t v = 1; v < RSC_MANY; v += 2) { /* the odd keys out */
        rsc_key(k, v);
        ck_assert_int_eq(o->index_remove(s, t, k), RS_OK);
        want[v] = 0;
    }
    rsc_walk_check(s, t, want, RSC_MANY);
    if (o->lookup_many) { /* the same in batches, the missing keys 0; a few never there */
        enum { B = 97 };
        unsigned char keys[B * 8];
        rs_loc locs[B];
        for (uint64_t v0 = 0; v0 < RSC_MANY + B; v0 += B) {
            for (uint64_t i = 0; i < B; i++) rsc_key(keys + i * 8, v0 + i);
            ck_assert_int_eq(o->lookup_many(s, t, keys, B, locs), RS_OK);
            for (uint64_t i = 0; i < B; i++)
                ck_assert(locs[i] == (v0 + i < RSC_MANY ? want[v0 + i] : 0));
        }
    }
    for (uint64_t v = 1; v < RSC_MANY; v += 2) { /* and back, elsewhere */
        rsc_key(k, v);
        ck_assert_int_eq(o->lookup(s, t, k, &loc), RS_MISSING);
        want[v] = 0x100000 + v;
        ck_assert_int_eq(o->index_insert(s, t, k, want[v]), RS_OK);
    }
    for (uint64_t v = 0; v < RSC_MANY; v++) {
        rsc_key(k, v);
        ck_assert_int_eq(o->lookup(s, t, k, &loc), RS_OK);
        ck_assert(loc == want[v]);
    }
    rsc_walk_check(s, t, want, RSC_MANY);
    free(want);
}

static inline void rsc_rows(struct record_store *s)
{
    const struct rs_ops *o = s->ops;
    pod_err e;
    struct rs_table_def def = {.id = RSC_TABLE + 1, .key_size = 8, .tuple_size = 100};
    ck_assert_msg(o->table_add(s, &def, &e) == 0, "%s", e.msg);
    rs_loc loc;
    unsigned char key[8];
    rsc_key(key, 1);
    ck_assert_int_eq(o->alloc(s, RSC_TABLE + 1, key, &loc), RS_OK);
    unsigned char t[100], back[100];
    struct rs_row_head h;
    o->row_read(s, loc, &h, back, 0, sizeof back);
    ck_assert_uint_eq(h.valid, 0); /* a new record: invalid, zero */
    for (size_t i = 0; i < sizeof back; i++) ck_assert_uint_eq(back[i], 0);
    ck_assert_uint_eq(o->word_read(s, loc), 0);
    for (size_t i = 0; i < sizeof t; i++) t[i] = (unsigned char)(i * 7 + 1);
    o->row_write(s, loc, &(struct rs_row_head){1, 5ull << 32}, t, 0, sizeof t);
    o->row_read(s, loc, &h, back, 0, sizeof back);
    ck_assert(h.valid == 1 && h.epoch_version == 5ull << 32 && memcmp(back, t, sizeof t) == 0);
    unsigned char part[10] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    o->row_write(s, loc, NULL, part, 40, sizeof part); /* a range; the header kept */
    memcpy(t + 40, part, sizeof part);
    unsigned char mid[20];
    o->row_read(s, loc, &h, mid, 35, sizeof mid);
    ck_assert(h.valid == 1 && memcmp(mid, t + 35, sizeof mid) == 0);
    /* the word: CAS and FAA */
    uint64_t exp = 0;
    ck_assert(o->word_cas(s, loc, &exp, REC_LOCK_W));
    exp = 0;
    ck_assert(!o->word_cas(s, loc, &exp, REC_LOCK_R_ONE));
    ck_assert_uint_eq(exp, REC_LOCK_W); /* the value found */
    ck_assert_uint_eq(o->word_faa(s, loc, (uint64_t)0 - REC_LOCK_W), REC_LOCK_W);
    ck_assert_uint_eq(o->word_read(s, loc), 0);
    /* a batch: a write, a CAS, an FAA, a read, completing together */
    unsigned char nb[100];
    memset(nb, 0x5a, sizeof nb);
    struct rs_row_head nh = {1, 6ull << 32}, rh;
    unsigned char rb[100];
    struct rs_op ops[4] = {
        {.kind = RS_OP_WRITE, .loc = loc, .head = &nh, .buf = nb, .off = 0, .len = sizeof nb},
        {.kind = RS_OP_CAS, .loc = loc, .expected = 0, .desired = REC_LOCK_R_ONE},
        {.kind = RS_OP_FAA, .loc = loc, .add = REC_LOCK_R_ONE},
        {.kind = RS_OP_READ, .loc = loc, .head = &rh, .buf = rb, .off = 0, .len = sizeof rb},
    };
    o->batch(s, ops, 4);
    ck_assert(ops[1].ok && ops[1].old == 0);
    ck_assert_uint_eq(ops[2].old, REC_LOCK_R_ONE);
    ck_assert_uint_eq(o->word_read(s, loc), 2 * REC_LOCK_R_ONE);
    ck_assert(rh.epoch_version == 6ull << 32 && memcmp(rb, nb, sizeof nb) == 0);
}

struct rsc_thread {
    struct record_store *s;
    rs_loc loc;
};

/* Half the rounds by FAA, half by a CAS loop: no update may be lost. */
static inline void *rsc_adder(void *arg)
{
    struct rsc_thread *t = arg;
    const struct rs_ops *o = t->s->ops;
    for (int i = 0; i < RSC_ROUNDS; i++) {
        if (i % 2) {
            o->word_faa(t->s, t->loc, 1);
            continue;
        }
        uint64_t w = o->word_read(t->s, t->loc);
        while (!o->word_cas(t->s, t->loc, &w, w + 1)) {
        }
    }
    return NULL;
}

static inline void rsc_word_threads(struct record_store *s)
{
    pod_err e;
    struct rs_table_def def = {.id = RSC_TABLE + 2, .key_size = 8, .tuple_size = 8};
    ck_assert_msg(s->ops->table_add(s, &def, &e) == 0, "%s", e.msg);
    struct rsc_thread t = {s, 0};
    unsigned char key[8];
    rsc_key(key, 2);
    ck_assert_int_eq(s->ops->alloc(s, RSC_TABLE + 2, key, &t.loc), RS_OK);
    pthread_t th[RSC_THREADS];
    for (int i = 0; i < RSC_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, rsc_adder, &t), 0);
    for (int i = 0; i < RSC_THREADS; i++) pthread_join(th[i], NULL);
    ck_assert_uint_eq(s->ops->word_read(s, t.loc), (uint64_t)RSC_THREADS * RSC_ROUNDS);
}

/* All of it, on a fresh store. */
static inline void rs_conformance(struct record_store *s)
{
    rsc_index(s, s->ops->ordered);
    rsc_many(s);
    rsc_rows(s);
    rsc_word_threads(s);
}

#endif
