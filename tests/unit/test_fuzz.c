/* The POLYJUICE fuzzer (src/fuzz/): seed graphs (valid, deterministic,
 * covering the atoms' operators), the oracle's tolerance and filters on
 * hand-computed values, the graph surgery of the reducer, and the whole
 * pipeline with a hand-made pair (transposes inserted around every 2-D
 * Add, the POLYJUICE rule add(x, y) = T(add(T x, T y))) against the tsopt
 * target with and without the planted bug; then with the e-graph's pairs:
 * the planted bug is found within 1,000 pairs, and without it the pairs
 * pass and the variants are larger than the originals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz/fuzz.h"
#include "ops/list.h"

static int count_op(const ts_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && !strcmp(g->nodes[i].op->name, op);
    return n;
}

/* ------------------------------------------------------------ seed graphs */

Test(fuzz_seed, valid_small_and_deterministic)
{
    static const char *const ops[] = {"Add", "Mul", "MatMul", "Conv", "Relu", "Transpose", "Concat", "Split",
                                      "AveragePool", "MaxPool"};
    int seen[10] = {0}, images = 0;
    for (uint64_t s = 0; s < 300; s++) {
        ts_error e = {0};
        ts_graph *g = ts_fuzz_seed_graph(ts_fuzz_pair_seed(5, (long)s), &e);
        cr_assert(g, "seed %llu: %s", (unsigned long long)s, e.msg);
        cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
        int n = ts_fuzz_count_nodes(g);
        cr_assert(n >= 3 && n <= 12, "seed %llu: %d nodes", (unsigned long long)s, n);
        cr_assert(g->noutputs >= 1 && g->ninputs >= 1);
        images += g->values[g->inputs[0]].shape.rank == 4;
        for (int k = 0; k < 10; k++) seen[k] += count_op(g, ops[k]);
        /* every value some node makes is read or an output: nothing dead */
        for (int i = 0; i < g->nnodes; i++) {
            int v = g->nodes[i].outputs[0], used = 0;
            for (int j = 0; j < g->nnodes; j++)
                for (int q = 0; q < g->nodes[j].ninputs; q++) used += g->nodes[j].inputs[q] == v;
            for (int j = 0; j < g->noutputs; j++) used += g->outputs[j] == v;
            cr_assert(used || g->nodes[i].noutputs > 1, "seed %llu: node %d unused", (unsigned long long)s, i);
        }
        ts_graph *h = ts_fuzz_seed_graph(ts_fuzz_pair_seed(5, (long)s), &e);
        cr_assert_eq(ts_graph_hash(g), ts_graph_hash(h), "seed graphs are not deterministic");
        ts_graph_free(g);
        ts_graph_free(h);
    }
    for (int k = 0; k < 10; k++) cr_assert(seen[k] > 0, "no %s in 300 seed graphs", ops[k]);
    cr_assert(images > 30 && images < 270, "%d image graphs of 300", images);
}

Test(fuzz_seed, runs_alike_in_runtime_and_reference)
{
    for (uint64_t s = 0; s < 40; s++) {
        ts_error e = {0};
        ts_graph *g = ts_fuzz_seed_graph(ts_fuzz_pair_seed(9, (long)s), &e);
        cr_assert(g, "%s", e.msg);
        ts_tensor *in[32], *ref[32], *fast[32];
        cr_assert_eq(ts_fuzz_inputs(g, 3, in, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, ref, &e), TS_OK, "%s", e.msg);
        ts_plan *p = NULL;
        for (int i = 0; i < g->noutputs; i++)
            fast[i] = ts_tensor_new(TS_F32, &g->values[g->outputs[i]].shape, &e);
        cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(ts_plan_run(p, in, fast, &e), TS_OK, "%s", e.msg);
        for (int i = 0; i < g->noutputs; i++) {
            ts_fuzz_diff d;
            ts_fuzz_compare(ref[i], fast[i], &ts_fuzz_tol_default, &d);
            cr_assert(d.scaled <= 1, "seed %llu output %d: scaled error %g", (unsigned long long)s, i, d.scaled);
            cr_assert(!ts_fuzz_unstable(ref[i], &ts_fuzz_tol_default, NULL, 0), "seed values not near 1");
            ts_tensor_unref(ref[i]);
            ts_tensor_unref(fast[i]);
        }
        for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
        ts_plan_free(p);
        ts_graph_free(g);
    }
}

/* ----------------------------------------------------------------- oracle */

static ts_tensor *vec(int n, const float *v)
{
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, NULL);
    memcpy(t->data, v, sizeof(float) * (size_t)n);
    return t;
}

Test(fuzz_oracle, tolerance_scaled_to_magnitude)
{
    ts_tensor *a = vec(3, (float[]){1, 2, 3});
    ts_tensor *b = vec(3, (float[]){1, 2, 3.001f});
    ts_tensor *c = vec(3, (float[]){1, 2.5f, 3.01f});
    ts_fuzz_diff d;
    /* |3 - 3.001| = 0.001 against 1e-4 + 1e-3 * 3.001 = 0.0031: 0.32 of it */
    ts_fuzz_compare(a, b, &ts_fuzz_tol_default, &d);
    cr_assert(d.scaled > 0.30 && d.scaled < 0.34, "%g", d.scaled);
    cr_assert_eq(d.at, 2);
    /* 0.5 at element 1 against 1e-4 + 1e-3 * max(2, 2.5, 3) = 0.0031: 161 times */
    ts_fuzz_compare(a, c, &ts_fuzz_tol_default, &d);
    cr_assert_eq(d.at, 1);
    cr_assert(fabs(d.scaled - 0.5 / 0.0031) < 0.01, "%g", d.scaled);
    cr_assert(fabs(d.a - 2) < 1e-6 && fabs(d.b - 2.5) < 1e-6 && fabs(d.scale - 3) < 1e-6);
    /* a small element is judged by the output's scale, not its own size */
    ts_tensor *s1 = vec(2, (float[]){1000, 0.001f}), *s2 = vec(2, (float[]){1000, 0.05f});
    ts_fuzz_compare(s1, s2, &ts_fuzz_tol_default, &d);
    cr_assert(d.scaled < 1, "%g", d.scaled);
    /* shapes that differ never match */
    ts_tensor *short_ = vec(2, (float[]){1, 2});
    ts_fuzz_compare(a, short_, &ts_fuzz_tol_default, &d);
    cr_assert(isinf(d.scaled) && d.at == -1);
    ts_tensor *x[] = {a, b, c, s1, s2, short_};
    for (int i = 0; i < 6; i++) ts_tensor_unref(x[i]);
}

Test(fuzz_oracle, filters_undefined_and_huge)
{
    char why[128];
    ts_tensor *n = vec(3, (float[]){1, NAN, 3}), *i = vec(2, (float[]){INFINITY, 0}), *h = vec(2, (float[]){0, 2e6f});
    ts_tensor *ok = vec(2, (float[]){-9e5f, 1});
    cr_assert(ts_fuzz_unstable(n, &ts_fuzz_tol_default, why, sizeof why));
    cr_assert_str_eq(why, "NaN at element 1");
    cr_assert(ts_fuzz_unstable(i, &ts_fuzz_tol_default, why, sizeof why));
    cr_assert_str_eq(why, "an infinity at element 0");
    cr_assert(ts_fuzz_unstable(h, &ts_fuzz_tol_default, why, sizeof why));
    cr_assert_str_eq(why, "a huge value at element 1");
    cr_assert(!ts_fuzz_unstable(ok, &ts_fuzz_tol_default, why, sizeof why));
    ts_tensor_unref(n), ts_tensor_unref(i), ts_tensor_unref(h), ts_tensor_unref(ok);
}

Test(fuzz_oracle, error_signatures_ignore_names_numbers_and_paths)
{
    ts_fuzz_verdict a = {.kind = TS_FUZZ_ERROR, .stage = "ort"}, b = a, c = a;
    snprintf(a.what, sizeof a.what, "variant: ORT: cannot load /tmp/x-1/variant.onnx: Node input 'Pad_9_out' is "
                                    "not a graph input, initializer, or output of a previous node.");
    snprintf(b.what, sizeof b.what, "variant: ORT: cannot load /tmp/y/variant.onnx: Node input 'Pad_37_out' is "
                                    "not a graph input, initializer, or output of a previous node.");
    snprintf(c.what, sizeof c.what, "variant: ORT: cannot load /tmp/y/variant.onnx: run failed: 12 dims");
    char sa[800], sb[800], sc[800];
    ts_fuzz_signature(&a, sa, sizeof sa);
    ts_fuzz_signature(&b, sb, sizeof sb);
    ts_fuzz_signature(&c, sc, sizeof sc);
    cr_assert_str_eq(sa, sb);
    cr_assert_str_eq(sa, "ort:variant: ORT: cannot load ? Node input ? is not a graph input, initializer, or output "
                         "of a previous node.");
    cr_assert_str_neq(sa, sc);
    cr_assert_str_eq(sc, "ort:variant: ORT: cannot load ? run failed: # dims");
}

/* ----------------------------------------------------- hand-made graphs */

static int input(ts_graph *g, const char *name, int64_t r, int64_t c)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(2, (int64_t[]){r, c});
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int node(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na)
{
    ts_error e = {0};
    int out = -1;
    cr_assert(ts_graph_add_node(g, op, NULL, in, nin, a, na, 1, NULL, &out, &e) >= 0, "%s: %s", op, e.msg);
    return out;
}

static int transpose(ts_graph *g, int x)
{
    int64_t perm[2] = {1, 0};
    ts_attr a = ts_attr_ints("perm", perm, 2);
    return node(g, "Transpose", &x, 1, &a, 1);
}

/* y = relu(a + b) @ c; z = y * y, outputs y and z (square 4 x 4). */
static ts_graph *small_graph(void)
{
    ts_graph *g = ts_graph_new("small", 17);
    int a = input(g, "a", 4, 4), b = input(g, "b", 4, 4), c = input(g, "c", 4, 4);
    int s = node(g, "Add", (int[]){a, b}, 2, NULL, 0);
    int r = node(g, "Relu", &s, 1, NULL, 0);
    int y = node(g, "MatMul", (int[]){r, c}, 2, NULL, 0);
    int z = node(g, "Mul", (int[]){y, y}, 2, NULL, 0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK);
    cr_assert_eq(ts_graph_add_output(g, z, &e), TS_OK);
    return g;
}

/* A float32 output computed through a bfloat16 (or float16) node carries
 * that node's rounding: the graph's narrowest dtype sets the tolerance. */
Test(fuzz_oracle, tolerance_widened_by_a_16bit_node_inside)
{
    ts_graph *g = small_graph();
    ts_fuzz_tol t = ts_fuzz_tol_for(&ts_fuzz_tol_default, g);
    cr_assert_eq(t.rtol, ts_fuzz_tol_default.rtol, "an all-float32 graph keeps the default");
    const ts_dtype narrow[] = {TS_F16, TS_BF16};
    const double factor[] = {4, 32};
    for (int k = 0; k < 2; k++) {
        ts_graph *h = ts_graph_new("through16", 17);
        int x = input(h, "x", 4, 4);
        ts_attr to = ts_attr_int("to", narrow[k] == TS_F16 ? 10 : 16);
        int n = node(h, "Cast", &x, 1, &to, 1);
        to = ts_attr_int("to", 1);
        int y = node(h, "Cast", &n, 1, &to, 1);
        ts_error e = {0};
        cr_assert_eq(ts_graph_add_output(h, y, &e), TS_OK);
        cr_assert_eq(h->values[y].dtype, TS_F32);
        t = ts_fuzz_tol_for(&ts_fuzz_tol_default, h);
        cr_assert_eq(t.rtol, ts_fuzz_tol_default.rtol * factor[k], "%s inside: rtol %g", ts_dtype_name(narrow[k]), t.rtol);
        cr_assert_eq(t.atol, ts_fuzz_tol_default.atol);
        ts_graph_free(h);
    }
    ts_graph_free(g);
}

Test(fuzz_reduce, graph_surgery)
{
    ts_error e = {0};
    ts_graph *g = small_graph();
    /* without output 0 (y) the graph still needs everything for z */
    ts_graph *d0 = ts_fuzz_drop_output(g, 0, &e);
    cr_assert(d0 && d0->noutputs == 1 && ts_fuzz_count_nodes(d0) == 4);
    /* without z, the Mul goes */
    ts_graph *d1 = ts_fuzz_drop_output(g, 1, &e);
    cr_assert(d1 && ts_fuzz_count_nodes(d1) == 3 && count_op(d1, "Mul") == 0);
    cr_assert_null(ts_fuzz_drop_output(d1, 0, &e), "the last output cannot go");
    /* the Relu bypassed (it reads a value of its own shape) */
    int relu = -1;
    for (int i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].op->name, "Relu")) relu = i;
    ts_graph *c0 = ts_fuzz_cut_node(g, relu, 0, &e);
    cr_assert(c0 && count_op(c0, "Relu") == 0 && count_op(c0, "Add") == 1 && ts_fuzz_count_nodes(c0) == 3);
    /* the Relu as a new input: the Add and inputs a, b go */
    ts_graph *c1 = ts_fuzz_cut_node(g, relu, -1, &e);
    cr_assert(c1 && ts_fuzz_count_nodes(c1) == 2 && c1->ninputs == 2, "%d nodes, %d inputs",
              c1 ? ts_fuzz_count_nodes(c1) : -1, c1 ? c1->ninputs : -1);
    cr_assert_eq(ts_graph_validate(c1, &e), TS_OK, "%s", e.msg);
    /* a node whose result is a graph output is bypassed to a node's
     * result (the output moves there), never to an input or a weight */
    int mm = g->values[g->outputs[0]].producer;
    cr_assert_null(ts_fuzz_cut_node(g, mm, -1, &e));
    cr_assert_null(ts_fuzz_cut_node(g, mm, 1, &e), "the MatMul's second operand is the input c");
    ts_graph *c2 = ts_fuzz_cut_node(g, mm, 0, &e);
    cr_assert(c2 && count_op(c2, "MatMul") == 0 && c2->noutputs == 2 && c2->ninputs == 2);
    cr_assert_str_eq(c2->nodes[c2->values[c2->outputs[0]].producer].op->name, "Relu");
    ts_graph *x[] = {g, d0, d1, c0, c1, c2};
    for (int i = 0; i < 6; i++) ts_graph_free(x[i]);
}

/* A hand-made pair: the original is g itself; the variant puts transposes
 * around every 2-D Add (add(x, y) = T(add(T x, T y)), a POLYJUICE rule). */
static ts_status hand_pair(void *ctx, const ts_graph *g, uint64_t seed, ts_fuzz_pair *out, ts_error *err)
{
    (void)ctx, (void)seed;
    memset(out, 0, sizeof *out);
    out->original = ts_graph_copy(g);
    ts_graph *v = ts_graph_copy(g);
    int n0 = v->nnodes;
    for (int i = 0; i < n0; i++) {
        ts_node *nd = &v->nodes[i];
        if (nd->dead || nd->op != &ts_op_add || v->values[nd->outputs[0]].shape.rank != 2) continue;
        const ts_shape *sa = &v->values[nd->inputs[0]].shape, *sb = &v->values[nd->inputs[1]].shape;
        if (!ts_shape_eq(sa, sb)) continue;
        int a = nd->inputs[0], b = nd->inputs[1], old = nd->outputs[0];
        int ta = transpose(v, a), tb = transpose(v, b);
        int s = node(v, "Add", (int[]){ta, tb}, 2, NULL, 0);
        int y = transpose(v, s);
        for (int j = 0; j < v->nnodes; j++)
            for (int q = 0; q < v->nodes[j].ninputs; q++)
                if (v->nodes[j].inputs[q] == old && j != v->values[s].producer) v->nodes[j].inputs[q] = y;
        for (int k = 0; k < v->noutputs; k++)
            if (v->outputs[k] == old) v->outputs[k] = y;
        v->nodes[i].dead = true;
    }
    ts_graph_compact(v);
    out->variant = v;
    out->nroots = g->noutputs;
    out->stop = "saturated";
    if (ts_graph_validate(v, err)) {
        ts_fuzz_pair_free(out);
        return err->code;
    }
    return TS_OK;
}

static ts_fuzz_target *open_target(const char *plant, bool optimizer)
{
    ts_fuzz_target_opts o = {.kind = TS_FUZZ_TARGET_TSOPT, .tol = ts_fuzz_tol_default, .optimizer = optimizer,
                             .opt_budget = 2, .plant = plant};
    ts_fuzz_target *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_fuzz_target_open(&o, &t, &e), TS_OK, "%s", e.msg);
    return t;
}

static ts_fuzz_verdict check_pair(ts_fuzz_target *t, const ts_fuzz_pair *p, uint64_t seed)
{
    ts_error e = {0};
    ts_tensor *in[32];
    ts_fuzz_verdict v;
    cr_assert_eq(ts_fuzz_inputs(p->original, seed, in, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_fuzz_target_check(t, p->original, p->variant, p->nroots, in, seed, &v, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < p->original->ninputs; i++) ts_tensor_unref(in[i]);
    return v;
}

Test(fuzz_target, hand_pair_passes_and_planted_bug_is_caught)
{
    ts_error e = {0};
    ts_graph *g = small_graph();
    ts_fuzz_pair p;
    cr_assert_eq(hand_pair(NULL, g, 1, &p, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(p.variant, "Transpose"), 3);
    ts_fuzz_target *t = open_target(NULL, true);
    ts_fuzz_verdict v = check_pair(t, &p, 7);
    cr_assert_eq(v.kind, TS_FUZZ_PASS, "%s %s: %s", ts_fuzz_kind_name(v.kind), v.stage, v.what);
    ts_fuzz_target_close(t);

    /* the planted bug drops T(a) and T(b) before the Add, both square:
     * the variant computes T(a + b) where a + b is wanted */
    t = open_target("transpose-add", false);
    v = check_pair(t, &p, 7);
    cr_assert_eq(v.kind, TS_FUZZ_MISMATCH, "%s: %s", ts_fuzz_kind_name(v.kind), v.what);
    cr_assert_str_eq(v.stage, "runtime");
    cr_assert_str_eq(v.wrong, "variant");
    cr_assert(v.diff.scaled > 10, "%g", v.diff.scaled);
    ts_fuzz_target_close(t);
    ts_fuzz_pair_free(&p);
    ts_graph_free(g);
}

Test(fuzz_target, unknown_plant_is_refused)
{
    ts_fuzz_target_opts o = {.kind = TS_FUZZ_TARGET_TSOPT, .plant = "drop-everything"};
    ts_fuzz_target *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_fuzz_target_open(&o, &t, &e), TS_ERR_INVALID);
    cr_assert(strstr(e.msg, "unknown planted bug 'drop-everything'"), "%s", e.msg);
}

Test(fuzz_reduce, minimizes_a_planted_finding)
{
    /* the finding needs the Add only: the Relu, the MatMul's other side
     * and the second output go */
    ts_error e = {0};
    ts_graph *g = small_graph();
    ts_fuzz_target *t = open_target("transpose-add", false);
    ts_fuzz_pair p;
    cr_assert_eq(hand_pair(NULL, g, 1, &p, &e), TS_OK);
    ts_fuzz_verdict v = check_pair(t, &p, 11);
    cr_assert_eq(v.kind, TS_FUZZ_MISMATCH);
    ts_fuzz_reducer r = {.target = t, .make_pair = hand_pair, .seed = 11};
    ts_fuzz_reduced red;
    cr_assert_eq(ts_fuzz_reduce(&r, g, &v, &red, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(red.verdict.kind, TS_FUZZ_MISMATCH);
    cr_assert_eq(ts_fuzz_count_nodes(red.seed_graph), 1, "%d nodes left", ts_fuzz_count_nodes(red.seed_graph));
    cr_assert_eq(count_op(red.seed_graph, "Add"), 1);
    cr_assert(red.trials > 1 && red.accepted >= 1);
    ts_fuzz_reduced_free(&red);
    ts_fuzz_pair_free(&p);
    ts_fuzz_target_close(t);
    ts_graph_free(g);
}

/* ----------------------------------------------------------- campaigns */

static char *temp_dir(void)
{
    static char dir[256];
    snprintf(dir, sizeof dir, "%s/test_fuzz-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
    return dir;
}

static bool exists(const char *dir, const char *rel)
{
    char p[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return !stat(p, &sb);
}

static void rm_rf(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(fuzz_campaign, hand_pairs_find_the_planted_bug_and_write_a_folder)
{
    char *dir = temp_dir();
    char out[300];
    snprintf(out, sizeof out, "%s/c", dir);
    ts_fuzz_opts o;
    ts_fuzz_opts_default(&o);
    o.target.plant = "transpose-add";
    o.target.optimizer = false;
    o.seed = 3;
    o.time_s = 0;
    o.max_pairs = 300;
    o.max_findings = 1;
    o.save_pairs = 2;
    o.dir = out;
    o.make_pair = hand_pair;
    ts_fuzz_stats st;
    ts_error e = {0};
    cr_assert_eq(ts_fuzz_run(&o, &st, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(st.findings, 1, "%ld findings in %ld pairs", st.findings, st.generated);
    cr_assert_str_eq(st.stop, "findings");
    cr_assert_eq(st.saved, 2);
    cr_assert(exists(out, "pairs/000/original.onnx") && exists(out, "pairs/001/variant.onnx"));
    cr_assert(!exists(out, "pairs/002"));
    static const char *const files[] = {"original.onnx", "variant.onnx", "README.md", "finding.json", "inputs",
                                        "summary.json"};
    for (int i = 0; i < 5; i++) {
        char rel[100];
        snprintf(rel, sizeof rel, "findings/000/%s", files[i]);
        cr_assert(exists(out, rel), "%s missing", rel);
    }
    cr_assert(exists(out, files[5]));
    /* the folder replays: the mismatch holds with the plant, not without */
    ts_fuzz_target *t = open_target("transpose-add", false);
    ts_fuzz_verdict v;
    char f[400];
    snprintf(f, sizeof f, "%s/findings/000", out);
    cr_assert_eq(ts_fuzz_replay(t, f, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(v.kind, TS_FUZZ_MISMATCH, "%s", v.what);
    ts_fuzz_target_close(t);
    t = open_target(NULL, true);
    cr_assert_eq(ts_fuzz_replay(t, f, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(v.kind, TS_FUZZ_PASS, "%s", v.what);
    ts_fuzz_target_close(t);
    /* a second campaign does not reuse the folder */
    cr_assert_eq(ts_fuzz_run(&o, &st, &e), TS_ERR_INVALID);
    cr_assert(strstr(e.msg, "already holds a campaign"), "%s", e.msg);
    rm_rf(dir);
}

/* ------------------------------------------------------ the e-graph's pairs */

Test(fuzz_campaign, egraph_pairs_pass_and_find_the_planted_bug)
{
    char *dir = temp_dir();
    char out[300];
    ts_fuzz_opts o;
    ts_fuzz_stats st;
    ts_error e = {0};
    /* no plant: the pairs agree (runtime and optimizer), variants are larger */
    ts_fuzz_opts_default(&o);
    o.seed = 11;
    o.time_s = 0;
    o.max_pairs = 12;
    snprintf(out, sizeof out, "%s/clean", dir);
    o.dir = out;
    cr_assert_eq(ts_fuzz_run(&o, &st, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(st.generated + st.skipped, 12);
    cr_assert_eq(st.skipped, 0, "the e-graph refused %ld seed graphs", st.skipped);
    cr_assert(st.tested >= 10, "%ld tested", st.tested);
    cr_assert_eq(st.findings, 0, "%ld findings: see %s", st.findings, out);
    cr_assert(st.variant_nodes > 2 * st.original_nodes, "variants %ld nodes, originals %ld", st.variant_nodes,
              st.original_nodes);
    /* the planted bug, within 1,000 pairs */
    o.target.plant = "transpose-add";
    o.target.optimizer = false;
    o.seed = 1;
    o.max_pairs = 1000;
    o.max_findings = 1;
    snprintf(out, sizeof out, "%s/planted", dir);
    cr_assert_eq(ts_fuzz_run(&o, &st, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(st.findings, 1, "not found in %ld pairs", st.generated);
    cr_assert_eq(st.mismatches, 1);
    cr_assert(exists(out, "findings/000/README.md") && exists(out, "findings/000/unminimized/variant.onnx"));
    rm_rf(dir);
}

Test(fuzz_campaign, planted_optimizer_bug_is_blamed_on_the_rewrite_and_cut_alone)
{
    /* the plant in the optimizer's results only: the runtime stage passes,
     * the optimizer stage mismatches; the reference interpreter says the
     * optimized graph computes something else; the reducer then cuts the
     * variant on its own (a pair with itself) */
    char *dir = temp_dir();
    char out[300];
    snprintf(out, sizeof out, "%s/opt", dir);
    ts_fuzz_opts o;
    ts_fuzz_opts_default(&o);
    o.target.plant = "optimizer-transpose-add";
    o.seed = 1;
    o.time_s = 0;
    o.max_pairs = 300;
    o.max_findings = 1;
    o.dir = out;
    ts_fuzz_stats st;
    ts_error e = {0};
    cr_assert_eq(ts_fuzz_run(&o, &st, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(st.mismatches, 1, "not found in %ld pairs", st.generated);
    char path[400], buf[4096] = "";
    snprintf(path, sizeof path, "%s/findings/000/finding.json", out);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    cr_assert(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    cr_assert(strstr(buf, "\"stage\": \"optimizer\"") && strstr(buf, "\"wrong\": \"rewrite\""), "%s", buf);
    /* cut alone: the variant is its own original */
    ts_graph *go = NULL, *gv = NULL;
    snprintf(path, sizeof path, "%s/findings/000/original.onnx", out);
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &go, &e), TS_OK, "%s", e.msg);
    snprintf(path, sizeof path, "%s/findings/000/variant.onnx", out);
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &gv, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_hash(go), ts_graph_hash(gv));
    cr_assert(ts_fuzz_count_nodes(gv) <= 8, "%d nodes left", ts_fuzz_count_nodes(gv));
    ts_graph_free(go);
    ts_graph_free(gv);
    rm_rf(dir);
}

/* The 8-bit family (gen.c, f_qdq8): its graphs reach each 8-bit kernel the
 * basic level's fuse_qdq.c lowers to and agree with the float64 reference
 * to the integer (its scales, gates and pooled areas keep every value
 * exact).  Fails when a family's form no longer fuses (the kernel is not
 * reached) or a kernel rounds differently (a mismatch). */
Test(fuzz_family, qdq8_reaches_the_8bit_kernels_exactly)
{
    int fam = -1;
    for (int f = 0; f < ts_fuzz_families(); f++)
        if (!strcmp(ts_fuzz_family_name(f), "qdq8")) fam = f;
    cr_assert(fam >= 0);
    ts_fuzz_target *t = open_target(NULL, false);
    ts_fuzz_cover *c = ts_fuzz_cover_new();
    ts_fuzz_target_set_cover(t, c);
    for (uint64_t s = 1; s <= 60; s++) {
        ts_error e = {0};
        ts_graph *g = ts_fuzz_runtime_graph(s, fam, &e);
        cr_assert(g, "%s", e.msg);
        ts_tensor *in[16] = {0};
        ts_fuzz_verdict v;
        cr_assert_eq(ts_fuzz_inputs(g, s, in, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(ts_fuzz_target_check_graph(t, g, in, s, &v, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(v.kind, TS_FUZZ_PASS, "seed %llu: %s %s: %s", (unsigned long long)s, ts_fuzz_kind_name(v.kind),
                     v.stage, v.what);
        for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
        ts_graph_free(g);
    }
    char missing[4096];
    ts_fuzz_cover_missing(c, missing, sizeof missing);
    const char *want[] = {"vec.qadd", "vec.qlookup", "vec.qgap", "vec.qchannel_mul", "vec.dynamic_quantize",
                          "dnnl.matmul_integer", "dnnl.qconv"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        cr_assert(!strstr(missing, want[k]), "%s not reached in 60 graphs", want[k]);
    ts_fuzz_target_close(t);
    ts_fuzz_cover_free(c);
}
