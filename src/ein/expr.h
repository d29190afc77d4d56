/* EinNet's tensor-algebra expressions (paper section 3, docs/einnet.md).
 *
 * An expression is a tree of *scopes*.  A scope is
 *
 *     L[t0, t1, ...]  Sum[s0, s1, ...]  body
 *
 * where the traversal iterators t* (each with a range [lo, hi)) are the
 * output dimensions in layout order, the summation iterators s* are summed
 * over (their order is irrelevant), and the body is scalar arithmetic over
 * *reads*: an input tensor or another scope indexed by one index expression
 * per dimension.  A read outside the tensor (or outside a scope's
 * traversal ranges) is 0: that is how padding is written.  A scope read by
 * another is instantiated as a tensor of the shape of its ranges.
 *
 * Index expressions are affine in the iterators, (sum co*it + c), optionally
 * wrapped as ((affine) / div) % mod: the derivation rules and the matcher
 * work on the affine part; only evaluation and fingerprints read div/mod.
 *
 * Storage is flat and fixed-size (indices, never pointers), so a derivation
 * copies an expression with one assignment and a search holds thousands:
 * what a rule makes unreachable is dropped by ts_ein_gc.  Scope 0 is the
 * root; its traversal ranges start at 0 and its result is reshaped to
 * out_shape (the same element count): a traversal over more iterators than
 * the output has dimensions is a merged traversal (grouped conv writes
 * L[n, g, f', h, w] as the tensor [N, G*F', H, W]). */
#ifndef TS_EIN_EXPR_H
#define TS_EIN_EXPR_H

#include "ops/num.h"
#include "tsopt.h"

#define EIN_MAX_ITERS 48
#define EIN_MAX_SCOPES 8
#define EIN_MAX_NODES 64
#define EIN_MAX_IDX 96
#define EIN_MAX_TERMS 6
#define EIN_MAX_INPUTS 4
#define EIN_MAX_TRAV 12
#define EIN_MAX_SUM 8

typedef struct ts_ein_idx {
    int8_t n;                      /* terms */
    int16_t it[EIN_MAX_TERMS];     /* iterator ids */
    int64_t co[EIN_MAX_TERMS];     /* their coefficients (never 0) */
    int64_t c;                     /* constant */
    int64_t div;                   /* >= 1 (1: none) */
    int64_t mod;                   /* 0: none */
} ts_ein_idx;

typedef enum ts_ein_op {
    EIN_READ, /* src, rank indices */
    EIN_NUM,  /* constant num */
    EIN_ADD,
    EIN_SUB,
    EIN_MUL,
    EIN_DIV,
    EIN_NEG,
    EIN_RELU, /* float only */
} ts_ein_op;

typedef struct ts_ein_node {
    uint8_t op;
    int8_t rank;  /* READ */
    int16_t a, b; /* operands (node ids) */
    int16_t src;  /* READ: input i >= 0, scope s as -(s+1) */
    int16_t idx;  /* READ: first of rank entries in idx[] */
    double num;   /* NUM */
} ts_ein_node;

typedef struct ts_ein_iter {
    int64_t lo, hi;
} ts_ein_iter;

typedef struct ts_ein_scope {
    int8_t ntrav, nsum;
    int16_t trav[EIN_MAX_TRAV];
    int16_t sum[EIN_MAX_SUM];
    int16_t body;
} ts_ein_scope;

typedef struct ts_ein {
    int niter, nscope, nnode, nidx, ninputs;
    ts_ein_iter iter[EIN_MAX_ITERS];
    ts_ein_scope scope[EIN_MAX_SCOPES];
    ts_ein_node node[EIN_MAX_NODES];
    ts_ein_idx idx[EIN_MAX_IDX];
    ts_shape in_shape[EIN_MAX_INPUTS];
    ts_shape out_shape;
} ts_ein;

static inline int ts_ein_src_scope(int src) { return -src - 1; }

/* ----------------------------------------------------------- building */

/* Each returns the new id, or -1 when the fixed storage is full. */
int ts_ein_iter_new(ts_ein *e, int64_t lo, int64_t hi);
int ts_ein_scope_new(ts_ein *e);
int ts_ein_num(ts_ein *e, double v);
int ts_ein_bin(ts_ein *e, ts_ein_op op, int a, int b); /* ADD SUB MUL DIV; -1 operand -> -1 */
int ts_ein_un(ts_ein *e, ts_ein_op op, int a);         /* NEG RELU */
/* A read of src (input i, or scope s as -(s+1)) at rank indices. */
int ts_ein_read(ts_ein *e, int src, int rank, const ts_ein_idx *ix);

/* Index expressions (values, not stored). */
ts_ein_idx ts_ein_idx_const(int64_t c);
ts_ein_idx ts_ein_idx_it(int it);
/* a + k*b; false when it has too many terms */
bool ts_ein_idx_axpy(ts_ein_idx *a, int64_t k, const ts_ein_idx *b);
/* The coefficient of iterator it in x (0 when absent). */
int64_t ts_ein_idx_coef(const ts_ein_idx *x, int it);
/* x with iterator it replaced by r; false when too many terms or x has
 * div/mod around it (then r must be affine and x is still substituted). */
bool ts_ein_idx_subst(ts_ein_idx *x, int it, const ts_ein_idx *r);
/* Smallest and largest value of the affine part over the iterators' ranges. */
void ts_ein_idx_bounds(const ts_ein *e, const ts_ein_idx *x, int64_t *min, int64_t *max);

/* The shape of what src is: an input's shape or a scope's ranges; a scope
 * of more traversal iterators than a tensor has dimensions as its flat
 * element count (rank 1).  ts_ein_src_dims: the extents, one per index of
 * a read of src (up to EIN_MAX_TRAV); returns their number. */
ts_shape ts_ein_src_shape(const ts_ein *e, int src);
int ts_ein_src_dims(const ts_ein *e, int src, int64_t dims[EIN_MAX_TRAV]);

/* Drops nodes, index entries, iterators and scopes nothing reachable from
 * the root uses, renumbering the rest in depth-first order (so two
 * expressions built differently but equal compare equal byte for byte
 * after gc, up to iterator ranges). */
void ts_ein_gc(ts_ein *e);

/* Writes e in the paper's notation ("L[i0:0..4,...] Sum[...] A0[...]*..."),
 * scopes as {...}; truncated to n. */
void ts_ein_print(const ts_ein *e, char *buf, size_t n);

/* ---------------------------------------------------------- evaluation */

/* Evaluates e on inputs (one per e->ninputs, in the domain's storage, of
 * e->in_shape's shapes) into a new tensor of e->out_shape.  RELU and DIV
 * by a non-invertible value fail in the exact domain. */
ts_status ts_ein_eval(const ts_ein *e, const ts_num *num, const ts_tensor *const *in, ts_tensor **out,
                      ts_error *err);

/* Points the evaluation of e visits (traversal x summation, per scope). */
int64_t ts_ein_points(const ts_ein *e);
/* Whether a and b have one value: both evaluated exactly mod p on one set
 * of random inputs (a wrong derivation survives with probability about
 * 1/p per output element).  1 equal, 0 differ, 2 not checked (more than
 * max_points to evaluate), -1 error (err set). */
int ts_ein_check_equal(const ts_ein *a, const ts_ein *b, int64_t max_points, ts_error *err);
/* The same against one a for many b: a's inputs and value made once. */
typedef struct ts_ein_checker ts_ein_checker;
ts_ein_checker *ts_ein_checker_new(const ts_ein *a, int64_t max_points, ts_error *err);
int ts_ein_checker_equal(ts_ein_checker *c, const ts_ein *b, ts_error *err);
void ts_ein_checker_free(ts_ein_checker *c);

/* ---------------------------------------------------------------- text */

/* e as one line of text (its flat storage, src/einnet/text.c): the
 * attribute of an eOperator node.  Writes at most n bytes (NUL included)
 * and returns the length the whole text needs, like snprintf. */
size_t ts_ein_to_text(const ts_ein *e, char *buf, size_t n);
/* Reads what ts_ein_to_text wrote, validating every id, count and size;
 * TS_ERR_PARSE with the field at fault otherwise. */
ts_status ts_ein_from_text(const char *text, ts_ein *e, ts_error *err);

/* --------------------------------------------------------- translation */

/* The expression computed by output 0 of node n of g; its inputs are the
 * node's inputs, in order (inputs[k] = the value id of e input k).
 * TS_ERR_UNSUPPORTED (with why) for an operator or attribute set that has
 * no translation. */
ts_status ts_ein_from_node(const ts_graph *g, int n, ts_ein *e, int *inputs, ts_error *err);

/* -------------------------------------------------------- fingerprints */

/* Structural hash invariant to summation order, commutative operand
 * order (+, *), iterator numbering and scope numbering (tensor renaming);
 * not to traversal order (the layout) nor to input numbering. */
uint64_t ts_ein_fingerprint(const ts_ein *e);

#endif
