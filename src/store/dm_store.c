/* The dm record store (dm_store.h). A location is (table + 1) << 48 | the
 * record's offset in the pool, so that a row operation knows its table's
 * tuple size without another round trip.
 *
 * Hash index of a table: nbuckets head buckets of bucket_bytes (sized from
 * the table's rows_hint), each a header {lock word, next bucket} (struct
 * dm_bucket_head) and `slots` slots of {word: the record's location or 0,
 * key bytes padded to 8}; a head bucket leads a chain of overflow buckets
 * of the same bytes, taken from the pool's cursor (FAA) as it fills. A
 * lookup READs the chain's buckets one by one, without a lock, until the
 * key is found; it ignores slots whose word is 0. Insert and remove take the
 * head bucket's lock (CAS 0 -> 1) for the whole chain and READ the chain,
 * and then insert (RS_EXISTS if the key is anywhere in it): WRITE the key
 * into the first free slot, make it placed (a READ after it), CAS the
 * slot's word 0 -> location; or, the chain being full, take a bucket from
 * the cursor, WRITE the slot {location, key} into it, make it placed, and
 * CAS the last bucket's next 0 -> the new bucket, which publishes it;
 * remove: CAS the word location -> 0; then release the lock (FAA -1).
 * Slots never move and buckets are never unlinked, so a walk sees an entry
 * present throughout exactly once. RS_NOMEM only when the pool is full. A
 * lookup (or walk) that races a remove and a reuse of the slot can pair an
 * old word with new key bytes: the word names a record that was made
 * invalid before its removal and is never reused (records are kept), so the
 * protocol sees a dead record and starts over. */
#include "store/dm_store.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dm/fabric.h"
#include "dm/pool.h"

#define LOC_OFF_MASK ((1ull << 48) - 1)
#define BUCKET_TARGET 256u      /* bytes: one READ resolves a key */
#define MAX_SLOTS 15u
#define DEFAULT_BUCKETS (1u << 14) /* rows_hint 0 */
#define MIN_BUCKETS 64u
#define MAX_BUCKETS (1ull << 40)
#define WALK_BYTES (64u << 10)      /* a walk READs head buckets this many bytes at a time */
#define BHEAD ((uint32_t)sizeof(struct dm_bucket_head))
#define LOCK_WAIT_MS 10000
#define CATALOG_WAIT_MS 10000

struct dm_rowhead { /* cxl_swcc_row without its tuple */
    uint32_t valid, tuple_size;
    uint64_t epoch_version;
};

struct dm_table {
    bool present;
    struct dm_catalog_entry e;
};

struct dm_store {
    struct record_store base;
    pthread_mutex_t mu;      /* the endpoint and the scratch below */
    struct fab *f;
    int peer;
    int boot_fd;             /* held open: the memory node sees this compute node leave */
    char label[160];
    uint64_t pool_size;
    struct dm_table t[DM_MAX_TABLES];
    uint64_t freed;
    /* what run() sent (atomic: counters() reads them without the lock);
     * by enum fab_op_kind, and the batches waited for */
    uint64_t ops[4], round_trips;
    /* scratch of a batch */
    struct fab_op *fops;
    struct dm_rowhead *heads;
    uint32_t cap;
    unsigned char *bucket;   /* one bucket */
    uint32_t bucket_cap;
};

static inline struct dm_store *ds(struct record_store *s) { return (struct dm_store *)s; }
static inline uint64_t loc_off(rs_loc l) { return l & LOC_OFF_MASK; }
static inline uint32_t loc_table(rs_loc l) { return (uint32_t)(l >> 48) - 1; }
static inline rs_loc make_loc(uint32_t table, uint64_t off) { return ((uint64_t)(table + 1) << 48) | off; }
static inline uint64_t round8(uint64_t v) { return (v + 7) & ~7ull; }

static void fatal(struct dm_store *d, const pod_err *e)
{
    fprintf(stderr, "dm record store (memory node %s): %s; this compute node cannot go on\n",
            d->label, e->msg);
    abort();
}

static void run(struct dm_store *d, struct fab_op *ops, uint32_t n)
{
    pod_err e;
    for (uint32_t i = 0; i < n; i++) __atomic_fetch_add(&d->ops[ops[i].kind], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->round_trips, 1, __ATOMIC_RELAXED);
    if (fab_batch(d->f, d->peer, ops, n, &e) != 0) fatal(d, &e);
}

static void counters(struct record_store *s, struct rs_counters *out)
{
    struct dm_store *d = ds(s);
    *out = (struct rs_counters){
        .reads = __atomic_load_n(&d->ops[FAB_READ], __ATOMIC_RELAXED),
        .writes = __atomic_load_n(&d->ops[FAB_WRITE], __ATOMIC_RELAXED),
        .cas = __atomic_load_n(&d->ops[FAB_CAS], __ATOMIC_RELAXED),
        .faa = __atomic_load_n(&d->ops[FAB_FAA], __ATOMIC_RELAXED),
        .round_trips = __atomic_load_n(&d->round_trips, __ATOMIC_RELAXED),
    };
}

static uint64_t faa(struct dm_store *d, uint64_t off, uint64_t add)
{
    struct fab_op o = {.kind = FAB_FAA, .off = off, .operand = add};
    run(d, &o, 1);
    return o.old;
}

static uint64_t cas(struct dm_store *d, uint64_t off, uint64_t compare, uint64_t swap)
{
    struct fab_op o = {.kind = FAB_CAS, .off = off, .compare = compare, .operand = swap};
    run(d, &o, 1);
    return o.old;
}

static void rd(struct dm_store *d, uint64_t off, void *buf, uint32_t len)
{
    struct fab_op o = {.kind = FAB_READ, .off = off, .buf = buf, .len = len};
    run(d, &o, 1);
}

/* WRITE buf, and return once it is placed at the memory node (the READ
 * behind it on the same endpoint returns only after the write is placed:
 * RMA read-after-write order, which shm and rxm give; rxm completes a WRITE
 * when it is sent, so its completion alone would not do). */
static void write_placed(struct dm_store *d, uint64_t off, const void *buf, uint32_t len)
{
    uint64_t probe;
    struct fab_op o[2] = {{.kind = FAB_WRITE, .off = off, .buf = (void *)buf, .len = len},
                          {.kind = FAB_READ, .off = off & ~7ull, .buf = &probe, .len = 8}};
    run(d, o, 2);
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t hash_key(const void *key, uint32_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static struct dm_table *table_of(struct dm_store *d, uint32_t id)
{
    return id < DM_MAX_TABLES && d->t[id].present ? &d->t[id] : NULL;
}

/* ---- the catalog ------------------------------------------------------------- */

/* Head buckets for rows_hint rows: about rows_hint / (slots * 0.7), a power
 * of two, at least MIN_BUCKETS, the index at most a quarter of the pool
 * (overflow buckets take the rest). rows_hint 0: DEFAULT_BUCKETS, the index
 * at most 1/16 of the pool. */
static uint64_t bucket_count(uint64_t rows_hint, uint32_t slots, uint32_t bucket_bytes,
                             uint64_t pool_size)
{
    uint64_t nb = DEFAULT_BUCKETS, cap = pool_size / 16;
    if (rows_hint) {
        uint64_t full = rows_hint / slots + 1; /* buckets, were they full; then / 0.7 */
        uint64_t want = full > MAX_BUCKETS ? MAX_BUCKETS : full + (3 * full + 6) / 7;
        for (nb = MIN_BUCKETS; nb < want;) nb *= 2;
        cap = pool_size / 4;
    }
    while (nb > MIN_BUCKETS && nb * bucket_bytes > cap) nb /= 2;
    return nb;
}

static int table_add(struct record_store *s, const struct rs_table_def *def, pod_err *err)
{
    struct dm_store *d = ds(s);
    if (def->id >= DM_MAX_TABLES) {
        pod_err_set(err, "dm record store: table id %u is beyond the catalog's %u", def->id,
                    DM_MAX_TABLES);
        return -1;
    }
    if (d->t[def->id].present) {
        pod_err_set(err, "dm record store: table %u added twice", def->id);
        return -1;
    }
    if (def->tuple_size > (1u << 24) || def->key_size == 0 || def->key_size > 4096) {
        pod_err_set(err, "dm record store: table %u: key of %u bytes or tuple of %u bytes is out "
                    "of range", def->id, def->key_size, def->tuple_size);
        return -1;
    }
    struct dm_catalog_entry want = {.table_id = def->id, .key_size = def->key_size,
                                    .tuple_size = def->tuple_size};
    want.record_bytes = (uint32_t)round8(8 + sizeof(struct dm_rowhead) + def->tuple_size);
    want.slot_bytes = (uint32_t)(8 + round8(def->key_size));
    uint32_t slots = (BUCKET_TARGET - BHEAD) / want.slot_bytes;
    want.slots = slots < 1 ? 1 : slots > MAX_SLOTS ? MAX_SLOTS : slots;
    want.bucket_bytes = BHEAD + want.slots * want.slot_bytes;
    want.nbuckets = bucket_count(def->rows_hint, want.slots, want.bucket_bytes, d->pool_size);
    uint64_t ent_off = DM_CATALOG_OFF + (uint64_t)def->id * DM_CATALOG_ENTRY;

    pthread_mutex_lock(&d->mu);
    struct dm_catalog_entry got;
    uint64_t old = cas(d, ent_off, DM_CAT_FREE, DM_CAT_CREATING);
    if (old == DM_CAT_FREE) { /* the first: lay the table out */
        /* the index, then the sentinel record */
        uint64_t ix_bytes = (want.nbuckets * want.bucket_bytes + 63) & ~63ull;
        uint64_t bytes = ix_bytes + want.record_bytes;
        uint64_t at = faa(d, offsetof(struct dm_pool_header, cursor), bytes);
        if (at + bytes > d->pool_size) {
            cas(d, ent_off, DM_CAT_CREATING, DM_CAT_FREE);
            pthread_mutex_unlock(&d->mu);
            pod_err_set(err, "dm record store: the pool of memory node %s is full: no room for "
                        "the %llu-byte index of table %u", d->label, (unsigned long long)bytes,
                        def->id);
            return -1;
        }
        want.index_off = at; /* fresh pool memory: zero */
        want.sentinel_off = at + ix_bytes;
        struct dm_rowhead sh = {.valid = 0, .tuple_size = want.tuple_size};
        write_placed(d, want.sentinel_off + 8, &sh, sizeof sh);
        want.state = DM_CAT_CREATING;
        write_placed(d, ent_off + 8, (const unsigned char *)&want + 8, DM_CATALOG_ENTRY - 8);
        cas(d, ent_off, DM_CAT_CREATING, DM_CAT_READY);
        got = want;
    } else {
        uint64_t until = ms_now() + CATALOG_WAIT_MS;
        for (;;) {
            rd(d, ent_off, &got, sizeof got);
            if (got.state == DM_CAT_READY) break;
            if (ms_now() > until) {
                pthread_mutex_unlock(&d->mu);
                pod_err_set(err, "dm record store: table %u on memory node %s stayed half-created "
                            "for %d ms (its creator died?)", def->id, d->label, CATALOG_WAIT_MS);
                return -1;
            }
            sched_yield();
        }
        if (got.key_size != want.key_size || got.tuple_size != want.tuple_size ||
            got.record_bytes != want.record_bytes || got.table_id != def->id) {
            pthread_mutex_unlock(&d->mu);
            pod_err_set(err, "dm record store: catalog mismatch for table %u on memory node %s: "
                        "it was created with keys of %u bytes and tuples of %u bytes, this "
                        "compute node declares keys of %u bytes and tuples of %u bytes", def->id,
                        d->label, got.key_size, got.tuple_size, def->key_size, def->tuple_size);
            return -1;
        }
    }
    got.state = DM_CAT_READY;
    d->t[def->id].e = got;
    d->t[def->id].present = true;
    if (got.bucket_bytes > d->bucket_cap) {
        unsigned char *b = realloc(d->bucket, got.bucket_bytes);
        if (!b) {
            d->t[def->id].present = false;
            pthread_mutex_unlock(&d->mu);
            pod_err_set(err, "dm record store: out of memory");
            return -1;
        }
        d->bucket = b;
        d->bucket_cap = got.bucket_bytes;
    }
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* ---- the index ----------------------------------------------------------------- */

static uint64_t bucket_off(const struct dm_catalog_entry *e, const void *key)
{
    return e->index_off + (hash_key(key, e->key_size) & (e->nbuckets - 1)) * e->bucket_bytes;
}

static uint64_t slot_word(const unsigned char *bucket, const struct dm_catalog_entry *e, uint32_t i)
{
    uint64_t w;
    memcpy(&w, bucket + BHEAD + (size_t)i * e->slot_bytes, 8);
    return w;
}

static uint64_t next_of(const unsigned char *bucket)
{
    uint64_t n;
    memcpy(&n, bucket + offsetof(struct dm_bucket_head, next), 8);
    return n;
}

/* A chain cannot hold more buckets than the pool: one that seems to is
 * corrupt (a loop), and going on would never end. */
static void chain_check(struct dm_store *d, const struct dm_catalog_entry *e, uint64_t hops,
                        uint64_t head)
{
    if (hops <= d->pool_size / e->bucket_bytes) return;
    pod_err er;
    pod_err_set(&er, "the overflow chain of index bucket at offset %llu of table %u is longer "
                "than the pool holds (a loop?)", (unsigned long long)head, e->table_id);
    fatal(d, &er);
}

/* Where a chain search ended (chain_find). */
struct chain_pos {
    uint64_t slot;   /* the key's slot (its offset), 0: not in the chain */
    uint64_t word;   /* that slot's word */
    uint64_t free;   /* the first free slot of the chain, 0: none */
    uint64_t last;   /* the chain's last bucket (when the key is not in it) */
};

/* Under d->mu: READ the chain from head bucket b, one bucket at a time into
 * d->bucket, until key's slot. Without the chain's lock (a lookup) a bucket
 * appended meanwhile is either seen whole or not at all: its link is
 * published only once its bytes are placed. */
static struct chain_pos chain_find(struct dm_store *d, const struct dm_catalog_entry *e,
                                   uint64_t b, const void *key)
{
    struct chain_pos p = {0};
    for (uint64_t at = b, hops = 0;; hops++) {
        chain_check(d, e, hops, b);
        rd(d, at, d->bucket, e->bucket_bytes);
        for (uint32_t i = 0; i < e->slots; i++) {
            uint64_t w = slot_word(d->bucket, e, i), so = at + BHEAD + (uint64_t)i * e->slot_bytes;
            const unsigned char *k = d->bucket + BHEAD + (size_t)i * e->slot_bytes + 8;
            if (w && memcmp(k, key, e->key_size) == 0) {
                p.slot = so;
                p.word = w;
                return p;
            }
            if (!w && !p.free) p.free = so;
        }
        uint64_t next = next_of(d->bucket);
        if (!next) {
            p.last = at;
            return p;
        }
        at = next;
    }
}

static int lookup(struct record_store *s, uint32_t table, const void *key, rs_loc *loc)
{
    struct dm_store *d = ds(s);
    const struct dm_catalog_entry *e = &table_of(d, table)->e;
    pthread_mutex_lock(&d->mu);
    struct chain_pos p = chain_find(d, e, bucket_off(e, key), key);
    pthread_mutex_unlock(&d->mu);
    if (!p.slot) return RS_MISSING;
    *loc = p.word;
    return RS_OK;
}

static int neighbour(struct record_store *s, uint32_t table, const void *key, bool inclusive,
                     bool backward, void *key_out, rs_loc *loc)
{
    (void)s, (void)table, (void)key, (void)inclusive, (void)backward, (void)key_out, (void)loc;
    return RS_MISSING; /* not ordered: rs-2pl never asks */
}

static void bucket_lock(struct dm_store *d, uint64_t b)
{
    uint64_t until = 0;
    for (unsigned tries = 0;; tries++) {
        if (cas(d, b, 0, 1) == 0) return;
        if (!until) until = ms_now() + LOCK_WAIT_MS;
        else if (ms_now() > until) {
            pod_err e;
            pod_err_set(&e, "the lock of index bucket at offset %llu stayed taken for %d ms (a "
                        "compute node died holding it?)", (unsigned long long)b, LOCK_WAIT_MS);
            fatal(d, &e);
        }
        if (tries > 4) sched_yield();
    }
}

/* A full chain: a bucket from the cursor holding key -> loc in its first
 * slot, placed, then linked after the chain's last bucket. Under d->mu and
 * the chain's lock. */
static int chain_append(struct dm_store *d, const struct dm_catalog_entry *e, uint64_t last,
                        const void *key, rs_loc loc)
{
    uint64_t nb = faa(d, offsetof(struct dm_pool_header, cursor), e->bucket_bytes);
    if (nb + e->bucket_bytes > d->pool_size) return RS_NOMEM;
    /* fresh pool memory: its lock, next and other slots are zero */
    memcpy(d->bucket, &loc, 8);
    memcpy(d->bucket + 8, key, e->key_size);
    write_placed(d, nb + BHEAD, d->bucket, 8 + e->key_size);
    /* under the chain's lock nothing else links after last */
    return cas(d, last + offsetof(struct dm_bucket_head, next), 0, nb) == 0 ? RS_OK : RS_NOMEM;
}

static int index_insert(struct record_store *s, uint32_t table, const void *key, rs_loc loc)
{
    struct dm_store *d = ds(s);
    const struct dm_catalog_entry *e = &table_of(d, table)->e;
    pthread_mutex_lock(&d->mu);
    uint64_t b = bucket_off(e, key);
    bucket_lock(d, b);
    struct chain_pos p = chain_find(d, e, b, key);
    int rc = RS_NOMEM;
    if (p.slot) {
        rc = RS_EXISTS;
    } else if (p.free) {
        /* the key, placed before the word that makes the slot visible */
        write_placed(d, p.free + 8, key, e->key_size);
        if (cas(d, p.free, 0, loc) == 0) rc = RS_OK; /* under the lock it cannot fail */
    } else {
        rc = chain_append(d, e, p.last, key, loc);
    }
    faa(d, b, (uint64_t)-1);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int index_remove(struct record_store *s, uint32_t table, const void *key)
{
    struct dm_store *d = ds(s);
    const struct dm_catalog_entry *e = &table_of(d, table)->e;
    pthread_mutex_lock(&d->mu);
    uint64_t b = bucket_off(e, key);
    bucket_lock(d, b);
    struct chain_pos p = chain_find(d, e, b, key);
    int rc = RS_MISSING;
    if (p.slot && cas(d, p.slot, p.word, 0) == p.word) rc = RS_OK;
    faa(d, b, (uint64_t)-1);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Visit the slots of buckets[0..n) (READ into buf); gather their next
 * buckets into next[], *m of them. False when fn stopped the walk. */
static bool walk_buckets(const struct dm_catalog_entry *e, const unsigned char *buf, uint64_t n,
                         rs_walk_fn fn, void *arg, uint64_t *next, uint64_t *m)
{
    *m = 0;
    for (uint64_t j = 0; j < n; j++) {
        const unsigned char *bk = buf + j * e->bucket_bytes;
        for (uint32_t i = 0; i < e->slots; i++) {
            uint64_t w = slot_word(bk, e, i);
            if (w && !fn(arg, bk + BHEAD + (size_t)i * e->slot_bytes + 8, w)) return false;
        }
        if (next_of(bk)) next[(*m)++] = next_of(bk);
    }
    return true;
}

/* Head buckets WALK_BYTES at a time (one READ), then their chains a level
 * at a time (one batch of READs per level, at most as many buckets as the
 * heads). Work: one pass over the index and its overflow buckets; memory:
 * one chunk's buffer; d->mu is held for one READ or batch at a time and
 * never while fn runs (fn may use the store). */
static int walk(struct record_store *s, uint32_t table, rs_walk_fn fn, void *arg)
{
    struct dm_store *d = ds(s);
    const struct dm_catalog_entry *e = &table_of(d, table)->e;
    uint64_t per = WALK_BYTES / e->bucket_bytes ? WALK_BYTES / e->bucket_bytes : 1;
    if (per > e->nbuckets) per = e->nbuckets;
    unsigned char *buf = malloc(per * e->bucket_bytes);
    uint64_t *next = malloc(per * sizeof *next);
    struct fab_op *ops = malloc(per * sizeof *ops);
    int rc = buf && next && ops ? RS_OK : RS_NOMEM;
    bool go = rc == RS_OK;
    for (uint64_t first = 0; go && first < e->nbuckets; first += per) {
        uint64_t n = e->nbuckets - first < per ? e->nbuckets - first : per, m;
        pthread_mutex_lock(&d->mu);
        rd(d, e->index_off + first * e->bucket_bytes, buf, (uint32_t)(n * e->bucket_bytes));
        pthread_mutex_unlock(&d->mu);
        for (uint64_t level = 0;; level++) {
            go = walk_buckets(e, buf, n, fn, arg, next, &m);
            if (!go || !m) break;
            chain_check(d, e, level + 1, e->index_off + first * e->bucket_bytes);
            for (uint64_t j = 0; j < m; j++)
                ops[j] = (struct fab_op){.kind = FAB_READ, .off = next[j],
                                         .buf = buf + j * e->bucket_bytes, .len = e->bucket_bytes};
            pthread_mutex_lock(&d->mu);
            run(d, ops, (uint32_t)m);
            pthread_mutex_unlock(&d->mu);
            n = m;
        }
    }
    free(buf);
    free(next);
    free(ops);
    return rc;
}

/* ---- the record word ------------------------------------------------------------ */

static uint64_t word_read(struct record_store *s, rs_loc loc)
{
    struct dm_store *d = ds(s);
    uint64_t w;
    pthread_mutex_lock(&d->mu);
    rd(d, loc_off(loc), &w, 8);
    pthread_mutex_unlock(&d->mu);
    return w;
}

static bool word_cas(struct record_store *s, rs_loc loc, uint64_t *expected, uint64_t desired)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    uint64_t old = cas(d, loc_off(loc), *expected, desired);
    pthread_mutex_unlock(&d->mu);
    if (old == *expected) return true;
    *expected = old;
    return false;
}

static uint64_t word_faa(struct record_store *s, rs_loc loc, uint64_t add)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    uint64_t old = faa(d, loc_off(loc), add);
    pthread_mutex_unlock(&d->mu);
    return old;
}

/* ---- rows, batches ------------------------------------------------------------------ */

static int grow(struct dm_store *d, uint32_t n)
{
    if (n <= d->cap) return 0;
    uint32_t cap = d->cap ? d->cap : 64;
    while (cap < n) cap *= 2;
    struct fab_op *f = realloc(d->fops, (size_t)cap * 2 * sizeof *f + sizeof *f);
    if (!f) return -1;
    d->fops = f;
    struct dm_rowhead *h = realloc(d->heads, (size_t)cap * sizeof *h);
    if (!h) return -1;
    d->heads = h;
    d->cap = cap;
    return 0;
}

static bool is_rma(enum rs_op_kind k) { return k == RS_OP_READ || k == RS_OP_WRITE; }

/* ops[lo..hi): all RMA or all atomics. Run them as one wave; a wave with
 * WRITEs ends with a READ, so that its writes are placed before what
 * follows (the FAA that releases a lock must not pass the row it guards:
 * rxm carries atomics and RMA on different paths, and completes a WRITE
 * once it is sent). */
static void run_group(struct dm_store *d, struct rs_op *ops, uint32_t lo, uint32_t hi, bool flush)
{
    uint32_t n = 0;
    uint64_t probe, last_write = 0;
    bool wrote = false;
    for (uint32_t i = lo; i < hi; i++) {
        struct rs_op *o = &ops[i];
        uint64_t off = loc_off(o->loc);
        struct dm_rowhead *h = &d->heads[i];
        switch (o->kind) {
        case RS_OP_READ:
            if (o->head)
                d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = off + 8, .buf = h,
                                               .len = sizeof *h};
            if (o->len)
                d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = off + 8 + sizeof *h + o->off,
                                               .buf = o->buf, .len = o->len};
            break;
        case RS_OP_WRITE:
            if (o->head) {
                h->valid = o->head->valid;
                h->tuple_size = table_of(d, loc_table(o->loc))->e.tuple_size;
                h->epoch_version = o->head->epoch_version;
                d->fops[n++] = (struct fab_op){.kind = FAB_WRITE, .off = off + 8, .buf = h,
                                               .len = sizeof *h};
            }
            if (o->len)
                d->fops[n++] = (struct fab_op){.kind = FAB_WRITE,
                                               .off = off + 8 + sizeof *h + o->off,
                                               .buf = o->buf, .len = o->len};
            wrote = wrote || o->head || o->len;
            last_write = off;
            break;
        case RS_OP_CAS:
            d->fops[n++] = (struct fab_op){.kind = FAB_CAS, .off = off, .compare = o->expected,
                                           .operand = o->desired};
            break;
        case RS_OP_FAA:
            d->fops[n++] = (struct fab_op){.kind = FAB_FAA, .off = off, .operand = o->add};
            break;
        }
    }
    if (wrote && flush)
        d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = last_write, .buf = &probe, .len = 8};
    if (n) run(d, d->fops, n);
    n = 0;
    for (uint32_t i = lo; i < hi; i++) {
        struct rs_op *o = &ops[i];
        if (o->kind == RS_OP_READ) {
            if (o->head) {
                o->head->valid = d->heads[i].valid;
                o->head->epoch_version = d->heads[i].epoch_version;
                n++;
            }
            if (o->len) n++;
        } else if (o->kind == RS_OP_WRITE) {
            n += (o->head != NULL) + (o->len != 0);
        } else {
            o->old = d->fops[n++].old;
            if (o->kind == RS_OP_CAS) {
                o->ok = o->old == o->expected;
                o->expected = o->old;
            }
        }
    }
}

/* Runs of RMA and of atomics in their order; each run completes (its writes
 * placed) before the next is posted. */
static void batch_locked(struct dm_store *d, struct rs_op *ops, uint32_t n)
{
    if (grow(d, n) != 0) {
        pod_err e;
        pod_err_set(&e, "out of memory for a batch of %u operations", n);
        fatal(d, &e);
    }
    for (uint32_t lo = 0; lo < n;) {
        uint32_t hi = lo + 1;
        while (hi < n && is_rma(ops[hi].kind) == is_rma(ops[lo].kind)) hi++;
        run_group(d, ops, lo, hi, hi < n);
        lo = hi;
    }
}

static void batch(struct record_store *s, struct rs_op *ops, uint32_t n)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    batch_locked(d, ops, n);
    pthread_mutex_unlock(&d->mu);
}

static void row_read(struct record_store *s, rs_loc loc, struct rs_row_head *head, void *buf,
                     uint32_t off, uint32_t len)
{
    struct rs_op o = {.kind = RS_OP_READ, .loc = loc, .head = head, .buf = buf, .off = off,
                      .len = len};
    batch(s, &o, 1);
}

static void row_write(struct record_store *s, rs_loc loc, const struct rs_row_head *head,
                      const void *buf, uint32_t off, uint32_t len)
{
    struct rs_op o = {.kind = RS_OP_WRITE, .loc = loc, .head = (struct rs_row_head *)head,
                      .buf = (void *)buf, .off = off, .len = len};
    batch(s, &o, 1);
}

static rs_loc sentinel(struct record_store *s, uint32_t table)
{
    return make_loc(table, table_of(ds(s), table)->e.sentinel_off);
}

static int alloc(struct record_store *s, uint32_t table, rs_loc *loc)
{
    struct dm_store *d = ds(s);
    const struct dm_catalog_entry *e = &table_of(d, table)->e;
    pthread_mutex_lock(&d->mu);
    uint64_t at = faa(d, offsetof(struct dm_pool_header, cursor), e->record_bytes);
    if (at + e->record_bytes > d->pool_size) {
        pthread_mutex_unlock(&d->mu);
        return RS_NOMEM;
    }
    /* word 0 and tuple zero already (fresh pool memory); the row's header */
    struct dm_rowhead h = {.valid = 0, .tuple_size = e->tuple_size};
    write_placed(d, at + 8, &h, sizeof h);
    pthread_mutex_unlock(&d->mu);
    *loc = make_loc(table, at);
    return RS_OK;
}

static void free_rec(struct record_store *s, uint32_t table, rs_loc loc)
{
    (void)table, (void)loc;
    __atomic_fetch_add(&ds(s)->freed, 1, __ATOMIC_RELAXED); /* records are kept */
}

static void destroy(struct record_store *s)
{
    struct dm_store *d = ds(s);
    if (!d) return;
    fab_close(d->f);
    if (d->boot_fd >= 0) close(d->boot_fd);
    pthread_mutex_destroy(&d->mu);
    free(d->fops);
    free(d->heads);
    free(d->bucket);
    free(d);
}

static const struct rs_ops dm_ops = {
    .name = "dm",
    .ordered = false,
    .table_add = table_add,
    .sentinel = sentinel,
    .lookup = lookup,
    .neighbour = neighbour,
    .index_insert = index_insert,
    .index_remove = index_remove,
    .walk = walk,
    .word_read = word_read,
    .word_cas = word_cas,
    .word_faa = word_faa,
    .row_read = row_read,
    .row_write = row_write,
    .alloc = alloc,
    .free = free_rec,
    .batch = batch,
    .counters = counters,
    .destroy = destroy,
};

/* ---- bootstrap ------------------------------------------------------------------------ */

static bool xfer(int fd, void *buf, size_t len, bool out)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + done, len - done, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        done += (size_t)n;
    }
    return true;
}

struct record_store *rs_dm_open(const char *memnode_socket, const char *provider, const char *pod,
                                pod_err *err)
{
    if (!provider || !*provider) provider = "shm";
    if (!pod || !*pod || strlen(pod) >= DM_POD_NAME_MAX) {
        pod_err_set(err, "dm record store: a pod name of 1..%d bytes is needed",
                    DM_POD_NAME_MAX - 1);
        return NULL;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!memnode_socket || strlen(memnode_socket) >= sizeof sa.sun_path) {
        pod_err_set(err, "dm record store: memory node socket path missing or too long");
        return NULL;
    }
    strcpy(sa.sun_path, memnode_socket);
    struct dm_store *d = calloc(1, sizeof *d);
    if (!d) {
        pod_err_set(err, "dm record store: out of memory");
        return NULL;
    }
    d->base.ops = &dm_ops;
    pthread_mutex_init(&d->mu, NULL);
    snprintf(d->label, sizeof d->label, "%s", memnode_socket);
    d->boot_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (d->boot_fd < 0 || connect(d->boot_fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        pod_err_set(err, "dm record store: cannot reach the memory node at %s: %s",
                    memnode_socket, strerror(errno));
        goto fail;
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(d->boot_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    d->f = fab_open(&(struct fab_open_opts){.provider = provider}, err);
    if (!d->f) goto fail;
    struct dm_boot_req req = {.magic = DM_BOOT_MAGIC, .version = DM_BOOT_VERSION};
    snprintf(req.pod, sizeof req.pod, "%s", pod);
    snprintf(req.provider, sizeof req.provider, "%s", provider);
    size_t nl = sizeof req.name;
    if (fab_name(d->f, req.name, &nl, err) != 0) goto fail;
    req.name_len = (uint32_t)nl;
    struct dm_boot_rep rep;
    if (!xfer(d->boot_fd, &req, sizeof req, true) || !xfer(d->boot_fd, &rep, sizeof rep, false) ||
        rep.magic != DM_BOOT_MAGIC) {
        pod_err_set(err, "dm record store: the memory node at %s did not answer its bootstrap "
                    "request", memnode_socket);
        goto fail;
    }
    rep.msg[sizeof rep.msg - 1] = 0;
    if (rep.status) {
        pod_err_set(err, "dm record store: the memory node at %s refused this compute node: %s",
                    memnode_socket, rep.msg);
        goto fail;
    }
    d->peer = fab_peer_add(d->f, rep.name, rep.name_len, &rep.region, memnode_socket, err);
    if (d->peer < 0) goto fail;
    d->pool_size = rep.region.size;
    /* The pool's own header: a second check of what the socket said. */
    struct dm_pool_header h;
    if (fab_read(d->f, d->peer, 0, &h, sizeof h, err) != 0) goto fail;
    h.pod[DM_POD_NAME_MAX - 1] = 0;
    if (h.magic != DM_POOL_MAGIC || h.version != DM_LAYOUT_VERSION) {
        pod_err_set(err, "dm record store: the pool of memory node %s has magic 0x%llx layout %u, "
                    "not a PodDB pool of layout %u", memnode_socket, (unsigned long long)h.magic,
                    h.version, DM_LAYOUT_VERSION);
        goto fail;
    }
    if (strcmp(h.pod, pod) != 0 || h.pool_size != d->pool_size) {
        pod_err_set(err, "dm record store: the pool of memory node %s belongs to pod \"%s\" "
                    "(%llu bytes), not to pod \"%s\"", memnode_socket, h.pod,
                    (unsigned long long)h.pool_size, pod);
        goto fail;
    }
    return &d->base;
fail:
    destroy(&d->base);
    return NULL;
}
