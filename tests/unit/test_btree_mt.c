/* B+-tree under concurrency (also built with ThreadSanitizer by make tsan).
 *
 * Writers insert and remove disjoint key sets and check every result they
 * get (only they touch their keys, so each answer is known). Readers run
 * lookups, scans in both directions and next/prev at the same time and check
 * what must hold whatever the writers do: scans return strictly ordered keys
 * with the right values, "stable" keys (inserted before the threads start,
 * never removed) are always found and never skipped by a scan or next/prev,
 * keys never inserted never show up. At the end the tree must hold exactly
 * the expected set. BT_MT_SCALE=N multiplies the work for longer stress runs.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/btree.h"
#include "helpers/testutil.h"

/* ---- race injection ------------------------------------------------------------
 * The tree calls this (weak) hook at points where another thread's change
 * would have to be caught by validation. Stalling there now and then turns
 * nanosecond windows into scheduler-sized ones. */
static int inject_races; /* atomic */

void bt_race_point(enum bt_race_where where)
{
    static __thread uint64_t x = 0;
    if (!__atomic_load_n(&inject_races, __ATOMIC_RELAXED)) return;
    if (x == 0) x = (uint64_t)(uintptr_t)&x | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    unsigned odds = where == BT_RACE_LOCKED ? 8 : 4; /* stall 1 in 2^odds calls */
    if ((x & ((1u << odds) - 1)) != 0) return;
    if (x & (1u << 20)) {
        sched_yield();
    } else {
        for (unsigned i = (unsigned)(x >> 40) % 2000; i > 0; i--) __asm__ __volatile__("" ::: "memory");
    }
}

/* ---- shared test state ---------------------------------------------------------- */

static bt_tree tree;
static int stop_flag; /* set when the writers are done; atomic */
static unsigned scale = 1;

/* A thread's failure (the first one is kept: tu_fail); false, for the
 * checks that return it. */
#define flag_failure(...) (tu_fail(__VA_ARGS__), false)

static bool stopping(void) { return __atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE) || tu_failed(); }

static void check_no_failure(void)
{
    if (tu_failed()) ck_abort_msg("%s", tu_failure());
}

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static unsigned rng_below(rng *r, unsigned n) { return (unsigned)(rng_next(r) % n); }

static void shuffle(rng *r, uint64_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(r, (unsigned)i);
        uint64_t tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}

/* Keys are 8-byte big-endian ids, so key order is id order. */
static void key_of(uint64_t id, uint8_t k[8])
{
    for (int i = 0; i < 8; i++) k[i] = (uint8_t)(id >> (56 - 8 * i));
}

static uint64_t id_of(const void *key)
{
    const uint8_t *k = key;
    uint64_t id = 0;
    for (int i = 0; i < 8; i++) id = id << 8 | k[i];
    return id;
}

static uint64_t value_of(uint64_t id) { return id * 0x9E3779B97F4A7C15ull ^ 0x5555; }

/* ---- the key space of the churn test -------------------------------------------
 * Chunks of 64 ids. Chunk % 4 == 0: even ids are stable, odd ids are never
 * inserted. Other chunks belong to writer (chunk % 4) - 1 as a whole, so a
 * writer draining its keys empties whole leaves (prunes under readers). */
#define CHUNK 64
#define WRITERS 3
#define READERS 2

static unsigned n_ids;

static bool is_stable(uint64_t id) { return id < n_ids && (id / CHUNK) % 4 == 0 && id % 2 == 0; }
static bool never_inserted(uint64_t id) { return id >= n_ids || ((id / CHUNK) % 4 == 0 && id % 2); }
static int owner_of(uint64_t id) { return (int)((id / CHUNK) % 4) - 1; }

/* Smallest stable id >= id (> id unless inclusive); UINT64_MAX if none. */
static uint64_t stable_at_or_after(uint64_t id, bool inclusive)
{
    for (uint64_t x = inclusive ? id : id + 1; x < n_ids; x++)
        if (is_stable(x)) return x;
    return UINT64_MAX;
}

/* Largest stable id <= id (< id unless inclusive); UINT64_MAX if none. */
static uint64_t stable_at_or_before(uint64_t id, bool inclusive)
{
    if (!inclusive) {
        if (id == 0) return UINT64_MAX;
        id--;
    }
    if (id >= n_ids) id = n_ids - 1;
    for (uint64_t x = id + 1; x-- > 0;)
        if (is_stable(x)) return x;
    return UINT64_MAX;
}

/* ---- writers ------------------------------------------------------------------------ */

typedef struct writer {
    pthread_t thread;
    int index;
    uint64_t *ids; /* the ids this writer owns */
    size_t n;
    bool *present; /* indexed by position in ids */
    unsigned rounds, toggles;
} writer;

static bool writer_insert(writer *w, size_t i)
{
    uint8_t k[8];
    key_of(w->ids[i], k);
    bt_status st;
    if (i & 1) { /* half through a hint, as a transaction's insert after its lookup */
        bt_hint h = {0};
        bt_lookup_at(&tree, k, NULL, &h);
        st = bt_insert_at(&tree, k, value_of(w->ids[i]), &h);
    } else {
        st = bt_insert(&tree, k, value_of(w->ids[i]));
    }
    if (st != (w->present[i] ? BT_EXISTS : BT_OK))
        return flag_failure("writer %d: insert of %llu gave %s", w->index, (unsigned long long)w->ids[i],
                    bt_status_name(st));
    w->present[i] = true;
    return true;
}

static bool writer_remove(writer *w, size_t i)
{
    uint8_t k[8];
    key_of(w->ids[i], k);
    uint64_t v = 0;
    bt_status st = bt_remove(&tree, k, &v);
    if (st != (w->present[i] ? BT_OK : BT_NOT_FOUND))
        return flag_failure("writer %d: remove of %llu gave %s", w->index, (unsigned long long)w->ids[i],
                    bt_status_name(st));
    if (st == BT_OK && v != value_of(w->ids[i]))
        return flag_failure("writer %d: remove of %llu returned a wrong value", w->index,
                    (unsigned long long)w->ids[i]);
    w->present[i] = false;
    return true;
}

/* A lookup of the writer's key i gave st and v: what the writer last did to it. */
static bool sees_own(const writer *w, size_t i, bt_status st, uint64_t v)
{
    return st == (w->present[i] ? BT_OK : BT_NOT_FOUND) &&
           (st != BT_OK || v == value_of(w->ids[i]));
}

static bool writer_lookup(writer *w, size_t i)
{
    uint8_t k[8];
    key_of(w->ids[i], k);
    uint64_t v = 0;
    bt_status st = bt_lookup(&tree, k, &v);
    if (!sees_own(w, i, st, v))
        return flag_failure("writer %d: lookup of own key %llu gave %s", w->index,
                    (unsigned long long)w->ids[i], bt_status_name(st));
    /* The batched lookup under the same concurrent writers: the value, or
     * 0 when a change on the path made it give up. */
    const bt_tree *tp[1] = {&tree};
    const void *kp[1] = {k};
    uint64_t pv;
    bt_hint h;
    bt_prefetch(tp, kp, 1, &pv, &h);
    if (pv != 0 && (!w->present[i] || pv != value_of(w->ids[i])))
        return flag_failure("writer %d: bt_prefetch of own key %llu gave a wrong value", w->index,
                    (unsigned long long)w->ids[i]);
    /* A lookup from the leaf it reached, while other writers change it. */
    st = bt_lookup_at(&tree, k, &v, &h);
    if (!sees_own(w, i, st, v))
        return flag_failure("writer %d: lookup of own key %llu from its prefetched leaf gave %s",
                            w->index, (unsigned long long)w->ids[i], bt_status_name(st));
    return true;
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    rng r = {0x1234567ull + (uint64_t)w->index * 7919};
    uint64_t *order = malloc(w->n * sizeof *order);
    for (size_t i = 0; i < w->n; i++) order[i] = i;
    for (unsigned round = 0; round < w->rounds && !stopping(); round++) {
        /* Fill in random order. */
        shuffle(&r, order, w->n);
        for (size_t j = 0; j < w->n && !stopping(); j++)
            if (!w->present[order[j]] && !writer_insert(w, order[j])) goto out;
        /* Random toggles, duplicate inserts, lookups. */
        for (unsigned j = 0; j < w->toggles && !stopping(); j++) {
            size_t i = rng_below(&r, (unsigned)w->n);
            bool ok = rng_below(&r, 4) == 0 ? writer_lookup(w, i)
                      : w->present[i] && rng_below(&r, 3) == 0 ? writer_insert(w, i) /* EXISTS */
                      : w->present[i] ? writer_remove(w, i)
                                      : writer_insert(w, i);
            if (!ok) goto out;
        }
        if (round + 1 == w->rounds) break; /* end with a partly filled set */
        /* Drain in random order: leaves empty out and get pruned. */
        shuffle(&r, order, w->n);
        for (size_t j = 0; j < w->n && !stopping(); j++)
            if (w->present[order[j]] && !writer_remove(w, order[j])) goto out;
    }
out:
    free(order);
    return NULL;
}

/* ---- readers ------------------------------------------------------------------------ */

typedef struct scan_check {
    bool forward;
    uint64_t prev;      /* last id returned */
    bool have_prev;
    uint64_t need;      /* next stable id the scan must return; UINT64_MAX: none */
    unsigned left;      /* entries still wanted */
    bool bad;
    char why[160];
} scan_check;

static bool scan_visit(void *arg, const void *key, uint64_t value)
{
    scan_check *c = arg;
    uint64_t id = id_of(key);
    if (value != value_of(id)) {
        snprintf(c->why, sizeof c->why, "scan returned key %llu with a wrong value",
                 (unsigned long long)id);
    } else if (never_inserted(id)) {
        snprintf(c->why, sizeof c->why, "scan returned key %llu that was never inserted",
                 (unsigned long long)id);
    } else if (c->have_prev && (c->forward ? id <= c->prev : id >= c->prev)) {
        snprintf(c->why, sizeof c->why, "scan returned %llu after %llu", (unsigned long long)id,
                 (unsigned long long)c->prev);
    } else if (c->need != UINT64_MAX && (c->forward ? id > c->need : id < c->need)) {
        snprintf(c->why, sizeof c->why, "scan skipped stable key %llu (got %llu)",
                 (unsigned long long)c->need, (unsigned long long)id);
    } else {
        if (id == c->need)
            c->need = c->forward ? stable_at_or_after(id, false) : stable_at_or_before(id, false);
        c->prev = id;
        c->have_prev = true;
        return --c->left > 0;
    }
    c->bad = true;
    return false;
}

static bool reader_scan(rng *r, bool forward)
{
    uint64_t start_id = rng_below(r, n_ids + 64);
    bool inclusive = rng_below(r, 2), from_end = rng_below(r, 16) == 0;
    uint8_t k[8];
    key_of(start_id, k);
    scan_check c = {.forward = forward, .left = 1 + rng_below(r, 200)};
    if (forward) c.need = from_end ? stable_at_or_after(0, true) : stable_at_or_after(start_id, inclusive);
    else c.need = from_end ? stable_at_or_before(UINT64_MAX - 1, true)
                           : stable_at_or_before(start_id, inclusive);
    bt_status st = forward ? bt_scan_forward(&tree, from_end ? NULL : k, inclusive, scan_visit, &c)
                           : bt_scan_backward(&tree, from_end ? NULL : k, inclusive, scan_visit, &c);
    if (st != BT_OK) return flag_failure("scan gave %s", bt_status_name(st));
    if (c.bad) return flag_failure("%s", c.why);
    if (c.left > 0 && c.need != UINT64_MAX) /* ran to the end */
        return flag_failure("%s scan ended before stable key %llu", forward ? "forward" : "backward",
                    (unsigned long long)c.need);
    if (!from_end && c.have_prev) {
        bool in_range = forward ? (inclusive ? c.prev >= start_id : c.prev > start_id)
                                : (inclusive ? c.prev <= start_id : c.prev < start_id);
        if (!in_range) return flag_failure("scan from %llu returned %llu", (unsigned long long)start_id,
                                   (unsigned long long)c.prev);
    }
    return true;
}

static bool reader_next_prev(rng *r)
{
    uint64_t id = rng_below(r, n_ids + 64);
    bool inclusive = rng_below(r, 2), forward = rng_below(r, 2);
    uint8_t k[8], got[8];
    key_of(id, k);
    uint64_t v = 0;
    bt_status st = forward ? bt_next(&tree, k, inclusive, got, &v) : bt_prev(&tree, k, inclusive, got, &v);
    uint64_t bound = forward ? stable_at_or_after(id, inclusive) : stable_at_or_before(id, inclusive);
    if (st == BT_NOT_FOUND) {
        if (bound != UINT64_MAX)
            return flag_failure("%s(%llu) found nothing, stable key %llu exists", forward ? "next" : "prev",
                        (unsigned long long)id, (unsigned long long)bound);
        return true;
    }
    if (st != BT_OK) return flag_failure("next/prev gave %s", bt_status_name(st));
    uint64_t g = id_of(got);
    bool side_ok = forward ? (inclusive ? g >= id : g > id) : (inclusive ? g <= id : g < id);
    bool not_past = bound == UINT64_MAX || (forward ? g <= bound : g >= bound);
    if (!side_ok || !not_past || v != value_of(g) || never_inserted(g))
        return flag_failure("%s(%llu, %s) returned %llu (stable bound %llu)", forward ? "next" : "prev",
                    (unsigned long long)id, inclusive ? "inclusive" : "exclusive",
                    (unsigned long long)g, (unsigned long long)bound);
    return true;
}

/* A scan's pattern through one hint: next-key steps from the key just
 * found (each repeated, as the next-key locking of a scan or an insert
 * repeats its search), and lookups of keys near the cursor through the same
 * hint, while the writers split, refill and prune the leaves it knows
 * (its leaf, its right neighbour, the slot of its last answer). */
static bool reader_walk(rng *r)
{
    uint64_t cur = rng_below(r, n_ids + 64);
    uint8_t k[8], got[8];
    key_of(cur, k);
    bt_hint h = {0};
    bool inclusive = true;
    for (int step = 0; step < 64; step++) {
        for (int again = 0; again < 2; again++) {
            uint64_t v = 0;
            bt_status st = bt_next_at(&tree, k, inclusive, got, &v, &h);
            uint64_t bound = stable_at_or_after(cur, inclusive);
            if (st == BT_NOT_FOUND) {
                if (bound != UINT64_MAX)
                    return flag_failure("hinted next(%llu) found nothing, stable key %llu exists",
                                        (unsigned long long)cur, (unsigned long long)bound);
                return true;
            }
            if (st != BT_OK) return flag_failure("hinted next gave %s", bt_status_name(st));
            uint64_t g = id_of(got);
            bool side_ok = inclusive ? g >= cur : g > cur;
            if (!side_ok || (bound != UINT64_MAX && g > bound) || v != value_of(g) || never_inserted(g))
                return flag_failure("hinted next(%llu, %s) returned %llu (stable bound %llu)",
                                    (unsigned long long)cur, inclusive ? "inclusive" : "exclusive",
                                    (unsigned long long)g, (unsigned long long)bound);
        }
        uint64_t near = cur + rng_below(r, 16), v = 0;
        uint8_t nk[8];
        key_of(near, nk);
        bt_status st = bt_lookup_at(&tree, nk, &v, &h);
        if ((is_stable(near) && (st != BT_OK || v != value_of(near))) ||
            (never_inserted(near) && st != BT_NOT_FOUND))
            return flag_failure("hinted lookup of %llu gave %s", (unsigned long long)near,
                                bt_status_name(st));
        memcpy(k, got, 8);
        cur = id_of(got);
        inclusive = false;
    }
    return true;
}

static bool reader_lookup(rng *r)
{
    uint64_t id = rng_below(r, n_ids);
    uint8_t k[8];
    key_of(id, k);
    uint64_t v = 0;
    bt_status st = bt_lookup(&tree, k, &v);
    if (is_stable(id) && (st != BT_OK || v != value_of(id)))
        return flag_failure("stable key %llu: lookup gave %s", (unsigned long long)id, bt_status_name(st));
    if (never_inserted(id) && st != BT_NOT_FOUND)
        return flag_failure("never-inserted key %llu: lookup gave %s", (unsigned long long)id,
                    bt_status_name(st));
    if (st == BT_OK && v != value_of(id))
        return flag_failure("key %llu: lookup returned a wrong value", (unsigned long long)id);
    return true;
}

typedef struct reader {
    pthread_t thread;
    int index;
    uint64_t ops;
} reader;

static void *reader_main(void *arg)
{
    reader *rd = arg;
    rng r = {0xabcdefull + (uint64_t)rd->index * 104729};
    /* At least some work even if the writers finish first. */
    while (!tu_failed() && (!stopping() || rd->ops < 200)) {
        unsigned what = rng_below(&r, 10);
        bool ok = what < 3   ? reader_lookup(&r)
                  : what < 5 ? reader_scan(&r, true)
                  : what < 7 ? reader_scan(&r, false)
                  : what < 8 ? reader_walk(&r)
                             : reader_next_prev(&r);
        if (!ok) break;
        rd->ops++;
    }
    return NULL;
}

/* ---- test: churn with readers ------------------------------------------------------- */

static void tree_setup(bt_local_space *ls, bt_header *hdr, unsigned node_size, bool races)
{
    __atomic_store_n(&inject_races, races, __ATOMIC_RELAXED);
    __atomic_store_n(&stop_flag, 0, __ATOMIC_RELAXED);
    tu_fail_reset();
    bt_local_space_init(ls);
    ck_assert_int_eq(bt_create(&tree, hdr, &ls->space,
                               &(bt_config){.key_width = 8, .node_size = node_size}),
                     BT_OK);
}

static void expect_exact(const bool *expected, uint64_t n)
{
    uint64_t count = 0;
    for (uint64_t id = 0; id < n; id++) {
        uint8_t k[8];
        key_of(id, k);
        uint64_t v = 0;
        bt_status st = bt_lookup(&tree, k, &v);
        if (st != (expected[id] ? BT_OK : BT_NOT_FOUND) || (st == BT_OK && v != value_of(id)))
            ck_abort_msg("after the run key %llu: lookup gave %s, expected %s",
                         (unsigned long long)id, bt_status_name(st), expected[id] ? "ok" : "not found");
        count += expected[id];
    }
    pod_err err = {{0}};
    if (!bt_verify(&tree, &err)) ck_abort_msg("tree invariant broken after the run: %s", err.msg);
    bt_stats s;
    ck_assert_int_eq(bt_get_stats(&tree, &s), BT_OK);
    ck_assert_uint_eq(s.keys, count);
}

/* Loop index: node size (tiny, default) x race injection (off, on). */
static const unsigned churn_node_sizes[] = {88, 0};

START_TEST(churn_with_readers)
{
    bt_local_space ls;
    bt_header hdr;
    tree_setup(&ls, &hdr, churn_node_sizes[_i % 2], _i >= 2);
    n_ids = 4096 * (scale < 4 ? scale : 4);
    /* Stable keys first. */
    for (uint64_t id = 0; id < n_ids; id++) {
        if (!is_stable(id)) continue;
        uint8_t k[8];
        key_of(id, k);
        ck_assert_int_eq(bt_insert(&tree, k, value_of(id)), BT_OK);
    }
    writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.index = i, .rounds = 3 * scale, .toggles = 1500};
        w[i].ids = malloc(n_ids * sizeof(uint64_t));
        w[i].present = calloc(n_ids, sizeof(bool));
        for (uint64_t id = 0; id < n_ids; id++)
            if (owner_of(id) == i) w[i].ids[w[i].n++] = id;
    }
    reader rd[READERS];
    for (int i = 0; i < READERS; i++) {
        rd[i] = (reader){.index = i};
        ck_assert_int_eq(pthread_create(&rd[i].thread, NULL, reader_main, &rd[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++)
        ck_assert_int_eq(pthread_create(&w[i].thread, NULL, writer_main, &w[i]), 0);
    for (int i = 0; i < WRITERS; i++) pthread_join(w[i].thread, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS; i++) pthread_join(rd[i].thread, NULL);
    check_no_failure();

    bool *expected = calloc(n_ids + 64, sizeof(bool));
    for (uint64_t id = 0; id < n_ids; id++) expected[id] = is_stable(id);
    for (int i = 0; i < WRITERS; i++)
        for (size_t j = 0; j < w[i].n; j++) expected[w[i].ids[j]] = w[i].present[j];
    expect_exact(expected, n_ids + 64);
    /* Drains emptied leaves while readers ran: they were unlinked. */
    ck_assert_uint_gt(__atomic_load_n(&ls.retired_nodes, __ATOMIC_RELAXED), 0);
    for (int i = 0; i < READERS; i++) ck_assert_uint_ge(rd[i].ops, 200);

    free(expected);
    for (int i = 0; i < WRITERS; i++) {
        free(w[i].ids);
        free(w[i].present);
    }
    bt_destroy(&tree);
    bt_local_space_fini(&ls);
}
END_TEST

/* ---- test: interleaved ascending inserts, then concurrent removal of all --------------
 * All inserters append to the same rightmost leaves (the split-heavy hot
 * spot of sequential ids). Each publishes how far it got; a reader checks
 * that every key published before a scan started is returned by it. */
#define INSERTERS 3

static uint64_t progress[INSERTERS]; /* ids below this of inserter i are in; atomic */
static unsigned total_ids;
static int phase; /* 0: inserting, 1: removing; atomic */

typedef struct inserter {
    pthread_t thread;
    int index;
} inserter;

static void *inserter_main(void *arg)
{
    inserter *in = arg;
    uint8_t k[8];
    for (uint64_t id = (uint64_t)in->index; id < total_ids && !stopping(); id += INSERTERS) {
        key_of(id, k);
        bt_status st = bt_insert(&tree, k, value_of(id));
        if (st != BT_OK) {
            tu_fail("inserter %d: insert of %llu gave %s", in->index, (unsigned long long)id,
                 bt_status_name(st));
            return NULL;
        }
        __atomic_store_n(&progress[in->index], id + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *remover_main(void *arg)
{
    inserter *in = arg;
    rng r = {99 + (uint64_t)in->index};
    size_t n = 0;
    uint64_t *ids = malloc((total_ids / INSERTERS + 1) * sizeof *ids);
    for (uint64_t id = (uint64_t)in->index; id < total_ids; id += INSERTERS) ids[n++] = id;
    shuffle(&r, ids, n);
    uint8_t k[8];
    for (size_t i = 0; i < n && !stopping(); i++) {
        key_of(ids[i], k);
        uint64_t v = 0;
        bt_status st = bt_remove(&tree, k, &v);
        if (st != BT_OK || v != value_of(ids[i])) {
            tu_fail("remover %d: remove of %llu gave %s", in->index, (unsigned long long)ids[i],
                 bt_status_name(st));
            break;
        }
    }
    free(ids);
    return NULL;
}

typedef struct ordered_check {
    uint64_t prev;
    bool have_prev;
    uint64_t published[INSERTERS]; /* progress when the scan started */
    uint64_t next_required[INSERTERS];
    bool bad;
    char why[160];
} ordered_check;

static bool ordered_visit(void *arg, const void *key, uint64_t value)
{
    ordered_check *c = arg;
    uint64_t id = id_of(key);
    if (value != value_of(id) || id >= total_ids || (c->have_prev && id <= c->prev)) {
        snprintf(c->why, sizeof c->why, "scan returned %llu after %llu (or a wrong value)",
                 (unsigned long long)id, (unsigned long long)c->prev);
        c->bad = true;
        return false;
    }
    /* Every published id below this one must have come already. */
    for (int i = 0; i < INSERTERS; i++) {
        if (c->next_required[i] < c->published[i] && c->next_required[i] < id) {
            snprintf(c->why, sizeof c->why, "scan skipped published key %llu (got %llu)",
                     (unsigned long long)c->next_required[i], (unsigned long long)id);
            c->bad = true;
            return false;
        }
        if (c->next_required[i] == id) c->next_required[i] += INSERTERS;
    }
    c->prev = id;
    c->have_prev = true;
    return true;
}

static void *ordered_reader_main(void *arg)
{
    reader *rd = arg;
    while (!stopping() || rd->ops < 20) {
        ordered_check c = {0};
        bool inserting = __atomic_load_n(&phase, __ATOMIC_ACQUIRE) == 0;
        for (int i = 0; i < INSERTERS; i++) {
            c.published[i] = inserting ? __atomic_load_n(&progress[i], __ATOMIC_ACQUIRE) : 0;
            c.next_required[i] = (uint64_t)i;
        }
        bt_status st = bt_scan_forward(&tree, NULL, true, ordered_visit, &c);
        if (st != BT_OK) {
            tu_fail("scan gave %s", bt_status_name(st));
            break;
        }
        if (c.bad) {
            tu_fail("%s", c.why);
            break;
        }
        for (int i = 0; i < INSERTERS; i++) {
            if (c.next_required[i] < c.published[i]) {
                tu_fail("scan ended before published key %llu", (unsigned long long)c.next_required[i]);
                return NULL;
            }
        }
        rd->ops++;
        if (tu_failed()) break;
    }
    return NULL;
}

static void run_phase(void *(*fn)(void *), inserter *in, reader *rd)
{
    __atomic_store_n(&stop_flag, 0, __ATOMIC_RELEASE);
    rd->ops = 0;
    ck_assert_int_eq(pthread_create(&rd->thread, NULL, ordered_reader_main, rd), 0);
    for (int i = 0; i < INSERTERS; i++) {
        in[i].index = i;
        ck_assert_int_eq(pthread_create(&in[i].thread, NULL, fn, &in[i]), 0);
    }
    for (int i = 0; i < INSERTERS; i++) pthread_join(in[i].thread, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    pthread_join(rd->thread, NULL);
    check_no_failure();
}

START_TEST(interleaved_appends_then_remove_all)
{
    bt_local_space ls;
    bt_header hdr;
    tree_setup(&ls, &hdr, 88, _i == 1);
    total_ids = (_i == 1 ? 12000 : 24000) * scale;
    for (int i = 0; i < INSERTERS; i++) progress[i] = 0;
    inserter in[INSERTERS];
    reader rd = {0};

    __atomic_store_n(&phase, 0, __ATOMIC_RELEASE);
    run_phase(inserter_main, in, &rd);
    bool *expected = malloc(total_ids * sizeof(bool));
    for (unsigned id = 0; id < total_ids; id++) expected[id] = true;
    expect_exact(expected, total_ids);

    __atomic_store_n(&phase, 1, __ATOMIC_RELEASE);
    run_phase(remover_main, in, &rd);
    for (unsigned id = 0; id < total_ids; id++) expected[id] = false;
    expect_exact(expected, total_ids);
    bt_stats s;
    ck_assert_int_eq(bt_get_stats(&tree, &s), BT_OK);
    ck_assert_uint_eq(s.nodes, 1); /* everything pruned, the root collapsed */
    ck_assert_uint_eq(s.height, 1);

    free(expected);
    bt_destroy(&tree);
    bt_local_space_fini(&ls);
}
END_TEST

int main(void)
{
    const char *sc = getenv("BT_MT_SCALE");
    if (sc) {
        unsigned long v = strtoul(sc, NULL, 10);
        if (v >= 1 && v <= 1000) scale = (unsigned)v;
    }
    Suite *s = suite_create("btree_mt");
    TCase *tc = tu_tcase(s, "concurrency", 300);
    tcase_add_loop_test(tc, churn_with_readers, 0, 4);
    tcase_add_loop_test(tc, interleaved_appends_then_remove_all, 0, 2);
    return tu_run(s);
}
