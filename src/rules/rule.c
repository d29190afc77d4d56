/* Rule file reader and writer (syntax: docs/rules.md).
 *
 * Reading goes in two steps: the text becomes a generic s-expression tree
 * (lists and atoms, each with its line number), then each (rule ...) list is
 * turned into a ts_rule.  Keeping the steps apart gives every error a line
 * number without threading the tokenizer through the rule grammar. */
#include "rules/rule.h"

#include <ctype.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The atom table lives in atom.c; the reader and writer use its text
 * columns (atom, params, nargs, constant). */
#define OPS ts_rop_table

static const char *CONS_ATOMS[TS_RCONS_COUNT] = {"same-shape", "weight"};
static const int CONS_NVARS[TS_RCONS_COUNT] = {2, 1};

/* ---- expressions ---- */

ts_rexpr *ts_rexpr_var(const char *name)
{
    ts_rexpr *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->op = TS_ROP_VAR;
    e->var = strdup(name);
    if (!e->var) {
        free(e);
        return NULL;
    }
    return e;
}

ts_rexpr *ts_rexpr_op3(ts_rop op, const ts_rparams *p, ts_rexpr *a, ts_rexpr *b, ts_rexpr *c)
{
    int nargs = OPS[op].nargs;
    bool missing = (nargs >= 1 && !a) || (nargs >= 2 && !b) || (nargs >= 3 && !c);
    ts_rexpr *e = missing ? NULL : calloc(1, sizeof *e);
    if (!e) {
        ts_rexpr_free(a);
        ts_rexpr_free(b);
        ts_rexpr_free(c);
        return NULL;
    }
    e->op = op;
    if (p) e->p = *p;
    e->nargs = nargs;
    e->arg[0] = a;
    e->arg[1] = b;
    e->arg[2] = c;
    return e;
}

ts_rexpr *ts_rexpr_op(ts_rop op, const ts_rparams *p, ts_rexpr *a, ts_rexpr *b)
{
    return ts_rexpr_op3(op, p, a, b, NULL);
}

ts_rexpr *ts_rexpr_clone(const ts_rexpr *e)
{
    if (!e) return NULL;
    if (e->op == TS_ROP_VAR) return ts_rexpr_var(e->var);
    ts_rexpr *a[3] = {NULL, NULL, NULL};
    for (int i = 0; i < e->nargs; i++)
        if (!(a[i] = ts_rexpr_clone(e->arg[i]))) {
            for (int j = 0; j < i; j++) ts_rexpr_free(a[j]);
            return NULL;
        }
    return ts_rexpr_op3(e->op, &e->p, a[0], a[1], a[2]);
}

void ts_rexpr_free(ts_rexpr *e)
{
    if (!e) return;
    for (int i = 0; i < e->nargs; i++) ts_rexpr_free(e->arg[i]);
    free(e->var);
    free(e);
}

static bool params_equal(ts_rop op, const ts_rparams *a, const ts_rparams *b)
{
    unsigned m = OPS[op].params;
    if ((m & TS_RPARAM_KERNEL) && (a->kh != b->kh || a->kw != b->kw)) return false;
    if ((m & TS_RPARAM_STRIDE) && a->stride != b->stride) return false;
    if ((m & TS_RPARAM_PAD) && a->pad != b->pad) return false;
    if ((m & TS_RPARAM_ACT) && a->act != b->act) return false;
    if ((m & TS_RPARAM_AXIS) && a->axis != b->axis) return false;
    if ((m & TS_RPARAM_MULT) && a->mult != b->mult) return false;
    if ((m & TS_RPARAM_AXES) && a->axes != b->axes) return false;
    if ((m & TS_RPARAM_VALUE) && a->value != b->value) return false;
    return true;
}

bool ts_rexpr_equal(const ts_rexpr *a, const ts_rexpr *b)
{
    if (a->op != b->op) return false;
    if (a->op == TS_ROP_VAR) return !strcmp(a->var, b->var);
    if (!params_equal(a->op, &a->p, &b->p)) return false;
    for (int i = 0; i < a->nargs; i++)
        if (!ts_rexpr_equal(a->arg[i], b->arg[i])) return false;
    return true;
}

int ts_rexpr_count_ops(const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR || OPS[e->op].constant) return 0;
    int n = 1;
    for (int i = 0; i < e->nargs; i++) n += ts_rexpr_count_ops(e->arg[i]);
    return n;
}

/* Appends to a bounded buffer, counting what would have been written. */
typedef struct sbuf {
    char *buf;
    size_t cap, len;
} sbuf;

static void sb_puts(sbuf *s, const char *t)
{
    size_t n = strlen(t);
    if (s->len + 1 < s->cap) {
        size_t room = s->cap - s->len - 1;
        memcpy(s->buf + s->len, t, n < room ? n : room);
        s->buf[s->len + (n < room ? n : room)] = 0;
    }
    s->len += n;
}

static void format_params(sbuf *s, const ts_rexpr *e)
{
    unsigned m = OPS[e->op].params;
    char t[32];
    if (m & TS_RPARAM_KERNEL) {
        if (e->p.kh == e->p.kw) snprintf(t, sizeof t, " k%d", e->p.kh);
        else snprintf(t, sizeof t, " k%dx%d", e->p.kh, e->p.kw);
        sb_puts(s, t);
    }
    if (m & TS_RPARAM_STRIDE) {
        snprintf(t, sizeof t, " s%d", e->p.stride);
        sb_puts(s, t);
    }
    if (m & TS_RPARAM_PAD) sb_puts(s, e->p.pad == TS_RPAD_SAME ? " same" : " valid");
    if (m & TS_RPARAM_ACT) sb_puts(s, e->p.act == TS_RACT_NONE ? " none" : " relu");
    if (m & TS_RPARAM_AXIS) {
        snprintf(t, sizeof t, " %d", e->p.axis);
        sb_puts(s, t);
    }
    if (m & TS_RPARAM_MULT) {
        snprintf(t, sizeof t, " m%d", e->p.mult);
        sb_puts(s, t);
    }
    if (m & TS_RPARAM_AXES) {
        sb_puts(s, " ");
        sb_puts(s, ts_raxes_format(e->p.axes, t, sizeof t));
    }
}

const char *ts_raxes_format(int mask, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "r");
    for (int a = -8; a < 8 && off < n; a++)
        if (mask & ts_raxes_bit(a))
            off += (size_t)snprintf(buf + off, n - off, "%s%d", off > 1 ? "," : "", a);
    return buf;
}

bool ts_raxes_parse(const char *t, int *mask)
{
    if (t[0] != 'r' || !t[1]) return false;
    *mask = 0;
    for (const char *q = t + 1; *q;) {
        char *end;
        errno = 0;
        long a = strtol(q, &end, 10);
        if (end == q || errno || a < -8 || a > 7 || (*end && *end != ',')) return false;
        if (*mask & ts_raxes_bit((int)a)) return false;
        *mask |= ts_raxes_bit((int)a);
        q = *end ? end + 1 : end;
        if (*end && !*q) return false;
    }
    return true;
}

const char *ts_rnum_format(float v, char *buf, size_t n)
{
    /* 9 significant digits name a float32 exactly */
    snprintf(buf, n, "%.9g", (double)v);
    return buf;
}

bool ts_rnum_parse(const char *t, float *v)
{
    if (!isdigit((unsigned char)t[0]) && !((t[0] == '-' || t[0] == '.') && isdigit((unsigned char)t[1])) &&
        !(t[0] == '-' && t[1] == '.' && isdigit((unsigned char)t[2])))
        return false;
    char *end;
    errno = 0;
    double d = strtod(t, &end);
    if (*end || errno || !isfinite(d)) return false;
    *v = (float)d;
    return isfinite(*v);
}

static void format_expr(sbuf *s, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) {
        sb_puts(s, "?");
        sb_puts(s, e->var);
        return;
    }
    /* Constants without parameters are bare atoms, numbers bare numbers;
     * everything else a list. */
    if (OPS[e->op].constant && !OPS[e->op].params) {
        sb_puts(s, OPS[e->op].atom);
        return;
    }
    if (e->op == TS_ROP_NUM) {
        char t[32];
        sb_puts(s, ts_rnum_format(e->p.value, t, sizeof t));
        return;
    }
    sb_puts(s, "(");
    sb_puts(s, OPS[e->op].atom);
    format_params(s, e);
    for (int i = 0; i < e->nargs; i++) {
        sb_puts(s, " ");
        format_expr(s, e->arg[i]);
    }
    sb_puts(s, ")");
}

size_t ts_rexpr_format(char *buf, size_t n, const ts_rexpr *e)
{
    sbuf s = {buf, n, 0};
    if (n) buf[0] = 0;
    format_expr(&s, e);
    return s.len;
}

void ts_rexpr_print(FILE *f, const ts_rexpr *e)
{
    char small[512];
    size_t len = ts_rexpr_format(small, sizeof small, e);
    if (len < sizeof small) {
        fputs(small, f);
        return;
    }
    char *big = malloc(len + 1);
    if (!big) return;
    ts_rexpr_format(big, len + 1, e);
    fputs(big, f);
    free(big);
}

void ts_rule_free(ts_rule *r)
{
    if (!r) return;
    for (int i = 0; i < r->nout; i++) {
        if (r->lhs) ts_rexpr_free(r->lhs[i]);
        if (r->rhs) ts_rexpr_free(r->rhs[i]);
    }
    free(r->lhs);
    free(r->rhs);
    for (int i = 0; i < r->ncons; i++)
        for (int j = 0; j < r->cons[i].nvars; j++) free(r->cons[i].var[j]);
    free(r->cons);
    free(r->name);
    memset(r, 0, sizeof *r);
}

void ts_rules_free(ts_rule *rules, int n)
{
    if (!rules) return;
    for (int i = 0; i < n; i++) ts_rule_free(&rules[i]);
    free(rules);
}

void ts_rule_print(FILE *f, const ts_rule *r)
{
    fprintf(f, "(rule %s\n  (lhs", r->name);
    for (int i = 0; i < r->nout; i++) {
        fputc(' ', f);
        ts_rexpr_print(f, r->lhs[i]);
    }
    fputs(")\n  (rhs", f);
    for (int i = 0; i < r->nout; i++) {
        fputc(' ', f);
        ts_rexpr_print(f, r->rhs[i]);
    }
    fputc(')', f);
    if (r->ncons) {
        fputs("\n  (where", f);
        for (int i = 0; i < r->ncons; i++) {
            fprintf(f, " (%s", CONS_ATOMS[r->cons[i].kind]);
            for (int j = 0; j < r->cons[i].nvars; j++) fprintf(f, " ?%s", r->cons[i].var[j]);
            fputc(')', f);
        }
        fputc(')', f);
    }
    fputs(")\n", f);
}

/* ---- checks ---- */

static bool var_in(const ts_rexpr *e, const char *name)
{
    if (e->op == TS_ROP_VAR) return !strcmp(e->var, name);
    for (int i = 0; i < e->nargs; i++)
        if (var_in(e->arg[i], name)) return true;
    return false;
}

static bool var_in_lhs(const ts_rule *r, const char *name)
{
    for (int i = 0; i < r->nout; i++)
        if (var_in(r->lhs[i], name)) return true;
    return false;
}

static bool vars_in_rhs(const ts_rule *r, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) {
        for (int i = 0; i < r->nout; i++)
            if (var_in(r->rhs[i], e->var)) return true;
        return false;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!vars_in_rhs(r, e->arg[i])) return false;
    return true;
}

static bool reversible(const ts_rule *r)
{
    for (int i = 0; i < r->nout; i++)
        if (r->rhs[i]->op == TS_ROP_VAR || !vars_in_rhs(r, r->lhs[i])) return false;
    return true;
}

static ts_status reverse_into(const ts_rule *r, ts_rule *o)
{
    memset(o, 0, sizeof *o);
    size_t len = strlen(r->name) + 5;
    o->nout = r->nout;
    o->line = r->line;
    o->name = malloc(len);
    o->lhs = calloc((size_t)r->nout, sizeof *o->lhs);
    o->rhs = calloc((size_t)r->nout, sizeof *o->rhs);
    o->cons = r->ncons ? calloc((size_t)r->ncons, sizeof *o->cons) : NULL;
    if (!o->name || !o->lhs || !o->rhs || (r->ncons && !o->cons)) return TS_ERR_NOMEM;
    snprintf(o->name, len, "%s~rev", r->name);
    for (int i = 0; i < r->nout; i++)
        if (!(o->lhs[i] = ts_rexpr_clone(r->rhs[i])) || !(o->rhs[i] = ts_rexpr_clone(r->lhs[i]))) return TS_ERR_NOMEM;
    for (int i = 0; i < r->ncons; i++, o->ncons++) {
        o->cons[i].kind = r->cons[i].kind;
        for (int j = 0; j < r->cons[i].nvars; j++, o->cons[i].nvars++)
            if (!(o->cons[i].var[j] = strdup(r->cons[i].var[j]))) return TS_ERR_NOMEM;
    }
    return TS_OK;
}

ts_status ts_rules_add_reverses(ts_rule **rules, int *n, int *added, ts_error *err)
{
    int cnt = 0;
    *added = 0;
    for (int i = 0; i < *n; i++) cnt += reversible(&(*rules)[i]);
    if (!cnt) return TS_OK;
    ts_rule *all = realloc(*rules, sizeof *all * (size_t)(*n + cnt));
    if (!all) return ts_error_set(err, TS_ERR_NOMEM, "out of memory reversing rules");
    *rules = all;
    for (int i = 0, m = *n; i < m; i++) {
        if (!reversible(&all[i])) continue;
        if (reverse_into(&all[i], &all[*n])) {
            ts_rule_free(&all[*n]);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory reversing rules");
        }
        ++*n;
        ++*added;
    }
    return TS_OK;
}

static const char *first_unbound(const ts_rule *r, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) return var_in_lhs(r, e->var) ? NULL : e->var;
    for (int i = 0; i < e->nargs; i++) {
        const char *v = first_unbound(r, e->arg[i]);
        if (v) return v;
    }
    return NULL;
}

static const char *bad_params(const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) return NULL;
    unsigned m = OPS[e->op].params;
    if ((m & TS_RPARAM_KERNEL) && (e->p.kh < 1 || e->p.kw < 1)) return "kernel must be positive";
    if ((m & TS_RPARAM_STRIDE) && e->p.stride < 1) return "stride must be positive";
    if ((m & TS_RPARAM_AXIS) && e->p.axis < 0) return "axis must be non-negative";
    if ((m & TS_RPARAM_MULT) && e->p.mult < 1) return "channels per group must be positive";
    if ((m & TS_RPARAM_AXES) && !e->p.axes) return "a reduction needs axes";
    for (int i = 0; i < e->nargs; i++) {
        const char *w = bad_params(e->arg[i]);
        if (w) return w;
    }
    return NULL;
}

ts_status ts_rule_check(const ts_rule *r, ts_error *err)
{
    if (r->nout < 1) return ts_error_set(err, TS_ERR_INVALID, "rule %s: no outputs", r->name);
    for (int i = 0; i < r->nout; i++) {
        const ts_rexpr *sides[2] = {r->lhs[i], r->rhs[i]};
        for (int s = 0; s < 2; s++) {
            const char *w = bad_params(sides[s]);
            if (w) return ts_error_set(err, TS_ERR_INVALID, "rule %s: %s", r->name, w);
        }
        const char *v = first_unbound(r, r->rhs[i]);
        if (v)
            return ts_error_set(err, TS_ERR_INVALID, "rule %s: variable ?%s of rhs is not in lhs",
                                r->name, v);
    }
    for (int i = 0; i < r->ncons; i++)
        for (int j = 0; j < r->cons[i].nvars; j++)
            if (!var_in_lhs(r, r->cons[i].var[j]))
                return ts_error_set(err, TS_ERR_INVALID,
                                    "rule %s: variable ?%s of (where ...) is not in lhs", r->name,
                                    r->cons[i].var[j]);
    return TS_OK;
}

/* ---- reading: text -> s-expressions ---- */

typedef struct sx {
    bool list;
    int line;
    char *atom; /* !list */
    int n;      /* list */
    struct sx **items;
} sx;

static void sx_free(sx *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) sx_free(s->items[i]);
    free(s->items);
    free(s->atom);
    free(s);
}

typedef struct reader {
    const char *p;
    int line;
    const char *name;
    ts_error *err;
    int depth;
} reader;

static ts_status rd_error(reader *rd, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ts_status rd_error(reader *rd, int line, const char *fmt, ...)
{
    char what[sizeof rd->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* the message may be cut at the end of err->msg: acceptable */
    return ts_error_set(rd->err, TS_ERR_PARSE, "%s:%d: %.*s", rd->name, line, 900, what);
}

static void skip_space(reader *rd)
{
    for (;;) {
        if (*rd->p == '\n') {
            rd->line++;
            rd->p++;
        } else if (isspace((unsigned char)*rd->p)) {
            rd->p++;
        } else if (*rd->p == ';') {
            while (*rd->p && *rd->p != '\n') rd->p++;
        } else {
            return;
        }
    }
}

static bool atom_char(char c)
{
    return c && !isspace((unsigned char)c) && c != '(' && c != ')' && c != ';';
}

/* Reads one s-expression; NULL with rd->err set on error. */
static sx *read_sx(reader *rd)
{
    skip_space(rd);
    sx *s = calloc(1, sizeof *s);
    if (!s) {
        ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->line = rd->line;
    if (*rd->p == ')') {
        rd_error(rd, rd->line, "unexpected ')'");
        free(s);
        return NULL;
    }
    if (*rd->p != '(') {
        const char *b = rd->p;
        while (atom_char(*rd->p)) rd->p++;
        s->atom = strndup(b, (size_t)(rd->p - b));
        if (!s->atom) {
            ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
            free(s);
            return NULL;
        }
        return s;
    }
    /* A rule is a few levels deep; a bound keeps hostile input off the stack. */
    if (++rd->depth > 64) {
        rd_error(rd, rd->line, "expression nested too deeply");
        free(s);
        return NULL;
    }
    rd->p++;
    s->list = true;
    int cap = 0;
    for (;;) {
        skip_space(rd);
        if (!*rd->p) {
            rd_error(rd, s->line, "'(' is never closed");
            sx_free(s);
            return NULL;
        }
        if (*rd->p == ')') {
            rd->p++;
            break;
        }
        sx *it = read_sx(rd);
        if (!it) {
            sx_free(s);
            return NULL;
        }
        if (s->n == cap) {
            cap = cap ? 2 * cap : 4;
            sx **ni = realloc(s->items, (size_t)cap * sizeof *ni);
            if (!ni) {
                sx_free(it);
                sx_free(s);
                ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
                return NULL;
            }
            s->items = ni;
        }
        s->items[s->n++] = it;
    }
    rd->depth--;
    return s;
}

/* ---- reading: s-expressions -> rules ---- */

static bool parse_int(const char *t, int *out)
{
    if (!isdigit((unsigned char)*t)) return false;
    char *end;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (*end || errno || v > 1 << 20) return false;
    *out = (int)v;
    return true;
}

static bool parse_param(unsigned kind, const char *t, ts_rparams *p)
{
    switch (kind) {
    case TS_RPARAM_KERNEL: {
        if (t[0] != 'k') return false;
        const char *x = strchr(t + 1, 'x');
        if (!x) {
            if (!parse_int(t + 1, &p->kh)) return false;
            p->kw = p->kh;
            return p->kh > 0;
        }
        char h[16];
        size_t n = (size_t)(x - (t + 1));
        if (n == 0 || n >= sizeof h) return false;
        memcpy(h, t + 1, n);
        h[n] = 0;
        return parse_int(h, &p->kh) && parse_int(x + 1, &p->kw) && p->kh > 0 && p->kw > 0;
    }
    case TS_RPARAM_STRIDE:
        return t[0] == 's' && parse_int(t + 1, &p->stride) && p->stride > 0;
    case TS_RPARAM_PAD:
        if (!strcmp(t, "same")) p->pad = TS_RPAD_SAME;
        else if (!strcmp(t, "valid")) p->pad = TS_RPAD_VALID;
        else return false;
        return true;
    case TS_RPARAM_ACT:
        if (!strcmp(t, "none")) p->act = TS_RACT_NONE;
        else if (!strcmp(t, "relu")) p->act = TS_RACT_RELU;
        else return false;
        return true;
    case TS_RPARAM_AXIS:
        return parse_int(t, &p->axis);
    case TS_RPARAM_MULT:
        return t[0] == 'm' && parse_int(t + 1, &p->mult) && p->mult > 0;
    case TS_RPARAM_AXES:
        return ts_raxes_parse(t, &p->axes);
    case TS_RPARAM_VALUE:
        return ts_rnum_parse(t, &p->value);
    }
    return false;
}

static const char *param_name(unsigned kind)
{
    switch (kind) {
    case TS_RPARAM_KERNEL: return "a kernel (k3 or k3x5)";
    case TS_RPARAM_STRIDE: return "a stride (s1, s2)";
    case TS_RPARAM_PAD: return "a padding (same, valid)";
    case TS_RPARAM_ACT: return "an activation (none, relu)";
    case TS_RPARAM_MULT: return "output channels per group (m1, m4)";
    case TS_RPARAM_AXES: return "axes (r-1, r1, r2,3)";
    case TS_RPARAM_VALUE: return "a number";
    default: return "an axis (0, 1, ...)";
    }
}

static bool var_name_ok(const char *v)
{
    if (!*v) return false;
    for (; *v; v++)
        if (!isalnum((unsigned char)*v) && *v != '_' && *v != '-') return false;
    return true;
}

static ts_rexpr *to_expr(reader *rd, const sx *s)
{
    if (!s->list) {
        if (s->atom[0] == '?') {
            if (!var_name_ok(s->atom + 1)) {
                rd_error(rd, s->line, "bad variable name '%s'", s->atom);
                return NULL;
            }
            ts_rexpr *e = ts_rexpr_var(s->atom + 1);
            if (!e) ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
            return e;
        }
        ts_rparams num = {0};
        if (ts_rnum_parse(s->atom, &num.value)) {
            ts_rexpr *e = ts_rexpr_op(TS_ROP_NUM, &num, NULL, NULL);
            if (!e) ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
            return e;
        }
        ts_rop op = ts_rop_from_atom(s->atom);
        if (op != TS_ROP_COUNT && OPS[op].constant && !OPS[op].params) {
            ts_rexpr *e = ts_rexpr_op(op, NULL, NULL, NULL);
            if (!e) ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
            return e;
        }
        if (op != TS_ROP_COUNT)
            rd_error(rd, s->line, "operator '%s' must be written as a list, with its arguments", s->atom);
        else
            rd_error(rd, s->line, "expected an expression, found '%s'", s->atom);
        return NULL;
    }
    if (s->n == 0 || s->items[0]->list) {
        rd_error(rd, s->line, "expected an operator atom after '('");
        return NULL;
    }
    const char *atom = s->items[0]->atom;
    ts_rop op = ts_rop_from_atom(atom);
    if (op == TS_ROP_COUNT) {
        rd_error(rd, s->items[0]->line, "unknown operator '%s'", atom);
        return NULL;
    }
    const ts_ropinfo *info = &OPS[op];
    int k = 1;
    ts_rparams p = {0};
    for (unsigned bit = 1; bit <= TS_RPARAM_LAST; bit <<= 1) {
        if (!(info->params & bit)) continue;
        if (k >= s->n || s->items[k]->list || !parse_param(bit, s->items[k]->atom, &p)) {
            char what[128];
            snprintf(what, sizeof what, "%s: expected %s", atom, param_name(bit));
            rd_error(rd, k < s->n ? s->items[k]->line : s->line, "%s", what);
            return NULL;
        }
        k++;
    }
    if (s->n - k != info->nargs) {
        char what[128];
        snprintf(what, sizeof what, "%s takes %d tensor argument%s, found %d", atom, info->nargs,
                 info->nargs == 1 ? "" : "s", s->n - k);
        rd_error(rd, s->line, "%s", what);
        return NULL;
    }
    ts_rexpr *a[3] = {NULL, NULL, NULL};
    for (int i = 0; i < info->nargs; i++) {
        a[i] = to_expr(rd, s->items[k + i]);
        if (!a[i]) {
            for (int j = 0; j < i; j++) ts_rexpr_free(a[j]);
            return NULL;
        }
    }
    ts_rexpr *e = ts_rexpr_op3(op, &p, a[0], a[1], a[2]);
    if (!e) ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
    return e;
}

static bool is_head(const sx *s, const char *head)
{
    return s->list && s->n > 0 && !s->items[0]->list && !strcmp(s->items[0]->atom, head);
}

static ts_status to_exprs(reader *rd, const sx *s, ts_rexpr ***out, int *n)
{
    *n = s->n - 1;
    if (*n < 1) return rd_error(rd, s->line, "(%s) holds no expression", s->items[0]->atom);
    *out = calloc((size_t)*n, sizeof **out);
    if (!*out) return ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < *n; i++)
        if (!((*out)[i] = to_expr(rd, s->items[i + 1]))) return rd->err->code;
    return TS_OK;
}

static ts_status to_cons(reader *rd, const sx *s, ts_rule *r)
{
    r->cons = calloc((size_t)(s->n - 1 > 0 ? s->n - 1 : 1), sizeof *r->cons);
    if (!r->cons) return ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
    for (int i = 1; i < s->n; i++) {
        const sx *c = s->items[i];
        if (!c->list || c->n == 0 || c->items[0]->list)
            return rd_error(rd, c->line, "expected a constraint like (same-shape ?a ?b)");
        int kind = -1;
        for (int k = 0; k < TS_RCONS_COUNT; k++)
            if (!strcmp(CONS_ATOMS[k], c->items[0]->atom)) kind = k;
        if (kind < 0) return rd_error(rd, c->line, "unknown constraint '%s'", c->items[0]->atom);
        if (c->n - 1 != CONS_NVARS[kind]) {
            char what[96];
            snprintf(what, sizeof what, "%s takes %d variable%s", CONS_ATOMS[kind],
                     CONS_NVARS[kind], CONS_NVARS[kind] == 1 ? "" : "s");
            return rd_error(rd, c->line, "%s", what);
        }
        ts_rcons *rc = &r->cons[r->ncons++];
        rc->kind = (ts_rcons_kind)kind;
        for (int j = 0; j < CONS_NVARS[kind]; j++) {
            const sx *v = c->items[j + 1];
            if (v->list || v->atom[0] != '?' || !var_name_ok(v->atom + 1))
                return rd_error(rd, v->line, "%s: expected a variable ?name",
                                CONS_ATOMS[kind]);
            if (!(rc->var[j] = strdup(v->atom + 1)))
                return ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
            rc->nvars = j + 1;
        }
    }
    return TS_OK;
}

static ts_status to_rule(reader *rd, const sx *s, ts_rule *r)
{
    r->line = s->line;
    if (!is_head(s, "rule")) return rd_error(rd, s->line, "expected (rule NAME (lhs ...) (rhs ...))");
    if (s->n < 2 || s->items[1]->list)
        return rd_error(rd, s->line, "rule: expected a name after 'rule'");
    if (!(r->name = strdup(s->items[1]->atom)))
        return ts_error_set(rd->err, TS_ERR_NOMEM, "out of memory");
    const sx *lhs = NULL, *rhs = NULL, *where = NULL;
    for (int i = 2; i < s->n; i++) {
        const sx *c = s->items[i];
        const sx **slot = is_head(c, "lhs") ? &lhs : is_head(c, "rhs") ? &rhs
                        : is_head(c, "where") ? &where : NULL;
        if (!slot) return rd_error(rd, c->line, "rule %s: expected (lhs ...), (rhs ...) or (where ...)", r->name);
        if (*slot) return rd_error(rd, c->line, "repeated (%s ...) in one rule", c->items[0]->atom);
        *slot = c;
    }
    if (!lhs || !rhs) return rd_error(rd, s->line, "rule %s: needs both (lhs ...) and (rhs ...)", r->name);
    int nl, nr;
    ts_status st = to_exprs(rd, lhs, &r->lhs, &nl);
    r->nout = nl > 0 ? nl : 0;
    if (st) {
        if (!r->lhs) r->nout = 0;
        return st;
    }
    if (rhs->n - 1 != nl) {
        char what[160];
        snprintf(what, sizeof what, "rule %s: lhs has %d output%s, rhs %d", r->name, nl,
                 nl == 1 ? "" : "s", rhs->n - 1);
        return rd_error(rd, rhs->line, "%s", what);
    }
    st = to_exprs(rd, rhs, &r->rhs, &nr);
    if (st) return st;
    if (where && (st = to_cons(rd, where, r))) return st;
    ts_error local;
    if (ts_rule_check(r, &local)) return rd_error(rd, s->line, "%s", local.msg);
    return TS_OK;
}

ts_status ts_rules_parse_string(const char *text, const char *name, ts_rule **rules, int *n,
                                ts_error *err)
{
    ts_error local;
    if (!err) err = &local;
    *rules = NULL;
    *n = 0;
    reader rd = {text, 1, name ? name : "<string>", err, 0};
    size_t hl = strlen(TS_RULES_HEADER);
    if (strncmp(text, TS_RULES_HEADER, hl) || (text[hl] && text[hl] != '\n' && text[hl] != '\r'))
        return rd_error(&rd, 1, "first line must be '%s'", TS_RULES_HEADER);
    ts_rule *out = NULL;
    int cnt = 0, cap = 0;
    ts_status st = TS_OK;
    for (;;) {
        skip_space(&rd);
        if (!*rd.p) break;
        sx *s = read_sx(&rd);
        if (!s) {
            st = err->code;
            break;
        }
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            ts_rule *nr = realloc(out, (size_t)cap * sizeof *nr);
            if (!nr) {
                sx_free(s);
                st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
                break;
            }
            out = nr;
        }
        memset(&out[cnt], 0, sizeof out[cnt]);
        st = to_rule(&rd, s, &out[cnt]);
        cnt++;
        if (!st)
            for (int i = 0; i < cnt - 1; i++)
                if (!strcmp(out[i].name, out[cnt - 1].name)) {
                    char what[200];
                    snprintf(what, sizeof what, "rule name '%s' already used on line %d",
                             out[i].name, out[i].line);
                    st = rd_error(&rd, s->line, "%s", what);
                    break;
                }
        sx_free(s);
        if (st) break;
    }
    if (st) {
        ts_rules_free(out, cnt);
        return st;
    }
    *rules = out;
    *n = cnt;
    return TS_OK;
}

ts_status ts_rules_parse_file(const char *path, ts_rule **rules, int *n, ts_error *err)
{
    *rules = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ts_error_set(err, TS_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (len + 1 < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    bool rerr = ferror(f);
    fclose(f);
    if (!buf) return ts_error_set(err, TS_ERR_NOMEM, "%s: out of memory", path);
    if (rerr) {
        free(buf);
        return ts_error_set(err, TS_ERR_IO, "%s: read error", path);
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        free(buf);
        return ts_error_set(err, TS_ERR_PARSE, "%s: contains a NUL byte (not a rule file)", path);
    }
    ts_status st = ts_rules_parse_string(buf, path, rules, n, err);
    free(buf);
    return st;
}

/* ---- writing ---- */

void ts_rules_write_stream(FILE *f, const ts_rule *rules, int n, const char *comment)
{
    fprintf(f, "%s\n", TS_RULES_HEADER);
    if (comment) {
        const char *p = comment;
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            fprintf(f, "; %.*s\n", (int)len, p);
            p += len + (e ? 1 : 0);
        }
    }
    for (int i = 0; i < n; i++) ts_rule_print(f, &rules[i]);
}

ts_status ts_rules_write(const char *path, const ts_rule *rules, int n, const char *comment,
                         ts_error *err)
{
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(tmp, len, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        ts_status st = ts_error_set(err, TS_ERR_IO, "%s: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    fchmod(fd, 0644); /* mkstemp's 0600 would make the rule file private */
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return ts_error_set(err, TS_ERR_IO, "%s: %s", path, strerror(errno));
    }
    ts_rules_write_stream(f, rules, n, comment);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return ts_error_set(err, TS_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    free(tmp);
    return TS_OK;
}
