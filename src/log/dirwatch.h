/* The log directory watched while the server runs (docs/durability.md,
 * "The log directory watched").
 *
 * A log directory removed or replaced under a running server (rm -rf, a
 * move, a new directory at the path) takes every record with it: an fsync of
 * a file whose directory was removed still succeeds, so the loggers would
 * go on acknowledging writes into files nobody will ever read. The watch
 * remembers the identity (st_dev, st_ino) of the directory the server
 * claimed and of its lock and identity files (log/claim.h), and compares it
 * with what the paths name now:
 *   - the loggers after each fdatasync, before they publish the durable
 *     epoch it covers: the directory and the segment just synced;
 *   - the epoch thread after each write of the durable-epoch file, before it
 *     persists the value: the directory and that file;
 *   - the epoch thread once a second: the directory, DIR/lock and
 *     DIR/identity.
 * Once anything is gone or replaced the directory is lost for the life of
 * the server: the flag is raised (also in the host's slot of the region,
 * where the other hosts and the next start see it), an error says what
 * happened and what to do, and nothing of this host becomes durable any
 * more. A check that cannot tell (a stat failing with EACCES, say) only
 * holds back this one publication. Thread-safe. */
#ifndef PODDB_LOG_DIRWATCH_H
#define PODDB_LOG_DIRWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "util/err.h"

struct logdir_watch;

/* Remember dir's identity, the file open as lock_fd (DIR/lock) and
 * DIR/identity. lost_word (may be NULL): set to 1 when the directory is
 * lost (the host's slot in the region). */
struct logdir_watch *logdir_watch_new(const char *dir, int lock_fd, uint32_t *lost_word,
                                      pod_err *err);
void logdir_watch_free(struct logdir_watch *w);

enum logdir_check { LOGDIR_INTACT = 1, LOGDIR_LOST = 0, LOGDIR_UNKNOWN = -1 };

/* The directory is the one claimed and DIR/name (when name is not NULL) is
 * the file whose fstat is st. LOGDIR_LOST makes the loss sticky and says so. */
enum logdir_check logdir_watch_file(struct logdir_watch *w, const char *name,
                                    const struct stat *st);
/* The directory, DIR/lock and DIR/identity are the ones claimed. */
enum logdir_check logdir_watch_check(struct logdir_watch *w);
/* The directory was lost (cheap: one atomic load). */
bool logdir_watch_lost(const struct logdir_watch *w);
/* What was found when it was lost ("" before). */
void logdir_watch_why(struct logdir_watch *w, char *buf, size_t len);
/* Say again that it was lost, at most every 10 s (the first message may be
 * far back in the server's log). */
void logdir_watch_remind(struct logdir_watch *w);

#endif
