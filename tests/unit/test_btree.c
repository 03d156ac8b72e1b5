/* B+-tree: single-threaded behaviour against a sorted-array reference,
 * geometry, bad input, out-of-memory injection and position independence
 * (offset refs). Concurrency lives in test_btree_mt.c. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/btree.h"
#include "helpers/testutil.h"

/* Check records every passing ck_assert (a write per call), far too slow
 * for hundreds of thousands of checks: these call into Check only when the
 * condition fails. */
#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) ck_abort_msg("check failed: %s", #c);                            \
    } while (0)
#define CHECK_MSG(c, ...)                                                           \
    do {                                                                            \
        if (!(c)) ck_abort_msg(__VA_ARGS__);                                        \
    } while (0)
#define CHECK_OP(a, op, b)                                                          \
    do {                                                                            \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
        if (!(a_ op b_)) ck_abort_msg("check failed: %s %s %s (%llu vs %llu)", #a, #op, #b, a_, b_); \
    } while (0)
#define CHECK_EQ(a, b) CHECK_OP(a, ==, b)

#define MAX_KW 255

/* ---- deterministic randomness ---------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static unsigned rng_below(unsigned n) { return (unsigned)(rng_next() % n); }

/* ---- keys ------------------------------------------------------------------------ */

/* Key number id of width kw: a prefix over the byte alphabet {00, 80, ff}
 * (long shared prefixes, and bytes that break a signed comparison) and, in
 * the last min(kw, 4) bytes, a bijection of id, so distinct ids give
 * distinct keys. */
static void make_key(unsigned kw, uint64_t id, uint8_t *out)
{
    static const uint8_t alphabet[3] = {0x00, 0x80, 0xff};
    unsigned tail = kw < 4 ? kw : 4;
    uint32_t mixed = kw < 4 ? (uint32_t)id : (uint32_t)id * 0x9E3779B1u;
    uint64_t h = id * 0xD6E8FEB86659FD93ull + 7;
    for (unsigned i = 0; i < kw - tail; i++) {
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        out[i] = alphabet[(h >> 40) % 3];
    }
    for (unsigned i = 0; i < tail; i++) out[kw - tail + i] = (uint8_t)(mixed >> (8 * (tail - 1 - i)));
}

/* A search key: usually one of the domain's keys, sometimes arbitrary bytes. */
static void random_probe(unsigned kw, unsigned domain, uint8_t *out)
{
    if (rng_below(10) == 0) {
        for (unsigned i = 0; i < kw; i++) out[i] = (uint8_t)rng_next();
    } else {
        make_key(kw, rng_below(domain * 2), out);
    }
}

/* ---- reference: a sorted array of entries ----------------------------------- */

typedef struct ref_entry {
    uint8_t key[MAX_KW];
    uint64_t val;
} ref_entry;

typedef struct ref_map {
    unsigned kw;
    size_t n, cap;
    ref_entry **e; /* sorted; pointers keep insert/remove memmoves small */
} ref_map;

static void ref_init(ref_map *m, unsigned kw, size_t cap)
{
    m->kw = kw;
    m->n = 0;
    m->cap = cap;
    m->e = malloc(cap * sizeof *m->e);
    CHECK(NULL != m->e);
}

static void ref_free(ref_map *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->e[i]);
    free(m->e);
}

/* First index with key >= k (> k with past_equal). */
static size_t ref_bound(const ref_map *m, const uint8_t *k, bool past_equal)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = memcmp(m->e[mid]->key, k, m->kw);
        if (c < 0 || (past_equal && c == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static ref_entry *ref_find(ref_map *m, const uint8_t *k)
{
    size_t i = ref_bound(m, k, false);
    return i < m->n && memcmp(m->e[i]->key, k, m->kw) == 0 ? m->e[i] : NULL;
}

static bool ref_insert(ref_map *m, const uint8_t *k, uint64_t v)
{
    size_t i = ref_bound(m, k, false);
    if (i < m->n && memcmp(m->e[i]->key, k, m->kw) == 0) return false;
    CHECK_OP(m->n, <, m->cap);
    ref_entry *e = malloc(sizeof *e);
    CHECK(NULL != e);
    memcpy(e->key, k, m->kw);
    e->val = v;
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
    m->e[i] = e;
    m->n++;
    return true;
}

static bool ref_remove(ref_map *m, const uint8_t *k, uint64_t *v)
{
    size_t i = ref_bound(m, k, false);
    if (i >= m->n || memcmp(m->e[i]->key, k, m->kw) != 0) return false;
    *v = m->e[i]->val;
    free(m->e[i]);
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof *m->e);
    m->n--;
    return true;
}

/* ---- scan collection ------------------------------------------------------------ */

typedef struct collected {
    unsigned kw;
    size_t n, limit;
    ref_entry *e;
} collected;

static bool collect(void *arg, const void *key, uint64_t value)
{
    collected *c = arg;
    CHECK_OP(c->n, <, c->limit);
    memcpy(c->e[c->n].key, key, c->kw);
    c->e[c->n].val = value;
    c->n++;
    return c->n < c->limit;
}

static void expect_same(const collected *c, ref_entry *const *want, size_t n_want,
                        const char *what)
{
    CHECK_MSG(c->n == n_want, "%s: got %zu entries, expected %zu", what, c->n, n_want);
    for (size_t i = 0; i < n_want; i++) {
        CHECK_MSG(memcmp(c->e[i].key, want[i]->key, c->kw) == 0,
                      "%s: entry %zu has the wrong key", what, i);
        CHECK_MSG(c->e[i].val == want[i]->val, "%s: entry %zu has the wrong value", what, i);
    }
}

/* Compares a scan of the tree in each direction with the reference. */
static void check_scan_forward(const bt_tree *t, const ref_map *m, const uint8_t *start,
                               bool inclusive, size_t limit)
{
    size_t from = start ? ref_bound(m, start, !inclusive) : 0;
    size_t avail = m->n - from, n_want = avail < limit ? avail : limit;
    collected c = {.kw = m->kw, .limit = limit, .e = malloc((limit + 1) * sizeof(ref_entry))};
    CHECK_EQ(bt_scan_forward(t, start, inclusive, collect, &c), BT_OK);
    expect_same(&c, &m->e[from], n_want, "forward scan");
    free(c.e);
}

static void check_scan_backward(const bt_tree *t, const ref_map *m, const uint8_t *start,
                                bool inclusive, size_t limit)
{
    size_t end = start ? ref_bound(m, start, inclusive) : m->n; /* entries [0, end) qualify */
    size_t n_want = end < limit ? end : limit;
    ref_entry **want = malloc((n_want + 1) * sizeof *want);
    for (size_t i = 0; i < n_want; i++) want[i] = m->e[end - 1 - i];
    collected c = {.kw = m->kw, .limit = limit, .e = malloc((limit + 1) * sizeof(ref_entry))};
    CHECK_EQ(bt_scan_backward(t, start, inclusive, collect, &c), BT_OK);
    expect_same(&c, want, n_want, "backward scan");
    free(c.e);
    free(want);
}

/* One hint shared by every lookup and hinted insert of the randomized test
 * (nodes are not reclaimed during a run, as EBR would guarantee): after any
 * insert, remove, split or prune it must still give exactly the tree's
 * answer, also what it knows of its leaf's right side. Half of the calls use
 * it, half go without. */
static bt_hint g_hint;

static void check_next(const bt_tree *t, const ref_map *m, const uint8_t *k, bool inclusive)
{
    uint8_t got[MAX_KW];
    uint64_t v = 0;
    size_t i = k ? ref_bound(m, k, !inclusive) : 0;
    bt_status st = rng_below(2) ? bt_next(t, k, inclusive, got, &v)
                                : bt_next_at(t, k, inclusive, got, &v, &g_hint);
    if (i >= m->n) {
        CHECK_EQ(st, BT_NOT_FOUND);
        return;
    }
    CHECK_EQ(st, BT_OK);
    CHECK(memcmp(got, m->e[i]->key, m->kw) == 0);
    CHECK_EQ(v, m->e[i]->val);
}

static void check_prev(const bt_tree *t, const ref_map *m, const uint8_t *k, bool inclusive)
{
    uint8_t got[MAX_KW];
    uint64_t v = 0;
    size_t end = k ? ref_bound(m, k, inclusive) : m->n;
    bt_status st = rng_below(2) ? bt_prev(t, k, inclusive, got, &v)
                                : bt_prev_at(t, k, inclusive, got, &v, &g_hint);
    if (end == 0) {
        CHECK_EQ(st, BT_NOT_FOUND);
        return;
    }
    CHECK_EQ(st, BT_OK);
    CHECK(memcmp(got, m->e[end - 1]->key, m->kw) == 0);
    CHECK_EQ(v, m->e[end - 1]->val);
}

/* The whole tree equals the reference: structure, stats, both full scans. */
static void check_whole(const bt_tree *t, const ref_map *m)
{
    pod_err err = {{0}};
    CHECK_MSG(bt_verify(t, &err), "tree invariant broken: %s", err.msg);
    bt_stats s;
    CHECK_EQ(bt_get_stats(t, &s), BT_OK);
    CHECK_EQ(s.keys, m->n);
    CHECK_EQ(s.nodes, s.leaves + s.inner_nodes);
    CHECK_EQ(s.bytes, s.nodes * t->node_size);
    CHECK_OP(s.height, >=, 1);
    check_scan_forward(t, m, NULL, true, m->n + 1);
    check_scan_backward(t, m, NULL, true, m->n + 1);
}

/* ---- spaces --------------------------------------------------------------------------- */

/* The local space with an allocation budget: alloc fails once `limit`
 * allocations have been made. */
typedef struct budget_space {
    bt_local_space local;
    bt_space space;
    uint64_t allocs, limit;
} budget_space;

static void *budget_alloc(void *ctx, size_t size)
{
    budget_space *b = ctx;
    if (b->allocs >= b->limit) return NULL;
    b->allocs++;
    return b->local.space.alloc(b->local.space.ctx, size);
}

static void budget_retire(void *ctx, void *node, size_t size)
{
    budget_space *b = ctx;
    b->local.space.retire(b->local.space.ctx, node, size);
}

static void budget_init(budget_space *b, uint64_t limit)
{
    bt_local_space_init(&b->local);
    b->space = (bt_space){.base = NULL, .alloc = budget_alloc, .retire = budget_retire, .ctx = b};
    b->allocs = 0;
    b->limit = limit;
}

/* A bump arena whose refs are offsets from its base. */
typedef struct arena {
    char *base;
    size_t size, used;
    uint64_t retired;
} arena;

static void *arena_alloc(void *ctx, size_t size)
{
    arena *a = ctx;
    size_t at = (a->used + 63) & ~(size_t)63;
    if (at + size > a->size) return NULL;
    a->used = at + size;
    return a->base + at;
}

static void arena_retire(void *ctx, void *node, size_t size)
{
    (void)node;
    (void)size;
    ((arena *)ctx)->retired++;
}

/* ---- the randomized differential test -------------------------------------------- */

typedef struct tree_config {
    unsigned kw;
    unsigned node_size; /* 0: default */
} tree_config;

/* Node sizes are the default or the smallest holding 4 entries (24 + 4 *
 * (key stride + 8)): deep trees from few keys. */
static const tree_config random_configs[] = {
    {4, 0}, {4, 88}, {8, 0}, {8, 88}, {16, 0}, {16, 120}, {40, 0}, {40, 216},
};

/* A scan's pattern: step by step with a hint (each step starts from the key
 * just found, so the hinted leaf answers until its edge), with inserts and
 * removes near the cursor in between that change the hinted leaf. */
static void walk_with_hint(const bt_tree *t, ref_map *m, unsigned domain, const uint8_t *start,
                           bool forward)
{
    unsigned kw = m->kw;
    uint8_t cur[MAX_KW], k[MAX_KW];
    memcpy(cur, start, kw);
    bt_hint h = {0};
    for (int step = 0; step < 40; step++) {
        uint8_t got[MAX_KW];
        uint64_t v = 0;
        bool incl = step == 0;
        bt_status st = forward ? bt_next_at(t, cur, incl, got, &v, &h)
                               : bt_prev_at(t, cur, incl, got, &v, &h);
        size_t i = forward ? ref_bound(m, cur, !incl) : ref_bound(m, cur, incl);
        bool none = forward ? i >= m->n : i == 0;
        if (none) {
            CHECK_EQ(st, BT_NOT_FOUND);
            return;
        }
        ref_entry *e = m->e[forward ? i : i - 1];
        CHECK_EQ(st, BT_OK);
        CHECK(memcmp(got, e->key, kw) == 0);
        CHECK_EQ(v, e->val);
        if (forward && rng_below(2)) {
            /* Inclusive searches from the answer or the key before it (each
             * in the tree) answer that key itself, also through the hint. */
            bool back = !incl && rng_below(2) && ref_find(m, cur);
            const uint8_t *from = back ? cur : got;
            uint8_t again[MAX_KW];
            uint64_t av = 0;
            CHECK_EQ(bt_next_at(t, from, true, again, &av, &h), BT_OK);
            CHECK(memcmp(again, from, kw) == 0);
        }
        memcpy(cur, got, kw);
        if (rng_below(4) == 0) { /* change the tree near the cursor */
            make_key(kw, rng_below(domain), k);
            if (rng_below(2)) {
                uint64_t nv = rng_next();
                /* Half through the walk's hint, as an insert at a scan's cursor. */
                bool fresh = ref_insert(m, k, nv);
                CHECK_EQ(rng_below(2) ? bt_insert(t, k, nv) : bt_insert_at(t, k, nv, &h),
                         fresh ? BT_OK : BT_EXISTS);
            } else if (memcmp(k, cur, kw) != 0) {
                uint64_t want = 0, gotv = 0;
                bool present = ref_remove(m, k, &want);
                CHECK_EQ(bt_remove(t, k, &gotv), present ? BT_OK : BT_NOT_FOUND);
            }
        }
        uint64_t lv = 0;
        CHECK_EQ(bt_lookup_at(t, cur, &lv, &h), BT_OK); /* the cursor's own key */
        CHECK_EQ(lv, v);
        if (rng_below(4) == 0) { /* a key that may be past the hinted leaf's end */
            make_key(kw, rng_below(domain), k);
            ref_entry *e = ref_find(m, k);
            CHECK_EQ(bt_lookup_at(t, k, &lv, &h), e ? BT_OK : BT_NOT_FOUND);
            if (e) CHECK_EQ(lv, e->val);
        }
    }
}

/* One random operation on both the tree and the reference. Insert-heavy or
 * remove-heavy by phase, so the tree grows and shrinks (splits and prunes). */
static void random_op(const bt_tree *t, ref_map *m, unsigned domain, bool growing)
{
    unsigned kw = m->kw;
    uint8_t k[MAX_KW];
    unsigned r = rng_below(100);
    unsigned insert_pct = growing ? 45 : 15, remove_pct = growing ? 15 : 45;
    if (r < insert_pct) {
        make_key(kw, rng_below(domain), k);
        uint64_t v = rng_next();
        bool fresh = ref_insert(m, k, v);
        CHECK_EQ(rng_below(2) ? bt_insert(t, k, v) : bt_insert_at(t, k, v, &g_hint),
                 fresh ? BT_OK : BT_EXISTS);
    } else if ((r -= insert_pct) < remove_pct) {
        make_key(kw, rng_below(domain), k);
        uint64_t want = 0, got = 0;
        bool present = ref_remove(m, k, &want);
        CHECK_EQ(bt_remove(t, k, &got), present ? BT_OK : BT_NOT_FOUND);
        if (present) CHECK_EQ(got, want);
    } else if ((r -= remove_pct) < 5) {
        make_key(kw, rng_below(domain), k);
        uint64_t v = rng_next();
        ref_entry *e = ref_find(m, k);
        bool replaced = !e;
        CHECK_EQ(bt_upsert(t, k, v, &replaced), BT_OK);
        CHECK(replaced == (e != NULL));
        if (e) e->val = v;
        else ref_insert(m, k, v);
    } else if ((r -= 5) < 15) {
        random_probe(kw, domain, k);
        ref_entry *e = ref_find(m, k);
        uint64_t v = 0;
        bt_status st = rng_below(2) ? bt_lookup(t, k, &v) : bt_lookup_at(t, k, &v, &g_hint);
        CHECK_EQ(st, e ? BT_OK : BT_NOT_FOUND);
        if (e) CHECK_EQ(v, e->val);
    } else if ((r -= 15) < 10) {
        random_probe(kw, domain, k);
        bool from_end = rng_below(20) == 0, inclusive = rng_below(2);
        if (rng_below(2)) check_next(t, m, from_end ? NULL : k, inclusive);
        else check_prev(t, m, from_end ? NULL : k, inclusive);
        if (rng_below(4) == 0) walk_with_hint(t, m, domain, k, rng_below(2));
    } else {
        random_probe(kw, domain, k);
        bool from_end = rng_below(20) == 0, inclusive = rng_below(2);
        size_t limit = 1 + rng_below(rng_below(4) == 0 ? 400 : 40);
        if (rng_below(2)) check_scan_forward(t, m, from_end ? NULL : k, inclusive, limit);
        else check_scan_backward(t, m, from_end ? NULL : k, inclusive, limit);
    }
}

/* An empty tree of cfg in local memory, and its reference map for cap keys. */
static void tree_and_map(const tree_config *cfg, bt_local_space *ls, bt_header *hdr, bt_tree *t,
                         ref_map *m, size_t cap)
{
    bt_local_space_init(ls);
    CHECK_EQ(bt_create(t, hdr, &ls->space,
                       &(bt_config){.key_width = cfg->kw, .node_size = cfg->node_size}),
             BT_OK);
    ref_init(m, cfg->kw, cap);
}

static void run_random(const tree_config *cfg, unsigned domain, unsigned ops, uint64_t seed)
{
    rng_seed(seed);
    g_hint = (bt_hint){0};
    bt_local_space ls;
    bt_header hdr;
    bt_tree t;
    ref_map m;
    tree_and_map(cfg, &ls, &hdr, &t, &m, domain);
    const unsigned phase = 4000;
    unsigned max_height = 0;
    for (unsigned i = 0; i < ops; i++) {
        random_op(&t, &m, domain, (i / phase) % 2 == 0);
        if (i % phase == phase - 1) {
            check_whole(&t, &m);
            bt_stats s;
            bt_get_stats(&t, &s);
            if (s.height > max_height) max_height = s.height;
        }
    }
    check_whole(&t, &m);
    if (cfg->node_size != 0) CHECK_OP(max_height, >=, 4); /* tiny nodes: a deep tree */
    bt_destroy(&t);
    bt_local_space_fini(&ls);
    ref_free(&m);
}

START_TEST(random_ops_match_reference)
{
    const tree_config *cfg = &random_configs[_i];
    run_random(cfg, 3000, 40000, 1000 + (uint64_t)_i);
}
END_TEST

/* Key widths off the word size and at the limits, fewer operations. */
START_TEST(random_ops_other_widths)
{
    static const tree_config cfgs[] = {{1, 0}, {3, 0}, {12, 120}, {64, 0}, {255, 0}, {255, 1088}};
    const tree_config *cfg = &cfgs[_i];
    unsigned domain = cfg->kw == 1 ? 200 : 1500;
    run_random(cfg, domain, 12000, 77 + (uint64_t)_i);
}
END_TEST

/* ---- ordered loads, delete everything, reinsert ------------------------------------- */

static void insert_ids(const bt_tree *t, ref_map *m, uint64_t first, uint64_t n, int step)
{
    uint8_t k[MAX_KW];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = step > 0 ? first + i : first + n - 1 - i;
        /* Big-endian ids: ascending id = ascending key. */
        memset(k, 0, m->kw);
        for (unsigned b = 0; b < 8 && b < m->kw; b++) k[m->kw - 1 - b] = (uint8_t)(id >> (8 * b));
        CHECK_EQ(bt_insert(t, k, id * 3), BT_OK);
        CHECK(ref_insert(m, k, id * 3));
    }
}

static void remove_all_in_order(const bt_tree *t, ref_map *m, bool ascending)
{
    while (m->n > 0) {
        ref_entry e = *m->e[ascending ? 0 : m->n - 1];
        uint64_t v = 0, want = 0;
        CHECK_EQ(bt_remove(t, e.key, &v), BT_OK);
        CHECK_EQ(v, e.val);
        CHECK(ref_remove(m, e.key, &want));
        CHECK_EQ(bt_lookup(t, e.key, NULL), BT_NOT_FOUND);
        if (m->n % 997 == 0) check_whole(t, m);
    }
}

static void check_empty(const bt_tree *t, unsigned kw)
{
    bt_stats s;
    CHECK_EQ(bt_get_stats(t, &s), BT_OK);
    CHECK_EQ(s.keys, 0);
    CHECK_EQ(s.nodes, 1); /* emptied leaves were unlinked, the root collapsed */
    CHECK_EQ(s.height, 1);
    uint8_t k[MAX_KW];
    memset(k, 0x42, kw);
    collected c = {.kw = kw, .limit = 1, .e = malloc(2 * sizeof(ref_entry))};
    CHECK_EQ(bt_scan_forward(t, NULL, true, collect, &c), BT_OK);
    CHECK_EQ(bt_scan_forward(t, k, false, collect, &c), BT_OK);
    CHECK_EQ(bt_scan_backward(t, NULL, true, collect, &c), BT_OK);
    CHECK_EQ(bt_scan_backward(t, k, true, collect, &c), BT_OK);
    CHECK_EQ(c.n, 0);
    free(c.e);
    CHECK_EQ(bt_next(t, NULL, true, NULL, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_next(t, k, true, NULL, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_prev(t, NULL, true, NULL, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_prev(t, k, false, NULL, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_lookup(t, k, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_remove(t, k, NULL), BT_NOT_FOUND);
}

/* Ascending and descending loads keep nodes nearly full (split at the end
 * being appended to). */
static void check_dense(const bt_tree *t, uint64_t n)
{
    bt_stats s;
    CHECK_EQ(bt_get_stats(t, &s), BT_OK);
    uint64_t dense_leaves = (n + t->leaf_cap - 2) / (t->leaf_cap - 1);
    CHECK_MSG(s.leaves <= dense_leaves + s.height, "%llu leaves for %llu keys (cap %u)",
                  (unsigned long long)s.leaves, (unsigned long long)n, t->leaf_cap);
}

static const tree_config ordered_configs[] = {{8, 0}, {8, 88}, {16, 120}, {40, 0}};

START_TEST(ordered_loads_delete_all_reinsert)
{
    const tree_config *cfg = &ordered_configs[_i];
    const uint64_t n = 6000;
    bt_local_space ls;
    bt_header hdr;
    bt_tree t;
    ref_map m;
    tree_and_map(cfg, &ls, &hdr, &t, &m, n);
    check_empty(&t, cfg->kw);

    insert_ids(&t, &m, 1, n, +1);
    check_whole(&t, &m);
    check_dense(&t, n);
    remove_all_in_order(&t, &m, true);
    check_empty(&t, cfg->kw);
    CHECK_OP(__atomic_load_n(&ls.retired_nodes, __ATOMIC_RELAXED), >, 0);

    insert_ids(&t, &m, 1, n, -1);
    check_whole(&t, &m);
    check_dense(&t, n);
    remove_all_in_order(&t, &m, false);
    check_empty(&t, cfg->kw);

    /* Random order in, random order out, then once more. */
    for (int round = 0; round < 2; round++) {
        rng_seed(5 + (uint64_t)round);
        uint8_t k[MAX_KW];
        for (unsigned i = 0; i < n; i++) {
            make_key(cfg->kw, rng_below(4 * (unsigned)n), k);
            uint64_t v = rng_next();
            CHECK_EQ(bt_insert(&t, k, v), ref_insert(&m, k, v) ? BT_OK : BT_EXISTS);
        }
        check_whole(&t, &m);
        while (m.n > 0) {
            ref_entry e = *m.e[rng_below((unsigned)m.n)];
            uint64_t v = 0, want = 0;
            CHECK_EQ(bt_remove(&t, e.key, &v), BT_OK);
            CHECK(ref_remove(&m, e.key, &want));
            CHECK_EQ(v, want);
        }
        check_empty(&t, cfg->kw);
    }
    bt_destroy(&t);
    bt_local_space_fini(&ls);
    ref_free(&m);
}
END_TEST

/* Composite keys (district, order), loaded in order, then new orders of all
 * districts in turn: each district's run goes in the middle of the tree,
 * before the next district's keys. The run splits keep its leaves full. */
static void district_key(uint64_t d, uint64_t o, uint8_t *k)
{
    for (int i = 0; i < 8; i++) {
        k[i] = (uint8_t)(d >> (56 - 8 * i));
        k[8 + i] = (uint8_t)(o >> (56 - 8 * i));
    }
}

/* Insert `per_district` keys at the end of each of `districts` runs: one
 * key per run in turn, as new orders arrive (plain bt_insert, or a lookup
 * that fills a hint and bt_insert_at). Returns how many hinted inserts went
 * into their hinted leaf without a descent. */
static unsigned append_to_runs(const bt_tree *t, ref_map *m, unsigned districts, uint64_t from,
                               uint64_t per_district, bool hinted)
{
    uint8_t k[16];
    unsigned fast = 0;
    for (uint64_t o = from; o < from + per_district; o++)
        for (uint64_t d = 0; d < districts; d++) {
            district_key(d, o, k);
            if (hinted) {
                bt_hint h = {0};
                CHECK_EQ(bt_lookup_at(t, k, NULL, &h), BT_NOT_FOUND);
                uint64_t d0 = bt_thread_descents();
                CHECK_EQ(bt_insert_at(t, k, d << 32 | o, &h), BT_OK);
                if (bt_thread_descents() == d0) fast++;
                CHECK_EQ(bt_insert_at(t, k, 1, &h), BT_EXISTS);
            } else {
                CHECK_EQ(bt_insert(t, k, d << 32 | o), BT_OK);
            }
            CHECK(ref_insert(m, k, d << 32 | o));
        }
    return fast;
}

/* `loaded` keys per district, then `added` appended to every run: the tree
 * holds them all, and its leaves are full but for one partial leaf per
 * district boundary (a middle split would leave the added part of every
 * district half empty). Returns the hinted inserts' fast-path count. */
static unsigned check_runs_fill_leaves(unsigned districts, uint64_t loaded, uint64_t added,
                                       bool hinted)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    CHECK_EQ(bt_create(&t, &hdr, &ls.space, &(bt_config){.key_width = 16}), BT_OK);
    ref_map m;
    ref_init(&m, 16, (size_t)districts * (loaded + added));
    uint8_t k[16];
    for (uint64_t d = 0; d < districts; d++)
        for (uint64_t o = 0; o < loaded; o++) {
            district_key(d, o, k);
            CHECK_EQ(bt_insert(&t, k, d << 32 | o), BT_OK);
            CHECK(ref_insert(&m, k, d << 32 | o));
        }
    unsigned fast = append_to_runs(&t, &m, districts, loaded, added, hinted);
    check_whole(&t, &m);
    bt_stats s;
    CHECK_EQ(bt_get_stats(&t, &s), BT_OK);
    uint64_t dense = (m.n + t.leaf_cap - 2) / (t.leaf_cap - 1);
    CHECK_MSG(s.leaves <= dense + 2 * districts + s.height, "%llu leaves for %zu keys (cap %u)",
              (unsigned long long)s.leaves, m.n, t.leaf_cap);
    for (size_t i = 0; i < m.n; i++) {
        uint64_t v = 0;
        CHECK_EQ(bt_lookup(&t, m.e[i]->key, &v), BT_OK);
        CHECK_EQ(v, m.e[i]->val);
    }
    CHECK(bt_verify(&t, NULL));
    bt_destroy(&t);
    bt_local_space_fini(&ls);
    ref_free(&m);
    return fast;
}

START_TEST(runs_inside_the_tree_fill_leaves)
{
    check_runs_fill_leaves(10, 1000, 3000, false);
}
END_TEST

/* A transaction's insert: a lookup that fills the hint, then bt_insert_at.
 * Appends inside the tree (new orders of each district) go into the hinted
 * leaf without a descent unless it is full, and leave the same tree. */
START_TEST(hinted_inserts_skip_the_descent)
{
    const unsigned districts = 10, added = 3000, total = districts * added;
    unsigned fast = check_runs_fill_leaves(districts, 200, added, true);
    CHECK_MSG(fast * 10 >= total * 8, "%u of %u inserts took the hinted leaf", fast, total);
}
END_TEST

/* An insert under next-key locking, as pod_insert makes it: a lookup, the
 * next key's search twice (before and after locking it), the insert, all
 * through one hint that the previous insert into the tree left. Ten keys at
 * a time (an order's lines) are appended to the run of one of `districts`
 * districts (0: to the end of the tree),
 * and every `delete_every`-th insert (0: never) the oldest key of a random
 * district goes, as Delivery takes new orders, so that a run's successor is
 * often the first entry of the next leaf. Every answer is checked against the
 * reference; returns the descents per insert, and the second next-key
 * search never descends. */
static double insert_pattern_descents(unsigned districts, unsigned inserts, unsigned delete_every)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    CHECK_EQ(bt_create(&t, &hdr, &ls.space, &(bt_config){.key_width = 16}), BT_OK);
    unsigned nd = districts ? districts : 1;
    ref_map m;
    ref_init(&m, 16, (size_t)nd * 40 + inserts);
    uint64_t oldest[64] = {0}, next_o[64];
    uint8_t k[16], got[16];
    for (uint64_t d = 0; d < nd; d++) { /* a few loaded keys per district */
        for (uint64_t o = 0; o < 40; o++) {
            district_key(d, o, k);
            CHECK_EQ(bt_insert(&t, k, d << 32 | o), BT_OK);
            CHECK(ref_insert(&m, k, d << 32 | o));
        }
        next_o[d] = 40;
    }
    bt_hint h = {0};
    uint64_t before = bt_thread_descents(), d = 0;
    for (unsigned i = 0; i < inserts; i++) {
        if (i % 10 == 0) { /* a transaction: ten keys of one district, a fresh hint */
            d = districts ? rng_below(districts) : 0;
            h = (bt_hint){0};
        }
        district_key(d, next_o[d]++, k);
        uint64_t v = d << 32 | (next_o[d] - 1);
        CHECK_EQ(bt_lookup_at(&t, k, NULL, &h), BT_NOT_FOUND);
        size_t at = ref_bound(&m, k, true);
        for (int pass = 0; pass < 2; pass++) {
            uint64_t d0 = bt_thread_descents(), nv = 0;
            bt_status st = bt_next_at(&t, k, false, got, &nv, &h);
            if (at >= m.n) {
                CHECK_EQ(st, BT_NOT_FOUND);
            } else {
                CHECK_EQ(st, BT_OK);
                CHECK(memcmp(got, m.e[at]->key, 16) == 0);
                CHECK_EQ(nv, m.e[at]->val);
            }
            if (pass == 1) CHECK_EQ(bt_thread_descents(), d0);
        }
        CHECK_EQ(bt_insert_at(&t, k, v, &h), BT_OK);
        CHECK(ref_insert(&m, k, v));
        if (delete_every && i % delete_every == 0) {
            uint64_t dd = rng_below(nd), gv = 0, want = 0;
            district_key(dd, oldest[dd], k);
            if (oldest[dd] + 1 < next_o[dd]) {
                oldest[dd]++;
                CHECK(ref_remove(&m, k, &want));
                uint64_t d0 = bt_thread_descents();
                CHECK_EQ(bt_remove(&t, k, &gv), BT_OK);
                CHECK_EQ(gv, want);
                before += bt_thread_descents() - d0; /* not the insert's */
            }
        }
    }
    double per = (double)(bt_thread_descents() - before) / inserts;
    check_whole(&t, &m);
    bt_destroy(&t);
    bt_local_space_fini(&ls);
    ref_free(&m);
    return per;
}

/* Appends to the tree's end (the last district, a bulk load) know their
 * leaf is the last one: only a transaction's first lookup and the splits
 * descend. Appends to runs inside the tree whose successors keep going
 * (Delivery) descend where the successor sits in the next leaf, but the
 * repeated search never does. */
START_TEST(inserts_past_a_leaf_end_skip_descents)
{
    rng_seed(7);
    double tail = insert_pattern_descents(0, 20000, 0);
    double runs = insert_pattern_descents(10, 20000, 1);
    /* Without the right side in the hint: 4.06 and 5.85. */
    CHECK_MSG(tail < 0.5, "%.2f descents per append to the tree's end", tail);
    CHECK_MSG(runs < 2.5, "%.2f descents per insert at a run's end", runs);
}
END_TEST

static void u64_key(uint64_t x, uint8_t *k)
{
    for (int i = 0; i < 8; i++) k[i] = (uint8_t)(x >> (56 - 8 * i));
}

/* Every answer the hint h can give around keys lo..hi, each from a copy of
 * it, equals the tree's own. */
static void check_hint_around(const bt_tree *t, const bt_hint *h, uint64_t lo, uint64_t hi)
{
    uint8_t k[8], got[8], want[8];
    for (uint64_t x = lo; x <= hi; x++) {
        u64_key(x, k);
        bt_hint c = *h;
        uint64_t v = 0, wv = 0;
        bt_status ws = bt_lookup(t, k, &wv);
        CHECK_EQ(bt_lookup_at(t, k, &v, &c), ws);
        if (ws == BT_OK) CHECK_EQ(v, wv);
        c = *h;
        ws = bt_next(t, k, false, want, &wv);
        CHECK_EQ(bt_next_at(t, k, false, got, &v, &c), ws);
        if (ws == BT_OK) CHECK(memcmp(got, want, 8) == 0 && v == wv);
    }
}

/* A hint that knows its leaf's right neighbour, after the leaf split under
 * it (a new leaf now lies between the two): neither the stale hint nor the
 * hint an insert into the left part leaves may skip the new leaf. */
START_TEST(a_split_leaf_forgets_its_neighbour)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    CHECK_EQ(bt_create(&t, &hdr, &ls.space, &(bt_config){.key_width = 8, .node_size = 128}),
             BT_OK);
    uint8_t k[8], got[8];
    for (uint64_t x = 0; x < 2000; x += 100) {
        u64_key(x, k);
        CHECK_EQ(bt_insert(&t, k, x + 1), BT_OK);
    }
    /* A key whose successor is in the next leaf: its search crosses. */
    bt_hint h = {0};
    uint64_t x = 0, v = 0;
    for (; x < 2000; x += 100) {
        u64_key(x, k);
        h = (bt_hint){0};
        CHECK_EQ(bt_lookup_at(&t, k, &v, &h), BT_OK);
        if (bt_next_at(&t, k, false, got, &v, &h) == BT_OK && h.next) break;
    }
    CHECK_MSG(x < 1900, "no next-key search crossed into a neighbour");
    check_hint_around(&t, &h, x - 1, x + 101);
    /* Fill the gap after x without the hint: the left leaf splits. */
    for (uint64_t y = x + 1; y < x + 60; y += 2) {
        u64_key(y, k);
        CHECK_EQ(bt_insert(&t, k, y + 1), BT_OK);
    }
    check_hint_around(&t, &h, x - 1, x + 101);
    /* Through the stale hint, an insert into the left part. */
    u64_key(x - 1, k);
    CHECK_EQ(bt_insert_at(&t, k, x, &h), BT_OK);
    check_hint_around(&t, &h, x - 2, x + 101);
    CHECK(bt_verify(&t, NULL));
    bt_destroy(&t);
    bt_local_space_fini(&ls);
}
END_TEST

START_TEST(empty_tree_and_upsert)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    CHECK_EQ(bt_create(&t, &hdr, &ls.space, &(bt_config){.key_width = 8}), BT_OK);
    check_empty(&t, 8);

    const uint8_t k[8] = "abcdefgh";
    bool replaced = true;
    uint64_t v = 0;
    CHECK_EQ(bt_upsert(&t, k, 1, &replaced), BT_OK);
    CHECK(!replaced);
    CHECK_EQ(bt_upsert(&t, k, 2, &replaced), BT_OK);
    CHECK(replaced);
    CHECK_EQ(bt_insert(&t, k, 3), BT_EXISTS);
    CHECK_EQ(bt_lookup(&t, k, &v), BT_OK);
    CHECK_EQ(v, 2);
    /* Value 0 and UINT64_MAX are ordinary values. */
    const uint8_t k0[8] = "00000000", kmax[8] = "zzzzzzzz";
    CHECK_EQ(bt_insert(&t, k0, 0), BT_OK);
    CHECK_EQ(bt_insert(&t, kmax, UINT64_MAX), BT_OK);
    CHECK_EQ(bt_lookup(&t, k0, &v), BT_OK);
    CHECK_EQ(v, 0);
    CHECK_EQ(bt_lookup(&t, kmax, &v), BT_OK);
    CHECK_EQ(v, UINT64_MAX);
    uint8_t got[8];
    CHECK_EQ(bt_next(&t, k, false, got, &v), BT_OK);
    CHECK(memcmp(got, kmax, 8) == 0);
    CHECK_EQ(bt_prev(&t, k, false, got, &v), BT_OK);
    CHECK(memcmp(got, k0, 8) == 0);
    CHECK_EQ(bt_next(&t, kmax, false, got, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_prev(&t, k0, false, got, NULL), BT_NOT_FOUND);
    CHECK_EQ(bt_remove(&t, k, &v), BT_OK);
    CHECK_EQ(v, 2);
    bt_destroy(&t);
    bt_local_space_fini(&ls);
}
END_TEST

/* bt_prefetch: the same answers as lookups, over two trees of different
 * depths and key widths, with missing keys and more keys than one batch; and
 * the leaves it reports as hints give lookups the same answers, also after
 * the trees changed around them (a stale hint must not answer). */
START_TEST(prefetch_answers_like_lookups)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header h8, h12, hempty;
    bt_tree t8, t12, empty;
    CHECK_EQ(bt_create(&t8, &h8, &ls.space, &(bt_config){.key_width = 8}), BT_OK);
    CHECK_EQ(bt_create(&t12, &h12, &ls.space, &(bt_config){.key_width = 12, .node_size = 128}),
             BT_OK);
    CHECK_EQ(bt_create(&empty, &hempty, &ls.space, &(bt_config){.key_width = 8}), BT_OK);
    for (uint64_t i = 0; i < 20000; i += 2) {
        uint8_t k[12] = {0};
        for (int b = 0; b < 8; b++) k[b] = (uint8_t)(i >> (56 - 8 * b));
        CHECK_EQ(bt_insert(&t8, k, i + 1), BT_OK);
        if (i < 3000) CHECK_EQ(bt_insert(&t12, k, 100000 + i), BT_OK);
    }
    uint8_t keys[BT_PREFETCH_MAX][12];
    const void *kp[BT_PREFETCH_MAX];
    const bt_tree *tp[BT_PREFETCH_MAX];
    uint64_t vals[BT_PREFETCH_MAX];
    uint64_t rng = 7;
    for (int round = 0; round < 500; round++) {
        unsigned n = 1 + (unsigned)(round % BT_PREFETCH_MAX);
        for (unsigned i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t k = (rng >> 33) % 21000;
            memset(keys[i], 0, sizeof keys[i]);
            for (int b = 0; b < 8; b++) keys[i][b] = (uint8_t)(k >> (56 - 8 * b));
            unsigned which = (unsigned)(rng >> 20) % 3;
            tp[i] = which == 0 ? &t8 : which == 1 ? &t12 : &empty;
            kp[i] = keys[i];
        }
        bt_hint hints[BT_PREFETCH_MAX];
        bt_prefetch(tp, kp, n, vals, round % 2 ? hints : NULL);
        for (unsigned i = 0; i < n; i++) {
            uint64_t v = 0;
            bool found = bt_lookup(tp[i], kp[i], &v) == BT_OK;
            CHECK_EQ(vals[i], found ? v : 0);
        }
        if (!(round % 2)) continue;
        /* Every third round, change the trees first: odd keys in (present
         * now, where a stale leaf would say missing) and even keys out. */
        for (unsigned i = 0; round % 3 == 0 && i < n; i++) {
            uint8_t k[12] = {0};
            memcpy(k, keys[i], 8);
            k[7] ^= 1;
            if (k[7] & 1) bt_insert(tp[i], k, 7777);
            else bt_remove(tp[i], k, NULL);
            bt_remove(tp[i], keys[i], NULL);
        }
        for (unsigned i = 0; i < n; i++) {
            uint64_t v = 0, hv = 0;
            bool found = bt_lookup(tp[i], kp[i], &v) == BT_OK;
            CHECK_EQ(bt_lookup_at(tp[i], kp[i], &hv, &hints[i]) == BT_OK, found);
            if (found) CHECK_EQ(hv, v);
            uint8_t k[12] = {0};
            memcpy(k, keys[i], 8);
            k[7] ^= 1;
            bt_hint h = hints[i]; /* a neighbour's key, through the same leaf */
            found = bt_lookup(tp[i], k, &v) == BT_OK;
            CHECK_EQ(bt_lookup_at(tp[i], k, &hv, &h) == BT_OK, found);
            if (found) CHECK_EQ(hv, v);
        }
    }
    bt_destroy(&t8);
    bt_destroy(&t12);
    bt_destroy(&empty);
    bt_local_space_fini(&ls);
}
END_TEST

/* ---- geometry and bad input ------------------------------------------------------------- */

START_TEST(geometry_and_bad_input)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    const bt_space *sp = &ls.space;

    /* Default node sizes: 512 bytes while that holds 8 entries. */
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 8}), BT_OK);
    CHECK_EQ(t.node_size, 512);
    CHECK_EQ(t.leaf_cap, 31);
    CHECK_EQ(t.inner_cap, 30);
    bt_destroy(&t);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 4}), BT_OK);
    CHECK_EQ(t.key_stride, 8);
    bt_destroy(&t);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 64}), BT_OK);
    CHECK_EQ(t.node_size, 640);
    CHECK_OP(t.inner_cap, >=, 8);
    bt_destroy(&t);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 255}), BT_OK);
    CHECK_OP(t.inner_cap, >=, 8);
    CHECK_EQ(t.node_size % 64, 0);
    bt_destroy(&t);

    /* Bad configurations. */
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 0}), BT_INVALID);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 256}), BT_INVALID);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 8, .node_size = 100}),
                     BT_INVALID); /* not a multiple of 8 */
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 8, .node_size = 80}),
                     BT_INVALID); /* 3 entries */
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 8, .node_size = 88}), BT_OK);
    bt_destroy(&t);
    CHECK_EQ(bt_create(&t, &hdr, sp,
                               &(bt_config){.key_width = 8, .node_size = BT_MAX_NODE_SIZE + 8}),
                     BT_INVALID);
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 255, .node_size = 1024}),
                     BT_INVALID);
    CHECK_EQ(bt_create(&t, &hdr, NULL, &(bt_config){.key_width = 8}), BT_INVALID);
    CHECK_EQ(bt_create(NULL, &hdr, sp, &(bt_config){.key_width = 8}), BT_INVALID);
    CHECK_EQ(bt_create(&t, NULL, sp, &(bt_config){.key_width = 8}), BT_INVALID);
    CHECK_EQ(bt_create(&t, &hdr, sp, NULL), BT_INVALID);
    bt_space no_alloc = {.retire = sp->retire};
    CHECK_EQ(bt_create(&t, &hdr, &no_alloc, &(bt_config){.key_width = 8}), BT_INVALID);

    /* Attach to something that is not a tree. */
    bt_header junk;
    memset(&junk, 0x5a, sizeof junk);
    CHECK_EQ(bt_attach(&t, &junk, sp), BT_INVALID);
    memset(&junk, 0, sizeof junk);
    CHECK_EQ(bt_attach(&t, &junk, sp), BT_INVALID);

    /* NULL arguments and a destroyed handle. */
    CHECK_EQ(bt_create(&t, &hdr, sp, &(bt_config){.key_width = 8}), BT_OK);
    uint64_t v;
    CHECK_EQ(bt_insert(&t, NULL, 1), BT_INVALID);
    CHECK_EQ(bt_lookup(&t, NULL, &v), BT_INVALID);
    CHECK_EQ(bt_remove(&t, NULL, &v), BT_INVALID);
    CHECK_EQ(bt_scan_forward(&t, NULL, true, NULL, NULL), BT_INVALID);
    CHECK_EQ(bt_scan_backward(&t, NULL, true, NULL, NULL), BT_INVALID);
    CHECK_EQ(bt_get_stats(&t, NULL), BT_INVALID);
    CHECK_EQ(bt_lookup(NULL, "12345678", &v), BT_INVALID);
    bt_tree other;
    CHECK_EQ(bt_attach(&other, &hdr, sp), BT_OK);
    CHECK_EQ(bt_insert(&other, "12345678", 9), BT_OK);
    CHECK_EQ(bt_lookup(&t, "12345678", &v), BT_OK);
    CHECK_EQ(v, 9);
    bt_destroy(&t);
    CHECK_EQ(bt_lookup(&t, "12345678", &v), BT_INVALID);
    CHECK_EQ(bt_insert(&t, "12345678", 1), BT_INVALID);
    CHECK_EQ(bt_attach(&other, &hdr, sp), BT_INVALID);
    pod_err err = {{0}};
    CHECK(!bt_verify(&t, &err));

    ck_assert_str_eq(bt_status_name(BT_OK), "ok");
    ck_assert_str_eq(bt_status_name(BT_NOMEM), "out of memory");
    ck_assert_str_eq(bt_status_name((bt_status)42), "unknown status");
    bt_local_space_fini(&ls);
}
END_TEST

/* ---- out-of-memory injection ------------------------------------------------------------ */

START_TEST(nomem_leaves_tree_intact)
{
    const tree_config *cfg = &random_configs[_i];
    budget_space b;
    budget_init(&b, 0);
    bt_header hdr;
    bt_tree t;
    bt_config tc = {.key_width = cfg->kw, .node_size = cfg->node_size};
    CHECK_EQ(bt_create(&t, &hdr, &b.space, &tc), BT_NOMEM);
    b.limit = 1;
    CHECK_EQ(bt_create(&t, &hdr, &b.space, &tc), BT_OK);

    rng_seed(99 + (uint64_t)_i);
    const unsigned domain = 4000;
    ref_map m;
    ref_init(&m, cfg->kw, domain);
    unsigned nomem = 0;
    uint8_t k[MAX_KW];
    for (unsigned i = 0; i < 20000; i++) {
        make_key(cfg->kw, rng_below(domain), k);
        if (rng_below(4) == 0) {
            uint64_t want = 0, got = 0;
            bool present = ref_remove(&m, k, &want);
            CHECK_EQ(bt_remove(&t, k, &got), present ? BT_OK : BT_NOT_FOUND);
            continue;
        }
        uint64_t v = rng_next();
        bool present = ref_find(&m, k) != NULL;
        bt_status st = bt_insert(&t, k, v);
        if (st == BT_NOMEM) {
            nomem++;
            /* Hand out 0..2 more allocations now and then: failures hit leaf
             * splits, inner splits and the second allocation of a root split. */
            if (rng_below(4) == 0) b.limit += rng_below(3);
            CHECK(!present);
            CHECK_EQ(bt_lookup(&t, k, NULL), BT_NOT_FOUND);
            if (nomem % 50 == 0) check_whole(&t, &m);
            continue;
        }
        CHECK_EQ(st, present ? BT_EXISTS : BT_OK);
        if (!present) ref_insert(&m, k, v);
    }
    CHECK_OP(nomem, >, 100);
    CHECK_OP(m.n, >, 500);
    check_whole(&t, &m);
    /* With memory again, everything that failed can be inserted. */
    b.limit = UINT64_MAX;
    for (unsigned id = 0; id < domain; id++) {
        make_key(cfg->kw, id, k);
        bool fresh = ref_insert(&m, k, id);
        CHECK_EQ(bt_insert(&t, k, id), fresh ? BT_OK : BT_EXISTS);
    }
    check_whole(&t, &m);
    bt_destroy(&t);
    bt_local_space_fini(&b.local); /* LeakSanitizer checks nothing was lost */
    ref_free(&m);
}
END_TEST

/* ---- position independence --------------------------------------------------------------- */

START_TEST(offset_refs_survive_moving_the_arena)
{
    const unsigned kw = 16, n = 4000;
    arena a = {.size = 4u << 20};
    a.base = aligned_alloc(64, a.size);
    CHECK(NULL != a.base);
    a.used = 64; /* offset 0 is the null ref */
    bt_header *hdr = arena_alloc(&a, sizeof *hdr);
    size_t hdr_off = (size_t)((char *)hdr - a.base);
    bt_space sp = {.base = a.base, .alloc = arena_alloc, .retire = arena_retire, .ctx = &a};
    bt_tree t;
    CHECK_EQ(bt_create(&t, hdr, &sp, &(bt_config){.key_width = kw, .node_size = 120}), BT_OK);

    rng_seed(4242);
    ref_map m;
    ref_init(&m, kw, 2 * n);
    uint8_t k[MAX_KW];
    for (unsigned i = 0; i < n; i++) {
        make_key(kw, rng_below(2 * n), k);
        uint64_t v = rng_next();
        CHECK_EQ(bt_insert(&t, k, v), ref_insert(&m, k, v) ? BT_OK : BT_EXISTS);
    }
    for (unsigned i = 0; i < n / 2; i++) { /* some removes, some emptied leaves */
        make_key(kw, rng_below(n / 2), k);
        uint64_t want, got;
        bool present = ref_remove(&m, k, &want);
        CHECK_EQ(bt_remove(&t, k, &got), present ? BT_OK : BT_NOT_FOUND);
    }
    check_whole(&t, &m);
    CHECK_OP(hdr->root, <, a.size); /* an offset, not an address */

    /* Move the arena: copy it elsewhere, scribble over and free the old one
     * (ASan flags any raw pointer still used), attach at the new base. */
    char *moved = aligned_alloc(64, a.size);
    CHECK(NULL != moved);
    memcpy(moved, a.base, a.size);
    memset(a.base, 0xa5, a.size);
    free(a.base);
    a.base = moved;
    sp.base = moved;
    bt_tree t2;
    CHECK_EQ(bt_attach(&t2, (bt_header *)(moved + hdr_off), &sp), BT_OK);
    CHECK_EQ(t2.key_width, kw);
    CHECK_EQ(t2.node_size, 120);
    for (size_t i = 0; i < m.n; i++) {
        uint64_t v = 0;
        CHECK_EQ(bt_lookup(&t2, m.e[i]->key, &v), BT_OK);
        CHECK_EQ(v, m.e[i]->val);
    }
    check_whole(&t2, &m);
    /* And it keeps working for writes at the new address. */
    for (unsigned i = 0; i < 3000; i++) random_op(&t2, &m, 2 * n, i < 1500);
    check_whole(&t2, &m);
    CHECK_OP(a.retired, >, 0);
    bt_destroy(&t2);
    free(moved);
    ref_free(&m);
}
END_TEST

/* ---- optional micro-benchmark: BT_BENCH=N keys ------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool count_visit(void *arg, const void *key, uint64_t value)
{
    (void)key;
    *(uint64_t *)arg += value;
    return true;
}

static void bench(unsigned n)
{
    bt_local_space ls;
    bt_local_space_init(&ls);
    bt_header hdr;
    bt_tree t;
    bt_create(&t, &hdr, &ls.space, &(bt_config){.key_width = 8});
    uint64_t *ids = malloc(n * sizeof *ids);
    for (unsigned i = 0; i < n; i++) ids[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    uint8_t k[8];
    double t0 = now_s();
    for (unsigned i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) k[b] = (uint8_t)(ids[i] >> (56 - 8 * b));
        bt_insert(&t, k, i);
    }
    double t1 = now_s();
    uint64_t sum = 0, v;
    for (unsigned i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) k[b] = (uint8_t)(ids[(i * 7919u) % n] >> (56 - 8 * b));
        if (bt_lookup(&t, k, &v) == BT_OK) sum += v;
    }
    double t2 = now_s();
    bt_scan_forward(&t, NULL, true, count_visit, &sum);
    double t3 = now_s();
    bt_stats s;
    bt_get_stats(&t, &s);
    printf("bench: %u random 8-byte keys: insert %.0f ns/op, lookup %.0f ns/op, scan %.1f ns/key; "
           "height %u, %llu nodes, %.1f MiB (sum %llu)\n",
           n, (t1 - t0) / n * 1e9, (t2 - t1) / n * 1e9, (t3 - t2) / n * 1e9, s.height,
           (unsigned long long)s.nodes, s.bytes / 1048576.0, (unsigned long long)sum);
    bt_destroy(&t);
    bt_local_space_fini(&ls);
    free(ids);
}

int main(void)
{
    const char *b = getenv("BT_BENCH");
    if (b) {
        unsigned long n = strtoul(b, NULL, 10);
        bench(n > 0 && n < 100000000 ? (unsigned)n : 1000000);
        return 0;
    }
    Suite *s = suite_create("btree");
    TCase *tc = tu_tcase(s, "core", 120);
    tcase_add_loop_test(tc, random_ops_match_reference, 0,
                        sizeof random_configs / sizeof random_configs[0]);
    tcase_add_loop_test(tc, random_ops_other_widths, 0, 6);
    tcase_add_loop_test(tc, ordered_loads_delete_all_reinsert, 0,
                        sizeof ordered_configs / sizeof ordered_configs[0]);
    tcase_add_test(tc, runs_inside_the_tree_fill_leaves);
    tcase_add_test(tc, hinted_inserts_skip_the_descent);
    tcase_add_test(tc, inserts_past_a_leaf_end_skip_descents);
    tcase_add_test(tc, a_split_leaf_forgets_its_neighbour);
    tcase_add_test(tc, empty_tree_and_upsert);
    tcase_add_test(tc, prefetch_answers_like_lookups);
    tcase_add_test(tc, geometry_and_bad_input);
    tcase_add_loop_test(tc, nomem_leaves_tree_intact, 0,
                        sizeof random_configs / sizeof random_configs[0]);
    tcase_add_test(tc, offset_refs_survive_moving_the_arena);
    return tu_run(s);
}
