/* Memory checked before allocation (src/exec/mem_check.c): size parsing,
 * the TSOPT_MEM_LIMIT cap (a total for the process: what it holds is taken
 * off), the inputs-and-outputs byte count against hand-computed values, and
 * a plan whose arena does not fit failing before the arena is allocated. */
#include <stdlib.h>
#include "util/mem_check.h"
#include "exec_check.h"
#include "ir/ir.h"

static void output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

Test(mem_check, sizes_parse)
{
    uint64_t v;
    cr_assert(xmem_parse_size("4096", &v) && v == 4096);
    cr_assert(xmem_parse_size("1M", &v) && v == 1 << 20);
    cr_assert(xmem_parse_size("1.5G", &v) && v == (uint64_t)3 << 29);
    cr_assert(xmem_parse_size("2TB", &v) && v == (uint64_t)2 << 40);
    cr_assert(xmem_parse_size("64k", &v) && v == 65536);
    cr_assert_not(xmem_parse_size("lots", &v));
    cr_assert_not(xmem_parse_size("12Q", &v));
    cr_assert_not(xmem_parse_size("-1G", &v));
    cr_assert_not(xmem_parse_size("", &v));
    cr_assert_not(xmem_parse_size("1e30", &v));
}

Test(mem_check, cap_is_a_total_for_the_process)
{
    ts_error err = {0};
    size_t rss = xmem_rss();
    cr_assert_gt(rss, 1 << 20); /* a running process holds something */
    setenv("TSOPT_MEM_LIMIT", "1M", 1); /* below what the process holds: nothing left */
    cr_assert_eq(ts_mem_available(), 0);
    cr_assert_eq(ts_mem_check(1, "one byte", &err), TS_ERR_NOMEM);
    cr_assert(strstr(err.msg, "one byte needs 1 bytes, but only 0 bytes of memory is available (TSOPT_MEM_LIMIT less "
                               "what this process holds)"), "%s", err.msg);
    char cap[32];
    snprintf(cap, sizeof cap, "%zu", rss + (64 << 20)); /* 64 MiB above what it holds */
    setenv("TSOPT_MEM_LIMIT", cap, 1);
    size_t avail = ts_mem_available();
    cr_assert(avail <= (size_t)64 << 20 && avail >= (size_t)60 << 20, "%zu", avail);
    cr_assert_eq(ts_mem_check((size_t)32 << 20, "32 MiB", &err), TS_OK);
    cr_assert_eq(ts_mem_check((size_t)65 << 20, "65 MiB", &err), TS_ERR_NOMEM);
    setenv("TSOPT_MEM_LIMIT", "lots", 1);
    err = (ts_error){0};
    cr_assert_eq(ts_mem_check(1, "x", &err), TS_ERR_INVALID);
    cr_assert(strstr(err.msg, "TSOPT_MEM_LIMIT='lots' is not a size"), "%s", err.msg);
    unsetenv("TSOPT_MEM_LIMIT");
    cr_assert_gt(ts_mem_available(), (size_t)16 << 20); /* MemAvailable, a cgroup or rlimit: some room */
}

/* x[1,1000,1000] -> Relu -> Exp -> Add(., relu) -> y */
static ts_graph *chain(void)
{
    ts_graph *g = ts_graph_new("chain", 13);
    int x = xt_input(g, "x", "1x1000x1000");
    int r = xt_node(g, "Relu", INS(x), NOATTR);
    int e = xt_node(g, "Exp", INS(r), NOATTR);
    output(g, xt_node(g, "Add", INS(e, r), NOATTR));
    return g;
}

Test(mem_check, inputs_and_outputs)
{
    ts_graph *g = chain();
    /* x and y, 4e6 bytes each; the intermediates are the plan's (arena) */
    cr_assert_eq(xmem_io_bytes(g), 8000000);
    ts_error err = {0};
    char cap[32];
    snprintf(cap, sizeof cap, "%zu", xmem_rss() + 7000000);
    setenv("TSOPT_MEM_LIMIT", cap, 1);
    cr_assert_eq(ts_graph_mem_check(g, &err), TS_ERR_NOMEM);
    cr_assert(strstr(err.msg, "running graph 'chain' (its inputs and outputs) needs 7.6 MiB"), "%s", err.msg);
    snprintf(cap, sizeof cap, "%zu", xmem_rss() + 16000000);
    setenv("TSOPT_MEM_LIMIT", cap, 1);
    cr_assert_eq(ts_graph_mem_check(g, &err), TS_OK, "%s", err.msg);
    unsetenv("TSOPT_MEM_LIMIT");
    ts_graph_free(g);
}

/* x[1,1,250,250] -> Conv 1->64 3x3 -> c (16 MB, two readers: kept in the
 * arena) -> Relu(c) + Sigmoid(c) -> ReduceMean over channels -> y[1,1,250,250] */
Test(mem_check, plan_refuses_an_arena_that_does_not_fit)
{
    ts_graph *g = ts_graph_new("wide", 13);
    uint64_t rng = 1;
    int x = xt_input(g, "x", "1x1x250x250");
    int w = xt_const_random(g, "64x1x3x3", -1, 1, &rng);
    int64_t pads[] = {1, 1, 1, 1}, axes[] = {1};
    int c = xt_node(g, "Conv", INS(x, w), ATTRS(ts_attr_ints("pads", pads, 4)));
    int s = xt_node(g, "Add", INS(xt_node(g, "Relu", INS(c), NOATTR), xt_node(g, "Sigmoid", INS(c), NOATTR)), NOATTR);
    output(g, xt_node(g, "ReduceMean", INS(s), ATTRS(ts_attr_ints("axes", axes, 1))));
    ts_plan *p = NULL;
    ts_error err = {0};
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &p, &err), TS_OK, "%s", err.msg);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    ts_plan_free(p);
    cr_assert_geq(st.arena_bytes, 16000000, "arena %zu", st.arena_bytes);
    char cap[32];
    snprintf(cap, sizeof cap, "%zu", xmem_rss() + st.arena_bytes / 2);
    setenv("TSOPT_MEM_LIMIT", cap, 1);
    err = (ts_error){0};
    cr_assert_eq(ts_plan_build(g, &o, &p, &err), TS_ERR_NOMEM);
    cr_assert_null(p);
    cr_assert(strstr(err.msg, "the plan's arena (activations and scratch) needs") &&
                  strstr(err.msg, "TSOPT_MEM_LIMIT"), "%s", err.msg);
    unsetenv("TSOPT_MEM_LIMIT");
    ts_graph_free(g);
}
