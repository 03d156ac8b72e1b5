/* The SWcc row protocol between processes: 2 and 4 hosts on one region in
 * SIMULATED NON-COHERENT mode, for every coherence variant.
 *
 * Bank: every host creates its share of M accounts (records + rows in its own
 * slices) and publishes them. Then all hosts run transfers between random
 * accounts (each host at least its share, and until every host has done its
 * share): write-lock both NO_WAIT (on a conflict release, back off, retry),
 * rec_row_read both, rec_row_write both, release. Every tuple carries a fill
 * pattern derived from its balance and epoch-version, so a stale or torn line
 * shows up as a broken tuple, not only as a wrong sum. Interleaved with the
 * transfers, every host checks the whole bank under read locks on all
 * accounts: the total must be exact. At the end every host checks again from
 * its own cache: exact total, and the versions add up to twice the number of
 * committed transfers (no lost update).
 *
 * Negative control: a deterministic two-host interleaving in which host 1
 * plays three protocol bugs against the simulator and must see stale values —
 * a read that skips the flush, a write that does not clear the other hosts'
 * bitmap bits, and a write that skips the write-back — and in which the
 * flushes and write-backs of each correct operation are counted. Without
 * simulation (this machine is coherent) the same buggy steps read fresh
 * values, which is exactly why protocol tests must run with the simulator. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cxl/record_ops.h"
#include "cxl/region.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)
#define WAIT_MS 60000
#define NACCT 16       /* accounts in the bank, spread over the hosts */
#define INIT 1000      /* initial balance */
#define FILL 13
#define MIN_MS 300     /* each bank host transfers at least this long */

struct acct {
    int64_t bal;
    uint64_t ev; /* copy of the row's epoch-version */
    uint64_t fill[FILL];
};
#define TSIZE ((uint32_t)sizeof(struct acct)) /* 120: the row spans 3 lines */

static void acct_make(struct acct *a, int64_t bal, uint64_t ev)
{
    a->bal = bal;
    a->ev = ev;
    for (int i = 0; i < FILL; i++) a->fill[i] = (uint64_t)bal * 0x9e3779b97f4a7c15ull ^ ev ^ (uint64_t)i;
}

static bool acct_ok(const struct acct *a, uint64_t ev)
{
    if (a->ev != ev) return false;
    for (int i = 0; i < FILL; i++)
        if (a->fill[i] != ((uint64_t)a->bal * 0x9e3779b97f4a7c15ull ^ ev ^ (uint64_t)i)) return false;
    return true;
}

/* ---- shared control block (host 0's HWcc slice, root slot 0) ------------- */

enum { N_CNT = 8 };
struct ctl {
    uint64_t arrived, quota, done, checked, failed;
    uint64_t commits, aborts, checks_ok, checks_given_up;
    /* counters summed over hosts */
    uint64_t reads, writes, flushes, flushed_lines, writebacks, nt_writes, latch_timeouts;
    /* negative scenario */
    uint64_t step, ack;
};

/* Host h's accounts (its HWcc slice, root slot 1). */
struct accounts {
    uint32_t n;
    cxl_off rec[NACCT];
};

struct scenario {
    struct pod_config *c;
    int nhosts;
    enum pod_coherence v;
    int transfers; /* committed transfers per host */
    bool sim;
};

#define FAILF(...)                                                                  \
    do {                                                                            \
        fprintf(stderr, "host %d (%s): ", host, pod_coherence_name(sc->v));         \
        fprintf(stderr, __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                        \
        if (ctl) __atomic_store_n(&ctl->failed, 1, __ATOMIC_RELEASE);               \
        return 1;                                                                   \
    } while (0)

/* Wait until *w >= want, another host failed, or the time is up. */
static bool wait_ge(struct ctl *ctl, const uint64_t *w, uint64_t want)
{
    struct timespec nap = {0, 200 * 1000};
    for (long us = 0; us < (long)WAIT_MS * 1000; us += 200) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) >= want) return true;
        if (__atomic_load_n(&ctl->failed, __ATOMIC_ACQUIRE)) return false;
        nanosleep(&nap, NULL);
    }
    return false;
}

/* Attach as host: host 0 formats; the others wait for host 0's control block. */
static struct cxl_region *attach(struct scenario *sc, int host, pod_err *err)
{
    if (host == 0) return cxl_region_open(sc->c, 0, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, err);
    for (int i = 0; i < WAIT_MS / 5; i++) {
        struct cxl_region *obs = cxl_region_open(sc->c, -1, 0, err);
        bool up = obs && cxl_root_get(obs, 0, 0) != CXL_NULL;
        if (obs) cxl_region_close(obs);
        if (up) return cxl_region_open(sc->c, host, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, err);
        usleep(5000);
    }
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void backoff(uint64_t *seed, int tries)
{
    int k = tries < 10 ? tries : 10;
    uint64_t spins = tu_rand(seed) % (16ull << k);
    for (uint64_t i = 0; i < spins; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    if (tries > 3) sched_yield();
    if (tries > 12) usleep(50);
}

static void add_stats(struct ctl *ctl)
{
    struct rec_stats s;
    rec_stats_get(&s);
    __atomic_fetch_add(&ctl->reads, s.reads, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->writes, s.writes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->flushes, s.flushes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->flushed_lines, s.flushed_lines, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->writebacks, s.writebacks, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->nt_writes, s.nt_writes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->latch_timeouts, s.latch_timeouts, __ATOMIC_RELAXED);
}

/* ---- bank ------------------------------------------------------------------- */

struct bank {
    struct cxl_region *r;
    struct scenario *sc;
    struct ctl *ctl;
    cxl_record *rec[NACCT];
    int n;
};

/* Read every account under read locks. Returns 1 on a wrong answer (msg set),
 * 0 when checked, -1 when the locks could not all be taken in max_tries. */
static int check_bank(struct bank *b, uint64_t *seed, int max_tries, uint64_t *ev_sum,
                      char *msg, size_t msglen)
{
    for (int t = 0; t < max_tries; t++) {
        int got = 0;
        while (got < b->n && rec_try_read_lock(b->rec[got])) got++;
        if (got == b->n) {
            int64_t sum = 0;
            uint64_t evs = 0;
            int bad = 0;
            for (int i = 0; i < b->n && !bad; i++) {
                struct acct a;
                uint32_t valid;
                uint64_t ev;
                int rc = rec_row_read(b->r, b->sc->v, b->rec[i], &a, TSIZE, &valid, &ev);
                if (rc != REC_OK) {
                    snprintf(msg, msglen, "check: read of account %d returned %d", i, rc);
                    bad = 1;
                } else if (valid != 1 || !acct_ok(&a, ev)) {
                    snprintf(msg, msglen,
                             "check: account %d is stale or torn (valid %u, row ev %#llx, "
                             "tuple ev %#llx)",
                             i, valid, (unsigned long long)ev, (unsigned long long)a.ev);
                    bad = 1;
                }
                sum += a.bal;
                evs += ev;
            }
            for (int i = 0; i < b->n; i++) rec_release_read(b->rec[i]);
            if (bad) return 1;
            if (sum != (int64_t)NACCT * INIT) {
                snprintf(msg, msglen, "check: total %lld, want %lld", (long long)sum,
                         (long long)NACCT * INIT);
                return 1;
            }
            if (ev_sum) *ev_sum = evs;
            return 0;
        }
        for (int i = 0; i < got; i++) rec_release_read(b->rec[i]);
        backoff(seed, t);
    }
    return -1;
}

/* One transfer. 0 committed, -1 aborted on a lock conflict, 1 wrong answer. */
static int transfer(struct bank *b, uint64_t *seed, char *msg, size_t msglen)
{
    int x = (int)(tu_rand(seed) % (uint64_t)b->n), y;
    do y = (int)(tu_rand(seed) % (uint64_t)b->n);
    while (y == x);
    cxl_record *rx = b->rec[x], *ry = b->rec[y];
    if (!rec_try_write_lock(rx)) return -1;
    if (!rec_try_write_lock(ry)) {
        rec_release_write(rx);
        return -1;
    }
    struct acct ax, ay;
    uint32_t vx, vy;
    uint64_t ex, ey;
    enum pod_coherence v = b->sc->v;
    /* Under our write locks nobody else latches these records for long:
     * REC_BUSY here would be a bug, not contention. */
    int rc1 = rec_row_read(b->r, v, rx, &ax, TSIZE, &vx, &ex);
    int rc2 = rec_row_read(b->r, v, ry, &ay, TSIZE, &vy, &ey);
    if (rc1 || rc2) {
        snprintf(msg, msglen, "transfer: reads returned %d %d", rc1, rc2);
        return 1;
    }
    if (vx != 1 || vy != 1 || !acct_ok(&ax, ex) || !acct_ok(&ay, ey)) {
        snprintf(msg, msglen,
                 "transfer: stale or torn account (%d: ev %#llx tuple %#llx; %d: ev %#llx "
                 "tuple %#llx)",
                 x, (unsigned long long)ex, (unsigned long long)ax.ev, y,
                 (unsigned long long)ey, (unsigned long long)ay.ev);
        return 1;
    }
    int64_t amt = (int64_t)(tu_rand(seed) % 100);
    acct_make(&ax, ax.bal - amt, ex + 1);
    acct_make(&ay, ay.bal + amt, ey + 1);
    rc1 = rec_row_write(b->r, v, rx, &ax, TSIZE, 1, ex + 1);
    rc2 = rec_row_write(b->r, v, ry, &ay, TSIZE, 1, ey + 1);
    if (rc1 || rc2) {
        snprintf(msg, msglen, "transfer: writes returned %d %d", rc1, rc2);
        return 1;
    }
    __atomic_fetch_add(&b->ctl->commits, 1, __ATOMIC_RELAXED);
    rec_release_write(ry);
    rec_release_write(rx);
    return 0;
}

/* Put host h on the h-th allowed CPU (modulo their number), so that hosts
 * run in parallel instead of taking turns on one CPU. */
static void spread_hosts(int host)
{
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return;
    int want = host % CPU_COUNT(&all), k = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &all)) continue;
        if (k++ == want) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

static int bank_host(struct scenario *sc, int host)
{
    struct ctl *ctl = NULL;
    spread_hosts(host);
    pod_err err = {{0}};
    struct cxl_region *r = attach(sc, host, &err);
    if (!r) FAILF("attach: %s", err.msg);
    if (host == 0) {
        cxl_off co = cxl_zalloc(r, CXL_HWCC, sizeof(struct ctl));
        if (!co) FAILF("control block allocation failed");
        ctl = cxl_ptr(r, co);
        cxl_root_publish(r, 0, co);
    } else {
        ctl = cxl_ptr(r, cxl_root_get(r, 0, 0));
    }

    /* My share of the accounts, created and published by me, the owner. */
    cxl_off ao = cxl_zalloc(r, CXL_HWCC, sizeof(struct accounts));
    if (!ao) FAILF("accounts allocation failed");
    struct accounts *mine = cxl_ptr(r, ao);
    int first = NACCT * host / sc->nhosts, last = NACCT * (host + 1) / sc->nhosts;
    for (int i = first; i < last; i++) {
        struct acct a;
        acct_make(&a, INIT, 0);
        cxl_off ro = rec_create(r, sc->v, &a, TSIZE, 1, 0);
        if (!ro) FAILF("rec_create failed");
        if (cxl_owner_of(r, ro, NULL) != host) FAILF("record outside my slice");
        mine->rec[mine->n++] = ro;
    }
    cxl_root_publish(r, 1, ao);
    __atomic_fetch_add(&ctl->arrived, 1, __ATOMIC_ACQ_REL);
    if (!wait_ge(ctl, &ctl->arrived, (uint64_t)sc->nhosts)) FAILF("the others did not arrive");

    struct bank b = {.r = r, .sc = sc, .ctl = ctl};
    for (int h = 0; h < sc->nhosts; h++) {
        struct accounts *acc = cxl_ptr(r, cxl_root_get(r, h, 1));
        for (uint32_t i = 0; i < acc->n; i++) b.rec[b.n++] = cxl_ptr(r, acc->rec[i]);
    }
    if (b.n != NACCT) FAILF("found %d accounts, want %d", b.n, NACCT);

    rec_stats_reset();
    uint64_t seed = 0x1234567ull * (uint64_t)(host + 1) ^ (uint64_t)time(NULL);
    char msg[256];
    int committed = 0, tries = 0;
    uint64_t aborts = 0, checks = 0, given_up = 0;
    /* Every host keeps transferring until all of them have done their share
     * and MIN_MS have passed, so the hosts overlap even when a loaded machine
     * runs them in turns. */
    double t0 = now_ms();
    for (long it = 0;; it++) {
        if (committed >= sc->transfers &&
            __atomic_load_n(&ctl->quota, __ATOMIC_ACQUIRE) == (uint64_t)sc->nhosts &&
            now_ms() - t0 >= MIN_MS)
            break;
        if (committed >= 1000 * sc->transfers) FAILF("the others never reached their share");
        if (__atomic_load_n(&ctl->failed, __ATOMIC_ACQUIRE)) FAILF("another host failed");
        if (it % 16 == 0) {
            int rc = check_bank(&b, &seed, 200, NULL, msg, sizeof msg);
            if (rc > 0) FAILF("%s (concurrent check)", msg);
            if (rc == 0) checks++;
            else given_up++;
        }
        if (it % 8 == 7) sched_yield(); /* more interleaving on a loaded machine */
        int rc = transfer(&b, &seed, msg, sizeof msg);
        if (rc > 0) FAILF("%s", msg);
        if (rc == 0) {
            if (++committed == sc->transfers) __atomic_fetch_add(&ctl->quota, 1, __ATOMIC_ACQ_REL);
            tries = 0;
        } else {
            aborts++;
            backoff(&seed, ++tries);
            if (aborts > 1000000) FAILF("livelock: %llu aborts", (unsigned long long)aborts);
        }
    }
    __atomic_fetch_add(&ctl->aborts, aborts, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->checks_ok, checks, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->checks_given_up, given_up, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ctl->done, 1, __ATOMIC_ACQ_REL);
    if (!wait_ge(ctl, &ctl->done, (uint64_t)sc->nhosts)) FAILF("the others did not finish");

    /* Final check from this host's cache: all transfers are visible. */
    uint64_t ev_sum = 0;
    int rc = check_bank(&b, &seed, 100000, &ev_sum, msg, sizeof msg);
    if (rc > 0) FAILF("%s (final check)", msg);
    if (rc < 0) FAILF("final check could not take its read locks");
    uint64_t commits = __atomic_load_n(&ctl->commits, __ATOMIC_ACQUIRE);
    if (ev_sum != 2 * commits)
        FAILF("versions add up to %llu, want 2 x %llu commits: an update was lost",
              (unsigned long long)ev_sum, (unsigned long long)commits);
    add_stats(ctl);
    __atomic_fetch_add(&ctl->checked, 1, __ATOMIC_ACQ_REL);
    if (!wait_ge(ctl, &ctl->checked, (uint64_t)sc->nhosts)) FAILF("the others did not check");

    if (host == 0) {
        /* Quiescent: no latch or lock left behind, the bitmaps name only
         * hosts, written records are dirty. */
        uint64_t bad_bits = sc->v == POD_COH_HWCC_ONLY
                                ? REC_BITMAP_MASK
                                : (~0ull << (REC_BITMAP_SHIFT + sc->nhosts)) & REC_BITMAP_MASK;
        for (int i = 0; i < b.n; i++) {
            cxl_record w = rec_load(b.rec[i]);
            if (w & (REC_LATCH | REC_LOCK_MASK)) FAILF("account %d: word %#llx still latched "
                                                       "or locked", i, (unsigned long long)w);
            if (w & bad_bits) FAILF("account %d: bitmap %#llx", i, (unsigned long long)w);
        }
        printf("%d hosts %-16s %llu transfers (%llu aborts), %llu concurrent checks "
               "(%llu given up); %llu reads %llu writes: %llu flushes (%.2f per read, %llu "
               "lines) %llu write-backs %llu nt writes, %llu latch timeouts\n",
               sc->nhosts, pod_coherence_name(sc->v), (unsigned long long)ctl->commits,
               (unsigned long long)ctl->aborts, (unsigned long long)ctl->checks_ok,
               (unsigned long long)ctl->checks_given_up, (unsigned long long)ctl->reads,
               (unsigned long long)ctl->writes, (unsigned long long)ctl->flushes,
               ctl->reads ? (double)ctl->flushes / (double)ctl->reads : 0.0,
               (unsigned long long)ctl->flushed_lines, (unsigned long long)ctl->writebacks,
               (unsigned long long)ctl->nt_writes, (unsigned long long)ctl->latch_timeouts);
        fflush(stdout);
        if (ctl->checks_ok == 0) FAILF("no concurrent check ever completed");
        if (ctl->latch_timeouts) FAILF("latch timeouts under 2PL");
    }
    cxl_region_close(r);
    return 0;
}

static int bank_main0(void *a) { return bank_host(a, 0); }
static int bank_main1(void *a) { return bank_host(a, 1); }
static int bank_main2(void *a) { return bank_host(a, 2); }
static int bank_main3(void *a) { return bank_host(a, 3); }
static int (*const BANK_MAIN[])(void *) = {bank_main0, bank_main1, bank_main2, bank_main3};

static void run_bank(int nhosts, enum pod_coherence v, int transfers)
{
    struct scenario sc = {malloc(sizeof(struct pod_config)), nhosts, v, transfers, true};
    tu_make_config(sc.c, nhosts, 2048 * MiB, 8 * MiB, true);
    sc.c->engine.coherence = v;
    int pid[4];
    for (int h = 0; h < nhosts; h++) pid[h] = tu_fork(BANK_MAIN[h], &sc);
    int rc[4];
    for (int h = 0; h < nhosts; h++) rc[h] = tu_wait_child(pid[h], 240000);
    for (int h = 0; h < nhosts; h++)
        ck_assert_msg(rc[h] == 0, "%d hosts, %s: host %d failed (%d)", nhosts,
                      pod_coherence_name(v), h, rc[h]);
    free(sc.c);
}

/* _i: variant in the low 2 bits, 2 or 4 hosts. */
START_TEST(bank_2_hosts) { run_bank(2, tu_variants[_i], 5000); }
END_TEST
START_TEST(bank_4_hosts) { run_bank(4, tu_variants[_i], 2500); }
END_TEST

/* ---- negative control and per-operation counts ----------------------------- */

/* Test-only buggy paths, built from the public pieces. */

/* A read that takes the latch and reads through its cache without looking at
 * the bitmap, i.e. without the flush. */
static int64_t buggy_read_noflush(struct cxl_region *r, cxl_record *rec)
{
    while (!rec_latch_acquire(rec, REC_LATCH_SPINS)) {}
    struct cxl_swcc_row *row = cxl_ptr(r, rec_row_off(rec_load(rec)));
    struct acct a;
    cxl_swcc_read(&r->swcc, &a, row->tuple, TSIZE);
    rec_latch_release(rec);
    return a.bal;
}

/* A write that publishes the row but leaves the other hosts' bitmap bits set
 * (publish = false: does not even write the row back). */
static void buggy_write(struct cxl_region *r, enum pod_coherence v, cxl_record *rec, int64_t bal,
                        uint64_t ev, bool clear_bits, bool publish)
{
    while (!rec_latch_acquire(rec, REC_LATCH_SPINS)) {}
    struct cxl_swcc_row *row = cxl_ptr(r, rec_row_off(rec_load(rec)));
    struct cxl_swcc_row hdr = {.valid = 1, .tuple_size = TSIZE, .epoch_version = ev};
    struct acct a;
    acct_make(&a, bal, ev);
    if (v == POD_COH_NON_TEMPORAL && publish) {
        cxl_swcc_nt_write(&r->swcc, row, &hdr, sizeof hdr);
        cxl_swcc_nt_write(&r->swcc, row->tuple, &a, TSIZE);
    } else {
        cxl_swcc_write(&r->swcc, row, &hdr, sizeof hdr);
        cxl_swcc_write(&r->swcc, row->tuple, &a, TSIZE);
        if (publish) cxl_swcc_writeback(&r->swcc, row, sizeof hdr + TSIZE);
    }
    if (clear_bits) __atomic_fetch_and(rec, ~REC_BITMAP_MASK, __ATOMIC_RELAXED);
    __atomic_fetch_or(rec, (1ull << (REC_BITMAP_SHIFT + r->host)) | REC_DIRTY, __ATOMIC_RELAXED);
    rec_latch_release(rec);
}

static int64_t good_read(struct cxl_region *r, enum pod_coherence v, cxl_record *rec,
                         uint64_t *flushes, bool *ok)
{
    struct rec_stats s0, s1;
    rec_stats_get(&s0);
    struct acct a;
    uint64_t ev;
    *ok = rec_row_read(r, v, rec, &a, TSIZE, NULL, &ev) == REC_OK && acct_ok(&a, ev);
    rec_stats_get(&s1);
    *flushes = s1.flushes - s0.flushes;
    return a.bal;
}

#define HOSTBIT(h) (1ull << (REC_BITMAP_SHIFT + (h)))

static int neg_host0(void *arg)
{
    const int host = 0;
    struct scenario *sc = arg;
    enum pod_coherence v = sc->v;
    struct ctl *ctl = NULL;
    pod_err err = {{0}};
    struct cxl_region *r = attach(sc, 0, &err);
    if (!r) FAILF("open: %s", err.msg);
    cxl_off co = cxl_zalloc(r, CXL_HWCC, sizeof(struct ctl));
    if (!co) FAILF("control block allocation failed");
    ctl = cxl_ptr(r, co);
    struct acct a;
    acct_make(&a, 1, 1);
    cxl_off ro = rec_create(r, v, &a, TSIZE, 1, 1);
    if (!ro) FAILF("rec_create failed");
    struct accounts *acc = cxl_ptr(r, cxl_zalloc(r, CXL_HWCC, sizeof *acc));
    acc->n = 1;
    acc->rec[0] = ro;
    cxl_root_publish(r, 1, cxl_off_in(r, acc));
    cxl_root_publish(r, 0, co);
    cxl_record *rec = cxl_ptr(r, ro);
    __atomic_store_n(&ctl->step, 1, __ATOMIC_RELEASE);
    if (!wait_ge(ctl, &ctl->ack, 1)) FAILF("no ack 1");

    /* step 2: a correct write of 2; counted */
    struct rec_stats s0, s1;
    rec_stats_get(&s0);
    acct_make(&a, 2, 2);
    if (rec_row_write(r, v, rec, &a, TSIZE, 1, 2) != REC_OK) FAILF("write 2");
    rec_stats_get(&s1);
    uint64_t wb = s1.writebacks - s0.writebacks, nt = s1.nt_writes - s0.nt_writes,
             fl = s1.flushes - s0.flushes;
    bool want_nt = v == POD_COH_NON_TEMPORAL;
    if (fl != 0 || wb != !want_nt || nt != want_nt)
        FAILF("write: %llu flushes %llu write-backs %llu nt writes", (unsigned long long)fl,
              (unsigned long long)wb, (unsigned long long)nt);
    if ((rec_load(rec) & REC_BITMAP_MASK) != HOSTBIT(0))
        FAILF("after a write the bitmap is %#llx, want host 0 only",
              (unsigned long long)(rec_load(rec) & REC_BITMAP_MASK));
    if (!(rec_load(rec) & REC_DIRTY)) FAILF("a write left the record clean");
    /* the writer's own read: FULL/NT keep the writer's bit, NSR flushes */
    bool ok;
    uint64_t f;
    if (good_read(r, v, rec, &f, &ok) != 2 || !ok) FAILF("writer reads its own write");
    if (f != (v == POD_COH_NO_SHARED_READER)) FAILF("writer's read: %llu flushes",
                                                    (unsigned long long)f);
    __atomic_store_n(&ctl->step, 2, __ATOMIC_RELEASE);
    if (!wait_ge(ctl, &ctl->ack, 2)) FAILF("no ack 2");

    /* step 3: BUG: write 3 without clearing host 1's bit */
    buggy_write(r, v, rec, 3, 3, false, true);
    __atomic_store_n(&ctl->step, 3, __ATOMIC_RELEASE);
    if (!wait_ge(ctl, &ctl->ack, 3)) FAILF("no ack 3");

    /* step 4: BUG: write 4 (bits right) but never write it back. A
     * non-temporal writer has no cache to forget: it writes 4 correctly. */
    if (v != POD_COH_NON_TEMPORAL) {
        buggy_write(r, v, rec, 4, 4, true, false);
    } else {
        acct_make(&a, 4, 4);
        if (rec_row_write(r, v, rec, &a, TSIZE, 1, 4) != REC_OK) FAILF("write 4");
    }
    __atomic_store_n(&ctl->step, 4, __ATOMIC_RELEASE);
    if (!wait_ge(ctl, &ctl->ack, 4)) FAILF("no ack 4");

    /* step 5: a correct write of 5 repairs everything */
    acct_make(&a, 5, 5);
    if (rec_row_write(r, v, rec, &a, TSIZE, 1, 5) != REC_OK) FAILF("write 5");
    __atomic_store_n(&ctl->step, 5, __ATOMIC_RELEASE);
    if (!wait_ge(ctl, &ctl->ack, 5)) FAILF("no ack 5");
    cxl_region_close(r);
    return 0;
}

static int neg_host1(void *arg)
{
    const int host = 1;
    struct scenario *sc = arg;
    enum pod_coherence v = sc->v;
    const bool nsr = v == POD_COH_NO_SHARED_READER, sim = sc->sim;
    struct ctl *ctl = NULL;
    pod_err err = {{0}};
    struct cxl_region *r = attach(sc, 1, &err);
    if (!r) FAILF("attach: %s", err.msg);
    ctl = cxl_ptr(r, cxl_root_get(r, 0, 0));
    if (!wait_ge(ctl, &ctl->step, 1)) FAILF("no step 1");
    struct accounts *acc = cxl_ptr(r, cxl_root_get(r, 0, 1));
    cxl_record *rec = cxl_ptr(r, acc->rec[0]);
    bool ok;
    uint64_t f;
    int64_t got;

    /* step 1: first read flushes (bit clear); a second read flushes only in NSR */
    if ((got = good_read(r, v, rec, &f, &ok)) != 1 || !ok) FAILF("read 1: %lld", (long long)got);
    if (f != 1) FAILF("first read by host 1: %llu flushes, want 1", (unsigned long long)f);
    if (rec_host_may_cache(rec_load(rec), 1) != !nsr) FAILF("host 1's bit after a read");
    if ((got = good_read(r, v, rec, &f, &ok)) != 1 || !ok) FAILF("reread 1");
    if (f != nsr) FAILF("second read by host 1: %llu flushes, want %d", (unsigned long long)f,
                        nsr);
    __atomic_store_n(&ctl->ack, 1, __ATOMIC_RELEASE);

    /* step 2: host 0 wrote 2 correctly. BUG: read without the flush. */
    if (!wait_ge(ctl, &ctl->step, 2)) FAILF("no step 2");
    if (rec_host_may_cache(rec_load(rec), 1)) FAILF("the write left host 1's bit set");
    got = buggy_read_noflush(r, rec);
    if (sim && got != 1)
        FAILF("the simulator missed a skipped flush: read %lld, want the stale 1",
              (long long)got);
    if (!sim && got != 2) FAILF("coherent read without flush: %lld, want 2", (long long)got);
    if ((got = good_read(r, v, rec, &f, &ok)) != 2 || !ok) FAILF("read 2: %lld", (long long)got);
    if (f != 1) FAILF("read after another host's write: %llu flushes, want 1",
                      (unsigned long long)f);
    __atomic_store_n(&ctl->ack, 2, __ATOMIC_RELEASE);

    /* step 3: host 0 wrote 3 but left host 1's bit set (FULL/NT: set by our
     * read; NSR: never set, so NSR does not depend on the writer clearing it). */
    if (!wait_ge(ctl, &ctl->step, 3)) FAILF("no step 3");
    got = good_read(r, v, rec, &f, &ok);
    int64_t want = sim && !nsr ? 2 : 3;
    if (got != want)
        FAILF("read after a write that kept the bitmap: %lld, want %lld%s", (long long)got,
              (long long)want, want == 2 ? " (stale: the bitmap is what makes readers flush)" : "");
    __atomic_store_n(&ctl->ack, 3, __ATOMIC_RELEASE);

    /* step 4: host 0 wrote 4 without a write-back (NT: correctly), clearing
     * our bit. Our read flushes and gets what memory has. */
    if (!wait_ge(ctl, &ctl->step, 4)) FAILF("no step 4");
    got = good_read(r, v, rec, &f, &ok);
    want = v == POD_COH_NON_TEMPORAL || !sim ? 4 : 3;
    if (got != want)
        FAILF("read after a write without write-back: %lld, want %lld", (long long)got,
              (long long)want);
    if (f != 1) FAILF("%llu flushes", (unsigned long long)f);
    __atomic_store_n(&ctl->ack, 4, __ATOMIC_RELEASE);

    /* step 5: a correct write: everybody is right again. */
    if (!wait_ge(ctl, &ctl->step, 5)) FAILF("no step 5");
    if ((got = good_read(r, v, rec, &f, &ok)) != 5 || !ok) FAILF("read 5: %lld", (long long)got);
    __atomic_store_n(&ctl->ack, 5, __ATOMIC_RELEASE);
    cxl_region_close(r);
    return 0;
}

static void run_negative(enum pod_coherence v, bool sim)
{
    struct scenario sc = {malloc(sizeof(struct pod_config)), 2, v, 0, sim};
    tu_make_config(sc.c, 2, 1024 * MiB, 8 * MiB, sim);
    sc.c->engine.coherence = v;
    int p0 = tu_fork(neg_host0, &sc);
    int p1 = tu_fork(neg_host1, &sc);
    int rc0 = tu_wait_child(p0, 60000), rc1 = tu_wait_child(p1, 60000);
    ck_assert_msg(rc0 == 0, "%s: host 0 failed (%d)", pod_coherence_name(v), rc0);
    ck_assert_msg(rc1 == 0, "%s: host 1 failed (%d)", pod_coherence_name(v), rc1);
    free(sc.c);
}

/* FULL, NON_TEMPORAL, NO_SHARED_READER; HWCC_ONLY has no flush to skip. */
START_TEST(simulator_catches_protocol_bugs) { run_negative(tu_variants[_i], true); }
END_TEST

START_TEST(coherent_machine_hides_them) { run_negative(tu_variants[_i], false); }
END_TEST

int main(void)
{
    Suite *s = suite_create("record_mp");
    TCase *neg = tu_tcase(s, "negative control", 120);
    tcase_add_loop_test(neg, simulator_catches_protocol_bugs, 0, 3);
    tcase_add_loop_test(neg, coherent_machine_hides_them, 0, 3);
    TCase *bank = tu_tcase(s, "bank", 300);
    tcase_add_loop_test(bank, bank_2_hosts, 0, 4);
    tcase_add_loop_test(bank, bank_4_hosts, 0, 4);
    return tu_run(s);
}
