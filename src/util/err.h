/* A caller-owned error message buffer. Functions that can fail take a
 * `pod_err *err` (may be NULL) and fill it with a complete, human sentence
 * naming what was wrong; they return 0 on success, -1 (or a negative code
 * documented at the function) on failure. */
#ifndef PODDB_UTIL_ERR_H
#define PODDB_UTIL_ERR_H

typedef struct pod_err {
    char msg[512];
} pod_err;

void pod_err_set(pod_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
