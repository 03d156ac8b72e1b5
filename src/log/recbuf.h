/* Recovery's record buffers: log records copied out of segments into chunked
 * lists, sorted by destination (a replay thread, or another host in pod mode).
 * An entry's layout is also what route.c ships through the region, so it is
 * made of fixed-width fields only. */
#ifndef PODDB_LOG_RECBUF_H
#define PODDB_LOG_RECBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/segment.h"

struct rec_entry {
    uint32_t size;       /* of the entry, 8-byte aligned */
    uint32_t table_id;
    uint64_t ev;
    uint32_t tuple_len;
    uint16_t key_len;
    uint8_t kind;        /* enum log_kind */
    uint8_t from_ckpt;   /* a checkpoint record (not filtered by the checkpoint epoch) */
    unsigned char data[]; /* key, then tuple */
};

struct rec_chunk {
    struct rec_chunk *next;
    size_t used, cap;
    _Alignas(8) unsigned char data[];
};

struct rec_list {
    struct rec_chunk *head, *tail;
    uint64_t count, bytes;
};

static inline size_t rec_entry_size(uint32_t key_len, uint32_t tuple_len)
{
    return (sizeof(struct rec_entry) + key_len + tuple_len + 7) & ~(size_t)7;
}

/* Append a copy of rec; false when out of memory. */
bool rec_list_add(struct rec_list *l, const struct log_record *rec, bool from_ckpt);
/* Append an entry as it is (from another list or the region). */
bool rec_list_add_entry(struct rec_list *l, const struct rec_entry *e);
void rec_list_free(struct rec_list *l);

/* Iterate: for (e = rec_first(l, &it); e; e = rec_next(&it)). */
struct rec_iter {
    struct rec_chunk *c;
    size_t off;
};
const struct rec_entry *rec_first(const struct rec_list *l, struct rec_iter *it);
const struct rec_entry *rec_next(struct rec_iter *it);

#endif
