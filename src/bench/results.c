#include "bench/results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_run_result_init(struct bench_run_result *r)
{
    memset(r, 0, sizeof *r);
    hist_init(&r->lat);
}

void bench_run_result_free(struct bench_run_result *r)
{
    free(r->per_sec);
    r->per_sec = NULL;
    r->nsec = 0;
}

int bench_run_result_merge(struct bench_run_result *a, const struct bench_run_result *b)
{
    a->wl = b->wl;
    a->workers += b->workers;
    a->terminals += b->terminals;
    if (b->measured_s > a->measured_s) a->measured_s = b->measured_s;
    bench_tally_merge(&a->measured, &b->measured);
    bench_tally_merge(&a->all, &b->all);
    for (int c = 0; c < POD_CAUSE_COUNT; c++) a->conflicts[c] += b->conflicts[c];
    a->gave_up += b->gave_up;
    hist_merge(&a->lat, &b->lat);
    if (b->nsec > a->nsec) {
        uint64_t *p = realloc(a->per_sec, b->nsec * sizeof *p);
        if (!p) return -1;
        memset(p + a->nsec, 0, (b->nsec - a->nsec) * sizeof *p);
        a->per_sec = p;
        a->nsec = b->nsec;
    }
    for (uint32_t i = 0; i < b->nsec; i++) a->per_sec[i] += b->per_sec[i];
    if (!a->knobs[0]) snprintf(a->knobs, sizeof a->knobs, "%s", b->knobs);
    if (!a->first_error[0] && b->first_error[0])
        snprintf(a->first_error, sizeof a->first_error, "%s", b->first_error);
    return 0;
}

/* ---- reading rows ----------------------------------------------------------------- */

static int result_nrows(const void *src) { return pod_result_nrows(src); }
static const pod_value *result_get(const void *src, int row, int col, pod_value *tmp)
{
    return pod_result_get(src, row, col, tmp) == 0 ? tmp : NULL;
}
static int reply_nrows(const void *src) { return pod_reply_nrows(src); }
static const pod_value *reply_get(const void *src, int row, int col, pod_value *tmp)
{
    (void)tmp;
    return pod_reply_value(src, row, col);
}

struct bench_rows bench_rows_of_result(const pod_result *r)
{
    return (struct bench_rows){r, result_nrows, result_get};
}

struct bench_rows bench_rows_of_reply(const pod_reply *r)
{
    return (struct bench_rows){r, reply_nrows, reply_get};
}

static bool get_i64(const struct bench_rows *rs, int row, int col, int64_t *out)
{
    pod_value tmp;
    const pod_value *v = rs->get(rs->src, row, col, &tmp);
    if (!v || v->type != POD_T_I64) return false;
    *out = v->u.i64;
    return true;
}

static bool get_u64(const struct bench_rows *rs, int row, int col, uint64_t *out)
{
    int64_t v;
    if (!get_i64(rs, row, col, &v) || v < 0) return false;
    *out = (uint64_t)v;
    return true;
}

static bool get_f64(const struct bench_rows *rs, int row, int col, double *out)
{
    pod_value tmp;
    const pod_value *v = rs->get(rs->src, row, col, &tmp);
    if (!v || v->type != POD_T_F64) return false;
    *out = v->u.f64;
    return true;
}

static bool get_str(const struct bench_rows *rs, int row, int col, char *out, size_t n)
{
    pod_value tmp;
    const pod_value *v = rs->get(rs->src, row, col, &tmp);
    if (!v || v->type != POD_T_BYTES) return false;
    size_t len = v->len < n - 1 ? v->len : n - 1;
    memcpy(out, v->u.bytes, len);
    out[len] = 0;
    return true;
}

static bool get_bytes(const struct bench_rows *rs, int row, int col, const void **p, uint32_t *len)
{
    pod_value tmp;
    const pod_value *v = rs->get(rs->src, row, col, &tmp);
    if (!v || v->type != POD_T_BYTES) return false;
    *p = v->u.bytes;
    *len = v->len;
    return true;
}

/* The row whose first value is tag, or -1. */
static int find_row(const struct bench_rows *rs, const char *tag)
{
    int n = rs->nrows(rs->src);
    for (int r = 0; r < n; r++) {
        char t[16];
        if (get_str(rs, r, 0, t, sizeof t) && strcmp(t, tag) == 0) return r;
    }
    return -1;
}

/* ---- runs ---------------------------------------------------------------------------- */

static void put_tally(pod_result *res, const char *tag, const struct bench_tally *t)
{
    pod_result_row(res);
    pod_result_str(res, tag);
    const uint64_t *arrays[4] = {t->calls, t->commits, t->user_aborts, t->errors};
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < BENCH_MAX_TYPES; i++) pod_result_i64(res, (int64_t)arrays[a][i]);
    pod_result_i64(res, (int64_t)t->rollbacks);
    pod_result_i64(res, (int64_t)t->remote_calls);
    pod_result_i64(res, (int64_t)t->remote_commits);
    pod_result_i64(res, (int64_t)t->rmw_ops);
    pod_result_i64(res, t->net);
}

static bool read_tally(const struct bench_rows *rs, int row, struct bench_tally *t)
{
    uint64_t *arrays[4] = {t->calls, t->commits, t->user_aborts, t->errors};
    int col = 1;
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < BENCH_MAX_TYPES; i++)
            if (!get_u64(rs, row, col++, &arrays[a][i])) return false;
    return get_u64(rs, row, col, &t->rollbacks) && get_u64(rs, row, col + 1, &t->remote_calls) &&
           get_u64(rs, row, col + 2, &t->remote_commits) &&
           get_u64(rs, row, col + 3, &t->rmw_ops) && get_i64(rs, row, col + 4, &t->net);
}

/* A histogram as uint64s: n, sum, min, max, then (bucket, count) per used bucket. */
static int put_hist(pod_result *res, const struct hist *h)
{
    uint64_t buf[4 + 2 * HIST_BUCKETS];
    uint32_t n = 0;
    buf[n++] = h->n;
    buf[n++] = h->sum;
    buf[n++] = h->min;
    buf[n++] = h->max;
    for (uint32_t i = 0; i < HIST_BUCKETS; i++)
        if (h->b[i]) {
            buf[n++] = i;
            buf[n++] = h->b[i];
        }
    return pod_result_bytes(res, buf, n * (uint32_t)sizeof buf[0]);
}

static bool read_hist(const void *p, uint32_t len, struct hist *h)
{
    hist_init(h);
    if (len % 8 || len < 32 || (len / 8 - 4) % 2) return false;
    uint64_t v[4];
    memcpy(v, p, sizeof v);
    h->n = v[0];
    h->sum = v[1];
    h->min = v[2];
    h->max = v[3];
    const unsigned char *q = (const unsigned char *)p + 32;
    for (uint32_t i = 0; i < (len / 8 - 4) / 2; i++) {
        uint64_t pair[2];
        memcpy(pair, q + 16 * i, sizeof pair);
        if (pair[0] >= HIST_BUCKETS) return false;
        h->b[pair[0]] = pair[1];
    }
    return true;
}

int bench_run_result_encode(const struct bench_run_result *r, pod_result *res)
{
    pod_result_str(res, "run");
    pod_result_str(res, bench_wl_name(r->wl));
    pod_result_i64(res, r->host);
    pod_result_i64(res, r->workers);
    pod_result_i64(res, r->terminals);
    pod_result_f64(res, r->measured_s);
    pod_result_str(res, r->knobs);
    pod_result_str(res, r->first_error);
    put_tally(res, "measured", &r->measured);
    put_tally(res, "all", &r->all);
    pod_result_row(res);
    pod_result_str(res, "conflicts");
    for (int c = 0; c < POD_CAUSE_COUNT; c++) pod_result_i64(res, (int64_t)r->conflicts[c]);
    pod_result_i64(res, (int64_t)r->gave_up);
    pod_result_row(res);
    pod_result_str(res, "latency");
    if (put_hist(res, &r->lat)) return -1;
    pod_result_row(res);
    pod_result_str(res, "per_second");
    return pod_result_bytes(res, r->per_sec ? (const void *)r->per_sec : "",
                            r->nsec * (uint32_t)sizeof(uint64_t));
}

int bench_run_result_decode(const struct bench_rows *rs, struct bench_run_result *r, char *err,
                            size_t errlen)
{
    bench_run_result_init(r);
    int run = find_row(rs, "run"), me = find_row(rs, "measured"), al = find_row(rs, "all");
    int co = find_row(rs, "conflicts"), la = find_row(rs, "latency"), ps = find_row(rs, "per_second");
    char wl[16];
    int64_t host = 0, workers = 0, terms = 0;
    const void *hp, *pp;
    uint32_t hlen, plen;
    bool ok = run >= 0 && me >= 0 && al >= 0 && co >= 0 && la >= 0 && ps >= 0 &&
              get_str(rs, run, 1, wl, sizeof wl) && get_i64(rs, run, 2, &host) &&
              get_i64(rs, run, 3, &workers) && get_i64(rs, run, 4, &terms) &&
              get_f64(rs, run, 5, &r->measured_s) &&
              get_str(rs, run, 6, r->knobs, sizeof r->knobs) &&
              get_str(rs, run, 7, r->first_error, sizeof r->first_error) &&
              read_tally(rs, me, &r->measured) && read_tally(rs, al, &r->all) &&
              get_bytes(rs, la, 1, &hp, &hlen) && read_hist(hp, hlen, &r->lat) &&
              get_bytes(rs, ps, 1, &pp, &plen) && plen % 8 == 0;
    for (int c = 0; ok && c < POD_CAUSE_COUNT; c++) ok = get_u64(rs, co, 1 + c, &r->conflicts[c]);
    ok = ok && get_u64(rs, co, 1 + POD_CAUSE_COUNT, &r->gave_up);
    int w = ok ? bench_wl_parse(wl, strlen(wl)) : -1;
    if (!ok || w < 0) {
        snprintf(err, errlen, "a run result that does not parse (rows run, measured, all, "
                              "conflicts, latency, per_second expected)");
        return -1;
    }
    r->wl = (enum bench_wl)w;
    r->host = (int)host;
    r->workers = (int)workers;
    r->terminals = (int)terms;
    r->nsec = plen / 8;
    if (r->nsec) {
        if (!(r->per_sec = malloc(plen))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        memcpy(r->per_sec, pp, plen);
    }
    return 0;
}

/* ---- checks --------------------------------------------------------------------------- */

int bench_check_result_encode(const struct bench_check_result *r, pod_result *res)
{
    pod_result_str(res, "check");
    pod_result_str(res, bench_wl_name(r->wl));
    pod_result_i64(res, r->host);
    pod_result_i64(res, (int64_t)r->units);
    pod_result_i64(res, (int64_t)r->failures);
    pod_result_i64(res, (int64_t)r->rows);
    pod_result_i64(res, (int64_t)r->expected_rows);
    pod_result_i64(res, r->sum);
    return pod_result_str(res, r->report);
}

int bench_check_result_decode(const struct bench_rows *rs, struct bench_check_result *r,
                              char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    int row = find_row(rs, "check");
    char wl[16];
    int64_t host = 0;
    bool ok = row >= 0 && get_str(rs, row, 1, wl, sizeof wl) && get_i64(rs, row, 2, &host) &&
              get_u64(rs, row, 3, &r->units) && get_u64(rs, row, 4, &r->failures) &&
              get_u64(rs, row, 5, &r->rows) && get_u64(rs, row, 6, &r->expected_rows) &&
              get_i64(rs, row, 7, &r->sum) && get_str(rs, row, 8, r->report, sizeof r->report);
    int w = ok ? bench_wl_parse(wl, strlen(wl)) : -1;
    if (w < 0) {
        snprintf(err, errlen, "a check result that does not parse");
        return -1;
    }
    r->wl = (enum bench_wl)w;
    r->host = (int)host;
    return 0;
}

/* ---- status -------------------------------------------------------------------------- */

int bench_status_encode(const struct bench_status *s, pod_result *res)
{
    pod_result_str(res, "job");
    pod_result_str(res, s->job);
    pod_result_str(res, s->state);
    pod_result_i64(res, (int64_t)s->job_id);
    pod_result_str(res, s->phase);
    pod_result_f64(res, s->elapsed_s);
    pod_result_i64(res, (int64_t)s->done);
    pod_result_i64(res, (int64_t)s->total);
    pod_result_str(res, s->msg);
    for (int w = 0; w < BENCH_NWL; w++) {
        if (!s->wl[w].enabled) continue;
        pod_result_row(res);
        pod_result_str(res, "workload");
        pod_result_str(res, bench_wl_name((enum bench_wl)w));
        pod_result_str(res, s->wl[w].state);
        pod_result_i64(res, (int64_t)s->wl[w].rows);
        pod_result_i64(res, (int64_t)s->wl[w].total);
    }
    return 0;
}

int bench_status_decode(const struct bench_rows *rs, struct bench_status *s, char *err,
                        size_t errlen)
{
    memset(s, 0, sizeof *s);
    int row = find_row(rs, "job");
    int64_t id = 0;
    bool ok = row >= 0 && get_str(rs, row, 1, s->job, sizeof s->job) &&
              get_str(rs, row, 2, s->state, sizeof s->state) && get_i64(rs, row, 3, &id) &&
              get_str(rs, row, 4, s->phase, sizeof s->phase) &&
              get_f64(rs, row, 5, &s->elapsed_s) && get_u64(rs, row, 6, &s->done) &&
              get_u64(rs, row, 7, &s->total) && get_str(rs, row, 8, s->msg, sizeof s->msg);
    if (!ok) {
        snprintf(err, errlen, "a status that does not parse");
        return -1;
    }
    s->job_id = (uint64_t)id;
    int n = rs->nrows(rs->src);
    for (int r = 0; r < n; r++) {
        char tag[16], name[16];
        if (!get_str(rs, r, 0, tag, sizeof tag) || strcmp(tag, "workload") ||
            !get_str(rs, r, 1, name, sizeof name))
            continue;
        int w = bench_wl_parse(name, strlen(name));
        if (w < 0) continue;
        s->wl[w].enabled = get_str(rs, r, 2, s->wl[w].state, sizeof s->wl[w].state) &&
                           get_u64(rs, r, 3, &s->wl[w].rows) && get_u64(rs, r, 4, &s->wl[w].total);
    }
    return 0;
}
