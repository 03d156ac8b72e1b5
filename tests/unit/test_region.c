/* The region in one process: geometry, format/attach rules, allocator slices
 * and the HWcc budget, offset pointers. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cxl/numa.h"
#include "cxl/offset.h"
#include "cxl/region.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)

static struct pod_config *cfg(int nhosts, uint64_t size, uint64_t budget)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, nhosts, size, budget, false);
    return c;
}

START_TEST(offsets_round_trip)
{
    char buf[4096];
    ck_assert_ptr_null(cxl_at(buf, CXL_NULL));
    ck_assert_uint_eq(cxl_off_of(buf, NULL), CXL_NULL);
    for (cxl_off o = 1; o < sizeof buf; o += 37) {
        ck_assert_ptr_eq(cxl_at(buf, o), buf + o);
        ck_assert_uint_eq(cxl_off_of(buf, buf + o), o);
    }
    /* The same offset means the same bytes at two different mappings. */
    char copy[4096];
    memcpy(copy, buf, sizeof buf);
    ck_assert_ptr_eq(cxl_at(copy, 100), copy + 100);
    ck_assert_uint_eq(cxl_lines_to_off(cxl_off_to_lines(64 * 12345)), 64 * 12345);
    /* 36 bits of cache lines address 4 TiB */
    ck_assert_uint_eq(cxl_lines_to_off((1ull << 36) - 1), ((1ull << 36) - 1) * 64);
}
END_TEST

START_TEST(geometry_fits_and_explains)
{
    struct cxl_geometry g;
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 64 * MiB);
    ck_assert_int_eq(cxl_geometry_compute(c, &g, &err), 0);
    ck_assert_uint_eq(g.hwcc_budget, 64 * MiB);
    ck_assert_uint_eq(g.control_size + 2 * g.hwcc_quota <= g.hwcc_budget, 1);
    ck_assert_uint_eq(g.hwcc_off % (32 * MiB), 0);
    ck_assert_uint_eq(g.swcc_off % (32 * MiB), 0);
    ck_assert_uint_eq(g.hwcc_slice_size % (32 * MiB), 0);
    ck_assert_uint_eq(g.swcc_slice_size % (32 * MiB), 0);
    ck_assert_uint_eq(g.swcc_off + 2 * g.swcc_slice_size <= g.region_size, 1);
    ck_assert_uint_eq(g.hwcc_slice_size >= g.hwcc_quota, 1);

    c->region.size = 256 * MiB; /* too small for 2 hosts */
    ck_assert_int_eq(cxl_geometry_compute(c, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "too small") && strstr(err.msg, "need at least"), "%s", err.msg);

    c->region.size = 1024 * MiB;
    c->region.hwcc_budget = 64 * 1024; /* smaller than the control block */
    ck_assert_int_eq(cxl_geometry_compute(c, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "hwcc_budget") && strstr(err.msg, "control block"), "%s",
                  err.msg);

    /* HWcc slices must end within CXL_HWCC_LIMIT (local rows' 32-bit shortcuts). */
    c->region.size = 80 * 1024 * MiB;
    c->region.hwcc_budget = 30 * 1024 * MiB;
    ck_assert_int_eq(cxl_geometry_compute(c, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "too large") && strstr(err.msg, "32768 MiB"), "%s", err.msg);
    c->region.hwcc_budget = 16 * 1024 * MiB;
    ck_assert_int_eq(cxl_geometry_compute(c, &g, &err), 0);
    ck_assert_uint_le(g.swcc_off, CXL_HWCC_LIMIT);
    free(c);
}
END_TEST

START_TEST(open_without_create_needs_a_region)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(1, 512 * MiB, 4 * MiB);
    ck_assert_ptr_null(cxl_region_open(c, -1, 0, &err));
    ck_assert_msg(strstr(err.msg, "does not exist"), "%s", err.msg);
    ck_assert_ptr_null(cxl_region_open(c, 5, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "out of range"), "%s", err.msg);
    free(c);
}
END_TEST

START_TEST(format_attach_and_generation)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 8 * MiB);
    struct cxl_region *r0 = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r0 != NULL, "%s", err.msg);
    ck_assert(r0->formatted_now);
    uint64_t gen = r0->sb->generation;
    ck_assert_uint_ge(gen, 1);
    ck_assert_uint_eq(r0->sb->hwcc_budget, 8 * MiB);
    ck_assert_int_eq(cxl_live_hosts(r0), 1);
    ck_assert_str_eq(cxl_host_state_name(r0->ctl->hosts[0].state), "starting");

    /* Host 1 attaches to the live pod without formatting. */
    struct cxl_region *r1 = cxl_region_open(c, 1, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r1 != NULL, "%s", err.msg);
    ck_assert(!r1->formatted_now);
    ck_assert_uint_eq(r1->sb->generation, gen);
    ck_assert_int_eq(cxl_live_hosts(r1), 2);

    /* A second holder of host id 0 is refused. */
    struct cxl_region *dup = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_ptr_null(dup);
    ck_assert_msg(strstr(err.msg, "already running"), "%s", err.msg);

    /* Explicit format is refused while hosts live. */
    ck_assert_ptr_null(cxl_region_open(c, -1, CXL_OPEN_FORMAT, &err));
    ck_assert_msg(strstr(err.msg, "live host"), "%s", err.msg);

    /* A different config is refused while the pod lives. */
    struct pod_config *other = malloc(sizeof *other);
    *other = *c;
    other->engine.epoch_ms = 50;
    ck_assert_ptr_null(cxl_region_open(other, 1, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "different configuration"), "%s", err.msg);
    /* ... and by destroy without force. */
    ck_assert_int_eq(cxl_region_destroy(c, false, &err), -1);
    ck_assert_msg(strstr(err.msg, "live host"), "%s", err.msg);

    cxl_region_close(r1);
    cxl_region_close(r0);
    /* The pod is gone: the next host reformats with a new generation. */
    struct cxl_region *again = cxl_region_open(c, 1, CXL_OPEN_CREATE, &err);
    ck_assert_msg(again != NULL, "%s", err.msg);
    ck_assert(again->formatted_now);
    ck_assert_uint_eq(again->sb->generation, gen + 1);
    cxl_region_close(again);

    ck_assert_int_eq(cxl_region_destroy(c, false, &err), 0);
    ck_assert_int_eq(access(c->region.path, F_OK), -1);
    free(other);
    free(c);
}
END_TEST

START_TEST(layout_version_mismatch_is_refused)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 8 * MiB);
    struct cxl_region *r0 = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r0 != NULL, "%s", err.msg);
    r0->sb->layout_version = 999; /* as a newer build would have written */
    ck_assert_ptr_null(cxl_region_open(c, 1, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "layout version 999"), "%s", err.msg);
    r0->sb->layout_version = CXL_LAYOUT_VERSION;
    cxl_region_close(r0);
    free(c);
}
END_TEST

START_TEST(allocations_stay_in_own_slice)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 8 * MiB);
    struct cxl_region *r1 = cxl_region_open(c, 1, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r1 != NULL, "%s", err.msg);
    size_t sizes[] = {8, 64, 100, 4096, 100000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int a = 0; a < 2; a++) {
            cxl_off o = cxl_zalloc(r1, (enum cxl_area)a, sizes[i]);
            ck_assert_msg(o != CXL_NULL, "size %zu area %d", sizes[i], a);
            enum cxl_area got;
            ck_assert_int_eq(cxl_owner_of(r1, o, &got), 1);
            ck_assert_int_eq(got, a);
            unsigned char *p = cxl_ptr(r1, o);
            size_t nonzero = 0;
            for (size_t k = 0; k < sizes[i]; k++) nonzero += p[k] != 0;
            ck_assert_uint_eq(nonzero, 0);
            memset(p, 0xab, sizes[i]);
            cxl_free(r1, (enum cxl_area)a, o);
        }
    }
    struct cxl_usage u;
    cxl_usage_get(r1, 1, CXL_HWCC, &u);
    ck_assert_uint_eq(u.used, 0);
    ck_assert_uint_eq(u.objects, 0);
    /* An observer cannot allocate. */
    struct cxl_region *obs = cxl_region_open(c, -1, 0, &err);
    ck_assert_msg(obs != NULL, "%s", err.msg);
    ck_assert_uint_eq(cxl_alloc(obs, CXL_HWCC, 64), CXL_NULL);
    cxl_region_close(obs);
    cxl_region_close(r1);
    free(c);
}
END_TEST

START_TEST(hwcc_budget_is_hard)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 2 * MiB);
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    uint64_t quota = r->sb->hwcc_quota;
    ck_assert_uint_eq(r->sb->control_size + 2 * quota <= 2 * MiB, 1);
    size_t cap = quota / 64 + 16;
    cxl_off *objs = malloc(cap * sizeof *objs);
    size_t n = 0;
    for (;;) {
        cxl_off o = cxl_alloc(r, CXL_HWCC, 64);
        if (o == CXL_NULL) break;
        ck_assert_uint_lt(n, cap);
        objs[n++] = o;
    }
    struct cxl_usage u;
    cxl_usage_get(r, 0, CXL_HWCC, &u);
    ck_assert_uint_le(u.used, quota);
    ck_assert_uint_gt(u.used + 64, quota); /* filled to the last object that fits */
    ck_assert_uint_eq(u.objects, n);
    ck_assert_uint_ge(u.failures, 1);
    /* Refused again, never an abort; a free makes room for exactly one more. */
    ck_assert_uint_eq(cxl_alloc(r, CXL_HWCC, 64), CXL_NULL);
    cxl_free(r, CXL_HWCC, objs[--n]);
    cxl_off again = cxl_alloc(r, CXL_HWCC, 64);
    ck_assert_uint_ne(again, CXL_NULL);
    objs[n++] = again;
    /* SWcc allocations are not charged to the HWcc budget. */
    cxl_off sw = cxl_alloc(r, CXL_SWCC, 1 << 20);
    ck_assert_uint_ne(sw, CXL_NULL);
    for (size_t i = 0; i < n; i++) cxl_free(r, CXL_HWCC, objs[i]);
    cxl_usage_get(r, 0, CXL_HWCC, &u);
    ck_assert_uint_eq(u.used, 0);
    free(objs);
    cxl_region_close(r);
    free(c);
}
END_TEST

START_TEST(foreign_free_is_refused)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(2, 1024 * MiB, 8 * MiB);
    struct cxl_region *r0 = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    struct cxl_region *r1 = cxl_region_open(c, 1, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r0 && r1, "%s", err.msg);
    cxl_off o = cxl_alloc(r1, CXL_SWCC, 128);
    ck_assert_uint_ne(o, CXL_NULL);
    cxl_free(r0, CXL_SWCC, o); /* must not touch host 1's allocator */
    struct cxl_usage u;
    cxl_usage_get(r1, 1, CXL_SWCC, &u);
    ck_assert_uint_eq(u.objects, 1);
    cxl_free(r1, CXL_SWCC, o);
    cxl_usage_get(r1, 1, CXL_SWCC, &u);
    ck_assert_uint_eq(u.objects, 0);
    cxl_region_close(r1);
    cxl_region_close(r0);
    free(c);
}
END_TEST

START_TEST(roots_are_published)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(1, 512 * MiB, 4 * MiB);
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    cxl_off o = cxl_alloc(r, CXL_HWCC, 64);
    cxl_root_publish(r, 3, o);
    ck_assert_uint_eq(cxl_root_get(r, 0, 3), o);
    ck_assert_uint_eq(cxl_root_get(r, 0, 4), CXL_NULL);
    ck_assert_uint_eq(cxl_root_get(r, 0, CXL_MAX_ROOTS), CXL_NULL);
    cxl_region_close(r);
    free(c);
}
END_TEST

START_TEST(heartbeat_advances)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(1, 512 * MiB, 4 * MiB);
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    uint64_t b0 = __atomic_load_n(&r->ctl->hosts[0].heartbeat, __ATOMIC_ACQUIRE);
    usleep(350 * 1000);
    ck_assert_uint_gt(__atomic_load_n(&r->ctl->hosts[0].heartbeat, __ATOMIC_ACQUIRE), b0 + 1);
    cxl_region_close(r);
    free(c);
}
END_TEST

START_TEST(numa_binding_and_pinning)
{
    pod_err err = {{0}};
    struct pod_config *c = cfg(1, 512 * MiB, 4 * MiB);
    c->region.numa_node = 0; /* every machine has node 0 */
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    cxl_region_close(r);
    c->region.numa_node = 1000; /* no machine here has it */
    ck_assert_ptr_null(cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "numa_node is 1000") && strstr(err.msg, "NUMA node"), "%s",
                  err.msg);

    int ok[] = {0};
    ck_assert_int_eq(cxl_pin_thread(ok, 1, &err), 0);
    int bad[] = {0, 1023};
    ck_assert_int_eq(cxl_pin_thread(bad, 2, &err), -1);
    ck_assert_msg(strstr(err.msg, "CPU 1023 is not available") && strstr(err.msg, "has CPUs 0"),
                  "%s", err.msg);
    ck_assert_int_eq(cxl_pin_thread(NULL, 0, &err), 0); /* no list: not pinned */
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region");
    TCase *t = tu_tcase(s, "region", 60);
    tcase_add_test(t, offsets_round_trip);
    tcase_add_test(t, geometry_fits_and_explains);
    tcase_add_test(t, open_without_create_needs_a_region);
    tcase_add_test(t, format_attach_and_generation);
    tcase_add_test(t, layout_version_mismatch_is_refused);
    tcase_add_test(t, allocations_stay_in_own_slice);
    tcase_add_test(t, hwcc_budget_is_hard);
    tcase_add_test(t, foreign_free_is_refused);
    tcase_add_test(t, roots_are_published);
    tcase_add_test(t, heartbeat_advances);
    tcase_add_test(t, numa_binding_and_pinning);
    return tu_run(s);
}
