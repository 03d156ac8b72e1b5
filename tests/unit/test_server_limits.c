/* What clients may make a poddb-server hold (docs/configuration.md,
 * "server"), with real server processes ($PODDB_BIN/poddb-server):
 *   slow_reader_cut_off: a client pipelines 300 scans of 4 MiB each and
 *     reads nothing. The server cuts it off once it holds more than
 *     server.max_conn_buffered for it: the client finds an error frame
 *     (request id 0, POD_E_LIMIT) naming that limit, then the end of the
 *     stream. Meanwhile another client's calls, 4 MiB scans among them
 *     (read as they come), are all answered, and it is not cut off. Once the
 *     slow client is gone, the server holds nothing for clients
 *     (sys.stats server.buffered) and its RSS falls back near where it was
 *     before.
 *   stalled_frames_cut_by_total: twelve clients each send 15 MiB of a
 *     16 MiB frame and stall (each below its own limit). The server, over
 *     server.max_buffered, cuts off the ones holding the most, each with an
 *     error frame naming that limit, until it is under its limit again;
 *     the others stay connected, another client is served throughout, and
 *     the RSS falls back once they all went.
 *   accounting_returns_to_zero: after pipelined calls of every kind, closed
 *     connections and a client that closes with replies unread, the server
 *     holds nothing for clients.
 * Every wait is bounded generously (a loaded 2-core machine, sanitizer
 * builds): what is asserted is progress and outcome, not speed. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>

#include "helpers/server_harness.h"

#define CALL_TIMEOUT_MS 30000
#define START_TIMEOUT_MS 60000
#define NROWS 64     /* rows of table big: a full scan answers 4 MiB */
#define ROW 65536
#define SLOW_CALLS 300
#define NSTALL 12
#define STALL_BYTES (15u << 20)
/* The RSS after the offenders went may exceed the RSS before by this much
 * (allocator caches, the workers' result buffers, fragmentation); what the
 * offenders made it hold was hundreds of MiB without the limits. */
#define RSS_SLACK_KIB (48 * 1024)

static void start_server(struct sh_server *s, const char *server_section)
{
    ck_assert_int_eq(sh_prepare(s, 2, 0, NULL), 0);
    FILE *f = fopen(s->conf, "a");
    ck_assert_ptr_nonnull(f);
    fputs(server_section, f);
    ck_assert_int_eq(fclose(f), 0);
    if (sh_start(s, START_TIMEOUT_MS) != 0) {
        sh_dump_log(s, "start failed");
        ck_abort_msg("the server did not start (wait status %d)", s->status);
    }
}

static void stop_server(struct sh_server *s)
{
    int st = sh_stop(s, SIGTERM, 30000);
    const char *san = sh_sanitizer_error(s);
    if (st != 0 || san) sh_dump_log(s, "shutdown");
    ck_assert_msg(st == 0, "the server did not stop cleanly (status %#x)", st);
    ck_assert_msg(!san, "the server's log has a sanitizer report (%s)", san);
    sh_remove_region(s);
}

static pod_client *conn(const struct sh_server *s)
{
    char err[256];
    pod_client *c = pod_client_connect(s->sock, err, sizeof err);
    ck_assert_msg(c != NULL, "connect: %s", err);
    pod_client_set_timeout(c, CALL_TIMEOUT_MS);
    return c;
}

static pod_reply *call(const struct sh_server *s, pod_client *c, const char *proc,
                       const pod_value *a, int n)
{
    pod_reply *r = pod_client_call(c, proc, a, n);
    if (!r) sh_dump_log(s, "a call failed");
    ck_assert_msg(r != NULL, "%s: %s", proc, pod_client_error(c));
    return r;
}

/* sys.stats' row [name, value] (the test fails when there is none). */
static int64_t stat_of(const struct sh_server *s, pod_client *c, const char *name)
{
    pod_reply *r = call(s, c, "sys.stats", NULL, 0);
    int64_t v = 0;
    bool found = false;
    for (int i = 1; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *val = pod_reply_value(r, i, 1);
        if (pod_reply_ncols(r, i) == 2 && k && k->type == POD_T_BYTES &&
            k->len == strlen(name) && memcmp(k->u.bytes, name, k->len) == 0 && val &&
            val->type == POD_T_I64) {
            v = val->u.i64;
            found = true;
        }
    }
    pod_reply_free(r);
    ck_assert_msg(found, "sys.stats has no row %s", name);
    return v;
}

static void big_key(int i, unsigned char *k)
{
    memset(k, 0, 8);
    k[0] = (unsigned char)(i * 4); /* spans both partitions of big */
    k[7] = (unsigned char)i;
}

static void load_big(const struct sh_server *s, pod_client *c)
{
    unsigned char *v = malloc(ROW);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < NROWS; i++) {
        unsigned char k[8];
        big_key(i, k);
        memset(v, 'a' + i % 26, ROW);
        pod_value a[] = {pod_v_str("big"), pod_v_bytes(k, 8), pod_v_bytes(v, ROW)};
        pod_reply *r = call(s, c, "kv.put", a, 3);
        ck_assert_int_eq(pod_reply_status(r), POD_OK);
        pod_reply_free(r);
    }
    free(v);
}

static pod_value null_v(void) { return (pod_value){.type = POD_T_NULL}; }

/* A full scan of big, read as it comes: every row. */
static void scan_big(const struct sh_server *s, pod_client *c)
{
    pod_value a[] = {pod_v_str("big"), null_v(), null_v()};
    pod_reply *r = call(s, c, "kv.scan", a, 3);
    ck_assert_msg(pod_reply_status(r) == POD_OK, "kv.scan: %s", pod_reply_message(r));
    ck_assert_int_eq(pod_reply_nrows(r), NROWS);
    pod_reply_free(r);
}

/* A put and a get of a small key, each answered within the call timeout;
 * returns the slower one's milliseconds. */
static uint64_t small_calls(const struct sh_server *s, pod_client *c, int i)
{
    char k[32], v[32];
    snprintf(k, sizeof k, "other-%d", i);
    snprintf(v, sizeof v, "v%d", i);
    uint64_t t0 = sh_now_ms();
    pod_value p[] = {pod_v_str("kv"), pod_v_str(k), pod_v_str(v)};
    pod_reply *r = call(s, c, "kv.put", p, 3);
    ck_assert_int_eq(pod_reply_status(r), POD_OK);
    pod_reply_free(r);
    uint64_t t1 = sh_now_ms();
    pod_value g[] = {pod_v_str("kv"), pod_v_str(k)};
    r = call(s, c, "kv.get", g, 2);
    ck_assert_int_eq(pod_reply_status(r), POD_OK);
    const pod_value *got = pod_reply_value(r, 0, 0);
    ck_assert(got && got->len == strlen(v) && memcmp(got->u.bytes, v, got->len) == 0);
    pod_reply_free(r);
    uint64_t t2 = sh_now_ms();
    return t1 - t0 > t2 - t1 ? t1 - t0 : t2 - t1;
}

/* What the server holds for its clients once they are gone: the copy of the
 * sys.stats call that asks (sizeof(struct request) and the frame). */
#define OWN_CALL 256

/* Wait (bounded) until the server holds at most `at_most` bytes for its
 * clients; returns what it holds then. */
static int64_t wait_buffered(const struct sh_server *s, pod_client *c, int64_t at_most,
                             int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    int64_t b;
    while ((b = stat_of(s, c, "server.buffered")) > at_most && sh_now_ms() < end) sh_sleep_ms(50);
    return b;
}

/* Wait (bounded) until the server's RSS is at most `kib`; returns the last
 * reading. */
static long wait_rss(const struct sh_server *s, long kib, int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    long rss;
    while ((rss = sh_rss_kib(s->pid)) > kib && sh_now_ms() < end) sh_sleep_ms(100);
    return rss;
}

/* The server's peak RSS, sampled every few milliseconds by a thread while
 * an offender runs (for the figures the tests print). */
struct rss_sampler {
    pthread_t th;
    pid_t pid;
    int stop;
    long max_kib;
};

static void *sample_rss(void *arg)
{
    struct rss_sampler *rs = arg;
    while (!__atomic_load_n(&rs->stop, __ATOMIC_ACQUIRE)) {
        long kib = sh_rss_kib(rs->pid);
        if (kib > __atomic_load_n(&rs->max_kib, __ATOMIC_RELAXED))
            __atomic_store_n(&rs->max_kib, kib, __ATOMIC_RELAXED);
        sh_sleep_ms(5);
    }
    return NULL;
}

static void sampler_start(struct rss_sampler *rs, pid_t pid)
{
    memset(rs, 0, sizeof *rs);
    rs->pid = pid;
    rs->max_kib = sh_rss_kib(pid);
    ck_assert_int_eq(pthread_create(&rs->th, NULL, sample_rss, rs), 0);
}

static long sampler_stop(struct rss_sampler *rs)
{
    __atomic_store_n(&rs->stop, 1, __ATOMIC_RELEASE);
    pthread_join(rs->th, NULL);
    return rs->max_kib;
}

static bool msg_has(const struct pod_reply_frame *r, const char *needle)
{
    char m[1024];
    size_t n = r->msg_len < sizeof m - 1 ? r->msg_len : sizeof m - 1;
    memcpy(m, r->msg, n);
    m[n] = '\0';
    return strstr(m, needle) != NULL;
}

/* Read the raw connection fd until the server's error frame (request id 0)
 * and the end of the stream; the error must be POD_E_LIMIT naming `limit`.
 * Returns how many replies to calls came before it. */
static int expect_cut_off(int fd, const char *limit, const char *who)
{
    struct pod_buf in = {0}, frame = {0};
    struct pod_reply_frame rep;
    int replies = 0;
    bool cut = false;
    for (;;) {
        int rc = sh_raw_recv_frame(fd, &in, &frame, CALL_TIMEOUT_MS);
        ck_assert_msg(rc == SH_FRAME, "%s: %d replies, then no error frame (%d)", who, replies,
                      rc);
        char err[256];
        ck_assert_msg(pod_proto_decode_reply(frame.p, frame.len, &rep, err, sizeof err) == 0,
                      "%s: a malformed frame after %d replies: %s", who, replies, err);
        if (rep.request_id != 0) {
            replies++;
            continue;
        }
        ck_assert_msg(rep.status == POD_E_LIMIT, "%s: error status %d", who, rep.status);
        ck_assert_msg(msg_has(&rep, limit), "%s: the error does not name %s: %.*s", who, limit,
                      (int)rep.msg_len, rep.msg);
        fprintf(stderr, "%s: after %d replies: %.*s\n", who, replies, (int)rep.msg_len, rep.msg);
        cut = true;
        break;
    }
    ck_assert(cut);
    int rc = sh_raw_recv_frame(fd, &in, &frame, CALL_TIMEOUT_MS);
    ck_assert_msg(rc == SH_EOF || rc == SH_ERROR, "%s: the connection stayed open (%d)", who, rc);
    pod_buf_free(&in);
    pod_buf_free(&frame);
    return replies;
}

/* ---- a slow reader ------------------------------------------------------------ */

START_TEST(slow_reader_cut_off)
{
    struct sh_server s;
    start_server(&s, "server:\n  max_conn_buffered: 32MiB\n");
    pod_client *fast = conn(&s);
    load_big(&s, fast);
    /* Warm up: the buffers of a scan, the workers' result buffers. */
    for (int i = 0; i < 4; i++) scan_big(&s, fast);
    sh_sleep_ms(1000);
    long rss0 = sh_rss_kib(s.pid);
    struct rss_sampler rs;
    sampler_start(&rs, s.pid);

    /* The slow reader: many large scans, nothing read. */
    int slow = sh_raw_connect(s.sock);
    ck_assert_int_ge(slow, 0);
    struct pod_buf b = {0};
    pod_value a[] = {pod_v_str("big"), null_v(), null_v()};
    for (int i = 0; i < SLOW_CALLS; i++)
        ck_assert_int_eq(pod_proto_encode_call(&b, (uint64_t)i + 1, 0, "kv.scan", 0, a, 3), 0);
    ck_assert_int_eq(sh_raw_send(slow, b.p, b.len), 0);
    pod_buf_free(&b);

    /* Another client goes on: small calls and large scans, read as they
     * come, until the slow one is cut off. */
    uint64_t end = sh_now_ms() + 120000, worst = 0;
    int rounds = 0;
    for (;;) {
        uint64_t dt = small_calls(&s, fast, rounds);
        if (dt > worst) worst = dt;
        scan_big(&s, fast);
        rounds++;
        if (stat_of(&s, fast, "server.conn_limit_closes") >= 1) break;
        ck_assert_msg(sh_now_ms() < end,
                      "the slow reader was not cut off in 120 s (server RSS %ld KiB now, %ld KiB "
                      "at most, %ld KiB before; server.buffered %" PRId64 ")",
                      sh_rss_kib(s.pid), __atomic_load_n(&rs.max_kib, __ATOMIC_RELAXED), rss0,
                      stat_of(&s, fast, "server.buffered"));
    }
    /* The slow reader reads now: what was written before, then the error. */
    int got = expect_cut_off(slow, "server.max_conn_buffered", "slow reader");
    ck_assert_msg(got < SLOW_CALLS, "the slow reader got all %d replies", got);
    close(slow);
    /* The other client goes on. */
    for (int i = 0; i < 5; i++, rounds++) {
        uint64_t dt = small_calls(&s, fast, rounds);
        if (dt > worst) worst = dt;
        scan_big(&s, fast);
    }
    ck_assert_msg(worst < 20000, "another client waited %" PRIu64 " ms", worst);
    ck_assert_int_eq(stat_of(&s, fast, "server.conn_limit_closes"), 1);
    ck_assert_int_eq(stat_of(&s, fast, "server.server_limit_closes"), 0);

    long rss_max = sampler_stop(&rs);
    /* Gone: nothing is held for it, and the memory goes back. */
    int64_t held = wait_buffered(&s, fast, OWN_CALL, 20000);
    ck_assert_msg(held <= OWN_CALL, "the server still holds %" PRId64 " bytes for its clients", held);
    long rss1 = wait_rss(&s, rss0 + RSS_SLACK_KIB, 30000);
    sh_sleep_ms(2000);
    fprintf(stderr,
            "slow reader: server RSS %ld KiB before, at most %ld KiB while it was served "
            "(limit 32 MiB), %ld KiB after it went (%ld KiB 2 s later); the other client's %d "
            "rounds, the slowest call %" PRIu64 " ms\n",
            rss0, rss_max, rss1, sh_rss_kib(s.pid), rounds, worst);
    ck_assert_msg(rss1 <= rss0 + RSS_SLACK_KIB,
                  "the server's RSS stayed at %ld KiB after the slow reader went (%ld KiB before)",
                  rss1, rss0);
    /* The other client was never cut off: it still works. */
    small_calls(&s, fast, 100000);
    pod_client_close(fast);
    stop_server(&s);
}
END_TEST

/* ---- frames that stall: the server's total ------------------------------------ */

START_TEST(stalled_frames_cut_by_total)
{
    struct sh_server s;
    start_server(&s, "server:\n  max_conn_buffered: 32MiB\n  max_buffered: 100MiB\n");
    pod_client *other = conn(&s);
    small_calls(&s, other, 0);
    sh_sleep_ms(1000);
    long rss0 = sh_rss_kib(s.pid);

    unsigned char *chunk = calloc(1, 1u << 20);
    ck_assert_ptr_nonnull(chunk);
    int fd[NSTALL];
    bool send_failed[NSTALL] = {false};
    uint64_t worst = 0;
    struct rss_sampler rs;
    sampler_start(&rs, s.pid);
    for (int i = 0; i < NSTALL; i++) {
        fd[i] = sh_raw_connect(s.sock);
        ck_assert_int_ge(fd[i], 0);
        unsigned char hdr[16] = {0};
        pod_proto_put_header(hdr, 4 + POD_PROTO_MAX_FRAME, POD_FRAME_CALL, 0, 1000 + (uint64_t)i);
        send_failed[i] = sh_raw_send(fd[i], hdr, sizeof hdr) != 0;
        /* A connection cut off while it sends sees its writes fail. */
        for (unsigned sent = 0; sent < STALL_BYTES && !send_failed[i]; sent += 1u << 20)
            send_failed[i] = sh_raw_send(fd[i], chunk, 1u << 20) != 0;
        uint64_t dt = small_calls(&s, other, i + 1);
        if (dt > worst) worst = dt;
    }
    free(chunk);
    /* At most 6 partial frames of 15 MiB fit 100 MiB. */
    int64_t want = NSTALL - (100 / 15);
    uint64_t end = sh_now_ms() + 60000;
    int64_t closes;
    while ((closes = stat_of(&s, other, "server.server_limit_closes")) < want &&
           sh_now_ms() < end)
        sh_sleep_ms(50);
    ck_assert_msg(closes >= want && closes <= NSTALL,
                  "%" PRId64 " stalled connections cut off, expected %" PRId64 "..%d", closes,
                  want, NSTALL);
    ck_assert_int_eq(stat_of(&s, other, "server.conn_limit_closes"), 0);
    int64_t held = stat_of(&s, other, "server.buffered");
    ck_assert_msg(held <= 100 << 20, "the server holds %" PRId64 " bytes (max_buffered 100MiB)",
                  held);
    ck_assert_msg(worst < 20000, "another client waited %" PRIu64 " ms", worst);

    /* The ones cut off got the error; the others are still connected. */
    int cut = 0;
    for (int i = 0; i < NSTALL; i++) {
        struct pollfd p = {fd[i], POLLIN, 0};
        if (poll(&p, 1, 200) == 1) {
            char who[32];
            snprintf(who, sizeof who, "stalled client %d", i);
            ck_assert_int_eq(expect_cut_off(fd[i], "server.max_buffered", who), 0);
            cut++;
        }
    }
    int failed = 0;
    for (int i = 0; i < NSTALL; i++) failed += send_failed[i];
    fprintf(stderr, "stalled frames: %d of %d connections cut off (%d saw their sends fail)\n",
            cut, NSTALL, failed);
    ck_assert_int_eq(cut, closes);
    for (int i = 0; i < NSTALL; i++) close(fd[i]);
    long rss_max = sampler_stop(&rs);

    held = wait_buffered(&s, other, OWN_CALL, 20000);
    ck_assert_msg(held <= OWN_CALL, "the server still holds %" PRId64 " bytes for its clients", held);
    long rss1 = wait_rss(&s, rss0 + RSS_SLACK_KIB, 30000);
    sh_sleep_ms(2000);
    fprintf(stderr,
            "stalled frames: server RSS %ld KiB before, at most %ld KiB while they stalled "
            "(max_buffered 100 MiB), %ld KiB after they went (%ld KiB 2 s later)\n",
            rss0, rss_max, rss1, sh_rss_kib(s.pid));
    ck_assert_msg(rss1 <= rss0 + RSS_SLACK_KIB,
                  "the server's RSS stayed at %ld KiB after the stalled clients went (%ld KiB "
                  "before)",
                  rss1, rss0);
    small_calls(&s, other, 1000);
    pod_client_close(other);
    stop_server(&s);
}
END_TEST

/* ---- the count returns to zero ---------------------------------------------- */

/* What the server holds is counted while clients make it hold something, and
 * the count returns to nothing once they are gone: nothing is counted twice
 * or forgotten, whatever became of the calls. */
START_TEST(accounting_returns_to_zero)
{
    struct sh_server s;
    start_server(&s, "server:\n  max_calls_per_conn: 4\n");
    pod_client *c = conn(&s);
    load_big(&s, c);
    /* Pipelined calls of every kind on several connections: good ones,
     * unknown procedures, malformed arguments; some read, some not. */
    for (int k = 0; k < 6; k++) {
        pod_client *p = conn(&s);
        pod_value scan[] = {pod_v_str("big"), null_v(), null_v()};
        pod_value bad[] = {pod_v_str("nosuchtable"), pod_v_str("k")};
        for (int i = 0; i < 20; i++) {
            char key[32];
            snprintf(key, sizeof key, "zero-%d-%d", k, i);
            pod_value put[] = {pod_v_str("kv"), pod_v_str(key), pod_v_str("v")};
            ck_assert(pod_client_send(p, "kv.put", put, 3, 0) != 0);
            ck_assert(pod_client_send(p, i % 5 ? "kv.get" : "no.such.proc", bad, 2, 0) != 0);
            if (i % 4 == 0) ck_assert(pod_client_send(p, "kv.scan", scan, 3, 0) != 0);
        }
        ck_assert_int_eq(pod_client_flush(p), 0);
        if (k % 2) {
            /* Unread: most of its first scan's reply (4 MiB; the socket
             * takes some) at least is held. */
            uint64_t end = sh_now_ms() + 30000;
            int64_t b;
            while ((b = stat_of(&s, c, "server.buffered")) < (int64_t)NROWS * ROW / 2 &&
                   sh_now_ms() < end)
                sh_sleep_ms(20);
            ck_assert_msg(b >= (int64_t)NROWS * ROW / 2,
                          "the server counts %" PRId64 " bytes for a client that reads nothing",
                          b);
        } else {
            for (int i = 0; i < 45; i++) {
                pod_reply *r = pod_client_recv(p);
                ck_assert_msg(r != NULL, "reply %d: %s", i, pod_client_error(p));
                pod_reply_free(r);
            }
        }
        pod_client_close(p); /* the odd ones with every reply unread */
    }
    int64_t held = wait_buffered(&s, c, OWN_CALL, 20000);
    ck_assert_msg(held <= OWN_CALL, "the server still holds %" PRId64 " bytes for its clients", held);
    ck_assert_int_eq(stat_of(&s, c, "server.conn_limit_closes"), 0);
    pod_client_close(c);
    stop_server(&s);
}
END_TEST

int main(void)
{
    sh_init();
    /* A server built with AddressSanitizer keeps freed memory in a
     * quarantine (256 MiB by default) before it reuses or unmaps it; its
     * RSS would not show what the server gives back. A small quarantine
     * for the servers started here (a release build ignores this). */
    const char *o = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=8", o && *o ? o : "", o && *o ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    Suite *su = suite_create("server_limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, slow_reader_cut_off);
    tcase_add_test(tc, stalled_frames_cut_by_total);
    tcase_add_test(tc, accounting_returns_to_zero);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
