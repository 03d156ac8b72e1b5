/* Locations to access indexes (access_map.h). */
#include "txn/access_map.h"

#include <stdlib.h>
#include <string.h>

static uint32_t home(const struct access_map *m, rs_loc loc)
{
    return (uint32_t)((loc * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

int64_t access_map_find(const struct access_map *m, rs_loc loc)
{
    if (!m->n) return -1;
    for (uint32_t h = home(m, loc);; h = (h + 1) & (m->cap - 1)) {
        if (!m->slot[h].loc) return -1;
        if (m->slot[h].loc == loc) return m->slot[h].idx;
    }
}

static void place(struct access_map *m, rs_loc loc, uint32_t idx)
{
    uint32_t h = home(m, loc);
    while (m->slot[h].loc) h = (h + 1) & (m->cap - 1);
    m->slot[h] = (struct access_map_slot){loc, idx};
}

bool access_map_put(struct access_map *m, rs_loc loc, uint32_t idx)
{
    if (2 * (m->n + 1) > m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 64;
        struct access_map_slot *s = calloc(cap, sizeof *s), *old = m->slot;
        if (!s) return false;
        uint32_t ocap = m->cap;
        m->slot = s;
        m->cap = cap;
        for (uint32_t i = 0; i < ocap; i++)
            if (old[i].loc) place(m, old[i].loc, old[i].idx);
        free(old);
    }
    place(m, loc, idx);
    m->n++;
    return true;
}

void access_map_drop(struct access_map *m, rs_loc loc)
{
    if (!m->n) return;
    for (uint32_t h = home(m, loc);; h = (h + 1) & (m->cap - 1)) {
        if (!m->slot[h].loc) return;
        if (m->slot[h].loc == loc) {
            m->slot[h].loc = 0;
            m->n--;
            return;
        }
    }
}

void access_map_clear(struct access_map *m)
{
    if (m->n) memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
}

void access_map_free(struct access_map *m)
{
    free(m->slot);
    *m = (struct access_map){0};
}
