/* optimize keeps its time limit: a source that works long between two
 * proposals ends the search when it polls the driver's stop, and a report
 * of a graph too big to draw is still written, without the drawing.  The
 * bounds are generous (seconds), so load cannot fail them; what fails
 * them is a driver or source that does not stop. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "opt/driver.h"
#include "opt/report.h"
#include "util/clock.h"

/* x -> Relu -> ... -> Relu (n of them) -> out */
static ts_graph *relu_chain(int n)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("chain", 17);
    cr_assert(g);
    int64_t d[2] = {4, 8};
    ts_shape s = ts_shape_make(2, d);
    int v = ts_graph_add_input(g, "x", TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    for (int i = 0; i < n; i++) {
        int out = -1;
        cr_assert(ts_graph_add_node(g, "Relu", NULL, &v, 1, NULL, 0, 1, NULL, &out, &e) >= 0, "%s", e.msg);
        v = out;
    }
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
    return g;
}

/* A source that derives for 10 s (200 steps of 50 ms) before it would
 * propose anything, asking the driver between steps, as einnet's
 * derivation search and PET's mutant checks do. */
static int steps;

static ts_status slow_open(const ts_source_env *env, void **state, ts_error *err)
{
    (void)env, (void)err;
    *state = &steps;
    return TS_OK;
}

static ts_status slow_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    (void)state, (void)g, (void)err;
    for (int i = 0; i < 200 && !emit->stopped(emit); i++) {
        steps++;
        usleep(50000);
    }
    return TS_OK;
}

static void slow_close(void *state) { (void)state; }

static const ts_source slow_source = {
    .name = "slow", .justification = "test", .open = slow_open, .propose = slow_propose, .close = slow_close};

Test(deadline, a_source_polling_stop_ends_a_one_second_search)
{
    ts_graph *g = relu_chain(3);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.time_limit = 1;
    const ts_source *src[1] = {&slow_source};
    void *state[1];
    ts_source_env env = {.opts = &o};
    ts_error e = {0};
    cr_assert_eq(slow_source.open(&env, &state[0], &e), TS_OK);
    ts_const_cache *cc = ts_const_cache_new();
    ts_drive_result r;
    steps = 0;
    double t0 = ts_clock_s();
    cr_assert_eq(ts_drive(g, &o, NULL, src, state, 1, cc, &r, &e), TS_OK, "%s", e.msg);
    double took = ts_clock_s() - t0;
    cr_assert_str_eq(r.stop, "time limit");
    cr_assert_lt(took, 5.0, "a --time-limit 1 search took %.2f s", took);
    cr_assert_lt(steps, 200, "the source was never stopped (%d steps)", steps);
    cr_assert_gt(steps, 0);
    cr_assert(r.best);
    slow_source.close(state[0]);
    ts_drive_result_free(&r);
    ts_const_cache_free(cc);
    ts_graph_free(g);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

Test(deadline, a_report_of_a_graph_too_big_to_draw_is_written)
{
    ts_graph *g = relu_chain(400);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_optimize_result r = {0};
    r.graph = ts_graph_copy(g);
    r.nodes_before = r.nodes_after = 400;
    snprintf(r.reason, sizeof r.reason, "original kept: test");
    snprintf(r.stop, sizeof r.stop, "exhausted");
    char dir[] = "/tmp/ts_deadline_XXXXXX", path[256], svg[300];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/report.md", dir);
    snprintf(svg, sizeof svg, "%s.before.svg", path);
    ts_error e = {0};
    double t0 = ts_clock_s();
    cr_assert_eq(ts_opt_report_write(path, "chain", "out.onnx", g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_lt(ts_clock_s() - t0, 5.0);
    const char *text = slurp(path);
    cr_assert(text, "no report written");
    cr_assert(strstr(text, "No pictures: 400 nodes"), "report says:\n%s", text);
    cr_assert(strstr(text, "## Search"), "the report goes on after the pictures");
    cr_assert_neq(access(svg, F_OK), 0, "a picture was drawn");
    remove(path);
    rmdir(dir);
    ts_optimize_result_free(&r);
    ts_graph_free(g);
}

/* A Graphviz that does not finish (a fake `dot` first on PATH, sleeping
 * in a child as a wrapper script might) is stopped at the report's drawing
 * bound (TSOPT_DRAW_S: 1 s here), all of it: the report is written on
 * time, says the picture was not drawn and why, and no picture or
 * temporary file is left. */
Test(deadline, a_drawing_that_does_not_finish_is_stopped)
{
    char dir[] = "/tmp/ts_dot_XXXXXX", path[256], svg[300], bin[300], script[400], pidf[400];
    cr_assert(mkdtemp(dir));
    snprintf(bin, sizeof bin, "%s/bin", dir);
    cr_assert_eq(mkdir(bin, 0700), 0);
    snprintf(script, sizeof script, "%s/dot", bin);
    snprintf(pidf, sizeof pidf, "%s/sleep.pid", dir);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fprintf(f, "#!/bin/sh\nsleep 60 &\necho $! > %s\nwait\n", pidf);
    fclose(f);
    cr_assert_eq(chmod(script, 0700), 0);
    char newpath[4096];
    snprintf(newpath, sizeof newpath, "%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    cr_assert_eq(setenv("PATH", newpath, 1), 0);
    cr_assert_eq(setenv("TSOPT_DRAW_S", "1", 1), 0);

    ts_graph *g = relu_chain(3);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_optimize_result r = {0};
    r.graph = ts_graph_copy(g);
    r.nodes_before = r.nodes_after = 3;
    snprintf(r.reason, sizeof r.reason, "original kept: test");
    snprintf(r.stop, sizeof r.stop, "exhausted");
    snprintf(path, sizeof path, "%s/report.md", dir);
    snprintf(svg, sizeof svg, "%s.before.svg", path);
    ts_error e = {0};
    double t0 = ts_clock_s();
    cr_assert_eq(ts_opt_report_write(path, "chain", "out.onnx", g, &o, &r, &e), TS_OK, "%s", e.msg);
    double took = ts_clock_s() - t0;
    cr_assert_lt(took, 10.0, "the report waited %.1f s for a 1 s drawing bound", took);
    cr_assert_geq(took, 0.9, "dot was not waited for (%.2f s)", took);
    const char *text = slurp(path);
    cr_assert(text, "no report written");
    cr_assert(strstr(text, "(No pictures: draw: Graphviz 'dot' did not draw '") &&
                  strstr(text, ".before.svg' within 1 s (stopped; nothing drawn))"),
              "report says:\n%s", text);
    cr_assert(strstr(text, "## Search"), "the report goes on after the pictures");
    cr_assert_neq(access(svg, F_OK), 0, "a picture was left");
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", svg);
    cr_assert_neq(access(tmp, F_OK), 0, "a temporary picture was left");
    snprintf(tmp, sizeof tmp, "%s.dot.tmp", svg);
    cr_assert_neq(access(tmp, F_OK), 0, "a temporary DOT file was left");
    /* the fake dot's own child was killed too (gone, or a zombie waiting for init) */
    f = fopen(pidf, "r");
    int pid = 0;
    cr_assert(f && fscanf(f, "%d", &pid) == 1 && pid > 0, "the fake dot did not run");
    fclose(f);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        char stat[64], line[256] = "";
        snprintf(stat, sizeof stat, "/proc/%d/stat", pid);
        FILE *s = fopen(stat, "r");
        if (!s) gone = true;
        else {
            gone = fgets(line, sizeof line, s) && strstr(line, ") Z ");
            fclose(s);
        }
        if (!gone) usleep(20000);
    }
    cr_assert(gone, "the fake dot's sleep (pid %d) still runs", pid);
    remove(pidf);
    remove(path);
    remove(script);
    rmdir(bin);
    rmdir(dir);
    ts_optimize_result_free(&r);
    ts_graph_free(g);
}
