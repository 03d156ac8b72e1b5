/* Lotus's lock table: see lock_table.h. */
#include "dm/lock_table.h"

#include <stdlib.h>
#include <string.h>

#include "util/cpu.h"

#define FP_SHIFT 8
#define COUNT_MASK 0xffull

/* Who holds a slot of the bucket, and how. */
struct holding {
    uint64_t fp;
    uint64_t holder;
    bool write;
};

struct bucket {
    uint64_t slot[LT_SLOTS];   /* fp << 8 | counter; 0: free */
    int latch;                 /* 0 free, 1 held */
    uint32_t n, cap;           /* holdings */
    struct holding *h;
};

struct lock_table {
    size_t nbuckets;           /* a power of two */
    struct bucket *b;
};

struct lock_table *lock_table_new(size_t bytes, pod_err *err)
{
    size_t want = bytes / (LT_SLOTS * sizeof(uint64_t)), n = 1;
    while (n < want && n < ((size_t)1 << 40)) n <<= 1;
    struct lock_table *t = calloc(1, sizeof *t);
    if (t) t->b = calloc(n, sizeof *t->b);
    if (!t || !t->b) {
        free(t);
        pod_err_set(err, "lock table: out of memory for %zu buckets", n);
        return NULL;
    }
    t->nbuckets = n;
    return t;
}

void lock_table_free(struct lock_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nbuckets; i++) free(t->b[i].h);
    free(t->b);
    free(t);
}

/* FNV-1a over the table id and the key, then a mix (splitmix64's finish):
 * the low bits pick the bucket, the high 56 the fingerprint. */
uint64_t lt_key_hash(uint32_t table, const void *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 4; i++) h = (h ^ ((table >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    const unsigned char *k = key;
    for (size_t i = 0; i < len; i++) h = (h ^ k[i]) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static struct bucket *bucket_of(struct lock_table *t, uint64_t hash, uint64_t *fp)
{
    *fp = hash >> FP_SHIFT;
    if (!*fp) *fp = 1; /* a slot of fingerprint 0 and count 0 would read as free */
    return &t->b[hash & (t->nbuckets - 1)];
}

static void latch(struct bucket *b)
{
    while (__atomic_exchange_n(&b->latch, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&b->latch, __ATOMIC_RELAXED)) pod_cpu_relax();
}

static void unlatch(struct bucket *b) { __atomic_store_n(&b->latch, 0, __ATOMIC_RELEASE); }

static struct holding *holding_of(struct bucket *b, uint64_t fp, uint64_t holder)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->h[i].fp == fp && b->h[i].holder == holder) return &b->h[i];
    return NULL;
}

/* The slot of fp in b, or -1. */
static int slot_of(const struct bucket *b, uint64_t fp)
{
    for (unsigned i = 0; i < LT_SLOTS; i++)
        if (b->slot[i] && b->slot[i] >> FP_SHIFT == fp) return (int)i;
    return -1;
}

static void slot_drop(struct bucket *b, int s, bool write)
{
    uint64_t c = b->slot[s] & COUNT_MASK;
    if (write || c <= 2) b->slot[s] = 0; /* the last holder: the whole word, fingerprint too */
    else b->slot[s] -= 2;
}

enum lt_result lock_table_acquire(struct lock_table *t, uint64_t hash, bool write,
                                  uint64_t holder)
{
    uint64_t fp;
    struct bucket *b = bucket_of(t, hash, &fp);
    enum lt_result r = LT_OK;
    latch(b);
    int s = slot_of(b, fp);
    struct holding *mine = holding_of(b, fp, holder);
    if (mine) { /* held already: the same request again, or a read lock made a write lock */
        if (write && !mine->write) {
            if ((b->slot[s] & COUNT_MASK) == 2) {
                b->slot[s] = fp << FP_SHIFT | 1;
                mine->write = true;
            } else {
                r = LT_CONFLICT;
            }
        }
        unlatch(b);
        return r;
    }
    if (s >= 0) {
        uint64_t c = b->slot[s] & COUNT_MASK;
        if (write || c == 1 || c / 2 >= LT_MAX_READERS) r = LT_CONFLICT;
    } else {
        for (unsigned i = 0; i < LT_SLOTS && s < 0; i++)
            if (!b->slot[i]) s = (int)i;
        if (s < 0) r = LT_FULL;
    }
    if (r == LT_OK && b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 4;
        struct holding *h = realloc(b->h, cap * sizeof *h);
        if (h) b->h = h, b->cap = cap;
        else r = LT_NOMEM;
    }
    if (r == LT_OK) {
        b->slot[s] = write ? fp << FP_SHIFT | 1 : b->slot[s] ? b->slot[s] + 2 : fp << FP_SHIFT | 2;
        b->h[b->n++] = (struct holding){.fp = fp, .holder = holder, .write = write};
    }
    unlatch(b);
    return r;
}

/* Drop holding i of b (latched): its slot's count, then the holding. */
static void drop(struct bucket *b, uint32_t i)
{
    int s = slot_of(b, b->h[i].fp);
    if (s >= 0) slot_drop(b, s, b->h[i].write);
    b->h[i] = b->h[--b->n];
}

void lock_table_release(struct lock_table *t, uint64_t hash, uint64_t holder)
{
    uint64_t fp;
    struct bucket *b = bucket_of(t, hash, &fp);
    latch(b);
    struct holding *mine = holding_of(b, fp, holder);
    if (mine) drop(b, (uint32_t)(mine - b->h));
    unlatch(b);
}

size_t lock_table_release_match(struct lock_table *t, uint64_t mask, uint64_t value)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct bucket *b = &t->b[i];
        latch(b);
        for (uint32_t j = 0; j < b->n;)
            if ((b->h[j].holder & mask) == value) drop(b, j), n++;
            else j++;
        unlatch(b);
    }
    return n;
}

size_t lock_table_release_cn(struct lock_table *t, uint32_t cn)
{
    return lock_table_release_match(t, LT_HOLDER(0xff, 0), LT_HOLDER(cn, 0));
}

void lock_table_count(struct lock_table *t, size_t *locks, size_t *holders)
{
    *locks = *holders = 0;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct bucket *b = &t->b[i];
        latch(b);
        for (unsigned s = 0; s < LT_SLOTS; s++) *locks += b->slot[s] != 0;
        *holders += b->n;
        unlatch(b);
    }
}
