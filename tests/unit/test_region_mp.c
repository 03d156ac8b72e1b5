/* Two processes attach to one region as hosts 0 and 1. Each allocates in its
 * own slice and publishes writes through the SWcc protocol (write, write-back,
 * then a release store of a version in HWcc memory); the other reads them
 * after flush-before-read.
 *
 * In simulated non-coherent mode the test also plays the two classic bugs and
 * requires that they give wrong answers — a reader that skips the flush sees
 * the stale value, a writer that skips the write-back is not seen — which is
 * what makes the simulator worth running protocol tests under. On this
 * (coherent) machine without simulation the same reads are fresh. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cxl/region.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)
#define WAIT_MS 10000

/* HWcc mailbox owned by host 0 (root slot 0). */
struct mailbox {
    uint64_t step;     /* host 0 advances, release */
    uint64_t ack;      /* host 1 acknowledges, release */
    cxl_off obj0;      /* host 0's SWcc object */
    cxl_off obj1;      /* host 1's SWcc object (written by host 1) */
};

struct scenario {
    struct pod_config *c;
    bool sim;
};

#define FAILF(...) TU_HOST_FAIL(host, __VA_ARGS__)

static uint64_t read_u64(struct cxl_region *r, cxl_off off)
{
    uint64_t v;
    cxl_swcc_read(&r->swcc, &v, cxl_ptr(r, off), sizeof v);
    return v;
}

static void write_u64(struct cxl_region *r, cxl_off off, uint64_t v)
{
    cxl_swcc_write(&r->swcc, cxl_ptr(r, off), &v, sizeof v);
}

static int host0_main(void *arg)
{
    const int host = 0;
    struct scenario *sc = arg;
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(sc->c, 0, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
    if (!r) FAILF("open: %s", err.msg);
    cxl_off mb_off = cxl_zalloc(r, CXL_HWCC, sizeof(struct mailbox));
    cxl_off obj = cxl_zalloc(r, CXL_SWCC, 64);
    if (!mb_off || !obj) FAILF("allocation failed");
    if (cxl_owner_of(r, mb_off, NULL) != 0 || cxl_owner_of(r, obj, NULL) != 0)
        FAILF("allocation outside my slice");
    struct mailbox *mb = cxl_ptr(r, mb_off);
    mb->obj0 = obj;

    /* step 1: publish v=1 properly */
    write_u64(r, obj, 1);
    cxl_swcc_writeback(&r->swcc, cxl_ptr(r, obj), 64);
    __atomic_store_n(&mb->step, 1, __ATOMIC_RELEASE);
    cxl_root_publish(r, 0, mb_off);
    if (!tu_wait_u64(&mb->ack, 1, WAIT_MS)) FAILF("no ack 1");

    /* step 2: v=2 published properly; host 1 reads once without flushing */
    write_u64(r, obj, 2);
    cxl_swcc_writeback(&r->swcc, cxl_ptr(r, obj), 64);
    __atomic_store_n(&mb->step, 2, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->ack, 2, WAIT_MS)) FAILF("no ack 2");

    /* step 3: v=3 written but NOT written back (the writer's bug) */
    write_u64(r, obj, 3);
    if (read_u64(r, obj) != 3) FAILF("I do not read my own write");
    __atomic_store_n(&mb->step, 3, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->ack, 3, WAIT_MS)) FAILF("no ack 3");

    /* step 4: the write-back, late */
    cxl_swcc_writeback(&r->swcc, cxl_ptr(r, obj), 64);
    __atomic_store_n(&mb->step, 4, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->ack, 4, WAIT_MS)) FAILF("no ack 4");

    /* step 5: read host 1's object, published by host 1 */
    cxl_off o1 = __atomic_load_n(&mb->obj1, __ATOMIC_ACQUIRE);
    if (cxl_owner_of(r, o1, NULL) != 1) FAILF("host 1's object is not in host 1's slice");
    cxl_swcc_flush(&r->swcc, cxl_ptr(r, o1), 64);
    if (read_u64(r, o1) != 42) FAILF("host 1's value: got %llu, want 42",
                                     (unsigned long long)read_u64(r, o1));
    __atomic_store_n(&mb->step, 5, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->ack, 5, WAIT_MS)) FAILF("host 1 did not finish");
    cxl_region_close(r);
    return 0;
}

static int host1_main(void *arg)
{
    const int host = 1;
    struct scenario *sc = arg;
    pod_err err = {{0}};
    struct cxl_region *r = NULL;
    /* Host 0 formats; wait until it is there, then attach as host 1. */
    for (int i = 0; i < WAIT_MS / 5 && !r; i++) {
        struct cxl_region *obs = cxl_region_open(sc->c, -1, 0, &err);
        bool up = obs && cxl_root_get(obs, 0, 0) != CXL_NULL;
        if (obs) cxl_region_close(obs);
        if (up) r = cxl_region_open(sc->c, 1, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
        else usleep(5000);
    }
    if (!r) FAILF("attach: %s", err.msg);
    if (r->formatted_now) FAILF("host 1 formatted a region host 0 was using");
    struct mailbox *mb = cxl_ptr(r, cxl_root_get(r, 0, 0));
    cxl_off obj = mb->obj0;
    if (cxl_owner_of(r, obj, NULL) != 0) FAILF("host 0's object is not in host 0's slice");

    if (!tu_wait_u64(&mb->step, 1, WAIT_MS)) FAILF("no step 1");
    cxl_swcc_flush(&r->swcc, cxl_ptr(r, obj), 64);
    uint64_t v = read_u64(r, obj); /* the line is now in host 1's cache */
    if (v != 1) FAILF("step 1: got %llu, want 1", (unsigned long long)v);
    __atomic_store_n(&mb->ack, 1, __ATOMIC_RELEASE);

    if (!tu_wait_u64(&mb->step, 2, WAIT_MS)) FAILF("no step 2");
    v = read_u64(r, obj); /* the reader's bug: no flush */
    if (sc->sim && v != 1) FAILF("simulator missed a skipped flush: got %llu, want stale 1",
                                 (unsigned long long)v);
    if (!sc->sim && v != 2) FAILF("coherent read: got %llu, want 2", (unsigned long long)v);
    cxl_swcc_flush(&r->swcc, cxl_ptr(r, obj), 64);
    v = read_u64(r, obj);
    if (v != 2) FAILF("step 2 after flush: got %llu, want 2", (unsigned long long)v);
    __atomic_store_n(&mb->ack, 2, __ATOMIC_RELEASE);

    if (!tu_wait_u64(&mb->step, 3, WAIT_MS)) FAILF("no step 3");
    cxl_swcc_flush(&r->swcc, cxl_ptr(r, obj), 64);
    v = read_u64(r, obj);
    if (sc->sim && v != 2) FAILF("simulator missed a skipped write-back: got %llu, want 2",
                                 (unsigned long long)v);
    if (!sc->sim && v != 3) FAILF("coherent read: got %llu, want 3", (unsigned long long)v);
    __atomic_store_n(&mb->ack, 3, __ATOMIC_RELEASE);

    if (!tu_wait_u64(&mb->step, 4, WAIT_MS)) FAILF("no step 4");
    cxl_swcc_flush(&r->swcc, cxl_ptr(r, obj), 64);
    v = read_u64(r, obj);
    if (v != 3) FAILF("step 4: got %llu, want 3", (unsigned long long)v);

    /* My own object, in my slice, published for host 0. */
    cxl_off mine = cxl_zalloc(r, CXL_SWCC, 64);
    if (!mine || cxl_owner_of(r, mine, NULL) != 1) FAILF("allocation outside my slice");
    write_u64(r, mine, 42);
    cxl_swcc_writeback(&r->swcc, cxl_ptr(r, mine), 64);
    __atomic_store_n(&mb->obj1, mine, __ATOMIC_RELEASE);
    __atomic_store_n(&mb->ack, 4, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->step, 5, WAIT_MS)) FAILF("no step 5");
    __atomic_store_n(&mb->ack, 5, __ATOMIC_RELEASE);
    cxl_region_close(r);
    return 0;
}

static void run_pod(bool sim)
{
    struct scenario sc = {malloc(sizeof(struct pod_config)), sim};
    tu_make_config(sc.c, 2, 1024 * MiB, 8 * MiB, sim);
    int p0 = tu_fork(host0_main, &sc);
    int p1 = tu_fork(host1_main, &sc);
    int rc0 = tu_wait_child(p0, 30000);
    int rc1 = tu_wait_child(p1, 30000);
    ck_assert_msg(rc0 == 0, "host 0 failed (%d)", rc0);
    ck_assert_msg(rc1 == 0, "host 1 failed (%d)", rc1);
    /* Both hosts left cleanly: the host table says so. */
    pod_err err = {{0}};
    struct cxl_region *obs = cxl_region_open(sc.c, -1, 0, &err);
    ck_assert_msg(obs != NULL, "%s", err.msg);
    ck_assert_int_eq(cxl_live_hosts(obs), 0);
    ck_assert_str_eq(cxl_host_state_name(obs->ctl->hosts[0].state), "free");
    ck_assert_str_eq(cxl_host_state_name(obs->ctl->hosts[1].state), "free");
    cxl_region_close(obs);
    free(sc.c);
}

START_TEST(two_hosts_simulated_noncoherent) { run_pod(true); }
END_TEST

START_TEST(two_hosts_coherent) { run_pod(false); }
END_TEST

/* A host killed with SIGKILL is seen as dead, its id can be taken again, and
 * the next start of a dead pod formats a new generation. */
static int attach_and_hang(void *arg)
{
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(arg, 0, CXL_OPEN_CREATE, &err);
    if (!r) return 1;
    cxl_root_publish(r, 0, 1); /* "I am up" */
    pause();
    return 0;
}

START_TEST(killed_host_is_dead)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 2, 1024 * MiB, 8 * MiB, false);
    int pid = tu_fork(attach_and_hang, c);
    pod_err err = {{0}};
    struct cxl_region *obs = NULL;
    for (int i = 0; i < 2000; i++) {
        obs = cxl_region_open(c, -1, 0, &err);
        if (obs && cxl_root_get(obs, 0, 0) == 1) break;
        if (obs) cxl_region_close(obs);
        obs = NULL;
        usleep(5000);
    }
    ck_assert_msg(obs != NULL, "child never came up: %s", err.msg);
    ck_assert(cxl_host_alive(obs, 0));
    uint64_t gen = obs->sb->generation;
    ck_assert_ptr_null(cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "already running"), "%s", err.msg);
    kill(pid, SIGKILL);
    /* Killed but not reaped yet (a zombie): already dead for the pod. */
    for (int i = 0; i < 500 && cxl_host_alive(obs, 0); i++) usleep(2000);
    ck_assert_msg(!cxl_host_alive(obs, 0), "a killed, unreaped host still looks alive");
    ck_assert_int_eq(tu_wait_child(pid, 5000), -1);
    ck_assert(!cxl_host_alive(obs, 0));
    cxl_region_close(obs);
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    ck_assert(r->formatted_now);
    ck_assert_uint_eq(r->sb->generation, gen + 1);
    cxl_region_close(r);
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region_mp");
    TCase *t = tu_tcase(s, "two processes", 90);
    tcase_add_test(t, two_hosts_simulated_noncoherent);
    tcase_add_test(t, two_hosts_coherent);
    tcase_add_test(t, killed_host_is_dead);
    return tu_run(s);
}
