#include "storage/rowhash.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "storage/btree.h" /* the race-point test seam */
#include "util/cpu.h"

#define INITIAL_BUCKETS 1024u /* a multiple of ROWHASH_STRIPES */
#define MAX_CHAIN 4096u       /* a walk this long gives up (and asks the tree) */

/* A bucket array and its mask, published together through one pointer. */
struct rh_array {
    uint64_t mask;
    struct pod_row *b[];
};

struct rowhash_old {
    struct rowhash_old *next;
    struct rh_array *a;
};

static inline uint64_t fmix64(uint64_t x) /* MurmurHash3's finaliser */
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t key_hash(const unsigned char *k, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n) {
        uint64_t w = 0;
        uint32_t take = n < 8 ? n : 8;
        memcpy(&w, k, take);
        h = fmix64(h ^ w);
        k += take;
        n -= take;
    }
    return h;
}

static inline struct rh_array *array_of(const struct row_hash *h)
{
    return __atomic_load_n(&h->arr, __ATOMIC_ACQUIRE);
}

static inline const unsigned char *key_of(const struct row_hash *h, const struct pod_row *r)
{
    return r->tuple + h->key_off;
}

static void stripe_lock(struct row_hash *h, unsigned s)
{
    for (;;) {
        uint32_t z = 0;
        if (__atomic_compare_exchange_n(&h->stripe[s], &z, 1, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        pod_cpu_relax();
    }
}

static void stripe_unlock(struct row_hash *h, unsigned s)
{
    __atomic_store_n(&h->stripe[s], 0, __ATOMIC_RELEASE);
}

static struct rh_array *array_new(uint64_t nbuckets)
{
    struct rh_array *a = calloc(1, sizeof *a + nbuckets * sizeof(struct pod_row *));
    if (a) a->mask = nbuckets - 1;
    return a;
}

void rowhash_init(struct row_hash *h, uint32_t key_off, uint32_t key_size)
{
    memset(h, 0, sizeof *h);
    h->key_off = key_off;
    h->key_size = key_size;
}

void rowhash_destroy(struct row_hash *h)
{
    free(array_of(h));
    for (struct rowhash_old *o = h->old, *n; o; o = n) {
        n = o->next;
        free(o->a);
        free(o);
    }
    h->arr = NULL;
    h->old = NULL;
}

struct pod_row *rowhash_find(const struct row_hash *h, const void *key)
{
    struct rh_array *a = array_of(h);
    if (!a) return NULL;
    uint64_t hv = key_hash(key, h->key_size);
    struct pod_row *r = __atomic_load_n(&a->b[hv & a->mask], __ATOMIC_ACQUIRE);
    for (unsigned steps = 0; r && steps < MAX_CHAIN; steps++) {
        /* The caller locks the row next: fetch its header's line together
         * with the key's (after the tuple, often lines away), so the two
         * misses overlap. */
        __builtin_prefetch(r, 1);
        __builtin_prefetch(key_of(h, r));
        if (memcmp(key_of(h, r), key, h->key_size) == 0) {
            if (bt_race_point) bt_race_point(BT_RACE_HASH_HIT);
            return r;
        }
        r = __atomic_load_n(&r->hnext, __ATOMIC_ACQUIRE);
    }
    return NULL;
}

/* Double the array. Every stripe is held, so no writer runs; readers walking
 * the old array while rows are relinked may miss (and ask the tree) but never
 * loop: a relinked row points only into the new array's chains. */
static void grow(struct row_hash *h)
{
    for (unsigned s = 0; s < ROWHASH_STRIPES; s++) stripe_lock(h, s);
    struct rh_array *a = array_of(h);
    struct rowhash_old *o = NULL;
    struct rh_array *n = NULL;
    if (a && h->count > a->mask + 1 && (o = malloc(sizeof *o)) && (n = array_new(2 * (a->mask + 1)))) {
        for (uint64_t i = 0; i <= a->mask; i++) {
            struct pod_row *r = a->b[i];
            while (r) {
                struct pod_row *next = r->hnext;
                uint64_t j = key_hash(key_of(h, r), h->key_size) & n->mask;
                __atomic_store_n(&r->hnext, n->b[j], __ATOMIC_RELEASE);
                n->b[j] = r;
                r = next;
            }
        }
        __atomic_store_n(&h->arr, n, __ATOMIC_RELEASE);
        o->a = a;
        o->next = h->old;
        h->old = o;
    } else {
        free(o);
    }
    for (unsigned s = ROWHASH_STRIPES; s-- > 0;) stripe_unlock(h, s);
}

void rowhash_add(struct row_hash *h, struct pod_row *row)
{
    uint64_t hv = key_hash(key_of(h, row), h->key_size);
    unsigned s = (unsigned)(hv & (ROWHASH_STRIPES - 1));
    stripe_lock(h, s);
    struct rh_array *a = array_of(h);
    if (!a) { /* the first add creates the array, holding every stripe like a resize */
        stripe_unlock(h, s);
        for (unsigned i = 0; i < ROWHASH_STRIPES; i++) stripe_lock(h, i);
        if (!array_of(h)) __atomic_store_n(&h->arr, array_new(INITIAL_BUCKETS),
                                           __ATOMIC_RELEASE);
        for (unsigned i = ROWHASH_STRIPES; i-- > 0;) stripe_unlock(h, i);
        if (!array_of(h)) return; /* no memory: the tree alone serves */
        stripe_lock(h, s);
        a = array_of(h);
    }
    uint64_t b = hv & a->mask;
    row->hnext = a->b[b];
    __atomic_store_n(&a->b[b], row, __ATOMIC_RELEASE);
    uint64_t count = __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
    stripe_unlock(h, s);
    if (count > a->mask + 1) grow(h); /* load factor 1 */
}

void rowhash_del(struct row_hash *h, struct pod_row *row)
{
    uint64_t hv = key_hash(key_of(h, row), h->key_size);
    unsigned s = (unsigned)(hv & (ROWHASH_STRIPES - 1));
    stripe_lock(h, s);
    struct rh_array *a = array_of(h);
    if (a) {
        struct pod_row **pp = &a->b[hv & a->mask];
        while (*pp && *pp != row) pp = &(*pp)->hnext;
        if (*pp) {
            /* The row keeps its hnext: a reader standing on it goes on. */
            __atomic_store_n(pp, row->hnext, __ATOMIC_RELEASE);
            __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
        }
    }
    stripe_unlock(h, s);
}

void rowhash_get_stats(const struct row_hash *h, struct rowhash_stats *out)
{
    memset(out, 0, sizeof *out);
    struct rh_array *a = array_of(h);
    if (!a) return;
    out->buckets = a->mask + 1;
    for (uint64_t i = 0; i <= a->mask; i++) {
        uint64_t n = 0;
        for (struct pod_row *r = a->b[i]; r; r = r->hnext) n++;
        out->rows += n;
        out->empty_buckets += n == 0;
        if (n > out->longest_chain) out->longest_chain = n;
    }
}
