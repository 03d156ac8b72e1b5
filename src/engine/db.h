/* The database of one host: creating and freeing it, its procedures and
 * statistics. The types (struct pod_db, its options, workers and hooks) are
 * in db/types.h, which the layers below the engine include. */
#ifndef PODDB_ENGINE_DB_H
#define PODDB_ENGINE_DB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "db/types.h"

const char *pod_abort_cause_name(enum pod_abort_cause c);
/* "read_lock 3, remote_busy 11350": the causes counted in by_cause
 * (POD_CAUSE_COUNT entries), or "none". */
void pod_causes_text(const uint32_t *by_cause, char *out, size_t len);

pod_db *pod_db_new(const struct pod_db_options *o, char *err, size_t errlen);
/* No worker may be running. */
void pod_db_free(pod_db *db);

int pod_proc_find(const pod_db *db, const char *name);
/* Sum of the statistics of every worker (and the admin worker) for one procedure. */
void pod_db_proc_stats(const pod_db *db, int proc, struct pod_proc_stats *out);

/* Print one line per procedure that ran: commits, user aborts, errors,
 * conflicts (retried attempts) by cause, calls that gave up. */
void pod_db_print_stats(const pod_db *db, FILE *out);

#endif
