/* Element-wise unary and binary operators (float32) with NumPy broadcasting:
 * lowering one node to instructions (xv_lower_node), the broadcast geometry
 * (xv_geometry) and the block interpreter (xv_prog_run).  Fusion of chains
 * is vec_fuse.c; this file knows single nodes only. */
#include <omp.h>
#include <stdlib.h>
#include "exec/half.h"
#include "exec/vec_eltwise.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* ------------------------------------------------------ family helpers */

int xv_threads(const xplan *p)
{
    return p->opts.threads > 0 ? p->opts.threads : omp_get_max_threads();
}

bool xv_all_f32(const xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    for (int i = 0; i < nd->ninputs; i++)
        if (nd->inputs[i] >= 0 && p->g->values[nd->inputs[i]].dtype != TS_F32) return false;
    for (int i = 0; i < nd->noutputs; i++)
        if (p->g->values[nd->outputs[i]].dtype != TS_F32) return false;
    return true;
}

void *xv_state(size_t size, ts_error *err)
{
    void *s = calloc(1, size);
    if (!s) ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    return s;
}

ts_status xv_bind_io(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    int nin = 0;
    for (int i = 0; i < nd->ninputs; i++) nin += nd->inputs[i] >= 0;
    if (xstep_alloc(s, nin, nd->noutputs, err)) return err->code;
    nin = 0;
    for (int i = 0; i < nd->ninputs; i++) {
        if (nd->inputs[i] < 0) continue;
        int b = xplan_plain(p, xplan_value_buf(p, nd->inputs[i]), err);
        if (b < 0) return err->code ? err->code : TS_ERR_INVALID;
        s->in[nin++] = b;
    }
    for (int i = 0; i < nd->noutputs; i++) {
        s->out[i] = xplan_value_buf(p, nd->outputs[i]);
        if (s->out[i] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    }
    return TS_OK;
}

/* ------------------------------------------------------------ lowering */

/* The float32 scalar of constant value v with one element, or false. */
static bool const_scalar(const xplan *p, int v, float *out)
{
    const ts_tensor *t = v >= 0 ? xplan_const(p, v) : NULL;
    if (!t || t->dtype != TS_F32 || ts_tensor_numel(t) != 1) return false;
    *out = *(const float *)t->data;
    return true;
}

/* Operand index for value v: acc, or an external (added once). */
static int operand(int v, int cur, xv_prog *pr, int *ext)
{
    if (v == cur) return XV_ACC;
    for (int j = 0; j < pr->next; j++)
        if (ext[j] == v) return j;
    if (pr->next == XV_MAXIN) return -2;
    ext[pr->next] = v;
    return pr->next++;
}

static bool emit(xv_prog *pr, xv_opc opc, int a, int b, float p0, float p1)
{
    if (pr->nins == XV_MAXPROG || a == -2 || b == -2) return false;
    pr->ins[pr->nins++] = (xv_instr){opc, a, b, p0, p1};
    return true;
}

static const struct {
    const ts_op_desc *op;
    xv_opc opc;
} unary_ops[] = {
    {&ts_op_relu, XO_RELU},       {&ts_op_neg, XO_NEG},   {&ts_op_abs, XO_ABS},             {&ts_op_sqrt, XO_SQRT},
    {&ts_op_exp, XO_EXP},         {&ts_op_log, XO_LOG},   {&ts_op_reciprocal, XO_RECIP},   {&ts_op_erf, XO_ERF},
    {&ts_op_sigmoid, XO_SIGMOID}, {&ts_op_tanh, XO_TANH}, {&ts_op_hardswish, XO_HSWISH},   {&ts_op_identity, XO_COPY},
};

static const struct {
    const ts_op_desc *op;
    xv_opc opc, imm, rimm; /* both operands; b immediate; a immediate */
} binary_ops[] = {
    {&ts_op_add, XO_ADD, XO_ADD_S, XO_ADD_S}, {&ts_op_sub, XO_SUB, XO_SUB_S, XO_RSUB_S},
    {&ts_op_mul, XO_MUL, XO_MUL_S, XO_MUL_S}, {&ts_op_div, XO_DIV, XO_DIV_S, XO_RDIV_S},
    {&ts_op_pow, XO_POW, XO_POW_S, XO_POW},   {&ts_op_max, XO_MAX, XO_MAX_S, XO_MAX_S},
    {&ts_op_min, XO_MIN, XO_MIN_S, XO_MIN_S}, {&ts_op_prelu, XO_PRELU, XO_PRELU, XO_PRELU},
    /* float Mod has fmod = 1 (its inference refuses 0): C's fmod, the
     * dividend's sign; integer Mod is not float32 and runs elsewhere */
    {&ts_op_mod, XO_FMOD, XO_FMOD_S, XO_RFMOD_S},
};

static bool lower_binary(const xplan *p, const ts_node *nd, int k, int cur, xv_prog *pr, int *ext)
{
    int va = nd->inputs[0], vb = nd->inputs[1];
    float c;
    xv_opc opc = binary_ops[k].opc;
    /* a scalar constant becomes an immediate (no broadcast walk, no input) */
    if (va != vb && opc != XO_PRELU && const_scalar(p, vb, &c)) {
        int a = operand(va, cur, pr, ext);
        if (opc == XO_POW) { /* the exponents models use, without powf */
            if (c == 2.0f) return emit(pr, XO_SQUARE, a, 0, 0, 0);
            if (c == 1.0f) return emit(pr, XO_COPY, a, 0, 0, 0);
            if (c == 0.5f) return emit(pr, XO_SQRT, a, 0, 0, 0);
        }
        return emit(pr, binary_ops[k].imm, a, 0, c, 0);
    }
    if (va != vb && opc != XO_PRELU && opc != XO_POW && const_scalar(p, va, &c))
        return emit(pr, binary_ops[k].rimm, operand(vb, cur, pr, ext), 0, c, 0);
    int a = operand(va, cur, pr, ext);
    int b = operand(vb, cur, pr, ext);
    return emit(pr, opc, a, b, 0, 0);
}

bool xv_lower_node(const xplan *p, int n, int cur, xv_prog *pr, int *ext)
{
    const ts_node *nd = &p->g->nodes[n];
    const ts_op_desc *op = nd->op;
    if (nd->noutputs != 1) return false;
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        if (op == unary_ops[k].op)
            return nd->ninputs == 1 && emit(pr, unary_ops[k].opc, operand(nd->inputs[0], cur, pr, ext), 0, 0, 0);
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++)
        if (op == binary_ops[k].op)
            return nd->ninputs == 2 && nd->inputs[0] >= 0 && nd->inputs[1] >= 0 &&
                   lower_binary(p, nd, (int)k, cur, pr, ext);
    if (op == &ts_op_leakyrelu || op == &ts_op_hardsigmoid) {
        const ts_alpha_beta_attrs *ab = nd->attrs;
        return emit(pr, op == &ts_op_leakyrelu ? XO_LEAKY : XO_HSIG, operand(nd->inputs[0], cur, pr, ext), 0, ab->alpha,
                    ab->beta);
    }
    if (op == &ts_op_gelu)
        return emit(pr, ((const ts_gelu_attrs *)nd->attrs)->tanh ? XO_GELU_TANH : XO_GELU_ERF,
                    operand(nd->inputs[0], cur, pr, ext), 0, 0, 0);
    if (op == &ts_op_clip) {
        const ts_clip_attrs *ca = nd->attrs;
        float lo = ca->has_min ? ca->min : -INFINITY, hi = ca->has_max ? ca->max : INFINITY;
        if (nd->ninputs > 1 && nd->inputs[1] >= 0 && !const_scalar(p, nd->inputs[1], &lo)) return false;
        if (nd->ninputs > 2 && nd->inputs[2] >= 0 && !const_scalar(p, nd->inputs[2], &hi)) return false;
        return emit(pr, XO_CLIP, operand(nd->inputs[0], cur, pr, ext), 0, lo, hi);
    }
    return false;
}

/* ------------------------------------------------------------ geometry */

void xv_geometry(xv_prog *pr, const ts_shape *out, const ts_shape *const *in)
{
    xv_geometry_order(pr, out, in, NULL, NULL);
}

void xv_geometry_order(xv_prog *pr, const ts_shape *out, const ts_shape *const *in, const int *order,
                       const bool *in_order)
{
    int64_t st[XV_MAXIN][TS_MAX_RANK];
    int r = 0;
    if (ts_shape_numel(out) == 0) { /* nothing to compute: no rows, so the run divides by no extent */
        pr->rank = 1, pr->dims[0] = 0, pr->len = pr->numel = pr->nrows = 0;
        for (int j = 0; j < pr->next; j++) pr->stride[j][0] = 0;
        return;
    }
    for (int j = 0; j < pr->next; j++) {
        if (order && in_order[j]) { /* dense in `order`: logical dim order[k] is physical position k */
            int64_t step = 1;
            for (int k = out->rank - 1; k >= 0; k--) {
                st[j][order[k]] = step;
                step *= out->dims[order[k]];
            }
        } else {
            ts_shape_bcast_strides(in[j], out, st[j]);
        }
    }
    for (int k = 0; k < out->rank; k++) {
        int d = order ? order[k] : k; /* walk the dims outermost-first as the output is stored */
        if (out->dims[d] == 1) continue; /* no extent: its strides never matter */
        bool merge = r > 0;
        for (int j = 0; j < pr->next && merge; j++)
            merge = pr->stride[j][r - 1] == st[j][d] * out->dims[d];
        if (merge) {
            pr->dims[r - 1] *= out->dims[d];
            for (int j = 0; j < pr->next; j++) pr->stride[j][r - 1] = st[j][d];
        } else {
            pr->dims[r] = out->dims[d];
            for (int j = 0; j < pr->next; j++) pr->stride[j][r] = st[j][d];
            r++;
        }
    }
    if (r == 0) { /* a scalar or all-ones shape: one element */
        pr->dims[0] = 1;
        for (int j = 0; j < pr->next; j++) pr->stride[j][0] = 0;
        r = 1;
    }
    pr->rank = r;
    pr->len = pr->dims[r - 1];
    pr->numel = 1;
    for (int d = 0; d < r; d++) pr->numel *= pr->dims[d];
    pr->nrows = pr->numel / pr->len;
}

/* ----------------------------------------------------------- execution */

#define LOOP(EXPR)                                                                                               \
    do {                                                                                                         \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (EXPR);                                       \
    } while (0)

/* One block: n elements of every operand are contiguous at src[j]. */
XV_CLONES static void run_block(const xv_prog *pr, float *y, const float *const *src, int64_t n)
{
    for (int k = 0; k < pr->nins; k++) {
        const xv_instr *in = &pr->ins[k];
        const float *a = in->a == XV_ACC ? y : src[in->a];
        const float *b = in->b == XV_ACC ? y : src[in->b];
        const float c = in->p0, d = in->p1;
        switch (in->opc) {
        case XO_ADD: LOOP(a[i] + b[i]); break;
        case XO_SUB: LOOP(a[i] - b[i]); break;
        case XO_MUL: LOOP(a[i] * b[i]); break;
        case XO_DIV: LOOP(a[i] / b[i]); break;
        case XO_POW:
            for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], b[i]);
            break;
        case XO_MAX: LOOP(a[i] > b[i] ? a[i] : b[i]); break;
        case XO_MIN: LOOP(a[i] < b[i] ? a[i] : b[i]); break;
        case XO_PRELU: LOOP(a[i] < 0 ? a[i] * b[i] : a[i]); break;
        case XO_FMOD:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(a[i], b[i]);
            break;
        case XO_FMOD_S:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(a[i], c);
            break;
        case XO_RFMOD_S:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(c, a[i]);
            break;
        case XO_ADD_S: LOOP(a[i] + c); break;
        case XO_SUB_S: LOOP(a[i] - c); break;
        case XO_RSUB_S: LOOP(c - a[i]); break;
        case XO_MUL_S: LOOP(a[i] * c); break;
        case XO_DIV_S: LOOP(a[i] / c); break;
        case XO_RDIV_S: LOOP(c / a[i]); break;
        case XO_POW_S:
            for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], c);
            break;
        case XO_MAX_S: LOOP(a[i] > c ? a[i] : c); break;
        case XO_MIN_S: LOOP(a[i] < c ? a[i] : c); break;
        case XO_COPY: if (y != a) memcpy(y, a, (size_t)n * sizeof *y); break;
        case XO_SQUARE: LOOP(a[i] * a[i]); break;
        case XO_RELU: LOOP(a[i] > 0 ? a[i] : 0.0f); break;
        case XO_NEG: LOOP(-a[i]); break;
        case XO_ABS: LOOP(fabsf(a[i])); break;
        case XO_SQRT: LOOP(__builtin_sqrtf(a[i])); break;
        case XO_EXP: LOOP(xv_exp(a[i])); break;
        case XO_LOG:
            for (int64_t i = 0; i < n; i++) y[i] = logf(a[i]);
            break;
        case XO_RECIP: LOOP(1.0f / a[i]); break;
        case XO_ERF: LOOP(xv_erf(a[i])); break;
        case XO_SIGMOID: LOOP(xv_sigmoid(a[i])); break;
        case XO_TANH: LOOP(xv_tanh(a[i])); break;
        case XO_LEAKY: LOOP(a[i] >= 0 ? a[i] : a[i] * c); break;
        case XO_HSIG: {
            LOOP(c * a[i] + d);
            LOOP(y[i] < 0 ? 0.0f : y[i] > 1 ? 1.0f : y[i]);
            break;
        }
        case XO_HSWISH: {
            LOOP(a[i] * (a[i] / 6.0f + 0.5f < 0 ? 0.0f : a[i] / 6.0f + 0.5f > 1 ? 1.0f : a[i] / 6.0f + 0.5f));
            break;
        }
        case XO_GELU_ERF: LOOP(0.5f * a[i] * (1.0f + xv_erf(a[i] * 0.70710678f))); break;
        case XO_GELU_TANH: LOOP(0.5f * a[i] * (1.0f + xv_tanh(0.7978845608f * (a[i] + 0.044715f * a[i] * a[i] * a[i]))));
            break;
        case XO_CLIP: {
            LOOP(a[i] < c ? c : a[i]);
            LOOP(y[i] > d ? d : y[i]);
            break;
        }
        case XO_ROUND_F16:
        case XO_ROUND_BF16:
            if (y != a) memcpy(y, a, (size_t)n * sizeof *y);
            xhalf_round(in->opc == XO_ROUND_F16 ? TS_F16 : TS_BF16, y, (size_t)n);
            break;
        }
    }
}

/* Items lo..hi-1 (blocks of a row) of the program. */
static void prog_items(const xv_prog *pr, void *const *in, float *y, int64_t lo, int64_t hi)
{
    const int64_t len = pr->len, nchunk = (len + XV_BLK - 1) / XV_BLK;
    for (int64_t it = lo; it < hi; it++) {
        float splat[XV_MAXIN][XV_BLK], own[XV_BLK];
        const float *src[XV_MAXIN];
        int64_t row = it / nchunk, start = (it % nchunk) * XV_BLK, n = len - start < XV_BLK ? len - start : XV_BLK;
        int64_t off[XV_MAXIN] = {0}, r = row;
        for (int d = pr->rank - 2; d >= 0; d--) { /* row index -> each input's offset */
            int64_t i = r % pr->dims[d];
            r /= pr->dims[d];
            for (int j = 0; j < pr->next; j++) off[j] += i * pr->stride[j][d];
        }
        for (int j = 0; j < pr->next; j++) {
            const float *x = (const float *)in[j] + off[j];
            if (pr->stride[j][pr->rank - 1]) {
                src[j] = x + start;
            } else { /* one value along the row: spread it over the block */
                float v = *x;
                for (int64_t i = 0; i < n; i++) splat[j][i] = v;
                src[j] = splat[j];
            }
        }
        if (pr->inplace) { /* y is that input's storage: later instructions may read it after the first wrote y */
            memcpy(own, src[pr->inplace - 1], (size_t)n * sizeof *own);
            src[pr->inplace - 1] = own;
        }
        run_block(pr, y + row * len + start, src, n);
    }
}

void xv_prog_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const xv_prog *pr = s->state;
    const int64_t items = pr->nrows * ((pr->len + XV_BLK - 1) / XV_BLK);
    float *y = out[0];
    (void)scratch;
    /* no parallel region at all below the threshold: libgomp's serial
     * region (an `if` clause that is false) still costs about a
     * microsecond, as much as a small step's whole work */
    if (pr->numel < XV_PAR_MIN || pr->threads < 2) {
        prog_items(pr, in, y, 0, items);
        return;
    }
#pragma omp parallel num_threads(pr->threads)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        prog_items(pr, in, y, items * t / nt, items * (t + 1) / nt);
    }
}
