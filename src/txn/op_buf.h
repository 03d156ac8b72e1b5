/* A growing array of record-store operations: what a protocol fills for one
 * batch (record_store.h) and posts at once. */
#ifndef PODDB_TXN_OP_BUF_H
#define PODDB_TXN_OP_BUF_H

#include <stdint.h>

#include "store/record_store.h"

struct op_buf {
    struct rs_op *ops;
    uint32_t cap;
};

/* The next operation of a batch of *n (zeroed; *n counts it), or NULL when
 * memory ran out (*n unchanged). */
struct rs_op *op_buf_next(struct op_buf *b, uint32_t *n);
void op_buf_free(struct op_buf *b);

#endif
