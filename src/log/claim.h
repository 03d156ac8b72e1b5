/* A server's claim on its log directory (docs/durability.md, "Whose log
 * directory"): nothing else may write it while the server lives, and no
 * other pod or host may replay it afterwards.
 *
 *   DIR/lock      an exclusive flock held for the life of the claim (the
 *                 holder's pid is written in it, for the refusal message)
 *   DIR/identity  written once, by the first server that logs there: the
 *                 pod's region path and the host id, and for people the
 *                 machine and the time. A server of another pod (another
 *                 region path) or of another host id is refused.
 * A directory that has no identity file (made by an earlier build, or new)
 * gets one. */
#ifndef PODDB_LOG_CLAIM_H
#define PODDB_LOG_CLAIM_H

#include <stddef.h>

#include "util/err.h"

#define LOGDIR_LOCK_NAME "lock"
#define LOGDIR_IDENTITY_NAME "identity"

struct logdir_claim;

/* Lock dir (which must exist) and check or write its identity for host
 * `host` of the pod whose region is `region`. NULL with err when another
 * process holds the lock (naming its pid when known), or the directory
 * belongs to another pod or host. */
struct logdir_claim *logdir_claim(const char *dir, const char *region, int host, pod_err *err);
/* Release the lock (NULL is fine). */
void logdir_release(struct logdir_claim *c);
/* Whether this host of the pod of `region` may use dir, found without
 * creating or changing anything (a server checks before it creates its
 * region): 0 when dir does not exist yet, or when it is trusted
 * (util/fsperm.h: dir and every directory above it), a directory, not held
 * by a live server, and its identity is missing or names this host of this
 * pod; else -1 with err, as logdir_prepare and logdir_claim would refuse it. */
int logdir_check(const char *dir, const char *region, int host, pod_err *err);
/* The descriptor of DIR/lock (log/dirwatch.h remembers which file it is). */
int logdir_claim_lock_fd(const struct logdir_claim *c);
/* Read DIR/identity without claiming the directory (another host's, at
 * start: log/emptylog.h): 1 with region (room for len bytes) and *host
 * filled, 0 when there is no such file, -1 with err when it cannot be read
 * or is damaged. */
int logdir_identity_read(const char *dir, char *region, size_t len, int *host, pod_err *err);

#endif
