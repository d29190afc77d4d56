/* Rewrite rules: the expression tree of a pattern, and the rule file
 * (docs/rules.md fixes the syntax).  One library for every rule source:
 * TASO's generator writes rules with it, the verifier, the e-graph and the
 * fuzzer read them with it.
 *
 * A pattern is a tree of ts_rexpr.  Leaves are tensor variables (?x) or
 * constant tensors (Imatmul, Iewmul, (Iconv k3), (Cpool k3)).  An operator
 * node carries its literal parameters in `p` (only the fields its row of the
 * operator table uses are meaningful; the others stay 0) and its tensor
 * arguments in `arg`.  Subterms are trees, never shared: a subterm written
 * twice in the file is two trees (identifying them is the reader's job). */
#ifndef TS_RULES_RULE_H
#define TS_RULES_RULE_H

#include <stdbool.h>
#include <stdio.h>
#include "tsopt.h"

/* Operator atoms, in the order of the table in docs/rules.md. */
typedef enum ts_rop {
    TS_ROP_VAR = 0, /* ?name */
    TS_ROP_EWADD,
    TS_ROP_EWMUL,
    TS_ROP_SMUL,
    TS_ROP_TRANSPOSE,
    TS_ROP_MATMUL,
    TS_ROP_CONV,
    TS_ROP_ENLARGE,
    TS_ROP_RELU,
    TS_ROP_POOLAVG,
    TS_ROP_POOLMAX,
    TS_ROP_CONCAT,
    TS_ROP_SPLIT0,
    TS_ROP_SPLIT1,
    TS_ROP_CPOOL,   /* constant: average-pool kernel (all 1/(kh*kw)), param kernel */
    TS_ROP_ICONV,   /* constant: identity conv kernel, param kernel */
    TS_ROP_IMATMUL, /* constant: identity matrix */
    TS_ROP_IEWMUL,  /* constant: all ones */
    /* grouped convolution, param mult (output channels per group); last so
     * that the generator's variant numbers (and rules/taso.rules) stay */
    TS_ROP_GCONV,
    /* ONNX element-wise arithmetic and the fused ops the runtime forms from
     * it (docs/rules.md, "Arithmetic, reductions and fusions"); the
     * generator does not enumerate them.  num is a number (a rank-0
     * constant written as a bare literal, `0.5`); add..pow broadcast as
     * ONNX does (multidirectional). */
    TS_ROP_NUM,
    TS_ROP_ADD,
    TS_ROP_SUB,
    TS_ROP_MUL,
    TS_ROP_DIV,
    TS_ROP_POW,
    TS_ROP_SQRT,
    TS_ROP_RECIP,
    TS_ROP_ERF,
    TS_ROP_TANH,
    TS_ROP_SIGMOID,
    TS_ROP_REDUCEMEAN, /* param axes, keepdims = 1 */
    TS_ROP_GELU,       /* ONNX Gelu (opset 20), approximate = "none" */
    TS_ROP_GELUTANH,   /* ONNX Gelu, approximate = "tanh" */
    TS_ROP_LAYERNORM,  /* param axes; x, epsilon (a number): LayerNormalization with Scale 1, no B */
    TS_ROP_BROADCAST,  /* x ref: Expand(x, Shape(ref)) */
    TS_ROP_GATHER,     /* param axis; data indices: ONNX Gather */
    /* x y r: x cropped spatially by (|r| - |y|)/2 a side, the crop a valid
     * conv by enlarge(y, r) makes (a Slice; the verifier's, docs/taso.md
     * "Crop"); the one atom of three arguments, so no e-graph form */
    TS_ROP_CROP,
    TS_ROP_COUNT
} ts_rop;

/* Which literal parameters an operator takes, in the order they are
 * written (bit order below = textual order). */
enum {
    TS_RPARAM_KERNEL = 1 << 0, /* k3 or k3x5: kh, kw */
    TS_RPARAM_STRIDE = 1 << 1, /* s1, s2: stride (same in both dims) */
    TS_RPARAM_PAD = 1 << 2,    /* same | valid */
    TS_RPARAM_ACT = 1 << 3,    /* none | relu */
    TS_RPARAM_AXIS = 1 << 4,   /* 0, 1, ... */
    TS_RPARAM_MULT = 1 << 5,   /* m1, m4: output channels per group (gconv) */
    TS_RPARAM_AXES = 1 << 6,   /* r-1, r1, r2,3: the axes a reduction reduces (layernorm: normalizes) */
    TS_RPARAM_VALUE = 1 << 7,  /* num: the number, a float32, written bare (0.5) */
    TS_RPARAM_LAST = TS_RPARAM_VALUE,
};

typedef enum ts_rpad { TS_RPAD_SAME = 0, TS_RPAD_VALID = 1 } ts_rpad;
typedef enum ts_ract { TS_RACT_NONE = 0, TS_RACT_RELU = 1 } ts_ract;

typedef struct ts_rparams {
    int kh, kw;   /* kernel (pool, Cpool, Iconv) */
    int stride;   /* conv, pool */
    ts_rpad pad;  /* conv, pool */
    ts_ract act;  /* conv */
    int axis;     /* concat, split */
    int mult;     /* gconv: output channels per group (1: depthwise) */
    /* reducemean, layernorm: bit a (0..7) for axis a, bit 8 + k for axis
     * -1 - k (ts_raxes_* below); ints only, the e-graph hashes the struct
     * as an int array */
    int axes;
    float value; /* num: the number, rounded to float32 as a model stores it */
} ts_rparams;

/* The axes mask of ts_rparams: bit of axis a (-8 <= a < 8), and whether
 * mask m holds axis a of a tensor of rank r (either spelling). */
static inline int ts_raxes_bit(int a) { return a >= 0 ? 1 << a : 1 << (8 + (-1 - a)); }
static inline bool ts_raxes_has(int m, int a, int r) { return (m & ts_raxes_bit(a)) || (m & ts_raxes_bit(a - r)); }

typedef struct ts_rexpr {
    ts_rop op;
    ts_rparams p;
    int nargs;
    struct ts_rexpr *arg[3];
    char *var; /* TS_ROP_VAR: the name without '?' */
} ts_rexpr;

/* The atom table (atom.c): one row per operator atom, everything each
 * user of the rule language needs to know about it.  The parser and printer
 * read the text columns; the matcher and applier (match.c, apply.c) and the
 * axiom checker (taso/axiom_check.c) reach model graphs only through `op`
 * and the per-atom functions, written next to each other in atom_*.c
 * (rules/atom.h has their contexts); the generator evaluates constants with
 * `fill`.  Adding an atom means adding a row here, never a case elsewhere.
 * The mapping from atoms to ONNX is in docs/rules.md. */
struct ts_rmatch; /* a match in progress (rules/atom.h) */
struct ts_rbuild; /* nodes being built for atoms (rules/atom.h) */
struct ts_num;    /* a number domain (ops/num.h) */

/* What shape a constant atom takes where it is used (the generator gives
 * each kind its shape set's sizes; the axioms name the shapes). */
typedef enum ts_rconst_shape {
    TS_RCONST_NONE = 0, /* not a constant */
    TS_RCONST_KERNEL,   /* C x C x kh x kw conv kernel (Cpool, Iconv) */
    TS_RCONST_SQUARE,   /* M x M matrix (Imatmul) */
    TS_RCONST_ACT,      /* an activation's N x C x H x W (Iewmul) */
    TS_RCONST_SCALAR,   /* rank 0 (num) */
} ts_rconst_shape;

/* Shape of the value of a subterm, as the caller knows it (a match or a
 * rewrite in progress); NULL when unknown. */
typedef const ts_shape *(*ts_rshape_fn)(void *ctx, const ts_rexpr *e);

typedef struct ts_ropinfo {
    const char *atom;  /* as written in the file */
    unsigned params;   /* TS_RPARAM_* in textual order: kernel stride pad act axis mult */
    int nargs;         /* tensor arguments */
    bool constant;     /* a constant tensor leaf */
    bool commutative;  /* (op a b) = (op b a) */
    ts_rconst_shape cshape;
    /* The ONNX operator the atom stands for (a descriptor of the registry,
     * compared by pointer); NULL for the constants.  Its node is the root
     * of what the atom matches unless `roots` says otherwise. */
    const ts_op_desc *op;
    /* The atom's second argument is a weight whose node may carry a
     * constant bias (conv, matmul); bias_axis is the weight's TASO axis
     * that indexes output channels, which a rewrite must follow. */
    bool bias;
    int bias_axis;
    /* split0/split1: cut where the argument's split tree says; a builder
     * gets that point from the caller (ts_rbuild.split_at). */
    bool cuts;

    /* Whether the nodes producing value v (a node of g) stand for e,
     * binding e's arguments through the matcher; NULL: the atom has no
     * counterpart in model graphs (enlarge, the constants). */
    bool (*match)(struct ts_rmatch *s, const ts_rexpr *e, int v);
    /* The descriptors a value matched by e can be produced by (at most 2):
     * the matcher's root index visits only nodes of these.  NULL: `op`. */
    int (*roots)(const ts_rexpr *e, const ts_op_desc **out);
    /* Adds the node(s) standing for atom op with parameters p on values x
     * (nargs of them); returns the result value, or -1 where the atom is
     * undefined on those shapes (or on error, in the context's err). */
    int (*build)(struct ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x);
    /* TASO's split tree: the size of the first part when e's value is
     * split along TASO axis `axis` (where the last concat along it joined
     * two parts), -1 when there is none.  NULL: never one. */
    int64_t (*split_point)(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);
    /* Constants: fills data (shape s, storage of domain num) with the
     * constant's value; false when s is not a shape it has. */
    bool (*fill)(const ts_rparams *p, const ts_shape *s, const struct ts_num *num, void *data);
} ts_ropinfo;

/* The table itself, indexed by ts_rop; ts_rop_info(op) is &ts_rop_table[op]. */
extern const ts_ropinfo ts_rop_table[TS_ROP_COUNT];
const ts_ropinfo *ts_rop_info(ts_rop op);
/* TS_ROP_COUNT when the atom names no operator. */
ts_rop ts_rop_from_atom(const char *atom);
/* Split point of e along TASO axis `axis` (the row's split_point), -1 when
 * e carries none; shape_of gives a subterm's shape. */
int64_t ts_rexpr_split_point(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx);

/* Parameter texts of the arithmetic atoms: axes masks ("r-1", "r2,3")
 * and numbers (float32, "%.9g": a number reads back as the same float). */
const char *ts_raxes_format(int mask, char *buf, size_t n);
bool ts_raxes_parse(const char *t, int *mask);
const char *ts_rnum_format(float v, char *buf, size_t n);
bool ts_rnum_parse(const char *t, float *v);

/* Constraints checked by a matcher, (where ...) in the file. */
typedef enum ts_rcons_kind {
    TS_RCONS_SAME_SHAPE = 0, /* (same-shape ?a ?b) */
    TS_RCONS_WEIGHT,         /* (weight ?w): ?w must be a constant tensor */
    TS_RCONS_COUNT
} ts_rcons_kind;

typedef struct ts_rcons {
    ts_rcons_kind kind;
    int nvars;
    char *var[2];
} ts_rcons;

typedef struct ts_rule {
    char *name;
    int nout;       /* outputs: lhs and rhs have nout expressions each */
    ts_rexpr **lhs;
    ts_rexpr **rhs;
    int ncons;
    ts_rcons *cons;
    int line;       /* line of "(rule" in the file it came from; 0 if built */
} ts_rule;

/* Expressions.  Constructors return NULL only when out of memory; a NULL
 * argument is passed through (the result is then NULL and the other
 * arguments are freed), so nested constructor calls need one check. */
ts_rexpr *ts_rexpr_var(const char *name);
ts_rexpr *ts_rexpr_op(ts_rop op, const ts_rparams *p, ts_rexpr *a, ts_rexpr *b);
/* The same for an atom of three arguments (crop). */
ts_rexpr *ts_rexpr_op3(ts_rop op, const ts_rparams *p, ts_rexpr *a, ts_rexpr *b, ts_rexpr *c);
ts_rexpr *ts_rexpr_clone(const ts_rexpr *e);
void ts_rexpr_free(ts_rexpr *e);
bool ts_rexpr_equal(const ts_rexpr *a, const ts_rexpr *b);
/* Operator nodes in the tree (variables and constants not counted). */
int ts_rexpr_count_ops(const ts_rexpr *e);
/* S-expression text, as in the file. */
void ts_rexpr_print(FILE *f, const ts_rexpr *e);
/* Same into buf (truncated to n); returns the full length. */
size_t ts_rexpr_format(char *buf, size_t n, const ts_rexpr *e);

void ts_rule_free(ts_rule *r); /* frees what r owns, not r itself */
void ts_rule_print(FILE *f, const ts_rule *r);
/* Every variable of rhs (and of the constraints) occurs in lhs; outputs
 * agree in number; parameters are in range. */
ts_status ts_rule_check(const ts_rule *r, ts_error *err);

/* The rule file.  parse_* check every rule with ts_rule_check; errors read
 * "PATH:LINE: what".  *rules is an array of *n rules owned by the caller
 * (ts_rules_free). */
ts_status ts_rules_parse_file(const char *path, ts_rule **rules, int *n, ts_error *err);
ts_status ts_rules_parse_string(const char *text, const char *name, ts_rule **rules, int *n,
                                ts_error *err);
/* Writes the header line, the optional comment lines (each prefixed by
 * "; "; may be NULL) and the rules, to a temporary file renamed over path. */
ts_status ts_rules_write(const char *path, const ts_rule *rules, int n, const char *comment,
                         ts_error *err);
void ts_rules_write_stream(FILE *f, const ts_rule *rules, int n, const char *comment);
void ts_rules_free(ts_rule *rules, int n);

/* A rule states an equivalence; the generator keeps one orientation of each
 * pair (its canonical text), so a search that applies rules left to right
 * must also have the other one (TASO: pruning keeps every rewrite reachable
 * only with both).  Appends to *rules the reverse of every rule whose lhs
 * variables all occur in its rhs and none of whose rhs outputs is a bare
 * variable, named NAME~rev, with the same constraints; *n grows by the
 * number added (also returned in *added).  Fails only out of memory. */
ts_status ts_rules_add_reverses(ts_rule **rules, int *n, int *added, ts_error *err);

#define TS_RULES_HEADER "; tsopt rules v1"

/* The built-in core rule set, rules/core.rules embedded at build time. */
extern const char ts_core_rules[];
/* The generated and proved rule set, rules/taso.rules embedded at build
 * time (`make rules` regenerates and re-proves the file). */
extern const char ts_taso_rules[];
/* The GELU and LayerNorm spellings the runtime fuses, each equal to ONNX
 * Gelu / LayerNormalization (rules/fusions.rules; docs/taso.md,
 * "Arithmetic, reductions and fusions"). */
extern const char ts_fusions_rules[];

#endif
