/* What a server checks before it creates or changes anything, and what it
 * takes back when its start fails after all (docs/security.md, "A refused
 * start").
 *
 * A start may be refused for its socket (a live server listens there, the
 * path is not a socket, its directory is missing or untrusted), its TCP
 * port, its log directory (untrusted, held by a live server, another pod's
 * or host's) or its region (cxl/region.h: foreign, a live pod of another
 * configuration, no room, a missing NUMA node). All of these are found
 * before the region file, the log directory or the socket exists, so a
 * refused server leaves the file system as it found it. What a failure
 * later in the start leaves (a region file or log directory this start
 * created) is removed again. */
#ifndef PODDB_SERVER_STARTCHECK_H
#define PODDB_SERVER_STARTCHECK_H

#include <stdbool.h>

#include "conf/config.h"
#include "util/err.h"

/* What a start will create, so that a failed one can take it back. */
struct pod_start_undo {
    bool log_dir_new;                /* the log directory did not exist */
    char log_dir_top[POD_PATH_MAX];  /* the topmost directory on its path that did not */
};

/* Every check of a start that needs nothing created: the socket, the TCP
 * port and the log directory of host `host` (its region is checked by
 * cxl_region_open). Warns when the log directory's file system is nearly
 * full. 0, or -1 with err. */
int pod_start_check(const struct pod_config *c, int host, struct pod_start_undo *u, pod_err *err);

/* A TCP socket bound to 127.0.0.1:port (SO_REUSEADDR), not listening yet;
 * flags: socket()'s type flags besides SOCK_STREAM | SOCK_CLOEXEC. The
 * descriptor, or -1 with err. Loopback only: the token crosses the
 * connection in clear (docs/security.md). */
int pod_tcp_bind_loopback(int port, int flags, pod_err *err);

/* What is at a socket path. */
enum pod_socket_state {
    POD_SOCKET_FREE,  /* nothing */
    POD_SOCKET_STALE, /* a socket nobody listens on (a dead server's): may be replaced */
};

/* The socket path's state, or -1 with err when a server listens there
 * (naming its pid), the path is something other than a socket, or whether a
 * server listens cannot be told. */
int pod_socket_probe(const char *path, pod_err *err);

/* After a failed start: remove the log directory when this start created it
 * (with the directories it created above it). `claimed`: the server held the
 * directory's claim, so every file in it is its own. */
void pod_start_undo_log_dir(const struct pod_start_undo *u, const char *dir, bool claimed);

/* After a failed start, once the region is closed: remove the region file
 * this start created, unless another host attached to it meanwhile. */
void pod_start_undo_region(const struct pod_config *c);

#endif
