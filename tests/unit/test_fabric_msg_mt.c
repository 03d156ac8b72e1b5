/* Messages between fabric endpoints (src/dm/fabric.h, fab_send / fab_recv),
 * on shm and on tcp;ofi_rxm over loopback; also built with ThreadSanitizer
 * by make tsan.
 *
 * - exchange: two endpoints send each other messages of every length from
 *   1 byte to the maximum, each checked byte for byte; a burst of more
 *   messages than the receiver has buffers posted all arrives, in order;
 *   a message longer than the maximum is refused at the sender; a receive
 *   with nothing sent returns "none" after its timeout.
 * - rma_beside: an endpoint with messages still reads, writes and CASes a
 *   memory node's region (an endpoint without messages, in a child
 *   process), and its messages do not disturb the completions its
 *   one-sided ops count.
 * - rpc: a server thread answers requests of three client threads (each
 *   its own endpoint; a request names the endpoint its reply goes to) that
 *   keep one request in flight; every reply matches its request. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dm/fabric.h"
#include "helpers/testutil.h"

static const char *const providers[] = {"shm", "tcp;ofi_rxm"};
#define MSG_BYTES 128u

static struct fab *open_ep(const char *prov, uint32_t slots)
{
    pod_err e;
    struct fab *f = fab_open(&(struct fab_open_opts){.provider = prov, .msg_slots = slots,
                                                      .msg_bytes = MSG_BYTES, .staging = 65536},
                             &e);
    ck_assert_msg(f, "[%s] %s", prov, e.msg);
    return f;
}

/* b's address added to a's message peers: the index. */
static int link_to(struct fab *a, struct fab *b)
{
    unsigned char name[FAB_NAME_MAX];
    size_t len = sizeof name;
    pod_err e;
    ck_assert_msg(fab_name(b, name, &len, &e) == 0, "%s", e.msg);
    int p = fab_msg_peer_add(a, name, len, &e);
    ck_assert_msg(p >= 0, "%s", e.msg);
    return p;
}

static void fill(unsigned char *m, uint32_t len, uint32_t seed)
{
    for (uint32_t i = 0; i < len; i++) m[i] = (unsigned char)(seed * 31 + i * 7 + 1);
}

/* The next message on f, waited for up to 10 s. */
static uint32_t recv_one(struct fab *f, unsigned char *buf)
{
    pod_err e;
    uint32_t len = 0;
    int rc = fab_recv(f, buf, MSG_BYTES, &len, 10000, &e);
    ck_assert_msg(rc == 1, "[%s] receive: %s", fab_provider(f), rc < 0 ? e.msg : "nothing came");
    return len;
}

/* A first message each way, the receiver in a thread: a provider may need
 * both sides' progress to connect them (rxm's connection, shm's peer
 * mapping); after that a send completes without its receiver looking. */
struct echo {
    struct fab *f;
    int to;
    char err[600];
};

static void *echo_once(void *p)
{
    struct echo *a = p;
    unsigned char m[MSG_BYTES];
    uint32_t len;
    pod_err e;
    int rc = fab_recv(a->f, m, sizeof m, &len, 10000, &e);
    if (rc != 1 || fab_send(a->f, a->to, m, len, &e) != 0)
        snprintf(a->err, sizeof a->err, "echo: %s", rc == 0 ? "nothing came" : e.msg);
    return NULL;
}

static void handshake(struct fab *a, int ab, struct fab *b, int ba)
{
    struct echo ea = {.f = b, .to = ba};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, echo_once, &ea), 0);
    pod_err e;
    unsigned char m[8] = "hello", got[MSG_BYTES];
    int rc = fab_send(a, ab, m, sizeof m, &e);
    pthread_join(th, NULL);
    ck_assert_msg(rc == 0, "[%s] handshake: %s", fab_provider(a), e.msg);
    ck_assert_msg(!ea.err[0], "[%s] %s", fab_provider(a), ea.err);
    ck_assert_uint_eq(recv_one(a, got), sizeof m);
}

START_TEST(exchange)
{
    const char *prov = providers[_i];
    struct fab *a = open_ep(prov, 8), *b = open_ep(prov, 8);
    int ab = link_to(a, b), ba = link_to(b, a);
    ck_assert_uint_eq(fab_msg_max(a), MSG_BYTES);
    handshake(a, ab, b, ba);
    unsigned char m[MSG_BYTES], got[MSG_BYTES];
    pod_err e;
    for (uint32_t len = 1; len <= MSG_BYTES; len++) {
        fill(m, len, len);
        ck_assert_msg(fab_send(a, ab, m, len, &e) == 0, "[%s] send %u: %s", prov, len, e.msg);
        ck_assert_uint_eq(recv_one(b, got), len);
        ck_assert_msg(memcmp(m, got, len) == 0, "[%s] message of %u bytes changed", prov, len);
        ck_assert_msg(fab_send(b, ba, got, len, &e) == 0, "[%s] echo %u: %s", prov, len, e.msg);
        ck_assert_uint_eq(recv_one(a, got), len);
        ck_assert_msg(memcmp(m, got, len) == 0, "[%s] echo of %u bytes changed", prov, len);
    }
    /* 40 sent before any receive, 8 buffers posted: the rest wait at the
     * provider and come in order */
    for (uint32_t i = 0; i < 40; i++) {
        fill(m, 64, 1000 + i);
        ck_assert_msg(fab_send(a, ab, m, 64, &e) == 0, "[%s] burst %u: %s", prov, i, e.msg);
    }
    for (uint32_t i = 0; i < 40; i++) {
        fill(m, 64, 1000 + i);
        ck_assert_uint_eq(recv_one(b, got), 64);
        ck_assert_msg(memcmp(m, got, 64) == 0, "[%s] burst message %u out of order or changed",
                      prov, i);
    }
    /* too long: refused before anything is sent */
    unsigned char big[MSG_BYTES + 8] = {0};
    ck_assert_int_eq(fab_send(a, ab, big, sizeof big, &e), -1);
    ck_assert_msg(strstr(e.msg, "longer than"), "%s", e.msg);
    ck_assert_int_eq(fab_send(a, 7, m, 8, &e), -1); /* no such peer */
    uint32_t len;
    ck_assert_int_eq(fab_recv(b, got, sizeof got, &len, 50, &e), 0);
    ck_assert_int_eq(fab_recv(b, got, sizeof got, &len, 0, &e), 0);
    fab_close(a);
    fab_close(b);
}
END_TEST

/* The memory node: a child process (as in a pod: its pool is another
 * process's memory) that exposes a pool, sends its address and region down
 * the pipe, and makes progress until killed. */
struct mn_hello {
    size_t name_len;
    unsigned char name[FAB_NAME_MAX];
    struct fab_region r;
    char err[600];
};

static struct fab *child_mn; /* in the child */

static void memnode_setup(void *arg, void *reply)
{
    struct mn_hello *out = reply;
    pod_err e;
    static uint64_t pool[512] __attribute__((aligned(4096)));
    *out = (struct mn_hello){.name_len = FAB_NAME_MAX};
    child_mn = fab_open(&(struct fab_open_opts){.provider = arg, .server = true}, &e);
    if (!child_mn || fab_expose(child_mn, pool, sizeof pool, &out->r, &e) != 0 ||
        fab_name(child_mn, out->name, &out->name_len, &e) != 0)
        snprintf(out->err, sizeof out->err, "memory node: %s", e.msg);
}

static void memnode_serve(void *arg)
{
    (void)arg;
    pod_err e;
    if (!child_mn) _exit(1);
    (void)fab_progress(child_mn, 10, &e);
}

static pid_t memnode_child(const char *prov, struct mn_hello *h)
{
    int pid = tu_fork_server(memnode_setup, memnode_serve, (void *)prov, h, sizeof *h);
    ck_assert_msg(pid > 0, "[%s] the memory node child did not start", prov);
    ck_assert_msg(!h->err[0], "[%s] %s", prov, h->err);
    return pid;
}

START_TEST(rma_beside)
{
    const char *prov = providers[_i];
    pod_err e;
    struct mn_hello h;
    pid_t mn = memnode_child(prov, &h);
    struct fab *a = open_ep(prov, 4), *b = open_ep(prov, 4);
    int peer = fab_peer_add(a, h.name, h.name_len, &h.r, "test pool", &e);
    ck_assert_msg(peer >= 0, "[%s] %s", prov, e.msg);
    int ab = link_to(a, b), ba = link_to(b, a);
    handshake(a, ab, b, ba);
    unsigned char m[32], got[MSG_BYTES];
    for (uint64_t i = 0; i < 200; i++) {
        fill(m, sizeof m, (uint32_t)i);
        ck_assert_msg(fab_send(b, ba, m, sizeof m, &e) == 0, "%s", e.msg); /* waits on a */
        uint64_t old;
        ck_assert_msg(fab_cas(a, peer, 8 * (i % 64), i / 64, i / 64 + 1, &old, &e) == 0, "%s",
                      e.msg);
        ck_assert_uint_eq(old, i / 64);
        uint64_t w = i * 3, back = 0;
        ck_assert_msg(fab_write(a, peer, 1024 + 8 * (i % 64), &w, 8, &e) == 0 &&
                          fab_read(a, peer, 1024 + 8 * (i % 64), &back, 8, &e) == 0,
                      "%s", e.msg);
        ck_assert_uint_eq(back, w);
        ck_assert_uint_eq(recv_one(a, got), sizeof m);
        ck_assert(memcmp(m, got, sizeof m) == 0);
        ck_assert_msg(fab_send(a, ab, got, sizeof m, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(recv_one(b, got), sizeof m);
    }
    fab_close(a);
    fab_close(b);
    kill(mn, SIGKILL);
    waitpid(mn, NULL, 0);
    fab_shm_sweep();
}
END_TEST

/* ---- rpc: requests name their reply endpoint ---- */

#define NCLIENTS 3
#define CALLS 300

struct req {
    uint32_t client, seq, name_len, pad;
    uint64_t arg;
    unsigned char name[64]; /* the client's address: where the reply goes */
};
struct rep {
    uint32_t client, seq;
    uint64_t result;
};

struct server_arg {
    struct fab *f;
    int served;
    char err[600];
};

static void *server_main(void *p)
{
    struct server_arg *a = p;
    int peer_of[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) peer_of[i] = -1;
    pod_err e;
    while (a->served < NCLIENTS * CALLS) {
        struct req q;
        uint32_t len;
        int rc = fab_recv(a->f, &q, sizeof q, &len, 10000, &e);
        if (rc != 1 || len != sizeof q || q.client >= NCLIENTS) {
            snprintf(a->err, sizeof a->err, "server: %s", rc < 0 ? e.msg : "a bad request or none");
            return NULL;
        }
        if (peer_of[q.client] < 0 &&
            (peer_of[q.client] = fab_msg_peer_add(a->f, q.name, q.name_len, &e)) < 0) {
            snprintf(a->err, sizeof a->err, "server: %s", e.msg);
            return NULL;
        }
        struct rep r = {.client = q.client, .seq = q.seq, .result = q.arg * 2 + q.client};
        if (fab_send(a->f, peer_of[q.client], &r, sizeof r, &e) != 0) {
            snprintf(a->err, sizeof a->err, "server: %s", e.msg);
            return NULL;
        }
        a->served++;
    }
    return NULL;
}

struct client_arg {
    struct fab *f;
    int server;
    uint32_t id;
    char err[600];
};

static void *client_main(void *p)
{
    struct client_arg *a = p;
    pod_err e;
    struct req q = {.client = a->id};
    size_t nl = sizeof q.name;
    if (fab_name(a->f, q.name, &nl, &e) != 0) {
        snprintf(a->err, sizeof a->err, "%s", e.msg);
        return NULL;
    }
    q.name_len = (uint32_t)nl;
    for (uint32_t s = 0; s < CALLS; s++) {
        q.seq = s;
        q.arg = (uint64_t)s * 1000 + a->id;
        struct rep r;
        uint32_t len;
        int rc;
        if (fab_send(a->f, a->server, &q, sizeof q, &e) != 0 ||
            (rc = fab_recv(a->f, &r, sizeof r, &len, 10000, &e)) < 0) {
            snprintf(a->err, sizeof a->err, "client %u: %s", a->id, e.msg);
            return NULL;
        }
        if (rc == 0 || len != sizeof r || r.client != a->id || r.seq != s ||
            r.result != q.arg * 2 + a->id) {
            snprintf(a->err, sizeof a->err, "client %u call %u: %s", a->id, s,
                     rc == 0 ? "no reply in 10 s" : "a reply not to this call");
            return NULL;
        }
    }
    return NULL;
}

START_TEST(rpc)
{
    const char *prov = providers[_i];
    struct server_arg sa = {.f = open_ep(prov, 16)};
    struct client_arg ca[NCLIENTS];
    pthread_t st, ct[NCLIENTS];
    for (uint32_t i = 0; i < NCLIENTS; i++) {
        ca[i] = (struct client_arg){.f = open_ep(prov, 4), .id = i};
        ca[i].server = link_to(ca[i].f, sa.f);
    }
    ck_assert_int_eq(pthread_create(&st, NULL, server_main, &sa), 0);
    for (int i = 0; i < NCLIENTS; i++)
        ck_assert_int_eq(pthread_create(&ct[i], NULL, client_main, &ca[i]), 0);
    for (int i = 0; i < NCLIENTS; i++) pthread_join(ct[i], NULL);
    pthread_join(st, NULL);
    for (int i = 0; i < NCLIENTS; i++) {
        ck_assert_msg(!ca[i].err[0], "[%s] %s", prov, ca[i].err);
        fab_close(ca[i].f);
    }
    ck_assert_msg(!sa.err[0], "[%s] %s", prov, sa.err);
    ck_assert_int_eq(sa.served, NCLIENTS * CALLS);
    fab_close(sa.f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric_msg");
    TCase *tc = tu_tcase(s, "messages", 120);
    tcase_add_loop_test(tc, exchange, 0, 2);
    tcase_add_loop_test(tc, rma_beside, 0, 2);
    tcase_add_loop_test(tc, rpc, 0, 2);
    return tu_run(s);
}
