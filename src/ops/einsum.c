/* Einsum (opset 12): sums of products named by an equation such as
 * "bij,bjk->bik", with '...' for broadcast leading dimensions, repeated
 * labels in one term for diagonals, and the implicit output (the labels
 * used once, alphabetically, after the '...' dimensions) when there is no
 * "->".  The reference kernel visits every combination of label values,
 * multiplying and adding in the number domain: exact for polynomials. */
#include <stdio.h>
#include <string.h>
#include "ops/elementwise.h"

#define EQ_MAX 128
#define TERMS_MAX 8
#define LABELS 64 /* 52 letters, then the '...' dimensions */
#define ELL0 52

typedef struct einsum_attrs {
    char equation[EQ_MAX];
} einsum_attrs;

typedef struct term {
    int n;                   /* labels, '...' expanded */
    int label[TS_MAX_RANK];
    int explicit_n;          /* letters written */
    bool ellipsis;
    int ell_at;              /* position of '...' among the letters */
    int lab[TS_MAX_RANK];    /* letters as written */
} term;

typedef struct plan_ {
    int nin;
    term in[TERMS_MAX];
    term out;
    int64_t size[LABELS];
    int order[LABELS], nlabels, nout; /* output labels first, then the summed ones */
} eplan;

static int label_of(char ch)
{
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* Parses one term up to a ',' or '-' or the end; returns the rest or NULL. */
static const char *parse_term(const char *s, term *t)
{
    memset(t, 0, sizeof *t);
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == ' ') continue;
        if (!strncmp(s, "...", 3)) {
            if (t->ellipsis) return NULL;
            t->ellipsis = true;
            t->ell_at = t->explicit_n;
            s += 2;
            continue;
        }
        int l = label_of(*s);
        if (l < 0 || t->explicit_n >= TS_MAX_RANK) return NULL;
        t->lab[t->explicit_n++] = l;
    }
    return s;
}

/* Expands a term's '...' to ell dimensions (labels ELL0 + the last ell of
 * ell_rank, right-aligned). */
static void expand(term *t, int ell, int ell_rank)
{
    t->n = 0;
    for (int i = 0; i <= t->explicit_n; i++) {
        if (t->ellipsis && i == t->ell_at)
            for (int e = 0; e < ell; e++) t->label[t->n++] = ELL0 + ell_rank - ell + e;
        if (i < t->explicit_n) t->label[t->n++] = t->lab[i];
    }
}

/* Builds the plan for the inputs' shapes; message in why on failure. */
static bool make_plan(const char *eq, int nin, const ts_shape *const *shapes, eplan *p, char *why, size_t nwhy)
{
    memset(p, 0, sizeof *p);
    const char *s = eq;
    int nt = 0;
    for (;;) {
        if (nt >= TERMS_MAX || !(s = parse_term(s, &p->in[nt]))) return snprintf(why, nwhy, "cannot parse '%s'", eq), false;
        nt++;
        if (*s != ',') break;
        s++;
    }
    if (nt != nin) return snprintf(why, nwhy, "equation '%s' has %d terms for %d inputs", eq, nt, nin), false;
    bool has_out = *s == '-';
    if (has_out && (s[1] != '>' || !parse_term(s + 2, &p->out)))
        return snprintf(why, nwhy, "cannot parse the output of '%s'", eq), false;
    int ell_rank = 0;
    for (int i = 0; i < nin; i++) {
        term *t = &p->in[i];
        int ell = shapes[i]->rank - t->explicit_n;
        if (ell < 0 || (ell > 0 && !t->ellipsis))
            return snprintf(why, nwhy, "term %d of '%s' does not match rank %d", i, eq, shapes[i]->rank), false;
        if (ell > ell_rank) ell_rank = ell;
    }
    for (int l = 0; l < LABELS; l++) p->size[l] = -1;
    int uses[LABELS] = {0};
    for (int i = 0; i < nin; i++) {
        term *t = &p->in[i];
        int ell = shapes[i]->rank - t->explicit_n;
        expand(t, ell, ell_rank);
        for (int d = 0; d < t->n; d++) {
            int l = t->label[d];
            int64_t sz = shapes[i]->dims[d];
            uses[l]++;
            if (l >= ELL0 && sz == 1) {
                if (p->size[l] < 0) p->size[l] = 1;
                continue;
            }
            if (p->size[l] >= 0 && p->size[l] != sz && !(l >= ELL0 && p->size[l] == 1))
                return snprintf(why, nwhy, "label sizes %lld and %lld differ", (long long)p->size[l], (long long)sz), false;
            p->size[l] = sz;
        }
    }
    if (has_out) {
        expand(&p->out, p->out.ellipsis ? ell_rank : 0, ell_rank);
        if (!p->out.ellipsis && ell_rank)
            for (int l = ELL0; l < ELL0 + ell_rank; l++)
                if (p->size[l] > 1) return snprintf(why, nwhy, "'...' dimensions must appear in the output"), false;
    } else { /* implicit: '...' then the letters used once, alphabetically */
        term *o = &p->out;
        for (int e = 0; e < ell_rank; e++) o->label[o->n++] = ELL0 + e;
        for (int l = 0; l < ELL0; l++)
            if (uses[l] == 1) {
                if (o->n >= TS_MAX_RANK) return snprintf(why, nwhy, "output rank too large"), false;
                o->label[o->n++] = l;
            }
    }
    bool in_out[LABELS] = {0};
    for (int d = 0; d < p->out.n; d++) {
        int l = p->out.label[d];
        if (p->size[l] < 0) return snprintf(why, nwhy, "output label '%c' is in no input", l < 26 ? 'a' + l : 'A' + l - 26), false;
        if (in_out[l]) return snprintf(why, nwhy, "output repeats a label"), false;
        in_out[l] = true;
        p->order[p->nlabels++] = l;
    }
    p->nout = p->nlabels;
    for (int l = 0; l < LABELS; l++)
        if (p->size[l] >= 0 && !in_out[l]) p->order[p->nlabels++] = l;
    p->nin = nin;
    return true;
}

static ts_status einsum_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    einsum_attrs *p = attrs;
    (void)opset;
    if (!ts_attr_find(a, na, "equation")) return ts_error_set(err, TS_ERR_INVALID, "attribute 'equation' is required");
    return ts_attr_get_string(a, na, "equation", "", p->equation, sizeof p->equation, err);
}

static int einsum_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_string("equation", ((const einsum_attrs *)attrs)->equation);
    return 1;
}

static ts_status einsum_infer(ts_infer_ctx *c)
{
    const einsum_attrs *a = c->attrs;
    const ts_shape *shapes[TERMS_MAX];
    eplan p;
    char why[200];
    if (c->nin > TERMS_MAX) return ts_infer_fail(c, "more than %d inputs", TERMS_MAX);
    for (int i = 0; i < c->nin; i++) {
        shapes[i] = &c->in[i]->shape;
        if (c->in[i]->dtype != c->in[0]->dtype) return ts_infer_fail(c, "inputs have different types");
    }
    if (!make_plan(a->equation, c->nin, shapes, &p, why, sizeof why)) return ts_infer_fail(c, "%s", why);
    ts_shape o = {.rank = p.out.n};
    for (int d = 0; d < o.rank; d++) o.dims[d] = p.size[p.out.label[d]];
    c->out_dtype[0] = c->in[0]->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status einsum_kernel(ts_kernel_ctx *k)
{
    const einsum_attrs *a = k->attrs;
    const ts_shape *shapes[TERMS_MAX];
    const ts_num *num = k->num;
    eplan p;
    char why[200];
    for (int i = 0; i < k->nin; i++) shapes[i] = &k->in[i]->shape;
    if (!make_plan(a->equation, k->nin, shapes, &p, why, sizeof why)) return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    /* stride[i][l]: step in input i for label l (0 where broadcast) */
    int64_t stride[TERMS_MAX][LABELS] = {{0}}, val[LABELS] = {0};
    for (int i = 0; i < p.nin; i++) {
        int64_t st[TS_MAX_RANK];
        ts_shape_strides(shapes[i], st);
        for (int d = 0; d < p.in[i].n; d++)
            if (shapes[i]->dims[d] != 1) stride[i][p.in[i].label[d]] += st[d];
    }
    bool ints = !(k->in[0]->dtype == num->storage);
    ts_tensor *y = k->out[0];
    int64_t ny = ts_tensor_numel(y), nsum = 1;
    for (int j = p.nout; j < p.nlabels; j++) nsum *= p.size[p.order[j]];
    for (int64_t o = 0; o < ny; o++) {
        ts_scalar acc, prod;
        int64_t iacc = 0;
        num->zero(&acc);
        for (int64_t s = 0; s < nsum; s++) {
            int64_t rem = s;
            for (int j = p.nlabels - 1; j >= p.nout; j--) {
                val[p.order[j]] = rem % p.size[p.order[j]];
                rem /= p.size[p.order[j]];
            }
            int64_t iprod = 1;
            num->one(&prod);
            for (int i = 0; i < p.nin; i++) {
                int64_t off = 0;
                for (int j = 0; j < p.nlabels; j++) off += val[p.order[j]] * stride[i][p.order[j]];
                if (ints) iprod = (int64_t)((uint64_t)iprod * (uint64_t)ts_tensor_get_i64(k->in[i], off));
                else num->mul(&prod, &prod, ts_num_cat(num, k->in[i]->data, off));
            }
            if (ints) iacc = (int64_t)((uint64_t)iacc + (uint64_t)iprod);
            else num->add(&acc, &acc, &prod);
        }
        if (ints) el_set_i64(y, o, iacc);
        else memcpy(ts_num_at(num, y->data, o), &acc, num->size);
        /* next output position: odometer over the output labels */
        for (int j = p.nout - 1; j >= 0; j--) {
            if (++val[p.order[j]] < p.size[p.order[j]]) break;
            val[p.order[j]] = 0;
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_einsum = {.opset_min = 12, 
    .name = "Einsum", .attr_size = sizeof(einsum_attrs), .min_inputs = 1, .max_inputs = TERMS_MAX, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .parse = einsum_parse, .emit = einsum_emit, .infer = einsum_infer,
    .kernel = einsum_kernel,
};
