/* Zoo structure: pins each model's node count, convolutions, matrix
 * products, inputs, parameters and FLOPs at batch 1, so that an accidental
 * change to a model is caught.  (Numerics against ONNX Runtime are checked
 * by tests/models/zoo_ort.sh.) */
#include <criterion/criterion.h>
#include <string.h>
#include "ops/op.h"

typedef struct pinned {
    const char *name;
    int nodes, convs, matmuls, inputs;
    long long params;
    double flops;
} pinned;

static const pinned PINNED[] = {
    {"resnet18", 69, 20, 1, 1, 11699114LL, 3638006272},
    {"resnet50", 175, 53, 1, 1, 25610154LL, 8217631232},
    {"resnext50", 175, 53, 1, 1, 25097130LL, 8510082048},
    {"inception_v3", 313, 94, 1, 1, 23869002LL, 11477865088},
    {"bert", 396, 0, 96, 1, 85054692LL, 22409773056},
    {"nasnet_a", 927, 356, 1, 1, 5326886LL, 1159969161},
    {"nasrnn", 230, 0, 80, 6, 4194304LL, 42019840},
    {"csrnet", 36, 17, 0, 1, 16263489LL, 41465095168},
    {"resnet3d18", 69, 20, 1, 1, 33418706LL, 16644251648},
    {"infogan", 14, 5, 0, 1, 4131328LL, 202875904},
    {"dcgan", 14, 5, 0, 1, 12662272LL, 821915648},
    {"fsrcnn", 15, 8, 0, 1, 12809LL, 1644953600},
    {"gcn", 339, 121, 0, 1, 34948690LL, 12299934283},
    {"longformer", 80, 0, 16, 1, 6569034LL, 13482688512},
};
#define NPINNED (int)(sizeof PINNED / sizeof PINNED[0])

static int count_ops(const ts_graph *g, const char *a, const char *b)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !strcmp(g->nodes[i].op->name, a) || !strcmp(g->nodes[i].op->name, b);
    return n;
}

static ts_graph *build(const char *name, int batch, bool weights)
{
    ts_zoo_opts o = {.batch = batch, .no_weights = !weights};
    ts_graph *g = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_zoo_build(name, &o, &g, &e), TS_OK, "%s: %s", name, e.msg);
    return g;
}

Test(zoo, all_models_listed_in_order)
{
    int n = 0;
    for (const ts_zoo_model *m; (m = ts_zoo_at(n)); n++) {
        cr_assert(n < NPINNED, "unpinned model %s", m->name);
        cr_assert_str_eq(m->name, PINNED[n].name);
    }
    cr_assert_eq(n, 14);
}

Test(zoo, structure_is_pinned)
{
    for (int i = 0; i < NPINNED; i++) {
        const pinned *p = &PINNED[i];
        ts_graph *g = build(p->name, 1, false);
        ts_graph_stats st;
        ts_graph_stats_get(g, &st);
        cr_expect_eq(st.nodes, p->nodes, "%s nodes %d", p->name, st.nodes);
        cr_expect_eq(count_ops(g, "Conv", "ConvTranspose"), p->convs, "%s convs", p->name);
        cr_expect_eq(count_ops(g, "MatMul", "Gemm"), p->matmuls, "%s matmuls", p->name);
        cr_expect_eq(g->ninputs, p->inputs, "%s inputs", p->name);
        cr_expect_eq(st.params, p->params, "%s params %lld", p->name, (long long)st.params);
        cr_expect_float_eq(st.flops, p->flops, p->flops * 1e-9, "%s flops %.0f", p->name, st.flops);
        ts_graph_free(g);
    }
}

Test(zoo, batch16_scales_inputs_not_weights)
{
    const char *names[] = {"resnet18", "bert", "nasrnn", "dcgan"};
    for (int i = 0; i < 4; i++) {
        ts_graph *a = build(names[i], 1, false), *b = build(names[i], 16, false);
        ts_graph_stats sa, sb;
        ts_graph_stats_get(a, &sa);
        ts_graph_stats_get(b, &sb);
        cr_expect_eq(sb.params, sa.params, "%s", names[i]);
        cr_expect_eq(b->values[b->inputs[0]].shape.dims[0], 16, "%s", names[i]);
        cr_expect_gt(sb.flops, 15 * sa.flops, "%s", names[i]);
        ts_graph_free(a);
        ts_graph_free(b);
    }
}

Test(zoo, weights_are_seeded)
{
    ts_graph *a = build("resnet18", 1, true), *b = build("resnet18", 1, true);
    cr_assert_eq(ts_graph_hash(a), ts_graph_hash(b), "same seed, same model");
    ts_zoo_opts o = {.batch = 1, .seed = 99};
    ts_graph *c = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_zoo_build("resnet18", &o, &c, &e), TS_OK);
    cr_assert_neq(ts_graph_hash(a), ts_graph_hash(c), "another seed, other weights");
    ts_graph_free(a);
    ts_graph_free(b);
    ts_graph_free(c);
}

Test(zoo, bad_requests)
{
    ts_graph *g;
    ts_error e = {0};
    cr_assert_neq(ts_zoo_build("alexnet", NULL, &g, &e), TS_OK);
    cr_assert(strstr(e.msg, "unknown zoo model 'alexnet'"), "%s", e.msg);
    ts_zoo_opts o = {.batch = 100000};
    cr_assert_neq(ts_zoo_build("resnet18", &o, &g, &e), TS_OK);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
}
