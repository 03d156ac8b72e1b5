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
/* The checkpoints recovery loads for host: the newest complete one and,
 * when it is a delta (it holds only what changed since the checkpoint before
 * it), those before it back to the nearest full one. Their indexes into
 * d->ckpts, oldest first, go to chain (room for d->nckpts), their count to
 * *n (0: no complete checkpoint), the newest one's header to *newest. -1 with
 * err when a header cannot be read or a delta does not follow the checkpoint
 * before it (one is missing). */
int logdir_ckpt_chain(const char *dir, const struct logdir *d, uint32_t host, int *chain, int *n,
                      struct seg_header *newest, pod_err *err);
/* Make dir ready to be claimed: refuse it or a directory above it when it
 * belongs to another user or others may write it (util/fsperm.h), create
 * it and its missing parents (0700), and make it 0700 when it is this
 * user's and more open. */
int logdir_prepare(const char *dir, pod_err *err);

#endif
