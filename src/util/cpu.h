/* A hint to the CPU inside a spin loop: it lets the sibling hyperthread run
 * and saves power while a word is polled. */
#ifndef PODDB_UTIL_CPU_H
#define PODDB_UTIL_CPU_H

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

#endif
