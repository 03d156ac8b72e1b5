/* The keys of a range on a store without an ordered index: a walk of the
 * table's whole index (rs_ops.walk), the keys within [lo, hi] (NULL: open)
 * kept and sorted. What rs-2pl and ford scan on such a store, each then
 * finding every key as a point read. */
#ifndef PODDB_TXN_WALK_SCAN_H
#define PODDB_TXN_WALK_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "store/record_store.h"

/* RS_OK with *keys (n keys of key_size bytes, ascending; free() it), or
 * RS_NOMEM. */
int walk_scan_keys(struct record_store *rs, uint32_t table, uint32_t key_size, const void *lo,
                   const void *hi, unsigned char **keys, size_t *n);

#endif
