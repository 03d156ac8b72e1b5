/* CPU hints: spinning, prefetching for writing. */
#ifndef PODDB_UTIL_CPU_H
#define PODDB_UTIL_CPU_H

/* A hint to the CPU inside a spin loop: it lets the sibling hyperthread run
 * and saves power while a word is polled. */
static inline void pod_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Fetch the line at p for writing (exclusive), as a store will. GCC's
 * __builtin_prefetch(p, 1) is a plain read prefetch (prefetcht0) on x86-64
 * unless the build targets PRFCHW, and a line fetched shared then needs a
 * second request to be written: measured slower than no prefetch at all
 * (YCSB 12-15% slower where PREFETCHW gained). PREFETCHW is a no-op on x86
 * CPUs
 * without it. */
static inline void pod_prefetch_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

#endif
