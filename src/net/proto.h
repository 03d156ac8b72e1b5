/* The PodDB wire protocol: length-prefixed binary frames over a stream socket
 * (Unix-domain, or TCP on loopback). docs/protocol.md is the specification;
 * this header is its C form, shared by the server and the client library.
 *
 * All integers are little-endian. A frame is
 *
 *     u32 len            bytes that follow this field (1 .. POD_PROTO_MAX_FRAME)
 *     u8  kind           POD_FRAME_CALL or POD_FRAME_REPLY
 *     u8  flags          CALL: POD_CALL_EARLY_REPLY; REPLY: 0
 *     u16 reserved       0
 *     u64 request_id     chosen by the client, echoed in the reply
 *     ... body
 *
 * CALL body:
 *     u16 name_len       0 means: call by id
 *     name_len bytes     the procedure name (no NUL), or if name_len == 0:
 *     u32 proc_id        the id from sys.procs
 *     u16 nargs
 *     nargs values
 *
 * REPLY body:
 *     i32 status         enum pod_status (0 = ok; > 0 outcomes; < 0 errors)
 *     u32 msg_len, msg   an error message (UTF-8, no NUL), empty on success
 *     u32 nrows
 *     nrows rows:  u16 ncols, ncols values
 *
 * A value is  u8 type, then  I64: i64 | F64: f64 (IEEE 754) | BYTES: u32 n, n bytes | NULL: nothing.
 *
 * Requests on one connection may be pipelined; replies to them may come in any
 * order (match them by request_id). */
#ifndef PODDB_NET_PROTO_H
#define PODDB_NET_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "poddb/client.h"
#include "poddb/proc.h"

#define POD_PROTO_MAX_FRAME (16u << 20) /* largest len accepted */
#define POD_PROTO_HEADER 16             /* len .. request_id */

enum pod_frame_kind { POD_FRAME_CALL = 1, POD_FRAME_REPLY = 2 };
/* Call flags (POD_CALL_EARLY_REPLY) are public: include/poddb/client.h. */

/* A growable byte buffer. */
struct pod_buf {
    unsigned char *p;
    size_t len, cap;
};
void pod_buf_free(struct pod_buf *b);
int pod_buf_reserve(struct pod_buf *b, size_t extra); /* 0 or -1 (out of memory) */
void pod_buf_consume(struct pod_buf *b, size_t n);    /* drop n bytes from the front */

/* ---- encoding (append a whole frame to out; 0 or -1 on out of memory or a
 * frame that would exceed POD_PROTO_MAX_FRAME) ---- */
int pod_proto_encode_call(struct pod_buf *out, uint64_t request_id, uint8_t flags,
                          const char *proc_name, uint32_t proc_id, const pod_value *args,
                          int nargs);
/* rows: a result (NULL: no rows). */
int pod_proto_encode_reply(struct pod_buf *out, uint64_t request_id, int32_t status,
                           const char *msg, const pod_result *rows);

/* ---- decoding ---- */

/* How many bytes the frame at the start of buf occupies (4 + len): 0 if more
 * bytes are needed (fewer than 4, or the frame is not complete yet), -1 if the
 * length field is out of range (the stream cannot be framed: close it). The
 * length is checked as soon as its 4 bytes are there. A positive answer is
 * never more than len. */
long pod_proto_frame_size(const unsigned char *buf, size_t len);

/* A decoded CALL. Pointers (name, byte values) point into the frame. */
struct pod_call_frame {
    uint64_t request_id;
    uint8_t flags;
    const char *name;    /* NULL when called by id */
    uint16_t name_len;
    uint32_t proc_id;
    uint16_t nargs;
    pod_value *args;     /* nargs entries, in caller-provided storage */
};

/* Decode one complete frame (exactly frame_len bytes). args_cap entries are
 * available at call->args. Returns 0, or -1 with a message in err naming
 * what is malformed; request_id is filled whenever the header was readable
 * (so the error can be answered). */
int pod_proto_decode_call(const unsigned char *frame, size_t frame_len,
                          struct pod_call_frame *call, int args_cap, char *err, size_t errlen);

/* A decoded REPLY: values point into the frame. */
struct pod_reply_frame {
    uint64_t request_id;
    int32_t status;
    const char *msg;
    uint32_t msg_len;
    uint32_t nrows;
    const unsigned char *rows; /* the encoded rows, for pod_proto_next_row */
    const unsigned char *end;
};
int pod_proto_decode_reply(const unsigned char *frame, size_t frame_len,
                           struct pod_reply_frame *reply, char *err, size_t errlen);
/* Iterate rows of a decoded reply: fills up to cap values of the next row,
 * sets *ncols, advances *cursor (start with reply->rows). 0, or -1 if malformed. */
int pod_proto_next_row(const struct pod_reply_frame *reply, const unsigned char **cursor,
                       pod_value *vals, int cap, int *ncols);

/* ---- building blocks for encoders (pod_proto_encode_reply lives apart from
 * proto.c so that the client library does not need the engine) ----
 * Each put writes at p, which must have room, and returns the byte after. */
size_t pod_proto_value_size(const pod_value *v); /* encoded size; 0: unknown type */
unsigned char *pod_proto_put_u16(unsigned char *p, uint16_t v);
unsigned char *pod_proto_put_u32(unsigned char *p, uint32_t v);
unsigned char *pod_proto_put_u64(unsigned char *p, uint64_t v);
unsigned char *pod_proto_put_value(unsigned char *p, const pod_value *v);
/* The 16-byte header of a frame of total_size bytes (len = total_size - 4). */
unsigned char *pod_proto_put_header(unsigned char *p, size_t total_size, uint8_t kind,
                                    uint8_t flags, uint64_t request_id);

#endif
