/* ThreadSanitizer annotations: happens-before edges TSan cannot see by
 * itself, such as synchronisation through memory another process writes
 * (TSan follows one process). No-ops in other builds. */
#ifndef PODDB_UTIL_TSAN_H
#define PODDB_UTIL_TSAN_H

#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define TSAN_ACQUIRE(a) __tsan_acquire(a)
#define TSAN_RELEASE(a) __tsan_release(a)
#else
#define TSAN_ACQUIRE(a) ((void)(a))
#define TSAN_RELEASE(a) ((void)(a))
#endif

#endif
