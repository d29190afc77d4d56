/* The registry of transformation sources and the --transforms parser. */
#include <string.h>
#include "opt/source.h"

const ts_source *const ts_sources[] = {&ts_source_taso, &ts_source_pet, &ts_source_einnet, NULL};

int ts_sources_tidy(ts_graph *g, ts_error *err)
{
    int total = 0;
    for (int i = 0; ts_sources[i]; i++) {
        int r = ts_sources[i]->tidy ? ts_sources[i]->tidy(g, err) : 0;
        if (r < 0) return -1;
        total += r;
    }
    return total;
}

const char *ts_optimize_sources(void)
{
    static char names[256];
    if (!names[0])
        for (int i = 0; ts_sources[i]; i++) {
            if (i) strncat(names, ",", sizeof names - strlen(names) - 1);
            strncat(names, ts_sources[i]->name, sizeof names - strlen(names) - 1);
        }
    return names;
}

ts_status ts_sources_select(const char *list, const ts_source **out, int *n, ts_error *err)
{
    *n = 0;
    if (!list || !*list) {
        for (int i = 0; ts_sources[i] && *n < TS_OPT_MAX_SOURCES; i++) out[(*n)++] = ts_sources[i];
        return TS_OK;
    }
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        const ts_source *s = NULL;
        for (int i = 0; ts_sources[i] && !s; i++)
            if (strlen(ts_sources[i]->name) == len && !strncmp(ts_sources[i]->name, p, len)) s = ts_sources[i];
        if (!s)
            return ts_error_set(err, TS_ERR_INVALID, "--transforms: unknown source '%.*s' (known: %s)", (int)len,
                                p, ts_optimize_sources());
        bool dup = false;
        for (int k = 0; k < *n; k++) dup |= out[k] == s;
        if (!dup && *n < TS_OPT_MAX_SOURCES) out[(*n)++] = s;
        p += len;
        if (*p == ',') p++;
    }
    if (!*n) return ts_error_set(err, TS_ERR_INVALID, "--transforms: no source named in '%s'", list);
    return TS_OK;
}
