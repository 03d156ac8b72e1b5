/* A map from a record's location to the index of a transaction's access to
 * it: what a protocol searches once its access set is past a linear scan
 * (audits and scans touch thousands of records); lotus keys its lock set by
 * the locks' hashes the same way. Open addressing, kept at most half full. */
#ifndef PODDB_TXN_ACCESS_MAP_H
#define PODDB_TXN_ACCESS_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "store/record_store.h"

struct access_map {
    struct access_map_slot {
        rs_loc loc;   /* 0: empty */
        uint32_t idx;
    } *slot;
    uint32_t cap;     /* a power of two, or 0 */
    uint32_t n;
};

/* The index of loc's access, or -1. */
int64_t access_map_find(const struct access_map *m, rs_loc loc);
/* loc (not in the map) is access idx. False when memory ran out. */
bool access_map_put(struct access_map *m, rs_loc loc, uint32_t idx);
/* Take out loc, the access put last: no later put passed over its slot, so
 * emptying it breaks no probe sequence. */
void access_map_drop(struct access_map *m, rs_loc loc);
void access_map_clear(struct access_map *m);
void access_map_free(struct access_map *m);

#endif
