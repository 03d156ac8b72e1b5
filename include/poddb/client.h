/* PodDB client library: call stored procedures on a poddb-server.
 *
 *     pod_client *c = pod_client_connect("/tmp/poddb-default-0.sock", err, sizeof err);
 *     pod_value args[] = {pod_v_str("users"), pod_v_str("alice")};
 *     pod_reply *r = pod_client_call(c, "kv.get", args, 2);
 *     if (pod_reply_status(r) == POD_OK) ... pod_reply_value(r, 0, 0) ...
 *     pod_reply_free(r);
 *     pod_client_close(c);
 *
 * Pipelining: pod_client_send() queues calls and returns their request ids;
 * pod_client_flush() writes them; pod_client_recv() returns replies in the
 * order they arrive (match them with pod_reply_id). A client is used by one
 * thread at a time. Link with -lpoddb (build/lib/libpoddb.a or .so). */
#ifndef PODDB_CLIENT_H
#define PODDB_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h" /* pod_value, status codes */

#ifdef __cplusplus
extern "C" {
#endif

/* Call flags. */
/* Reply as soon as the transaction committed in memory, before its epoch is
 * durable: for comparisons only, an acknowledged call may be lost in a crash. */
#define POD_CALL_EARLY_REPLY 1u

typedef struct pod_client pod_client;
typedef struct pod_reply pod_reply;

/* address: a Unix socket path, or "tcp:HOST:PORT" (loopback). NULL and a
 * message in err on failure. A TCP listener answers nothing but sys.auth
 * until a call of it gave the host's token (docs/security.md): for a TCP
 * address the token is read from the file named by $POD_TOKEN_FILE, else
 * taken from $POD_TOKEN, and given at once (a refusal fails the connect);
 * with neither set, call pod_client_auth before anything else. */
pod_client *pod_client_connect(const char *address, char *err, size_t errlen);
/* Give a TCP connection the host's token (the contents of its
 * hosts[].tcp_token_file), len bytes. POD_OK, or a negative status with
 * pod_client_error saying why: POD_E_AUTH (a wrong token: the server closed
 * the connection), POD_E_INVALID (on a Unix socket, which needs no token),
 * POD_E_INTERNAL (a transport error). */
int pod_client_auth(pod_client *c, const void *token, size_t len);
/* The same with the token read from a file: its bytes without one trailing
 * newline, 16..4096 of them (POD_E_INVALID when the file cannot be read or
 * holds no such token). */
int pod_client_auth_file(pod_client *c, const char *path);
void pod_client_close(pod_client *c);
/* Give up on a reply after timeout_ms (0: wait forever, the default). */
void pod_client_set_timeout(pod_client *c, int timeout_ms);
/* The last transport or protocol error ("connection closed by server", ...). */
const char *pod_client_error(const pod_client *c);

/* Synchronous call: send, wait for the reply. NULL only on a transport error
 * (see pod_client_error); a failed procedure is a reply with a negative status. */
pod_reply *pod_client_call(pod_client *c, const char *proc, const pod_value *args, int nargs);
/* The same with flags (POD_CALL_EARLY_REPLY: do not wait for durability). */
pod_reply *pod_client_call_flags(pod_client *c, const char *proc, const pod_value *args,
                                 int nargs, unsigned flags);

/* Pipelining. send queues a call in the client's buffer and returns its
 * request id (0 on error); flush writes everything queued; recv waits for the
 * next reply (NULL on transport error or timeout). */
uint64_t pod_client_send(pod_client *c, const char *proc, const pod_value *args, int nargs,
                         unsigned flags);
int pod_client_flush(pod_client *c);
pod_reply *pod_client_recv(pod_client *c);
/* Calls sent whose replies have not been received yet. */
size_t pod_client_pending(const pod_client *c);

/* Replies. Values point into the reply and live until pod_reply_free. */
uint64_t pod_reply_id(const pod_reply *r);
int pod_reply_status(const pod_reply *r);
const char *pod_reply_message(const pod_reply *r); /* "" on success */
int pod_reply_nrows(const pod_reply *r);
int pod_reply_ncols(const pod_reply *r, int row);
/* NULL when (row, col) does not exist. */
const pod_value *pod_reply_value(const pod_reply *r, int row, int col);
void pod_reply_free(pod_reply *r);

#ifdef __cplusplus
}
#endif
#endif
