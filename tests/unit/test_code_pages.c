/* Code only planning ran (src/util/code_pages.c): a plan built to be run
 * (ts_plan_opts.release_packed_weights) gives back libdnnl's resident text
 * (its kernel generators) once its primitives exist, and runs as before:
 * the code running needs faults back in. */
#include <stdio.h>
#include <string.h>
#include "exec_check.h"

/* Resident KiB of libdnnl's executable mappings (/proc/self/smaps). */
static long dnnl_text_kib(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char line[4096];
    bool in = false;
    long kib = 0, v;
    while (fgets(line, sizeof line, f)) {
        char perm[8];
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3) /* a mapping's first line */
            in = !strcmp(perm, "r-xp") && strstr(line, "libdnnl");
        else if (in && sscanf(line, "Rss: %ld kB", &v) == 1)
            kib += v;
    }
    fclose(f);
    return kib;
}

static ts_graph *convs(uint64_t *rng)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x12x12");
    x = xt_conv3x3_relu(g, x, 32, rng);
    x = xt_conv1x1(g, x, 32, 24, rng);
    xt_output(g, x);
    return g;
}

Test(code_pages, planning_code_goes_back_and_the_plan_runs)
{
    uint64_t rng = 3;
    ts_graph *g = convs(&rng), *h;
    rng = 3;
    h = convs(&rng);
    /* plan A keeps its code: libdnnl's generators resident */
    ts_plan *a = xt_plan_check(g, NULL, 9, -1, 1, 1e-4, XT_TOL_MAX);
    long before = dnnl_text_kib();
    cr_assert_gt(before, 0, "libdnnl's text is resident after planning");
    ts_error e = {0};
    ts_plan *b = NULL;
    ts_plan_opts lean = {.release_packed_weights = true};
    cr_assert_eq(ts_plan_build(h, &lean, &b, &e), TS_OK, "%s", e.msg);
    long after = dnnl_text_kib();
    cr_assert_lt(after, before / 2, "libdnnl text resident %ld KiB after a lean plan's build (%ld before)", after,
                 before);
    /* B computes what A computes (A was checked against the reference) */
    ts_tensor *in = ts_tensor_new(TS_F32, &g->values[g->inputs[0]].shape, &e), *ya, *yb;
    uint64_t r = 17;
    ts_tensor_fill_random(in, &r, -1, 1);
    ya = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    yb = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(a, &in, &ya, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_plan_run(b, &in, &yb, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(memcmp(ya->data, yb->data, ya->nbytes), 0, "the same plan's outputs differ");
    /* TSOPT_SKIP's feature name keeps the code */
    ts_plan *c = NULL;
    ts_plan_opts keep = {.skip = "code_pages"};
    long mid = dnnl_text_kib();
    cr_assert_eq(ts_plan_build(g, &keep, &c, &e), TS_OK, "%s", e.msg);
    cr_assert_geq(dnnl_text_kib(), mid, "skipped: nothing given back");
    ts_plan_free(c);
    ts_tensor_unref(in);
    ts_tensor_unref(ya);
    ts_tensor_unref(yb);
    ts_plan_free(a);
    ts_plan_free(b);
    ts_graph_free(g);
    ts_graph_free(h);
}
