/* What a plan must not use: the kernels and features named in
 * ts_plan_opts.skip and $TSOPT_SKIP (A/B measurements, bisecting a wrong
 * result to a kernel).  One list replaces the nine TSOPT_NO_* switches the
 * kernels read each on their own (docs/runtime.md, "Skipping kernels").
 * The plan makes no rewrite a graph optimization level could leave out:
 * every fused step computes its nodes as written, at every level
 * (tests/unit/test_lowering.c compares each with the unfused steps). */
#include <stdlib.h>
#include <string.h>
#include "exec/exec.h"

static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = list; s && *s;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        while (len && *s == ' ') s++, len--;
        while (len && s[len - 1] == ' ') len--;
        if (len == n && !strncmp(s, name, n)) return true;
        s = e ? e + 1 : NULL;
    }
    return false;
}

bool xplan_skips(const xplan *p, const char *name)
{
    return listed(p->opts.skip, name) || listed(getenv("TSOPT_SKIP"), name);
}
