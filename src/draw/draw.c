/* src/draw/: pictures of graphs (`tsopt draw`, the optimize report):
 * Graphviz DOT written here, SVG/PNG made by Graphviz's `dot`.
 *
 * A node is labelled with its operator, its name (shortened) and its
 * output shape; the weights it reads are folded into its label instead of
 * being drawn as nodes (a ResNet has more weights than operators).  With
 * an original graph to compare against, a node counts as unchanged when
 * the original has a node with the same operator, attributes, output
 * shapes and weights (by content): names are not compared, since rewrites
 * name what they make, and neither are inputs, so that a node merely fed
 * by a rewritten neighbour stays unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "draw/draw.h"
#include "ops/op.h"
#include "tsopt.h"
#include "util/clock.h"
#include "util/hash.h"

extern char **environ;

/* ------------------------------------------------------ growable text */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)w < b->cap) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->n + (size_t)w) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

/* Text inside a DOT "..." string: quotes and backslashes escaped (a
 * backslash would start one of Graphviz's escapes such as \N). */
static void sb_quoted(sbuf *b, const char *s, size_t max)
{
    size_t len = strlen(s);
    if (len > max) { /* keep the end: "/layer4/layer4.1/conv2/Conv" says most there */
        sb_printf(b, "...");
        s += len - max + 3;
    }
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_printf(b, "\\%c", *s);
        else if (*s == '\n') sb_printf(b, " ");
        else sb_printf(b, "%c", *s);
    }
}

/* ------------------------------------------------------ node identity */

/* Weights by content, 8 bytes at a time (weights can be 100s of MB). */
static uint64_t tensor_hash(const ts_tensor *t)
{
    uint64_t h = ts_hash_bytes(TS_HASH_SEED, &t->dtype, sizeof t->dtype);
    h = ts_hash_bytes(h, t->shape.dims, sizeof *t->shape.dims * (size_t)t->shape.rank);
    const unsigned char *c = t->data;
    size_t i = 0;
    for (; i + 8 <= t->nbytes; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = ts_hash_word(h, w);
        h ^= h >> 29;
    }
    return ts_hash_bytes(h, c + i, t->nbytes - i);
}

/* What makes a node the same operation in another graph. */
static uint64_t node_key(const ts_graph *g, const ts_node *n)
{
    uint64_t h = ts_hash_bytes(TS_HASH_SEED, n->op->name, strlen(n->op->name));
    if (n->attrs && n->op->attr_size) h = ts_hash_bytes(h, n->attrs, n->op->attr_size);
    for (int o = 0; o < n->noutputs; o++) {
        const ts_shape *s = &g->values[n->outputs[o]].shape;
        h = ts_hash_bytes(h, s->dims, sizeof *s->dims * (size_t)s->rank);
        h = ts_hash_bytes(h, &s->rank, sizeof s->rank);
    }
    for (int i = 0; i < n->ninputs; i++) {
        int v = n->inputs[i];
        uint64_t c = v >= 0 && g->values[v].constant ? tensor_hash(g->values[v].constant) : 0;
        h = ts_hash_bytes(h, &c, sizeof c);
    }
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct diff {
    bool *is_new; /* per node of g */
    int nnew;
    char removed[600]; /* "BatchNormalization x20, Add x1" */
    int nremoved;
} diff;

/* Matches g's nodes against the original's as multisets of keys. */
static bool diff_make(const ts_graph *g, const ts_graph *orig, diff *d)
{
    /* the original's keys sorted with their node index, for binary search */
    uint64_t(*keys)[2] = malloc(sizeof *keys * ((size_t)orig->nnodes + 1));
    bool *used = calloc((size_t)orig->nnodes + 1, 1);
    d->is_new = calloc((size_t)g->nnodes + 1, sizeof *d->is_new);
    if (!keys || !used || !d->is_new) {
        free(keys);
        free(used);
        return false;
    }
    int no = 0;
    for (int i = 0; i < orig->nnodes; i++)
        if (!orig->nodes[i].dead) keys[no][0] = node_key(orig, &orig->nodes[i]), keys[no][1] = (uint64_t)i, no++;
    qsort(keys, (size_t)no, sizeof *keys, cmp_u64);
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        uint64_t k = node_key(g, &g->nodes[i]);
        int lo = 0, hi = no;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (keys[mid][0] < k) lo = mid + 1;
            else hi = mid;
        }
        while (lo < no && keys[lo][0] == k && used[keys[lo][1]]) lo++;
        if (lo < no && keys[lo][0] == k) used[keys[lo][1]] = true;
        else d->is_new[i] = true, d->nnew++;
    }
    /* what the original lost, counted per operator in first-seen order */
    size_t len = 0;
    for (int i = 0; i < orig->nnodes; i++) {
        const ts_node *n = &orig->nodes[i];
        if (n->dead || used[i]) continue;
        d->nremoved++;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = !orig->nodes[j].dead && !used[j] && orig->nodes[j].op == n->op;
        if (seen) continue;
        int cnt = 0;
        for (int j = i; j < orig->nnodes; j++) cnt += !orig->nodes[j].dead && !used[j] && orig->nodes[j].op == n->op;
        if (len < sizeof d->removed)
            len += (size_t)snprintf(d->removed + len, sizeof d->removed - len, "%s%s x%d", len ? ", " : "", n->op->name, cnt);
    }
    free(keys);
    free(used);
    return true;
}

/* ------------------------------------------------------------- DOT */

/* Fill colours by kind of operator, as model viewers do. */
static const char *op_colour(const char *op)
{
    static const char *const groups[][12] = {
        {"#cfe2f3", "Conv", "ConvTranspose", "MatMul", "Gemm", NULL},
        {"#f4cccc", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Softmax", "Clip", "Erf", "HardSigmoid", "Elu", NULL},
        {"#d9ead3", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", NULL},
        {"#fff2cc", "BatchNormalization", "LayerNormalization", "InstanceNormalization", NULL},
        {"#ead1dc", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather",
         "Expand", NULL},
    };
    for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++)
        for (int j = 1; groups[k][j]; j++)
            if (!strcmp(groups[k][j], op)) return groups[k][0];
    return "#eeeeee";
}

static void shape_text(sbuf *b, const ts_shape *s)
{
    char buf[160];
    sb_printf(b, "%s", ts_shape_str(s, buf, sizeof buf));
}

/* A graph input's or output's shape with its declared symbolic dimensions. */
static void io_shape_text(sbuf *b, const ts_graph *g, bool output, int i)
{
    const ts_shape *s = &g->values[output ? g->outputs[i] : g->inputs[i]].shape;
    if (!s->rank) sb_printf(b, "scalar");
    for (int d = 0; d < s->rank; d++) {
        const char *p = output ? ts_graph_output_dim_param(g, i, d) : ts_graph_input_dim_param(g, i, d);
        if (p && *p) {
            sb_printf(b, "%s", d ? "x" : "");
            sb_quoted(b, p, 24);
        } else
            sb_printf(b, "%s%lld", d ? "x" : "", (long long)s->dims[d]);
    }
}

static void write_dot(sbuf *b, const ts_graph *g, const diff *d)
{
    sb_printf(b, "digraph \"");
    sb_quoted(b, g->name ? g->name : "graph", 80);
    sb_printf(b, "\" {\n  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, nodesep=0.25, ranksep=0.3");
    if (d) {
        sb_printf(b, ", labelloc=t, labeljust=l, label=\"optimization: %d node%s new (orange)", d->nnew,
                  d->nnew == 1 ? "" : "s");
        if (d->nremoved) {
            sb_printf(b, "; %d removed: ", d->nremoved);
            sb_quoted(b, d->removed, sizeof d->removed);
        }
        sb_printf(b, "\"");
    }
    sb_printf(b, "];\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
                 "penwidth=0.8];\n  edge [color=\"#666666\", arrowsize=0.6];\n");
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        sb_printf(b, "  v%d [shape=ellipse, fillcolor=\"#dde8f5\", label=\"", g->inputs[i]);
        sb_quoted(b, v->name, 40);
        sb_printf(b, "\\n");
        io_shape_text(b, g, false, i);
        sb_printf(b, " %s\"];\n", ts_dtype_name(v->dtype));
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        bool fresh = d && d->is_new[i];
        sb_printf(b, "  n%d [fillcolor=\"%s\"%s, tooltip=\"", i, fresh ? "#fbd3a8" : op_colour(n->op->name),
                  fresh ? ", color=\"#d9730d\", penwidth=2.2" : "");
        sb_quoted(b, n->name ? n->name : "", 400);
        sb_printf(b, "\", label=\"%s\\n", n->op->name);
        sb_quoted(b, n->name ? n->name : "", 32);
        sb_printf(b, "\\n");
        for (int o = 0; o < n->noutputs; o++) {
            if (o) sb_printf(b, ", ");
            shape_text(b, &g->values[n->outputs[o]].shape);
        }
        /* weights folded into the label */
        int nw = 0;
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !g->values[v].constant) continue;
            sb_printf(b, "%s", nw++ ? ", " : "\\nweights ");
            shape_text(b, &g->values[v].shape);
        }
        sb_printf(b, "\"];\n");
    }
    /* edges: from producers and graph inputs; constants were folded in */
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || g->values[v].constant) continue;
            int p = g->values[v].producer;
            if (p >= 0) sb_printf(b, "  n%d -> n%d;\n", p, i);
            else sb_printf(b, "  v%d -> n%d;\n", v, i);
        }
    }
    for (int o = 0; o < g->noutputs; o++) {
        const ts_value *v = &g->values[g->outputs[o]];
        sb_printf(b, "  out%d [shape=ellipse, fillcolor=\"#dde8f5\", label=\"", o);
        sb_quoted(b, v->name, 40);
        sb_printf(b, "\\n");
        io_shape_text(b, g, true, o);
        sb_printf(b, " %s\"];\n", ts_dtype_name(v->dtype));
        if (v->producer >= 0 && !g->nodes[v->producer].dead) sb_printf(b, "  n%d -> out%d;\n", v->producer, o);
        else if (!v->constant) sb_printf(b, "  v%d -> out%d;\n", g->outputs[o], o);
    }
    sb_printf(b, "}\n");
}

/* ------------------------------------------------------------ files */

/* Writes text to file; errors name `shown`, the path the user gave. */
static ts_status write_file(const char *file, const char *shown, const char *text, size_t n, ts_error *err)
{
    FILE *f = fopen(file, "wb");
    if (!f) return ts_error_set(err, TS_ERR_IO, "draw: cannot write '%s': %s", shown, strerror(errno));
    bool ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    if (!ok) {
        remove(file);
        return ts_error_set(err, TS_ERR_IO, "draw: cannot write '%s': %s", shown, strerror(errno));
    }
    return TS_OK;
}

/* Waits for pid; with seconds > 0, kills its process group (dot, or a
 * wrapper script and its children) once that has passed and sets *late.
 * Polled every 20 ms: a picture takes far longer than that. */
static int wait_dot(pid_t pid, double seconds, bool *late, int *status)
{
    double end = ts_clock_s() + seconds;
    for (;;) {
        pid_t w = waitpid(pid, status, seconds > 0 ? WNOHANG : 0);
        if (w == pid) return 0;
        if (w < 0 && errno != EINTR) return -1;
        if (w == 0 && ts_clock_s() > end) {
            kill(-pid, SIGKILL);
            *late = true;
            seconds = 0; /* reap it */
            continue;
        }
        if (w == 0) nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
}

/* dot -T<fmt> -o out in; its stderr goes to errpath, whose first line
 * explains a failure.  seconds > 0 bounds it (run in a process group of
 * its own, so that a kill reaches all of it). */
static ts_status run_dot(const char *fmt, const char *in, const char *out, const char *errpath, const char *path,
                         double seconds, ts_error *err)
{
    char tflag[16];
    snprintf(tflag, sizeof tflag, "-T%s", fmt);
    char *argv[] = {"dot", tflag, "-o", (char *)out, (char *)in, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    if (seconds > 0) {
        posix_spawnattr_setpgroup(&at, 0);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc)
        return ts_error_set(err, TS_ERR_IO, "draw: cannot run Graphviz 'dot' for '%s': %s (install graphviz, or write a .dot file)",
                            path, strerror(rc));
    int status = 0;
    bool late = false;
    if (wait_dot(pid, seconds, &late, &status))
        return ts_error_set(err, TS_ERR_IO, "draw: waiting for 'dot': %s", strerror(errno));
    if (late)
        return ts_error_set(err, TS_ERR_IO,
                            "draw: Graphviz 'dot' did not draw '%s' within %.3g s (stopped; nothing drawn)", path,
                            seconds);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TS_OK;
    char line[300] = "";
    FILE *f = fopen(errpath, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    line[strcspn(line, "\r\n")] = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return ts_error_set(err, TS_ERR_IO, "draw: cannot run Graphviz 'dot' for '%s' (install graphviz, or write a .dot file)", path);
    return ts_error_set(err, TS_ERR_IO, "draw: Graphviz 'dot' failed on '%s'%s%s", path, line[0] ? ": " : "", line);
}

ts_status ts_graph_draw(const ts_graph *g, const ts_graph *diff_against, const char *path, ts_error *err)
{
    return ts_graph_draw_within(g, diff_against, path, 0, err);
}

ts_status ts_graph_draw_within(const ts_graph *g, const ts_graph *diff_against, const char *path, double seconds,
                               ts_error *err)
{
    const char *ext = strrchr(path, '.');
    const char *fmt = !ext ? NULL : !strcmp(ext, ".svg") ? "svg" : !strcmp(ext, ".png") ? "png" : !strcmp(ext, ".dot") ? "dot" : NULL;
    if (!fmt) return ts_error_set(err, TS_ERR_INVALID, "draw: '%s': expected a file ending in .svg, .png or .dot", path);
    diff d = {0};
    if (diff_against && !diff_make(g, diff_against, &d))
        return ts_error_set(err, TS_ERR_NOMEM, "draw: out of memory comparing graphs");
    sbuf b = {0};
    write_dot(&b, g, diff_against ? &d : NULL);
    free(d.is_new);
    if (b.oom) {
        free(b.s);
        return ts_error_set(err, TS_ERR_NOMEM, "draw: out of memory writing '%s'", path);
    }
    size_t plen = strlen(path) + 16;
    char *tmp = malloc(plen), *dotf = malloc(plen), *errf = malloc(plen);
    ts_status st = TS_OK;
    if (!tmp || !dotf || !errf) st = ts_error_set(err, TS_ERR_NOMEM, "draw: out of memory");
    if (!st) {
        snprintf(tmp, plen, "%s.tmp", path);
        snprintf(dotf, plen, "%s.dot.tmp", path);
        snprintf(errf, plen, "%s.err.tmp", path);
        if (!strcmp(fmt, "dot")) {
            st = write_file(tmp, path, b.s, b.n, err);
        } else if (!(st = write_file(dotf, path, b.s, b.n, err))) {
            st = run_dot(fmt, dotf, tmp, errf, path, seconds, err);
            remove(dotf);
            remove(errf);
        }
        if (!st && rename(tmp, path))
            st = ts_error_set(err, TS_ERR_IO, "draw: cannot write '%s': %s", path, strerror(errno));
        if (st) remove(tmp);
    }
    free(tmp);
    free(dotf);
    free(errf);
    free(b.s);
    return st;
}
