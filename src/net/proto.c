/* The wire protocol codec (proto.h; docs/protocol.md is the specification).
 *
 * Every integer is read and written byte by byte in little-endian order, so
 * the codec neither depends on the host's byte order nor makes unaligned
 * accesses. The decoders trust nothing: every field is checked against the
 * end of the frame before it is read, counts are checked against the bytes
 * that remain before anything is sized by them, and every error message names
 * the field that is wrong. This file is part of the client library: it must
 * not use the engine (pod_proto_encode_reply is in proto_reply.c). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/proto.h"

/* ---- buffers ---------------------------------------------------------------- */

void pod_buf_free(struct pod_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int pod_buf_reserve(struct pod_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len) return -1;
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : 2 * cap;
    unsigned char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

void pod_buf_consume(struct pod_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

/* ---- little-endian primitives ----------------------------------------------- */

unsigned char *pod_proto_put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

unsigned char *pod_proto_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++, v >>= 8) p[i] = (unsigned char)v;
    return p + 4;
}

unsigned char *pod_proto_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8) p[i] = (unsigned char)v;
    return p + 8;
}

static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- encoding ----------------------------------------------------------------- */

size_t pod_proto_value_size(const pod_value *v)
{
    switch (v->type) {
    case POD_T_NULL: return 1;
    case POD_T_I64:
    case POD_T_F64: return 1 + 8;
    case POD_T_BYTES: return 1 + 4 + (size_t)v->len;
    default: return 0;
    }
}

unsigned char *pod_proto_put_value(unsigned char *p, const pod_value *v)
{
    *p++ = (unsigned char)v->type;
    switch (v->type) {
    case POD_T_I64: return pod_proto_put_u64(p, (uint64_t)v->u.i64);
    case POD_T_F64: {
        uint64_t bits;
        memcpy(&bits, &v->u.f64, sizeof bits);
        return pod_proto_put_u64(p, bits);
    }
    case POD_T_BYTES:
        p = pod_proto_put_u32(p, v->len);
        if (v->len) memcpy(p, v->u.bytes, v->len);
        return p + v->len;
    default: return p;
    }
}

unsigned char *pod_proto_put_header(unsigned char *p, size_t total_size, uint8_t kind,
                                    uint8_t flags, uint64_t request_id)
{
    p = pod_proto_put_u32(p, (uint32_t)(total_size - 4));
    *p++ = kind;
    *p++ = flags;
    p = pod_proto_put_u16(p, 0);
    return pod_proto_put_u64(p, request_id);
}

int pod_proto_encode_call(struct pod_buf *out, uint64_t request_id, uint8_t flags,
                          const char *proc_name, uint32_t proc_id, const pod_value *args,
                          int nargs)
{
    if (nargs < 0 || nargs > UINT16_MAX || (nargs > 0 && !args)) return -1;
    /* An empty name cannot be sent (name_len 0 means: by id), so it is a call by id. */
    size_t name_len = proc_name ? strlen(proc_name) : 0;
    if (name_len > UINT16_MAX) return -1;
    uint64_t size = POD_PROTO_HEADER + 2 + (name_len ? name_len : 4) + 2;
    for (int i = 0; i < nargs; i++) {
        size_t vs = pod_proto_value_size(&args[i]);
        if (vs == 0 || (args[i].type == POD_T_BYTES && args[i].len && !args[i].u.bytes))
            return -1;
        size += vs;
        if (size - 4 > POD_PROTO_MAX_FRAME) return -1;
    }
    if (size - 4 > POD_PROTO_MAX_FRAME) return -1;
    if (pod_buf_reserve(out, (size_t)size) != 0) return -1;
    unsigned char *p = out->p + out->len;
    p = pod_proto_put_header(p, (size_t)size, POD_FRAME_CALL, flags, request_id);
    p = pod_proto_put_u16(p, (uint16_t)name_len);
    if (name_len) {
        memcpy(p, proc_name, name_len);
        p += name_len;
    } else {
        p = pod_proto_put_u32(p, proc_id);
    }
    p = pod_proto_put_u16(p, (uint16_t)nargs);
    for (int i = 0; i < nargs; i++) p = pod_proto_put_value(p, &args[i]);
    out->len += (size_t)size;
    return 0;
}

/* ---- decoding ----------------------------------------------------------------- */

long pod_proto_frame_size(const unsigned char *buf, size_t len)
{
    if (len < 4) return 0;
    uint32_t n = get_u32(buf);
    if (n == 0 || n > POD_PROTO_MAX_FRAME) return -1;
    if (len - 4 < n) return 0;
    return 4 + (long)n;
}

static void __attribute__((format(printf, 3, 4)))
fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A read position in a frame. */
struct rd {
    const unsigned char *p, *end;
};

static size_t left(const struct rd *r) { return (size_t)(r->end - r->p); }

static const char *type_name(unsigned t)
{
    switch (t) {
    case POD_T_NULL: return "null";
    case POD_T_I64: return "i64";
    case POD_T_F64: return "f64";
    case POD_T_BYTES: return "bytes";
    default: return "?";
    }
}

/* Where a value is, for messages: "argument 3" (row == 0) or "row 2 column 1".
 * Formatted only when something is wrong. */
struct where {
    uint32_t row; /* counting from 1; 0: an argument */
    unsigned i;   /* the argument or column, counting from 1 */
    char s[48];
};

static const char *where_str(struct where *w)
{
    if (w->row)
        snprintf(w->s, sizeof w->s, "row %" PRIu32 " column %u", w->row, w->i);
    else
        snprintf(w->s, sizeof w->s, "argument %u", w->i);
    return w->s;
}

/* Read one value; out may be NULL (skip the value). */
static int read_value(struct rd *r, pod_value *out, struct where *wh, char *err, size_t errlen)
{
    if (left(r) < 1) {
        fail(err, errlen, "%s: value type runs past the frame end", where_str(wh));
        return -1;
    }
    unsigned t = *r->p++;
    pod_value v = {POD_T_NULL, 0, {.i64 = 0}};
    switch (t) {
    case POD_T_NULL: break;
    case POD_T_I64:
    case POD_T_F64:
        if (left(r) < 8) {
            fail(err, errlen, "%s: %s value needs 8 bytes, %zu left before the frame end",
                 where_str(wh), type_name(t), left(r));
            return -1;
        }
        v.type = (enum pod_type)t;
        if (t == POD_T_I64) {
            v.u.i64 = (int64_t)get_u64(r->p);
        } else {
            uint64_t bits = get_u64(r->p);
            memcpy(&v.u.f64, &bits, sizeof bits);
        }
        r->p += 8;
        break;
    case POD_T_BYTES: {
        if (left(r) < 4) {
            fail(err, errlen, "%s: bytes length runs past the frame end", where_str(wh));
            return -1;
        }
        uint32_t n = get_u32(r->p);
        r->p += 4;
        if (n > left(r)) {
            fail(err, errlen, "%s: bytes length %" PRIu32 " runs past the frame end (%zu bytes left)",
                 where_str(wh), n, left(r));
            return -1;
        }
        v.type = POD_T_BYTES;
        v.len = n;
        v.u.bytes = r->p;
        r->p += n;
        break;
    }
    default:
        fail(err, errlen, "%s: unknown value type %u", where_str(wh), t);
        return -1;
    }
    if (out) *out = v;
    return 0;
}

/* The header shared by both kinds: checks len against frame_len, reads
 * request_id, checks kind, flags (against allowed_flags) and reserved. */
static int read_header(const unsigned char *frame, size_t frame_len, uint8_t want_kind,
                       uint8_t allowed_flags, uint64_t *request_id, uint8_t *flags, char *err,
                       size_t errlen)
{
    *request_id = 0;
    if (!frame || frame_len < 4) {
        fail(err, errlen, "frame of %zu bytes is shorter than its 4-byte length field", frame_len);
        return -1;
    }
    uint32_t n = get_u32(frame);
    if (n == 0 || n > POD_PROTO_MAX_FRAME) {
        fail(err, errlen, "length field %" PRIu32 " is out of range (1 .. %u)", n,
             POD_PROTO_MAX_FRAME);
        return -1;
    }
    if ((size_t)n != frame_len - 4) {
        fail(err, errlen, "length field %" PRIu32 " does not match the frame size %zu (expected %zu)",
             n, frame_len, frame_len - 4);
        return -1;
    }
    if (frame_len < POD_PROTO_HEADER) {
        fail(err, errlen, "frame of %zu bytes is shorter than the %d-byte header", frame_len,
             POD_PROTO_HEADER);
        return -1;
    }
    *request_id = get_u64(frame + 8);
    uint8_t kind = frame[4];
    if (kind != want_kind) {
        if (kind == POD_FRAME_CALL || kind == POD_FRAME_REPLY)
            fail(err, errlen, "kind %u (%s) where a %s (%u) was expected", kind,
                 kind == POD_FRAME_CALL ? "call" : "reply",
                 want_kind == POD_FRAME_CALL ? "call" : "reply", want_kind);
        else
            fail(err, errlen, "unknown frame kind %u", kind);
        return -1;
    }
    *flags = frame[5];
    if (*flags & ~allowed_flags) {
        fail(err, errlen, "unknown flags 0x%02x", (unsigned)(*flags & ~allowed_flags));
        return -1;
    }
    uint16_t reserved = get_u16(frame + 6);
    if (reserved != 0) {
        fail(err, errlen, "reserved field is %u, must be 0", reserved);
        return -1;
    }
    return 0;
}

int pod_proto_decode_call(const unsigned char *frame, size_t frame_len,
                          struct pod_call_frame *call, int args_cap, char *err, size_t errlen)
{
    pod_value *args = call->args;
    memset(call, 0, sizeof *call);
    call->args = args;
    if (err && errlen) err[0] = '\0';
    if (read_header(frame, frame_len, POD_FRAME_CALL, POD_CALL_EARLY_REPLY, &call->request_id,
                    &call->flags, err, errlen) != 0)
        return -1;
    struct rd r = {frame + POD_PROTO_HEADER, frame + frame_len};
    if (left(&r) < 2) {
        fail(err, errlen, "name_len runs past the frame end");
        return -1;
    }
    uint16_t name_len = get_u16(r.p);
    r.p += 2;
    if (name_len == 0) {
        if (left(&r) < 4) {
            fail(err, errlen, "proc_id runs past the frame end");
            return -1;
        }
        call->proc_id = get_u32(r.p);
        r.p += 4;
    } else {
        if (name_len > left(&r)) {
            fail(err, errlen, "name_len %u runs past the frame end (%zu bytes left)", name_len,
                 left(&r));
            return -1;
        }
        if (memchr(r.p, '\0', name_len)) {
            fail(err, errlen, "procedure name contains a NUL byte");
            return -1;
        }
        call->name = (const char *)r.p;
        call->name_len = name_len;
        r.p += name_len;
    }
    if (left(&r) < 2) {
        fail(err, errlen, "nargs runs past the frame end");
        return -1;
    }
    uint16_t nargs = get_u16(r.p);
    r.p += 2;
    if (args_cap < 0 || !args) args_cap = 0;
    if (nargs > args_cap) {
        fail(err, errlen, "too many arguments (%u, at most %d)", nargs, args_cap);
        return -1;
    }
    if (nargs > left(&r)) {
        fail(err, errlen, "nargs %u runs past the frame end (%zu bytes left, each value takes at least 1)",
             nargs, left(&r));
        return -1;
    }
    struct where wh = {0, 0, ""};
    for (unsigned i = 0; i < nargs; i++) {
        wh.i = i + 1;
        if (read_value(&r, &args[i], &wh, err, errlen) != 0) return -1;
    }
    if (left(&r)) {
        fail(err, errlen, "%zu unexpected bytes after the last argument", left(&r));
        return -1;
    }
    call->nargs = nargs;
    return 0;
}

/* Read one row (ncols, then values); row is 0-based, messages count from 1. */
static int read_row(struct rd *r, uint32_t row, pod_value *vals, int cap, int *ncols, char *err,
                    size_t errlen)
{
    if (left(r) < 2) {
        fail(err, errlen, "row %" PRIu32 ": ncols runs past the frame end", row + 1);
        return -1;
    }
    uint16_t n = get_u16(r->p);
    r->p += 2;
    if (n > left(r)) {
        fail(err, errlen, "row %" PRIu32 ": ncols %u runs past the frame end (%zu bytes left)",
             row + 1, n, left(r));
        return -1;
    }
    struct where wh = {row + 1, 0, ""};
    for (unsigned c = 0; c < n; c++) {
        wh.i = c + 1;
        if (read_value(r, (int)c < cap ? &vals[c] : NULL, &wh, err, errlen) != 0) return -1;
    }
    if (ncols) *ncols = n;
    return 0;
}

int pod_proto_decode_reply(const unsigned char *frame, size_t frame_len,
                           struct pod_reply_frame *reply, char *err, size_t errlen)
{
    memset(reply, 0, sizeof *reply);
    if (err && errlen) err[0] = '\0';
    uint8_t flags;
    if (read_header(frame, frame_len, POD_FRAME_REPLY, 0, &reply->request_id, &flags, err,
                    errlen) != 0)
        return -1;
    struct rd r = {frame + POD_PROTO_HEADER, frame + frame_len};
    if (left(&r) < 4) {
        fail(err, errlen, "status runs past the frame end");
        return -1;
    }
    int32_t status = (int32_t)get_u32(r.p);
    r.p += 4;
    if (left(&r) < 4) {
        fail(err, errlen, "msg_len runs past the frame end");
        return -1;
    }
    uint32_t msg_len = get_u32(r.p);
    r.p += 4;
    if (msg_len > left(&r)) {
        fail(err, errlen, "msg_len %" PRIu32 " runs past the frame end (%zu bytes left)", msg_len,
             left(&r));
        return -1;
    }
    const char *msg = (const char *)r.p;
    r.p += msg_len;
    if (left(&r) < 4) {
        fail(err, errlen, "nrows runs past the frame end");
        return -1;
    }
    uint32_t nrows = get_u32(r.p);
    r.p += 4;
    if (nrows > left(&r) / 2) {
        fail(err, errlen, "nrows %" PRIu32 " runs past the frame end (%zu bytes left, each row takes at least 2)",
             nrows, left(&r));
        return -1;
    }
    const unsigned char *rows = r.p;
    /* Walk the rows once, so that a decoded reply is known to be well formed. */
    for (uint32_t i = 0; i < nrows; i++)
        if (read_row(&r, i, NULL, 0, NULL, err, errlen) != 0) return -1;
    if (left(&r)) {
        fail(err, errlen, "%zu unexpected bytes after the last row", left(&r));
        return -1;
    }
    reply->status = status;
    reply->msg = msg;
    reply->msg_len = msg_len;
    reply->nrows = nrows;
    reply->rows = rows;
    reply->end = frame + frame_len;
    return 0;
}

int pod_proto_next_row(const struct pod_reply_frame *reply, const unsigned char **cursor,
                       pod_value *vals, int cap, int *ncols)
{
    if (!reply || !cursor || !*cursor || !reply->end || *cursor < reply->rows ||
        *cursor >= reply->end)
        return -1;
    if (!vals) cap = 0;
    struct rd r = {*cursor, reply->end};
    int n = 0;
    if (read_row(&r, 0, vals, cap, &n, NULL, 0) != 0) return -1;
    *cursor = r.p;
    if (ncols) *ncols = n;
    return 0;
}
