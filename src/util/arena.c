#include "util/arena.h"

#include <stdlib.h>

#define CHUNK_BYTES 65536

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    for (;;) {
        if (a->cur && a->cur->cap - a->cur->used >= n) {
            void *p = a->cur->data + a->cur->used;
            a->cur->used += n;
            return p;
        }
        if (a->cur && a->cur->next) { /* a chunk kept from an earlier attempt */
            a->cur = a->cur->next;
            a->cur->used = 0;
            continue;
        }
        size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        struct arena_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = NULL;
        c->used = 0;
        c->cap = cap;
        if (a->cur) a->cur->next = c;
        else a->chunks = c;
        a->cur = c;
    }
}

void arena_reset(struct arena *a)
{
    if (a->chunks) a->chunks->used = 0;
    a->cur = a->chunks;
}

void arena_free(struct arena *a)
{
    for (struct arena_chunk *c = a->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->chunks = a->cur = NULL;
}
