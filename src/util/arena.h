/* Memory for the life of one transaction attempt: chunks kept from one
 * attempt to the next (arena_reset), so that a worker stops calling malloc
 * once its chunks fit its transactions. Pointers stay valid until the reset. */
#ifndef PODDB_UTIL_ARENA_H
#define PODDB_UTIL_ARENA_H

#include <stddef.h>

struct arena_chunk;
struct arena {
    struct arena_chunk *chunks, *cur;
};

/* n bytes, 16-byte aligned; NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t n);
/* Everything allocated goes; the chunks stay. */
void arena_reset(struct arena *a);
void arena_free(struct arena *a);

#endif
