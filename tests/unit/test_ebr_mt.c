/* Epoch-based reclamation (src/storage/ebr.c); also built with ThreadSanitizer by
 * make tsan.
 *
 * Single-thread cases pin down the rules: nothing retired is freed while a
 * critical section that was open at the retire is still open (on this or any
 * other slot), everything is freed once they close, nesting keeps the pin,
 * collection happens on its own from ebr_exit, counters add up. The
 * concurrent case has writers swapping a shared object pointer and retiring
 * the old object while readers dereference it inside critical sections;
 * free_fn poisons the object before free(), so a premature free shows up as
 * a dead magic value, an ASan use-after-free or a TSan race.
 * EBR_MT_MS=N sets the length of the concurrent run (default 2000 under
 * TSan, 1000 otherwise). */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "storage/ebr.h"
#include "helpers/testutil.h"

/* ---- counting free functions ------------------------------------------------- */

struct counter {
    uint64_t n; /* atomic: free_fn calls */
};

static void count_free(void *ctx, void *obj)
{
    struct counter *c = ctx;
    memset(obj, 0xdd, 16);
    free(obj);
    __atomic_fetch_add(&c->n, 1, __ATOMIC_RELAXED);
}

static uint64_t count_of(struct counter *c)
{
    return __atomic_load_n(&c->n, __ATOMIC_RELAXED);
}

static void retire_n(struct ebr_domain *d, int slot, int n, struct counter *c)
{
    for (int i = 0; i < n; i++) ebr_retire(d, slot, malloc(16), count_free, c);
}

static void check_stats(struct ebr_domain *d, uint64_t retired, uint64_t freed)
{
    struct ebr_stats st;
    ebr_get_stats(d, &st);
    ck_assert_uint_eq(st.retired, retired);
    ck_assert_uint_eq(st.freed, freed);
    ck_assert_uint_eq(st.pending, retired - freed);
    ck_assert_uint_eq(st.epoch, ebr_epoch(d));
}

/* ---- single thread --------------------------------------------------------------- */

START_TEST(not_freed_inside_own_section)
{
    struct ebr_domain *d = ebr_domain_new(2);
    ck_assert_ptr_nonnull(d);
    struct counter c = {0};
    ebr_enter(d, 0);
    uint64_t pinned = ebr_epoch(d);
    retire_n(d, 0, 1000, &c); /* several chunks, past the pending threshold */
    for (int i = 0; i < 10; i++) ebr_collect(d, 0);
    ck_assert_uint_eq(ebr_drain(d, 0, 0), 1000);
    ck_assert_uint_eq(ebr_drain(d, 0, 20), 1000);
    ck_assert_uint_eq(count_of(&c), 0);
    check_stats(d, 1000, 0);
    /* The epoch can move one step past our pin, never two. */
    ck_assert_uint_eq(ebr_epoch(d), pinned + 1);

    ebr_exit(d, 0);
    ck_assert_uint_eq(ebr_drain(d, 0, 1000), 0);
    ck_assert_uint_eq(count_of(&c), 1000);
    check_stats(d, 1000, 1000);
    ck_assert_uint_eq(ebr_pending(d, 0), 0);
    ebr_domain_free(d);
}
END_TEST

START_TEST(other_slot_blocks_until_exit)
{
    struct ebr_domain *d = ebr_domain_new(3);
    struct counter c = {0};
    ebr_enter(d, 1); /* a reader that started before the retire */
    retire_n(d, 0, 10, &c);
    ck_assert_uint_eq(ebr_drain(d, 0, 30), 10);
    ck_assert_uint_eq(count_of(&c), 0);
    /* Slot 0 may work on in the meantime; still nothing goes. */
    for (int i = 0; i < 300; i++) {
        ebr_enter(d, 0);
        ebr_exit(d, 0);
    }
    ck_assert_uint_eq(count_of(&c), 0);
    ebr_exit(d, 1);
    ck_assert_uint_eq(ebr_drain(d, 0, 1000), 0);
    ck_assert_uint_eq(count_of(&c), 10);
    check_stats(d, 10, 10);
    ebr_domain_free(d);
}
END_TEST

START_TEST(nested_sections)
{
    /* External slot memory, so the announcements can be inspected. */
    uint64_t *mem = aligned_alloc(64, 2 * EBR_SLOT_BYTES);
    memset(mem, 0, 2 * EBR_SLOT_BYTES);
    uint64_t *a0 = mem, *a1 = (uint64_t *)((char *)mem + EBR_SLOT_BYTES);
    struct ebr_domain *d = ebr_domain_new_at(2, mem);
    ck_assert_ptr_nonnull(d);
    struct counter c = {0};

    ebr_enter(d, 0);
    uint64_t pinned = ebr_epoch(d);
    ck_assert_uint_eq(*a0, pinned + 1);
    ck_assert_uint_eq(*a1, 0);
    ebr_enter(d, 0);
    ck_assert_uint_eq(*a0, pinned + 1);
    retire_n(d, 0, 5, &c);
    ebr_exit(d, 0); /* inner exit: still pinned */
    ck_assert_int_eq(ebr_active(d, 0), 1);
    ck_assert_uint_eq(*a0, pinned + 1);
    ck_assert_uint_eq(ebr_drain(d, 0, 10), 5);
    ck_assert_uint_eq(count_of(&c), 0);
    ebr_exit(d, 0);
    ck_assert_int_eq(ebr_active(d, 0), 0);
    ck_assert_uint_eq(*a0, 0);
    ck_assert_uint_eq(ebr_drain(d, 0, 1000), 0);
    ck_assert_uint_eq(count_of(&c), 5);
    ebr_domain_free(d);
    free(mem);
}
END_TEST

START_TEST(collects_from_exit)
{
    struct ebr_domain *d = ebr_domain_new(1);
    struct counter c = {0};
    for (int i = 0; i < 10; i++) {
        ebr_enter(d, 0);
        retire_n(d, 0, 10, &c);
        ebr_exit(d, 0);
    }
    ck_assert_uint_eq(count_of(&c), 0); /* fewer than EBR_COLLECT_EVERY exits */
    for (int i = 0; i < 2 * EBR_COLLECT_EVERY; i++) {
        ebr_enter(d, 0);
        ebr_exit(d, 0);
    }
    ck_assert_uint_eq(count_of(&c), 100);
    check_stats(d, 100, 100);

    /* Past EBR_COLLECT_PENDING, the next exit collects. */
    ebr_enter(d, 0);
    retire_n(d, 0, EBR_COLLECT_PENDING + 10, &c);
    ebr_exit(d, 0);
    ebr_enter(d, 0);
    ebr_exit(d, 0);
    ck_assert_uint_eq(count_of(&c), 100 + EBR_COLLECT_PENDING + 10);
    ebr_domain_free(d);
}
END_TEST

/* free_fn that retires one more object on the same slot (a node freeing its
 * child, say) and calls back into the slot. */
struct chain {
    struct ebr_domain *d;
    struct counter c;
    int depth;
};

static void chain_free(void *ctx, void *obj)
{
    struct chain *ch = ctx;
    free(obj);
    __atomic_fetch_add(&ch->c.n, 1, __ATOMIC_RELAXED);
    if (ch->depth-- > 0) {
        ebr_enter(ch->d, 0);
        ebr_retire(ch->d, 0, malloc(8), chain_free, ch);
        ebr_exit(ch->d, 0);
        ebr_collect(ch->d, 0);
    }
}

START_TEST(free_fn_reenters)
{
    struct chain ch = {.d = ebr_domain_new(1), .depth = 5};
    ebr_retire(ch.d, 0, malloc(8), chain_free, &ch);
    ck_assert_uint_eq(ebr_drain(ch.d, 0, 1000), 0);
    ck_assert_uint_eq(count_of(&ch.c), 6);
    check_stats(ch.d, 6, 6);
    ebr_domain_free(ch.d);
}
END_TEST

START_TEST(domain_free_frees_pending)
{
    struct ebr_domain *d = ebr_domain_new(4);
    struct counter c = {0};
    for (int s = 0; s < 4; s++) retire_n(d, s, 300, &c);
    check_stats(d, 1200, 0);
    ebr_domain_free(d);
    ck_assert_uint_eq(count_of(&c), 1200);
    ck_assert_ptr_null(ebr_domain_new(0));
}
END_TEST

/* Two domain objects over the same slot array and global word (as two
 * processes will share them in CXL memory): a reader in one view holds back
 * frees in the other. */
START_TEST(shared_slots_two_views)
{
    uint64_t *mem = aligned_alloc(64, 2 * EBR_SLOT_BYTES);
    memset(mem, 0, 2 * EBR_SLOT_BYTES);
    uint64_t *global = aligned_alloc(64, 64);
    *global = 41;
    struct ebr_domain *va = ebr_domain_new_ext(2, mem, global);
    struct ebr_domain *vb = ebr_domain_new_ext(2, mem, global);
    ck_assert_uint_eq(ebr_epoch(va), 41);
    struct counter c = {0};
    ebr_enter(vb, 1);
    retire_n(va, 0, 3, &c);
    ck_assert_uint_eq(ebr_drain(va, 0, 20), 3);
    ck_assert_uint_le(*global, 42);
    ebr_exit(vb, 1);
    ck_assert_uint_eq(ebr_drain(va, 0, 1000), 0);
    ck_assert_uint_eq(count_of(&c), 3);
    ck_assert_uint_ge(ebr_epoch(vb), 43);
    ebr_domain_free(va);
    ebr_domain_free(vb);
    free(mem);
    free(global);
}
END_TEST

/* ---- a stuck participant (threads) ----------------------------------------- */

struct stuck_arg {
    struct ebr_domain *d;
    int entered; /* atomic */
    int release; /* atomic */
};

static void *stuck_main(void *p)
{
    struct stuck_arg *a = p;
    ebr_enter(a->d, 1);
    __atomic_store_n(&a->entered, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&a->release, __ATOMIC_ACQUIRE)) usleep(200);
    ebr_exit(a->d, 1);
    return NULL;
}

START_TEST(stuck_participant_blocks_drain)
{
    struct stuck_arg a = {.d = ebr_domain_new(2)};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, stuck_main, &a), 0);
    while (!__atomic_load_n(&a.entered, __ATOMIC_ACQUIRE)) usleep(100);
    struct counter c = {0};
    retire_n(a.d, 0, 50, &c);
    ck_assert_uint_eq(ebr_drain(a.d, 0, 50), 50);
    ck_assert_uint_eq(count_of(&c), 0);
    __atomic_store_n(&a.release, 1, __ATOMIC_RELEASE);
    ck_assert_uint_eq(ebr_drain(a.d, 0, 5000), 0); /* waits for the exit */
    ck_assert_uint_eq(count_of(&c), 50);
    pthread_join(t, NULL);
    check_stats(a.d, 50, 50);
    ebr_domain_free(a.d);
}
END_TEST

/* ---- concurrent readers and writers ----------------------------------------- */

#define MAGIC_ALIVE 0xa11ce5a11ce5a11cULL
#define MAGIC_DEAD 0xdeaddeaddeaddeadULL
#define NPAY 6
#define NWRITERS 2
#define NREADERS 3

struct obj {
    uint64_t magic;
    uint64_t seq;
    uint64_t pay[NPAY]; /* pay[i] = seq * 31 + i */
};

static struct ebr_domain *dom;
static struct obj *current; /* atomic */
static int stop_flag;       /* atomic */
static uint64_t total_frees; /* atomic */

static bool stopping(void) { return __atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE) || tu_failed(); }

static struct obj *obj_new(uint64_t seq)
{
    struct obj *o = malloc(sizeof *o);
    o->magic = MAGIC_ALIVE;
    o->seq = seq;
    for (int i = 0; i < NPAY; i++) o->pay[i] = seq * 31 + (uint64_t)i;
    return o;
}

struct writer {
    pthread_t thread;
    int slot;
    uint64_t frees; /* by free_fn, on this writer's thread only */
    uint64_t retired;
    uint64_t frees_while_running;
    size_t drain_left;
    size_t peak_pending;
};

static void obj_free(void *ctx, void *p)
{
    struct obj *o = p;
    struct writer *w = ctx;
    if (o->magic != MAGIC_ALIVE) tu_fail("double free of object %llu", (unsigned long long)o->seq);
    o->magic = MAGIC_DEAD; /* poison: a reader still inside would see it */
    free(o);
    w->frees++;
    __atomic_fetch_add(&total_frees, 1, __ATOMIC_RELAXED);
}

static bool check_obj(const struct obj *o, const char *who)
{
    if (o->magic != MAGIC_ALIVE) {
        tu_fail("%s: object %llu read after free (magic %#llx)", who,
                     (unsigned long long)o->seq, (unsigned long long)o->magic);
        return false;
    }
    for (int i = 0; i < NPAY; i++)
        if (o->pay[i] != o->seq * 31 + (uint64_t)i) {
            tu_fail("%s: object %llu payload %d corrupt", who, (unsigned long long)o->seq, i);
            return false;
        }
    return true;
}

static void *writer_main(void *p)
{
    struct writer *w = p;
    uint64_t seq = (uint64_t)w->slot << 48;
    for (uint64_t it = 0; it < 5000000 && !stopping(); it++) {
        struct obj *n = obj_new(++seq);
        if (it % 4 == 3) {
            /* Swap outside a critical section, then collect by hand. */
            struct obj *old = __atomic_exchange_n(&current, n, __ATOMIC_ACQ_REL);
            ebr_retire(dom, w->slot, old, obj_free, w);
            ebr_collect(dom, w->slot);
        } else {
            ebr_enter(dom, w->slot);
            struct obj *cur = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
            check_obj(cur, "writer");
            struct obj *old = __atomic_exchange_n(&current, n, __ATOMIC_ACQ_REL);
            check_obj(old, "writer (old)");
            ebr_retire(dom, w->slot, old, obj_free, w);
            check_obj(old, "writer (retired, still pinned)");
            ebr_exit(dom, w->slot);
        }
        w->retired++;
        size_t pend = ebr_pending(dom, w->slot);
        if (pend > w->peak_pending) w->peak_pending = pend;
    }
    w->frees_while_running = w->frees;
    /* Readers may still be running: drain waits for them to move on. */
    w->drain_left = ebr_drain(dom, w->slot, 10000);
    return NULL;
}

struct reader {
    pthread_t thread;
    int slot;
    uint64_t reads;
};

static void *reader_main(void *p)
{
    struct reader *r = p;
    while (!stopping()) {
        ebr_enter(dom, r->slot);
        const struct obj *o = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
        check_obj(o, "reader");
        if (r->reads % 32 == 0) {
            /* Linger (and nest) so that writers retire o while we hold it. */
            ebr_enter(dom, r->slot);
            for (int i = 0; i < 4; i++) {
                const struct obj *o2 = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
                if (!check_obj(o2, "reader (nested)")) break;
                sched_yield();
            }
            ebr_exit(dom, r->slot);
        }
        check_obj(o, "reader (again)");
        ebr_exit(dom, r->slot);
        r->reads++;
    }
    return NULL;
}

static int run_ms(void) { return tu_env_ms("EBR_MT_MS", TU_TSAN_OR(1000, 2000)); }

START_TEST(readers_and_writers)
{
    const int nslots = NWRITERS + NREADERS + 1, main_slot = nslots - 1;
    dom = ebr_domain_new(nslots);
    ck_assert_ptr_nonnull(dom);
    current = obj_new(0);
    struct writer w[NWRITERS];
    struct reader r[NREADERS];
    memset(w, 0, sizeof w);
    memset(r, 0, sizeof r);
    for (int i = 0; i < NREADERS; i++) {
        r[i].slot = NWRITERS + i;
        ck_assert_int_eq(pthread_create(&r[i].thread, NULL, reader_main, &r[i]), 0);
    }
    for (int i = 0; i < NWRITERS; i++) {
        w[i].slot = i;
        ck_assert_int_eq(pthread_create(&w[i].thread, NULL, writer_main, &w[i]), 0);
    }
    struct timespec ts = {run_ms() / 1000, (run_ms() % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < NWRITERS; i++) pthread_join(w[i].thread, NULL);
    for (int i = 0; i < NREADERS; i++) pthread_join(r[i].thread, NULL);
    if (tu_failed()) ck_abort_msg("%s", tu_failure());

    uint64_t retired = 0, reads = 0;
    for (int i = 0; i < NWRITERS; i++) {
        fprintf(stderr, "writer %d: %llu retired, %llu freed while running, peak pending %zu\n", i,
                (unsigned long long)w[i].retired, (unsigned long long)w[i].frees_while_running,
                w[i].peak_pending);
        ck_assert_uint_eq(w[i].drain_left, 0);
        ck_assert_uint_eq(w[i].frees, w[i].retired);
        ck_assert_uint_gt(w[i].retired, 100);
        /* Reclamation kept up while readers were running, not only at the end. */
        ck_assert_uint_gt(w[i].frees_while_running, 0);
        retired += w[i].retired;
    }
    for (int i = 0; i < NREADERS; i++) reads += r[i].reads;
    fprintf(stderr, "readers: %llu reads; epoch %llu\n", (unsigned long long)reads,
            (unsigned long long)ebr_epoch(dom));
    ck_assert_uint_gt(reads, 100);

    /* The last object goes through EBR too. */
    struct obj *last = __atomic_exchange_n(&current, NULL, __ATOMIC_ACQ_REL);
    struct writer mw = {.slot = main_slot};
    ebr_retire(dom, main_slot, last, obj_free, &mw);
    ck_assert_uint_eq(ebr_drain(dom, main_slot, 1000), 0);
    ck_assert_uint_eq(mw.frees, 1);

    struct ebr_stats st;
    ebr_get_stats(dom, &st);
    ck_assert_uint_eq(st.retired, retired + 1);
    ck_assert_uint_eq(st.freed, st.retired);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(__atomic_load_n(&total_frees, __ATOMIC_RELAXED), st.freed);
    ebr_domain_free(dom);
    dom = NULL;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ebr");
    TCase *tc = tu_tcase(s, "single", 0);
    tcase_add_test(tc, not_freed_inside_own_section);
    tcase_add_test(tc, other_slot_blocks_until_exit);
    tcase_add_test(tc, nested_sections);
    tcase_add_test(tc, collects_from_exit);
    tcase_add_test(tc, free_fn_reenters);
    tcase_add_test(tc, domain_free_frees_pending);
    tcase_add_test(tc, shared_slots_two_views);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_test(mt, stuck_participant_blocks_drain);
    tcase_add_test(mt, readers_and_writers);
    return tu_run(s);
}
