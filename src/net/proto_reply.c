/* Encoding a REPLY from an engine result. Apart from proto.c because it reads
 * pod_result through the engine's accessors, and the client library (which
 * only decodes replies) must not need the engine. */
#include <string.h>

#include "net/proto.h"

int pod_proto_encode_reply(struct pod_buf *out, uint64_t request_id, int32_t status,
                           const char *msg, const pod_result *rows)
{
    size_t msg_len = msg ? strlen(msg) : 0;
    if (msg_len > POD_PROTO_MAX_FRAME) return -1;
    int nrows = rows ? pod_result_nrows(rows) : 0;
    if (nrows < 0) return -1;
    uint64_t size = POD_PROTO_HEADER + 4 + 4 + msg_len + 4;
    for (int i = 0; i < nrows; i++) {
        int ncols = pod_result_ncols(rows, i);
        if (ncols < 0 || ncols > UINT16_MAX) return -1;
        size += 2;
        for (int c = 0; c < ncols; c++) {
            pod_value v;
            if (pod_result_get(rows, i, c, &v) != 0) return -1;
            size_t vs = pod_proto_value_size(&v);
            if (vs == 0) return -1;
            size += vs;
        }
        if (size - 4 > POD_PROTO_MAX_FRAME) return -1;
    }
    if (size - 4 > POD_PROTO_MAX_FRAME) return -1;
    if (pod_buf_reserve(out, (size_t)size) != 0) return -1;
    unsigned char *p = out->p + out->len;
    p = pod_proto_put_header(p, (size_t)size, POD_FRAME_REPLY, 0, request_id);
    p = pod_proto_put_u32(p, (uint32_t)status);
    p = pod_proto_put_u32(p, (uint32_t)msg_len);
    if (msg_len) memcpy(p, msg, msg_len);
    p += msg_len;
    p = pod_proto_put_u32(p, (uint32_t)nrows);
    for (int i = 0; i < nrows; i++) {
        int ncols = pod_result_ncols(rows, i);
        p = pod_proto_put_u16(p, (uint16_t)ncols);
        for (int c = 0; c < ncols; c++) {
            pod_value v;
            pod_result_get(rows, i, c, &v);
            p = pod_proto_put_value(p, &v);
        }
    }
    out->len += (size_t)size;
    return 0;
}
