/* The wire protocol codec (src/net/proto.c, proto_reply.c) and the client
 * library (src/client/client.c).
 *
 * Codec: round trips of calls and replies, the exact byte layout (the worked
 * example of docs/protocol.md), framing of partial buffers, rejection of
 * every kind of malformed frame, and a time-bounded fuzz loop. Every frame
 * handed to a decoder sits in a heap block of exactly its size, so ASan
 * catches any read past its end.
 *
 * Client: against a small fake server in a thread (a Unix socket in /tmp, or
 * TCP on loopback) that decodes calls with pod_proto_decode_call and answers
 * with pod_proto_encode_reply: in order, in reverse order per batch, late,
 * never, or by closing the connection. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/result.h"
#include "net/proto.h"
#include "poddb/client.h"
#include "poddb/proc.h"
#include "helpers/testutil.h"

/* ---- helpers -------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A heap copy of exactly n bytes (at least 1 byte is allocated; n == 0 is a
 * valid pointer to nothing readable as far as the decoders are concerned). */
static unsigned char *dup_exact(const void *p, size_t n)
{
    unsigned char *d = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(d);
    if (n) memcpy(d, p, n);
    return d;
}

static void put32(unsigned char *p, uint32_t v) { pod_proto_put_u32(p, v); }

static void assert_value_eq(const pod_value *got, const pod_value *want)
{
    ck_assert_int_eq(got->type, want->type);
    switch (want->type) {
    case POD_T_NULL: break;
    case POD_T_I64: ck_assert_int_eq(got->u.i64, want->u.i64); break;
    case POD_T_F64:
        ck_assert_int_eq(memcmp(&got->u.f64, &want->u.f64, sizeof(double)), 0);
        break;
    case POD_T_BYTES:
        ck_assert_uint_eq(got->len, want->len);
        if (want->len) ck_assert_int_eq(memcmp(got->u.bytes, want->u.bytes, want->len), 0);
        break;
    }
}

/* Decode a call frame that must be valid. */
static void decode_ok(const struct pod_buf *b, struct pod_call_frame *cf, pod_value *args, int cap,
                      unsigned char **copy)
{
    ck_assert_int_eq(pod_proto_frame_size(b->p, b->len), (long)b->len);
    *copy = dup_exact(b->p, b->len);
    char err[256] = "";
    memset(cf, 0, sizeof *cf);
    cf->args = args;
    int rc = pod_proto_decode_call(*copy, b->len, cf, cap, err, sizeof err);
    ck_assert_msg(rc == 0, "decode_call: %s", err);
}

/* ---- calls ---------------------------------------------------------------------- */

START_TEST(call_round_trip_by_name)
{
    static const unsigned char bin[] = {0, 1, 2, 0xff, 0, 0x80};
    const pod_value args[] = {
        pod_v_i64(0),           pod_v_i64(INT64_MIN),      pod_v_i64(INT64_MAX),
        pod_v_i64(-1),          pod_v_f64(3.25),           pod_v_f64(-0.0),
        pod_v_f64(INFINITY),    pod_v_f64(NAN),            pod_v_bytes("", 0),
        pod_v_bytes(NULL, 0),   pod_v_bytes(bin, sizeof bin), pod_v_str("hello"),
        {POD_T_NULL, 0, {.i64 = 0}},
    };
    const int n = (int)(sizeof args / sizeof args[0]);
    struct pod_buf b = {0};
    ck_assert_int_eq(pod_proto_encode_call(&b, 0x0102030405060708ull, POD_CALL_EARLY_REPLY,
                                           "bank.transfer", 99, args, n), 0);
    pod_value got[32];
    struct pod_call_frame cf;
    unsigned char *f;
    decode_ok(&b, &cf, got, 32, &f);
    ck_assert_uint_eq(cf.request_id, 0x0102030405060708ull);
    ck_assert_uint_eq(cf.flags, POD_CALL_EARLY_REPLY);
    ck_assert_uint_eq(cf.name_len, strlen("bank.transfer"));
    ck_assert_int_eq(memcmp(cf.name, "bank.transfer", cf.name_len), 0);
    ck_assert_uint_eq(cf.proc_id, 0); /* not sent with a name */
    ck_assert_int_eq(cf.nargs, n);
    for (int i = 0; i < n; i++) assert_value_eq(&got[i], &args[i]);
    /* Byte values point into the frame. */
    ck_assert((const unsigned char *)got[10].u.bytes >= f &&
              (const unsigned char *)got[10].u.bytes + got[10].len <= f + b.len);
    free(f);

    /* A second frame appended to the same buffer. */
    size_t first = b.len;
    ck_assert_int_eq(pod_proto_encode_call(&b, 2, 0, "x", 0, NULL, 0), 0);
    ck_assert_int_eq(pod_proto_frame_size(b.p, b.len), (long)first);
    ck_assert_int_eq(pod_proto_frame_size(b.p + first, b.len - first), (long)(b.len - first));
    pod_buf_free(&b);
    ck_assert_ptr_null(b.p);
}
END_TEST

START_TEST(call_round_trip_by_id)
{
    const pod_value args[] = {pod_v_str("users"), pod_v_i64(7)};
    for (int empty_name = 0; empty_name < 2; empty_name++) {
        struct pod_buf b = {0};
        ck_assert_int_eq(pod_proto_encode_call(&b, 5, 0, empty_name ? "" : NULL, 0xdeadbeef,
                                               args, 2), 0);
        ck_assert_uint_eq(b.len, POD_PROTO_HEADER + 2 + 4 + 2 + 10 + 9);
        pod_value got[2];
        struct pod_call_frame cf;
        unsigned char *f;
        decode_ok(&b, &cf, got, 2, &f);
        ck_assert_ptr_null(cf.name);
        ck_assert_uint_eq(cf.name_len, 0);
        ck_assert_uint_eq(cf.proc_id, 0xdeadbeef);
        ck_assert_int_eq(cf.nargs, 2);
        assert_value_eq(&got[0], &args[0]);
        assert_value_eq(&got[1], &args[1]);
        free(f);
        pod_buf_free(&b);
    }
}
END_TEST

START_TEST(call_zero_and_many_args)
{
    struct pod_buf b = {0};
    ck_assert_int_eq(pod_proto_encode_call(&b, 1, 0, "sys.ping", 0, NULL, 0), 0);
    ck_assert_uint_eq(b.len, POD_PROTO_HEADER + 2 + 8 + 2);
    struct pod_call_frame cf;
    unsigned char *f;
    decode_ok(&b, &cf, NULL, 0, &f);
    ck_assert_int_eq(cf.nargs, 0);
    free(f);
    pod_buf_free(&b);

    /* The most a call can carry: 65535 arguments. */
    enum { N = UINT16_MAX };
    pod_value *args = malloc(N * sizeof *args), *got = malloc(N * sizeof *got);
    char (*strs)[16] = malloc(N * sizeof *strs);
    for (int i = 0; i < N; i++) {
        switch (i % 4) {
        case 0: args[i] = pod_v_i64((int64_t)i * -7919); break;
        case 1: args[i] = pod_v_f64(i / 3.0); break;
        case 2:
            snprintf(strs[i], sizeof strs[i], "v%d", i);
            args[i] = pod_v_str(strs[i]);
            break;
        default: args[i] = (pod_value){POD_T_NULL, 0, {.i64 = 0}};
        }
    }
    ck_assert_int_eq(pod_proto_encode_call(&b, 2, 0, "many", 0, args, N), 0);
    decode_ok(&b, &cf, got, N, &f);
    ck_assert_int_eq(cf.nargs, N);
    for (int i = 0; i < N; i++) assert_value_eq(&got[i], &args[i]);
    free(f);
    /* One more does not fit the u16 count; out is left as it was. */
    size_t before = b.len;
    pod_value *more = realloc(args, (N + 1) * sizeof *args);
    ck_assert_ptr_nonnull(more);
    args = more;
    args[N] = pod_v_i64(1);
    ck_assert_int_eq(pod_proto_encode_call(&b, 3, 0, "many", 0, args, N + 1), -1);
    ck_assert_int_eq(pod_proto_encode_call(&b, 3, 0, "many", 0, args, -1), -1);
    ck_assert_uint_eq(b.len, before);
    free(args);
    free(got);
    free(strs);
    pod_buf_free(&b);
}
END_TEST

START_TEST(encode_rejects_what_cannot_be_sent)
{
    struct pod_buf b = {0};
    ck_assert_int_eq(pod_proto_encode_call(&b, 1, 0, "a", 0, NULL, 0), 0);
    size_t before = b.len;
    /* A frame larger than POD_PROTO_MAX_FRAME. */
    size_t big = POD_PROTO_MAX_FRAME;
    void *blob = calloc(1, big);
    pod_value v = pod_v_bytes(blob, (uint32_t)big);
    ck_assert_int_eq(pod_proto_encode_call(&b, 2, 0, "a", 0, &v, 1), -1);
    ck_assert_uint_eq(b.len, before);
    /* Just fits: len = 12 + 2 + 1 + 2 + 5 + n == MAX. */
    v.len = POD_PROTO_MAX_FRAME - 22;
    ck_assert_int_eq(pod_proto_encode_call(&b, 3, 0, "a", 0, &v, 1), 0);
    ck_assert_int_eq(pod_proto_frame_size(b.p + before, b.len - before), (long)(4 + POD_PROTO_MAX_FRAME));
    free(blob);
    /* An unknown value type. */
    before = b.len;
    pod_value bad = {(enum pod_type)9, 0, {.i64 = 0}};
    ck_assert_int_eq(pod_proto_encode_call(&b, 4, 0, "a", 0, &bad, 1), -1);
    /* A name longer than a u16 can count. */
    char *name = malloc(70000);
    memset(name, 'n', 69999);
    name[69999] = '\0';
    ck_assert_int_eq(pod_proto_encode_call(&b, 5, 0, name, 0, NULL, 0), -1);
    free(name);
    ck_assert_uint_eq(b.len, before);
    pod_buf_free(&b);
}
END_TEST

/* The worked example of docs/protocol.md: kv.get("users", "alice") as request
 * 1, and its reply: status 0, one row with the value "hello". */
static const unsigned char kv_get_call[] = {
    0x2a, 0x00, 0x00, 0x00,                         /* len = 42 */
    0x01, 0x00, 0x00, 0x00,                         /* CALL, flags 0, reserved */
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* request_id 1 */
    0x06, 0x00, 'k', 'v', '.', 'g', 'e', 't',       /* name */
    0x02, 0x00,                                     /* nargs 2 */
    0x03, 0x05, 0x00, 0x00, 0x00, 'u', 's', 'e', 'r', 's',
    0x03, 0x05, 0x00, 0x00, 0x00, 'a', 'l', 'i', 'c', 'e',
};
static const unsigned char kv_get_reply[] = {
    0x24, 0x00, 0x00, 0x00,                         /* len = 36 */
    0x02, 0x00, 0x00, 0x00,                         /* REPLY, flags 0, reserved */
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* request_id 1 */
    0x00, 0x00, 0x00, 0x00,                         /* status 0 (ok) */
    0x00, 0x00, 0x00, 0x00,                         /* msg_len 0 */
    0x01, 0x00, 0x00, 0x00,                         /* nrows 1 */
    0x01, 0x00,                                     /* ncols 1 */
    0x03, 0x05, 0x00, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o',
};

START_TEST(byte_layout_matches_the_documented_example)
{
    struct pod_buf b = {0};
    const pod_value args[] = {pod_v_str("users"), pod_v_str("alice")};
    ck_assert_int_eq(pod_proto_encode_call(&b, 1, 0, "kv.get", 0, args, 2), 0);
    ck_assert_uint_eq(b.len, sizeof kv_get_call);
    ck_assert_int_eq(memcmp(b.p, kv_get_call, b.len), 0);
    pod_buf_free(&b);

    pod_result *res = pod_result_new();
    pod_result_str(res, "hello");
    ck_assert_int_eq(pod_proto_encode_reply(&b, 1, POD_OK, "", res), 0);
    ck_assert_uint_eq(b.len, sizeof kv_get_reply);
    ck_assert_int_eq(memcmp(b.p, kv_get_reply, b.len), 0);
    pod_result_free(res);
    pod_buf_free(&b);

    /* The same call by id 7, and the "not found" reply. */
    static const unsigned char by_id[] = {
        0x28, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0,
        3, 5, 0, 0, 0, 'u', 's', 'e', 'r', 's', 3, 5, 0, 0, 0, 'a', 'l', 'i', 'c', 'e',
    };
    ck_assert_int_eq(pod_proto_encode_call(&b, 1, 0, NULL, 7, args, 2), 0);
    ck_assert_uint_eq(b.len, sizeof by_id);
    ck_assert_int_eq(memcmp(b.p, by_id, b.len), 0);
    pod_buf_free(&b);
    static const unsigned char not_found[] = {
        0x18, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    res = pod_result_new();
    ck_assert_int_eq(pod_proto_encode_reply(&b, 1, POD_NOT_FOUND, "", res), 0);
    ck_assert_uint_eq(b.len, sizeof not_found);
    ck_assert_int_eq(memcmp(b.p, not_found, b.len), 0);
    pod_result_free(res);
    pod_buf_free(&b);

    /* Integers are little-endian and floats IEEE 754 bit patterns. */
    const pod_value nums[] = {pod_v_i64(-2), pod_v_f64(1.0)};
    ck_assert_int_eq(pod_proto_encode_call(&b, 0x1122334455667788ull, 0, NULL, 0x01020304,
                                           nums, 2), 0);
    static const unsigned char want[] = {
        0x26, 0, 0, 0, 1, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0, 0, 0x04, 0x03, 0x02, 0x01, 2, 0,
        1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        2, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
    };
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_int_eq(memcmp(b.p, want, sizeof want), 0);
    pod_buf_free(&b);
}
END_TEST

/* ---- replies -------------------------------------------------------------------- */

static void decode_reply_ok(const struct pod_buf *b, struct pod_reply_frame *rf, unsigned char **copy)
{
    ck_assert_int_eq(pod_proto_frame_size(b->p, b->len), (long)b->len);
    *copy = dup_exact(b->p, b->len);
    char err[256] = "";
    int rc = pod_proto_decode_reply(*copy, b->len, rf, err, sizeof err);
    ck_assert_msg(rc == 0, "decode_reply: %s", err);
}

START_TEST(reply_round_trip_no_rows)
{
    struct pod_buf b = {0};
    ck_assert_int_eq(pod_proto_encode_reply(&b, 77, POD_E_INVALID, "no such procedure 'x'", NULL), 0);
    struct pod_reply_frame rf;
    unsigned char *f;
    decode_reply_ok(&b, &rf, &f);
    ck_assert_uint_eq(rf.request_id, 77);
    ck_assert_int_eq(rf.status, POD_E_INVALID);
    ck_assert_uint_eq(rf.msg_len, strlen("no such procedure 'x'"));
    ck_assert_int_eq(memcmp(rf.msg, "no such procedure 'x'", rf.msg_len), 0);
    ck_assert_uint_eq(rf.nrows, 0);
    const unsigned char *cur = rf.rows;
    int nc = -1;
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, NULL, 0, &nc), -1); /* no rows */
    free(f);
    pod_buf_free(&b);

    /* An empty result is zero rows as well; NULL msg is an empty message. */
    pod_result *res = pod_result_new();
    ck_assert_int_eq(pod_proto_encode_reply(&b, 78, POD_NOT_FOUND, NULL, res), 0);
    decode_reply_ok(&b, &rf, &f);
    ck_assert_int_eq(rf.status, POD_NOT_FOUND);
    ck_assert_uint_eq(rf.msg_len, 0);
    ck_assert_uint_eq(rf.nrows, 0);
    free(f);
    pod_result_free(res);
    pod_buf_free(&b);
}
END_TEST

START_TEST(reply_round_trip_many_rows)
{
    enum { ROWS = 5000 };
    pod_result *res = pod_result_new();
    char s[32];
    for (int i = 0; i < ROWS; i++) {
        if (i) pod_result_row(res);
        if (i == 17) continue; /* an empty row in the middle */
        pod_result_i64(res, (int64_t)i * 1000003 - 5);
        snprintf(s, sizeof s, "row-%d", i);
        pod_result_str(res, s);
        if (i % 3 == 0) pod_result_f64(res, i * 0.5);
        if (i % 5 == 0) pod_result_bytes(res, "", 0);
    }
    struct pod_buf b = {0};
    ck_assert_int_eq(pod_proto_encode_reply(&b, 9, POD_OK, "", res), 0);
    struct pod_reply_frame rf;
    unsigned char *f;
    decode_reply_ok(&b, &rf, &f);
    ck_assert_uint_eq(rf.nrows, ROWS);
    const unsigned char *cur = rf.rows;
    for (int i = 0; i < ROWS; i++) {
        pod_value vals[8];
        int nc = -1;
        ck_assert_int_eq(pod_proto_next_row(&rf, &cur, vals, 8, &nc), 0);
        ck_assert_int_eq(nc, pod_result_ncols(res, i));
        for (int c = 0; c < nc; c++) {
            pod_value want;
            ck_assert_int_eq(pod_result_get(res, i, c, &want), 0);
            assert_value_eq(&vals[c], &want);
        }
    }
    ck_assert_ptr_eq(cur, rf.end);
    ck_assert_ptr_eq(rf.end, f + b.len);
    pod_value v;
    int nc;
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, &v, 1, &nc), -1);

    /* cap smaller than the row: the first cap values, the real count, the
     * cursor past the whole row. */
    cur = rf.rows;
    pod_value two[2];
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, two, 2, &nc), 0);
    ck_assert_int_eq(nc, 4); /* row 0: i64, str, f64, bytes */
    ck_assert_int_eq(two[0].u.i64, -5);
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, two, 2, &nc), 0);
    ck_assert_int_eq(nc, 2);
    ck_assert_int_eq(two[0].u.i64, 1000003 - 5);
    free(f);
    pod_result_free(res);
    pod_buf_free(&b);
}
END_TEST

/* A reply built by hand (pod_result has no NULL values): 2 rows, NULLs and
 * every other type. */
static size_t hand_reply(unsigned char *out, uint64_t id)
{
    unsigned char *p = out + POD_PROTO_HEADER;
    p = pod_proto_put_u32(p, (uint32_t)POD_EXISTS);
    p = pod_proto_put_u32(p, 3);
    memcpy(p, "dup", 3);
    p += 3;
    p = pod_proto_put_u32(p, 2);
    p = pod_proto_put_u16(p, 3);
    pod_value a = {POD_T_NULL, 0, {.i64 = 0}}, b = pod_v_i64(-9), c = pod_v_str("xyz");
    p = pod_proto_put_value(p, &a);
    p = pod_proto_put_value(p, &b);
    p = pod_proto_put_value(p, &c);
    p = pod_proto_put_u16(p, 2);
    pod_value d = pod_v_f64(2.5);
    p = pod_proto_put_value(p, &d);
    p = pod_proto_put_value(p, &a);
    size_t n = (size_t)(p - out);
    pod_proto_put_header(out, n, POD_FRAME_REPLY, 0, id);
    return n;
}

START_TEST(reply_with_nulls_by_hand)
{
    unsigned char buf[128];
    size_t n = hand_reply(buf, 42);
    unsigned char *f = dup_exact(buf, n);
    struct pod_reply_frame rf;
    char err[256];
    ck_assert_int_eq(pod_proto_decode_reply(f, n, &rf, err, sizeof err), 0);
    ck_assert_int_eq(rf.status, POD_EXISTS);
    ck_assert_uint_eq(rf.nrows, 2);
    const unsigned char *cur = rf.rows;
    pod_value v[4];
    int nc;
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, v, 4, &nc), 0);
    ck_assert_int_eq(nc, 3);
    ck_assert_int_eq(v[0].type, POD_T_NULL);
    ck_assert_int_eq(v[1].u.i64, -9);
    ck_assert_int_eq(v[2].len, 3);
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, v, 4, &nc), 0);
    ck_assert_int_eq(nc, 2);
    ck_assert(v[0].u.f64 == 2.5);
    ck_assert_int_eq(v[1].type, POD_T_NULL);
    free(f);
}
END_TEST

/* ---- framing --------------------------------------------------------------------- */

START_TEST(frame_size_on_partial_buffers)
{
    struct pod_buf b = {0};
    const pod_value args[] = {pod_v_str("users"), pod_v_str("alice")};
    ck_assert_int_eq(pod_proto_encode_call(&b, 1, 0, "kv.get", 0, args, 2), 0);
    size_t n = b.len;
    ck_assert_int_eq(pod_proto_encode_call(&b, 2, 0, "kv.get", 0, args, 2), 0);
    for (size_t k = 0; k < n; k++) {
        unsigned char *f = dup_exact(b.p, k);
        ck_assert_int_eq(pod_proto_frame_size(f, k), 0);
        free(f);
    }
    for (size_t k = n; k <= b.len; k++) ck_assert_int_eq(pod_proto_frame_size(b.p, k), (long)n);
    ck_assert_int_eq(pod_proto_frame_size(NULL, 0), 0);
    pod_buf_free(&b);

    /* The length is checked as soon as its 4 bytes are there. */
    unsigned char l[4];
    put32(l, 0);
    ck_assert_int_eq(pod_proto_frame_size(l, 4), -1);
    put32(l, POD_PROTO_MAX_FRAME + 1);
    ck_assert_int_eq(pod_proto_frame_size(l, 4), -1);
    put32(l, 0xffffffffu);
    ck_assert_int_eq(pod_proto_frame_size(l, 4), -1);
    ck_assert_int_eq(pod_proto_frame_size(l, 3), 0);
    put32(l, POD_PROTO_MAX_FRAME);
    ck_assert_int_eq(pod_proto_frame_size(l, 4), 0);
    put32(l, 1);
    ck_assert_int_eq(pod_proto_frame_size(l, 4), 0);
    unsigned char five[5] = {1, 0, 0, 0, 9};
    ck_assert_int_eq(pod_proto_frame_size(five, 5), 5);
}
END_TEST

/* Every proper prefix of a valid frame is rejected, whether its length field
 * still says the original length or was rewritten to match the prefix. */
START_TEST(truncated_frames_at_every_length)
{
    struct pod_buf call = {0}, reply = {0};
    static const unsigned char bin[] = {1, 2, 3};
    const pod_value args[] = {pod_v_str("users"), pod_v_i64(5), pod_v_f64(1.5),
                              pod_v_bytes(bin, 3), {POD_T_NULL, 0, {.i64 = 0}}};
    ck_assert_int_eq(pod_proto_encode_call(&call, 11, 0, "kv.put", 0, args, 5), 0);
    pod_result *res = pod_result_new();
    pod_result_i64(res, 1);
    pod_result_str(res, "two");
    pod_result_row(res);
    pod_result_f64(res, 3.0);
    ck_assert_int_eq(pod_proto_encode_reply(&reply, 12, POD_OK, "msg", res), 0);
    pod_result_free(res);

    for (int which = 0; which < 2; which++) {
        const struct pod_buf *b = which ? &reply : &call;
        for (size_t k = 0; k < b->len; k++) {
            for (int fix = 0; fix < 2; fix++) {
                unsigned char *f = dup_exact(b->p, k);
                if (fix && k >= 4) put32(f, (uint32_t)(k - 4));
                char err[256] = "";
                pod_value av[8];
                struct pod_call_frame cf = {.args = av};
                struct pod_reply_frame rf;
                int rc = which ? pod_proto_decode_reply(f, k, &rf, err, sizeof err)
                               : pod_proto_decode_call(f, k, &cf, 8, err, sizeof err);
                ck_assert_msg(rc == -1, "%s truncated to %zu bytes (fix %d) was accepted",
                              which ? "reply" : "call", k, fix);
                ck_assert_msg(err[0] != '\0', "no message for %zu bytes", k);
                /* The request id is known whenever the header is there. */
                if (fix && k >= POD_PROTO_HEADER)
                    ck_assert_uint_eq(which ? rf.request_id : cf.request_id, which ? 12u : 11u);
                free(f);
            }
        }
    }
    pod_buf_free(&call);
    pod_buf_free(&reply);
}
END_TEST

/* Decode a frame that must be rejected; returns the message. */
static const char *reject_call(const unsigned char *frame, size_t n, int cap, uint64_t *id)
{
    static char err[256];
    unsigned char *f = dup_exact(frame, n);
    pod_value av[16];
    struct pod_call_frame cf = {.args = av};
    err[0] = '\0';
    int rc = pod_proto_decode_call(f, n, &cf, cap, err, sizeof err);
    free(f);
    ck_assert_msg(rc == -1, "frame accepted");
    ck_assert(err[0] != '\0');
    if (id) *id = cf.request_id;
    return err;
}

static const char *reject_reply(const unsigned char *frame, size_t n)
{
    static char err[256];
    unsigned char *f = dup_exact(frame, n);
    struct pod_reply_frame rf;
    err[0] = '\0';
    int rc = pod_proto_decode_reply(f, n, &rf, err, sizeof err);
    free(f);
    ck_assert_msg(rc == -1, "reply accepted");
    ck_assert(err[0] != '\0');
    return err;
}

#define ASSERT_HAS(s, sub) ck_assert_msg(strstr((s), (sub)) != NULL, "'%s' lacks '%s'", (s), (sub))

START_TEST(decoding_rejects_malformed_frames)
{
    unsigned char f[256];
    const size_t n = sizeof kv_get_call;
    uint64_t id;

    /* Wrong kind, unknown kinds. */
    memcpy(f, kv_get_call, n);
    f[4] = POD_FRAME_REPLY;
    ASSERT_HAS(reject_call(f, n, 8, &id), "kind 2");
    ck_assert_uint_eq(id, 1); /* still answerable */
    for (int k = 0; k < 256; k += 51) {
        if (k == POD_FRAME_CALL) continue;
        f[4] = (unsigned char)k;
        reject_call(f, n, 8, NULL);
    }
    f[4] = 7;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "unknown frame kind 7");
    ASSERT_HAS(reject_reply(kv_get_call, n), "kind 1");

    /* Unknown flags, non-zero reserved field. */
    memcpy(f, kv_get_call, n);
    f[5] = 0x80;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "flags");
    memcpy(f, kv_get_call, n);
    f[7] = 1;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "reserved");

    /* Unknown value type in argument 2 (offset 36). */
    memcpy(f, kv_get_call, n);
    ck_assert_int_eq(f[36], POD_T_BYTES);
    f[36] = 4;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "argument 2: unknown value type 4");

    /* Bytes length past the end (argument 2's length field at 37). */
    memcpy(f, kv_get_call, n);
    put32(f + 37, 4000000);
    ASSERT_HAS(reject_call(f, n, 8, NULL), "argument 2: bytes length 4000000 runs past the frame end");
    put32(f + 37, 0xffffffffu);
    ASSERT_HAS(reject_call(f, n, 8, NULL), "argument 2: bytes length");
    put32(f + 37, 6); /* one byte too many */
    ASSERT_HAS(reject_call(f, n, 8, NULL), "runs past the frame end");
    put32(f + 37, 4); /* one too few: a trailing byte */
    ASSERT_HAS(reject_call(f, n, 8, NULL), "unexpected bytes");

    /* Too many arguments for the caller's storage; nargs past the end. */
    ASSERT_HAS(reject_call(kv_get_call, n, 1, NULL), "too many arguments (2, at most 1)");
    memcpy(f, kv_get_call, n);
    f[24] = 0xff;
    f[25] = 0xff;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "too many arguments (65535, at most 8)");
    f[24] = 40;
    f[25] = 0;
    ASSERT_HAS(reject_call(f, n, 64, NULL), "nargs 40 runs past the frame end");
    f[24] = 3;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "argument 3: value type runs past the frame end");

    /* name_len past the end; a NUL in the name. */
    memcpy(f, kv_get_call, n);
    f[16] = 200;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "name_len 200");
    memcpy(f, kv_get_call, n);
    f[19] = 0;
    ASSERT_HAS(reject_call(f, n, 8, NULL), "NUL");

    /* The length field: out of range, or not matching the frame. */
    memcpy(f, kv_get_call, n);
    put32(f, POD_PROTO_MAX_FRAME + 1);
    ASSERT_HAS(reject_call(f, n, 8, NULL), "out of range");
    put32(f, 0);
    ASSERT_HAS(reject_call(f, n, 8, NULL), "out of range");
    put32(f, (uint32_t)n); /* 4 too many */
    ASSERT_HAS(reject_call(f, n, 8, NULL), "does not match");
    ASSERT_HAS(reject_call(f, 3, 8, NULL), "shorter than its 4-byte length field");
    put32(f, 8);
    ASSERT_HAS(reject_call(f, 12, 8, &id), "shorter than the 16-byte header");
    ck_assert_uint_eq(id, 0);

    /* Replies: nrows past the end, msg_len past the end, ncols past the end,
     * bad value types in rows, trailing bytes. */
    const size_t rn = sizeof kv_get_reply;
    memcpy(f, kv_get_reply, rn);
    put32(f + 24, 1000000);
    ASSERT_HAS(reject_reply(f, rn), "nrows 1000000 runs past the frame end");
    put32(f + 24, 2);
    ASSERT_HAS(reject_reply(f, rn), "row 2: ncols runs past the frame end");
    memcpy(f, kv_get_reply, rn);
    put32(f + 20, 100);
    ASSERT_HAS(reject_reply(f, rn), "msg_len 100");
    memcpy(f, kv_get_reply, rn);
    f[28] = 200;
    ASSERT_HAS(reject_reply(f, rn), "row 1: ncols 200 runs past the frame end");
    f[28] = 2;
    ASSERT_HAS(reject_reply(f, rn), "row 1 column 2: value type runs past the frame end");
    memcpy(f, kv_get_reply, rn);
    f[30] = 0xee;
    ASSERT_HAS(reject_reply(f, rn), "row 1 column 1: unknown value type 238");
    memcpy(f, kv_get_reply, rn);
    f[5] = 1;
    ASSERT_HAS(reject_reply(f, rn), "flags");
    memcpy(f, kv_get_reply, rn);
    f[rn] = 0;
    put32(f, (uint32_t)(rn + 1 - 4));
    ASSERT_HAS(reject_reply(f, rn + 1), "1 unexpected bytes after the last row");
    memcpy(f, kv_get_reply, rn);
    put32(f, POD_PROTO_MAX_FRAME + 1);
    ASSERT_HAS(reject_reply(f, rn), "out of range");

    /* The decoders accept NULL error buffers. */
    pod_value av[2];
    struct pod_call_frame cf = {.args = av};
    ck_assert_int_eq(pod_proto_decode_call(kv_get_call, n, &cf, 1, NULL, 0), -1);
}
END_TEST

/* ---- fuzzing ---------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static bool inside(const void *p, size_t len, const unsigned char *f, size_t n)
{
    const unsigned char *q = p;
    return len == 0 || (q >= f && q + len <= f + n);
}

/* Decode f both ways; both must give 0 or -1 (with a message), and whatever
 * is accepted must point into the frame. Returns whether either accepted it. */
static bool check_decoders(const unsigned char *f, size_t n)
{
    long fs = pod_proto_frame_size(f, n);
    ck_assert(fs == -1 || fs == 0 || (fs >= 5 && (size_t)fs <= n));

    char err[256];
    pod_value av[8];
    struct pod_call_frame cf = {.args = av};
    err[0] = '\0';
    int rc = pod_proto_decode_call(f, n, &cf, 8, err, sizeof err);
    ck_assert(rc == 0 || rc == -1);
    bool accepted = rc == 0;
    if (rc == -1) {
        ck_assert(err[0] != '\0');
    } else {
        ck_assert_int_eq(fs, (long)n);
        ck_assert(cf.nargs <= 8);
        if (cf.name) ck_assert(inside(cf.name, cf.name_len, f, n) && cf.name_len > 0);
        for (int i = 0; i < cf.nargs; i++) {
            ck_assert(av[i].type <= POD_T_BYTES);
            if (av[i].type == POD_T_BYTES) ck_assert(inside(av[i].u.bytes, av[i].len, f, n));
        }
    }

    struct pod_reply_frame rf;
    err[0] = '\0';
    rc = pod_proto_decode_reply(f, n, &rf, err, sizeof err);
    ck_assert(rc == 0 || rc == -1);
    if (rc == -1) {
        ck_assert(err[0] != '\0');
        return accepted;
    }
    ck_assert(!accepted); /* a frame is a call or a reply, not both */
    ck_assert_int_eq(fs, (long)n);
    ck_assert(inside(rf.msg, rf.msg_len, f, n));
    const unsigned char *cur = rf.rows;
    for (uint32_t r = 0; r < rf.nrows; r++) {
        pod_value v[4];
        int nc = -1;
        ck_assert_int_eq(pod_proto_next_row(&rf, &cur, v, 4, &nc), 0);
        ck_assert(nc >= 0);
        for (int c = 0; c < nc && c < 4; c++)
            if (v[c].type == POD_T_BYTES) ck_assert(inside(v[c].u.bytes, v[c].len, f, n));
    }
    ck_assert_ptr_eq(cur, f + n);
    int nc;
    ck_assert_int_eq(pod_proto_next_row(&rf, &cur, NULL, 0, &nc), -1);
    return true;
}

START_TEST(fuzz_decoders_never_crash)
{
    /* Seeds: valid calls and replies of several shapes. */
    struct pod_buf seeds[8] = {{0}};
    int nseeds = 0;
    const pod_value a1[] = {pod_v_str("users"), pod_v_str("alice"), pod_v_i64(-1),
                            pod_v_f64(0.5), {POD_T_NULL, 0, {.i64 = 0}}, pod_v_bytes("", 0)};
    ck_assert_int_eq(pod_proto_encode_call(&seeds[nseeds++], 1, 0, "kv.get", 0, a1, 2), 0);
    ck_assert_int_eq(pod_proto_encode_call(&seeds[nseeds++], 2, 1, NULL, 3, a1, 6), 0);
    ck_assert_int_eq(pod_proto_encode_call(&seeds[nseeds++], 3, 0, "p", 0, NULL, 0), 0);
    pod_result *res = pod_result_new();
    pod_result_i64(res, 1);
    pod_result_str(res, "x");
    pod_result_row(res);
    pod_result_row(res);
    pod_result_f64(res, 2.0);
    pod_result_bytes(res, "", 0);
    ck_assert_int_eq(pod_proto_encode_reply(&seeds[nseeds++], 4, POD_OK, "", res), 0);
    ck_assert_int_eq(pod_proto_encode_reply(&seeds[nseeds++], 5, POD_E_INVALID, "bad", NULL), 0);
    pod_result_free(res);
    unsigned char hr[128];
    size_t hn = hand_reply(hr, 6);
    ck_assert_int_eq(pod_buf_reserve(&seeds[nseeds], hn), 0);
    memcpy(seeds[nseeds].p, hr, hn);
    seeds[nseeds++].len = hn;

    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    fprintf(stderr, "fuzz seed %llu\n", (unsigned long long)rng_state);
    static const uint32_t interesting[] = {0, 1, 2, 3, 4, 0x7f, 0x80, 0xff, 0xffff, 0x10000,
                                           0x7fffffff, 0x80000000u, 0xffffffffu,
                                           POD_PROTO_MAX_FRAME, POD_PROTO_MAX_FRAME + 1};
    const int nint = (int)(sizeof interesting / sizeof interesting[0]);
    unsigned char buf[512];
    double t0 = now_s();
    long iters = 0, accepted = 0;
    for (; iters < 200000; iters++) {
        if ((iters & 1023) == 0 && now_s() - t0 > 2.0) break;
        const struct pod_buf *s = &seeds[rnd() % (uint64_t)nseeds];
        size_t n = s->len;
        memcpy(buf, s->p, n);
        int rounds = 1 + (int)(rnd() % 3);
        for (int r = 0; r < rounds; r++) {
            switch (rnd() % 7) {
            case 0: /* flip bits */
                for (int i = 0, k = 1 + (int)(rnd() % 4); i < k && n; i++)
                    buf[rnd() % n] ^= (unsigned char)(1u << (rnd() % 8));
                break;
            case 1: /* an interesting byte */
                if (n) buf[rnd() % n] = (unsigned char)interesting[rnd() % (uint64_t)nint];
                break;
            case 2: /* an interesting u16/u32 anywhere */
                if (n >= 4) {
                    size_t at = rnd() % (n - 3);
                    uint32_t v = interesting[rnd() % (uint64_t)nint];
                    if (rnd() % 2) v = (uint32_t)(n - at) + (uint32_t)(rnd() % 5) - 2;
                    if (rnd() % 2) pod_proto_put_u16(buf + at, (uint16_t)v);
                    else put32(buf + at, v);
                }
                break;
            case 3: /* truncate */
                n = n ? rnd() % n : 0;
                break;
            case 4: /* append random bytes */
                for (int i = 0, k = 1 + (int)(rnd() % 16); i < k && n < sizeof buf; i++)
                    buf[n++] = (unsigned char)rnd();
                break;
            case 5: /* random garbage after the header */
                n = POD_PROTO_HEADER + rnd() % 48;
                for (size_t i = POD_PROTO_HEADER; i < n; i++) buf[i] = (unsigned char)rnd();
                break;
            default: /* everything random */
                n = rnd() % 64;
                for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)rnd();
                if (n >= 5 && rnd() % 2) buf[4] = (unsigned char)(1 + rnd() % 2);
                break;
            }
        }
        /* Mostly keep the length field consistent, so the bodies get tested. */
        if (n >= 4 && rnd() % 4) put32(buf, (uint32_t)(n - 4));
        unsigned char *f = dup_exact(buf, n);
        if (check_decoders(f, n)) accepted++;
        free(f);
    }
    fprintf(stderr, "fuzz: %ld frames in %.2f s, %ld accepted\n", iters, now_s() - t0, accepted);
    ck_assert_int_gt(iters, 10000);
    ck_assert_int_gt(accepted, 0);
    ck_assert_int_lt(accepted, iters);
    for (int i = 0; i < nseeds; i++) pod_buf_free(&seeds[i]);
}
END_TEST

/* ---- the fake server ---------------------------------------------------------------- */

struct fake {
    int lfd;
    char path[108];  /* Unix socket, or "" for TCP */
    char address[128];
    pthread_t th;
    /* behaviour */
    int batch;          /* reply when this many calls are collected */
    bool reverse;       /* a batch in reverse order */
    bool silent;        /* answer no call */
    int answer_only;    /* answer only the first n calls (0: all) */
    int close_after;    /* close after reading n calls (0: never) */
    bool close_at_once; /* close as soon as accepted */
    int delay_first_ms; /* before the first reply */
    void *(*main)(void *); /* another server (NULL: fake_main) */
    int garbage;        /* garbage_server: 1 bad value type, 2 bad length */
    /* what it saw */
    int ncalls;
    uint64_t ids[256];
};

static bool name_is(const struct pod_call_frame *cf, const char *s)
{
    return cf->name && cf->name_len == strlen(s) && memcmp(cf->name, s, cf->name_len) == 0;
}

/* The fake procedures:
 *   fail          -> POD_E_INVALID, "you asked for it"
 *   rows (n)      -> n rows [i, "row-i", i/2.0]
 *   anything else -> row 0: [name (or proc id), flags], row 1: the args
 *                    (NULL echoed as "<null>") */
static void answer(struct pod_buf *out, const struct pod_call_frame *cf)
{
    pod_result *res = pod_result_new();
    int status = POD_OK;
    const char *msg = "";
    if (name_is(cf, "fail")) {
        status = POD_E_INVALID;
        msg = "you asked for it";
    } else if (name_is(cf, "rows") && cf->nargs == 1 && cf->args[0].type == POD_T_I64) {
        char s[32];
        for (int64_t i = 0; i < cf->args[0].u.i64; i++) {
            if (i) pod_result_row(res);
            pod_result_i64(res, i);
            snprintf(s, sizeof s, "row-%lld", (long long)i);
            pod_result_str(res, s);
            pod_result_f64(res, (double)i / 2);
        }
    } else {
        if (cf->name) pod_result_bytes(res, cf->name, cf->name_len);
        else pod_result_i64(res, cf->proc_id);
        pod_result_i64(res, cf->flags);
        pod_result_row(res);
        for (int i = 0; i < cf->nargs; i++) {
            const pod_value *v = &cf->args[i];
            switch (v->type) {
            case POD_T_I64: pod_result_i64(res, v->u.i64); break;
            case POD_T_F64: pod_result_f64(res, v->u.f64); break;
            case POD_T_BYTES: pod_result_bytes(res, v->u.bytes, v->len); break;
            default: pod_result_str(res, "<null>"); break;
            }
        }
    }
    ck_assert_int_eq(pod_proto_encode_reply(out, cf->request_id, status, msg, res), 0);
    pod_result_free(res);
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* the client went away */
        p += w;
        n -= (size_t)w;
    }
}

static void *fake_main(void *arg)
{
    struct fake *fk = arg;
    int fd = accept(fk->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    if (fk->close_at_once) {
        close(fd);
        return NULL;
    }
    struct pod_buf in = {0};
    struct pod_buf batch[256];
    int nbatch = 0, answered = 0;
    bool delayed = false;
    for (;;) {
        if (pod_buf_reserve(&in, 65536) != 0) break;
        ssize_t n = recv(fd, in.p + in.len, in.cap - in.len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        in.len += (size_t)n;
        long fs;
        bool done = false;
        while ((fs = pod_proto_frame_size(in.p, in.len)) > 0) {
            pod_value args[64];
            struct pod_call_frame cf = {.args = args};
            char err[256];
            if (pod_proto_decode_call(in.p, (size_t)fs, &cf, 64, err, sizeof err) != 0) {
                fprintf(stderr, "fake server: %s\n", err);
                done = true;
                break;
            }
            if (fk->ncalls < 256) fk->ids[fk->ncalls] = cf.request_id;
            fk->ncalls++;
            if (!fk->silent && (fk->answer_only == 0 || answered < fk->answer_only)) {
                answered++;
                batch[nbatch] = (struct pod_buf){0};
                answer(&batch[nbatch++], &cf);
            }
            pod_buf_consume(&in, (size_t)fs);
            if (nbatch >= fk->batch || (nbatch && fk->close_after && fk->ncalls >= fk->close_after)) {
                if (fk->delay_first_ms && !delayed) {
                    delayed = true;
                    usleep((useconds_t)fk->delay_first_ms * 1000);
                }
                for (int i = 0; i < nbatch; i++) {
                    int k = fk->reverse ? nbatch - 1 - i : i;
                    write_all(fd, batch[k].p, batch[k].len);
                    pod_buf_free(&batch[k]);
                }
                nbatch = 0;
            }
            if (fk->close_after && fk->ncalls >= fk->close_after) {
                done = true;
                break;
            }
        }
        if (done || fs < 0) break;
    }
    for (int i = 0; i < nbatch; i++) pod_buf_free(&batch[i]);
    pod_buf_free(&in);
    close(fd);
    return NULL;
}

static void fake_start(struct fake *fk, bool tcp)
{
    static int counter;
    if (fk->batch <= 0) fk->batch = 1;
    if (tcp) {
        fk->lfd = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fk->lfd, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(bind(fk->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
        socklen_t sl = sizeof sa;
        ck_assert_int_eq(getsockname(fk->lfd, (struct sockaddr *)&sa, &sl), 0);
        snprintf(fk->address, sizeof fk->address, "tcp:127.0.0.1:%d", ntohs(sa.sin_port));
        fk->path[0] = '\0';
    } else {
        snprintf(fk->path, sizeof fk->path, "/tmp/poddb-test-proto-%d-%d.sock", (int)getpid(),
                 counter++);
        unlink(fk->path);
        fk->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        ck_assert_int_ge(fk->lfd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", fk->path);
        ck_assert_int_eq(bind(fk->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
        snprintf(fk->address, sizeof fk->address, "%s", fk->path);
    }
    ck_assert_int_eq(listen(fk->lfd, 4), 0);
    ck_assert_int_eq(pthread_create(&fk->th, NULL, fk->main ? fk->main : fake_main, fk), 0);
}

static void fake_stop(struct fake *fk)
{
    pthread_join(fk->th, NULL);
    close(fk->lfd);
    if (fk->path[0]) unlink(fk->path);
}

static pod_client *connect_ok(const struct fake *fk)
{
    char err[256] = "";
    pod_client *c = pod_client_connect(fk->address, err, sizeof err);
    ck_assert_msg(c != NULL, "connect %s: %s", fk->address, err);
    ck_assert_str_eq(pod_client_error(c), "");
    return c;
}

static void assert_bytes(const pod_value *v, const char *s)
{
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, POD_T_BYTES);
    ck_assert_uint_eq(v->len, strlen(s));
    ck_assert_int_eq(memcmp(v->u.bytes, s, v->len), 0);
}

/* ---- the client ------------------------------------------------------------------- */

static void client_calls(bool tcp)
{
    struct fake fk = {0};
    fake_start(&fk, tcp);
    pod_client *c = connect_ok(&fk);

    const pod_value args[] = {pod_v_str("users"), pod_v_i64(-42), pod_v_f64(0.25),
                              pod_v_bytes("", 0), {POD_T_NULL, 0, {.i64 = 0}}};
    pod_reply *r = pod_client_call(c, "echo", args, 5);
    ck_assert_msg(r != NULL, "%s", pod_client_error(c));
    ck_assert_uint_eq(pod_reply_id(r), 1);
    ck_assert_int_eq(pod_reply_status(r), POD_OK);
    ck_assert_str_eq(pod_reply_message(r), "");
    ck_assert_int_eq(pod_reply_nrows(r), 2);
    ck_assert_int_eq(pod_reply_ncols(r, 0), 2);
    ck_assert_int_eq(pod_reply_ncols(r, 1), 5);
    assert_bytes(pod_reply_value(r, 0, 0), "echo");
    ck_assert_int_eq(pod_reply_value(r, 0, 1)->u.i64, 0); /* flags */
    assert_bytes(pod_reply_value(r, 1, 0), "users");
    ck_assert_int_eq(pod_reply_value(r, 1, 1)->u.i64, -42);
    ck_assert(pod_reply_value(r, 1, 2)->u.f64 == 0.25);
    assert_bytes(pod_reply_value(r, 1, 3), "");
    assert_bytes(pod_reply_value(r, 1, 4), "<null>");
    /* Out of range. */
    ck_assert_ptr_null(pod_reply_value(r, 1, 5));
    ck_assert_ptr_null(pod_reply_value(r, 2, 0));
    ck_assert_ptr_null(pod_reply_value(r, -1, 0));
    ck_assert_ptr_null(pod_reply_value(r, 0, -1));
    ck_assert_int_eq(pod_reply_ncols(r, 2), 0);
    ck_assert_uint_eq(pod_client_pending(c), 0);
    pod_reply_free(r);

    /* Flags travel; ids increase. */
    r = pod_client_call_flags(c, "echo", NULL, 0, POD_CALL_EARLY_REPLY);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(pod_reply_id(r), 2);
    ck_assert_int_eq(pod_reply_value(r, 0, 1)->u.i64, POD_CALL_EARLY_REPLY);
    ck_assert_int_eq(pod_reply_nrows(r), 1); /* no args: the empty second row is dropped */
    pod_reply_free(r);

    /* A failed procedure is a reply with a negative status and a message. */
    r = pod_client_call(c, "fail", NULL, 0);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(pod_reply_status(r), POD_E_INVALID);
    ck_assert_str_eq(pod_reply_message(r), "you asked for it");
    ck_assert_int_eq(pod_reply_nrows(r), 0);
    ck_assert_ptr_null(pod_reply_value(r, 0, 0));
    pod_reply_free(r);

    /* Many rows of mixed types. */
    pod_value n = pod_v_i64(3000);
    r = pod_client_call(c, "rows", &n, 1);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(pod_reply_nrows(r), 3000);
    for (int i = 0; i < 3000; i += 7) {
        char s[32];
        snprintf(s, sizeof s, "row-%d", i);
        ck_assert_int_eq(pod_reply_ncols(r, i), 3);
        ck_assert_int_eq(pod_reply_value(r, i, 0)->u.i64, i);
        assert_bytes(pod_reply_value(r, i, 1), s);
        ck_assert(pod_reply_value(r, i, 2)->u.f64 == i / 2.0);
    }
    pod_reply_free(r);

    /* Calls that cannot be encoded fail without touching the connection. */
    pod_value bad = {(enum pod_type)8, 0, {.i64 = 0}};
    ck_assert_ptr_null(pod_client_call(c, "echo", &bad, 1));
    ASSERT_HAS(pod_client_error(c), "argument 1");
    ck_assert_ptr_null(pod_client_call(c, "", NULL, 0));
    ck_assert_uint_eq(pod_client_send(c, "echo", NULL, -1, 0), 0);
    ck_assert_uint_eq(pod_client_send(c, "echo", NULL, 0, 0x40), 0);
    ck_assert_uint_eq(pod_client_pending(c), 0);
    ck_assert_ptr_null(pod_client_recv(c));
    ASSERT_HAS(pod_client_error(c), "no calls pending");
    r = pod_client_call(c, "echo", NULL, 0);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(pod_reply_id(r), 5);
    pod_reply_free(r);

    pod_client_close(c);
    fake_stop(&fk);
    ck_assert_int_eq(fk.ncalls, 5);
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(fk.ids[i], (uint64_t)i + 1);
}

START_TEST(client_call_unix) { client_calls(false); }
END_TEST

START_TEST(client_call_tcp) { client_calls(true); }
END_TEST

START_TEST(client_pipelines_with_replies_in_reverse)
{
    enum { N = 100 };
    struct fake fk = {.batch = N, .reverse = true};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    char names[N][16];
    for (int i = 0; i < N; i++) {
        pod_value v = pod_v_i64(i * 10);
        snprintf(names[i], sizeof names[i], "p%d", i);
        ck_assert_uint_eq(pod_client_send(c, names[i], &v, 1, 0), (uint64_t)i + 1);
    }
    ck_assert_uint_eq(pod_client_pending(c), N);
    ck_assert_int_eq(pod_client_flush(c), 0);
    bool seen[N + 1] = {false};
    for (int i = 0; i < N; i++) {
        pod_reply *r = pod_client_recv(c);
        ck_assert_msg(r != NULL, "%s", pod_client_error(c));
        uint64_t id = pod_reply_id(r);
        ck_assert_uint_eq(id, (uint64_t)(N - i)); /* in the order they arrive */
        ck_assert(!seen[id]);
        seen[id] = true;
        assert_bytes(pod_reply_value(r, 0, 0), names[id - 1]);
        ck_assert_int_eq(pod_reply_value(r, 1, 0)->u.i64, (int64_t)(id - 1) * 10);
        pod_reply_free(r);
        ck_assert_uint_eq(pod_client_pending(c), (size_t)(N - i - 1));
    }
    ck_assert_ptr_null(pod_client_recv(c));
    pod_client_close(c);
    fake_stop(&fk);
    ck_assert_int_eq(fk.ncalls, N);
}
END_TEST

/* pod_client_call among pipelined calls: replies to the others that arrive
 * first are queued for pod_client_recv, not lost. */
static void call_among_pipelined(bool reverse)
{
    struct fake fk = {.batch = 4, .reverse = reverse};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    pod_value v[3] = {pod_v_i64(100), pod_v_i64(200), pod_v_i64(300)};
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(pod_client_send(c, "q", &v[i], 1, 0), (uint64_t)i + 1);
    pod_value w = pod_v_i64(400);
    pod_reply *r = pod_client_call(c, "call", &w, 1); /* flushes all four */
    ck_assert_msg(r != NULL, "%s", pod_client_error(c));
    ck_assert_uint_eq(pod_reply_id(r), 4);
    ck_assert_int_eq(pod_reply_value(r, 1, 0)->u.i64, 400);
    pod_reply_free(r);
    ck_assert_uint_eq(pod_client_pending(c), 3);
    for (int i = 0; i < 3; i++) {
        r = pod_client_recv(c);
        ck_assert_msg(r != NULL, "%s", pod_client_error(c));
        uint64_t want = reverse ? 3 - (uint64_t)i : (uint64_t)i + 1;
        ck_assert_uint_eq(pod_reply_id(r), want);
        ck_assert_int_eq(pod_reply_value(r, 1, 0)->u.i64, (int64_t)want * 100);
        pod_reply_free(r);
    }
    ck_assert_uint_eq(pod_client_pending(c), 0);
    /* A reply queued but never received is freed by close (ASan checks). */
    for (int i = 0; i < 3; i++) pod_client_send(c, "q", &v[i], 1, 0);
    r = pod_client_call(c, "call", &w, 1);
    ck_assert_ptr_nonnull(r);
    pod_reply_free(r);
    ck_assert_uint_eq(pod_client_pending(c), 3);
    pod_client_close(c);
    fake_stop(&fk);
}

START_TEST(client_call_queues_other_replies) { call_among_pipelined(false); }
END_TEST

START_TEST(client_call_with_reversed_batch) { call_among_pipelined(true); }
END_TEST

/* recv flushes calls that were sent but not flushed. */
START_TEST(client_recv_flushes)
{
    struct fake fk = {0};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    ck_assert_uint_eq(pod_client_send(c, "a", NULL, 0, 0), 1);
    pod_client_set_timeout(c, 5000);
    pod_reply *r = pod_client_recv(c);
    ck_assert_msg(r != NULL, "%s", pod_client_error(c));
    ck_assert_uint_eq(pod_reply_id(r), 1);
    pod_reply_free(r);
    pod_client_close(c);
    fake_stop(&fk);
}
END_TEST

/* A large pipeline: the client must read replies while it writes, or both
 * sides block on full socket buffers. */
START_TEST(client_large_pipeline_does_not_deadlock)
{
    enum { N = 20000 };
    struct fake fk = {0};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    pod_client_set_timeout(c, 20000);
    static char blob[2000];
    memset(blob, 'b', sizeof blob);
    pod_value v = pod_v_bytes(blob, sizeof blob);
    for (int i = 0; i < N; i++) ck_assert_uint_ne(pod_client_send(c, "big", &v, 1, 0), 0);
    ck_assert_msg(pod_client_flush(c) == 0, "%s", pod_client_error(c));
    for (int i = 0; i < N; i++) {
        pod_reply *r = pod_client_recv(c);
        ck_assert_msg(r != NULL, "%s", pod_client_error(c));
        ck_assert_uint_eq(pod_reply_id(r), (uint64_t)i + 1);
        ck_assert_uint_eq(pod_reply_value(r, 1, 0)->len, sizeof blob);
        pod_reply_free(r);
    }
    pod_client_close(c);
    fake_stop(&fk);
}
END_TEST

START_TEST(client_server_closes_after_a_call)
{
    struct fake fk = {.close_after = 1, .silent = true};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    ck_assert_ptr_null(pod_client_call(c, "x", NULL, 0));
    ck_assert_str_eq(pod_client_error(c), "connection closed by server");
    /* Every later operation fails the same way, without crashing. */
    ck_assert_ptr_null(pod_client_call(c, "x", NULL, 0));
    ASSERT_HAS(pod_client_error(c), "connection closed by server");
    ck_assert_uint_eq(pod_client_send(c, "x", NULL, 0, 0), 0);
    ck_assert_int_eq(pod_client_flush(c), -1);
    pod_client_close(c);
    fake_stop(&fk);
}
END_TEST

/* The server answers two of three calls and closes: the two replies are
 * still handed out, then the close is reported. */
START_TEST(client_gets_replies_sent_before_the_close)
{
    struct fake fk = {.close_after = 3, .answer_only = 2};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    for (int i = 0; i < 3; i++) pod_client_send(c, "x", NULL, 0, 0);
    ck_assert_int_eq(pod_client_flush(c), 0);
    for (int i = 0; i < 2; i++) {
        pod_reply *r = pod_client_recv(c);
        ck_assert_msg(r != NULL, "%s", pod_client_error(c));
        ck_assert_uint_eq(pod_reply_id(r), (uint64_t)i + 1);
        pod_reply_free(r);
    }
    ck_assert_ptr_null(pod_client_recv(c));
    ck_assert_str_eq(pod_client_error(c), "connection closed by server");
    ck_assert_uint_eq(pod_client_pending(c), 1);
    pod_client_close(c);
    fake_stop(&fk);
}
END_TEST

/* Writing to a closed connection is an error, not a SIGPIPE. */
START_TEST(client_survives_writing_to_a_closed_connection)
{
    signal(SIGPIPE, SIG_DFL);
    struct fake fk = {.close_at_once = true};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    fake_stop(&fk); /* the server side is closed now */
    static char blob[1 << 16];
    pod_value v = pod_v_bytes(blob, sizeof blob);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_null(pod_client_call(c, "x", &v, 1));
        ASSERT_HAS(pod_client_error(c), "connection closed by server");
    }
    pod_client_close(c);
}
END_TEST

START_TEST(client_timeout)
{
    struct fake fk = {.silent = true};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    pod_client_set_timeout(c, 200);
    double t0 = now_s();
    ck_assert_ptr_null(pod_client_call(c, "x", NULL, 0));
    double dt = now_s() - t0;
    ASSERT_HAS(pod_client_error(c), "timed out after 200 ms");
    ck_assert_msg(dt >= 0.15 && dt < 5.0, "waited %.3f s", dt);
    ck_assert_uint_eq(pod_client_pending(c), 0); /* call gave up on it */

    /* recv times out too; the call stays pending. */
    ck_assert_uint_eq(pod_client_send(c, "y", NULL, 0, 0), 2);
    ck_assert_int_eq(pod_client_flush(c), 0);
    t0 = now_s();
    ck_assert_ptr_null(pod_client_recv(c));
    dt = now_s() - t0;
    ASSERT_HAS(pod_client_error(c), "timed out");
    ck_assert_msg(dt >= 0.15 && dt < 5.0, "waited %.3f s", dt);
    ck_assert_uint_eq(pod_client_pending(c), 1);
    pod_client_close(c);
    fake_stop(&fk);
    ck_assert_int_eq(fk.ncalls, 2);
}
END_TEST

/* A call that timed out: its late reply is dropped, and the next call gets
 * its own reply. */
START_TEST(client_drops_late_reply_of_abandoned_call)
{
    struct fake fk = {.delay_first_ms = 400};
    fake_start(&fk, false);
    pod_client *c = connect_ok(&fk);
    pod_client_set_timeout(c, 100);
    ck_assert_ptr_null(pod_client_call(c, "slow", NULL, 0));
    ASSERT_HAS(pod_client_error(c), "timed out");
    pod_client_set_timeout(c, 0);
    pod_reply *r = pod_client_call(c, "fast", NULL, 0);
    ck_assert_msg(r != NULL, "%s", pod_client_error(c));
    ck_assert_uint_eq(pod_reply_id(r), 2);
    assert_bytes(pod_reply_value(r, 0, 0), "fast");
    pod_reply_free(r);
    ck_assert_uint_eq(pod_client_pending(c), 0);
    pod_client_close(c);
    fake_stop(&fk);
}
END_TEST

START_TEST(client_connect_errors)
{
    char err[256];
    char path[128];
    snprintf(path, sizeof path, "/tmp/poddb-test-proto-%d-missing.sock", (int)getpid());
    ck_assert_ptr_null(pod_client_connect(path, err, sizeof err));
    ASSERT_HAS(err, path);
    ASSERT_HAS(err, "No such file");
    ck_assert_ptr_null(pod_client_connect("", err, sizeof err));
    ck_assert_ptr_null(pod_client_connect(NULL, err, sizeof err));
    ck_assert_ptr_null(pod_client_connect("tcp:127.0.0.1", err, sizeof err));
    ASSERT_HAS(err, "expected tcp:HOST:PORT");
    ck_assert_ptr_null(pod_client_connect("tcp::80", err, sizeof err));
    ASSERT_HAS(err, "expected tcp:HOST:PORT");
    char longp[300];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    ck_assert_ptr_null(pod_client_connect(longp, err, sizeof err));
    ASSERT_HAS(err, "too long");
    /* A port nobody listens on: bind one, close it, connect. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    char addr[64];
    snprintf(addr, sizeof addr, "tcp:127.0.0.1:%d", ntohs(sa.sin_port));
    ck_assert_ptr_null(pod_client_connect(addr, err, sizeof err));
    ASSERT_HAS(err, "refused");
    /* NULL-safe accessors. */
    ck_assert_int_eq(pod_reply_nrows(NULL), 0);
    ck_assert_ptr_null(pod_reply_value(NULL, 0, 0));
    ck_assert_str_eq(pod_reply_message(NULL), "");
    pod_reply_free(NULL);
    pod_client_close(NULL);
}
END_TEST

/* A server that sends garbage: a clear error, no crash. */
static void *garbage_server(void *arg)
{
    struct fake *fk = arg;
    int fd = accept(fk->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    unsigned char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    (void)n;
    if (fk->garbage == 1) { /* a reply (to request 1) with a bad value type */
        memcpy(buf, kv_get_reply, sizeof kv_get_reply);
        buf[30] = 0x42;
        write_all(fd, buf, sizeof kv_get_reply);
    } else { /* an out-of-range length */
        put32(buf, 0xfffffff0u);
        write_all(fd, buf, 16);
    }
    /* Wait for the client to go away. */
    while (recv(fd, buf, sizeof buf, 0) > 0) {}
    close(fd);
    return NULL;
}

START_TEST(client_rejects_malformed_replies)
{
    for (int mode = 1; mode <= 2; mode++) {
        struct fake fk = {.main = garbage_server, .garbage = mode};
        fake_start(&fk, false);
        pod_client *c = connect_ok(&fk);
        ck_assert_ptr_null(pod_client_call(c, "kv.get", NULL, 0));
        ASSERT_HAS(pod_client_error(c), "malformed reply from server");
        if (mode == 1) ASSERT_HAS(pod_client_error(c), "unknown value type 66");
        else ASSERT_HAS(pod_client_error(c), "out of range");
        pod_client_close(c);
        fake_stop(&fk);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proto");
    TCase *codec = tu_tcase(s, "codec", 60);
    tcase_add_test(codec, call_round_trip_by_name);
    tcase_add_test(codec, call_round_trip_by_id);
    tcase_add_test(codec, call_zero_and_many_args);
    tcase_add_test(codec, encode_rejects_what_cannot_be_sent);
    tcase_add_test(codec, byte_layout_matches_the_documented_example);
    tcase_add_test(codec, reply_round_trip_no_rows);
    tcase_add_test(codec, reply_round_trip_many_rows);
    tcase_add_test(codec, reply_with_nulls_by_hand);
    tcase_add_test(codec, frame_size_on_partial_buffers);
    tcase_add_test(codec, truncated_frames_at_every_length);
    tcase_add_test(codec, decoding_rejects_malformed_frames);
    tcase_add_test(codec, fuzz_decoders_never_crash);
    TCase *client = tu_tcase(s, "client", 60);
    tcase_add_test(client, client_call_unix);
    tcase_add_test(client, client_call_tcp);
    tcase_add_test(client, client_pipelines_with_replies_in_reverse);
    tcase_add_test(client, client_call_queues_other_replies);
    tcase_add_test(client, client_call_with_reversed_batch);
    tcase_add_test(client, client_recv_flushes);
    tcase_add_test(client, client_large_pipeline_does_not_deadlock);
    tcase_add_test(client, client_server_closes_after_a_call);
    tcase_add_test(client, client_gets_replies_sent_before_the_close);
    tcase_add_test(client, client_survives_writing_to_a_closed_connection);
    tcase_add_test(client, client_timeout);
    tcase_add_test(client, client_drops_late_reply_of_abandoned_call);
    tcase_add_test(client, client_connect_errors);
    tcase_add_test(client, client_rejects_malformed_replies);
    return tu_run(s);
}
