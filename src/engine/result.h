/* The engine's side of pod_result (the API is in poddb/proc.h). */
#ifndef PODDB_ENGINE_RESULT_H
#define PODDB_ENGINE_RESULT_H

#include <stdbool.h>
#include <stddef.h>

#include "poddb/proc.h"

struct pod_result {
    pod_value *vals;      /* byte values hold an offset into bytes until read */
    uint32_t nvals, vals_cap;
    uint32_t *row_start;  /* index in vals of each row's first value */
    uint32_t nrows, rows_cap;
    char *bytes;
    size_t nbytes, bytes_cap;
};

struct pod_result *pod_result_new(void);
void pod_result_free(struct pod_result *r);

#endif
