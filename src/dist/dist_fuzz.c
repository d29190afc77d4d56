/* tsopt fuzz over MPI (docs/distributed.md, "fuzz").
 *
 * Process r of N runs the campaign on pairs r, r+N, r+2N, ... (a pair's
 * content depends only on the seed and its number, so a finding replays
 * the same whatever N was) into DIR/ranks/r, in a child process: a crash
 * of the compiler under test ends that child, and the process reports it
 * and still takes part in the merge.  Then the root merges: every finding
 * of every process, in pair order; an error whose signature an earlier
 * one has, or a finding whose minimized pair has the same form as an
 * earlier one's (operators, wiring, shapes and attributes; names and
 * values aside), is a duplicate; the rest become DIR/findings/000, 001, ...
 * (renumbered), and the counts are summed into DIR/summary.json.  DIR must
 * be on a file system every process sees (on a cluster, a shared one). */
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "dist/dist.h"
#include "ops/op.h"

/* What each process sends the root. */
typedef struct rank_result {
    ts_fuzz_stats st;
    int status; /* 0: the child finished; >0: died of that signal; <0: failed with error */
    char msg[1024];
} rank_result;

static volatile int *child_stop;

static void on_term(int sig)
{
    (void)sig;
    if (child_stop) *child_stop = 1;
}

/* Runs the campaign in a child; its stats come back through a pipe. */
static void run_child(const ts_fuzz_opts *o, rank_result *res)
{
    int fd[2];
    memset(res, 0, sizeof *res);
    if (pipe(fd)) {
        res->status = -1;
        snprintf(res->msg, sizeof res->msg, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        /* mpirun answers Ctrl-C with SIGTERM to every process: the
         * campaign stops after its pair, findings written, as on Ctrl-C */
        child_stop = o->stop;
        struct sigaction sa = {.sa_handler = on_term};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        const char *die = getenv("TSOPT_DIST_FUZZ_DIE"); /* tests only: this rank's child dies (tests/cli/mpi.sh) */
        if (die && atoi(die) == ts_dist_rank()) raise(SIGKILL);
        rank_result r = {0};
        ts_error err = {0};
        if (ts_fuzz_run(o, &r.st, &err)) {
            r.status = -1;
            snprintf(r.msg, sizeof r.msg, "%s", err.msg);
        }
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1); /* no MPI in the child: no atexit handlers */
    }
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        res->status = -1;
        snprintf(res->msg, sizeof res->msg, "fork: %s", strerror(errno));
        return;
    }
    /* Ctrl-C reaches the child itself (same process group); mpirun's
     * SIGTERM may reach only this process: pass it on, so the child stops
     * after its pair and writes its findings */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    size_t got = 0;
    for (;;) {
        struct timespec tick = {0, 100000000};
        siginfo_t si;
        if (sigtimedwait(&block, &si, &tick) == SIGTERM) kill(pid, SIGTERM);
        int wst;
        pid_t w = waitpid(pid, &wst, WNOHANG);
        if (w == pid) {
            while (got < sizeof *res) {
                ssize_t k = read(fd[0], (char *)res + got, sizeof *res - got);
                if (k <= 0) break;
                got += (size_t)k;
            }
            if (WIFSIGNALED(wst)) {
                memset(res, 0, sizeof *res);
                res->status = WTERMSIG(wst);
            } else if (got != sizeof *res) {
                memset(res, 0, sizeof *res);
                res->status = -1;
                snprintf(res->msg, sizeof res->msg, "the campaign process exited with status %d",
                         WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
            }
            break;
        }
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(fd[0]);
}

/* ---- the merge (root) ---- */

typedef struct finding {
    char dir[1400];
    long pair;
    char kind[16], stage[32], what[640];
    char *form; /* minimized pair's form; NULL when unreadable */
    bool old;   /* merged by an earlier run of a resumed campaign */
} finding;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *t = realloc(s, cap);
            if (!t) break;
            s = t;
        }
        size_t k = fread(s + n, 1, cap - n - 1, f);
        n += k;
        if (!k) break;
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

static bool write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(s, f) >= 0;
    return !fclose(f) && ok;
}

/* A string or number field of finding.json (one flat object). */
static bool json_field(const char *js, const char *key, char *out, size_t n)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(js, pat);
    if (!p || !n) return false;
    p += strlen(pat);
    size_t k = 0;
    if (*p == '"') {
        for (p++; *p && *p != '"' && k + 1 < n; p++) {
            if (*p == '\\' && p[1]) p++;
            out[k++] = *p;
        }
    } else {
        while (*p && *p != ',' && *p != '}' && k + 1 < n) out[k++] = *p++;
    }
    out[k] = 0;
    return true;
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 256) * 2;
        char *t = realloc(b->s, cap);
        if (!t) return;
        b->s = t;
        b->cap = cap;
    }
}

/* The form of a graph: inputs' types and shapes, then each live node's
 * operator, attributes and wiring (inputs by position), names and weight
 * values left out. */
static void graph_form(sbuf *b, const ts_graph *g)
{
    int *pos = malloc(sizeof *pos * (size_t)(g->nvalues + 1));
    if (!pos) return;
    for (int v = 0; v < g->nvalues; v++) pos[v] = -1;
    int k = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        pos[g->inputs[i]] = k++;
        sb_add(b, "in%d:%d[", i, (int)v->dtype);
        for (int d = 0; d < v->shape.rank; d++) sb_add(b, "%lld,", (long long)v->shape.dims[d]);
        sb_add(b, "] ");
    }
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        sb_add(b, "%s(", nd->op->name);
        for (int i = 0; i < nd->ninputs; i++) {
            int v = nd->inputs[i];
            if (v < 0) sb_add(b, "_,");
            else if (pos[v] >= 0) sb_add(b, "%%%d,", pos[v]);
            else { /* a constant: its shape */
                sb_add(b, "c[");
                for (int d = 0; d < g->values[v].shape.rank; d++)
                    sb_add(b, "%lld,", (long long)g->values[v].shape.dims[d]);
                sb_add(b, "],");
            }
        }
        sb_add(b, ")");
        const unsigned char *a = nd->attrs;
        for (size_t i = 0; a && i < nd->op->attr_size; i++) sb_add(b, "%02x", a[i]);
        for (int o = 0; o < nd->noutputs; o++) pos[nd->outputs[o]] = k++;
        sb_add(b, "; ");
    }
    sb_add(b, "out");
    for (int i = 0; i < g->noutputs; i++) sb_add(b, " %%%d", pos[g->outputs[i]]);
    free(pos);
}

static char *pair_form(const char *dir)
{
    sbuf b = {0};
    const char *names[2] = {"original.onnx", "variant.onnx"};
    for (int s = 0; s < 2; s++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[s]);
        ts_graph *g = NULL;
        ts_error err = {0};
        if (ts_onnx_load(path, NULL, 0, &g, &err)) {
            free(b.s);
            return NULL;
        }
        sb_add(&b, "%s: ", names[s]);
        graph_form(&b, g);
        sb_add(&b, "\n");
        ts_graph_free(g);
    }
    return b.s;
}

static int cmp_finding(const void *pa, const void *pb)
{
    const finding *a = pa, *b = pb;
    return a->pair < b->pair ? -1 : a->pair > b->pair;
}

/* Removes a folder this module made (a duplicate finding, a rank's empty
 * findings/), depth first. */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[2048];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat sb;
            if (!lstat(sub, &sb) && S_ISDIR(sb.st_mode)) remove_tree(sub);
            else unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

/* finding.json's "index" and README.md's title carry the number. */
static void renumber(const char *dir, long index)
{
    char path[2100], head[64];
    snprintf(path, sizeof path, "%s/finding.json", dir);
    char *js = read_text(path);
    const char *rest = js ? strchr(js, ',') : NULL;
    if (rest) {
        sbuf b = {0};
        sb_add(&b, "{\"index\": %ld%s", index, rest);
        if (b.s) write_text(path, b.s);
        free(b.s);
    }
    free(js);
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *md = read_text(path);
    rest = md && !strncmp(md, "# Finding ", 10) ? strchr(md, ':') : NULL;
    if (rest) {
        snprintf(head, sizeof head, "# Finding %03ld", index);
        sbuf b = {0};
        sb_add(&b, "%s%s", head, rest);
        if (b.s) write_text(path, b.s);
        free(b.s);
    }
    free(md);
}

/* Appends the findings under folder dir (one subfolder each) to fs; old:
 * ones an earlier run of a resumed campaign merged, numbered by name. */
static void scan_findings(const char *dir, bool old, finding **fs, size_t *nf, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (*nf == *cap) {
            size_t c = *cap ? 2 * *cap : 16;
            finding *t = realloc(*fs, c * sizeof *t);
            if (!t) break;
            *fs = t, *cap = c;
        }
        finding *f = &(*fs)[*nf];
        memset(f, 0, sizeof *f);
        if ((size_t)snprintf(f->dir, sizeof f->dir, "%s/%.255s", dir, e->d_name) >= sizeof f->dir) continue;
        char path[2048], num[32] = "";
        snprintf(path, sizeof path, "%s/finding.json", f->dir);
        char *js = read_text(path);
        if (!js) continue; /* a finding being written when its process died */
        json_field(js, "pair", num, sizeof num);
        f->pair = old ? strtol(e->d_name, NULL, 10) : strtol(num, NULL, 10);
        f->old = old;
        json_field(js, "kind", f->kind, sizeof f->kind);
        json_field(js, "stage", f->stage, sizeof f->stage);
        json_field(js, "what", f->what, sizeof f->what);
        free(js);
        f->form = pair_form(f->dir);
        (*nf)++;
    }
    closedir(d);
}

static long merge_findings(const ts_fuzz_opts *o, int n, ts_fuzz_stats *st, ts_error *err)
{
    finding *fs = NULL;
    size_t nf = 0, cap = 0, nold;
    char out[1100];
    snprintf(out, sizeof out, "%s/findings", o->dir);
    if (o->resume) scan_findings(out, true, &fs, &nf, &cap); /* kept as they are; new ones number after them */
    nold = nf;
    if (nold > 1) qsort(fs, nold, sizeof *fs, cmp_finding);
    for (int r = 0; r < n; r++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/ranks/%d/findings", o->dir, r);
        scan_findings(dir, false, &fs, &nf, &cap);
    }
    if (nf - nold > 1) qsort(fs + nold, nf - nold, sizeof *fs, cmp_finding);
    long kept = 0;
    st->mismatches = st->errors = 0;
    for (size_t i = 0; i < nf; i++) {
        finding *f = &fs[i];
        if (f->old) {
            if (!strcmp(f->kind, "mismatch")) st->mismatches++;
            else st->errors++;
            kept++;
            continue;
        }
        bool dup = false;
        ts_fuzz_verdict v = {.kind = TS_FUZZ_ERROR};
        char sig[sizeof v.what + 40], sig2[sizeof sig];
        snprintf(v.stage, sizeof v.stage, "%s", f->stage);
        snprintf(v.what, sizeof v.what, "%s", f->what);
        ts_fuzz_signature(&v, sig, sizeof sig);
        for (size_t j = 0; j < i && !dup; j++) {
            const finding *g = &fs[j];
            if (!g->dir[0]) continue; /* itself a duplicate */
            if (!strcmp(f->kind, "error") && !strcmp(g->kind, "error")) {
                snprintf(v.stage, sizeof v.stage, "%s", g->stage);
                snprintf(v.what, sizeof v.what, "%s", g->what);
                ts_fuzz_signature(&v, sig2, sizeof sig2);
                dup = !strcmp(sig, sig2);
            }
            dup = dup || (f->form && g->form && !strcmp(f->kind, g->kind) && !strcmp(f->stage, g->stage) &&
                          !strcmp(f->form, g->form));
        }
        if (dup) {
            remove_tree(f->dir);
            f->dir[0] = 0;
            st->duplicates++;
            continue;
        }
        if (kept == 0 && mkdir(out, 0777) && errno != EEXIST) {
            ts_error_set(err, TS_ERR_IO, "cannot create folder '%s': %s", out, strerror(errno));
            break;
        }
        char dst[1200];
        snprintf(dst, sizeof dst, "%s/%03ld", out, kept);
        if (rename(f->dir, dst)) {
            ts_error_set(err, TS_ERR_IO, "cannot move '%s' to '%s': %s", f->dir, dst, strerror(errno));
            break;
        }
        renumber(dst, kept);
        if (!strcmp(f->kind, "mismatch")) st->mismatches++;
        else st->errors++;
        kept++;
    }
    for (size_t i = 0; i < nf; i++) free(fs[i].form);
    free(fs);
    for (int r = 0; r < n; r++) { /* each rank's findings/ is empty now */
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/ranks/%d/findings", o->dir, r);
        rmdir(dir);
    }
    return kept;
}

static ts_status write_summary(const ts_fuzz_opts *o, const ts_fuzz_stats *st, int n, int dead, ts_error *err)
{
    char *js = ts_fuzz_stats_json(o, st);
    if (!js) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t len = strlen(js);
    if (len && js[len - 1] == '}') js[len - 1] = 0;
    char path[1100];
    snprintf(path, sizeof path, "%s/summary.json", o->dir);
    FILE *f = fopen(path, "w");
    bool ok = f && fprintf(f, "%s, \"processes\": %d, \"processes_died\": %d}\n", js, n, dead) > 0;
    if (f && fclose(f)) ok = false;
    free(js);
    return ok ? TS_OK : ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
}

ts_status ts_dist_fuzz(const ts_fuzz_opts *o, ts_fuzz_stats *st, ts_error *err)
{
    int n = ts_dist_size(), rank = ts_dist_rank();
    memset(st, 0, sizeof *st);
    /* the root makes DIR/ranks; the others check that they see it */
    char mine[1100];
    snprintf(mine, sizeof mine, "%s/ranks", o->dir);
    int ok = 1;
    if (rank == 0 && o->resume) { /* each rank resumes from its own checkpoint */
        struct stat rs;
        ok = !stat(mine, &rs) && S_ISDIR(rs.st_mode) ? 1 : -2;
    } else if (rank == 0) {
        ok = (!mkdir(o->dir, 0777) || errno == EEXIST) && !mkdir(mine, 0777);
        if (!ok && errno == EEXIST) ok = -1;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ok == -2)
        return ts_error_set(err, TS_ERR_INVALID, "fuzz --resume: '%s' holds no campaign run under mpirun (no ranks/)",
                            o->dir);
    if (ok < 0)
        return ts_error_set(err, TS_ERR_INVALID, "'%s' already holds a campaign (ranks/): give a new folder", o->dir);
    if (!ok) return ts_error_set(err, TS_ERR_IO, "cannot create folder '%s'", mine);
    struct stat sb;
    ok = !stat(mine, &sb) && S_ISDIR(sb.st_mode);
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok)
        return ts_error_set(err, TS_ERR_IO, "fuzz: '%s' is not seen by every process: under mpirun -o must be on a "
                            "file system all of them share", o->dir);
    snprintf(mine, sizeof mine, "%s/ranks/%d", o->dir, rank);
    char log[1200];
    ts_fuzz_opts sub = *o;
    sub.dir = mine;
    sub.pair_stride = n;
    sub.pair_offset = rank;
    if (getenv("TSOPT_DIST_FUZZ_OVERLAP")) /* tests only: every process tests every pair (tests/cli/mpi.sh) */
        sub.pair_stride = 1, sub.pair_offset = 0;
    if (o->target.ort_log) { /* one ONNX Runtime peer per process, each its own log */
        snprintf(log, sizeof log, "%s/ort.log", mine);
        sub.target.ort_log = log;
    }
    if (rank != 0) sub.progress = NULL;
    rank_result res;
    run_child(&sub, &res);
    rank_result *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
    if (rank == 0 && !all) ts_dist_abort(1);
    MPI_Gather(&res, (int)sizeof res, MPI_BYTE, all, (int)sizeof res, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) return TS_OK;
    int dead = 0;
    double secs = 0;
    snprintf(st->stop, sizeof st->stop, "%s", all[0].st.stop);
    for (int r = 0; r < n; r++) {
        const rank_result *x = &all[r];
        if (x->status > 0) {
            fprintf(stderr, "fuzz: rank %d died (signal %d: %s): its findings so far are kept, its counts lost\n", r,
                    x->status, strsignal(x->status));
            dead++;
            continue;
        }
        if (x->status < 0) {
            fprintf(stderr, "fuzz: rank %d failed: %s\n", r, x->msg);
            dead++;
            continue;
        }
        fprintf(stderr, "  rank %d: %ld pairs, %ld tested, %ld findings, %.1f s (stop: %s)\n", r, x->st.generated,
                x->st.tested, x->st.findings, x->st.seconds, x->st.stop);
        st->generated += x->st.generated, st->tested += x->st.tested, st->duplicates += x->st.duplicates;
        st->filtered += x->st.filtered, st->skipped += x->st.skipped, st->saved += x->st.saved;
        st->original_nodes += x->st.original_nodes, st->variant_nodes += x->st.variant_nodes;
        st->saturated += x->st.saturated, st->optimized += x->st.optimized;
        st->graphs += x->st.graphs, st->graph_filtered += x->st.graph_filtered, st->kept += x->st.kept;
        if (x->st.cover_reached > st->cover_reached) { /* each rank's own coverage: the widest one */
            st->cover_reached = x->st.cover_reached, st->cover_entries = x->st.cover_entries;
            st->cover_keys = x->st.cover_keys;
            memcpy(st->cover_missing, x->st.cover_missing, sizeof st->cover_missing);
        }
        if (x->st.seconds > secs) secs = x->st.seconds;
    }
    free(all);
    st->seconds = secs;
    st->processes_died = dead;
    st->findings = merge_findings(o, n, st, err);
    if (err->code) return err->code;
    return write_summary(o, st, n, dead, err);
}
