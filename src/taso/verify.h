/* TASO's substitution verifier (paper section 3): operators are
 * uninterpreted functions over an uninterpreted sort Tensor (and a sort Param
 * for strides, paddings, activations, kernels and axes); the operator axioms
 * of the paper's Table 2 (plus a few of ours) are universally quantified
 * formulas; a rule is proved when Z3 finds "axioms and lhs != rhs" unsat.
 *
 * The axioms are also checked on concrete tensors (axiom_check.c) by running
 * tsopt's own reference kernels, so the axioms describe the operators that
 * tsopt really executes. */
#ifndef TS_TASO_VERIFY_H
#define TS_TASO_VERIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "rules/rule.h"
#include "tsopt.h"

/* ------------------------------------------------------------- axioms */

/* An axiom lhs = rhs, written in the rule syntax (docs/rules.md) except that
 * a parameter may also be a variable (?s): a parameter slot holding ?name is
 * a parameter variable, a tensor slot holding ?name a tensor variable. */
typedef struct ts_axiom {
    const char *name;    /* "A1".."A43": Table 2 numbering; "X1"..: ours */
    const char *lhs;
    const char *rhs;
    /* Shapes for the concrete check (axiom_check.c explains the syntax). */
    const char *shapes;
    const char *comment; /* the paper's comment, or why we added it */
} ts_axiom;

/* The axiom set the verifier uses: the paper's 43, then ours. */
int ts_axioms_count(void);
const ts_axiom *ts_axiom_at(int i);
/* Index of the axiom named `name` ("A21"), -1 if none. */
int ts_axiom_find(const char *name);

/* Whether axiom `ax` restates rule r: r (one output) is ax, in either
 * direction, with ax's tensor variables renamed one-to-one to variables and
 * its parameter variables given values.  An axiom must be one operator's
 * definition or a general law, never a rule the verifier is asked to prove
 * (test_verify_fusions checks the shipped rule files). */
bool ts_axiom_restates_rule(const ts_axiom *ax, const ts_rule *r);
/* The index of the first of our axioms (not TS_AXIOM_SOURCED) that
 * restates r, -1 if none. */
int ts_axiom_restated(const ts_rule *r);

/* Theories.  Concat associativity (C1) is true of real tensors but
 * contradicts A28/A29 (split at the last concat point of a term), so the
 * prover has two axiom sets: the split theory (every axiom but the
 * split-free-only ones) for rules that mention split0/split1, and the
 * split-free theory (every axiom that does not mention split, plus the
 * split-free-only ones) for all other rules.  docs/taso.md, "Theories". */
enum {
    TS_THEORY_SPLIT = 1,
    TS_THEORY_SPLIT_FREE = 2,
};
enum {
    TS_AXIOM_SPLIT_ONLY = 1,      /* mentions split0/split1 (found from its text) */
    TS_AXIOM_SPLIT_FREE_ONLY = 2, /* contradicts A28/A29 */
    TS_AXIOM_LHS_TRIGGER = 4,     /* E-matching rewrites left to right only */
    /* Where the axiom comes from, when not from us: Table 2 of the paper
     * and the lemmas of TASO's verify.py, or an operator's definition in
     * the ONNX specification.  A rule may
     * be an instance of those; ts_axiom_restated checks only ours. */
    TS_AXIOM_PAPER = 8,
    TS_AXIOM_DEFINITION = 16,
    TS_AXIOM_SOURCED = TS_AXIOM_PAPER | TS_AXIOM_DEFINITION,
};
unsigned ts_axiom_flags(int i);
/* TS_THEORY_* bits of the theories axiom i belongs to. */
unsigned ts_axiom_theories(int i);

/* Parsed axiom side.  Parameter literals are kept in canonical form
 * ("s1", "same", "none", "a0", "k3x3"), the names Z3 constants get. */
typedef enum ts_aterm_kind {
    TS_AT_OP,   /* operator or constant tensor */
    TS_AT_TVAR, /* tensor variable */
    TS_AT_PVAR, /* parameter variable */
    TS_AT_PLIT  /* parameter literal */
} ts_aterm_kind;

typedef struct ts_aterm {
    ts_aterm_kind kind;
    ts_rop op;     /* TS_AT_OP */
    unsigned slot; /* PVAR/PLIT: which TS_RPARAM_* the slot holds */
    char name[24]; /* variable name without '?', or canonical literal */
    int np, nt;
    struct ts_aterm *p[4]; /* parameters, textual order */
    struct ts_aterm *t[3]; /* tensor arguments */
} ts_aterm;

ts_status ts_aterm_parse(const char *text, ts_aterm **out, ts_error *err);
void ts_aterm_free(ts_aterm *t);
/* Canonical literal of parameter `slot` from ts_rparams (buf >= 24 bytes). */
const char *ts_param_canon(unsigned slot, const ts_rparams *p, char *buf, size_t n);

/* --------------------------------------------------------------- prover */

typedef enum ts_proof {
    TS_PROOF_PROVED = 0,
    TS_PROOF_FAILED,  /* Z3 says sat, or gave up without a timeout */
    TS_PROOF_TIMEOUT, /* Z3 ran out of time */
} ts_proof;

/* One Z3 context with the sorts, functions and axioms built.  Not thread
 * safe: use one per thread. */
typedef struct ts_prover ts_prover;

ts_prover *ts_prover_new(ts_error *err);
void ts_prover_free(ts_prover *p);
/* Proves lhs[i] = rhs[i] for every output from the axioms of the rule's
 * theory (the split theory when it mentions split0/split1, else the
 * split-free one).  why (may be NULL) receives Z3's reason when the result
 * is not PROVED. */
ts_proof ts_prover_prove_rule(ts_prover *p, const ts_rule *r, unsigned timeout_ms, bool mbqi, char *why,
                              size_t n);
/* Tries to prove the equality `lhs = rhs` (axiom syntax) from the axioms,
 * leaving out axiom `skip` (-1: none).  Redundancy check: skip = itself.
 * mbqi turns on Z3's model-based instantiation: slower, but it can answer
 * "independent" with a counter-model where E-matching alone only stops. */
ts_proof ts_prover_prove_text(ts_prover *p, const char *lhs, const char *rhs, int skip, bool mbqi,
                              unsigned timeout_ms, char *why, size_t n);
/* The same in one theory (TS_THEORY_*; 0: chosen from the text, as for
 * rules: the split theory when lhs or rhs mentions split). */
ts_proof ts_prover_prove_text_in(ts_prover *p, unsigned theory, const char *lhs, const char *rhs, int skip,
                                 bool mbqi, unsigned timeout_ms, char *why, size_t n);

typedef struct ts_verify_opts {
    unsigned timeout_ms; /* per rule */
    int threads;         /* Z3 contexts working in parallel (>= 1) */
    /* When E-matching gives up, retry with model-based instantiation for
     * the rest of the time: proves a few more rules, but a wrong rule then
     * takes the whole timeout instead of milliseconds. */
    bool mbqi;
} ts_verify_opts;

typedef struct ts_rule_result {
    ts_proof proof;
    double secs;
    char why[96]; /* Z3's reason when not proved */
} ts_rule_result;

/* Proves every rule, res[i] for rules[i]; an error only when Z3 cannot be
 * set up. */
ts_status ts_verify_rules(const ts_rule *rules, int n, const ts_verify_opts *o, ts_rule_result *res,
                          ts_error *err);

/* ---------------------------------------------------- concrete checks */

typedef struct ts_axiom_check_stats {
    long obligations; /* shape and parameter combinations where both sides are defined */
    long skipped;     /* combinations where a side is undefined (shapes do not fit) */
    long shape_guarded; /* of those, both sides defined but shaped differently ("guard=shape") */
    long failures;
    char first_failure[512];
} ts_axiom_check_stats;

typedef struct ts_axiom_check_opts {
    int max_dim;   /* every dimension ranges over 1..max_dim */
    int trials;    /* random inputs per shape/parameter combination */
    uint64_t seed;
    /* "same" padding as TensorFlow/ONNX SAME_UPPER (total pad split, the
     * smaller half first) instead of tsopt's symmetric (k-1)/2: shows which
     * axioms need the symmetric reading (A21 with stride 2). */
    bool tf_same;
} ts_axiom_check_opts;

/* Checks `ax` on every shape and every parameter value (see axiom_check.c).
 * Returns an error only when the axiom cannot be checked at all. */
ts_status ts_axiom_check(const ts_axiom *ax, const ts_axiom_check_opts *o, ts_axiom_check_stats *st,
                         ts_error *err);

#endif
