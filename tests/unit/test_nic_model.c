/* The NIC model's arithmetic (src/dm/nic_model.h): a batch completes no
 * earlier than a round trip after it was posted, N atomics at a cap of C per
 * second take at least N / C, payload bytes at least bytes / bandwidth, two
 * models on one shared schedule share its caps, and no model adds nothing.
 * Timed checks are lower bounds only: a loaded machine may make anything
 * slower, never faster. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dm/nic_model.h"
#include "helpers/testutil.h"
#include "util/clock.h"

static struct nic_model *model(double rtt_us, double atomic_mops, double rw_mops, double gbps)
{
    pod_err err = {{0}};
    const struct nic_model_params p = {rtt_us, atomic_mops, rw_mops, gbps};
    struct nic_model *m = nic_model_new(&p, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    return m;
}

/* A model whose memory node 0 has a schedule of its own. */
static struct nic_model *private_model(double rtt_us, double atomic_mops, double rw_mops,
                                       double gbps)
{
    pod_err err = {{0}};
    struct nic_model *m = model(rtt_us, atomic_mops, rw_mops, gbps);
    ck_assert_msg(nic_model_attach(m, 0, NULL, NULL, &err) == 0, "%s", err.msg);
    return m;
}

START_TEST(batch_waits_a_round_trip)
{
    struct nic_model *m = private_model(200, 1000, 1000, 1000);
    const struct nic_batch one_read = {.rw = 1, .bytes = 8};
    uint64_t t0 = pod_mono_ns();
    uint64_t done = nic_model_done_at(m, 0, &one_read, t0);
    ck_assert_uint_ge(done - t0, 200000);
    nic_model_wait_until(done);
    ck_assert_uint_ge(pod_mono_ns() - t0, 200000);
    /* A memory node not attached: the round trip, no caps. */
    ck_assert_uint_ge(nic_model_done_at(m, 5, &one_read, t0) - t0, 200000);
    /* Waited for once more, a time already passed costs nothing. */
    ck_assert_uint_eq(nic_model_wait_until(done), 0);
    nic_model_free(m);
}
END_TEST

START_TEST(atomics_at_their_cap)
{
    /* 2000 CAS, one per batch, at 2 Mops/s: at least 1 ms, and the last
     * completes at least 1 ms + a round trip after the first was posted. */
    const int n = 2000;
    const double mops = 2.0;
    struct nic_model *m = private_model(2.5, mops, 1000, 1000);
    const struct nic_batch cas = {.atomics = 1};
    uint64_t t0 = pod_mono_ns(), done = 0;
    for (int i = 0; i < n; i++) {
        done = nic_model_done_at(m, 0, &cas, pod_mono_ns());
        nic_model_wait_until(done);
    }
    uint64_t need = (uint64_t)(n * 1e3 / mops);
    ck_assert_uint_ge(pod_mono_ns() - t0, need);
    ck_assert_uint_ge(done - t0, need + 2500);
    /* n in one batch: the same cap, one round trip. */
    uint64_t t1 = pod_mono_ns();
    const struct nic_batch many = {.atomics = (uint32_t)n};
    ck_assert_uint_ge(nic_model_done_at(m, 0, &many, t1) - t1, need + 2500);
    nic_model_free(m);
}
END_TEST

START_TEST(bytes_at_the_bandwidth)
{
    /* 1 MiB READ at 8 Gb/s: at least 1 ms (1 byte per ns). */
    struct nic_model *m = private_model(0, 1000, 1000, 8);
    const struct nic_batch big = {.rw = 1, .bytes = 1u << 20};
    uint64_t t0 = pod_mono_ns();
    ck_assert_uint_ge(nic_model_done_at(m, 0, &big, t0) - t0, 1u << 20);
    nic_model_free(m);
}
END_TEST

START_TEST(shared_schedule_shares_the_caps)
{
    /* Two compute nodes' models on one memory node of one pod: n CAS from
     * each at cap C take at least 2n / C in all. A third, on another memory
     * node, is not held up by them. */
    char pod[64], path[256];
    snprintf(pod, sizeof pod, "nictest-%d", (int)getpid());
    nic_model_schedule_path(pod, "/tmp/mn0.sock", path, sizeof path);
    unlink(path);
    pod_err err = {{0}};
    struct nic_model *a = model(1, 1.0, 1000, 1000), *b = model(1, 1.0, 1000, 1000),
                     *other = model(1, 1.0, 1000, 1000);
    ck_assert_msg(nic_model_attach(a, 0, pod, "/tmp/mn0.sock", &err) == 0, "%s", err.msg);
    ck_assert_msg(nic_model_attach(b, 0, pod, "/tmp/mn0.sock", &err) == 0, "%s", err.msg);
    ck_assert_msg(nic_model_attach(other, 0, pod, "/tmp/mn1.sock", &err) == 0, "%s", err.msg);
    ck_assert_int_eq(nic_model_attach(a, 0, pod, "/tmp/mn0.sock", &err), -1);
    const int n = 500;
    const struct nic_batch cas = {.atomics = 1};
    uint64_t t0 = pod_mono_ns(), last = 0;
    for (int i = 0; i < n; i++) {
        uint64_t now = pod_mono_ns();
        uint64_t da = nic_model_done_at(a, 0, &cas, now), db = nic_model_done_at(b, 0, &cas, now);
        last = da > db ? da : db;
    }
    ck_assert_uint_ge(last - t0, 2 * (uint64_t)n * 1000);
    uint64_t t1 = pod_mono_ns();
    ck_assert_uint_lt(nic_model_done_at(other, 0, &cas, t1) - t1, (uint64_t)n * 1000);
    nic_model_free(a);
    nic_model_free(b);
    nic_model_free(other);
    ck_assert_int_eq(unlink(path), 0);
    nic_model_schedule_path(pod, "/tmp/mn1.sock", path, sizeof path);
    unlink(path);
}
END_TEST

START_TEST(no_model_adds_nothing)
{
    const struct nic_batch b = {.atomics = 100, .rw = 100, .bytes = 1 << 20};
    ck_assert_uint_eq(nic_model_done_at(NULL, 0, &b, 12345), 12345);
    ck_assert_uint_eq(nic_model_wait_until(pod_mono_ns() - 1000), 0);
}
END_TEST

START_TEST(bad_parameters_refused)
{
    static const struct nic_model_params bad[] = {
        {-1, 2.5, 35, 100}, {2.5, 0, 35, 100}, {2.5, 2.5, -35, 100}, {2.5, 2.5, 35, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pod_err err = {{0}};
        ck_assert_ptr_null(nic_model_new(&bad[i], &err));
        ck_assert_msg(strstr(err.msg, "every rate above 0") != NULL, "%s", err.msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nic_model");
    TCase *t = tu_tcase(s, "nic_model", 60);
    tcase_add_test(t, batch_waits_a_round_trip);
    tcase_add_test(t, atomics_at_their_cap);
    tcase_add_test(t, bytes_at_the_bandwidth);
    tcase_add_test(t, shared_schedule_shares_the_caps);
    tcase_add_test(t, no_model_adds_nothing);
    tcase_add_test(t, bad_parameters_refused);
    return tu_run(s);
}
