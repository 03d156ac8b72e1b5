#include "storage/row_slab.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Free rows stay poisoned for AddressSanitizer, but for the two links. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK_BYTES (256u << 10)
#define HUGE_CHUNK_BYTES (2u << 20)  /* one transparent huge page */
#define HUGE_AFTER_BYTES (16u << 20) /* a slab this large takes huge chunks */
#define BATCH 64u /* free rows a thread passes on at once */

/* A free row: its first 16 bytes link it (every row has at least 16). */
struct free_row {
    struct free_row *next;       /* in a thread's list, a batch, or the loose list */
    struct free_row *next_batch; /* the first row of a batch: in the slab's list of batches */
};
#define LINK_BYTES sizeof(struct free_row)

struct chunk {
    struct chunk *next;
    size_t nrows;
    size_t mapped;                     /* bytes mmap'ed for the chunk; 0: from malloc */
    _Alignas(64) unsigned char rows[]; /* rows of a multiple of 64 bytes stay line-aligned */
};

static bool use_huge_pages; /* row_slab_use_huge_pages */

void row_slab_use_huge_pages(bool on) { __atomic_store_n(&use_huge_pages, on, __ATOMIC_RELAXED); }

struct row_slab {
    uint32_t id;  /* index of every thread's cache of this slab */
    uint64_t gen; /* unique: a cache entry left by a destroyed slab of the same id differs */
    size_t block;
    pthread_mutex_t mu; /* the fields below */
    struct chunk *chunks;
    struct free_row *batches; /* full batches of BATCH rows, passed on by threads */
    struct free_row *loose;   /* single rows: from exiting threads, or freed without a cache */
    uint64_t bytes;
};

/* One thread's rows of one slab. */
struct slab_cache {
    uint64_t gen;              /* the slab's gen, or stale (then empty it first) */
    struct free_row *cur;      /* up to BATCH free rows */
    uint32_t ncur;
    struct free_row *spare;    /* NULL or a full batch */
    unsigned char *bump, *end; /* what is left of the thread's current chunk */
};

struct cache_array {
    uint32_t n;
    struct slab_cache e[];
};

/* Live slabs by id: an exiting thread hands its rows back to them. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct row_slab **reg;
static uint32_t reg_n;
static uint64_t reg_gen;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;
static __thread struct cache_array *tl;

static void push_loose(struct row_slab *s, struct free_row *r)
{
    UNPOISON(r, LINK_BYTES);
    r->next = s->loose;
    s->loose = r;
}

/* Thread exit: free rows go back to their slabs (lock order: reg_mu, then a
 * slab's mu); the rest of a chunk is lost until the slab is destroyed. */
static void cache_release(void *arg)
{
    struct cache_array *a = arg;
    pthread_mutex_lock(&reg_mu);
    for (uint32_t i = 0; i < a->n; i++) {
        struct slab_cache *c = &a->e[i];
        struct row_slab *s = i < reg_n ? reg[i] : NULL;
        if (!s || s->gen != c->gen) continue;
        pthread_mutex_lock(&s->mu);
        for (struct free_row *r = c->cur, *next; r; r = next) {
            next = r->next;
            push_loose(s, r);
        }
        if (c->spare) {
            c->spare->next_batch = s->batches;
            s->batches = c->spare;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&reg_mu);
    free(a);
    tl = NULL;
}

static void key_create(void) { (void)pthread_key_create(&cache_key, cache_release); }

/* The calling thread's cache of s, or NULL when out of memory. */
static struct slab_cache *cache_of(const struct row_slab *s)
{
    if (!tl || s->id >= tl->n) {
        uint32_t old = tl ? tl->n : 0, n = old ? old : 16;
        while (n <= s->id) n *= 2;
        struct cache_array *a = realloc(tl, sizeof *a + n * sizeof a->e[0]);
        if (!a) return NULL;
        memset(&a->e[old], 0, (n - old) * sizeof a->e[0]);
        a->n = n;
        tl = a;
        pthread_once(&key_once, key_create);
        /* Registers the array for cache_release at the thread's exit; were
         * that to fail, its free rows would only wait unused for the slab's end. */
        (void)pthread_setspecific(cache_key, a);
    }
    struct slab_cache *c = &tl->e[s->id];
    if (c->gen != s->gen) *c = (struct slab_cache){.gen = s->gen};
    return c;
}

/* A 2 MiB chunk aligned to 2 MiB and advised for a transparent huge page
 * (one TLB entry instead of 512), or NULL. */
static struct chunk *huge_chunk(void)
{
    size_t want = HUGE_CHUNK_BYTES, map = 2 * want;
    unsigned char *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    unsigned char *a = (unsigned char *)(((uintptr_t)p + want - 1) & ~(uintptr_t)(want - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    if (a + want < p + map) munmap(a + want, (size_t)(p + map - (a + want)));
    (void)madvise(a, want, MADV_HUGEPAGE); /* only a hint: without THP the pages are small */
    struct chunk *ch = (struct chunk *)a;
    ch->mapped = want;
    return ch;
}

static struct chunk *chunk_new(struct row_slab *s)
{
    size_t bytes = CHUNK_BYTES;
    struct chunk *ch = NULL;
    if (__atomic_load_n(&use_huge_pages, __ATOMIC_RELAXED) && s->bytes >= HUGE_AFTER_BYTES &&
        (ch = huge_chunk()))
        bytes = HUGE_CHUNK_BYTES;
    if (!ch) {
        if (!(ch = aligned_alloc(64, CHUNK_BYTES))) return NULL;
        ch->mapped = 0;
    }
    ch->nrows = (bytes - sizeof *ch) / s->block;
    POISON(ch->rows, ch->nrows * s->block);
    ch->next = s->chunks;
    s->chunks = ch;
    s->bytes += bytes;
    return ch;
}

/* A row from the slab's own lists or a new chunk (s->mu held); c, when not
 * NULL, takes a whole batch or the new chunk's other rows. */
static void *take_shared(struct row_slab *s, struct slab_cache *c)
{
    struct free_row *r;
    if ((r = s->loose)) {
        s->loose = r->next;
        return r;
    }
    if ((r = s->batches)) {
        s->batches = r->next_batch;
        if (c) {
            c->cur = r->next;
            c->ncur = BATCH - 1;
        } else {
            s->loose = r->next;
        }
        return r;
    }
    struct chunk *ch = chunk_new(s);
    if (!ch) return NULL;
    unsigned char *end = ch->rows + ch->nrows * s->block;
    if (c) {
        c->bump = ch->rows + s->block;
        c->end = end;
    } else {
        for (unsigned char *p = ch->rows + s->block; p < end; p += s->block)
            push_loose(s, (struct free_row *)p);
    }
    return ch->rows;
}

void *row_slab_alloc(struct row_slab *s)
{
    struct slab_cache *c = cache_of(s);
    void *p = NULL;
    if (c) {
        if (!c->cur && c->spare) {
            c->cur = c->spare;
            c->ncur = BATCH;
            c->spare = NULL;
        }
        if (c->cur) {
            p = c->cur;
            c->cur = c->cur->next;
            c->ncur--;
        } else if ((size_t)(c->end - c->bump) >= s->block) {
            p = c->bump;
            c->bump += s->block;
        }
    }
    if (!p) {
        pthread_mutex_lock(&s->mu);
        p = take_shared(s, c);
        pthread_mutex_unlock(&s->mu);
        if (!p) return NULL;
    }
    UNPOISON(p, s->block);
    memset(p, 0, s->block);
    return p;
}

void row_slab_free(struct row_slab *s, void *row)
{
    struct free_row *r = row;
    POISON((unsigned char *)row + LINK_BYTES, s->block - LINK_BYTES);
    struct slab_cache *c = cache_of(s);
    if (!c) {
        pthread_mutex_lock(&s->mu);
        push_loose(s, r);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (c->ncur == BATCH) { /* cur becomes the spare; a spare already there goes to the slab */
        if (c->spare) {
            pthread_mutex_lock(&s->mu);
            c->spare->next_batch = s->batches;
            s->batches = c->spare;
            pthread_mutex_unlock(&s->mu);
        }
        c->spare = c->cur;
        c->cur = NULL;
        c->ncur = 0;
    }
    r->next = c->cur;
    c->cur = r;
    c->ncur++;
}

struct row_slab *row_slab_new(size_t block)
{
    if (block < LINK_BYTES || block > ROW_SLAB_MAX_BLOCK || block % 8) return NULL;
    struct row_slab *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->block = block;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_lock(&reg_mu);
    uint32_t id = 0;
    while (id < reg_n && reg[id]) id++;
    if (id == reg_n) {
        struct row_slab **r = realloc(reg, (reg_n + 16) * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&reg_mu);
            pthread_mutex_destroy(&s->mu);
            free(s);
            return NULL;
        }
        memset(r + reg_n, 0, 16 * sizeof *r);
        reg = r;
        reg_n += 16;
    }
    s->id = id;
    s->gen = ++reg_gen;
    reg[id] = s;
    pthread_mutex_unlock(&reg_mu);
    return s;
}

void row_slab_destroy(struct row_slab *s)
{
    if (!s) return;
    pthread_mutex_lock(&reg_mu);
    reg[s->id] = NULL;
    pthread_mutex_unlock(&reg_mu);
    for (struct chunk *ch = s->chunks, *next; ch; ch = next) {
        next = ch->next;
        UNPOISON(ch->rows, ch->nrows * s->block);
        if (ch->mapped) munmap(ch, ch->mapped);
        else free(ch);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

uint64_t row_slab_bytes(const struct row_slab *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    uint64_t b = s->bytes;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return b;
}
