#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/path.h"

ts_status ts_path_check_writable(const char *what, const char *path, ts_error *err)
{
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return ts_error_set(err, TS_ERR_IO, "%s: '%s' is a folder, expected a file path", what, path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return ts_error_set(err, TS_ERR_IO, "%s: folder '%s' does not exist", what, dir);
    if (access(dir, W_OK))
        return ts_error_set(err, TS_ERR_IO, "%s: folder '%s' is not writable (%s)", what, dir, strerror(errno));
    return TS_OK;
}

ts_status ts_path_copy(const char *from, const char *to, ts_error *err)
{
    size_t tlen = strlen(to) + 5;
    char *tmp = malloc(tlen);
    if (!tmp) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(tmp, tlen, "%s.tmp", to);
    FILE *in = fopen(from, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    char buf[65536];
    size_t n;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    if (in) fclose(in);
    if (out && fclose(out)) ok = false;
    /* written whole, then renamed: never a half-written file at `to` */
    if (ok && rename(tmp, to)) ok = false;
    if (!ok) unlink(tmp);
    free(tmp);
    return ok ? TS_OK : ts_error_set(err, TS_ERR_IO, "cannot copy '%s' to '%s'", from, to);
}
