/* Lotus's lock requests between compute nodes (src/dm/lock_service.h), on
 * shm and tcp;ofi_rxm over loopback; also built with ThreadSanitizer by
 * make tsan.
 *
 * - rules: a batch is taken in order up to the first refusal, which says
 *   why; a write lock excludes another holder's read; a release (not
 *   waited for) lets the lock go; batches of LK_BATCH pass and larger ones
 *   are refused at the client; an unknown owner is refused; a compute
 *   node's locks go at once (release_cn); the service's
 *   table shows the locks; a service that stopped makes an acquire fail
 *   within the client's timeout instead of hanging.
 * - concurrent: client threads of two "compute nodes" take and give back
 *   random locks of a small key space at two services, in batches per
 *   owner, while a shadow count per key checks that a write lock is never
 *   shared and a read lock never meets a writer (each thread at least 20
 *   transactions and LOCK_RPC_MS, default 1000 ms). */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dm/fabric.h"
#include "dm/lock_service.h"
#include "helpers/testutil.h"
#include "util/clock.h"

static const char *const providers[] = {"shm", "tcp;ofi_rxm"};

static struct lock_service *start(const char *prov)
{
    pod_err e;
    struct lock_service *s = lock_service_start(
        &(struct lock_service_opts){.provider = prov, .table_bytes = 1 << 16}, &e);
    ck_assert_msg(s, "[%s] %s", prov, e.msg);
    return s;
}

static struct lock_client *client(const char *prov, uint32_t cn, uint32_t lane,
                                  struct lock_service *const *svc, int nsvc)
{
    pod_err e;
    struct lock_client *c = lock_client_new(prov, cn, lane, 5000, &e);
    ck_assert_msg(c, "[%s] %s", prov, e.msg);
    for (int i = 0; i < nsvc; i++) {
        unsigned char name[FAB_NAME_MAX];
        size_t len = sizeof name;
        ck_assert_msg(lock_service_name(svc[i], name, &len, &e) == 0, "%s", e.msg);
        ck_assert_msg(lock_client_owner(c, (uint32_t)i, name, len, &e) == 0, "%s", e.msg);
    }
    return c;
}

static uint64_t h(uint64_t k) { return lt_key_hash(3, &k, sizeof k); }

/* acquire; returns the client's code, *granted and *why set */
static int acq(struct lock_client *c, uint32_t owner, uint64_t holder, const uint64_t *hs,
               uint64_t wmask, uint32_t n, uint32_t *granted, enum lt_result *why)
{
    pod_err e;
    int rc = lock_client_acquire(c, owner, holder, hs, wmask, n, granted, why, &e);
    ck_assert_msg(rc >= 0, "acquire: %s", e.msg);
    return rc;
}

static void rel(struct lock_client *c, uint32_t owner, uint64_t holder, const uint64_t *hs,
                uint32_t n)
{
    pod_err e;
    ck_assert_msg(lock_client_release(c, owner, holder, hs, n, &e) == 0, "release: %s", e.msg);
}

/* A lock service in a child process (forked before this process starts
 * threads), its address sent down a pipe; it serves until killed. */
struct svc_addr {
    size_t len;
    unsigned char name[FAB_NAME_MAX];
    char err[600];
};

static void service_setup(void *arg, void *reply)
{
    struct svc_addr *a = reply;
    pod_err e;
    *a = (struct svc_addr){.len = sizeof a->name};
    struct lock_service *s = lock_service_start(
        &(struct lock_service_opts){.provider = arg, .table_bytes = 1 << 12}, &e);
    if (!s || lock_service_name(s, a->name, &a->len, &e) != 0)
        snprintf(a->err, sizeof a->err, "%s", e.msg);
}

static void service_serve(void *arg)
{
    (void)arg;
    pause();
}

static pid_t service_child(const char *prov, struct svc_addr *out)
{
    int pid = tu_fork_server(service_setup, service_serve, (void *)prov, out, sizeof *out);
    ck_assert_msg(pid > 0, "[%s] the lock service child did not start", prov);
    ck_assert_msg(!out->err[0], "[%s] %s", prov, out->err);
    return pid;
}

START_TEST(rules)
{
    const char *prov = providers[_i];
    struct svc_addr dead;
    pid_t victim = service_child(prov, &dead);
    struct lock_service *svc[2] = {start(prov), start(prov)};
    struct lock_client *c1 = client(prov, 1, 0, svc, 2), *c2 = client(prov, 2, 0, svc, 2);
    uint64_t t1 = LT_HOLDER(1, 100), t2 = LT_HOLDER(2, 200);
    uint32_t g;
    enum lt_result why;
    uint64_t a[2] = {h(1), h(2)};
    ck_assert_int_eq(acq(c1, 0, t1, a, 0x3, 2, &g, &why), 0);
    ck_assert_uint_eq(g, 2);
    size_t locks, holders;
    lock_table_count(lock_service_table(svc[0]), &locks, &holders);
    ck_assert_uint_eq(locks, 2);
    /* a read of a write-locked key: refused, nothing taken */
    ck_assert_int_eq(acq(c2, 0, t2, &a[1], 0, 1, &g, &why), 1);
    ck_assert_uint_eq(g, 0);
    ck_assert_int_eq(why, LT_CONFLICT);
    /* in order up to the first refusal */
    uint64_t b[3] = {h(3), h(1), h(4)};
    ck_assert_int_eq(acq(c2, 0, t2, b, 0x1, 3, &g, &why), 1);
    ck_assert_uint_eq(g, 1);
    ck_assert_int_eq(why, LT_CONFLICT);
    rel(c2, 0, t2, b, 3); /* the caller gives back all it asked for */
    /* the same holder asking again: granted, nothing changes */
    ck_assert_int_eq(acq(c1, 0, t1, a, 0x3, 2, &g, &why), 0);
    rel(c1, 0, t1, a, 2);
    /* releases are not waited for: the lock goes once the service took it */
    int tries = 0;
    while (acq(c2, 0, t2, &a[1], 1, 1, &g, &why) != 0) {
        ck_assert_int_lt(++tries, 1000);
        usleep(1000);
    }
    rel(c2, 0, t2, &a[1], 1);
    /* the second service is another table */
    ck_assert_int_eq(acq(c1, 1, t1, a, 0x3, 2, &g, &why), 0);
    ck_assert_int_eq(acq(c2, 0, t2, a, 0x3, 2, &g, &why), 0);
    rel(c1, 1, t1, a, 2);
    rel(c2, 0, t2, a, 2);
    /* a full batch; one more is refused at the client */
    uint64_t many[LK_BATCH + 1];
    for (uint32_t i = 0; i <= LK_BATCH; i++) many[i] = h(1000 + i);
    ck_assert_int_eq(acq(c1, 1, t1, many, ~0ull, LK_BATCH, &g, &why), 0);
    ck_assert_uint_eq(g, LK_BATCH);
    rel(c1, 1, t1, many, LK_BATCH);
    pod_err e;
    ck_assert_int_eq(lock_client_acquire(c1, 1, t1, many, 0, LK_BATCH + 1, &g, &why, &e), -1);
    ck_assert_int_eq(lock_client_acquire(c1, 7, t1, many, 0, 1, &g, &why, &e), -1);
    ck_assert_msg(strstr(e.msg, "unknown"), "%s", e.msg);
    ck_assert(!lock_client_knows(c1, 7) && lock_client_knows(c1, 1));
    /* a compute node's locks all given back at once (a restarted one asks) */
    uint64_t cn2[2] = {h(50), h(51)};
    ck_assert_int_eq(acq(c2, 1, LT_HOLDER(2, 300), cn2, 0x1, 2, &g, &why), 0);
    ck_assert_int_eq(acq(c2, 1, LT_HOLDER(2, 301), &many[3], 0, 1, &g, &why), 0);
    size_t released = 0;
    ck_assert_msg(lock_client_release_cn(c2, 1, &released, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(released, 3);
    /* every lock given back, at both (waiting for the last releases) */
    for (tries = 0;; tries++) {
        size_t l0, l1, hh;
        lock_table_count(lock_service_table(svc[0]), &l0, &hh);
        lock_table_count(lock_service_table(svc[1]), &l1, &hh);
        if (!l0 && !l1) break;
        ck_assert_msg(tries < 2000, "locks left: %zu and %zu", l0, l1);
        usleep(1000);
    }
    struct lock_service_stats st;
    lock_service_stats(svc[0], &st);
    ck_assert_uint_ge(st.acquires, 5);
    ck_assert_uint_ge(st.releases, 4);
    ck_assert_uint_eq(st.bad, 0);
    /* a service whose process was killed: the acquire fails within the
     * client's timeout instead of hanging */
    lock_client_free(c1);
    c1 = lock_client_new(prov, 1, 1, 3000, &e);
    ck_assert_msg(c1, "%s", e.msg);
    ck_assert(lock_client_owner(c1, 0, dead.name, dead.len, &e) == 0);
    ck_assert_int_eq(acq(c1, 0, t1, a, 0, 1, &g, &why), 0); /* alive, it answers */
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    uint64_t t0 = pod_mono_ns();
    ck_assert_int_eq(lock_client_acquire(c1, 0, t1, a, 0, 1, &g, &why, &e), -1);
    ck_assert_msg(pod_mono_ns() - t0 < 10000000000ull, "the failure took %llu ms",
                  (unsigned long long)((pod_mono_ns() - t0) / 1000000));
    lock_service_stop(svc[0]);
    lock_service_stop(svc[1]);
    lock_client_free(c1);
    lock_client_free(c2);
}
END_TEST

/* ---- concurrent ---- */

#define KEYS 32
#define THREADS 4

struct shadow {
    int writers, readers;
};

struct worker {
    const char *prov;
    struct lock_service **svc;
    uint32_t cn, lane;
    uint64_t run_ns, seed, done, refused;
    struct shadow *sh;
    char err[600];
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    pod_err e;
    struct lock_client *c = lock_client_new(w->prov, w->cn, w->lane, 10000, &e);
    if (!c) {
        snprintf(w->err, sizeof w->err, "%s", e.msg);
        return NULL;
    }
    for (uint32_t i = 0; i < 2; i++) {
        unsigned char name[FAB_NAME_MAX];
        size_t len = sizeof name;
        if (lock_service_name(w->svc[i], name, &len, &e) || lock_client_owner(c, i, name, len, &e)) {
            snprintf(w->err, sizeof w->err, "%s", e.msg);
            goto out;
        }
    }
    /* the time counts from here: opening endpoints is slow under sanitizers */
    uint64_t until = pod_mono_ns() + w->run_ns;
    for (uint64_t txn = 1; txn <= 20 || pod_mono_ns() < until; txn++) {
        uint64_t holder = LT_HOLDER(w->cn, (uint64_t)w->lane << 40 | txn);
        /* up to 3 distinct keys; key k's owner is k % 2 */
        uint32_t keys[3], n = 1 + (uint32_t)(rnd(&w->seed) % 3), m = 0;
        bool write[3];
        while (m < n) {
            uint32_t k = (uint32_t)(rnd(&w->seed) % KEYS);
            bool dup = false;
            for (uint32_t j = 0; j < m; j++) dup |= keys[j] == k;
            if (dup) continue;
            write[m] = rnd(&w->seed) % 3 == 0;
            keys[m++] = k;
        }
        uint32_t held = 0; /* bit j: keys[j] taken and counted in the shadow */
        bool ok = true;
        for (uint32_t owner = 0; owner < 2 && ok; owner++) {
            uint64_t hs[3], mask = 0;
            uint32_t idx[3], cnt = 0;
            for (uint32_t j = 0; j < n; j++)
                if (keys[j] % 2 == owner) {
                    if (write[j]) mask |= 1ull << cnt;
                    idx[cnt] = j;
                    hs[cnt++] = h(keys[j]);
                }
            if (!cnt) continue;
            uint32_t g;
            enum lt_result why;
            int rc = lock_client_acquire(c, owner, holder, hs, mask, cnt, &g, &why, &e);
            if (rc < 0) {
                snprintf(w->err, sizeof w->err, "%s", e.msg);
                goto out;
            }
            for (uint32_t j = 0; j < g; j++) {
                struct shadow *s = &w->sh[keys[idx[j]]];
                if (write[idx[j]]) {
                    int was = __atomic_fetch_add(&s->writers, 1, __ATOMIC_ACQ_REL);
                    int r = __atomic_load_n(&s->readers, __ATOMIC_ACQUIRE);
                    if (was || r)
                        snprintf(w->err, sizeof w->err, "key %u: a write lock granted beside %d "
                                 "writers and %d readers", keys[idx[j]], was, r);
                } else {
                    __atomic_fetch_add(&s->readers, 1, __ATOMIC_ACQ_REL);
                    int wr = __atomic_load_n(&s->writers, __ATOMIC_ACQUIRE);
                    if (wr)
                        snprintf(w->err, sizeof w->err, "key %u: a read lock granted beside %d "
                                 "writers", keys[idx[j]], wr);
                }
                held |= 1u << idx[j];
            }
            if (rc == 1) {
                ok = false;
                w->refused++;
            }
        }
        /* the shadow first, then the locks */
        for (uint32_t j = 0; j < n; j++)
            if (held >> j & 1) {
                struct shadow *s = &w->sh[keys[j]];
                if (write[j]) __atomic_fetch_sub(&s->writers, 1, __ATOMIC_ACQ_REL);
                else __atomic_fetch_sub(&s->readers, 1, __ATOMIC_ACQ_REL);
            }
        for (uint32_t owner = 0; owner < 2; owner++) {
            uint64_t hs[3];
            uint32_t cnt = 0;
            for (uint32_t j = 0; j < n; j++)
                if (keys[j] % 2 == owner) hs[cnt++] = h(keys[j]);
            if (cnt && lock_client_release(c, owner, holder, hs, cnt, &e) != 0) {
                snprintf(w->err, sizeof w->err, "%s", e.msg);
                goto out;
            }
        }
        if (ok) w->done++;
        if (w->err[0]) break;
    }
out:
    lock_client_free(c);
    return NULL;
}

START_TEST(concurrent)
{
    const char *prov = providers[_i];
    struct lock_service *svc[2] = {start(prov), start(prov)};
    static struct shadow sh[KEYS];
    memset(sh, 0, sizeof sh);
    const char *ms = getenv("LOCK_RPC_MS");
    uint64_t run_ns = (uint64_t)(ms ? atoi(ms) : 1000) * 1000000ull;
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.prov = prov, .svc = svc, .cn = 1 + i % 2, .lane = i / 2,
                               .run_ns = run_ns, .seed = 0x9e3779b97f4a7c15ull * (i + 1), .sh = sh};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    uint64_t done = 0, refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(!w[i].err[0], "[%s] thread %d: %s", prov, i, w[i].err);
        done += w[i].done;
        refused += w[i].refused;
    }
    /* progress, not speed: some transactions got all their locks */
    ck_assert_msg(done > 0, "[%s] no transaction got its locks (%llu refused)", prov,
                  (unsigned long long)refused);
    for (int tries = 0;; tries++) {
        size_t l0, l1, hh;
        lock_table_count(lock_service_table(svc[0]), &l0, &hh);
        lock_table_count(lock_service_table(svc[1]), &l1, &hh);
        if (!l0 && !l1) break;
        ck_assert_msg(tries < 5000, "[%s] locks left after every release: %zu and %zu", prov, l0,
                      l1);
        usleep(1000);
    }
    struct lock_service_stats st;
    lock_service_stats(svc[0], &st);
    ck_assert_uint_eq(st.bad, 0);
    ck_assert_uint_eq(st.unanswered, 0);
    lock_service_stop(svc[0]);
    lock_service_stop(svc[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lock_service");
    TCase *tc = tu_tcase(s, "lotus", 120);
    tcase_add_loop_test(tc, rules, 0, 2);
    tcase_add_loop_test(tc, concurrent, 0, 2);
    return tu_run(s);
}
