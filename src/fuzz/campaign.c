/* A fuzzing campaign: pair after pair until the time, pair or finding
 * budget is spent.  Pair i depends only on the campaign's seed and i (its
 * seed graph, the e-graph's limits in nodes and rounds, the extraction's
 * ties, the inputs), so two campaigns with one seed test the same pairs in
 * the same order; the time budget only decides how many. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "fuzz/fuzz.h"
#include "util/clock.h"

void ts_fuzz_pair_free(ts_fuzz_pair *p)
{
    ts_graph_free(p->original);
    ts_graph_free(p->variant);
    memset(p, 0, sizeof *p);
}

void ts_fuzz_opts_default(ts_fuzz_opts *o)
{
    memset(o, 0, sizeof *o);
    o->target.kind = TS_FUZZ_TARGET_TSOPT;
    o->target.tol = ts_fuzz_tol_default;
    o->target.optimizer = true;
    o->target.opt_budget = 2;
    o->target.eop_system_every = 32;
    o->seed = 1;
    o->time_s = 60;
}

/* A folder that already holds pairs or findings is not reused: a new
 * campaign's NNN would mix with the old ones. */
static bool holds_campaign(const char *dir)
{
    char p[1100];
    struct stat sb;
    snprintf(p, sizeof p, "%s/pairs", dir);
    if (!stat(p, &sb)) return true;
    snprintf(p, sizeof p, "%s/findings", dir);
    return !stat(p, &sb);
}

static ts_status write_summary(const ts_fuzz_opts *o, const ts_fuzz_stats *st, ts_error *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/summary.json", o->dir);
    char *js = ts_fuzz_stats_json(o, st);
    if (!js) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    FILE *f = fopen(path, "w");
    bool ok = f && fprintf(f, "%s\n", js) > 0;
    if (f && fclose(f)) ok = false;
    free(js);
    return ok ? TS_OK : ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
}

void ts_fuzz_signature(const ts_fuzz_verdict *v, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "%s:", v->stage);
    const char *p = v->what;
    while (*p && k + 3 < n) {
        size_t w = strcspn(p, " ");
        if (memchr(p, '/', w)) { /* a path */
            out[k++] = '?';
        } else {
            for (size_t i = 0; i < w && k + 3 < n; i++) {
                if (p[i] == '\'') {
                    const char *q = memchr(p + i + 1, '\'', w - i - 1);
                    out[k++] = '?';
                    if (q) i = (size_t)(q - p);
                    else break;
                } else if (p[i] >= '0' && p[i] <= '9') {
                    while (i + 1 < w && p[i + 1] >= '0' && p[i + 1] <= '9') i++;
                    out[k++] = '#';
                } else {
                    out[k++] = p[i];
                }
            }
        }
        p += w;
        while (*p == ' ' && k + 3 < n) out[k++] = *p++;
    }
    out[k < n ? k : n - 1] = 0;
}

typedef struct seen_set {
    char **sig;
    int n, cap;
} seen_set;

/* True when sig was seen before; else remembers it (false out of memory too). */
static bool seen_before(seen_set *s, const char *sig)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->sig[i], sig)) return true;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        char **g = realloc(s->sig, sizeof *g * (size_t)cap);
        if (!g) return false;
        s->sig = g, s->cap = cap;
    }
    if ((s->sig[s->n] = strdup(sig))) s->n++;
    return false;
}

/* Minimizes a finding and writes its folder. */
static ts_status record(const ts_fuzz_opts *o, ts_fuzz_target *t, ts_fuzz_pair_fn make, void *ctx, long index,
                        long pair, uint64_t pseed, const ts_graph *seed_graph, const ts_fuzz_pair *p,
                        ts_tensor *const *in, const ts_fuzz_verdict *v, ts_error *err)
{
    ts_fuzz_reduced red = {0};
    bool reduced = false;
    if (!o->no_minimize) {
        ts_fuzz_reducer r = {.target = t, .make_pair = make, .make_ctx = ctx, .seed = pseed};
        if (make == ts_fuzz_pair_make) r.set_rounds = ts_fuzz_rules_set_rounds, r.max_rounds = TS_FUZZ_ROUNDS;
        ts_error e = {0};
        if (!ts_fuzz_reduce(&r, seed_graph, v, &red, &e)) reduced = true;
        else if (e.code == TS_ERR_NOMEM) return *err = e, e.code;
        /* a finding that does not reproduce from its seed is written as found */
    }
    ts_fuzz_finding f = {.index = index, .pair = pair, .pair_seed = pseed, .opts = o, .pair_full = p,
                         .verdict_full = v, .reduced = reduced ? &red : NULL,
                         .inputs_full = (const ts_tensor *const *)in};
    ts_status st = ts_fuzz_write_finding(o->dir, &f, err);
    ts_fuzz_reduced_free(&red);
    return st;
}

/* The corpus of runtime seeds that reached new coverage: their families
 * are drawn again (coverage-guided: half of the graphs come from a kept
 * seed's family, in proportion to how often each reached something new;
 * the other half take the families in turn, each for its weight's number
 * of turns, so that none is starved). */
typedef struct corpus {
    int *family;
    int n, cap, turn;
    uint64_t rng;
} corpus;

static int next_family(corpus *c)
{
    if (c->n && ts_fuzz_rand(&c->rng) % 2) return c->family[ts_fuzz_rand(&c->rng) % (uint64_t)c->n];
    int total = 0, nf = ts_fuzz_families();
    for (int f = 0; f < nf; f++) total += ts_fuzz_family_weight(f);
    int k = c->turn++ % total, f = 0;
    while (k >= ts_fuzz_family_weight(f)) k -= ts_fuzz_family_weight(f++);
    return f;
}

static void keep(corpus *c, int family)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        int *f = realloc(c->family, sizeof *f * (size_t)cap);
        if (!f) return;
        c->family = f, c->cap = cap;
    }
    c->family[c->n++] = family;
}

static ts_status checkpoint(const ts_fuzz_opts *o, long next, const ts_fuzz_stats *st, double seconds, const corpus *cp,
                            const seen_set *seen, const ts_fuzz_cover *cover, ts_error *err)
{
    ts_fuzz_resume r = {.next = next, .st = *st, .family = cp->family, .nfamily = cp->n, .turn = cp->turn,
                        .rng = cp->rng, .sig = seen->sig, .nsig = seen->n};
    r.st.seconds = seconds;
    return ts_fuzz_checkpoint_save(o->dir, o, &r, cover, err);
}

/* Step i's runtime seed graph: made, checked, kept when it reached new
 * coverage, minimized and written when an oracle fires. */
static ts_status graph_step(const ts_fuzz_opts *o, ts_fuzz_target *t, corpus *cp, seen_set *seen, long i,
                            ts_fuzz_stats *st, ts_error *err)
{
    uint64_t gs = ts_fuzz_pair_seed(o->seed ^ 0x5eed0f6a4b1ull, i);
    int fam = next_family(cp);
    ts_graph *g = ts_fuzz_runtime_graph(gs, fam, err);
    if (!g) return err->code;
    ts_tensor **in = calloc((size_t)g->ninputs + 1, sizeof *in);
    ts_fuzz_verdict v;
    ts_status rc = in ? ts_fuzz_inputs(g, gs, in, err) : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_fuzz_target_fresh(t);
    if (!rc) rc = ts_fuzz_target_check_graph(t, g, in, gs, &v, err);
    if (!rc) {
        st->graphs++;
        if (ts_fuzz_target_fresh(t)) {
            keep(cp, fam);
            st->kept++;
        }
        if (v.kind == TS_FUZZ_FILTERED) st->graph_filtered++;
        char sig[sizeof v.what + 40];
        if (v.kind == TS_FUZZ_ERROR) ts_fuzz_signature(&v, sig, sizeof sig);
        if (v.kind == TS_FUZZ_ERROR && seen_before(seen, sig)) {
            st->duplicates++;
        } else if (v.kind == TS_FUZZ_MISMATCH || v.kind == TS_FUZZ_ERROR) {
            if (v.kind == TS_FUZZ_MISMATCH) st->mismatches++;
            else st->errors++;
            ts_graph *red = NULL;
            ts_tensor **rin = NULL;
            ts_error e = {0};
            if (o->no_minimize || ts_fuzz_reduce_graph(t, g, gs, &v, &red, &rin, &e)) {
                if (e.code == TS_ERR_NOMEM) rc = (*err = e, e.code);
                red = NULL;
            }
            if (!rc)
                rc = ts_fuzz_write_graph_finding(o->dir, st->findings, i, gs, ts_fuzz_family_name(fam), o, g,
                                                 red ? red : g, red ? rin : in, &v, err);
            for (int k = 0; red && rin && k < red->ninputs; k++) ts_tensor_unref(rin[k]);
            free(rin);
            ts_graph_free(red);
            st->findings++;
        }
    }
    for (int k = 0; in && k < g->ninputs; k++) ts_tensor_unref(in[k]);
    free(in);
    ts_graph_free(g);
    return rc;
}

ts_status ts_fuzz_run(const ts_fuzz_opts *o, ts_fuzz_stats *st, ts_error *err)
{
    memset(st, 0, sizeof *st);
    if (!o->dir) return ts_error_set(err, TS_ERR_INVALID, "fuzz: no output folder");
    if (o->time_s <= 0 && o->max_pairs <= 0)
        return ts_error_set(err, TS_ERR_INVALID, "fuzz: neither a time nor a pair budget");
    if (mkdir(o->dir, 0777) && errno != EEXIST)
        return ts_error_set(err, TS_ERR_IO, "cannot create folder '%s': %s", o->dir, strerror(errno));
    if (!o->resume && holds_campaign(o->dir))
        return ts_error_set(err, TS_ERR_INVALID, "'%s' already holds a campaign (pairs/ or findings/): give a new folder",
                            o->dir);
    ts_fuzz_pair_fn make = o->make_pair;
    void *ctx = o->make_ctx;
    ts_fuzz_rules *rules = NULL;
    if (!make) {
        if (ts_fuzz_rules_load(&rules, err)) return err->code;
        make = ts_fuzz_pair_make;
        ctx = rules;
    }
    ts_fuzz_target *t = NULL;
    seen_set seen = {0};
    ts_status rc = ts_fuzz_target_open(&o->target, &t, err);
    bool tsopt = o->target.kind == TS_FUZZ_TARGET_TSOPT;
    bool pairs = !tsopt || o->mode != TS_FUZZ_GRAPHS, graphs = tsopt && o->mode != TS_FUZZ_PAIRS;
    ts_fuzz_cover *cover = tsopt ? ts_fuzz_cover_new() : NULL;
    corpus cp = {.rng = o->seed * 0x9e3779b97f4a7c15ull + 7};
    if (!rc && tsopt && !cover) rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!rc && cover) ts_fuzz_target_set_cover(t, cover);
    long stride = o->pair_stride > 0 ? o->pair_stride : 1, i = o->pair_offset;
    if (!rc && o->resume) { /* what the campaign had learnt: coverage, corpus, signatures, counts */
        ts_fuzz_resume r;
        if (!(rc = ts_fuzz_checkpoint_load(o->dir, o, &r, cover, err))) {
            i = r.next, *st = r.st;
            cp.family = r.family, cp.n = cp.cap = r.nfamily, cp.turn = r.turn, cp.rng = r.rng;
            seen.sig = r.sig, seen.n = seen.cap = r.nsig;
        }
    }
    const double before = st->seconds; /* spent by the runs this one resumes */
    double t0 = ts_clock_s(), saved_at = t0;
    long saved_findings = st->findings;
    for (; !rc; i += stride) {
        /* the checkpoint before step i: every 2 s, and after each finding
         * (whose folder the next run must not number again) */
        if (ts_clock_s() - saved_at >= 2 || st->findings != saved_findings) {
            if ((rc = checkpoint(o, i, st, before + ts_clock_s() - t0, &cp, &seen, cover, err))) break;
            saved_at = ts_clock_s(), saved_findings = st->findings;
        }
        double el = before + ts_clock_s() - t0;
        const char *stop = o->stop && *o->stop                              ? "interrupted"
                           : o->max_pairs > 0 && i >= o->max_pairs          ? "pairs"
                           : o->max_findings > 0 && st->findings >= o->max_findings ? "findings"
                           : o->time_s > 0 && el >= o->time_s               ? "time limit"
                                                                            : NULL;
        if (stop) {
            snprintf(st->stop, sizeof st->stop, "%s", stop);
            break;
        }
        if (graphs && (rc = graph_step(o, t, &cp, &seen, i, st, err))) break;
        if (!pairs) {
            if (o->progress) o->progress(o->progress_ctx, st, before + ts_clock_s() - t0);
            continue;
        }
        uint64_t ps = ts_fuzz_pair_seed(o->seed, i);
        ts_graph *g = ts_fuzz_seed_graph(ps, err);
        if (!g) {
            rc = err->code;
            break;
        }
        ts_fuzz_pair p = {0};
        ts_error e = {0};
        if (make(ctx, g, ps, &p, &e)) {
            ts_graph_free(g);
            if (e.code == TS_ERR_NOMEM) rc = (*err = e, e.code);
            else st->skipped++;
            continue;
        }
        st->generated++;
        st->saturated += p.stop && !strcmp(p.stop, "saturated");
        ts_tensor **in = calloc((size_t)p.original->ninputs + 1, sizeof *in);
        ts_fuzz_verdict v;
        if (!in) rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else if (!(rc = ts_fuzz_inputs(p.original, ps, in, err)))
            rc = ts_fuzz_target_check(t, p.original, p.variant, p.nroots, in, ps, &v, err);
        if (!rc) {
            if (v.kind == TS_FUZZ_FILTERED) {
                st->filtered++;
            } else {
                st->tested++;
                st->optimized += v.optimized;
                st->original_nodes += ts_fuzz_count_nodes(p.original);
                st->variant_nodes += ts_fuzz_count_nodes(p.variant);
                if (st->saved < o->save_pairs && !(rc = ts_fuzz_save_pair(o->dir, st->saved, &p, err))) st->saved++;
            }
            char sig[sizeof v.what + 40];
            if (!rc && v.kind == TS_FUZZ_ERROR) ts_fuzz_signature(&v, sig, sizeof sig);
            if (!rc && v.kind == TS_FUZZ_ERROR && seen_before(&seen, sig)) {
                st->duplicates++;
            } else if (!rc && (v.kind == TS_FUZZ_MISMATCH || v.kind == TS_FUZZ_ERROR)) {
                if (v.kind == TS_FUZZ_MISMATCH) st->mismatches++;
                else st->errors++;
                rc = record(o, t, make, ctx, st->findings, i, ps, g, &p, in, &v, err);
                st->findings++;
            }
        }
        for (int k = 0; in && k < p.original->ninputs; k++) ts_tensor_unref(in[k]);
        free(in);
        ts_fuzz_pair_free(&p);
        ts_graph_free(g);
        if (o->progress) o->progress(o->progress_ctx, st, before + ts_clock_s() - t0);
    }
    st->seconds = before + ts_clock_s() - t0;
    if (!rc) rc = checkpoint(o, i, st, st->seconds, &cp, &seen, cover, err);
    if (cover) {
        ts_fuzz_cover_counts(cover, &st->cover_reached, &st->cover_entries, &st->cover_keys);
        ts_fuzz_cover_missing(cover, st->cover_missing, sizeof st->cover_missing);
    }
    ts_fuzz_cover_free(cover);
    free(cp.family);
    for (int k = 0; k < seen.n; k++) free(seen.sig[k]);
    free(seen.sig);
    ts_fuzz_target_close(t);
    ts_fuzz_rules_free(rules);
    if (!rc) rc = write_summary(o, st, err);
    return rc;
}

char *ts_fuzz_stats_json(const ts_fuzz_opts *o, const ts_fuzz_stats *st)
{
    size_t n = 4096;
    char *s = malloc(n);
    if (!s) return NULL;
    double secs = st->seconds > 0 ? st->seconds : 1e-9;
    snprintf(s, n,
             "{\"tested\": %ld, \"findings\": %ld, \"mismatches\": %ld, \"errors\": %ld, \"duplicates\": %ld, "
             "\"rate\": %.6g, "
             "\"pairs_per_s\": %.3f, \"seconds\": %.3f, \"seed\": %llu, \"target\": \"%s\", \"stop\": \"%s\", "
             "\"generated\": %ld, \"filtered\": %ld, \"skipped\": %ld, \"saved_pairs\": %ld, "
             "\"original_nodes_avg\": %.2f, \"variant_nodes_avg\": %.2f, \"saturated\": %ld, \"optimized\": %ld, \"plant\": \"%s\", "
             "\"eop_cc\": \"%s\", \"graphs\": %ld, \"graphs_per_s\": %.3f, \"graph_filtered\": %ld, "
             "\"kept\": %ld, \"coverage\": {\"entries_reached\": %d, \"entries\": %d, \"keys\": %d, "
             "\"missing\": \"%s\"}}",
             st->tested, st->findings, st->mismatches, st->errors, st->duplicates,
             st->tested ? (double)st->findings / (double)st->tested : 0.0, (double)st->generated / secs,
             st->seconds, (unsigned long long)o->seed, o->target.kind == TS_FUZZ_TARGET_ORT ? "ort" : "tsopt",
             st->stop, st->generated, st->filtered, st->skipped, st->saved,
             st->tested ? (double)st->original_nodes / (double)st->tested : 0.0,
             st->tested ? (double)st->variant_nodes / (double)st->tested : 0.0, st->saturated, st->optimized,
             o->target.plant ? o->target.plant : "",
             o->target.kind == TS_FUZZ_TARGET_ORT ? "" : ts_fuzz_eop_cc(o->target.eop_cc), st->graphs,
             (double)st->graphs / secs, st->graph_filtered, st->kept, st->cover_reached, st->cover_entries,
             st->cover_keys, st->cover_missing);
    return s;
}
