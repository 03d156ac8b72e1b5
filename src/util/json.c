#include "util/json.h"

#include <math.h>
#include <inttypes.h>

void json_init(struct json_writer *w, FILE *out)
{
    w->out = out;
    w->depth = 0;
    w->need_comma[0] = false;
    w->after_key = false;
}

/* Before any value: a comma if a sibling came before (not after a key). */
static void before_value(struct json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->need_comma[w->depth]) fputc(',', w->out);
    w->need_comma[w->depth] = true;
}

static void open_(struct json_writer *w, char c)
{
    before_value(w);
    fputc(c, w->out);
    if (w->depth < 31) w->depth++;
    w->need_comma[w->depth] = false;
}

static void close_(struct json_writer *w, char c)
{
    if (w->depth > 0) w->depth--;
    fputc(c, w->out);
}

void json_obj_begin(struct json_writer *w) { open_(w, '{'); }
void json_obj_end(struct json_writer *w) { close_(w, '}'); }
void json_arr_begin(struct json_writer *w) { open_(w, '['); }
void json_arr_end(struct json_writer *w) { close_(w, ']'); }

static void put_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20) fprintf(out, "\\u%04x", *p);
            else fputc(*p, out);
        }
    }
    fputc('"', out);
}

void json_key(struct json_writer *w, const char *k)
{
    before_value(w);
    put_escaped(w->out, k);
    fputc(':', w->out);
    w->after_key = true;
}

void json_str(struct json_writer *w, const char *s)
{
    before_value(w);
    put_escaped(w->out, s ? s : "");
}

void json_u64(struct json_writer *w, uint64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRIu64, v);
}

void json_i64(struct json_writer *w, int64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRId64, v);
}

void json_f64(struct json_writer *w, double v)
{
    before_value(w);
    if (isfinite(v)) fprintf(w->out, "%.17g", v);
    else fputs("null", w->out); /* JSON has no NaN or infinity */
}

void json_bool(struct json_writer *w, bool v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->out);
}

void json_null(struct json_writer *w)
{
    before_value(w);
    fputs("null", w->out);
}

void json_kv_str(struct json_writer *w, const char *k, const char *s) { json_key(w, k); json_str(w, s); }
void json_kv_u64(struct json_writer *w, const char *k, uint64_t v) { json_key(w, k); json_u64(w, v); }
void json_kv_i64(struct json_writer *w, const char *k, int64_t v) { json_key(w, k); json_i64(w, v); }
void json_kv_f64(struct json_writer *w, const char *k, double v) { json_key(w, k); json_f64(w, v); }
void json_kv_bool(struct json_writer *w, const char *k, bool v) { json_key(w, k); json_bool(w, v); }
