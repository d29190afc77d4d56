/* TASO substitution generator (paper section 3.1 and 4; docs/taso.md).
 *
 * Four parts:
 *   gen_eval.c   a small evaluator for TASO's operators on concrete tensors,
 *                in exact integers mod p = 2^31-1 (fingerprints) and in
 *                double (the float test).  It works on TASO's operators
 *                directly rather than through ONNX graphs: a 4-operator
 *                enumeration evaluates tens of millions of graphs, and
 *                building an IR graph per step would cost more than the
 *                arithmetic itself.  Arithmetic mod p uses the same p as the
 *                reference interpreter's TS_DOMAIN_MODP.  One evaluator per
 *                atom, in a table indexed like the atom table
 *                (rules/atom.c); constants take the table's values.
 *   gen_enum.c   depth-first enumeration of graphs and their fingerprints.
 *   gen_pairs.c  candidate pairs from the graph records (second shape set,
 *                TASO's syntactic rejections, float test).
 *   gen_prune.c  trees for the candidates, pruning, rules. */
#ifndef TS_TASO_GEN_H
#define TS_TASO_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "rules/rule.h"
#include "util/hash.h"

#define GEN_P 2147483647u /* 2^31-1, as TS_DOMAIN_MODP */
/* Storage per tensor: room for the second (larger) shape set; each shape
 * set has its own limit on a result's size (gen_shapes.max_elems). */
#define GEN_MAX_ELEMS 16384
#define GEN_SPLIT_BYTES 12 /* serialized split tree per dimension */
/* 5: reachable with a restricted operator set (--ops), spread over
 * processes with mpirun (docs/distributed.md); makes a record 32 bytes */
#define GEN_MAX_OPS 5

/* Shapes of the enumeration's tensors (after TASO's generator: activations
 * N x C x H x W, matrices, kernels); the constants take these shapes. */
#define GEN_N 2
#define GEN_C 3
#define GEN_HW 5
#define GEN_M 4 /* matrices: x is GEN_N x GEN_M, w is GEN_M x GEN_M */

typedef enum gen_domain { GEN_MODP = 0, GEN_F64 = 1 } gen_domain;

/* A set of concrete sizes for the variable classes and the constants.
 * Set 0 (GEN_N, GEN_C, GEN_HW, GEN_M; 1x1 `q` kernels) is the one the
 * enumeration fingerprints; set 1 is larger and gives every dimension its
 * own size (batch 3, channels 4, images 9x10, matrices 3x5 and 5x5, `q`
 * kernels 1x3), so an equality that holds only because two sizes happen to
 * agree in set 0 (conv same = conv valid for 1x1 kernels, ...) fails there.
 * A pair is a candidate only when it holds in both sets. */
typedef struct gen_shapes {
    int n, c, h, w; /* activations of conv: n x c x h x w */
    int m;          /* matrices: x is n x m (batch n), w is m x m */
    int xn;         /* rows of the `x` matrices */
    int qh, qw;     /* small kernels (enlarged to k's size) */
    int k;          /* the `k` kernels (and enlarge's reference): k x k */
    int max_elems;  /* largest result an operator may produce */
} gen_shapes;
/* Set 3 is the last check of the kept rules, with a 5x5 enlarge reference
 * and 3x3 `q` (gen_eval.c); a rule fails there only where both sides are
 * defined, equally shaped and differ (the verifier's guard). */
#define GEN_NSETS 4
extern const gen_shapes gen_shape_sets[GEN_NSETS];

/* A concrete tensor.  `split` keeps, per dimension, the tree of concat
 * points (TASO's split info) so split0/split1 know where to cut: a node is
 * a byte with the cut position (>0) followed by its left and right trees,
 * a leaf is a 0 byte. */
typedef struct gen_tensor {
    int nd, dim[4], n;
    uint8_t split[4][GEN_SPLIT_BYTES];
    gen_domain dom;
    union {
        uint32_t u[GEN_MAX_ELEMS];
        double f[GEN_MAX_ELEMS];
    } v;
} gen_tensor;

/* Applies one operator; false when the inputs' shapes do not fit it (or
 * the result would be too large).  Split writes two outputs. */
bool gen_apply(ts_rop op, const ts_rparams *p, const gen_tensor *a, const gen_tensor *b,
               gen_tensor *out0, gen_tensor *out1);
/* The same in a given shape set (the constants take its sizes). */
bool gen_apply_in(const gen_shapes *sh, ts_rop op, const ts_rparams *p, const gen_tensor *a,
                  const gen_tensor *b, gen_tensor *out0, gen_tensor *out1);
/* Copies shape, split info and the n values in use (not the whole buffer). */
void gen_tensor_copy(gen_tensor *dst, const gen_tensor *src);
/* Hash of values, shape and split info (mod-p tensors). */
uint64_t gen_tensor_hash(const gen_tensor *t);
bool gen_tensor_close(const gen_tensor *a, const gen_tensor *b, double tol);
void gen_tensor_random(gen_tensor *t, gen_domain dom, int nd, const int *dim, uint64_t *rng);

/* ---- the enumeration's vocabulary ---- */

/* An input variable class: shape and the letter its variables start with. */
typedef struct gen_varclass {
    const char *prefix;
    int nd, dim[4];
    int count;
} gen_varclass;

typedef struct gen_var {
    char name[8];
    int cls;
} gen_var;

/* One operator with its parameters fixed (conv s1 same relu, concat 0...). */
typedef struct gen_variant {
    ts_rop op;
    ts_rparams p;
} gen_variant;

struct gen_graph;
struct gen_stats;

/* Hooks that spread one generation over several processes (the MPI module
 * of the tsopt command, src/dist/dist_gen.c; docs/distributed.md).  The
 * library itself knows nothing of MPI: without hooks it works alone. */
typedef struct gen_dist {
    void *arg;
    /* The next first operator (index into the depth-0 choices) this process
     * enumerates, -1 when all are taken; called under a critical section. */
    long (*claim)(void *arg);
    /* Called with this process's records, sorted: leaves it exactly the
     * records whose fingerprints it owns (from every process), sorted; sums
     * st->graphs over the processes. */
    ts_status (*exchange)(void *arg, struct gen_graph **gs, size_t *ng, struct gen_stats *st, ts_error *err);
    /* Called with this process's candidate pairs (2 records each): leaves
     * the root every process's pairs in a fixed order and the others none;
     * sums the pair counts of st over the processes. */
    ts_status (*gather)(void *arg, struct gen_graph **pairs, size_t *npair, struct gen_stats *st, ts_error *err);
    /* Threads the root runs the stages after the gather with (it works
     * alone then, and the processes on its node wait: it takes their
     * cores); 0: the config's */
    int root_threads;
} gen_dist;

typedef struct gen_config {
    int max_ops;
    int threads;
    uint64_t seed;
    FILE *progress; /* when set, each stage's count and time is printed (and
                       flushed) as it finishes: a long run that is killed
                       still shows how far it got */
    const gen_dist *dist; /* NULL: one process */
    const char *ops;      /* comma-separated atoms to enumerate ("matmul,ewadd"); NULL: all */
    /* A folder where the enumeration keeps each first operator's records
     * as it finishes them, and reads them back instead of enumerating
     * again: a stopped run resumes (gen_enum.c); NULL: none */
    const char *checkpoint;
} gen_config;

/* One enumerated graph: ops in order; input i of op k names a pool entry
 * (variables first, then op outputs in order; split adds two). */
typedef struct gen_graph {
    uint64_t fp;
    /* position in the enumeration (depth-first: graphs next to each other
     * in this order share their first operators, so replays on other
     * inputs reuse the prefix) and the number of operators, packed: a
     * record is 32 bytes (6.5e7 of them at 4 operators) */
    uint32_t seq : 29, nops : 3;
    uint8_t op[GEN_MAX_OPS][3]; /* variant, in0, in1 */
} gen_graph;
/* Order of graph records: fingerprint, then fewer operators, then ops. */
int gen_graph_cmp(const void *a, const void *b);

typedef struct gen_world {
    int nclass;
    const gen_varclass *cls;
    int nvar;
    gen_var var[32];
    int nvariant;
    gen_variant variant[96];
    gen_tensor *var_modp; /* nvar random tensors, mod p (shape set 0) */
    gen_tensor *var_f64;  /* nvar random tensors in [-1,1] (shape set 0) */
    gen_tensor *var2_modp, *var2_f64; /* the same in shape set 1 */
    gen_tensor *var3_modp, *var3_f64; /* and in shape set 2 (the last check) */
    gen_tensor *var4_modp, *var4_f64; /* and in shape set 3 (the guarded last check) */
} gen_world;

void gen_world_init(gen_world *w, uint64_t seed);
/* Keeps only the operators named in ops (atoms as rule files write them,
 * comma-separated; "split" for split0/split1): a smaller vocabulary reaches
 * more operators per graph.  TS_ERR_INVALID naming an unknown one. */
ts_status gen_world_restrict(gen_world *w, const char *ops, ts_error *err);
void gen_world_free(gen_world *w);

/* Counts per stage (Table 3 of the paper) and timings. */
typedef struct gen_stats {
    uint64_t graphs;        /* graphs enumerated (fingerprinted) */
    uint64_t pairs1;        /* graph pairs with equal fingerprints in shape set 0 */
    uint64_t pairs;         /* graph pairs with equal fingerprints in both sets */
    uint64_t same_dag;      /* graphs dropped: the same DAG as another graph of their
                               shape-set-0 class (another topological order or
                               commuted ewadd/ewmul inputs) */
    uint64_t replayed;      /* graphs left in classes, replayed on shape set 1 */
    uint64_t syntactic;     /* pairs rejected by TASO's syntactic checks (an operator on
                               the same input variables on both sides, or the same
                               last operator with at most one input differing) */
    uint64_t float_fail;    /* rejected by the float test (either set) */
    /* operators evaluated replaying on set 1 (a prefix shared with the
       graph replayed before once) and by the pair tests, and the CPU
       seconds of those two steps: under mpirun each process replays a
       hash-chosen part of the graphs, so fewer neighbours share a prefix */
    uint64_t evals1, evals_test;
    double c_set1, c_tests;
    uint64_t candidates;    /* passed the float test */
    uint64_t unbound;       /* dropped: each side has an input the other lacks */
    uint64_t after_rename;  /* after input-renaming pruning */
    uint64_t after_common;  /* after common-subgraph pruning */
    uint64_t third_fail;    /* of those, failed on shape set 2 (dropped) */
    uint64_t fourth_fail;   /* of those, failed on shape set 3 (dropped) */
    uint64_t subsumed;      /* of the rest, derived from kept rules (dropped) */
    uint64_t restored;      /* pruned above, but no kept rule derives them: kept */
    uint64_t kept;          /* rules written */
    double t_enum, t_test, t_rename, t_common, t_subsume;
    size_t peak_bytes;      /* graph table */
} gen_stats;

/* Subsumption (gen_subsume.c): whether a rule follows from a set of kept
 * rules by instantiation and congruence, checked on the terms.  Rules are
 * added as pointers to their output arrays, which must outlive the
 * subsumer. */
typedef struct gen_subsumer gen_subsumer;
gen_subsumer *gen_subsumer_new(void);
void gen_subsumer_free(gen_subsumer *s);
/* Adds a kept rule (both directions where usable); false out of memory. */
bool gen_subsumer_add(gen_subsumer *s, ts_rexpr *const *l, ts_rexpr *const *r, int n);
/* Whether the kept rules derive l -> r (and r -> l where that is usable). */
bool gen_subsumer_derives(const gen_subsumer *s, ts_rexpr *const *l, ts_rexpr *const *r, int n);

/* Enumerates every graph of up to cfg->max_ops operators; *out holds *n
 * graphs (malloc'd), sorted by gen_graph_cmp, each with its seq. */
ts_status gen_enumerate(const gen_world *w, const gen_config *cfg, gen_graph **out, size_t *n,
                        ts_error *err);
/* Output terms of a graph (its unconsumed tensors), as expressions; *nout
 * of them, sorted by the mod-p hash of their values.  NULL on no memory. */
ts_rexpr **gen_graph_terms(const gen_world *w, const gen_graph *g, int *nout);

/* Candidate pairs from the sorted records (fingerprint classes of both
 * shape sets, duplicate DAGs and TASO's syntactic rejections removed, the
 * float test passed): pair k is (gs[pair[2k]], gs[pair[2k+1]]), the first
 * the smallest graph of its class.  Compacts gs (*ng shrinks to the graphs
 * left in classes).  Counts go into st (gen_pairs.c). */
ts_status gen_pairs(const gen_world *w, const gen_config *cfg, gen_graph **gs, size_t *ng, size_t **pair,
                    size_t *npair, gen_stats *st, ts_error *err);

/* Evaluates expressions with variables bound to the world's tensors (or to
 * `extra`, for fresh variables named t0, t1...).  Returns false when a
 * shape does not fit. */
typedef struct gen_env {
    const gen_world *w;
    int set; /* shape set 0..3 (sets 2 and 3: no extra inputs) */
    int nextra;
    char extra_name[4][8];
    gen_tensor *extra_modp[4], *extra_f64[4];   /* shape set 0 */
    gen_tensor *extra2_modp[4], *extra2_f64[4]; /* shape set 1 */
} gen_env;
bool gen_eval_expr(const gen_env *env, const ts_rexpr *e, gen_domain dom, gen_tensor *out);

/* Whether l[i] = r[i] for every i holds on the test inputs, mod p and in
 * floats: in shape set `set` (0..2), or in sets 0 and 1 when set < 0 (the
 * generator's test for candidates and pruning).  Set 3 is guarded: a rule
 * holds there unless every side is defined, the shapes agree and a value
 * differs (a rule applies only where shapes agree, as the verifier's
 * guarded axioms say). */
bool gen_rule_valid(const gen_world *w, int set, ts_rexpr *const *l, ts_rexpr *const *r, int n);

/* The whole pipeline: enumeration, tests, pruning; rules in *rules. */
ts_status ts_taso_generate(const gen_config *cfg, ts_rule **rules, int *nrules, gen_stats *st,
                           ts_error *err);

#endif
