#include "log/recbuf.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1u << 20)

static unsigned char *reserve(struct logrec_list *l, size_t n)
{
    struct logrec_chunk *c = l->tail;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        if (!(c = malloc(sizeof *c + cap))) return NULL;
        c->next = NULL;
        c->used = 0;
        c->cap = cap;
        if (l->tail) l->tail->next = c;
        else l->head = c;
        l->tail = c;
    }
    unsigned char *p = c->data + c->used;
    c->used += n;
    l->count++;
    l->bytes += n;
    return p;
}

bool logrec_list_add(struct logrec_list *l, const struct log_record *rec, bool from_ckpt)
{
    size_t n = logrec_entry_size(rec->key_len, rec->tuple_len);
    struct logrec_entry *e = (struct logrec_entry *)reserve(l, n);
    if (!e) return false;
    e->size = (uint32_t)n;
    e->table_id = rec->table_id;
    e->ev = rec->epoch_version;
    e->tuple_len = rec->tuple_len;
    e->key_len = rec->key_len;
    e->kind = rec->kind;
    e->from_ckpt = from_ckpt;
    memcpy(e->data, rec->key, rec->key_len);
    if (rec->tuple_len) memcpy(e->data + rec->key_len, rec->tuple, rec->tuple_len);
    return true;
}

bool logrec_list_add_entry(struct logrec_list *l, const struct logrec_entry *src)
{
    unsigned char *p = reserve(l, src->size);
    if (!p) return false;
    memcpy(p, src, src->size);
    return true;
}

void logrec_list_free(struct logrec_list *l)
{
    for (struct logrec_chunk *c = l->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    memset(l, 0, sizeof *l);
}

const struct logrec_entry *logrec_first(const struct logrec_list *l, struct logrec_iter *it)
{
    it->c = l->head;
    it->off = 0;
    while (it->c && it->c->used == 0) it->c = it->c->next;
    return it->c ? (const struct logrec_entry *)it->c->data : NULL;
}

const struct logrec_entry *logrec_next(struct logrec_iter *it)
{
    if (!it->c) return NULL;
    it->off += ((const struct logrec_entry *)(it->c->data + it->off))->size;
    while (it->c && it->off >= it->c->used) {
        it->c = it->c->next;
        it->off = 0;
    }
    return it->c ? (const struct logrec_entry *)(it->c->data + it->off) : NULL;
}
