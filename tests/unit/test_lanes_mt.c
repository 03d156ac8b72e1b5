/* Lanes (src/util/lanes.h): one lane runs on the caller's stack, several take
 * turns round robin on yields, each keeps its lanes_local, idle lanes and
 * returned ones are accounted for, lanes_sleep_ns lets the others run, a lane
 * may use most of its stack and overflowing it faults, threads run lanes of
 * their own at the same time, and bad calls are refused. Timed checks are
 * lower bounds only: a loaded machine may make anything slower. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "helpers/testutil.h"
#include "util/clock.h"
#include "util/lanes.h"

static void run_lanes(unsigned n, size_t stack_bytes, lane_fn fn, void *arg)
{
    pod_err err = {{0}};
    ck_assert_msg(lanes_run(n, stack_bytes, fn, arg, &err) == 0, "%s", err.msg);
}

static void one_lane(void *arg, unsigned lane)
{
    char *caller_frame = arg;
    ck_assert_uint_eq(lane, 0);
    ck_assert_int_eq(lanes_self(), 0);
    ck_assert_uint_eq(lanes_count(), 1);
    /* On the caller's stack: just below its frame. */
    char *frame = __builtin_frame_address(0);
    ck_assert((uintptr_t)frame < (uintptr_t)caller_frame);
    ck_assert_uint_lt((size_t)(caller_frame - frame), 64 * 1024);
    lanes_yield(); /* alone: returns at once */
    ck_assert(!lanes_others_busy());
    uint64_t t0 = pod_mono_ns();
    lanes_sleep_ns(1000000);
    ck_assert_uint_ge(pod_mono_ns() - t0, 1000000);
}

START_TEST(one_lane_runs_on_the_caller)
{
    ck_assert_int_eq(lanes_self(), -1);
    ck_assert_uint_eq(lanes_count(), 0);
    run_lanes(1, 0, one_lane, __builtin_frame_address(0));
    ck_assert_int_eq(lanes_self(), -1);
    ck_assert_uint_eq(lanes_count(), 0);
}
END_TEST

struct order_log {
    unsigned n, len;
    unsigned entry[64];
};

/* Lane i logs 10 * i + round for rounds 0..i, yielding after each. */
static void logging_lane(void *arg, unsigned lane)
{
    struct order_log *log = arg;
    for (unsigned round = 0; round <= lane; round++) {
        ck_assert_int_eq(lanes_self(), (int)lane);
        ck_assert_uint_eq(lanes_count(), log->n);
        log->entry[log->len++] = 10 * lane + round;
        lanes_yield();
    }
}

START_TEST(lanes_take_turns_round_robin)
{
    struct order_log log = {.n = 4};
    run_lanes(4, 0, logging_lane, &log);
    /* Returned lanes are skipped; the last one left yields to itself. */
    static const unsigned want[] = {0, 10, 20, 30, 11, 21, 31, 22, 32, 33};
    ck_assert_uint_eq(log.len, sizeof want / sizeof want[0]);
    for (unsigned i = 0; i < log.len; i++)
        ck_assert_msg(log.entry[i] == want[i], "entry %u: %u, want %u", i, log.entry[i], want[i]);
    ck_assert_int_eq(lanes_self(), -1);
}
END_TEST

struct rounds {
    atomic_uint turns;
    unsigned rounds;
};

static void counting_lane(void *arg, unsigned lane)
{
    struct rounds *r = arg;
    for (unsigned i = 0; i < r->rounds; i++) {
        ck_assert_int_eq(lanes_self(), (int)lane);
        atomic_fetch_add(&r->turns, 1);
        lanes_yield();
    }
}

START_TEST(lanes_max_lanes_run)
{
    struct rounds r = {.rounds = 10};
    run_lanes(LANES_MAX, 16 * 1024, counting_lane, &r);
    ck_assert_uint_eq(atomic_load(&r.turns), LANES_MAX * 10);
}
END_TEST

static int caller_cookie;
static int lane_cookie[4];

static void local_lane(void *arg, unsigned lane)
{
    (void)arg;
    ck_assert_ptr_eq(lanes_local(), &caller_cookie); /* the caller's value to start */
    lanes_set_local(&lane_cookie[lane]);
    for (int i = 0; i < 5; i++) {
        lanes_yield();
        ck_assert_ptr_eq(lanes_local(), &lane_cookie[lane]);
    }
}

START_TEST(local_kept_per_lane)
{
    lanes_set_local(&caller_cookie);
    run_lanes(4, 0, local_lane, NULL);
    ck_assert_ptr_eq(lanes_local(), &caller_cookie);
    /* A single lane is the caller itself; its value does not outlive it. */
    run_lanes(1, 0, local_lane, NULL);
    ck_assert_ptr_eq(lanes_local(), &caller_cookie);
}
END_TEST

/* Three lanes go idle and return in a fixed order (each step is one turn). */
static void idle_lane(void *arg, unsigned lane)
{
    unsigned *step = arg;
    switch (lane) {
    case 0:
        ck_assert_uint_eq((*step)++, 0);
        ck_assert(lanes_others_busy());
        lanes_set_idle(true);
        lanes_yield();
        ck_assert_uint_eq((*step)++, 3);
        ck_assert(lanes_others_busy()); /* lane 2 */
        lanes_set_idle(false);
        return; /* a returned lane counts as idle */
    case 1:
        ck_assert_uint_eq((*step)++, 1);
        ck_assert(lanes_others_busy()); /* lane 2 */
        lanes_set_idle(true);
        lanes_set_idle(true); /* twice: no effect */
        lanes_yield();
        ck_assert_uint_eq((*step)++, 4);
        ck_assert(lanes_others_busy()); /* lane 2; lane 0 returned */
        lanes_yield();
        ck_assert_uint_eq((*step)++, 6);
        ck_assert(!lanes_others_busy()); /* alone */
        return;
    default:
        ck_assert_uint_eq((*step)++, 2);
        ck_assert(!lanes_others_busy()); /* lanes 0 and 1 idle */
        lanes_yield();
        ck_assert_uint_eq((*step)++, 5);
        ck_assert(!lanes_others_busy()); /* lane 0 returned, lane 1 idle */
        lanes_set_idle(true);
        ck_assert(!lanes_others_busy());
        lanes_set_idle(false);
        return;
    }
}

START_TEST(idle_and_returned_lanes_are_not_busy)
{
    unsigned step = 0;
    run_lanes(3, 0, idle_lane, &step);
    ck_assert_uint_eq(step, 7);
    ck_assert(!lanes_others_busy());
    lanes_set_idle(true); /* outside lanes: no effect */
    ck_assert(!lanes_others_busy());
}
END_TEST

struct sleepers {
    uint64_t ns[3];
    uint64_t slept[3];
    bool sleeping;
    unsigned turns_meanwhile;
};

/* Lane 0 sleeps while lane 1 works; then every lane sleeps. */
static void sleeping_lane(void *arg, unsigned lane)
{
    struct sleepers *s = arg;
    if (lane == 0) {
        s->sleeping = true;
        uint64_t t0 = pod_mono_ns();
        lanes_sleep_ns(s->ns[0]);
        s->slept[0] = pod_mono_ns() - t0;
        s->sleeping = false;
    } else if (lane == 1) {
        while (s->sleeping) {
            s->turns_meanwhile++;
            lanes_yield();
        }
    }
    uint64_t t0 = pod_mono_ns();
    lanes_sleep_ns(s->ns[lane] / 2);
    ck_assert_uint_ge(pod_mono_ns() - t0, s->ns[lane] / 2);
    /* Alone at last for one of them: a plain nanosleep. */
    t0 = pod_mono_ns();
    lanes_sleep_ns(1000000);
    ck_assert_uint_ge(pod_mono_ns() - t0, 1000000);
}

START_TEST(sleep_lets_the_others_run)
{
    struct sleepers s = {.ns = {20000000, 6000000, 12000000}};
    run_lanes(3, 0, sleeping_lane, &s);
    ck_assert_uint_ge(s.slept[0], s.ns[0]);
    ck_assert_uint_gt(s.turns_meanwhile, 0);
    uint64_t t0 = pod_mono_ns();
    lanes_sleep_ns(1000000); /* outside lanes */
    ck_assert_uint_ge(pod_mono_ns() - t0, 1000000);
}
END_TEST

/* Recurses until the frames reach `want` bytes below `top`, yields at the
 * bottom, and returns the depth reached. */
static unsigned recurse(const char *top, size_t want, unsigned depth)
{
    volatile char pad[512];
    memset((char *)pad, (int)depth, sizeof pad);
    const char *frame = __builtin_frame_address(0);
    unsigned deepest = depth;
    if ((size_t)(top - frame) < want) deepest = recurse(top, want, depth + 1);
    else lanes_yield();
    for (size_t i = 0; i < sizeof pad; i++) ck_assert_int_eq(pad[i], (char)depth);
    return deepest;
}

static void deep_lane(void *arg, unsigned lane)
{
    unsigned *depth = arg;
    depth[lane] = recurse(__builtin_frame_address(0), 200 * 1024, 0);
}

START_TEST(deep_recursion_uses_most_of_the_stack)
{
    unsigned depth[2] = {0};
    run_lanes(2, 0, deep_lane, depth);
    ck_assert_uint_gt(depth[0], 100);
    ck_assert_uint_gt(depth[1], 100);
}
END_TEST

static void overflowing_lane(void *arg, unsigned lane)
{
    (void)lane;
    recurse(__builtin_frame_address(0), SIZE_MAX, 0);
    *(int *)arg = 1;
}

static int overflow_child(void *arg)
{
    (void)arg;
    /* The sanitizers' report of the overflow is expected: keep it out of the log. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    int reached = 0;
    pod_err err = {{0}};
    lanes_run(2, 64 * 1024, overflowing_lane, &reached, &err);
    return 0; /* the guard page should have stopped the process before this */
}

START_TEST(stack_overflow_faults)
{
    int pid = tu_fork(overflow_child, NULL);
    ck_assert_int_ne(tu_wait_child(pid, 60000), 0);
}
END_TEST

/* Large frames written through and checked across yields, at changing depths:
 * ASan must follow every switch, or its shadow of the stacks goes wrong. */
static void fill_and_check(unsigned lane, unsigned round)
{
    char big[32 * 1024];
    memset(big, (int)(lane * 16 + round), sizeof big);
    lanes_yield();
    if (round % 3 != 2) fill_and_check(lane, round + 1);
    for (size_t i = 0; i < sizeof big; i++)
        if (big[i] != (char)(lane * 16 + round))
            ck_abort_msg("lane %u round %u: byte %zu changed", lane, round, i);
}

static void stack_traffic_lane(void *arg, unsigned lane)
{
    (void)arg;
    for (unsigned round = 0; round < 9; round++) {
        char buf[4096];
        memset(buf, (int)lane, sizeof buf);
        fill_and_check(lane, round);
        ck_assert_int_eq(buf[sizeof buf - 1], (char)lane);
        lanes_yield();
    }
}

START_TEST(stack_traffic_across_switches)
{
    /* Many runs: stacks mapped again at addresses earlier ones used. */
    for (int i = 0; i < 30; i++) run_lanes(4, 0, stack_traffic_lane, NULL);
}
END_TEST

struct shared {
    atomic_ulong count;
    atomic_uint bad_lane;
    unsigned per_lane;
};

static void adding_lane(void *arg, unsigned lane)
{
    struct shared *s = arg;
    for (unsigned i = 0; i < s->per_lane; i++) {
        if (lanes_self() != (int)lane || lanes_count() != 4) atomic_fetch_add(&s->bad_lane, 1);
        atomic_fetch_add(&s->count, 1);
        lanes_yield();
    }
}

static void *lanes_thread(void *arg)
{
    pod_err err = {{0}};
    if (lanes_run(4, 0, adding_lane, arg, &err) != 0) tu_fail("%s", err.msg);
    return NULL;
}

START_TEST(threads_run_lanes_of_their_own)
{
    struct shared s = {.per_lane = TU_TSAN_OR(20000, 2000)};
    pthread_t t[2];
    tu_fail_reset();
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, lanes_thread, &s), 0);
    ck_assert_int_eq(lanes_count(), 0); /* the main thread runs none */
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    if (tu_failed()) ck_abort_msg("%s", tu_failure());
    ck_assert_uint_eq(atomic_load(&s.bad_lane), 0);
    ck_assert_uint_eq(atomic_load(&s.count), 2ul * 4 * s.per_lane);
}
END_TEST

static void nesting_lane(void *arg, unsigned lane)
{
    (void)lane;
    pod_err err = {{0}};
    ck_assert_int_eq(lanes_run(2, 0, counting_lane, arg, &err), -1);
    ck_assert_msg(strstr(err.msg, "do not run lanes") != NULL, "%s", err.msg);
}

START_TEST(bad_calls_refused)
{
    struct rounds r = {.rounds = 1};
    pod_err err = {{0}};
    ck_assert_int_eq(lanes_run(0, 0, counting_lane, &r, &err), -1);
    ck_assert_msg(strstr(err.msg, "from 1 to 64") != NULL, "%s", err.msg);
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(lanes_run(LANES_MAX + 1, 0, counting_lane, &r, &err), -1);
    ck_assert_msg(strstr(err.msg, "65 lanes") != NULL, "%s", err.msg);
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(lanes_run(4, SIZE_MAX / 2, counting_lane, &r, &err), -1);
    ck_assert_msg(strstr(err.msg, "address space") != NULL, "%s", err.msg);
    ck_assert_int_eq(lanes_run(0, 0, counting_lane, &r, NULL), -1); /* no err: still refused */
    ck_assert_uint_eq(atomic_load(&r.turns), 0);
    /* Nested, with several lanes and with one. */
    run_lanes(2, 0, nesting_lane, &r);
    run_lanes(1, 0, nesting_lane, &r);
    ck_assert_uint_eq(atomic_load(&r.turns), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lanes");
    TCase *t = tu_tcase(s, "lanes", 120);
    tcase_add_test(t, one_lane_runs_on_the_caller);
    tcase_add_test(t, lanes_take_turns_round_robin);
    tcase_add_test(t, lanes_max_lanes_run);
    tcase_add_test(t, local_kept_per_lane);
    tcase_add_test(t, idle_and_returned_lanes_are_not_busy);
    tcase_add_test(t, sleep_lets_the_others_run);
    tcase_add_test(t, deep_recursion_uses_most_of_the_stack);
    tcase_add_test(t, stack_overflow_faults);
    tcase_add_test(t, stack_traffic_across_switches);
    tcase_add_test(t, threads_run_lanes_of_their_own);
    tcase_add_test(t, bad_calls_refused);
    return tu_run(s);
}
