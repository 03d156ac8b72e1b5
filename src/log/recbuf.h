/* Recovery's record buffers: log records copied out of segments into chunked
 * lists, sorted by destination (a replay thread, or another host in pod mode).
 * An entry's layout is also what route.c ships through the region, so it is
 * made of fixed-width fields only. The prefix is logrec_: rec_ names the CXL
 * record of a tuple (cxl/record.h). */
#ifndef PODDB_LOG_RECBUF_H
#define PODDB_LOG_RECBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/segment.h"

struct logrec_entry {
    uint32_t size;       /* of the entry, 8-byte aligned */
    uint32_t table_id;
    uint64_t ev;
    uint32_t tuple_len;
    uint16_t key_len;
    uint8_t kind;        /* enum log_kind */
    uint8_t from_ckpt;   /* a checkpoint record (not filtered by the checkpoint epoch) */
    unsigned char data[]; /* key, then tuple */
};

struct logrec_chunk {
    struct logrec_chunk *next;
    size_t used, cap;
    _Alignas(8) unsigned char data[];
};

struct logrec_list {
    struct logrec_chunk *head, *tail;
    uint64_t count, bytes;
};

static inline size_t logrec_entry_size(uint32_t key_len, uint32_t tuple_len)
{
    return (sizeof(struct logrec_entry) + key_len + tuple_len + 7) & ~(size_t)7;
}

/* Append a copy of rec; false when out of memory. */
bool logrec_list_add(struct logrec_list *l, const struct log_record *rec, bool from_ckpt);
/* Append an entry as it is (from another list or the region). */
bool logrec_list_add_entry(struct logrec_list *l, const struct logrec_entry *e);
void logrec_list_free(struct logrec_list *l);

/* Iterate: for (e = logrec_first(l, &it); e; e = logrec_next(&it)). */
struct logrec_iter {
    struct logrec_chunk *c;
    size_t off;
};
const struct logrec_entry *logrec_first(const struct logrec_list *l, struct logrec_iter *it);
const struct logrec_entry *logrec_next(struct logrec_iter *it);

#endif
