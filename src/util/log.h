/* Leveled logging to stderr, tagged with time, role and pid.
 * The level comes from PODDB_LOG (error|warn|info|debug), default info.
 * Formatting happens into a stack buffer and one write(2), so lines from
 * several threads or processes never interleave. */
#ifndef PODDB_UTIL_LOG_H
#define PODDB_UTIL_LOG_H

enum pod_log_level { POD_LOG_ERROR = 0, POD_LOG_WARN, POD_LOG_INFO, POD_LOG_DEBUG };

/* Role shown in every line, e.g. "host 1" or "poddb-region". Copied. */
void pod_log_set_role(const char *role);
void pod_log_set_level(enum pod_log_level lvl);
enum pod_log_level pod_log_get_level(void);

void pod_log(enum pod_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define pod_error(...) pod_log(POD_LOG_ERROR, __VA_ARGS__)
#define pod_warn(...)  pod_log(POD_LOG_WARN, __VA_ARGS__)
#define pod_info(...)  pod_log(POD_LOG_INFO, __VA_ARGS__)
#define pod_debug(...)                                                    \
    do {                                                                  \
        if (pod_log_get_level() >= POD_LOG_DEBUG) pod_log(POD_LOG_DEBUG, __VA_ARGS__); \
    } while (0)

#endif
