#include <errno.h>
#include <stdio.h>
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
