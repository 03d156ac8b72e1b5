/* Procedure results: rows of typed values. Byte values are copied into the
 * result's own storage, so a procedure may pass pointers into its stack. */
#include <stdlib.h>
#include <string.h>

#include "engine/result.h"

struct pod_result *pod_result_new(void)
{
    struct pod_result *r = calloc(1, sizeof *r);
    if (r) pod_result_clear(r);
    return r;
}

void pod_result_free(struct pod_result *r)
{
    if (!r) return;
    free(r->vals);
    free(r->row_start);
    free(r->bytes);
    free(r);
}

void pod_result_clear(pod_result *r)
{
    r->nvals = 0;
    r->nbytes = 0;
    r->nrows = 1;
    if (!r->row_start && !(r->row_start = malloc(16 * sizeof *r->row_start))) {
        r->nrows = 0;
        return;
    }
    if (!r->rows_cap) r->rows_cap = 16;
    r->row_start[0] = 0;
}

static int push(pod_result *r, pod_value v)
{
    if (r->nrows == 0) return POD_E_NOMEM;
    if (r->nvals == r->vals_cap) {
        uint32_t cap = r->vals_cap ? 2 * r->vals_cap : 16;
        pod_value *n = realloc(r->vals, cap * sizeof *n);
        if (!n) return POD_E_NOMEM;
        r->vals = n;
        r->vals_cap = cap;
    }
    r->vals[r->nvals++] = v;
    return POD_OK;
}

int pod_result_i64(pod_result *r, int64_t v) { return push(r, pod_v_i64(v)); }
int pod_result_f64(pod_result *r, double v) { return push(r, pod_v_f64(v)); }

int pod_result_bytes(pod_result *r, const void *p, uint32_t n)
{
    if (r->nbytes + n > r->bytes_cap) {
        size_t cap = r->bytes_cap ? r->bytes_cap : 256;
        while (cap < r->nbytes + n) cap *= 2;
        char *b = realloc(r->bytes, cap);
        if (!b) return POD_E_NOMEM;
        r->bytes = b;
        r->bytes_cap = cap;
    }
    if (n) memcpy(r->bytes + r->nbytes, p, n);
    /* Store the offset; pod_result_get turns it into a pointer, because the
     * storage may move while the result grows. */
    pod_value v = {POD_T_BYTES, n, {.i64 = (int64_t)r->nbytes}};
    r->nbytes += n;
    return push(r, v);
}

int pod_result_str(pod_result *r, const char *s) { return pod_result_bytes(r, s, (uint32_t)strlen(s)); }

int pod_result_row(pod_result *r)
{
    if (r->nrows == 0) return POD_E_NOMEM;
    if (r->nrows == r->rows_cap) {
        uint32_t cap = 2 * r->rows_cap;
        uint32_t *n = realloc(r->row_start, cap * sizeof *n);
        if (!n) return POD_E_NOMEM;
        r->row_start = n;
        r->rows_cap = cap;
    }
    r->row_start[r->nrows++] = r->nvals;
    return POD_OK;
}

int pod_result_nrows(const pod_result *r)
{
    /* A trailing empty row (started but not filled) does not count, and an
     * empty result has no rows. */
    int n = (int)r->nrows;
    while (n > 0 && r->row_start[n - 1] == r->nvals) n--;
    return n;
}

int pod_result_ncols(const pod_result *r, int row)
{
    if (row < 0 || row >= (int)r->nrows) return 0;
    uint32_t end = row + 1 < (int)r->nrows ? r->row_start[row + 1] : r->nvals;
    return (int)(end - r->row_start[row]);
}

int pod_result_get(const pod_result *r, int row, int col, pod_value *out)
{
    if (col < 0 || col >= pod_result_ncols(r, row)) return -1;
    *out = r->vals[r->row_start[row] + (uint32_t)col];
    if (out->type == POD_T_BYTES) out->u.bytes = r->bytes + out->u.i64;
    return 0;
}
