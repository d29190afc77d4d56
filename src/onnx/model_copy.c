#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ir/meta.h"
#include "onnx/model_copy.h"
#include "util/path.h"

/* path's folder with a trailing '/' ("" for a bare name) into buf */
static void folder_of(const char *path, char *buf, size_t n)
{
    const char *s = strrchr(path, '/');
    snprintf(buf, n, "%.*s", s ? (int)(s - path + 1) : 0, path);
}

/* The folders of a location with subfolders ("w/a.bin") made under `to`'s
 * folder, as the model's names them. */
static ts_status make_parents(char *path, size_t keep, ts_error *err)
{
    for (char *s = strchr(path + keep, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        int bad = mkdir(path, 0777) && errno != EEXIST;
        int e = errno;
        *s = '/';
        if (bad) return ts_error_set(err, TS_ERR_IO, "cannot make the folder of '%s': %s", path, strerror(e));
    }
    return TS_OK;
}

ts_status ts_onnx_copy_model(const ts_graph *g, const char *from, const char *to, ts_error *err)
{
    const ts_model_meta *m = g ? g->meta : NULL;
    char fdir[4096], tdir[4096];
    folder_of(from, fdir, sizeof fdir);
    folder_of(to, tdir, sizeof tdir);
    for (int i = 0; m && i < m->nexternal; i++) {
        const char *loc = m->external[i];
        /* the importer read only such locations (external_data.c) */
        if (loc[0] == '/' || strstr(loc, ".."))
            return ts_error_set(err, TS_ERR_INVALID, "external data location '%s' is outside the model's folder", loc);
        char src[8192], dst[8192];
        snprintf(src, sizeof src, "%s%s", fdir, loc);
        snprintf(dst, sizeof dst, "%s%s", tdir, loc);
        struct stat a, b;
        if (stat(src, &a)) return ts_error_set(err, TS_ERR_IO, "cannot read external data '%s': %s", src, strerror(errno));
        if (!stat(dst, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino) continue; /* already that file */
        if (make_parents(dst, strlen(tdir), err) || ts_path_copy(src, dst, err)) return err->code;
    }
    return ts_path_copy(from, to, err);
}
