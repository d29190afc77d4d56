/* The e-graph's insides, shared by the files of src/egraph/ (the contract
 * for users is egraph.h): e-nodes, e-classes, the union-find, the hashcons
 * and the analysis memo.  docs/egraph.md states the invariants. */
#ifndef TS_EGRAPH_IMPL_H
#define TS_EGRAPH_IMPL_H

#include "egraph/egraph.h"
#include "util/hash.h"

/* A growable array of ids (e-nodes or e-classes). */
typedef struct ts_idvec {
    int32_t *v;
    int n, cap;
} ts_idvec;

bool ts_idvec_push(ts_idvec *a, int32_t x);
void ts_idvec_free(ts_idvec *a);

/* ---- union-find (unionfind.c): a flat parent array; find halves paths */
typedef struct ts_uf {
    int32_t *parent;
    int n, cap;
} ts_uf;

int32_t ts_uf_make(ts_uf *u); /* a new singleton set; -1 out of memory */
int32_t ts_uf_find(ts_uf *u, int32_t x);
int32_t ts_uf_find_const(const ts_uf *u, int32_t x); /* no path halving (read-only users) */
void ts_uf_link(ts_uf *u, int32_t child_root, int32_t root);
void ts_uf_free(ts_uf *u);

/* An e-node: an atom over e-classes, or a leaf (op TS_ROP_VAR, leaf index
 * in `at`).  Params are normalized (fields the atom does not take are 0),
 * so equal e-nodes compare equal byte for byte on the fields below. */
typedef struct ts_enode {
    int32_t op;
    int32_t nargs;
    ts_rparams p;
    int64_t at;                 /* split0/split1: size of the first part; leaf: leaf index; else 0 */
    ts_eclass_id arg[2];        /* canonical after a rebuild */
    ts_eclass_id cls;           /* the class it was added to (find gives the current one) */
    bool dead;                  /* a duplicate that rebuild merged into its twin */
} ts_enode;

/* Per-class data, valid at canonical ids.  The analysis: shape and dtype
 * (equal across a class, an invariant every union keeps), and whether the
 * class is computed from weights alone (a weight leaf, or an e-node all of
 * whose children are constant): the rule language's (weight ?w). */
typedef struct ts_eclass {
    ts_idvec nodes;   /* e-nodes of the class */
    ts_idvec parents; /* e-nodes having the class as a child (may name dead or duplicate ones) */
    ts_shape shape;
    ts_dtype dtype;
    bool constant;
} ts_eclass;

typedef struct ts_eleaf {
    char *name;
    ts_shape shape;
    ts_dtype dtype;
    bool weight;
} ts_eleaf;

struct ts_egraph {
    ts_uf uf;
    ts_eclass *cls; /* indexed by class id, uf.n of them */
    int cap_cls;
    ts_enode *nodes;
    int nnodes, cap_nodes;
    size_t live_nodes, live_classes;
    uint64_t *sortkey; /* rebuild's scratch for sorting lists by (atom, id) */
    int cap_sortkey;
    /* hashcons: open addressing over e-node ids, keyed by their content */
    int32_t *ht;
    size_t htcap, htused; /* htused counts tombstones too */
    ts_eleaf *leaves;
    int nleaves, cap_leaves;
    ts_idvec pending; /* e-nodes whose children changed class (rebuild re-hashes them) */
    ts_idvec aqueue;  /* e-nodes whose class may have become constant */
    bool clean;       /* congruence holds and class lists are canonical */
    bool oom;         /* a list could not grow: congruence may be lost (saturate fails) */
    int64_t max_elems; /* adds of larger tensors are refused (0: no limit); set by saturation */
    /* the e-nodes ts_egraph_from_graph made for the graph's nodes, in
     * topological order: SIMPLEST never extracts more than the original */
    ts_idvec seeds;
};

/* The live e-node equal to e-node id (id itself, or the twin a rebuild
 * merged it into); -1 if none. */
int32_t ts_egraph_live_node(const ts_egraph *eg, int32_t id);

/* The e-node (op, p, at, args) after normalizing params and canonicalizing
 * args: an existing class or a new one; -1 with err set when the atom does
 * not fit the arguments' shapes. */
ts_eclass_id ts_egraph_add_node(ts_egraph *eg, ts_rop op, const ts_rparams *p, int64_t at, int nargs,
                                const ts_eclass_id *args, ts_error *err);
/* Params with the fields atom op does not take set to 0. */
ts_rparams ts_egraph_norm_params(ts_rop op, const ts_rparams *p);

/* ---- analysis (shape.c): the shape and dtype of atom op on arguments of
 * these shapes and dtypes, computed by the atom's own build function (the
 * models' reading) on a scratch graph and memoized per thread.  false when
 * the atom is undefined there (err set only when out of memory). */
bool ts_egraph_infer(ts_rop op, const ts_rparams *p, int64_t at, int nargs, const ts_shape *const *in,
                     const ts_dtype *dt, ts_shape *out, ts_dtype *odt, ts_error *err);

/* ---- e-matching (ematch.c) */

#define TS_EPAT_MAX 64  /* pattern nodes of a rule's lhs (all outputs) */
#define TS_EPAT_VARS 16
#define TS_EPAT_OUTS 8
#define TS_EPAT_CONS 8

/* A lhs compiled to a flat array: node i's arguments are indices, a
 * variable's slot is `var`. */
typedef struct ts_pnode {
    int32_t op;
    ts_rparams p; /* normalized */
    int nargs, arg[2];
    int var; /* TS_ROP_VAR: slot */
    const ts_rexpr *e;
} ts_pnode;

typedef struct ts_cpat {
    const ts_rule *r;
    int index; /* what matches carry in `rule` */
    uint64_t atoms; /* bit per atom the lhs uses: skipped when the e-graph lacks one */
    int nvars;
    const char *var[TS_EPAT_VARS];
    int n;
    ts_pnode *node; /* n of them (the caller's storage) */
    int nout, root[TS_EPAT_OUTS];
    int ncons, cons_var[TS_EPAT_CONS][2];
    ts_rcons_kind cons_kind[TS_EPAT_CONS];
} ts_cpat;

/* A match: the classes bound to the variables and matched by the outputs. */
typedef struct ts_ematch {
    int rule;
    int32_t bind[TS_EPAT_VARS];
    int32_t root[TS_EPAT_OUTS];
} ts_ematch;

/* Canonical classes holding an e-node of each atom (built per search). */
typedef struct ts_eopindex {
    ts_idvec byop[TS_ROP_COUNT];
    uint64_t present; /* bit per atom with a class */
} ts_eopindex;

/* Whether the e-graph can use rule r (no constant atoms, every rhs atom
 * buildable, lhs outputs not bare variables, within the sizes above);
 * compiles it into *c when it can, its pattern nodes into buf
 * (TS_EPAT_MAX of them; c->node points there). */
bool ts_cpat_compile(const ts_rule *r, int index, ts_cpat *c, ts_pnode *buf);
bool ts_eopindex_build(const ts_egraph *eg, ts_eopindex *ix);
void ts_eopindex_free(ts_eopindex *ix);
/* Calls emit for every match of c in the (clean) e-graph until it returns
 * false; returns false when emit stopped the search. */
bool ts_ematch_rule(const ts_egraph *eg, const ts_eopindex *ix, const ts_cpat *c,
                    bool (*emit)(void *ctx, const ts_ematch *m), void *ctx);
/* The slot of variable `name` in c, -1 if none. */
int ts_cpat_var(const ts_cpat *c, const char *name);

#endif
