/* Walked scans (walk_scan.h). */
#include "txn/walk_scan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct walked {
    const void *lo, *hi;
    uint32_t key_size;
    unsigned char *keys;
    size_t n, cap;
    bool nomem;
};

static bool collect(void *arg, const void *key, rs_loc loc)
{
    (void)loc;
    struct walked *w = arg;
    if ((w->lo && memcmp(key, w->lo, w->key_size) < 0) ||
        (w->hi && memcmp(key, w->hi, w->key_size) > 0))
        return true;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        unsigned char *k = realloc(w->keys, cap * w->key_size);
        if (!k) {
            w->nomem = true;
            return false;
        }
        w->keys = k;
        w->cap = cap;
    }
    memcpy(w->keys + w->n++ * w->key_size, key, w->key_size);
    return true;
}

static int key_cmp(const void *a, const void *b, void *key_size)
{
    return memcmp(a, b, *(const uint32_t *)key_size);
}

int walk_scan_keys(struct record_store *rs, uint32_t table, uint32_t key_size, const void *lo,
                   const void *hi, unsigned char **keys, size_t *n)
{
    struct walked w = {.lo = lo, .hi = hi, .key_size = key_size};
    if (rs->ops->walk(rs, table, collect, &w) != RS_OK || w.nomem) {
        free(w.keys);
        return RS_NOMEM;
    }
    if (w.n) qsort_r(w.keys, w.n, key_size, key_cmp, &w.key_size);
    *keys = w.keys;
    *n = w.n;
    return RS_OK;
}
