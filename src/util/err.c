#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>

void pod_err_set(pod_err *err, const char *fmt, ...)
{
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}
