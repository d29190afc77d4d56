/* The ort target (ort_target.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cost/cost.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/keep.h"
#include "opt/ort_peer.h"
#include "util/clock.h"
#include "opt/ort_target.h"
#include "opt/passes.h"

/* Runs of a region add up to at least this before its median is taken: a
 * few-microsecond region's first runs are slower than its steady state. */
#define REGION_MIN_MS 15
/* A request that takes longer is a hung server (a big model's session
 * load takes seconds). */
#define ASK_MS 120000

struct ts_ort_target {
    ts_ort_peer *peer;
    ts_costdb *db;
    int threads;
    double overhead_ms; /* ORT's fixed cost of one run from node (a one-Identity model) */
    char dir[64];       /* temporary folder of the models handed to ORT */
    char prefix[96];    /* cache key prefix: "@ort2 VERSION tTHREADS " */
    int timed, cached;
    int64_t weight_cap; /* 0: none */
    bool symbolic;      /* graphs that would fix the symbolic dimensions cost INFINITY */
    const ts_graph *orig; /* written as orig_path's file, never saved (ts_ort_target_set_original) */
    const char *orig_path;
};

void ts_ort_target_set_original(ts_ort_target *t, const ts_graph *g, const char *path)
{
    t->orig = path ? g : NULL;
    t->orig_path = path;
}

void ts_ort_target_set_weight_cap(ts_ort_target *t, int64_t bytes) { t->weight_cap = bytes; }
void ts_ort_target_set_symbolic(ts_ort_target *t, bool keep) { t->symbolic = keep; }

const char *ts_ort_target_version(const ts_ort_target *t) { return ts_ort_peer_version(t->peer); }
int ts_ort_target_threads(const ts_ort_target *t) { return t->threads; }

void ts_ort_target_counts(const ts_ort_target *t, int *timed, int *cached)
{
    *timed = t->timed;
    *cached = t->cached;
}

/* Whole graphs (the anchor, the ranking, the keep decision, the check) are
 * written as `optimize` writes them: with the model's symbolic dimensions
 * where the graph keeps them, bound to 1 by the peer's "-" inputs.  ONNX
 * Runtime optimizes a graph with fixed shapes differently: transformer_encoder
 * (real set) exported at fixed sizes took 1-thread CPU time x1.18-1.24 of its
 * symbolic export (SkipLayerNormalization and Split where the symbolic one
 * runs MatMul + Add; alternating, both orders, load 13, 12-07), so timing
 * fixed-size exports measured another model than the one written.  Regions
 * are timed at fixed sizes (static_dims): they are pieces, never written. */
static ts_status save(ts_ort_target *t, const ts_graph *g, const char *name, bool static_dims, char *path, size_t n,
                      ts_error *err)
{
    /* the original is the user's file as ONNX Runtime loads it: tsopt's
     * import folds the dynamic-batch shape arithmetic, which alone ran
     * x1.11-1.15 faster in ORT (shufflenet_v2), so timing the import would
     * hide that gain from the keep decision, or an import slower than the file */
    if (t->orig_path && g == t->orig) {
        snprintf(path, n, "%s", t->orig_path);
        return TS_OK;
    }
    snprintf(path, n, "%s/%s.onnx", t->dir, name);
    ts_onnx_save_opts so = {.static_dims = static_dims};
    return ts_onnx_save_with(g, path, &so, err);
}

bool ts_ort_target_is_file(ts_ort_target *t, const ts_graph *g)
{
    char path[256];
    ts_error err = {0};
    if (!t->orig_path || save(t, g, "import", false, path, sizeof path, &err)) return false;
    FILE *a = fopen(path, "rb"), *b = fopen(t->orig_path, "rb");
    bool same = a && b;
    char x[65536], y[65536];
    for (size_t n, m; same && ((n = fread(x, 1, sizeof x, a)) | (m = fread(y, 1, sizeof y, b)));)
        same = n == m && !memcmp(x, y, n);
    if (a) fclose(a);
    if (b) fclose(b);
    return same;
}

/* Median and fastest of runs of the model at path, in ms. */
static ts_status time_file(ts_ort_target *t, const char *path, double min_ms, double *med, double *fast,
                           ts_error *err)
{
    char req[4200], reply[256];
    snprintf(req, sizeof req, "time\t%s\t-\t%d\t%g", path, t->threads, min_ms);
    ts_status st = ts_ort_peer_ask(t->peer, req, reply, sizeof reply, ASK_MS, err);
    if (st) return st;
    double a, b;
    if (sscanf(reply, "%lf %lf", &a, &b) != 2)
        return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: unexpected timing reply '%.100s'", reply);
    *med = a;
    if (fast) *fast = b;
    return TS_OK;
}

ts_status ts_ort_target_open(ts_costdb *db, int threads, ts_ort_target **out, ts_error *err)
{
    *out = NULL;
    ts_ort_target *t = calloc(1, sizeof *t);
    if (!t) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    t->db = db;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->threads = threads > 0 ? threads : cores > 0 ? (int)cores : 1;
    snprintf(t->dir, sizeof t->dir, "/tmp/tsopt-ort-XXXXXX");
    if (!mkdtemp(t->dir)) {
        free(t);
        return ts_error_set(err, TS_ERR_IO, "--target ort: cannot make a temporary folder in /tmp");
    }
    ts_status st = ts_ort_peer_open(&t->peer, err);
    if (st) {
        ts_ort_target_close(t);
        return st;
    }
    snprintf(t->prefix, sizeof t->prefix, "@ort2 %s t%d ", ts_ort_peer_version(t->peer), t->threads);
    /* a run's fixed cost (the call through node, ORT's dispatch), charged
     * once per graph and not once per region */
    ts_graph *g = ts_graph_new("overhead", 13);
    int64_t one = 1;
    double med;
    ts_shape s1 = ts_shape_make(1, &one);
    int x = g ? ts_graph_add_input(g, "x", TS_F32, &s1, err) : -1, y = -1;
    const char *yn[] = {"y"};
    char path[256];
    if (!g) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else if (x < 0 || ts_graph_add_node(g, "Identity", "id", &x, 1, NULL, 0, 1, yn, &y, err) < 0 ||
             ts_graph_add_output(g, y, err) || save(t, g, "overhead", true, path, sizeof path, err) ||
             time_file(t, path, 50, &med, &t->overhead_ms, err))
        st = err->code ? err->code : TS_ERR_IO;
    ts_graph_free(g);
    if (st) {
        ts_error_prefix(err, "--target ort: timing a one-node model");
        ts_ort_target_close(t);
        return st;
    }
    *out = t;
    return TS_OK;
}

void ts_ort_target_close(ts_ort_target *t)
{
    if (!t) return;
    ts_ort_peer_close(t->peer);
    const char *names[] = {"overhead", "region", "whole", "import", "a", "b", "r0", "r1", "r2", "r3", "r4", "r5"};
    char p[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s.onnx", t->dir, names[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/%s.onnx.data", t->dir, names[i]);
        unlink(p);
    }
    rmdir(t->dir);
    free(t);
}

/* True when every node is an ai.onnx operator or one the original file
 * had (an opaque node is kept as it was). */
static bool standard_ops(const ts_graph *g)
{
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (!nd->dead && !strncmp(nd->op->name, "tsopt.", 6) && strcmp(nd->op->name, "tsopt.Opaque")) return false;
    }
    return true;
}

/* The group's time in ORT less the fixed cost of a run: cached, or timed
 * now; the roofline of docs/optimize.md for a region ORT cannot run alone
 * (control flow, opaque nodes). */
static double region_cost(ts_ort_target *t, const ts_graph *g, const int *members, int nm)
{
    char *key = xcost_key(g, members, nm);
    size_t kl = key ? strlen(key) + strlen(t->prefix) + 1 : 0;
    char *full = key ? malloc(kl) : NULL;
    double ms = NAN;
    if (full) {
        snprintf(full, kl, "%s%s", t->prefix, key);
        if (xcost_db_get(t->db, full, &ms)) t->cached++;
        else ms = NAN;
    }
    if (isnan(ms)) {
        ts_error err = {0};
        char path[256];
        double med, fast;
        ts_graph *s = xcost_group_graph(g, members, nm, &err);
        if (s && !save(t, s, "region", true, path, sizeof path, &err) &&
            !time_file(t, path, REGION_MIN_MS, &med, &fast, &err)) {
            ms = fmax(fast - t->overhead_ms, 0.0005);
            t->timed++;
        } else {
            double flops, bytes;
            xcost_group_work(g, members, nm, &flops, &bytes);
            ms = 0.002 + fmax(flops / 100e6, bytes / 20e6);
        }
        ts_graph_free(s);
        if (full) xcost_db_put(t->db, full, ms);
    }
    free(key);
    free(full);
    return ms;
}

/* True when ORT's NCHWc transformer (level all) runs this node in its
 * blocked layout: a 2-D Conv with constant float weights, output channels
 * a multiple of 16, input channels per group below 8 (the first conv of
 * an image net, which then reads plain NCHW) or a multiple of 16, or a
 * depthwise conv.  *reorder_in: its input is reordered into the layout. */
static bool nchwc_conv(const ts_graph *g, const ts_node *nd, bool *reorder_in)
{
    if (nd->op != &ts_op_conv || nd->ninputs < 2 || nd->inputs[1] < 0) return false;
    const ts_value *w = &g->values[nd->inputs[1]];
    if (!w->constant || w->dtype != TS_F32 || w->shape.rank != 4) return false;
    int64_t k = w->shape.dims[0], c = w->shape.dims[1], group = nd->attrs ? ((const ts_conv_attrs *)nd->attrs)->group : 1;
    if (k % 16) return false;
    if (group > 1 && c != 1 && c % 16) return false;
    if (group == 1 && c >= 8 && c % 16) return false;
    *reorder_in = group > 1 || c >= 8;
    return true;
}

/* What ORT's reorder of a tensor into or out of its blocked layout costs:
 * a Relu of the same shape, which reads and writes it once as a reorder
 * does (cached per shape). */
static double reorder_cost(ts_ort_target *t, const ts_graph *g, int v)
{
    ts_error err = {0};
    ts_graph *s = ts_graph_new("reorder", 13);
    int x = s ? ts_graph_add_input(s, "x", TS_F32, &g->values[v].shape, &err) : -1, y = -1;
    const char *yn[] = {"y"};
    double ms = 0;
    if (x >= 0 && ts_graph_add_node(s, "Relu", "r", &x, 1, NULL, 0, 1, yn, &y, &err) >= 0 &&
        !ts_graph_add_output(s, y, &err)) {
        int m = 0;
        ms = region_cost(t, s, &m, 1);
    }
    ts_graph_free(s);
    return ms;
}

/* ORT's fusions that reach past one of tsopt's groups, so that a region
 * is timed as ORT runs it: a MatMul's scalar Mul or Div joins it (ORT's
 * FusedMatMul alpha; BERT's attention scores). */
static void ort_groups(const ts_graph *g, int *group_of)
{
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead || (nd->op != &ts_op_mul && nd->op != &ts_op_div) || nd->ninputs != 2 || group_of[n] != n ||
            nd->inputs[0] < 0 || nd->inputs[1] < 0 || !g->values[nd->inputs[1]].constant ||
            ts_shape_numel(&g->values[nd->inputs[1]].shape) != 1)
            continue;
        int x = nd->inputs[0], p = -1, users = 0;
        for (int m = 0; m < g->nnodes; m++) {
            if (g->nodes[m].dead) continue;
            for (int j = 0; j < g->nodes[m].ninputs; j++) users += g->nodes[m].inputs[j] == x;
            for (int o = 0; o < g->nodes[m].noutputs; o++)
                if (g->nodes[m].outputs[o] == x) p = m;
        }
        if (p >= 0 && users == 1 && g->nodes[p].op == &ts_op_matmul && group_of[p] == p && !ts_graph_is_output(g, x))
            group_of[n] = p;
    }
}

/* Grows a region by closure: adds each live node (not `covered`, one
 * output) whose operator `accept` takes and whose every non-constant input
 * is `head` or the output of members[from..nm), the latter at least once,
 * until nothing more is added or the region holds `max`.  Members stay in
 * an order that runs.  Returns the new count. */
static int grow_region(const ts_graph *g, const char *covered, bool (*accept)(const ts_op_desc *), int head,
                       int *members, int nm, int from, int max)
{
    for (bool grew = true; grew && nm < max;) {
        grew = false;
        for (int n = 0; n < g->nnodes && nm < max; n++) {
            const ts_node *nd = &g->nodes[n];
            if (nd->dead || (covered && covered[n]) || nd->noutputs != 1 || !accept(nd->op)) continue;
            bool in = false, ok = true, inner = false;
            for (int m = 0; m < nm; m++) in |= members[m] == n;
            for (int j = 0; !in && ok && j < nd->ninputs; j++) {
                int v = nd->inputs[j];
                if (v < 0 || g->values[v].constant) continue;
                bool mine = v == head;
                for (int m = from; m < nm && !mine; m++) mine = g->nodes[members[m]].outputs[0] == v;
                ok = mine;
                inner |= mine;
            }
            if (in || !ok || !inner) continue;
            members[nm++] = n;
            grew = true;
        }
    }
    return nm;
}

static bool ln_op(const ts_op_desc *op)
{
    return op == &ts_op_reducemean || op == &ts_op_sub || op == &ts_op_pow || op == &ts_op_mul || op == &ts_op_add ||
           op == &ts_op_sqrt || op == &ts_op_div;
}

/* ORT's transpose optimizer and LayerNorm fusion reach past tsopt's
 * groups: a spelled-out LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add,
 * Sqrt, Div, Mul, Add: no chain, so tsopt costs it as several groups) read
 * from a Transpose is one region with the Transpose (and an identity
 * Reshape between them, opt/layernorm_anchor.c), timed as ORT runs it:
 * without the Reshape ORT pushes the Transpose into the LayerNorm and fuses
 * only its tail; with it the LayerNorm is fused whole.  Members in
 * `members` in an order that runs (each after what it reads); 0 when the
 * Transpose at node k starts no such region. */
enum { LN_REGION_MAX = 16 };
static int layernorm_region(const ts_graph *g, int k, int *members)
{
    const ts_node *tn = &g->nodes[k];
    if (tn->dead || tn->op != &ts_op_transpose || tn->noutputs != 1) return 0;
    int t = tn->outputs[0], nm = 0, head = t;
    members[nm++] = k;
    if (!ts_layernorm_reads(g, t)) { /* the anchor: t's one reader a Reshape the LayerNorm reads */
        int rd = -1, readers = 0;
        for (int n = 0; n < g->nnodes; n++)
            for (int j = 0; !g->nodes[n].dead && j < g->nodes[n].ninputs; j++)
                if (g->nodes[n].inputs[j] == t) readers++, rd = n;
        if (readers != 1 || g->nodes[rd].op != &ts_op_reshape || g->nodes[rd].noutputs != 1 ||
            !ts_layernorm_reads(g, g->nodes[rd].outputs[0]))
            return 0;
        members[nm++] = rd;
        head = g->nodes[rd].outputs[0];
    }
    /* the LayerNorm's nodes: those of its operators that read only the
     * region's values (not the Transpose's own output) and constants */
    nm = grow_region(g, NULL, ln_op, head, members, nm, 1, LN_REGION_MAX);
    return nm > 3 ? nm : 0;
}

/* ORT's activation fusions reach past tsopt's groups too: a spelled-out
 * GELU (Div, Erf, Add, Mul, Mul: its input read twice, so tsopt's chains
 * cut it in two) after a MatMul and its bias Add runs in ORT as MatMul +
 * BiasGelu when its nodes keep the pattern ORT matches, and as five
 * separate passes when a rewrite reorders them (taso-0144~rev moves the
 * 0.5 onto erf + 1: convnext_tiny with 3 of its 18 GELUs so rewritten ran
 * 1-thread CPU x0.956 of the graph without them, 12-07, loaded Intel Xeon),
 * which the pieces timed apart cannot show.  So the product's group and
 * the element-wise nodes that read only its value and each other, up to
 * one value read outside (a diamond that closes), are one region, timed as
 * ORT runs it.  Members in an order that runs; 0 when the group headed by
 * node k starts no such region. */
enum { ACT_REGION_MAX = 16 };
static bool act_op(const ts_op_desc *op)
{
    return op == &ts_op_div || op == &ts_op_mul || op == &ts_op_add || op == &ts_op_sub || op == &ts_op_erf ||
           op == &ts_op_tanh || op == &ts_op_sigmoid || op == &ts_op_pow || op == &ts_op_sqrt;
}
static int act_region(const ts_graph *g, const int *group_of, const char *covered, int k, int *members)
{
    const ts_node *hd = &g->nodes[k];
    if (hd->dead || covered[k] || (hd->op != &ts_op_matmul && hd->op != &ts_op_gemm)) return 0;
    int nm = xcost_members(g, group_of, k, members);
    if (nm > ACT_REGION_MAX / 2) return 0;
    for (int i = 0; i < nm; i++)
        if (covered[members[i]]) return 0;
    const ts_node *last = &g->nodes[members[nm - 1]];
    if (last->noutputs != 1) return 0;
    int head = last->outputs[0], chain = nm, readers = 0;
    for (int n = 0; n < g->nnodes; n++)
        for (int j = 0; !g->nodes[n].dead && j < g->nodes[n].ninputs; j++) readers += g->nodes[n].inputs[j] == head;
    if (readers < 2 || ts_graph_is_output(g, head)) return 0;
    nm = grow_region(g, covered, act_op, head, members, nm, chain, ACT_REGION_MAX);
    /* the diamond closes: the head and every added value but one are read
     * only inside the region */
    int open = 0;
    for (int m = chain - 1; m < nm; m++) {
        int v = g->nodes[members[m]].outputs[0];
        bool out = ts_graph_is_output(g, v);
        for (int n = 0; n < g->nnodes && !out; n++) {
            bool mine = false;
            for (int i = 0; i < nm; i++) mine |= members[i] == n;
            for (int j = 0; !mine && !g->nodes[n].dead && j < g->nodes[n].ninputs; j++) out |= g->nodes[n].inputs[j] == v;
        }
        if (out && m == chain - 1) return 0;
        open += out;
    }
    return nm > chain + 1 && open == 1 ? nm : 0;
}

double ts_ort_target_cost(void *ctx, const ts_graph *g)
{
    ts_ort_target *t = ctx;
    if (!standard_ops(g) || (t->weight_cap > 0 && ts_graph_weight_bytes(g) > t->weight_cap) ||
        (t->symbolic && !ts_onnx_keeps_symbolic(g, NULL, 0)))
        return INFINITY;
    int *group_of = malloc(sizeof *group_of * ((size_t)g->nnodes + 1));
    int *members = malloc(sizeof *members * ((size_t)g->nnodes + 1));
    char *covered = calloc((size_t)g->nnodes + 1, 1);
    double ms = t->overhead_ms;
    if (!group_of || !members || !covered || xcost_groups(g, group_of)) ms = INFINITY;
    else {
        ort_groups(g, group_of);
        int ln[LN_REGION_MAX];
        for (int n = 0; n < g->nnodes; n++) {
            int nl = layernorm_region(g, n, ln);
            if (!nl) continue;
            ms += region_cost(t, g, ln, nl);
            for (int i = 0; i < nl; i++) covered[ln[i]] = 1;
        }
        int act[ACT_REGION_MAX];
        for (int n = 0; n < g->nnodes; n++) {
            if (group_of[n] != n) continue;
            int na = act_region(g, group_of, covered, n, act);
            if (!na) continue;
            ms += region_cost(t, g, act, na);
            for (int i = 0; i < na; i++) covered[act[i]] = 1;
        }
        for (int n = 0; n < g->nnodes; n++) {
            if (group_of[n] != n || xcost_is_free(&g->nodes[n])) continue;
            int all = xcost_members(g, group_of, n, members), nm = 0;
            for (int i = 0; i < all; i++) /* a group's nodes in a LayerNorm region are costed there */
                if (!covered[members[i]]) members[nm++] = members[i];
            if (!nm) continue;
            double r = region_cost(t, g, members, nm);
            /* a blocked-layout conv timed alone pays the reorders into and
             * out of ORT's layout, which a whole graph pays once at the
             * ends of its chain of convs: left out of every such region
             * (of the original and of each candidate alike) */
            bool in;
            if (nchwc_conv(g, &g->nodes[n], &in)) {
                const ts_node *last = &g->nodes[members[nm - 1]];
                double re = (in ? reorder_cost(t, g, g->nodes[n].inputs[0]) : 0) +
                            (last->noutputs == 1 ? reorder_cost(t, g, last->outputs[0]) : 0);
                r = fmax(r - re, 0.25 * r);
            }
            ms += r;
        }
    }
    free(group_of);
    free(members);
    free(covered);
    return ms;
}

ts_status ts_ort_target_time(ts_ort_target *t, const ts_graph *g, double *ms, ts_error *err)
{
    char path[256];
    if (save(t, g, "whole", false, path, sizeof path, err)) return err->code;
    return time_file(t, path, 1000, ms, NULL, err);
}

ts_status ts_ort_target_pair(ts_ort_target *t, const ts_graph *g0, const ts_graph *g1, double pred0, double pred1,
                             double budget_s, double min_gain, ts_measure_result *r, ts_error *err)
{
    memset(r, 0, sizeof *r);
    char a[256], b[256], req[600], reply[4096];
    if (save(t, g0, "a", false, a, sizeof a, err) || save(t, g1, "b", false, b, sizeof b, err)) return err->code;
    /* TS_KEEP_MIN_ROUNDS to 15 rounds of two half-rounds, each at least
     * one run and, where the time allows, three: what fits in 60% of the
     * budget, loads and warm-ups (2 runs each) included.  A half-round's
     * fastest of three runs shrugs off a run hit by load, so a round of
     * three runs says more than three rounds of one (tests/unit/test_keep.c's
     * simulated load 10-15, x1.3 gain, 15 runs of each graph: kept 0.55 as 6
     * rounds of 3, 0.37 as 15 of 1); the same time in more, shorter rounds
     * where runs are short.  The peer sizes them from its own warm-up runs
     * (serve.js sizeRounds), at the load of the moment: the predictions,
     * timed before the search, were under half of r3d_18's runs at load 15
     * (768 ms against 1786), and rounds sized by them got one run per
     * half-round and overran.  MIN_MS from the predictions is the field the
     * protocol asks for; the budget replaces it. */
    double run_ms = fmax(fmax(pred0, pred1), 0.01), avail = budget_s * 600 - 4 * run_ms;
    double half_ms = fmin(fmax(avail / (2.0 * TS_KEEP_MIN_ROUNDS), 0), 1000);
    snprintf(req, sizeof req, "pair\t%s\t%s\t-\t%d\t%d\t%g\t%g", a, b, t->threads, TS_KEEP_MIN_ROUNDS, half_ms,
             fmax(budget_s * 600, 1));
    ts_status st = ts_ort_peer_ask(t->peer, req, reply, sizeof reply, ASK_MS, err);
    if (st) return st;
    int wins, used;
    if (sscanf(reply, "%lf %lf %lf %lf %d %d%n", &r->median0_ms, &r->median1_ms, &r->min0_ms, &r->min1_ms, &r->rounds,
               &wins, &used) != 6)
        return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: unexpected pair reply '%.100s'", reply);
    /* the rounds' own figures decide (keep.c): on a shared machine the
     * fastest run and the median over all rounds can both favour the
     * wrong graph by chance (resnet18 at load 15: fastest 65 -> 22 ms for
     * a rewrite that changed nothing ORT runs), and a count of rounds won
     * drops a gain of x2 to a few rounds lost by a little (nasrnn, load 12) */
    double f0[15], f1[15], m0[15], m1[15];
    int n = 0;
    for (const char *p = reply + used; n < r->rounds && n < 15; n++) {
        int k;
        if (sscanf(p, "%lf %lf %lf %lf%n", &f0[n], &f1[n], &m0[n], &m1[n], &k) != 4)
            return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: pair reply without its rounds '%.100s'", reply);
        p += k;
    }
    ts_keep_verdict v;
    ts_keep_decide(f0, f1, m0, m1, n, min_gain, &v);
    r->faster = v.faster;
    r->ratio = v.ratio;
    r->ratio_upper = v.ratio_upper;
    r->ratio_med = v.ratio_med;
    snprintf(r->why, sizeof r->why,
             "ONNX Runtime %s, %d threads, %d alternating rounds in one process: result/original %.3f (95%% bound %.3f), "
             "medians %.3f, faster in %d rounds",
             ts_ort_peer_version(t->peer), t->threads, r->rounds, v.ratio, v.ratio_upper, v.ratio_med, wins);
    return TS_OK;
}

ts_status ts_ort_target_rank(ts_ort_target *t, const ts_graph *const *gs, int n, double budget_s, double *med,
                             double *fast, double *ratio, int *rounds, ts_error *err)
{
    char req[TS_ORT_RANK_MAX * 280 + 100], reply[TS_ORT_RANK_MAX * 60 + 40];
    if (n < 1 || n > TS_ORT_RANK_MAX) return ts_error_set(err, TS_ERR_INVALID, "rank: %d graphs", n);
    char paths[TS_ORT_RANK_MAX][256];
    double t0 = ts_clock_s();
    for (int i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof name, "r%d", i);
        if (save(t, gs[i], name, false, paths[i], sizeof paths[i], err)) return err->code;
    }
    /* writing the graphs is part of the budget (a second each for bert's
     * 440 MB; more graphs ranked, more written) */
    double left = fmax(budget_s - (ts_clock_s() - t0), 0);
    int len = snprintf(req, sizeof req, "rank\t-\t%d\t%g", t->threads, left * 1000);
    for (int i = 0; i < n; i++) len += snprintf(req + len, sizeof req - (size_t)len, "\t%s", paths[i]);
    ts_status st = ts_ort_peer_ask(t->peer, req, reply, sizeof reply, ASK_MS, err);
    if (st) return st;
    char *p = reply;
    for (int i = 0; i < n; i++) {
        char *e1, *e2, *e3;
        med[i] = strtod(p, &e1);
        fast[i] = strtod(e1, &e2);
        ratio[i] = strtod(e2, &e3);
        if (e1 == p || e2 == e1 || e3 == e2)
            return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: unexpected rank reply '%.100s'", reply);
        p = e3;
    }
    *rounds = (int)strtol(p, NULL, 10);
    return TS_OK;
}

ts_status ts_ort_target_compare(ts_ort_target *t, const ts_graph *g0, const ts_graph *g1, double *worst,
                                char *where, size_t n, ts_error *err)
{
    char a[256], b[256], req[600], reply[400];
    *worst = 0;
    snprintf(where, n, "-");
    if (save(t, g0, "a", false, a, sizeof a, err) || save(t, g1, "b", false, b, sizeof b, err)) return err->code;
    bool symbolic = ts_onnx_keeps_symbolic(g0, NULL, 0);
    for (int k = 0; k < (symbolic ? 2 : 1); k++) {
        snprintf(req, sizeof req, "compare\t%s\t%s\t%s\t%d", a, b, k ? "-:4" : "-", t->threads);
        ts_status st = ts_ort_peer_ask(t->peer, req, reply, sizeof reply, ASK_MS, err);
        if (st) return st;
        double w;
        char at[300] = "";
        if (sscanf(reply, "%lf %299s", &w, at) < 1)
            return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: unexpected compare reply '%.100s'", reply);
        if (!(w <= *worst)) {
            *worst = w;
            snprintf(where, n, "output '%s' at symbolic dimensions %d", at, k ? 4 : 1);
        }
    }
    return TS_OK;
}
