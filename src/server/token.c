/* The TCP listener's token; see token.h. */
#include "server/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/db.h"
#include "util/clock.h"
#include "util/fsperm.h"
#include "util/log.h"

#define WHAT "TCP token file"
/* Refusals are logged at most this often (a local process may try many). */
#define WARN_EVERY_NS (10ull * 1000000000ull)

/* The largest frame a sys.auth call can be: the header, the name (or the
 * 4-byte id, which is shorter), the argument count and one bytes value. */
#define AUTH_FRAME_MAX \
    (POD_PROTO_HEADER + 2 + sizeof POD_AUTH_PROC - 1 + 2 + 1 + 4 + POD_TOKEN_MAX)

/* Whose the file and its directories are, and who else may read it. */
static int check_file(const char *path, int host, const struct stat *st, pod_err *err)
{
    if (!S_ISREG(st->st_mode)) {
        pod_err_set(err, WHAT " %s (hosts[%d].tcp_token_file) is not a regular file", path, host);
        return -1;
    }
    if (pod_check_trusted(WHAT, path, st, err)) return -1;
    if (st->st_mode & (S_IRGRP | S_IROTH)) {
        pod_err_set(err, WHAT " %s (hosts[%d].tcp_token_file) has mode %04o: it is readable by "
                    "group or others, and whoever can read it can call this host over TCP; "
                    "refusing it (chmod 600 %s)", path, host, (unsigned)(st->st_mode & 07777),
                    path);
        return -1;
    }
    return 0;
}

/* The token is the file's bytes without one trailing newline ("\n" or "\r\n"). */
static int read_token(struct pod_auth *a, int fd, const char *path, int host, pod_err *err)
{
    unsigned char buf[POD_TOKEN_MAX + 3];
    size_t n = 0;
    while (n < sizeof buf) {
        ssize_t r = read(fd, buf + n, sizeof buf - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            pod_err_set(err, "cannot read " WHAT " %s (hosts[%d].tcp_token_file): %s", path, host,
                        strerror(errno));
            explicit_bzero(buf, sizeof buf);
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    size_t len = n;
    if (len && buf[len - 1] == '\n') len--;
    if (len && n > len && buf[len - 1] == '\r') len--;
    if (len < POD_TOKEN_MIN || len > POD_TOKEN_MAX) {
        if (n == sizeof buf)
            pod_err_set(err, WHAT " %s (hosts[%d].tcp_token_file) holds more than %d bytes "
                        "(expected a token of %d..%d bytes; a trailing newline is not counted)",
                        path, host, POD_TOKEN_MAX, POD_TOKEN_MIN, POD_TOKEN_MAX);
        else
            pod_err_set(err, WHAT " %s (hosts[%d].tcp_token_file) holds a token of %zu bytes "
                        "(expected %d..%d bytes; a trailing newline is not counted; make one: "
                        "umask 077; head -c 32 /dev/urandom | base64 > %s)",
                        path, host, len, POD_TOKEN_MIN, POD_TOKEN_MAX, path);
        explicit_bzero(buf, sizeof buf);
        return -1;
    }
    memcpy(a->token, buf, len);
    a->len = len;
    explicit_bzero(buf, sizeof buf);
    return 0;
}

int pod_auth_load(struct pod_auth *a, const struct pod_config *c, int host, pod_err *err)
{
    const struct pod_host_conf *hc = &c->hosts[host];
    pod_auth_forget(a);
    if (!hc->tcp_port) return 0;
    const char *path = hc->tcp_token_file;
    if (!*path) { /* the config loader requires one; a config built otherwise may lack it */
        pod_err_set(err, "hosts[%d] has tcp_port %d but no tcp_token_file: the TCP listener "
                    "needs a token", host, hc->tcp_port);
        return -1;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) {
        pod_err_set(err, WHAT " %s (hosts[%d].tcp_token_file) does not exist: the listener on "
                    "127.0.0.1:%d answers only calls that give its token (make one: umask 077; "
                    "head -c 32 /dev/urandom | base64 > %s)", path, host, hc->tcp_port, path);
        return -1;
    }
    /* Whoever may replace the file, or a directory above it, chooses the token. */
    if (pod_check_parents(WHAT, path, err) || pod_check_path(WHAT, path, err)) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        pod_err_set(err, "cannot open " WHAT " %s (hosts[%d].tcp_token_file): %s", path, host,
                    strerror(errno));
        return -1;
    }
    /* What is checked is what is read: the open file, not the path again. */
    int rc = -1;
    if (fstat(fd, &st) != 0)
        pod_err_set(err, "cannot stat " WHAT " %s: %s", path, strerror(errno));
    else if (check_file(path, host, &st, err) == 0)
        rc = read_token(a, fd, path, host, err);
    close(fd);
    return rc;
}

void pod_auth_forget(struct pod_auth *a)
{
    if (a->refused)
        pod_warn("tcp: refused %llu more connection(s) since the last warning",
                 (unsigned long long)a->refused);
    a->refused = 0;
    explicit_bzero(a->token, sizeof a->token);
    a->len = 0;
}

/* Equal to the token, in a time that depends only on the token's length. */
static bool same_token(const struct pod_auth *a, const unsigned char *p, size_t len)
{
    volatile unsigned char d = len != a->len;
    for (size_t i = 0; i < a->len; i++) d |= a->token[i] ^ (i < len ? p[i] : 0);
    return a->len > 0 && d == 0;
}

static bool is_auth_call(const pod_db *db, const struct pod_call_frame *cf)
{
    if (cf->name)
        return cf->name_len == sizeof POD_AUTH_PROC - 1 &&
               memcmp(cf->name, POD_AUTH_PROC, sizeof POD_AUTH_PROC - 1) == 0;
    return cf->proc_id < db->nprocs && strcmp(db->procs[cf->proc_id].name, POD_AUTH_PROC) == 0;
}

/* A refusal, logged at most every WARN_EVERY_NS with how many there were. */
static void refused(struct pod_auth *a, const char *why)
{
    a->refused++;
    uint64_t now = pod_real_ns();
    if (a->warned_ns && now - a->warned_ns < WARN_EVERY_NS) return;
    pod_warn("tcp: refused %llu connection(s) (the last: %s); the token is in %s",
             (unsigned long long)a->refused, why, a->path);
    a->refused = 0;
    a->warned_ns = now;
}

#define NOT_AUTHENTICATED                                                                  \
    "the first call on a TCP connection must be " POD_AUTH_PROC " with the host's token " \
    "(hosts[].tcp_token_file; poddb-cli --token-file FILE, or $POD_TOKEN_FILE for the "   \
    "client library); closing the connection"

enum pod_auth_action pod_auth_gate(struct pod_auth *a, const pod_db *db, uint8_t *state,
                                   const struct pod_call_frame *cf, int *status, char *msg,
                                   size_t msglen)
{
    bool auth = cf && is_auth_call(db, cf);
    if (*state == POD_CONN_UNIX) {
        if (!auth) return POD_AUTH_PASS;
        *status = POD_E_INVALID;
        snprintf(msg, msglen, POD_AUTH_PROC " is for TCP connections: a connection on the Unix "
                 "socket needs no token (the socket's mode 0660 admits only the server's user "
                 "and group)");
        return POD_AUTH_ANSWER;
    }
    if (!auth) {
        if (*state == POD_CONN_TCP_OK) return POD_AUTH_PASS;
        refused(a, cf ? "a call before " POD_AUTH_PROC : "a frame that does not decode");
        *status = POD_E_AUTH;
        snprintf(msg, msglen, "%s", NOT_AUTHENTICATED);
        return POD_AUTH_CLOSE;
    }
    *status = POD_E_AUTH;
    if (cf->nargs != 1 || cf->args[0].type != POD_T_BYTES) {
        refused(a, POD_AUTH_PROC " without the token");
        snprintf(msg, msglen, POD_AUTH_PROC " takes one argument, the token (bytes); closing the "
                 "connection");
        return POD_AUTH_CLOSE;
    }
    if (!same_token(a, cf->args[0].u.bytes, cf->args[0].len)) {
        refused(a, "a wrong token");
        snprintf(msg, msglen, "wrong token (the server's is in its hosts[].tcp_token_file); "
                 "closing the connection");
        return POD_AUTH_CLOSE;
    }
    *state = POD_CONN_TCP_OK;
    *status = POD_OK;
    msg[0] = '\0';
    return POD_AUTH_ANSWER;
}

bool pod_auth_frame_ok(struct pod_auth *a, uint8_t state, const unsigned char *buf, size_t len,
                       int *status, char *msg, size_t msglen)
{
    if (state != POD_CONN_TCP_WAITING || len < 4) return true;
    uint64_t total = 4 + ((uint64_t)buf[0] | (uint64_t)buf[1] << 8 | (uint64_t)buf[2] << 16 |
                          (uint64_t)buf[3] << 24);
    if (total <= AUTH_FRAME_MAX) return true;
    refused(a, "a first frame too large for " POD_AUTH_PROC);
    *status = POD_E_AUTH;
    snprintf(msg, msglen, "%s (the first frame announces %llu bytes, more than a call of "
             POD_AUTH_PROC " can be)", NOT_AUTHENTICATED, (unsigned long long)total);
    return false;
}
