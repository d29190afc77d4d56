/* What a plan must not use: the kernels and features named in
 * ts_plan_opts.skip and $TSOPT_SKIP (A/B measurements, bisecting a wrong
 * result to a kernel), and the plan-time rewrites a graph optimization
 * level leaves out.  One list replaces the nine TSOPT_NO_* switches the
 * kernels read each on their own (docs/runtime.md, "Skipping kernels"). */
#include <stdlib.h>
#include <string.h>
#include "exec/exec.h"

/* Rewrites the plan still makes itself (they change what is computed, not
 * only how), by the lowest level that makes them.  A kernel or feature
 * not listed is a lowering: it keeps each node's function and runs at
 * every level. */
static const struct {
    const char *name;
    ts_graph_opt level;
} rewrites[] = {
    {"vec.layernorm.ops", TS_GRAPH_OPT_ALL},   /* LayerNorm spelled out, as one step (over NCHW's channels: no LayerNormalization spells it) */
};

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
    if (listed(p->opts.skip, name) || listed(getenv("TSOPT_SKIP"), name)) return true;
    ts_graph_opt level = p->opts.graph_opt ? (ts_graph_opt)p->opts.graph_opt : TS_GRAPH_OPT_ALL;
    for (size_t i = 0; i < sizeof rewrites / sizeof *rewrites; i++)
        if (!strcmp(rewrites[i].name, name)) return level < rewrites[i].level;
    return false;
}
