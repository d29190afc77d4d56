/* Depth-first enumeration of TASO graphs (Algorithm 1 of the paper).
 *
 * A graph is a sequence of operators; each takes its inputs from a pool of
 * tensors: the input variables, then every operator output so far.  A graph
 * is skipped when it computes a tensor equal to one already in the pool
 * (duplicated computation: the same operator on the same inputs, or a
 * result equal to an input).  The same DAG would be reached once per
 * topological order; only orders in which two adjacent independent
 * operators appear in increasing (variant, inputs) order are kept, which
 * keeps at least the greedy smallest order of every DAG.  Each graph's
 * fingerprint combines the mod-p hashes of its outputs (the tensors no
 * operator consumes) order-independently. */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "taso/gen.h"

static const gen_varclass CLASSES[] = {
    {"x", 2, {GEN_N, GEN_M}, 3},                /* activations of matmul */
    {"w", 2, {GEN_M, GEN_M}, 3},                /* matrices */
    {"i", 4, {GEN_N, GEN_C, GEN_HW, GEN_HW}, 3}, /* activations of conv */
    {"k", 4, {GEN_C, GEN_C, 3, 3}, 3},          /* 3x3 kernels */
    {"q", 4, {GEN_C, GEN_C, 1, 1}, 2},          /* 1x1 kernels (enlarge) */
    {"s", 0, {0}, 2},                           /* scalars */
};
enum { CLS_X, CLS_W, CLS_I, CLS_K, CLS_Q, CLS_S };

/* The shape of a class's variables in a shape set (CLASSES holds set 0). */
static int class_dims(int cls, const gen_shapes *sh, int *dim)
{
    switch (cls) {
    case CLS_X: dim[0] = sh->xn; dim[1] = sh->m; return 2;
    case CLS_W: dim[0] = sh->m; dim[1] = sh->m; return 2;
    case CLS_I: dim[0] = sh->n; dim[1] = sh->c; dim[2] = sh->h; dim[3] = sh->w; return 4;
    case CLS_K: dim[0] = sh->c; dim[1] = sh->c; dim[2] = sh->k; dim[3] = sh->k; return 4;
    case CLS_Q: dim[0] = sh->c; dim[1] = sh->c; dim[2] = sh->qh; dim[3] = sh->qw; return 4;
    default: return 0;
    }
}

static void add_variant(gen_world *w, ts_rop op, ts_rparams p)
{
    w->variant[w->nvariant].op = op;
    w->variant[w->nvariant].p = p;
    w->nvariant++;
}

void gen_world_init(gen_world *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->cls = CLASSES;
    w->nclass = (int)(sizeof CLASSES / sizeof CLASSES[0]);
    for (int c = 0; c < w->nclass; c++)
        for (int k = 0; k < CLASSES[c].count; k++) {
            snprintf(w->var[w->nvar].name, sizeof w->var[0].name, "%.1s%d", CLASSES[c].prefix, (k + 1) % 10);
            w->var[w->nvar].cls = c;
            w->nvar++;
        }
    ts_rparams none = {0};
    add_variant(w, TS_ROP_EWADD, none);
    add_variant(w, TS_ROP_EWMUL, none);
    add_variant(w, TS_ROP_SMUL, none);
    add_variant(w, TS_ROP_TRANSPOSE, none);
    add_variant(w, TS_ROP_MATMUL, none);
    for (int s = 1; s <= 2; s++)
        for (int pad = 0; pad < 2; pad++)
            for (int act = 0; act < 2; act++)
                add_variant(w, TS_ROP_CONV,
                            (ts_rparams){.stride = s, .pad = (ts_rpad)pad, .act = (ts_ract)act});
    add_variant(w, TS_ROP_ENLARGE, none);
    add_variant(w, TS_ROP_RELU, none);
    for (int avg = 0; avg < 2; avg++)
        for (int s = 1; s <= 2; s++)
            for (int pad = 0; pad < 2; pad++)
                add_variant(w, avg ? TS_ROP_POOLMAX : TS_ROP_POOLAVG,
                            (ts_rparams){.kh = 3, .kw = 3, .stride = s, .pad = (ts_rpad)pad});
    for (int a = 0; a < 2; a++) add_variant(w, TS_ROP_CONCAT, (ts_rparams){.axis = a});
    /* split: one operator with two outputs; written split0/split1 in rules */
    for (int a = 0; a < 2; a++) add_variant(w, TS_ROP_SPLIT0, (ts_rparams){.axis = a});
    add_variant(w, TS_ROP_CPOOL, (ts_rparams){.kh = 3, .kw = 3});
    add_variant(w, TS_ROP_ICONV, (ts_rparams){.kh = 3, .kw = 3});
    add_variant(w, TS_ROP_IMATMUL, none);
    add_variant(w, TS_ROP_IEWMUL, none);

    w->var_modp = malloc((size_t)w->nvar * sizeof *w->var_modp);
    w->var_f64 = malloc((size_t)w->nvar * sizeof *w->var_f64);
    w->var2_modp = malloc((size_t)w->nvar * sizeof *w->var2_modp);
    w->var2_f64 = malloc((size_t)w->nvar * sizeof *w->var2_f64);
    w->var3_modp = malloc((size_t)w->nvar * sizeof *w->var3_modp);
    w->var3_f64 = malloc((size_t)w->nvar * sizeof *w->var3_f64);
    w->var4_modp = malloc((size_t)w->nvar * sizeof *w->var4_modp);
    w->var4_f64 = malloc((size_t)w->nvar * sizeof *w->var4_f64);
    uint64_t rng = seed;
    for (int v = 0; v < w->nvar; v++) {
        const gen_varclass *c = &CLASSES[w->var[v].cls];
        gen_tensor_random(&w->var_modp[v], GEN_MODP, c->nd, c->dim, &rng);
        gen_tensor_random(&w->var_f64[v], GEN_F64, c->nd, c->dim, &rng);
    }
    /* shape set 1 from its own stream: set 0's values do not depend on it */
    uint64_t rng2 = seed * 0x2545f4914f6cdd1dull + 1;
    for (int v = 0; v < w->nvar; v++) {
        int dim[4] = {0};
        int nd = class_dims(w->var[v].cls, &gen_shape_sets[1], dim);
        gen_tensor_random(&w->var2_modp[v], GEN_MODP, nd, dim, &rng2);
        gen_tensor_random(&w->var2_f64[v], GEN_F64, nd, dim, &rng2);
    }
    uint64_t rng3 = seed * 0x9e3779b97f4a7c15ull + 3;
    for (int v = 0; v < w->nvar; v++) {
        int dim[4] = {0};
        int nd = class_dims(w->var[v].cls, &gen_shape_sets[2], dim);
        gen_tensor_random(&w->var3_modp[v], GEN_MODP, nd, dim, &rng3);
        gen_tensor_random(&w->var3_f64[v], GEN_F64, nd, dim, &rng3);
    }
    uint64_t rng4 = seed * 0xbf58476d1ce4e5b9ull + 5;
    for (int v = 0; v < w->nvar; v++) {
        int dim[4] = {0};
        int nd = class_dims(w->var[v].cls, &gen_shape_sets[3], dim);
        gen_tensor_random(&w->var4_modp[v], GEN_MODP, nd, dim, &rng4);
        gen_tensor_random(&w->var4_f64[v], GEN_F64, nd, dim, &rng4);
    }
}

ts_status gen_world_restrict(gen_world *w, const char *ops, ts_error *err)
{
    bool keep[96] = {0};
    for (const char *p = ops; *p;) {
        size_t len = strcspn(p, ",");
        bool known = false;
        for (int v = 0; v < w->nvariant; v++) {
            const char *atom = w->variant[v].op == TS_ROP_SPLIT0 ? "split" : ts_rop_info(w->variant[v].op)->atom;
            if (strlen(atom) == len && !strncmp(atom, p, len)) keep[v] = known = true;
        }
        if (!known) return ts_error_set(err, TS_ERR_INVALID, "generate: --ops: no operator '%.*s'", (int)len, p);
        p += len + (p[len] == ',');
    }
    int n = 0;
    for (int v = 0; v < w->nvariant; v++)
        if (keep[v]) w->variant[n++] = w->variant[v];
    w->nvariant = n;
    return TS_OK;
}

void gen_world_free(gen_world *w)
{
    free(w->var_modp);
    free(w->var_f64);
    free(w->var2_modp);
    free(w->var2_f64);
    free(w->var3_modp);
    free(w->var3_f64);
    free(w->var4_modp);
    free(w->var4_f64);
    w->var_modp = w->var_f64 = w->var2_modp = w->var2_f64 = w->var3_modp = w->var3_f64 = w->var4_modp = w->var4_f64 = NULL;
}

/* ---- enumeration ---- */

#define POOL_MAX (32 + 2 * GEN_MAX_OPS)

typedef struct ctx {
    const gen_world *w;
    int max_ops;
    gen_tensor *pool; /* POOL_MAX */
    uint64_t hash[POOL_MAX];
    int uses[POOL_MAX];
    bool act[POOL_MAX]; /* computed from an activation variable (class i) */
    int npool;
    int op_out[GEN_MAX_OPS]; /* first pool entry of each op's outputs */
    uint32_t op_vars[GEN_MAX_OPS]; /* input variables each op reads directly */
    uint8_t op_deps[GEN_MAX_OPS];  /* earlier ops whose outputs it reads */
    int connected;                 /* the graph so far is one component */
    int var_ok;                    /* its variables are prefix-closed per class */
    bool collect_first;            /* dry run: record every first operator, stop */
    gen_graph g;
    /* records in chunks of CHUNK (no realloc doubling: at 4 operators the
     * records are ~1 GiB, and a doubling realloc would briefly need 2-3x) */
    gen_graph **chunk;
    size_t nchunk, capchunk, n; /* n: records in all chunks */
    bool oom;
} ctx;

/* 48 MB: above glibc's largest mmap threshold (32 MiB), so every chunk is
 * its own mapping and goes back to the system when freed during the
 * scatter below (smaller chunks came from the heap and stayed resident:
 * 2.5 GB peak instead of ~1.5 at 4 operators) */
#define CHUNK ((size_t)1 << 21)

static int nouts(ts_rop op)
{
    return op == TS_ROP_SPLIT0 ? 2 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Order-independent combination of the hashes of a graph's outputs. */
static uint64_t combine_outputs(uint64_t *hs, int n)
{
    qsort(hs, (size_t)n, sizeof hs[0], cmp_u64);
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; i++) {
        h = ts_hash_word(h, hs[i]);
        h ^= h >> 29;
    }
    return h;
}

static uint64_t graph_fp(const ctx *c)
{
    uint64_t hs[POOL_MAX];
    int n = 0;
    for (int i = c->w->nvar; i < c->npool; i++)
        if (!c->uses[i]) hs[n++] = c->hash[i];
    return combine_outputs(hs, n);
}

/* Appends a record to the thread's chunks. */
static void push(ctx *c, const gen_graph *g)
{
    if (c->n == c->nchunk * CHUNK) {
        if (c->nchunk == c->capchunk) {
            size_t nc = c->capchunk ? c->capchunk * 2 : 64;
            gen_graph **no = realloc(c->chunk, nc * sizeof *no);
            if (!no) {
                c->oom = true;
                return;
            }
            c->chunk = no;
            c->capchunk = nc;
        }
        c->chunk[c->nchunk] = malloc(CHUNK * sizeof **c->chunk);
        if (!c->chunk[c->nchunk]) {
            c->oom = true;
            return;
        }
        c->nchunk++;
    }
    c->chunk[c->n / CHUNK][c->n % CHUNK] = *g;
    c->n++;
}

static void record(ctx *c)
{
    c->g.fp = graph_fp(c);
    push(c, &c->g);
}

static void free_chunks(ctx *c)
{
    for (size_t i = 0; i < c->nchunk; i++) free(c->chunk[i]);
    free(c->chunk);
    c->chunk = NULL;
    c->nchunk = c->capchunk = 0;
}

static const gen_graph *rec_at(const ctx *c, size_t i)
{
    return &c->chunk[i / CHUNK][i % CHUNK];
}

int gen_graph_cmp(const void *pa, const void *pb)
{
    const gen_graph *a = pa, *b = pb;
    if (a->fp != b->fp) return a->fp < b->fp ? -1 : 1;
    if (a->nops != b->nops) return (int)a->nops - (int)b->nops;
    return memcmp(a->op, b->op, sizeof a->op);
}

static bool var_in_class(const ctx *c, int idx, int cls)
{
    return idx < c->w->nvar && c->w->var[idx].cls == cls;
}

static void dfs(ctx *c, int depth);

/* Which op produced pool entry idx (-1: an input variable). */
static int owner(const ctx *c, int n, int idx)
{
    if (idx < c->w->nvar) return -1;
    for (int k = n - 1; k >= 0; k--)
        if (idx >= c->op_out[k]) return k;
    return -1;
}

/* Components of the graph's first n ops: two ops are joined when one reads
 * the other's output or both read one input variable. */
static int components(const ctx *c, int n)
{
    int par[GEN_MAX_OPS];
    for (int i = 0; i < n; i++) par[i] = i;
    int comps = n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if ((c->op_vars[i] & c->op_vars[j]) || (c->op_deps[i] >> j & 1)) {
                int a = i, b = j;
                while (par[a] != a) a = par[a];
                while (par[b] != b) b = par[b];
                if (a != b) {
                    par[a] = b;
                    comps--;
                }
            }
    return comps;
}

/* Variables missing below the highest used one of each class: x2 used
 * without x1 is a hole.  A graph with holes is a renaming of one without;
 * both sides of a pair read the same variables, so enumerating only
 * prefix-closed variable sets loses no pair up to renaming. */
static int var_holes(const ctx *c, uint32_t used)
{
    int holes = 0, v = 0;
    for (int cl = 0; cl < c->w->nclass; cl++) {
        int cnt = c->w->cls[cl].count, top = -1;
        for (int k = 0; k < cnt; k++)
            if (used >> (v + k) & 1) top = k;
        for (int k = 0; k < top; k++) holes += !(used >> (v + k) & 1);
        v += cnt;
    }
    return holes;
}

/* Constants are read only by the operators they are identities or
 * kernels for: anything else (the transpose of Imatmul, pooling Cpool,
 * Imatmul masking a matrix) computes facts about their fixed sizes and
 * values, not rules about the operators. */
static bool const_use_ok(ts_rop cst, ts_rop user, int argi)
{
    switch (cst) {
    case TS_ROP_IMATMUL: return user == TS_ROP_MATMUL;
    case TS_ROP_IEWMUL: return user == TS_ROP_EWMUL;
    case TS_ROP_ICONV:
    case TS_ROP_CPOOL:
        return (user == TS_ROP_CONV && argi == 1) || user == TS_ROP_EWADD || user == TS_ROP_CONCAT;
    default: return true;
    }
}

/* Adds operator (v, a, b) as op number `depth` and recurses. */
static void try_op(ctx *c, int depth, int v, int a, int b)
{
    const gen_variant *var = &c->w->variant[v];
    int nargs = ts_rop_info(var->op)->nargs;
    /* Canonical order: an operator independent of the previous one must
     * sort after it. */
    if (depth > 0) {
        const uint8_t *prev = c->g.op[depth - 1];
        int pout = c->op_out[depth - 1], pn = nouts(c->w->variant[prev[0]].op);
        bool dep = (nargs >= 1 && a >= pout && a < pout + pn) || (nargs >= 2 && b >= pout && b < pout + pn);
        if (!dep) {
            int k1 = nargs >= 1 ? a : 0, k2 = nargs >= 2 ? b : 0;
            bool less = v < prev[0] || (v == prev[0] && (k1 < prev[1] || (k1 == prev[1] && k2 < prev[2])));
            if (less) return;
        }
    }
    /* Graphs must end connected (a graph of two unrelated parts is two
     * smaller rules side by side) and prefix-closed in their variables;
     * prune when the remaining operators cannot get there: each joins at
     * most two components and brings at most two new variables.  Checked
     * before evaluating: most tries at the last depth fail here. */
    uint32_t vars = 0;
    uint8_t deps = 0;
    int args[2] = {a, b};
    for (int k = 0; k < nargs; k++) {
        int o = owner(c, depth, args[k]);
        if (o < 0) vars |= 1u << args[k];
        else deps |= (uint8_t)(1u << o);
        if (o >= 0 && !const_use_ok(c->w->variant[c->g.op[o][0]].op, var->op, k)) return;
    }
    c->op_vars[depth] = vars;
    c->op_deps[depth] = deps;
    int remaining = c->max_ops - (depth + 1);
    int comps = components(c, depth + 1);
    if (comps - 1 > remaining) return;
    uint32_t used = 0;
    for (int k = 0; k <= depth; k++) used |= c->op_vars[k];
    int holes = var_holes(c, used);
    if (holes > 2 * remaining) return;
    int no = nouts(var->op);
    if (c->npool + no > POOL_MAX) return;
    gen_tensor *o0 = &c->pool[c->npool], *o1 = no > 1 ? &c->pool[c->npool + 1] : NULL;
    o0->dom = GEN_MODP;
    if (!gen_apply(var->op, &var->p, nargs >= 1 ? &c->pool[a] : NULL, nargs >= 2 ? &c->pool[b] : NULL,
                   o0, o1))
        return;
    for (int k = 0; k < no; k++) {
        uint64_t h = gen_tensor_hash(&c->pool[c->npool + k]);
        for (int i = 0; i < c->npool + k; i++)
            if (c->hash[i] == h) return; /* duplicated computation */
        c->hash[c->npool + k] = h;
        c->uses[c->npool + k] = 0;
        c->act[c->npool + k] = (nargs >= 1 && c->act[a]) || (nargs >= 2 && c->act[b]);
    }
    int save_conn = c->connected, save_vok = c->var_ok;
    c->connected = comps == 1;
    c->var_ok = holes == 0;
    c->g.op[depth][0] = (uint8_t)v;
    c->g.op[depth][1] = (uint8_t)(nargs >= 1 ? a : 0);
    c->g.op[depth][2] = (uint8_t)(nargs >= 2 ? b : 0);
    c->g.nops = (uint8_t)(depth + 1);
    c->op_out[depth] = c->npool;
    if (nargs >= 1) c->uses[a]++;
    if (nargs >= 2) c->uses[b]++;
    c->npool += no;
    dfs(c, depth + 1);
    c->npool -= no;
    c->connected = save_conn;
    c->var_ok = save_vok;
    if (nargs >= 1) c->uses[a]--;
    if (nargs >= 2) c->uses[b]--;
    c->g.nops = (uint8_t)depth;
}

/* Which argument tuples an operator may take (beyond its shape checks). */
static void for_args(ctx *c, int depth, int v)
{
    const gen_variant *var = &c->w->variant[v];
    int np = c->npool;
    if (ts_rop_info(var->op)->commutative) { /* one order of the arguments */
        for (int a = 0; a < np; a++)
            for (int b = a + 1; b < np; b++) try_op(c, depth, v, a, b);
        return;
    }
    /* the generator's policy per atom (docs/taso.md, step 1) */
    switch (var->op) {
    case TS_ROP_SMUL:
    case TS_ROP_CONCAT:
        for (int a = 0; a < np; a++)
            for (int b = 0; b < np; b++)
                if (a != b) try_op(c, depth, v, a, b);
        break;
    case TS_ROP_MATMUL:
        for (int a = 0; a < np; a++)
            for (int b = 0; b < np; b++) try_op(c, depth, v, a, b);
        break;
    case TS_ROP_CONV:
        /* the data input is computed from an activation (TASO skips kernel
         * variables as data; a convolution of kernels or constants with
         * each other only finds identities of their fixed sizes, e.g. a
         * valid conv of two equal-sized kernels is 1x1 at any stride), an
         * activation variable is never the kernel */
        for (int a = 0; a < np; a++) {
            if (!c->act[a]) continue;
            for (int b = 0; b < np; b++)
                if (!c->act[b]) try_op(c, depth, v, a, b);
        }
        break;
    case TS_ROP_ENLARGE: /* only on input kernels (weights fold away) */
        for (int a = 0; a < c->w->nvar; a++) {
            if (!var_in_class(c, a, CLS_Q) && !var_in_class(c, a, CLS_K)) continue;
            /* the reference only lends its kernel size: always the first
             * 3x3 kernel (any other would give the same tensor and only
             * multiply the graphs) */
            for (int b = 0; b < c->w->nvar; b++)
                if (var_in_class(c, b, CLS_K)) {
                    try_op(c, depth, v, a, b);
                    break;
                }
        }
        break;
    case TS_ROP_POOLAVG:
    case TS_ROP_POOLMAX: /* pooling kernels or constants only finds size accidents */
        for (int a = 0; a < np; a++)
            if (c->act[a]) try_op(c, depth, v, a, 0);
        break;
    default:
        if (ts_rop_info(var->op)->nargs == 0) try_op(c, depth, v, 0, 0);
        else
            for (int a = 0; a < np; a++) try_op(c, depth, v, a, 0);
        break;
    }
}

static void dfs(ctx *c, int depth)
{
    if (c->oom) return;
    if (c->collect_first && depth > 0) {
        record(c);
        return;
    }
    if (depth > 0 && c->connected && c->var_ok) record(c);
    if (depth >= c->max_ops) return;
    for (int v = 0; v < c->w->nvariant; v++) for_args(c, depth, v);
}

static void ctx_init(ctx *c, const gen_world *w, int max_ops)
{
    memset(c, 0, sizeof *c);
    c->w = w;
    c->max_ops = max_ops;
    c->pool = malloc(POOL_MAX * sizeof *c->pool);
    if (!c->pool) {
        c->oom = true;
        return;
    }
    for (int i = 0; i < w->nvar; i++) {
        c->pool[i] = w->var_modp[i];
        c->act[i] = w->var[i].cls == CLS_I;
        c->hash[i] = gen_tensor_hash(&c->pool[i]);
    }
    c->npool = w->nvar;
}

/* ---- checkpoints (gen_config.checkpoint) ----
 * The records of first operator f go to DIR/first-F.bin (written to a
 * temporary name, then renamed: a file that exists is whole); a run with
 * the same DIR loads them instead of enumerating f again.  DIR/config
 * holds what the records depend on, checked before any is used. */

static void ckpt_path(char *out, size_t n, const char *dir, size_t f, const char *suffix)
{
    snprintf(out, n, "%s/first-%zu.bin%s", dir, f, suffix);
}

static bool ckpt_load(ctx *c, const char *dir, size_t f)
{
    char path[4200];
    ckpt_path(path, sizeof path, dir, f, "");
    FILE *in = fopen(path, "rb");
    if (!in) return false;
    gen_graph g;
    while (!c->oom && fread(&g, sizeof g, 1, in) == 1) push(c, &g);
    fclose(in);
    return true;
}

static void ckpt_save(const ctx *c, const char *dir, size_t f, size_t from)
{
    char path[4200], tmp[4200];
    ckpt_path(path, sizeof path, dir, f, "");
    ckpt_path(tmp, sizeof tmp, dir, f, ".tmp");
    FILE *out = fopen(tmp, "wb");
    bool ok = out != NULL;
    for (size_t i = from; ok && i < c->n; i++) ok = fwrite(rec_at(c, i), sizeof(gen_graph), 1, out) == 1;
    if (out && fclose(out)) ok = false;
    if (!ok || rename(tmp, path)) remove(tmp); /* no checkpoint of f: enumerated again next time */
}

/* DIR/config: a checkpoint of other settings is an error, not a mix. */
static ts_status ckpt_open(const char *dir, const gen_world *w, int max_ops, size_t nfirst, ts_error *err)
{
    char path[4200], want[256], have[256] = "";
    if (mkdir(dir, 0777) && errno != EEXIST)
        return ts_error_set(err, TS_ERR_IO, "generate: cannot create checkpoint folder '%s': %s", dir, strerror(errno));
    /* the records depend on the operators, the variables' values (the seed, through their hashes) and the depth */
    uint64_t h = 0;
    for (int v = 0; v < w->nvariant; v++) h = ts_hash_fmix64(h ^ ((uint64_t)w->variant[v].op << 8 | (uint64_t)v));
    for (int v = 0; v < w->nvar; v++) h = ts_hash_fmix64(h ^ gen_tensor_hash(&w->var_modp[v]));
    snprintf(want, sizeof want, "tsopt generate checkpoint: max_ops %d, first operators %zu, world %016llx, record %zu\n",
             max_ops, nfirst, (unsigned long long)h, sizeof(gen_graph));
    snprintf(path, sizeof path, "%s/config", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(have, sizeof have, f)) have[0] = 0;
        fclose(f);
        if (strcmp(have, want))
            return ts_error_set(err, TS_ERR_INVALID,
                                "generate: checkpoint '%s' is of another run (%s): give a new folder", path,
                                strtok(have, "\n") ? have : "unreadable");
        return TS_OK;
    }
    /* through a temporary name: several processes may write it at once */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    f = fopen(tmp, "w");
    bool ok = f && fputs(want, f) >= 0;
    if (f && fclose(f)) ok = false;
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return ts_error_set(err, TS_ERR_IO, "generate: cannot write '%s'", path);
    }
    return TS_OK;
}

/* First operators: (variant, a, b) tuples collected by a dry run of
 * for_args at depth 0; the threads share them out. */
typedef struct first_op {
    int v, a, b;
} first_op;

ts_status gen_enumerate(const gen_world *w, const gen_config *cfg, gen_graph **out, size_t *n,
                        ts_error *err)
{
    *out = NULL;
    *n = 0;
    int max_ops = cfg->max_ops < GEN_MAX_OPS ? cfg->max_ops : GEN_MAX_OPS;
    /* Collect depth-0 choices: run the enumeration to one operator. */
    ctx c0;
    ctx_init(&c0, w, max_ops); /* the pruning bounds see the real depth */
    c0.collect_first = true;
    if (c0.oom) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    dfs(&c0, 0);
    free(c0.pool);
    if (c0.oom) {
        free_chunks(&c0);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    size_t nfirst = c0.n;
    gen_graph *first = malloc((nfirst ? nfirst : 1) * sizeof *first);
    for (size_t f = 0; first && f < nfirst; f++) first[f] = *rec_at(&c0, f);
    free_chunks(&c0);
    if (!first) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");

    const char *ck = cfg->checkpoint;
    if (ck) {
        ts_status s = ckpt_open(ck, w, max_ops, nfirst, err);
        if (s) {
            free(first);
            return s;
        }
    }
    int threads = cfg->threads > 0 ? cfg->threads : 1;
    ctx *cs = calloc((size_t)threads, sizeof *cs);
    if (!cs) {
        free(first);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    bool oom = false;
#pragma omp parallel num_threads(threads)
    {
        ctx *c = &cs[omp_get_thread_num()];
        ctx_init(c, w, max_ops);
        if (cfg->dist && cfg->dist->claim) {
            /* several processes: each first operator goes to whichever
             * thread of whichever process asks next */
            for (;;) {
                long f;
#pragma omp critical(gen_claim)
                f = cfg->dist->claim(cfg->dist->arg);
                if (f < 0 || (size_t)f >= nfirst || c->oom) break;
                if (ck && ckpt_load(c, ck, (size_t)f)) continue;
                size_t from = c->n;
                const uint8_t *op = first[f].op[0];
                try_op(c, 0, op[0], op[1], op[2]);
                if (ck && !c->oom) ckpt_save(c, ck, (size_t)f, from);
            }
        } else {
#pragma omp for schedule(dynamic, 1)
            for (size_t f = 0; f < nfirst; f++) {
                if (c->oom || (ck && ckpt_load(c, ck, f))) continue;
                size_t from = c->n;
                const uint8_t *op = first[f].op[0];
                try_op(c, 0, op[0], op[1], op[2]);
                if (ck && !c->oom) ckpt_save(c, ck, f, from);
            }
        }
        free(c->pool);
        if (c->oom) {
#pragma omp atomic write
            oom = true;
        }
    }
    free(first);
    /* Sort by fingerprint without a second full copy: count the records
     * per bucket of the fingerprint's top bits, scatter the chunks into one
     * array (freeing each chunk as it is emptied), sort each bucket.  seq
     * numbers the records in enumeration order (thread by thread, each
     * thread's records in depth-first order). */
    enum { BBITS = 16 };
    size_t nb = (size_t)1 << BBITS, total = 0;
    size_t *start = oom ? NULL : calloc(nb + 1, sizeof *start);
    if (start)
        for (int t = 0; t < threads; t++)
            for (size_t i = 0; i < cs[t].n; i++) start[(rec_at(&cs[t], i)->fp >> (64 - BBITS)) + 1]++;
    for (int t = 0; t < threads; t++) total += cs[t].n;
    gen_graph *all = start && total < ((size_t)1 << 29) ? malloc((total ? total : 1) * sizeof *all) : NULL;
    size_t *pos = all ? malloc(nb * sizeof *pos) : NULL;
    if (pos) {
        for (size_t b = 0; b < nb; b++) start[b + 1] += start[b];
        memcpy(pos, start, nb * sizeof *pos);
    }
    uint32_t seq = 0;
    for (int t = 0; t < threads; t++) {
        for (size_t ch = 0; ch < cs[t].nchunk; ch++) {
            size_t m = cs[t].n - ch * CHUNK < CHUNK ? cs[t].n - ch * CHUNK : CHUNK;
            for (size_t i = 0; pos && i < m; i++) {
                gen_graph g = cs[t].chunk[ch][i];
                g.seq = seq++ & ((1u << 29) - 1);
                all[pos[g.fp >> (64 - BBITS)]++] = g;
            }
            free(cs[t].chunk[ch]);
        }
        free(cs[t].chunk);
    }
    free(cs);
    if (!pos) {
        free(all);
        free(start);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory enumerating graphs (%zu graphs)", total);
    }
    free(pos);
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads)
    for (size_t b = 0; b < nb; b++)
        if (start[b + 1] - start[b] > 1) qsort(all + start[b], start[b + 1] - start[b], sizeof *all, gen_graph_cmp);
    free(start);
    *out = all;
    *n = total;
    return TS_OK;
}
