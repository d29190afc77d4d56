/* PET (OSDI'21, docs/pet.md): partially equivalent transformations of
 * multi-linear subprograms, checked box by box in F_p and corrected where
 * they differ.  This folder owns the pieces, each in a file named after its
 * concept:
 *
 *   mltp.c     splitting a graph into multi-linear subprograms (op
 *              descriptors' linear_inputs), and a degree bound per program
 *   program.c  standalone programs: one subprogram lifted out of a graph
 *              with its weights as inputs, small builders, splicing back
 *   box.c      split points propagated forward through operators (§5.2),
 *              the output grid of two programs
 *   check.c    Theorem 1 (m+1 positions per box) x Theorem 2 (t random
 *              inputs uniform in F_p) through the interpreter's mod-p domain
 *   mutant.c   Algorithm 1: depth-first enumeration of mutants over PET's
 *              operators, ranked by predicted cost
 *   commute.c  mutants of a two-operator subset (an AveragePool and a
 *              pointwise Conv): the operators in every order, the bias moved
 *   correct.c  a correction per failing box (the original recomputed on a
 *              slab), stitched with Slice/Concat, re-checked exact
 *   layout.c   post-optimization: inverse layout chains around an
 *              element-wise operator removed
 *   source_pet.c  the `pet` source of the optimize pipeline (src/opt/)
 *
 * A *program* is a ts_graph of its own whose inputs are the subprogram's
 * inputs: activations and the weights read in linear slots (PET tests the
 * equivalence for all weights, not just the model's: the mutant may
 * reorganize a weight, which the post-optimization then precomputes). */
#ifndef TS_PET_PET_H
#define TS_PET_PET_H

#include "ir/ir.h"

/* ------------------------------------------------------------ mltp.c */

/* Node n is multi-linear in PET's sense: it has a mod-p kernel, and every
 * float input it reads is either in a linear slot of its descriptor or a
 * constant in a coefficient slot (a Reshape's shape, a Pad's pads). */
bool ts_pet_node_linear(const ts_graph *g, int n);

typedef struct ts_pet_sub {
    int nnodes, *nodes;     /* topological order */
    int ninputs, *inputs;   /* values read from outside: activations, and weights in linear slots */
    int noutputs, *outputs; /* values used outside the subprogram or graph outputs */
    int degree;             /* bound on each output element's polynomial degree (Theorem 2's n) */
} ts_pet_sub;

typedef struct ts_pet_split {
    int nsubs;
    ts_pet_sub *subs;
    int *sub_of; /* per node: its subprogram, -1 for a non-linear node (the split points) */
} ts_pet_split;

/* The connected components of multi-linear nodes (edges: a value produced
 * by one and read by the other); non-linear nodes separate them. */
ts_status ts_pet_split_graph(const ts_graph *g, ts_pet_split *out, ts_error *err);
void ts_pet_split_free(ts_pet_split *s);
/* Degree bound of a standalone program's outputs: inputs have degree 1,
 * a node's output the sum of its linear inputs' degrees. */
int ts_pet_degree(const ts_graph *prog);

/* --------------------------------------------------------- program.c */

/* Program of node n of g alone: inputs in the order of n's inputs that
 * are activations or weights in linear slots (map[k] = value id in g of
 * program input k, nmap of them); coefficient constants copied. */
ts_graph *ts_pet_program_of_node(const ts_graph *g, int n, int *map, int *nmap, ts_error *err);

/* Builders on a program (or a whole graph); each returns the output value
 * id or -1 with err set.  Node names are unique in g. */
int ts_pet_reshape(ts_graph *g, int x, const int64_t *dims, int rank, ts_error *err);
int ts_pet_transpose(ts_graph *g, int x, const int64_t *perm, int rank, ts_error *err);
int ts_pet_slice(ts_graph *g, int x, int axis, int64_t lo, int64_t hi, ts_error *err);
int ts_pet_concat(ts_graph *g, const int *xs, int n, int axis, ts_error *err);
int ts_pet_pad(ts_graph *g, int x, const int64_t *pads, ts_error *err); /* 2*rank, zeros */
int ts_pet_binary(ts_graph *g, const char *op, int a, int b, ts_error *err); /* "Add", "Mul", ... */
/* A node of the same operator as node `like` of graph `from`, with the
 * typed attribute struct attrs (NULL: like's own) on the given inputs. */
int ts_pet_node_like(ts_graph *g, const ts_graph *from, int like, const void *attrs, const int *ins, int nin,
                     ts_error *err);

/* Replaces node n of g by program p: p's input k reads g's value map[k],
 * and users of n's output read p's output instead.  Node n is left dead
 * (call ts_graph_compact).  Returns p's output value in g or -1. */
int ts_pet_splice(ts_graph *g, int n, const ts_graph *p, const int *map, ts_error *err);

/* ------------------------------------------------------------- box.c */

/* Split points of one tensor: per dimension a sorted set of positions in
 * (0, dim) where a new box starts.  A box is a cell of the grid. */
typedef struct ts_pet_points {
    int rank;
    int n[TS_MAX_RANK];
    int cap[TS_MAX_RANK];
    int64_t *p[TS_MAX_RANK];
} ts_pet_points;

#define TS_PET_MAX_POINTS 4096 /* per dimension: beyond, box analysis gives up on the program */

bool ts_pet_points_add(ts_pet_points *s, int dim, int64_t x, int64_t len);
void ts_pet_points_free(ts_pet_points *s);
/* Forward propagation through every node of prog (inputs: no split
 * points); *out gets prog->nvalues entries (free with ts_pet_points_free_all).
 * TS_ERR_UNSUPPORTED for an operator it has no rule for. */
ts_status ts_pet_propagate(const ts_graph *prog, ts_pet_points **out, ts_error *err);
void ts_pet_points_free_all(ts_pet_points *v, int n);

typedef struct ts_pet_box {
    int64_t lo[TS_MAX_RANK], hi[TS_MAX_RANK];
} ts_pet_box;

/* The boxes of the grid merged from a and b (the same tensor shape):
 * *boxes malloc'd, *n of them; false past max boxes. */
bool ts_pet_grid(const ts_shape *shape, const ts_pet_points *a, const ts_pet_points *b, int max, ts_pet_box **boxes,
                 int *n);

/* ----------------------------------------------------------- check.c */

typedef struct ts_pet_verdict {
    int nboxes;
    ts_pet_box *boxes;
    bool *ok;       /* per box: equal at its m+1 positions in every test */
    int nfail;
    int positions;  /* positions compared per test, over all boxes */
    int degree;     /* Theorem 2's n: degree bound of the difference */
    double error;   /* (degree/p)^tests: a wrong box passing */
} ts_pet_verdict;

/* Checks programs p0 and p1 (same inputs, one output each of one shape):
 * boxes of the merged grid, Theorem 1's positions in each, `tests` random
 * inputs uniform in F_p (seeded).  TS_ERR_UNSUPPORTED when box analysis
 * has no rule for one of their operators. */
ts_status ts_pet_check(const ts_graph *p0, const ts_graph *p1, int tests, uint64_t seed, ts_pet_verdict *v,
                       ts_error *err);
void ts_pet_verdict_free(ts_pet_verdict *v);
/* Every output position of p0 and p1 equal on `tests` random F_p inputs
 * (no theorem: the exhaustive comparison, for the corrected program). */
ts_status ts_pet_equal_modp(const ts_graph *p0, const ts_graph *p1, int tests, uint64_t seed, bool *equal,
                            ts_error *err);
/* Largest |a-b| / (1e-4 max(1,max|a|) + 1e-3 |a|) of the f32 reference
 * runs of p0 and p1 on random inputs in [-1, 1]. */
ts_status ts_pet_float_error(const ts_graph *p0, const ts_graph *p1, uint64_t seed, double *worst, ts_error *err);

/* ---------------------------------------------------------- mutant.c */

typedef struct ts_pet_mutant {
    ts_graph *prog;  /* over the original program's inputs */
    char what[64];   /* what it does, for the report: "pet:conv-dilated-phase" */
    double cost;     /* predicted, before corrections */
    int variant;     /* which instantiation of the compute operator it uses */
} ts_pet_mutant;

typedef struct ts_pet_gen_opts {
    int depth;   /* operators per mutant (PET: 4) */
    int keep;    /* top K by predicted cost */
    void *db;    /* ts_costdb * to rank by (NULL: the roofline estimate) */
} ts_pet_gen_opts;

/* Algorithm 1 over the program p0 (one compute node): every program of up
 * to depth operators from PET's set whose output has p0's shape and which
 * reads every input, the top `keep` by predicted cost.  *out malloc'd. */
ts_status ts_pet_mutants(const ts_graph *p0, const ts_pet_gen_opts *o, ts_pet_mutant **out, int *n, ts_error *err);
void ts_pet_mutants_free(ts_pet_mutant *m, int n);
/* Appends a copy of p with output cur, as mutant `what`, to the list
 * (*list, *n of *cap) unless the list or p0 (p0_hash) holds the same graph
 * already; false: out of memory (err may be set). */
bool ts_pet_mutant_push(ts_pet_mutant **list, int *n, int *cap, uint64_t p0_hash, const ts_graph *p, int cur,
                        const char *what, int variant, ts_error *err);
/* The roofline estimate mutants are ranked by (ms). */
double ts_pet_predict(const ts_graph *p);

/* --------------------------------------------------------- commute.c */

/* Node conv of g is a pointwise Conv (1x1, stride 1, no pad, one group)
 * paired with an AveragePool (no ceil mode, no auto_pad) of the same
 * multi-linear subprogram (sub_of: the splitter's per-node subprogram;
 * NULL: not checked): the pool before it, its output read by the conv
 * alone (Inception's pool branch), or after it, reading the conv's output
 * alone, maybe through a Pad of zeros (*between gets that Pad, else -1;
 * DenseNet's transitions).  Returns the pool's node, else -1. */
int ts_pet_pool_conv_pair(const ts_graph *g, const int *sub_of, int conv, int *between);
/* The program of that pair of g, in g's order, over inputs x (the first
 * node's data input), W and B (B when the conv has one), with C input and
 * F output channels (<= 0: g's); map[k] = the value of g that program
 * input k stands for, *nmap of them. */
ts_graph *ts_pet_pair_program(const ts_graph *g, int pool, int conv, int64_t C, int64_t F, int *map, int *nmap,
                              ts_error *err);
/* Mutants of such a two-operator program: every sequence of the pool, the
 * conv with or without its bias and an Add of the bias that reads each
 * input once and has the output's shape (the original excluded).  *out
 * malloc'd, unranked. */
ts_status ts_pet_commute_mutants(const ts_graph *p0, ts_pet_mutant **out, int *n, ts_error *err);

/* ---------------------------------------------------------- layout.c */

/* Post-optimization: around each one-input element-wise node, a chain of
 * Reshape/Transpose before it and one after it whose composition is the
 * identity are both removed (the node then reads the first chain's
 * source).  Returns how many pairs were removed (graph compacted), or -1
 * out of memory. */
int ts_pet_cancel_layouts(ts_graph *g, ts_error *err);
/* Value `to` of g is `from` moved by a chain of Reshape/Transpose nodes
 * that composes to the identity (same shape, every element in place). */
bool ts_pet_chain_is_identity(const ts_graph *g, int from, int to);

/* --------------------------------------------------------- correct.c */

/* For p0 (one window node: Conv, AveragePool) and its mutant p1 with the
 * verdict v: the corrected mutant, where the boxes that failed are
 * recomputed by p0's operator on a slab along the cheapest axis and
 * stitched in with Slice/Concat.  NULL (no error) when the failing boxes
 * would make the correction cost more than `max_frac` of the output. */
ts_graph *ts_pet_correct(const ts_graph *p0, const ts_graph *p1, const ts_pet_verdict *v, double max_frac,
                         int *ncorr, ts_error *err);

#endif
