/* What every record store shares (record_store.h). */
#include "store/record_store.h"

void rs_batch_in_order(struct record_store *s, struct rs_op *ops, uint32_t n)
{
    const struct rs_ops *o = s->ops;
    for (uint32_t i = 0; i < n; i++) {
        struct rs_op *op = &ops[i];
        switch (op->kind) {
        case RS_OP_READ:
            if (op->word) *op->word = o->word_read(s, op->loc);
            o->row_read(s, op->loc, op->head, op->buf, op->off, op->len);
            break;
        case RS_OP_WRITE:
            if (op->word) {
                uint64_t cur = o->word_read(s, op->loc);
                while (!o->word_cas(s, op->loc, &cur, *op->word)) {}
                break;
            }
            o->row_write(s, op->loc, op->head, op->buf, op->off, op->len);
            break;
        case RS_OP_CAS:
            op->old = op->expected;
            op->ok = o->word_cas(s, op->loc, &op->old, op->desired);
            break;
        case RS_OP_FAA: op->old = o->word_faa(s, op->loc, op->add); break;
        case RS_OP_SYNC: break; /* loads and stores: placed when done */
        }
    }
}
