/* Operation arrays for batches (op_buf.h). */
#include "txn/op_buf.h"

#include <stdlib.h>
#include <string.h>

struct rs_op *op_buf_next(struct op_buf *b, uint32_t *n)
{
    if (*n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 64;
        struct rs_op *o = realloc(b->ops, cap * sizeof *o);
        if (!o) return NULL;
        b->ops = o;
        b->cap = cap;
    }
    struct rs_op *o = &b->ops[(*n)++];
    memset(o, 0, sizeof *o);
    return o;
}

void op_buf_free(struct op_buf *b)
{
    free(b->ops);
    *b = (struct op_buf){0};
}
