/*
 * Logging by level with a "[host:pid] madrail file:line level" prefix.
 * The level comes from MADRAIL_LOG_LEVEL (set once at context init); a
 * message below it costs one compare.  %m works after a failed call.
 */
#ifndef MDR_LOG_H
#define MDR_LOG_H

#include <stdarg.h>

typedef enum {
    MDR_LOG_ERROR = 0,
    MDR_LOG_WARN = 1,
    MDR_LOG_INFO = 2,
    MDR_LOG_DEBUG = 3,
    MDR_LOG_TRACE = 4
} mdr_log_level_t;

extern int mdr_log_level; /* current level, default MDR_LOG_WARN */

void mdr_log_set_level(int level);
/* Parse "error|warn|info|debug|trace" or a digit; returns -1 if invalid. */
int mdr_log_level_parse(const char *s);
void mdr_log_emit(mdr_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold));

#define mdr_log(_lvl, ...)                                                                   \
    do {                                                                                     \
        if ((int)(_lvl) <= mdr_log_level)                                                    \
            mdr_log_emit((_lvl), __FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)
#define mdr_error(...) mdr_log(MDR_LOG_ERROR, __VA_ARGS__)
#define mdr_warn(...)  mdr_log(MDR_LOG_WARN, __VA_ARGS__)
#define mdr_info(...)  mdr_log(MDR_LOG_INFO, __VA_ARGS__)
#define mdr_debug(...) mdr_log(MDR_LOG_DEBUG, __VA_ARGS__)
#define mdr_trace(...) mdr_log(MDR_LOG_TRACE, __VA_ARGS__)

#endif
