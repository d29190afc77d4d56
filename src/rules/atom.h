/* Contexts of the per-atom functions of the atom table (rule.h,
 * ts_ropinfo): what an atom's match function may ask of the matcher
 * (match.c), and what its build function builds into (build.c).
 *
 * An atom reads as ONNX in one of two ways, chosen by ts_rbuild:
 * - in model graphs (the matcher and applier): a rank-3 tensor is a batch
 *   of row blocks read as the matrix (B*S) x K, TASO axis a at ONNX axis
 *   a + 1; a scalar is any one-element tensor; a concat of two constants
 *   is made at once;
 * - in the axioms' theory (taso/axiom_check.c): axes as written, a scalar
 *   has rank 0, matmul takes rank-2 operands.
 * SAME pads are (k-1)/2 on both sides, odd kernels only, in both readings:
 * the axioms are true for that SAME and some are false for TensorFlow's
 * (docs/taso.md, "Semantics the axioms fix"); tf_same exists only for the
 * axiom checker's --tf-same, which shows those failures. */
#ifndef TS_RULES_ATOM_H
#define TS_RULES_ATOM_H

#include "ops/list.h"
#include "rules/apply.h"

/* ---- matching (match.c) */

/* A match of one rule in progress. */
struct ts_rmatch {
    const ts_match_index *ix;
    const ts_graph *g;
    const ts_rule *r;
    ts_match m;
};
typedef struct ts_rmatch ts_rmatch;

/* Whether subterm e (an argument of the atom being matched) matches value v;
 * binds variables, records matched nodes. */
bool ts_rmatch_arg(ts_rmatch *s, const ts_rexpr *e, int v);
/* Records node n as matched; false when the match is too large. */
bool ts_rmatch_node(ts_rmatch *s, int n);
/* The live node of descriptor op producing v, or -1. */
int ts_rmatch_producer(const ts_rmatch *s, int v, const ts_op_desc *op);
/* Whether value v is used by nothing but node n (once, not a graph output). */
bool ts_rmatch_only_use(const ts_rmatch *s, int v, int n);
/* Binds the constant bias value (-1: none) of the conv/matmul whose weight
 * is e: e must then be a variable, with one bias for all its uses. */
bool ts_rmatch_bias(ts_rmatch *s, const ts_rexpr *e, int bias);
/* Shape of the value a subterm of the lhs matched (ts_rshape_fn over s). */
const ts_shape *ts_rmatch_shape_of(void *s, const ts_rexpr *e);

/* ---- building (build.c) */

#define TS_RBUILD_MAX_SPLITS 64

struct ts_rbuild {
    ts_graph *g;
    /* Node names: PREFIX_Op_K unique in g (ONNX Runtime requires unique
     * names); NULL: the builder's default. */
    const char *prefix;
    bool theory;     /* the axioms' reading (see above), else the models' */
    bool tf_same;    /* SAME pads as TensorFlow splits them (the odd pixel after) */
    ts_const_cache *cc; /* models: a concat of two constants is made here, through this memo (may be NULL) */
    /* Set by the caller before each build call: */
    int bias;         /* conv, matmul: constant bias value added to the result, -1 none */
    int64_t split_at; /* split0, split1: size of the first part */
    /* Split nodes made so far: split0 and split1 of one value share a node. */
    int nsplit;
    struct {
        int in, axis;
        int64_t at;
        int out[2];
    } split[TS_RBUILD_MAX_SPLITS];
    ts_error err; /* why the last build returned -1 (a shape that does not fit is not an error) */
};
typedef struct ts_rbuild ts_rbuild;

/* A node of descriptor op with nout outputs (written to outs); the node
 * index or -1. */
int ts_rbuild_node(ts_rbuild *b, const ts_op_desc *op, const int *ins, int nin, const ts_attr *a, int na, int nout,
                   int *outs);
/* The same with one output: its value or -1. */
int ts_rbuild_node1(ts_rbuild *b, const ts_op_desc *op, const int *ins, int nin, const ts_attr *a, int na);
/* A new constant value holding t (consumes the caller's reference); -1 on error. */
int ts_rbuild_const(ts_rbuild *b, ts_tensor *t);
/* ONNX axis of TASO axis a on a tensor of this rank. */
int ts_rbuild_axis(const ts_rbuild *b, int rank, int a);
/* ONNX pads [h_begin, w_begin, h_end, w_end] of a window (kernel k, stride
 * s) over NCHW input x; false when SAME is undefined (an even kernel). */
bool ts_rbuild_pads(const ts_rbuild *b, const ts_shape *x, const int64_t *k, int s, ts_rpad pad, int64_t pads[4]);

/* TensorFlow's SAME pads of a window over NCHW input x: ceil(in / s)
 * outputs, the odd pixel of padding after (auto_pad SAME_UPPER). */
void ts_same_pads(const ts_shape *x, const int64_t *k, int64_t s, int64_t *pb, int64_t *pe);

/* ---- the per-atom functions the table (atom.c) points to, by family */

/* atom_ew.c: ewadd, ewmul, smul, relu, transpose */
bool ts_atom_ew_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_ew_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int64_t ts_atom_ew_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);
bool ts_atom_smul_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_smul_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
bool ts_atom_relu_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_relu_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
/* split points of atoms that keep TASO axes 0 and 1 of their first argument */
int64_t ts_atom_keep_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);
bool ts_atom_transpose_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_transpose_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int64_t ts_atom_transpose_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);

/* atom_matmul.c */
bool ts_atom_matmul_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_matmul_roots(const ts_rexpr *e, const ts_op_desc **out);
int ts_atom_matmul_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int64_t ts_atom_matmul_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);

/* atom_window.c: conv, poolavg, poolmax */
bool ts_atom_conv_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_conv_roots(const ts_rexpr *e, const ts_op_desc **out);
int ts_atom_conv_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int64_t ts_atom_conv_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);
bool ts_atom_pool_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_pool_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);

/* atom_concat.c: concat, split0, split1 */
bool ts_atom_concat_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_concat_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int64_t ts_atom_concat_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);
bool ts_atom_split_match(ts_rmatch *s, const ts_rexpr *e, int v);
int ts_atom_split_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);

/* atom_const.c: enlarge and the constants */
int ts_atom_enlarge_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_crop_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
bool ts_atom_cpool_fill(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);
bool ts_atom_iconv_fill(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);
bool ts_atom_imatmul_fill(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);
bool ts_atom_iewmul_fill(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);

/* atom_math.c: numbers, ONNX arithmetic, reductions, fusions */
int ts_atom_num_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
bool ts_atom_num_fill(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);
int ts_atom_arith_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_reducemean_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_gelu_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_layernorm_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_broadcast_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
int ts_atom_gather_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);

static inline const ts_shape *ts_rvshape(const ts_graph *g, int v) { return &g->values[v].shape; }

#endif
