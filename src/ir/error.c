/* Error records: one line naming what is wrong and where. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "tsopt.h"

ts_status ts_error_set(ts_error *err, ts_status code, const char *fmt, ...)
{
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

ts_status ts_error_prefix(ts_error *err, const char *fmt, ...)
{
    if (!err) return TS_ERR_INVALID;
    char prefix[512], rest[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(rest, err->msg, sizeof rest);
    /* truncation of an over-long message is acceptable */
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t rn = strnlen(rest, sizeof rest - 1);
    if (rn > sizeof err->msg - n - 3) rn = sizeof err->msg - n - 3;
    memcpy(err->msg + n + 2, rest, rn);
    err->msg[n + 2 + rn] = 0;
    return err->code;
}
