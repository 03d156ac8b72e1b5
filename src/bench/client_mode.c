#include "bench/client_mode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "poddb/client.h"
#include "util/clock.h"

struct run_ctx {
    const struct pod_config *conf;
    const struct bench_workload *w;
    const struct bench_client_opts *o;
    uint64_t t_measure, t_end;
    uint32_t nsec;
};

/* What is remembered of a call in flight (a bench_call's outcome fields). */
struct inflight {
    uint64_t t0;
    int type;
    bool remote, rollback;
    uint32_t nwrites;
};

struct conn {
    pthread_t th;
    const struct run_ctx *ctx;
    int index, host, term, nterms;
    struct bench_run_result r;
    uint64_t measured_commits; /* atomic: progress */
    bool failed;
    char err[256];
};

/* Record why the connection stopped (read by the main thread after join). */
static void conn_fail(struct conn *t, const char *why)
{
    snprintf(t->err, sizeof t->err, "%s", why);
    __atomic_store_n(&t->failed, true, __ATOMIC_RELEASE);
}

static void account(struct conn *t, const struct run_ctx *x, const struct inflight *f,
                    const pod_reply *rep, uint64_t t1)
{
    struct bench_call c;
    c.wl = x->w->wl;
    c.type = f->type;
    c.remote = f->remote;
    c.rollback = f->rollback;
    c.nwrites = f->nwrites;
    int status = pod_reply_status(rep);
    const pod_value *v = pod_reply_value(rep, 0, 0);
    int64_t v0 = status >= 0 && v && v->type == POD_T_I64 ? v->u.i64 : 0;
    bench_tally_add(&t->r.all, &c, status, v0);
    if (status < 0 && status != POD_USER_ABORT && !t->r.first_error[0])
        snprintf(t->r.first_error, sizeof t->r.first_error, "%s", pod_reply_message(rep));
    if (f->t0 < x->t_measure || f->t0 >= x->t_end) return;
    bench_tally_add(&t->r.measured, &c, status, v0);
    hist_add(&t->r.lat, t1 - f->t0);
    if (status >= 0) {
        __atomic_fetch_add(&t->measured_commits, 1, __ATOMIC_RELAXED);
        /* by the second it ended in; one that ends after the window counts in the last */
        uint64_t sec = (t1 - x->t_measure) / 1000000000ull;
        t->r.per_sec[sec < t->r.nsec ? sec : t->r.nsec - 1]++;
    }
}

static void *conn_main(void *arg)
{
    struct conn *t = arg;
    const struct run_ctx *x = t->ctx;
    const struct bench_client_opts *o = x->o;
    struct bench_terminal term;
    uint32_t gen = (uint32_t)(o->session << BENCH_SLOT_BITS) | (uint32_t)t->index;
    if (bench_terminal_init(&term, x->w, t->host, t->term, t->nterms, gen,
                            o->session * 0x9e3779b97f4a7c15ull ^ 0xc11e47ull)) {
        t->r.terminals = 0; /* the host owns no partition: nothing to send */
        return NULL;
    }
    t->r.terminals = 1;
    char why[256];
    pod_client *c = pod_client_connect(x->conf->hosts[t->host].socket_path, why, sizeof why);
    if (!c) {
        conn_fail(t, why);
        return NULL;
    }
    pod_client_set_timeout(c, o->timeout_ms);
    size_t ring = 1;
    while (ring < (size_t)o->depth * 2) ring <<= 1;
    struct inflight *fl = calloc(ring, sizeof *fl);
    if (!fl) {
        conn_fail(t, "out of memory");
        pod_client_close(c);
        return NULL;
    }
    struct bench_call call;
    int unflushed = 0, flush_every = o->depth >= 4 ? o->depth / 4 : 1;
    for (;;) {
        uint64_t now = pod_mono_ns();
        bool sending = now < x->t_end;
        /* Keep depth calls in flight while the run lasts. */
        while (sending && pod_client_pending(c) < (size_t)o->depth) {
            bench_next(&term, &call);
            uint64_t id = pod_client_send(c, bench_type_name(call.wl, call.type), call.args,
                                          call.nargs, 0);
            if (!id) {
                conn_fail(t, pod_client_error(c));
                goto out;
            }
            fl[id & (ring - 1)] = (struct inflight){pod_mono_ns(), call.type, call.remote,
                                                    call.rollback, call.nwrites};
            /* Flush in batches, but never leave nothing on the wire to wait for. */
            if (++unflushed >= flush_every || pod_client_pending(c) <= (size_t)unflushed) {
                if (pod_client_flush(c)) {
                    conn_fail(t, pod_client_error(c));
                    goto out;
                }
                unflushed = 0;
            }
        }
        if (unflushed) {
            if (pod_client_flush(c)) {
                conn_fail(t, pod_client_error(c));
                goto out;
            }
            unflushed = 0;
        }
        if (!pod_client_pending(c)) break; /* the run is over and every reply is in */
        pod_reply *rep = pod_client_recv(c);
        if (!rep) {
            conn_fail(t, pod_client_error(c));
            break;
        }
        account(t, x, &fl[pod_reply_id(rep) & (ring - 1)], rep, pod_mono_ns());
        pod_reply_free(rep);
    }
out:
    free(fl);
    pod_client_close(c);
    return NULL;
}

int bench_client_run(const struct pod_config *c, const struct bench_workload *w,
                     const struct bench_client_opts *o, bench_client_progress_fn fn, void *arg,
                     struct bench_run_result *out, char *err, size_t errlen)
{
    if (o->connections < 1 || o->connections > (1 << BENCH_SLOT_BITS) || o->depth < 1) {
        snprintf(err, errlen, "client mode: 1..%d connections and a depth of at least 1",
                 1 << BENCH_SLOT_BITS);
        return -1;
    }
    struct run_ctx x = {.conf = c, .w = w, .o = o};
    x.nsec = (uint32_t)(o->duration_s + 0.999);
    struct conn *t = calloc((size_t)o->connections, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t t0 = pod_mono_ns();
    x.t_measure = t0 + (uint64_t)(o->warmup_s * 1e9);
    x.t_end = x.t_measure + (uint64_t)(o->duration_s * 1e9);
    int started = 0, rc = 0;
    for (int i = 0; i < o->connections; i++) {
        struct conn *k = &t[i];
        k->ctx = &x;
        k->index = i;
        k->host = i % c->nhosts;
        k->term = i / c->nhosts;
        k->nterms = o->connections / c->nhosts + (k->host < o->connections % c->nhosts);
        bench_run_result_init(&k->r);
        k->r.wl = w->wl;
        k->r.workers = 1;
        k->r.nsec = x.nsec;
        if (!(k->r.per_sec = calloc(x.nsec ? x.nsec : 1, sizeof *k->r.per_sec)) ||
            pthread_create(&k->th, NULL, conn_main, k)) {
            snprintf(err, errlen, "cannot start connection %d", i);
            rc = -1;
            break;
        }
        started++;
    }
    while (fn && !rc) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        nanosleep(&tick, NULL);
        uint64_t now = pod_mono_ns(), done = 0;
        bool failed = false;
        for (int i = 0; i < started; i++) {
            done += __atomic_load_n(&t[i].measured_commits, __ATOMIC_RELAXED);
            failed |= __atomic_load_n(&t[i].failed, __ATOMIC_RELAXED);
        }
        fn(arg, (double)(now - t0) / 1e9, now >= x.t_measure, done);
        if (failed || now >= x.t_end) break;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i].th, NULL);
        if (t[i].failed && !rc) {
            snprintf(err, errlen, "connection %d to host %d: %s", i, t[i].host, t[i].err);
            rc = -1;
        }
        if (!rc && bench_run_result_merge(out, &t[i].r)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    }
    for (int i = 0; i < o->connections; i++) bench_run_result_free(&t[i].r);
    free(t);
    out->measured_s = o->duration_s;
    out->host = -1;
    return rc;
}
