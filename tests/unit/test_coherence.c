/* Coherence primitives and the SWcc view: the raw primitives keep data intact,
 * cxl_nt_copy equals memcpy, and the simulated non-coherent mode behaves like a
 * private write-back cache per host (stale reads without flush, nothing visible
 * without write-back), while real mode on this coherent machine needs nothing. */
#include <check.h>
#include <errno.h>
#include <libpmem2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cxl/coherence.h"
#include "helpers/testutil.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

static const char *const all_impls[] = {"clwb", "clflushopt", "clflush", "fence"};

/* Deterministic PRNG (xorshift64*). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

static bool cpu_bit7(int bit)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b >> bit) & 1;
#else
    (void)bit;
    return false;
#endif
}

static bool is_one_of(const char *s, const char *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, set[i]) == 0) return true;
    return false;
}

/* Select impl (or "auto"); returns false if this CPU lacks it. */
static bool select_impl(const char *name)
{
    pod_err err = {{0}};
    int rc = cxl_coherence_select(name, &err);
    if (rc != 0) ck_assert_msg(strstr(err.msg, "does not support") != NULL, "%s", err.msg);
    return rc == 0;
}

/* ---- raw primitives -------------------------------------------------------- */

START_TEST(test_impl_names)
{
    ck_assert(select_impl("auto"));
    const char *fl = cxl_flush_impl_name(), *wb = cxl_writeback_impl_name();
    ck_assert_msg(is_one_of(fl, (const char *const[]){"clflushopt", "clflush", "fence"}, 3),
                  "flush impl '%s'", fl);
    ck_assert_msg(is_one_of(wb, all_impls, 4), "writeback impl '%s'", wb);
#if defined(__x86_64__)
    /* auto picks the best the CPU has */
    ck_assert_str_eq(wb, cpu_bit7(24) ? "clwb" : cpu_bit7(23) ? "clflushopt" : "clflush");
    ck_assert_str_eq(fl, cpu_bit7(23) ? "clflushopt" : "clflush");
    ck_assert(select_impl("clflush"));
    ck_assert_str_eq(cxl_flush_impl_name(), "clflush");
    ck_assert_str_eq(cxl_writeback_impl_name(), "clflush");
    if (select_impl("clflushopt")) {
        ck_assert_str_eq(cxl_flush_impl_name(), "clflushopt");
        ck_assert_str_eq(cxl_writeback_impl_name(), "clflushopt");
    }
    if (select_impl("clwb")) {
        ck_assert_str_eq(cxl_flush_impl_name(), cpu_bit7(23) ? "clflushopt" : "clflush");
        ck_assert_str_eq(cxl_writeback_impl_name(), "clwb");
    }
#else
    ck_assert_str_eq(fl, "fence");
    ck_assert_str_eq(wb, "fence");
#endif
    ck_assert(select_impl("fence"));
    ck_assert_str_eq(cxl_flush_impl_name(), "fence");
    ck_assert_str_eq(cxl_writeback_impl_name(), "fence");

    pod_err err = {{0}};
    ck_assert_int_eq(cxl_coherence_select("clfoo", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "clfoo"));
    ck_assert(select_impl("auto"));
}
END_TEST

/* PODDB_COHERENCE_IMPL sets the initial choice: run ourselves with it set (a
 * fresh process, since the choice is made once) and read what it picked. */
static void run_self_with_env(const char *val, char *out, size_t outsz)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        setenv("PODDB_COHERENCE_IMPL", val, 1);
        setenv("IPATH_NO_BACKTRACE", "1", 1);
        setenv("PODDB_LOG", "error", 1); /* no warning for "bogus" in the log */
        execl("/proc/self/exe", "test_coherence", "--print-impl", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < outsz - 1 && (r = read(pfd[0], out + n, outsz - 1 - n)) > 0) n += (size_t)r;
    out[n] = 0;
    close(pfd[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

START_TEST(test_env_selects_impl)
{
    char out[256];
    run_self_with_env("clflush", out, sizeof out);
    ck_assert_str_eq(out, "clflush clflush\n");
    run_self_with_env("fence", out, sizeof out);
    ck_assert_str_eq(out, "fence fence\n");
    run_self_with_env("bogus", out, sizeof out); /* warns, then auto */
    char expect[64];
    ck_assert(select_impl("auto"));
    snprintf(expect, sizeof expect, "%s %s\n", cxl_flush_impl_name(), cxl_writeback_impl_name());
    ck_assert_str_eq(out, expect);
}
END_TEST

START_TEST(test_raw_ranges_keep_data)
{
    enum { N = 8192 }; /* a multiple of 64, for aligned_alloc */
    unsigned char *buf = aligned_alloc(64, N), *ref = malloc(N);
    static const size_t lens[] = {0, 1, 7, 8, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097};
    for (int k = 0; k < 4; k++) {
        if (!select_impl(all_impls[k])) continue;
        for (size_t off = 0; off < 130; off += (off < 70 ? 1 : 13)) {
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t len = lens[li];
                fill_pattern(ref, N, (unsigned)(off * 17 + len));
                memcpy(buf, ref, N);
                /* fresh stores in the range, then push them out */
                for (size_t i = 0; i < len; i++) buf[off + i] ^= 0x5a, ref[off + i] ^= 0x5a;
                cxl_writeback_range(buf + off, len);
                ck_assert_msg(memcmp(buf, ref, N) == 0, "%s writeback off %zu len %zu",
                              all_impls[k], off, len);
                for (size_t i = 0; i < len; i++) buf[off + i] += 3, ref[off + i] += 3;
                cxl_flush_range(buf + off, len);
                ck_assert_msg(memcmp(buf, ref, N) == 0, "%s flush off %zu len %zu",
                              all_impls[k], off, len);
            }
        }
    }
    ck_assert(select_impl("auto"));
    free(buf);
    free(ref);
}
END_TEST

START_TEST(test_nt_copy_matches_memcpy)
{
    enum { MAXLEN = 4096 + 300, GUARD = 128, SZ = (MAXLEN + 2 * GUARD + 64 + 63) / 64 * 64 };
    unsigned char *src = aligned_alloc(64, SZ), *dst = aligned_alloc(64, SZ),
                  *ref = aligned_alloc(64, SZ);
    fill_pattern(src, SZ, 1);
    for (int k = 0; k < 4; k++) {
        if (!select_impl(all_impls[k])) continue;
        /* every small length at every dst alignment, and random big cases */
        for (int t = 0; t < 64 * 140 + 3000; t++) {
            size_t doff, soff, len;
            if (t < 64 * 140) {
                doff = GUARD + (size_t)(t % 64);
                soff = GUARD + (size_t)((t * 7) % 64);
                len = (size_t)(t / 64);
            } else {
                doff = GUARD + rnd() % 64;
                soff = GUARD + rnd() % 64;
                len = rnd() % (MAXLEN + 1);
            }
            memset(dst, 0xee, SZ);
            memset(ref, 0xee, SZ);
            memcpy(ref + doff, src + soff, len);
            cxl_nt_copy(dst + doff, src + soff, len);
            ck_assert_msg(memcmp(dst, ref, SZ) == 0, "%s: nt_copy dst+%zu src+%zu len %zu",
                          all_impls[k], doff, soff, len);
        }
    }
    ck_assert(select_impl("auto"));
    free(src);
    free(dst);
    free(ref);
}
END_TEST

/* ---- the SWcc view: two hosts over one shared area ---------------------------- */

/* The shared area is a memfd mapped twice, so the two "hosts" see it at
 * different addresses, as two processes would. */
enum { AREA = 64 * 1024 };
static int g_fd = -1;
static unsigned char *g_map_a, *g_map_b;
static struct cxl_swcc A, B;

static void map_two(bool simulate)
{
    g_fd = memfd_create("swcc-test", 0);
    ck_assert_int_ge(g_fd, 0);
    ck_assert_int_eq(ftruncate(g_fd, AREA), 0);
    g_map_a = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    g_map_b = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    ck_assert(g_map_a != MAP_FAILED && g_map_b != MAP_FAILED);
    for (size_t i = 0; i < AREA; i++) g_map_a[i] = (unsigned char)(i % 251);
    pod_err err = {{0}};
    ck_assert_msg(cxl_swcc_init(&A, g_map_a, AREA, simulate, &err) == 0, "%s", err.msg);
    ck_assert_msg(cxl_swcc_init(&B, g_map_b, AREA, simulate, &err) == 0, "%s", err.msg);
    ck_assert(simulate ? A.sim != NULL : A.sim == NULL);
}

static void setup_sim(void)
{
    map_two(true);
}

static void setup_real(void)
{
    map_two(false);
}

static void teardown(void)
{
    cxl_swcc_fini(&A);
    cxl_swcc_fini(&B);
    munmap(g_map_a, AREA);
    munmap(g_map_b, AREA);
    close(g_fd);
}

/* Host-side helpers on an 8-byte word at offset off of the area. */
static uint64_t rd(struct cxl_swcc *s, size_t off)
{
    uint64_t v;
    cxl_swcc_read(s, &v, s->base + off, sizeof v);
    return v;
}

static void wr(struct cxl_swcc *s, size_t off, uint64_t v)
{
    cxl_swcc_write(s, s->base + off, &v, sizeof v);
}

static uint64_t mem(size_t off) /* what the device holds */
{
    uint64_t v;
    memcpy(&v, g_map_a + off, sizeof v);
    return v;
}

#define mem(off) mem(off)

START_TEST(test_sim_write_invisible_without_writeback)
{
    size_t off = 640;
    uint64_t old = mem(off);
    wr(&A, off, 0x1111);
    ck_assert_uint_eq(mem(off), old); /* nothing reached memory */
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off), old);
    ck_assert_uint_eq(rd(&A, off), 0x1111); /* read-your-writes */
    const uint64_t *va = cxl_swcc_view(&A, A.base + off, 8);
    ck_assert_ptr_ne(va, (const void *)(A.base + off)); /* sim views are private copies */
    ck_assert_uint_eq(*va, 0x1111);
    /* through wview too */
    uint64_t *w = cxl_swcc_wview(&A, A.base + off + 8, 8);
    *w = 0x2222;
    ck_assert_uint_eq(rd(&A, off + 8), 0x2222);
    ck_assert_uint_ne(mem(off + 8), 0x2222);
    cxl_swcc_writeback(&A, A.base + off, 16);
    ck_assert_uint_eq(mem(off), 0x1111);
    ck_assert_uint_eq(mem(off + 8), 0x2222);
}
END_TEST

START_TEST(test_sim_stale_until_flush)
{
    size_t off = 4096 + 24;
    uint64_t old = mem(off);
    ck_assert_uint_eq(rd(&B, off), old); /* B caches the line */
    wr(&A, off, 0xabcdef);
    cxl_swcc_writeback(&A, A.base + off, 8);
    ck_assert_uint_eq(mem(off), 0xabcdef);
    ck_assert_uint_eq(rd(&B, off), old); /* stale: no flush yet */
    const uint64_t *vb = cxl_swcc_view(&B, B.base + off, 8);
    ck_assert_uint_eq(*vb, old);
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off), 0xabcdef);
    /* the flush is per line: a neighbouring line B cached stays stale */
    size_t off2 = off + 64;
    uint64_t old2 = rd(&B, off2);
    wr(&A, off2, 77);
    cxl_swcc_writeback(&A, A.base + off2, 8);
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off2), old2);
    cxl_swcc_flush(&B, B.base + off, 72); /* touches both lines */
    ck_assert_uint_eq(rd(&B, off2), 77);
}
END_TEST

START_TEST(test_sim_nt_write)
{
    size_t off = 8192;
    uint64_t old = rd(&B, off); /* cached by B */
    ck_assert_uint_eq(rd(&A, off), old); /* and by A */
    uint64_t v = 0xfeedface;
    cxl_swcc_nt_write(&A, A.base + off, &v, 8);
    ck_assert_uint_eq(mem(off), v);        /* straight to memory */
    ck_assert_uint_eq(rd(&A, off), v);     /* A's copy was dropped, refetched */
    ck_assert_uint_eq(rd(&B, off), old);   /* B still stale */
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off), v);

    /* partial line over a dirty line: the dirty bytes are written back first */
    size_t l = 8192 + 128;
    wr(&A, l, 1);
    wr(&A, l + 56, 2);
    uint64_t x = 3;
    cxl_swcc_nt_write(&A, A.base + l + 8, &x, 8);
    ck_assert_uint_eq(mem(l), 1);
    ck_assert_uint_eq(mem(l + 8), 3);
    ck_assert_uint_eq(mem(l + 56), 2);
    ck_assert_uint_eq(rd(&A, l), 1);
    ck_assert_uint_eq(rd(&A, l + 8), 3);

    /* whole line over a dirty line: the new bytes win */
    size_t m = 8192 + 256;
    unsigned char line[64];
    memset(line, 0x44, sizeof line);
    wr(&A, m, 9);
    cxl_swcc_nt_write(&A, A.base + m, line, 64);
    ck_assert_uint_eq(mem(m), 0x4444444444444444ULL);
    ck_assert_uint_eq(rd(&A, m), 0x4444444444444444ULL);
    cxl_swcc_flush(&A, A.base + m, 64); /* nothing dirty left to clobber it */
    ck_assert_uint_eq(mem(m), 0x4444444444444444ULL);

    /* a long unaligned nt_write spanning several lines */
    unsigned char big[300], got[300];
    fill_pattern(big, sizeof big, 9);
    size_t o = 12288 + 13;
    (void)rd(&A, o + 100); /* cache a middle line */
    cxl_swcc_nt_write(&A, A.base + o, big, sizeof big);
    ck_assert_int_eq(memcmp(g_map_b + o, big, sizeof big), 0);
    cxl_swcc_read(&A, got, A.base + o, sizeof got);
    ck_assert_int_eq(memcmp(got, big, sizeof big), 0);
}
END_TEST

START_TEST(test_sim_flush_writes_back_dirty)
{
    size_t off = 16384 + 40;
    wr(&A, off, 0x5151);
    cxl_swcc_flush(&A, A.base + off, 8);
    ck_assert_uint_eq(mem(off), 0x5151);
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off), 0x5151);
    /* A's line was dropped: it now sees a change made behind its back */
    uint64_t v = 0x6262;
    memcpy(g_map_b + off, &v, 8);
    ck_assert_uint_eq(rd(&A, off), 0x6262);
}
END_TEST

START_TEST(test_sim_writeback_keeps_line)
{
    size_t off = 20480 + 8;
    wr(&A, off, 100);
    cxl_swcc_writeback(&A, A.base + off, 8);
    ck_assert_uint_eq(mem(off), 100);
    /* B changes the word and publishes it; A keeps reading its cached copy */
    cxl_swcc_flush(&B, B.base + off, 8);
    wr(&B, off, 200);
    cxl_swcc_writeback(&B, B.base + off, 8);
    ck_assert_uint_eq(mem(off), 200);
    ck_assert_uint_eq(rd(&A, off), 100);
    ck_assert_uint_eq(*(const uint64_t *)cxl_swcc_view(&A, A.base + off, 8), 100);
    /* a second write-back of a clean line must not republish the stale copy */
    cxl_swcc_writeback(&A, A.base + off, 8);
    ck_assert_uint_eq(mem(off), 200);
    cxl_swcc_flush(&A, A.base + off, 8);
    ck_assert_uint_eq(rd(&A, off), 200);
}
END_TEST

START_TEST(test_sim_partial_line_write_fills)
{
    /* A write of part of a line keeps the rest of the line as in memory */
    size_t off = 24576;
    unsigned char before[64], after[64];
    memcpy(before, g_map_a + off, 64);
    unsigned char x = 0xaa;
    cxl_swcc_write(&A, A.base + off + 5, &x, 1);
    cxl_swcc_writeback(&A, A.base + off, 64);
    memcpy(after, g_map_a + off, 64);
    before[5] = 0xaa;
    ck_assert_int_eq(memcmp(before, after, 64), 0);
    /* range ops over the whole area work and leave the data intact */
    cxl_swcc_flush(&A, A.base, AREA);
    cxl_swcc_flush(&B, B.base, AREA);
    const unsigned char *va = cxl_swcc_view(&A, A.base, AREA);
    const unsigned char *vb = cxl_swcc_view(&B, B.base, AREA);
    ck_assert_int_eq(memcmp(va, g_map_a, AREA), 0);
    ck_assert_int_eq(memcmp(vb, g_map_a, AREA), 0);
    /* zero-length operations are no-ops, also at the end of the area */
    cxl_swcc_flush(&A, A.base + AREA, 0);
    cxl_swcc_writeback(&A, A.base, 0);
    ck_assert_ptr_nonnull(cxl_swcc_view(&A, A.base + AREA, 0));
}
END_TEST

START_TEST(test_sim_unaligned_area)
{
    /* An area that starts and ends mid-line: edge lines are clipped to it, and
     * the shadow keeps the area's alignment modulo 64. */
    struct cxl_swcc s;
    pod_err err = {{0}};
    char *base = (char *)g_map_a + 100;
    size_t size = 1000;
    ck_assert_msg(cxl_swcc_init(&s, base, size, true, &err) == 0, "%s", err.msg);
    const char *v = cxl_swcc_view(&s, base, size);
    ck_assert_uint_eq((uintptr_t)v % 64, (uintptr_t)base % 64);
    ck_assert_int_eq(memcmp(v, base, size), 0);
    unsigned char before = g_map_a[99], after = g_map_a[1100];
    char buf[1000];
    memset(buf, 0x33, sizeof buf);
    cxl_swcc_write(&s, base, buf, sizeof buf);
    cxl_swcc_flush(&s, base, size);
    ck_assert_int_eq(memcmp(base, buf, size), 0);
    ck_assert_uint_eq(g_map_a[99], before); /* bytes outside untouched */
    ck_assert_uint_eq(g_map_a[1100], after);
    cxl_swcc_fini(&s);
}
END_TEST

/* Out-of-range access is a programming error: the process aborts with a message.
 * Checked in a child of our own with SIGABRT at its default: libfabric pulls in
 * libinfinipath, whose constructor turns fatal signals into exit(1) (unless
 * IPATH_NO_BACKTRACE is set), which would hide the abort from Check. */
static void expect_abort(void (*fn)(void))
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        dup2(pfd[1], STDERR_FILENO);
        fn();
        _exit(0);
    }
    close(pfd[1]);
    char msg[2048];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof msg - 1 && (r = read(pfd[0], msg + n, sizeof msg - 1 - n)) > 0) n += (size_t)r;
    msg[n] = 0;
    close(pfd[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %#x, stderr: %s", st, msg);
    ck_assert_msg(strstr(msg, "outside the simulated SWcc area") != NULL, "stderr: %s", msg);
}

static void read_past_end(void)
{
    uint64_t v = 0;
    cxl_swcc_read(&A, &v, A.base + AREA - 4, 8);
}

static void flush_before_base(void)
{
    cxl_swcc_flush(&A, A.base - 64, 64);
}

static void view_other_hosts_mapping(void)
{
    (void)cxl_swcc_view(&A, B.base + 64, 8); /* B's address is not in A's area */
}

static void huge_len(void)
{
    (void)cxl_swcc_wview(&A, A.base + 64, SIZE_MAX - 10);
}

START_TEST(test_sim_out_of_range_aborts)
{
    expect_abort(read_past_end);
    expect_abort(flush_before_base);
    expect_abort(view_other_hosts_mapping);
    expect_abort(huge_len);
}
END_TEST

START_TEST(test_init_errors)
{
    struct cxl_swcc s;
    pod_err err = {{0}};
    ck_assert_int_eq(cxl_swcc_init(&s, g_map_a, 0, true, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "size 0"));
    ck_assert_int_eq(cxl_swcc_init(&s, NULL, 4096, false, NULL), -1);
}
END_TEST

START_TEST(test_sim_large_area_is_lazy)
{
    /* 1 GiB of shared space: the private cache costs address space only. */
    size_t big = (size_t)1 << 30;
    unsigned char *shared =
        mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck_assert(shared != MAP_FAILED);
    struct cxl_swcc s;
    pod_err err = {{0}};
    ck_assert_msg(cxl_swcc_init(&s, shared, big, true, &err) == 0, "%s", err.msg);
    uint64_t v = 42;
    cxl_swcc_write(&s, shared + big - 8, &v, 8);
    cxl_swcc_flush(&s, shared, big); /* skips clean bitmap words quickly */
    uint64_t got;
    memcpy(&got, shared + big - 8, 8);
    ck_assert_uint_eq(got, 42);
    cxl_swcc_fini(&s);
    munmap(shared, big);
}
END_TEST

/* ---- real mode ----------------------------------------------------------------- */

static int pmem_calls;
static unsigned pmem_flags;
static void *fake_pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
    pmem_calls++;
    pmem_flags = flags;
    return memcpy(dst, src, len);
}

START_TEST(test_real_mode_coherent)
{
    size_t off = 1000;
    ck_assert_ptr_eq(cxl_swcc_view(&A, A.base + off, 8), (const void *)(A.base + off));
    ck_assert_ptr_eq(cxl_swcc_wview(&B, B.base + off, 8), (void *)(B.base + off));
    wr(&A, off, 0x77);
    ck_assert_uint_eq(rd(&B, off), 0x77); /* no flush, no write-back needed */
    *(uint64_t *)cxl_swcc_wview(&B, B.base + off, 8) = 0x88;
    ck_assert_uint_eq(*(const uint64_t *)cxl_swcc_view(&A, A.base + off, 8), 0x88);
    cxl_swcc_writeback(&A, A.base + off, 8);
    cxl_swcc_flush(&B, B.base + off, 8);
    ck_assert_uint_eq(rd(&B, off), 0x88);

    unsigned char src[200];
    fill_pattern(src, sizeof src, 5);
    cxl_swcc_nt_write(&A, A.base + 3, src, sizeof src); /* cxl_nt_copy */
    ck_assert_int_eq(memcmp(g_map_b + 3, src, sizeof src), 0);
    A.pmem_memcpy = fake_pmem_memcpy;
    pmem_calls = 0;
    uint64_t v = 0x99;
    cxl_swcc_nt_write(&A, A.base + off, &v, 8);
    ck_assert_int_eq(pmem_calls, 1);
    ck_assert_uint_eq(pmem_flags, PMEM2_F_MEM_NONTEMPORAL);
    ck_assert_uint_eq(rd(&B, off), 0x99);
}
END_TEST

static Suite *coherence_suite(void)
{
    Suite *s = suite_create("coherence");
    TCase *raw = tu_tcase(s, "raw", 120);
    tcase_add_test(raw, test_impl_names);
    tcase_add_test(raw, test_env_selects_impl);
    tcase_add_test(raw, test_raw_ranges_keep_data);
    tcase_add_test(raw, test_nt_copy_matches_memcpy);

    TCase *sim = tu_tcase(s, "sim", 0);
    tcase_add_checked_fixture(sim, setup_sim, teardown);
    tcase_add_test(sim, test_sim_write_invisible_without_writeback);
    tcase_add_test(sim, test_sim_stale_until_flush);
    tcase_add_test(sim, test_sim_nt_write);
    tcase_add_test(sim, test_sim_flush_writes_back_dirty);
    tcase_add_test(sim, test_sim_writeback_keeps_line);
    tcase_add_test(sim, test_sim_partial_line_write_fills);
    tcase_add_test(sim, test_sim_unaligned_area);
    tcase_add_test(sim, test_init_errors);
    tcase_add_test(sim, test_sim_large_area_is_lazy);
    tcase_add_test(sim, test_sim_out_of_range_aborts);

    TCase *real = tu_tcase(s, "real", 0);
    tcase_add_checked_fixture(real, setup_real, teardown);
    tcase_add_test(real, test_real_mode_coherent);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-impl") == 0) {
        printf("%s %s\n", cxl_flush_impl_name(), cxl_writeback_impl_name());
        return 0;
    }
    return tu_run(coherence_suite());
}
