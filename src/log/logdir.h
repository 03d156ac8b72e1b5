/* What a host's log directory holds: segments, checkpoints, the durable-epoch
 * file (docs/log-format.md names them). */
#ifndef PODDB_LOG_LOGDIR_H
#define PODDB_LOG_LOGDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "log/segment.h"
#include "util/err.h"

struct logdir_seg {
    char name[SEG_NAME_MAX];
    uint32_t host, logger;
    uint64_t seq;
};

struct logdir_ckpt {
    char name[SEG_NAME_MAX];
    uint32_t host;
    uint64_t seq;
    bool tmp;   /* not complete: ignored by recovery, removed */
};

struct logdir {
    struct logdir_seg *segs;   /* sorted by (logger, seq) */
    int nsegs;
    struct logdir_ckpt *ckpts; /* sorted by seq */
    int nckpts;
    bool has_durable_file;
};

/* List dir (which must exist). Files of other hosts' names are listed too
 * (the caller decides); unknown files are ignored. */
int logdir_scan(const char *dir, struct logdir *out, pod_err *err);
void logdir_free(struct logdir *d);
/* The newest complete checkpoint, or NULL. */
const struct logdir_ckpt *logdir_last_ckpt(const struct logdir *d);
/* Create dir and its missing parents (mode 0755). */
int logdir_mkdirs(const char *dir, pod_err *err);

#endif
