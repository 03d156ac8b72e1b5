/* The TCP listener's token (docs/security.md, "The TCP listener").
 *
 * A host with tcp_port reads its token from hosts[].tcp_token_file at
 * start, before it creates anything: the file must belong to the server's
 * user or root, must not be readable or writable by group or others, and
 * must hold 16..4096 bytes (a trailing newline is not part of the token).
 *
 * On a TCP connection the first call must be sys.auth with the token as its
 * one argument (bytes). Until one succeeds, any other call, a frame that
 * does not decode and a wrong token are answered with POD_E_AUTH and the
 * connection is closed; so is a first frame announced larger than a sys.auth
 * call can be. The comparison takes the same time wherever the tokens
 * differ. Unix-socket connections need no token (the socket's mode 0660 is
 * their guard): sys.auth there is refused with POD_E_INVALID and a message
 * saying so, and the connection goes on.
 *
 * The server's loop answers every sys.auth itself (it is state of the
 * connection, not a transaction); builtin_sys.c registers the name so that
 * sys.procs lists it. */
#ifndef PODDB_SERVER_TOKEN_H
#define PODDB_SERVER_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"
#include "net/proto.h" /* struct pod_call_frame; pod_db (poddb/proc.h) */
#include "util/err.h"

#define POD_TOKEN_MIN 16
#define POD_TOKEN_MAX 4096
#define POD_AUTH_PROC "sys.auth"

/* The server's side: its host's token, and the refusals it has seen. */
struct pod_auth {
    size_t len;                          /* 0: no TCP listener, no token */
    unsigned char token[POD_TOKEN_MAX];
    char path[POD_PATH_MAX];             /* where it came from, for messages */
    uint64_t refused, warned_ns;         /* refusals not yet logged, when we last logged */
};

/* A connection's state. */
enum pod_conn_auth {
    POD_CONN_UNIX = 0,       /* the Unix socket: no token needed */
    POD_CONN_TCP_WAITING,    /* TCP, sys.auth has not succeeded yet */
    POD_CONN_TCP_OK,         /* TCP, authenticated */
};

/* Read and check host's token file when it has a TCP listener (nothing
 * happens otherwise). 0, or -1 with err naming the file and what is wrong
 * with it. */
int pod_auth_load(struct pod_auth *a, const struct pod_config *c, int host, pod_err *err);

/* Forget the token (the memory is cleared); say how many refusals were not
 * logged yet. */
void pod_auth_forget(struct pod_auth *a);

/* What the server does with a frame. */
enum pod_auth_action {
    POD_AUTH_PASS,    /* handle it as usual */
    POD_AUTH_ANSWER,  /* send the reply (status, msg) and go on with the connection */
    POD_AUTH_CLOSE,   /* send the reply (status, msg), then close the connection */
};

/* The gate in front of every decoded frame: cf is the decoded call, or NULL
 * when the frame did not decode. Updates *state; on ANSWER and CLOSE sets
 * *status and msg (the reply). */
enum pod_auth_action pod_auth_gate(struct pod_auth *a, const pod_db *db, uint8_t *state,
                                   const struct pod_call_frame *cf, int *status, char *msg,
                                   size_t msglen);

/* Before a connection's first frame is complete: false when it is announced
 * larger than any sys.auth call (on a connection still waiting for its
 * token), so that the server does not buffer it. Then *status and msg are
 * the reply, and the connection is to be closed. */
bool pod_auth_frame_ok(struct pod_auth *a, uint8_t state, const unsigned char *buf, size_t len,
                       int *status, char *msg, size_t msglen);

#endif
