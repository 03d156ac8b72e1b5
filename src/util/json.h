/* A minimal streaming JSON writer: commas and string escaping are handled;
 * nesting up to 32 levels. Output is one line (no newlines inside). */
#ifndef PODDB_UTIL_JSON_H
#define PODDB_UTIL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct json_writer {
    FILE *out;
    int depth;
    bool need_comma[32];
    bool after_key;
};

void json_init(struct json_writer *w, FILE *out);
void json_obj_begin(struct json_writer *w);
void json_obj_end(struct json_writer *w);
void json_arr_begin(struct json_writer *w);
void json_arr_end(struct json_writer *w);
void json_key(struct json_writer *w, const char *k);
void json_str(struct json_writer *w, const char *s);
void json_u64(struct json_writer *w, uint64_t v);
void json_i64(struct json_writer *w, int64_t v);
void json_f64(struct json_writer *w, double v);
void json_bool(struct json_writer *w, bool v);
void json_null(struct json_writer *w);

/* key + value shorthands */
void json_kv_str(struct json_writer *w, const char *k, const char *s);
void json_kv_u64(struct json_writer *w, const char *k, uint64_t v);
void json_kv_i64(struct json_writer *w, const char *k, int64_t v);
void json_kv_f64(struct json_writer *w, const char *k, double v);
void json_kv_bool(struct json_writer *w, const char *k, bool v);

#endif
