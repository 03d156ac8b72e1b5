/* Whose a path is, and who else may change it (docs/security.md).
 *
 * PodDB trusts a file or directory only when it belongs to the user the
 * process runs as (its effective uid) or to root, and no one else may write
 * it: not the group, not others. A directory that others may write but
 * that has the sticky bit (like /tmp) is fine above PodDB's own paths:
 * there others may add entries but not remove or rename ours. Every
 * directory above a path is checked too, since whoever may change one of
 * them can replace what lies below it.
 *
 * What PodDB creates is private: files 0600 and directories 0700, whatever
 * the umask. */
#ifndef PODDB_UTIL_FSPERM_H
#define PODDB_UTIL_FSPERM_H

#include <sys/stat.h>

#include "util/err.h"

/* 0 when st (of path, a `what` such as "region" or "log directory") may be
 * trusted; else -1 with err naming the path, its owner and its mode. */
int pod_check_trusted(const char *what, const char *path, const struct stat *st, pod_err *err);

/* Check every directory above path that exists, as the path is written (up
 * to "/", or to "." for a relative path), following symbolic links (a link
 * itself must belong to this user or root). */
int pod_check_parents(const char *what, const char *path, pod_err *err);

/* Check path itself the same way (it must exist). */
int pod_check_path(const char *what, const char *path, pod_err *err);

/* Create path with mode 0600 whatever the umask: open(path, flags |
 * O_CREAT, 0600), then fchmod (a umask can only take bits away, so the file
 * is never more open than 0600 meanwhile). The descriptor, or -1 with errno. */
int pod_create_private(const char *path, int flags);

/* mkdir(path) with mode 0700 whatever the umask. 0, or -1 with errno
 * (EEXIST when it exists: its mode is left alone). */
int pod_mkdir_private(const char *path);

#endif
