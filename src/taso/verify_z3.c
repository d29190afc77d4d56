/* The Z3 encoding of rules and axioms, and the proof driver.
 *
 * Sorts: Tensor and Param, both uninterpreted.  Shapes are not modelled (as
 * in the paper): an axiom states an equality wherever both sides are
 * defined, and the matcher checks shapes when it applies a rule.  Parameter
 * literals are constants named after their canonical atom ("s1", "same",
 * "a0", "k3x3"); they are not declared distinct, because no axiom concludes
 * anything from a disequality: leaving distinctness out can only make fewer
 * rules provable, never a wrong one provable.
 *
 * Every axiom is a quantified equality whose triggers are its two sides
 * (each one that contains all bound variables), so E-matching rewrites in
 * both directions (C1, concat associativity: left to right only);
 * model-based instantiation is off, so a rule the axioms do not entail
 * ends quickly with "incomplete quantifiers" instead of running into the
 * timeout.  A rule is proved in one of two theories (ts_axiom_theories):
 * the split theory when it mentions split0/split1, else the split-free
 * one, which trades A28/A29 for concat associativity. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <z3.h>
#include "taso/verify.h"
#include "taso/z3_load.h"
#include "util/clock.h"

#define MAX_VARS 32
#define MAX_NUMS 128

struct ts_prover {
    Z3_context ctx;
    Z3_sort tensor, param;
    Z3_func_decl fn[TS_ROP_COUNT];
    int naxioms;
    Z3_ast *axioms;   /* quantified formulas, one per ts_axiom_at(i) */
    unsigned *theory; /* ts_axiom_theories(i): which rules may use it */
    bool failed;    /* a Z3 error happened (recorded by the handler) */
    /* The numbers of the problem (axioms first, naxnums of them, then the
     * rule's): each gets its folding facts (number_facts). */
    float nums[MAX_NUMS];
    int nnums, naxnums;
};

/* Variables of one formula: name and sort -> constant. */
typedef struct varmap {
    int n;
    char name[MAX_VARS][24];
    bool is_param[MAX_VARS];
    Z3_app app[MAX_VARS];
} varmap;

static void on_z3_error(Z3_context c, Z3_error_code e)
{
    /* Errors are checked after each build step through Z3_get_error_code;
     * the default handler would exit the process. */
    (void)c;
    (void)e;
}

static Z3_ast var_const(ts_prover *p, varmap *vm, const char *prefix, const char *name, bool is_param)
{
    for (int i = 0; i < vm->n; i++)
        if (vm->is_param[i] == is_param && !strcmp(vm->name[i], name)) return Z3_app_to_ast(p->ctx, vm->app[i]);
    if (vm->n == MAX_VARS) return NULL;
    char full[64];
    snprintf(full, sizeof full, "%s%s%s", prefix, is_param ? "$" : "", name);
    Z3_ast c = Z3_mk_const(p->ctx, Z3_mk_string_symbol(p->ctx, full), is_param ? p->param : p->tensor);
    snprintf(vm->name[vm->n], sizeof vm->name[0], "%s", name);
    vm->is_param[vm->n] = is_param;
    vm->app[vm->n++] = Z3_to_app(p->ctx, c);
    return c;
}

static Z3_ast param_const(ts_prover *p, const char *canon)
{
    return Z3_mk_const(p->ctx, Z3_mk_string_symbol(p->ctx, canon), p->param);
}

/* ---- numbers.  A number is num(#V), V its float32 value: two spellings of
 * one float32 (1.4142135, 1.41421356) are one term.  A subterm whose
 * arguments are all numbers is folded in float32 before Z3 sees it, and
 * every number of the problem gets the ground facts recip(n) = 1/n and
 * sqrt(n) = sqrt(n), folded the same way: the constant folding a runtime
 * does, one float32 rounding per folded operation (docs/taso.md,
 * "Arithmetic, reductions and fusions").  Numbers are not declared
 * distinct (as parameter literals are not). */
static bool fold(ts_rop op, const float *a, float *out)
{
    switch (op) {
    case TS_ROP_ADD: *out = a[0] + a[1]; break;
    case TS_ROP_SUB: *out = a[0] - a[1]; break;
    case TS_ROP_MUL: *out = a[0] * a[1]; break;
    case TS_ROP_DIV: *out = a[0] / a[1]; break;
    case TS_ROP_POW: *out = powf(a[0], a[1]); break;
    case TS_ROP_SQRT: *out = sqrtf(a[0]); break;
    case TS_ROP_RECIP: *out = 1.0f / a[0]; break;
    case TS_ROP_ERF: *out = erff(a[0]); break;
    case TS_ROP_TANH: *out = tanhf(a[0]); break;
    case TS_ROP_SIGMOID: *out = 1.0f / (1.0f + expf(-a[0])); break;
    default: return false;
    }
    return isfinite(*out);
}

static bool rexpr_number(const ts_rexpr *e, float *v)
{
    if (e->op == TS_ROP_NUM) {
        *v = e->p.value;
        return true;
    }
    float a[3];
    if (e->op == TS_ROP_VAR || !e->nargs) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!rexpr_number(e->arg[i], &a[i])) return false;
    return fold(e->op, a, v);
}

static bool aterm_number(const ts_aterm *t, float *v)
{
    if (t->kind != TS_AT_OP) return false;
    if (t->op == TS_ROP_NUM) {
        *v = strtof(t->p[0]->name + 1, NULL); /* "#0.5" */
        return true;
    }
    float a[3];
    if (!t->nt) return false;
    for (int i = 0; i < t->nt; i++)
        if (!aterm_number(t->t[i], &a[i])) return false;
    return fold(t->op, a, v);
}

static Z3_ast num_z3(ts_prover *p, float v, bool record)
{
    if (record) {
        bool have = false;
        for (int i = 0; i < p->nnums && !have; i++) have = p->nums[i] == v;
        if (!have && p->nnums < MAX_NUMS) p->nums[p->nnums++] = v;
    }
    char buf[32];
    ts_rparams prm = {.value = v};
    Z3_ast lit = param_const(p, ts_param_canon(TS_RPARAM_VALUE, &prm, buf, sizeof buf));
    return Z3_mk_app(p->ctx, p->fn[TS_ROP_NUM], 1, &lit);
}

/* The folding facts of the problem's numbers (see above). */
static void number_facts(ts_prover *p, Z3_solver s)
{
    for (int i = 0; i < p->nnums; i++) {
        float n = p->nums[i], r;
        Z3_ast x = num_z3(p, n, false);
        if (fold(TS_ROP_RECIP, &n, &r)) {
            Z3_ast a = Z3_mk_app(p->ctx, p->fn[TS_ROP_RECIP], 1, &x);
            Z3_solver_assert(p->ctx, s, Z3_mk_eq(p->ctx, a, num_z3(p, r, false)));
        }
        if (n >= 0 && fold(TS_ROP_SQRT, &n, &r)) {
            Z3_ast a = Z3_mk_app(p->ctx, p->fn[TS_ROP_SQRT], 1, &x);
            Z3_solver_assert(p->ctx, s, Z3_mk_eq(p->ctx, a, num_z3(p, r, false)));
        }
    }
}

static Z3_ast aterm_z3(ts_prover *p, const ts_aterm *t, varmap *vm, const char *prefix)
{
    float v;
    if (aterm_number(t, &v)) return num_z3(p, v, true);
    switch (t->kind) {
    case TS_AT_TVAR: return var_const(p, vm, prefix, t->name, false);
    case TS_AT_PVAR: return var_const(p, vm, prefix, t->name, true);
    case TS_AT_PLIT: return param_const(p, t->name);
    case TS_AT_OP: break;
    }
    Z3_ast args[8];
    int n = 0;
    for (int i = 0; i < t->np; i++)
        if (!(args[n++] = aterm_z3(p, t->p[i], vm, prefix))) return NULL;
    for (int i = 0; i < t->nt; i++)
        if (!(args[n++] = aterm_z3(p, t->t[i], vm, prefix))) return NULL;
    return Z3_mk_app(p->ctx, p->fn[t->op], (unsigned)n, args);
}

static Z3_ast rexpr_z3(ts_prover *p, const ts_rexpr *e, varmap *vm)
{
    if (e->op == TS_ROP_VAR) return var_const(p, vm, "v.", e->var, false);
    float v;
    if (rexpr_number(e, &v)) return num_z3(p, v, true);
    const ts_ropinfo *info = ts_rop_info(e->op);
    Z3_ast args[8];
    int n = 0;
    char buf[24];
    for (unsigned bit = 1; bit <= TS_RPARAM_LAST; bit <<= 1)
        if (info->params & bit) args[n++] = param_const(p, ts_param_canon(bit, &e->p, buf, sizeof buf));
    for (int i = 0; i < e->nargs; i++)
        if (!(args[n++] = rexpr_z3(p, e->arg[i], vm))) return NULL;
    return Z3_mk_app(p->ctx, p->fn[e->op], (unsigned)n, args);
}

/* Does term a (a Z3 application) contain every variable of vm? */
static bool covers(Z3_context c, Z3_ast a, const varmap *vm)
{
    for (int i = 0; i < vm->n; i++) {
        /* Substituting the variable by itself is no test; walk instead. */
        Z3_ast v = Z3_app_to_ast(c, vm->app[i]);
        Z3_ast stack[256];
        int sp = 0;
        bool found = false;
        stack[sp++] = a;
        while (sp && !found) {
            Z3_ast x = stack[--sp];
            if (Z3_is_eq_ast(c, x, v)) found = true;
            else if (Z3_get_ast_kind(c, x) == Z3_APP_AST) {
                Z3_app ap = Z3_to_app(c, x);
                for (unsigned k = 0; k < Z3_get_app_num_args(c, ap) && sp < 256; k++)
                    stack[sp++] = Z3_get_app_arg(c, ap, k);
            }
        }
        if (!found) return false;
    }
    return true;
}

static bool is_var(Z3_context c, Z3_ast a, const varmap *vm)
{
    for (int i = 0; i < vm->n; i++)
        if (Z3_is_eq_ast(c, a, Z3_app_to_ast(c, vm->app[i]))) return true;
    return false;
}

/* Does term a contain v? */
static bool contains(Z3_context c, Z3_ast a, Z3_ast v)
{
    if (Z3_is_eq_ast(c, a, v)) return true;
    if (Z3_get_ast_kind(c, a) != Z3_APP_AST) return false;
    Z3_app ap = Z3_to_app(c, a);
    for (unsigned k = 0; k < Z3_get_app_num_args(c, ap); k++)
        if (contains(c, Z3_get_app_arg(c, ap, k), v)) return true;
    return false;
}

/* The application in `a` whose direct arguments include v (the smallest
 * term that mentions v), NULL if none. */
static Z3_ast parent_of(Z3_context c, Z3_ast a, Z3_ast v)
{
    if (Z3_get_ast_kind(c, a) != Z3_APP_AST) return NULL;
    Z3_app ap = Z3_to_app(c, a);
    for (unsigned k = 0; k < Z3_get_app_num_args(c, ap); k++)
        if (Z3_is_eq_ast(c, Z3_get_app_arg(c, ap, k), v)) return a;
    for (unsigned k = 0; k < Z3_get_app_num_args(c, ap); k++) {
        Z3_ast r = parent_of(c, Z3_get_app_arg(c, ap, k), v);
        if (r) return r;
    }
    return NULL;
}

/* A multi-pattern for a side that lacks some bound variables: the side plus,
 * for each missing variable, the smallest term of the other side holding it.
 * The window axioms need it: in conv(s, same, none, conv(s1, p, c, x, y),
 * Iconv k) = conv(s, p, c, x, y) the right side has no k, yet a proof must
 * rewrite right to left; {conv(s, p, c, x, y), Iconv k} fires for each
 * Iconv term present (A21's enlarge gets the same).  0 when none. */
static unsigned multi_pattern(Z3_context c, Z3_ast side, Z3_ast other, const varmap *vm, Z3_pattern *out)
{
    Z3_ast terms[8];
    unsigned n = 0;
    terms[n++] = side;
    for (int i = 0; i < vm->n; i++) {
        Z3_ast v = Z3_app_to_ast(c, vm->app[i]);
        bool have = false;
        for (unsigned t = 0; t < n && !have; t++) have = contains(c, terms[t], v);
        if (have) continue;
        Z3_ast p = parent_of(c, other, v);
        if (!p || n == 8 || Z3_is_eq_ast(c, p, other)) return 0;
        terms[n++] = p;
    }
    if (n == 1) return 0;
    *out = Z3_mk_pattern(c, n, terms);
    return 1;
}

/* forall vars. lhs = rhs, triggered by either side (by the left only with
 * lhs_only).  NULL on a parse error. */
static Z3_ast axiom_formula(ts_prover *p, const char *lhs_text, const char *rhs_text, bool lhs_only,
                            ts_error *err)
{
    ts_aterm *lt = NULL, *rt = NULL;
    Z3_ast f = NULL;
    if (ts_aterm_parse(lhs_text, &lt, err) || ts_aterm_parse(rhs_text, &rt, err)) goto done;
    varmap vm = {0};
    Z3_ast l = aterm_z3(p, lt, &vm, "ax."), r = aterm_z3(p, rt, &vm, "ax.");
    if (!l || !r) {
        ts_error_set(err, TS_ERR_INVALID, "axiom %s = %s: too many variables", lhs_text, rhs_text);
        goto done;
    }
    Z3_ast eq = Z3_mk_eq(p->ctx, l, r);
    if (vm.n == 0) {
        f = eq;
        goto done;
    }
    Z3_pattern pats[2];
    unsigned np = 0;
    Z3_ast sides[2] = {l, r};
    for (int i = 0; i < (lhs_only ? 1 : 2); i++) {
        if (is_var(p->ctx, sides[i], &vm)) continue;
        if (covers(p->ctx, sides[i], &vm)) pats[np++] = Z3_mk_pattern(p->ctx, 1, &sides[i]);
        else np += multi_pattern(p->ctx, sides[i], sides[1 - i], &vm, &pats[np]);
    }
    /* Neither side names every variable nor has a smaller term for the
     * missing ones (K4: crop(x, y, r) = crop(x, z, r)): the axiom only
     * joins two terms that both exist, so both sides are the pattern. */
    if (!np && !is_var(p->ctx, l, &vm) && !is_var(p->ctx, r, &vm)) pats[np++] = Z3_mk_pattern(p->ctx, 2, sides);
    if (!np) {
        ts_error_set(err, TS_ERR_INVALID, "axiom %s = %s: no side can serve as a trigger", lhs_text, rhs_text);
        goto done;
    }
    f = Z3_mk_forall_const(p->ctx, 0, (unsigned)vm.n, vm.app, np, pats, eq);
done:
    ts_aterm_free(lt);
    ts_aterm_free(rt);
    return f;
}

ts_prover *ts_prover_new(ts_error *err)
{
    if (!xz3_load(err)) return NULL; /* every Z3 call goes through a prover */
    ts_prover *p = calloc(1, sizeof *p);
    if (!p) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    Z3_config cfg = Z3_mk_config();
    p->ctx = Z3_mk_context(cfg);
    Z3_del_config(cfg);
    if (!p->ctx) {
        free(p);
        ts_error_set(err, TS_ERR_NOMEM, "cannot create a Z3 context");
        return NULL;
    }
    Z3_set_error_handler(p->ctx, on_z3_error);
    p->tensor = Z3_mk_uninterpreted_sort(p->ctx, Z3_mk_string_symbol(p->ctx, "Tensor"));
    p->param = Z3_mk_uninterpreted_sort(p->ctx, Z3_mk_string_symbol(p->ctx, "Param"));
    for (int op = 1; op < TS_ROP_COUNT; op++) {
        const ts_ropinfo *info = ts_rop_info((ts_rop)op);
        Z3_sort dom[8];
        unsigned n = 0;
        for (unsigned bit = 1; bit <= TS_RPARAM_LAST; bit <<= 1)
            if (info->params & bit) dom[n++] = p->param;
        for (int i = 0; i < info->nargs; i++) dom[n++] = p->tensor;
        p->fn[op] = Z3_mk_func_decl(p->ctx, Z3_mk_string_symbol(p->ctx, info->atom), n, dom, p->tensor);
    }
    p->naxioms = ts_axioms_count();
    p->axioms = calloc((size_t)p->naxioms, sizeof *p->axioms);
    p->theory = calloc((size_t)p->naxioms, sizeof *p->theory);
    if (!p->axioms || !p->theory) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < p->naxioms; i++) {
        const ts_axiom *ax = ts_axiom_at(i);
        p->theory[i] = ts_axiom_theories(i);
        if (!(p->axioms[i] = axiom_formula(p, ax->lhs, ax->rhs, ts_axiom_flags(i) & TS_AXIOM_LHS_TRIGGER, err))) {
            ts_error_prefix(err, "axiom %s", ax->name);
            goto fail;
        }
    }
    if (Z3_get_error_code(p->ctx) != Z3_OK) {
        ts_error_set(err, TS_ERR_INVALID, "Z3: %s", Z3_get_error_msg(p->ctx, Z3_get_error_code(p->ctx)));
        goto fail;
    }
    p->naxnums = p->nnums;
    return p;
fail:
    ts_prover_free(p);
    return NULL;
}

void ts_prover_free(ts_prover *p)
{
    if (!p) return;
    free(p->axioms);
    free(p->theory);
    Z3_del_context(p->ctx);
    free(p);
}

/* Asserts the axioms of `theory` (but `skip`) and not(goal); unsat means
 * proved. */
static ts_proof prove(ts_prover *p, Z3_ast goal, unsigned theory, int skip, bool mbqi, unsigned timeout_ms, char *why,
                      size_t n)
{
    Z3_context c = p->ctx;
    Z3_solver s = Z3_mk_simple_solver(c);
    Z3_solver_inc_ref(c, s);
    Z3_params prm = Z3_mk_params(c);
    Z3_params_inc_ref(c, prm);
    Z3_params_set_uint(c, prm, Z3_mk_string_symbol(c, "timeout"), timeout_ms ? timeout_ms : 1);
    Z3_params_set_bool(c, prm, Z3_mk_string_symbol(c, "mbqi"), mbqi);
    /* Bounds on instantiations and memory as well as on time: a few rules
     * (conv of sums of sums) make E-matching grow the E-graph by gigabytes
     * between two timeout checks; proofs need far fewer instances. */
    Z3_params_set_uint(c, prm, Z3_mk_string_symbol(c, "qi.max_instances"), 50000);
    Z3_params_set_uint(c, prm, Z3_mk_string_symbol(c, "max_memory"), 2048);
    Z3_solver_set_params(c, s, prm);
    for (int i = 0; i < p->naxioms; i++)
        if (i != skip && (p->theory[i] & theory)) Z3_solver_assert(c, s, p->axioms[i]);
    number_facts(p, s);
    Z3_solver_assert(c, s, Z3_mk_not(c, goal));
    Z3_lbool r = Z3_solver_check(c, s);
    ts_proof res;
    if (r == Z3_L_FALSE) {
        res = TS_PROOF_PROVED;
        if (why && n) why[0] = 0;
    } else if (r == Z3_L_TRUE) {
        res = TS_PROOF_FAILED;
        if (why) snprintf(why, n, "counter-model");
    } else {
        const char *reason = Z3_solver_get_reason_unknown(c, s);
        res = strstr(reason, "timeout") || strstr(reason, "canceled") ? TS_PROOF_TIMEOUT : TS_PROOF_FAILED;
        if (why) snprintf(why, n, "%s", reason);
    }
    Z3_params_dec_ref(c, prm);
    Z3_solver_dec_ref(c, s);
    return res;
}

static bool rexpr_has_split(const ts_rexpr *e)
{
    if (e->op == TS_ROP_SPLIT0 || e->op == TS_ROP_SPLIT1) return true;
    for (int i = 0; i < e->nargs; i++)
        if (rexpr_has_split(e->arg[i])) return true;
    return false;
}

static bool aterm_has_split(const ts_aterm *t)
{
    if (t->kind == TS_AT_OP && (t->op == TS_ROP_SPLIT0 || t->op == TS_ROP_SPLIT1)) return true;
    for (int i = 0; i < t->nt; i++)
        if (aterm_has_split(t->t[i])) return true;
    return false;
}

ts_proof ts_prover_prove_rule(ts_prover *p, const ts_rule *r, unsigned timeout_ms, bool mbqi, char *why,
                              size_t n)
{
    /* The theory follows from the rule: without split, A28/A29 could never
     * fire (no axiom makes a split term), and concat associativity may be
     * used; with split, associativity must not be (it contradicts A28). */
    unsigned theory = TS_THEORY_SPLIT_FREE;
    for (int i = 0; i < r->nout; i++)
        if (rexpr_has_split(r->lhs[i]) || rexpr_has_split(r->rhs[i])) theory = TS_THEORY_SPLIT;
    varmap vm = {0};
    Z3_ast eqs[64];
    p->nnums = p->naxnums;
    if (r->nout > 64) {
        if (why) snprintf(why, n, "more than 64 outputs");
        return TS_PROOF_FAILED;
    }
    for (int i = 0; i < r->nout; i++) {
        Z3_ast l = rexpr_z3(p, r->lhs[i], &vm), rr = rexpr_z3(p, r->rhs[i], &vm);
        if (!l || !rr) {
            if (why) snprintf(why, n, "more than %d variables", MAX_VARS);
            return TS_PROOF_FAILED;
        }
        eqs[i] = Z3_mk_eq(p->ctx, l, rr);
    }
    Z3_ast goal = r->nout == 1 ? eqs[0] : Z3_mk_and(p->ctx, (unsigned)r->nout, eqs);
    /* E-matching alone first: it proves nearly every rule in milliseconds
     * and stops quickly on a wrong one.  When it saturates without a proof,
     * model-based instantiation gets the rest of the time: it can find the
     * proofs that need terms no trigger produces (matmul(smul(x,w),y) via
     * transposes), and counter-models for wrong rules. */
    double t0 = ts_clock_ms();
    ts_proof res = prove(p, goal, theory, -1, false, timeout_ms, why, n);
    if (res != TS_PROOF_FAILED || !mbqi) return res;
    double used = ts_clock_ms() - t0;
    if (used + 1 >= (double)timeout_ms) return res;
    return prove(p, goal, theory, -1, true, timeout_ms - (unsigned)used, why, n);
}

ts_proof ts_prover_prove_text(ts_prover *p, const char *lhs, const char *rhs, int skip, bool mbqi,
                              unsigned timeout_ms, char *why, size_t n)
{
    return ts_prover_prove_text_in(p, 0, lhs, rhs, skip, mbqi, timeout_ms, why, n);
}

ts_proof ts_prover_prove_text_in(ts_prover *p, unsigned theory, const char *lhs, const char *rhs, int skip,
                                 bool mbqi, unsigned timeout_ms, char *why, size_t n)
{
    ts_aterm *lt = NULL, *rt = NULL;
    ts_error err = {0};
    ts_proof res = TS_PROOF_FAILED;
    if (ts_aterm_parse(lhs, &lt, &err) || ts_aterm_parse(rhs, &rt, &err)) {
        if (why) snprintf(why, n, "%s", err.msg);
        goto done;
    }
    /* The variables become free constants: proving the equality for
     * arbitrary (skolem) values proves it for all. */
    varmap vm = {0};
    p->nnums = p->naxnums;
    Z3_ast l = aterm_z3(p, lt, &vm, "sk."), r = aterm_z3(p, rt, &vm, "sk.");
    if (!l || !r) goto done;
    if (!theory) theory = aterm_has_split(lt) || aterm_has_split(rt) ? TS_THEORY_SPLIT : TS_THEORY_SPLIT_FREE;
    res = prove(p, Z3_mk_eq(p->ctx, l, r), theory, skip, mbqi, timeout_ms, why, n);
done:
    ts_aterm_free(lt);
    ts_aterm_free(rt);
    return res;
}

/* ------------------------------------------------------------ driver */

typedef struct job {
    const ts_rule *rules;
    int n;
    const ts_verify_opts *o;
    ts_rule_result *res;
    int next;
    pthread_mutex_t lock;
    ts_error err;
    bool failed;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    ts_error err = {0};
    ts_prover *p = ts_prover_new(&err);
    if (!p) {
        pthread_mutex_lock(&j->lock);
        if (!j->failed) j->err = err;
        j->failed = true;
        pthread_mutex_unlock(&j->lock);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int i = j->failed ? j->n : j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->n) break;
        double t0 = ts_clock_s();
        ts_rule_result *r = &j->res[i];
        r->proof = ts_prover_prove_rule(p, &j->rules[i], j->o->timeout_ms, j->o->mbqi, r->why, sizeof r->why);
        r->secs = ts_clock_s() - t0;
    }
    ts_prover_free(p);
    return NULL;
}

ts_status ts_verify_rules(const ts_rule *rules, int n, const ts_verify_opts *o, ts_rule_result *res,
                          ts_error *err)
{
    job j = {.rules = rules, .n = n, .o = o, .res = res};
    pthread_mutex_init(&j.lock, NULL);
    int nt = o->threads < 1 ? 1 : o->threads > 256 ? 256 : o->threads;
    if (nt > n) nt = n > 0 ? n : 1;
    pthread_t th[256];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&th[started], NULL, worker, &j)) break;
        started++;
    }
    worker(&j);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.failed) {
        *err = j.err;
        return err->code ? err->code : TS_ERR_INVALID;
    }
    return TS_OK;
}
