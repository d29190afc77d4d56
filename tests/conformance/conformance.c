/* ONNX backend conformance: runs ONNX's own backend test data (Debian's
 * libonnx-testdata: node, simple, pytorch-converted and pytorch-operator
 * cases, each a model.onnx with test_data_set_N/{input,output}_K.pb) through
 * tsopt's session (the path `tsopt run` and the Python package take),
 * compares every output with the expected one, and checks the list of cases
 * expected to pass (tests/conformance/expected_pass.txt).
 *
 *   conformance [--data DIR] [--expected FILE]... [--write-pass FILE] [--jobs N]
 *               [--timeout S] [--cli TSOPT [--ort RUN_JS]] [--causes] [--verbose]
 *               [CASE_SUBSTRING...]
 *
 * Each case runs in a forked child: a crash or a hang (SIGALRM after
 * --timeout seconds) is that case's result, not the runner's end, and cases
 * run --jobs at a time without starting a process image per case.
 *
 * Outcomes: passed; refused (tsopt returned an error: unsupported operator,
 * element type, ...); wrong (it ran and an output differs from the
 * expected one: a silent wrong result); crashed (signal or timeout);
 * erratum (a difference on one of the few cases whose ONNX 1.12 data
 * contradicts the operator's definition: ERRATA below).  Cases
 * whose graph inputs are not all tensors (sequences, optionals) are skipped:
 * tsopt has no such values.
 *
 * With --cli TSOPT each case goes through the command line instead, as a
 * user drives it: the child writes every input_K.pb as IN/<input name>.npy
 * and every output_K.pb as WANT/<output name>.npy (a sequence as a folder
 * WANT/<name>/ of 0.npy, 1.npy, ...), runs `TSOPT run model.onnx --inputs IN
 * --save-outputs GOT` and `TSOPT compare GOT WANT --rtol 1e-3 --atol 1e-5`:
 * run's failure is a refusal (its last error line the message), compare's
 * exit 1 a wrong result, a signal a crash.  --ort RUN_JS runs ONNX Runtime's
 * command line (tools/ort/run.js) in place of `tsopt run`, on the same files
 * and compared by the same `tsopt compare`.
 *
 * Exit status 1 when an expected case does not pass, or any case is wrong
 * or crashed; newly passing cases are printed so the list can grow
 * (--write-pass writes the full list of passing cases).  --expected may be
 * given more than once: a case in any of the lists must pass (the command
 * line's test lists the in-process cases too). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "onnx/proto.h"
#include "tsopt.h"

#define DEFAULT_DATA "/usr/share/libonnx-testdata/data"
/* The tolerance ONNX Runtime was measured at (docs/conformance.md). */
#define RTOL 1e-3
#define ATOL 1e-5
#define MSG_MAX 600

/* --cli: the tsopt binary; NULL runs the cases in-process.  --ort: ONNX
 * Runtime's command line (tools/ort/run.js, same .npy files) runs the
 * models instead of `tsopt run`, for its count on the same terms. */
static const char *g_cli, *g_ort;

static const char *const SUITES[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};

enum { R_PASS, R_REFUSED, R_WRONG, R_CRASH, R_SKIP, R_ERRATUM };
static const char *const R_NAMES[] = {"passed", "refused", "wrong", "crashed", "skipped", "erratum"};

/* Cases whose expected outputs in ONNX 1.12's data contradict the
 * operator's definition as later ONNX releases and ONNX Runtime read it:
 * a difference there is reported as an erratum, not as a wrong result
 * (anything else, a crash included, counts as usual). */
static const struct {
    const char *name, *why;
} ERRATA[] = {
    {"node/test_resize_downsample_scales_linear_align_corners",
     "ONNX 1.12's values divide by the unrounded output length (input x scale = 2.4), the definition and ONNX "
     "Runtime by the output size (2)"},
    {"node/test_resize_downsample_scales_cubic_align_corners",
     "ONNX 1.12's values divide by the unrounded output length (input x scale = 2.4), the definition and ONNX "
     "Runtime by the output size (2)"},
    {"node/test_cast_FLOAT_to_BFLOAT16",
     "ONNX 1.12 stores the expected bfloat16 values as uint16 bits of truncated floats; the output is bfloat16, "
     "rounded to nearest even"},
};

static const char *erratum(const char *name)
{
    for (size_t i = 0; i < sizeof ERRATA / sizeof *ERRATA; i++)
        if (!strcmp(ERRATA[i].name, name)) return ERRATA[i].why;
    return NULL;
}

typedef struct ccase {
    char name[256]; /* suite/test_x */
    char dir[512];
    int result;
    bool expected;
    char msg[MSG_MAX];
    pid_t pid;
    int fd; /* read end of the child's result pipe */
} ccase;

/* ------------------------------------------------------------ file helpers */

/* snprintf that truncates on purpose (messages, paths far below PATH_MAX):
 * through vsnprintf so -Wformat-truncation does not ask for a check. */
__attribute__((format(printf, 3, 4))) static int say(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return k;
}

static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat sb;
    void *buf = NULL;
    if (!fstat(fileno(f), &sb) && (buf = malloc((size_t)sb.st_size + 1))) {
        *len = fread(buf, 1, (size_t)sb.st_size, f);
        if (*len != (size_t)sb.st_size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of dir whose name starts with prefix (caller frees). */
static char **list_dir(const char *dir, const char *prefix, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        if (!(v[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* ------------------------------------------------------------ one case */

static Onnx__TensorProto *read_tensor_proto(const char *path)
{
    size_t len = 0;
    void *buf = read_all(path, &len);
    if (!buf) return NULL;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    return tp;
}

/* true when every graph input of the model is a tensor (else the case is
 * skipped); *ok false when the model cannot be read at all. */
static Onnx__ModelProto *read_model(const char *path)
{
    size_t len = 0;
    void *buf = read_all(path, &len);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    free(buf);
    if (m && !m->graph) {
        onnx__model_proto__free_unpacked(m, NULL);
        m = NULL;
    }
    return m;
}

static bool inputs_are_tensors(const char *model, bool *ok)
{
    Onnx__ModelProto *m = read_model(model);
    *ok = m != NULL;
    bool all = true;
    for (size_t i = 0; *ok && i < m->graph->n_input; i++) {
        const Onnx__TypeProto *t = m->graph->input[i]->type;
        if (t && t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) all = false;
    }
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return all;
}

static bool close_enough(double got, double want)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= ATOL + RTOL * fabs(want);
}

/* Compares one output; fills msg and returns false on a difference. */
static bool compare(const char *what, const ts_tensor *got, const ts_tensor *want, char *msg)
{
    char a[160], b[160];
    if (got->dtype != want->dtype) {
        say(msg, MSG_MAX, "%s is %s, expected %s", what, ts_dtype_name(got->dtype), ts_dtype_name(want->dtype));
        return false;
    }
    if (!ts_shape_eq(&got->shape, &want->shape)) {
        say(msg, MSG_MAX, "%s has shape %s, expected %s", what, ts_shape_str(&got->shape, a, sizeof a),
                 ts_shape_str(&want->shape, b, sizeof b));
        return false;
    }
    int64_t n = ts_tensor_numel(want), bad = 0, first = -1;
    bool flt = ts_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool same = flt ? close_enough(ts_tensor_get_f64(got, i), ts_tensor_get_f64(want, i))
                        : ts_tensor_get_i64(got, i) == ts_tensor_get_i64(want, i);
        if (!same && !bad++) first = i;
    }
    if (!bad) return true;
    if (flt)
        say(msg, MSG_MAX, "%s differs at %lld of %lld elements (first at %lld: %.9g, expected %.9g)", what,
                 (long long)bad, (long long)n, (long long)first, ts_tensor_get_f64(got, first),
                 ts_tensor_get_f64(want, first));
    else
        say(msg, MSG_MAX, "%s differs at %lld of %lld elements (first at %lld: %lld, expected %lld)", what,
                 (long long)bad, (long long)n, (long long)first, (long long)ts_tensor_get_i64(got, first),
                 (long long)ts_tensor_get_i64(want, first));
    return false;
}

/* Runs one data set on an open session.  Returns R_PASS, R_REFUSED or R_WRONG. */
static int run_set(ts_session *s, const char *set_dir, char *msg)
{
    int nin = ts_session_ninputs(s), nout = ts_session_noutputs(s);
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in);
    ts_tensor **out = calloc((size_t)nout + 1, sizeof *out);
    int result = R_PASS, nfiles = 0;
    char **files = list_dir(set_dir, "input_", &nfiles);
    ts_error err = {0};
    char path[1200], what[300];
    if (!in || !out) {
        say(msg, MSG_MAX, "out of memory");
        result = R_REFUSED;
        goto done;
    }
    /* input_K.pb is the K-th graph input (the backend runner feeds them by
     * position); list_dir sorts names, so input_10 would come before input_2:
     * index by the number instead. */
    for (int f = 0; f < nfiles && result == R_PASS; f++) {
        int k = atoi(files[f] + strlen("input_"));
        say(path, sizeof path, "%s/%s", set_dir, files[f]);
        Onnx__TensorProto *tp = read_tensor_proto(path);
        if (!tp) {
            say(msg, MSG_MAX, "%s is not a TensorProto", path);
            result = R_REFUSED;
            break;
        }
        if (k < 0 || k >= nin) {
            say(msg, MSG_MAX, "%s: the model has %d inputs", files[f], nin);
            result = R_REFUSED;
        } else {
            say(what, sizeof what, "input %d", k);
            if (ts_onnx_tensor_decode(tp, set_dir, what, &in[k], &err)) {
                say(msg, MSG_MAX, "%s", err.msg);
                result = R_REFUSED;
            }
        }
        onnx__tensor_proto__free_unpacked(tp, NULL);
    }
    if (result == R_PASS && ts_session_run(s, in, out, &err)) {
        say(msg, MSG_MAX, "%s", err.msg);
        result = R_REFUSED;
    }
    for (int k = 0; k < nout && result == R_PASS; k++) {
        say(path, sizeof path, "%s/output_%d.pb", set_dir, k);
        Onnx__TensorProto *tp = read_tensor_proto(path);
        ts_tensor *want = NULL;
        ts_io_info info;
        ts_session_output_info(s, k, &info);
        say(what, sizeof what, "output '%s'", info.name);
        if (!tp) {
            say(msg, MSG_MAX, "%s: no expected value (%s)", what, path);
            result = R_REFUSED;
        } else if (ts_onnx_tensor_decode(tp, set_dir, what, &want, &err)) {
            /* tsopt produced a tensor of a type it cannot even represent the
             * expected value in: the expected type is unsupported */
            say(msg, MSG_MAX, "expected %s", err.msg);
            result = R_REFUSED;
        } else if (!compare(what, out[k], want, msg))
            result = R_WRONG;
        ts_tensor_unref(want);
        if (tp) onnx__tensor_proto__free_unpacked(tp, NULL);
    }
done:
    for (int k = 0; in && k < nin; k++) ts_tensor_unref(in[k]);
    for (int k = 0; out && k < nout; k++) ts_tensor_unref(out[k]);
    free(in);
    free(out);
    free_list(files, nfiles);
    return result;
}

static int run_case_cli(const char *dir, int timeout, char *msg);

/* The child's work: every data set of the case. */
static int run_case(const char *dir, int timeout, char *msg)
{
    char path[1200];
    say(path, sizeof path, "%s/model.onnx", dir);
    bool ok;
    if (!inputs_are_tensors(path, &ok)) return R_SKIP;
    if (!ok) {
        say(msg, MSG_MAX, "%s: not an ONNX model", path);
        return R_REFUSED;
    }
    if (g_cli) return run_case_cli(dir, timeout, msg);
    ts_session *s = NULL;
    ts_error err = {0};
    if (ts_session_open(path, 1, &s, &err)) {
        say(msg, MSG_MAX, "%s", err.msg);
        return R_REFUSED;
    }
    int nsets = 0, result = R_PASS;
    char **sets = list_dir(dir, "test_data_set_", &nsets);
    for (int i = 0; i < nsets && result == R_PASS; i++) {
        say(path, sizeof path, "%s/%s", dir, sets[i]);
        result = run_set(s, path, msg);
    }
    if (!nsets) {
        say(msg, MSG_MAX, "no test_data_set_*");
        result = R_REFUSED;
    }
    free_list(sets, nsets);
    ts_session_free(s);
    return result;
}

/* ------------------------------------------------------------ through the command line */

/* A SequenceProto's tensors (field 3, tensor_values): read from the wire
 * format by hand, since tsopt's onnx.proto leaves the message out.  NULL
 * when the bytes are not a sequence of tensors; *n the count. */
static Onnx__TensorProto **read_sequence_proto(const char *path, int *n)
{
    size_t len = 0;
    uint8_t *buf = read_all(path, &len);
    if (!buf) return NULL;
    Onnx__TensorProto **v = calloc(len / 2 + 1, sizeof *v);
    size_t p = 0;
    bool ok = v != NULL;
    *n = 0;
    while (ok && p < len) {
        uint64_t key = 0, l = 0;
        for (int sh = 0; p < len && sh < 64; sh += 7) {
            key |= (uint64_t)(buf[p] & 0x7f) << sh;
            if (!(buf[p++] & 0x80)) break;
        }
        int wire = (int)(key & 7), field = (int)(key >> 3);
        if (wire == 0) { /* elem_type */
            while (p < len && (buf[p++] & 0x80)) {}
            continue;
        }
        if (wire != 2) {
            ok = false;
            break;
        }
        for (int sh = 0; p < len && sh < 64; sh += 7) {
            l |= (uint64_t)(buf[p] & 0x7f) << sh;
            if (!(buf[p++] & 0x80)) break;
        }
        if (l > len - p) {
            ok = false;
            break;
        }
        if (field == 3 && !(v[(*n)++] = onnx__tensor_proto__unpack(NULL, (size_t)l, buf + p))) ok = false;
        else if (field != 1 && field != 3) ok = false; /* sparse, map, optional, nested sequence */
        p += (size_t)l;
    }
    free(buf);
    if (!ok && v) {
        for (int i = 0; i < *n; i++)
            if (v[i]) onnx__tensor_proto__free_unpacked(v[i], NULL);
        free(v);
        v = NULL;
    }
    return v;
}

/* The .pb value at src (a tensor, or a sequence when seq) as .npy at dst
 * (dst.npy, or the folder dst/ of 0.npy ...).  false with msg set. */
static bool pb_to_npy(const char *src, const char *dst, bool seq, const char *what, char *msg)
{
    char path[1400];
    ts_error err = {0};
    int n = 1;
    Onnx__TensorProto *one = NULL, **tps = NULL;
    if (seq) {
        tps = read_sequence_proto(src, &n);
        if (!tps || mkdir(dst, 0777)) {
            say(msg, MSG_MAX, "%s: %s", src, tps ? strerror(errno) : "not a SequenceProto of tensors");
            free(tps);
            return false;
        }
    } else if (!(one = read_tensor_proto(src))) {
        say(msg, MSG_MAX, "%s is not a TensorProto", src);
        return false;
    } else {
        tps = &one;
    }
    bool ok = true;
    for (int i = 0; i < n; i++) {
        ts_tensor *t = NULL;
        char dir[1200];
        say(dir, sizeof dir, "%s", src);
        *strrchr(dir, '/') = 0;
        if (ok && ts_onnx_tensor_decode(tps[i], dir, what, &t, &err)) {
            say(msg, MSG_MAX, "%s", err.msg);
            ok = false;
        }
        if (seq) say(path, sizeof path, "%s/%d.npy", dst, i);
        else say(path, sizeof path, "%s.npy", dst);
        if (ok && ts_npy_save(path, t, &err)) {
            say(msg, MSG_MAX, "%s", err.msg);
            ok = false;
        }
        ts_tensor_unref(t);
        onnx__tensor_proto__free_unpacked(tps[i], NULL);
    }
    if (seq) free(tps);
    return ok;
}

/* Runs argv with stdout and stderr to out; the exit status, or 1000 + the
 * signal that ended it (SIGALRM after timeout seconds: the alarm is kept
 * across exec). */
static int spawn(char *const argv[], const char *out, int timeout)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
        close(fd);
        alarm((unsigned)timeout);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return 127;
    return WIFSIGNALED(status) ? 1000 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* The line of file f that starts with prefix (the last one when prefix is
 * empty) into msg; the exit status rc when there is none. */
static void line_of(const char *f, const char *prefix, const char *what, int rc, char *msg)
{
    size_t len = 0;
    char *text = read_all(f, &len);
    const char *found = NULL;
    for (char *l = text, *e; l && l < text + len; l = e + 1) {
        e = memchr(l, '\n', (size_t)(text + len - l));
        if (!e) e = text + len;
        *e = 0;
        if (*l && !strncmp(l, prefix, strlen(prefix))) {
            found = l;
            if (*prefix) break;
        }
    }
    if (found) say(msg, MSG_MAX, "%s: %s", what, found);
    else say(msg, MSG_MAX, "%s: exit status %d and no message", what, rc);
    free(text);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) && errno != ENOENT ? -1 : 0;
}

/* rm -rf path, without a process per call (nftw, children first). */
static bool rm_tree(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) ? errno == ENOENT : !nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A sanitizer's report in file f (an ASan/UBSan build of tsopt): a crash,
 * whatever the exit status says. */
static bool sanitizer_report(const char *f, const char *what, char *msg)
{
    size_t len = 0;
    char *text = read_all(f, &len);
    const char *keys[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"}, *hit = NULL;
    if (text) text[len] = 0;
    for (size_t k = 0; text && !hit && k < sizeof keys / sizeof *keys; k++) hit = strstr(text, keys[k]);
    if (hit) say(msg, MSG_MAX, "%s: %.200s", what, hit);
    free(text);
    return hit != NULL;
}

/* A value's name as its .npy stem, as `tsopt run` writes it. */
static void stem_path(char *out, size_t n, const char *dir, const char *name)
{
    char stem[600];
    ts_name_sanitize(name, stem, sizeof stem);
    say(out, n, "%s/%s", dir, stem);
}

/* One data set through the command line.  Returns an R_ result. */
static int run_set_cli(const char *model, const Onnx__GraphProto *g, char **feeds, int nfeeds, const char *set_dir,
                       const char *work, int timeout, char *msg)
{
    char in[700], want[700], got[700], log[700], path[1400], dst[1400], what[300];
    say(in, sizeof in, "%s/in", work);
    say(want, sizeof want, "%s/want", work);
    say(got, sizeof got, "%s/got", work);
    say(log, sizeof log, "%s/log", work);
    if (!rm_tree(in) || !rm_tree(want) || !rm_tree(got) || mkdir(in, 0777) || mkdir(want, 0777)) {
        say(msg, MSG_MAX, "cannot make folders in %s", work);
        return R_REFUSED;
    }
    int nfiles = 0, result = R_PASS;
    char **files = list_dir(set_dir, "input_", &nfiles);
    for (int f = 0; f < nfiles && result == R_PASS; f++) {
        int k = atoi(files[f] + strlen("input_"));
        if (k < 0 || k >= nfeeds) {
            say(msg, MSG_MAX, "%s: the model has %d inputs", files[f], nfeeds);
            result = R_REFUSED;
            break;
        }
        say(path, sizeof path, "%s/%s", set_dir, files[f]);
        stem_path(dst, sizeof dst, in, feeds[k]);
        say(what, sizeof what, "input %d", k);
        if (!pb_to_npy(path, dst, false, what, msg)) result = R_REFUSED;
    }
    free_list(files, nfiles);
    for (size_t k = 0; k < g->n_output && result == R_PASS; k++) {
        const Onnx__TypeProto *t = g->output[k]->type;
        bool seq = t && t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        if (t && !seq && t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
            say(msg, MSG_MAX, "output '%s' is neither a tensor nor a sequence: no .npy layout", g->output[k]->name);
            return R_REFUSED;
        }
        say(path, sizeof path, "%s/output_%zu.pb", set_dir, k);
        stem_path(dst, sizeof dst, want, g->output[k]->name);
        say(what, sizeof what, "output '%s'", g->output[k]->name);
        if (!pb_to_npy(path, dst, seq, what, msg)) {
            char m2[MSG_MAX];
            say(m2, sizeof m2, "expected %s", msg);
            say(msg, MSG_MAX, "%s", m2);
            result = R_REFUSED;
        }
    }
    if (result != R_PASS) return result;
    char *run[] = {(char *)g_cli, "run", (char *)model, "--inputs", in, "--save-outputs", got, NULL};
    char *ort[] = {"/usr/bin/node", (char *)g_ort, (char *)model, "--inputs", in, "--save-outputs", got, NULL};
    int rc = spawn(g_ort ? ort : run, log, timeout);
    if (rc >= 1000) {
        say(msg, MSG_MAX, "%s: %s", g_ort ? "run.js" : "tsopt run",
            rc - 1000 == SIGALRM ? "timed out" : strsignal(rc - 1000));
        return R_CRASH;
    }
    if (sanitizer_report(log, "tsopt run", msg)) return R_CRASH;
    if (rc) {
        line_of(log, "", g_ort ? "run.js" : "tsopt run", rc, msg);
        return R_REFUSED;
    }
    char *cmp[] = {(char *)g_cli, "compare", got, want, "--rtol", "1e-3", "--atol", "1e-5", NULL};
    rc = spawn(cmp, log, timeout);
    if (rc >= 1000) {
        say(msg, MSG_MAX, "tsopt compare: %s", strsignal(rc - 1000));
        return R_CRASH;
    }
    if (sanitizer_report(log, "tsopt compare", msg)) return R_CRASH;
    /* an output run did not write is not compared: compare reads GOT's */
    for (size_t k = 0; k < g->n_output && rc == 0; k++) {
        struct stat sb;
        stem_path(dst, sizeof dst, got, g->output[k]->name);
        strcat(dst, ".npy");
        if (stat(dst, &sb)) {
            dst[strlen(dst) - 4] = 0;
            if (stat(dst, &sb)) {
                say(msg, MSG_MAX, "tsopt run wrote no output '%s' (%s)", g->output[k]->name, dst);
                return R_WRONG;
            }
        }
    }
    if (rc == 1) {
        line_of(log, "FAIL", "tsopt compare", rc, msg);
        return R_WRONG;
    }
    if (rc) {
        line_of(log, "", "tsopt compare", rc, msg);
        return R_REFUSED;
    }
    return R_PASS;
}

/* The child's work through the command line: every data set. */
static int run_case_cli(const char *dir, int timeout, char *msg)
{
    char model[1200], work[64];
    say(model, sizeof model, "%s/model.onnx", dir);
    Onnx__ModelProto *m = read_model(model);
    if (!m) {
        say(msg, MSG_MAX, "%s: not an ONNX model", model);
        return R_REFUSED;
    }
    const Onnx__GraphProto *g = m->graph;
    /* input_K.pb feeds the K-th graph input that is not an initializer */
    char **feeds = calloc(g->n_input + 1, sizeof *feeds);
    int nfeeds = 0;
    for (size_t i = 0; feeds && i < g->n_input; i++) {
        bool init = false;
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = !strcmp(g->initializer[j]->name, g->input[i]->name);
        if (!init) feeds[nfeeds++] = g->input[i]->name;
    }
    const char *tmp = getenv("TMPDIR");
    say(work, sizeof work, "%s/conformance_cli.XXXXXX", tmp && *tmp && strlen(tmp) < 30 ? tmp : "/tmp");
    int result = R_PASS, nsets = 0;
    char **sets = NULL;
    if (!feeds || !mkdtemp(work)) {
        say(msg, MSG_MAX, "cannot make a work folder (%s)", work);
        result = R_REFUSED;
        work[0] = 0;
    } else {
        sets = list_dir(dir, "test_data_set_", &nsets);
        if (!nsets) {
            say(msg, MSG_MAX, "no test_data_set_*");
            result = R_REFUSED;
        }
    }
    for (int i = 0; i < nsets && result == R_PASS; i++) {
        char set_dir[1200];
        say(set_dir, sizeof set_dir, "%s/%s", dir, sets[i]);
        result = run_set_cli(model, g, feeds, nfeeds, set_dir, work, timeout, msg);
    }
    if (work[0]) rm_tree(work);
    free_list(sets, nsets);
    free(feeds);
    onnx__model_proto__free_unpacked(m, NULL);
    return result;
}

/* ------------------------------------------------------------ the driver */

static void start(ccase *c, int timeout)
{
    int p[2];
    if (pipe(p)) {
        c->result = R_CRASH;
        say(c->msg, MSG_MAX, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        alarm((unsigned)timeout);
        char msg[MSG_MAX] = "";
        int r = run_case(c->dir, timeout, msg);
        char line[MSG_MAX + 8];
        int len = say(line, sizeof line, "%d %s", r, msg);
        /* one write smaller than the pipe buffer: never blocks */
        if (write(p[1], line, (size_t)len) < 0) _exit(3);
        close(p[1]);
        /* exit, not _exit: under ASan the leak check runs at exit, and a
         * leak makes the status non-zero (counted as a crash) */
        exit(0);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        c->result = R_CRASH;
        say(c->msg, MSG_MAX, "fork: %s", strerror(errno));
        return;
    }
    c->pid = pid;
    c->fd = p[0];
}

static void finish(ccase *c, int status, int timeout)
{
    char line[MSG_MAX + 8];
    ssize_t len = read(c->fd, line, sizeof line - 1);
    close(c->fd);
    c->pid = 0;
    if (WIFSIGNALED(status)) {
        c->result = R_CRASH;
        if (WTERMSIG(status) == SIGALRM)
            say(c->msg, MSG_MAX, "timed out after %d s", timeout);
        else
            say(c->msg, MSG_MAX, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return;
    }
    if (len <= 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        c->result = R_CRASH;
        say(c->msg, MSG_MAX, "exited with status %d and no result", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return;
    }
    line[len] = 0;
    char *sp = strchr(line, ' ');
    c->result = atoi(line);
    say(c->msg, MSG_MAX, "%s", sp ? sp + 1 : "");
    if (c->result == R_WRONG && erratum(c->name)) c->result = R_ERRATUM;
}

/* What a refusal is about, for --causes: an operator tsopt lacks, an
 * element type, or the operator of the node the message names. */
static void cause_of(const char *msg, char *out, size_t n)
{
    const char *p, *q;
    if ((p = strstr(msg, "operator '")) && (q = strchr(p + strlen("operator '"), '\''))) {
        p += strlen("operator '");
        say(out, n, "%.*s (not implemented)", (int)(q - p), p);
    } else if ((p = strstr(msg, "element type "))) {
        p += strlen("element type ");
        say(out, n, "element type %.*s", (int)strcspn(p, " :,"), p);
    } else if ((p = strstr(msg, "' (")) && (q = strchr(p + 3, ')')))
        say(out, n, "%.*s", (int)(q - (p + 3)), p + 3);
    else
        say(out, n, "(other) %.60s", msg);
}

typedef struct tally {
    char key[128];
    int n;
} tally;

static int cmp_tally(const void *a, const void *b)
{
    const tally *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->key, y->key);
}

static void print_causes(const ccase *cs, int n)
{
    tally *t = calloc((size_t)n + 1, sizeof *t);
    int nt = 0;
    if (!t) return;
    for (int i = 0; i < n; i++) {
        if (cs[i].result != R_REFUSED) continue;
        char key[128];
        cause_of(cs[i].msg, key, sizeof key);
        int j = 0;
        while (j < nt && strcmp(t[j].key, key)) j++;
        if (j == nt) say(t[nt++].key, sizeof t[0].key, "%s", key);
        t[j].n++;
    }
    qsort(t, (size_t)nt, sizeof *t, cmp_tally);
    printf("refusals by operator:\n");
    for (int j = 0; j < nt; j++) printf("  %4d %s\n", t[j].n, t[j].key);
    free(t);
}

static void usage(void)
{
    fprintf(stderr, "usage: conformance [--data DIR] [--expected FILE]... [--write-pass FILE] [--jobs N] "
                    "[--timeout S] [--cli TSOPT [--ort RUN_JS]] [--causes] [--verbose] [CASE_SUBSTRING...]\n");
    exit(2);
}

/* Reads the expected-pass lists: one case a line, '#' starts a comment; a
 * case in several lists counts once. */
static char **read_expected(const char **paths, int npaths, int *n)
{
    *n = 0;
    char **v = NULL, line[512];
    int cap = 0;
    for (int p = 0; p < npaths; p++) {
        FILE *f = fopen(paths[p], "r");
        if (!f) {
            fprintf(stderr, "conformance: cannot read expected list '%s': %s\n", paths[p], strerror(errno));
            exit(2);
        }
        while (fgets(line, sizeof line, f)) {
            char *h = strchr(line, '#');
            if (h) *h = 0;
            char *s = line, *e;
            while (*s == ' ' || *s == '\t') s++;
            e = s + strlen(s);
            while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
            bool dup = false;
            for (int i = 0; i < *n && !dup; i++) dup = !strcmp(v[i], s);
            if (!*s || dup) continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 256;
                char **nv = realloc(v, (size_t)cap * sizeof *v);
                if (!nv) exit(2);
                v = nv;
            }
            if (!(v[(*n)++] = strdup(s))) exit(2);
        }
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *data = DEFAULT_DATA, *write_pass = NULL;
    const char **expected_files = calloc((size_t)argc, sizeof *expected_files);
    int nexpected_files = 0;
    int jobs = 2, timeout = 60, nfilters = 0;
    bool causes = false, verbose = false;
    char **filters = calloc((size_t)argc, sizeof *filters);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "--data") && more) data = argv[++i];
        else if (!strcmp(a, "--expected") && more) expected_files[nexpected_files++] = argv[++i];
        else if (!strcmp(a, "--cli") && more) g_cli = argv[++i];
        else if (!strcmp(a, "--ort") && more) g_ort = argv[++i];
        else if (!strcmp(a, "--write-pass") && more) write_pass = argv[++i];
        else if (!strcmp(a, "--jobs") && more) jobs = atoi(argv[++i]);
        else if (!strcmp(a, "--timeout") && more) timeout = atoi(argv[++i]);
        else if (!strcmp(a, "--causes")) causes = true;
        else if (!strcmp(a, "--verbose")) verbose = true;
        else if (a[0] == '-') usage();
        else filters[nfilters++] = argv[i];
    }
    if (jobs < 1 || timeout < 1 || (g_ort && !g_cli)) usage();
    struct stat sb;
    if (stat(data, &sb) || !S_ISDIR(sb.st_mode)) {
        /* ctest's SKIP_RETURN_CODE: the data is a dependency (scripts/deps.sh) */
        printf("conformance: no ONNX backend test data at %s (install libonnx-testdata): skipped\n", data);
        free(filters);
        return 77;
    }

    /* every case of the four suites, in name order */
    ccase *cs = NULL;
    int n = 0, cap = 0;
    for (size_t s = 0; s < sizeof SUITES / sizeof *SUITES; s++) {
        char sdir[600];
        say(sdir, sizeof sdir, "%s/%s", data, SUITES[s]);
        int m = 0;
        char **names = list_dir(sdir, "", &m);
        for (int i = 0; i < m; i++) {
            char name[300];
            say(name, sizeof name, "%s/%s", SUITES[s], names[i]);
            bool keep = !nfilters;
            for (int f = 0; f < nfilters && !keep; f++) keep = strstr(name, filters[f]) != NULL;
            if (!keep) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                ccase *nc = realloc(cs, (size_t)cap * sizeof *cs);
                if (!nc) return 2;
                cs = nc;
            }
            memset(&cs[n], 0, sizeof cs[n]);
            say(cs[n].name, sizeof cs[n].name, "%s", name);
            say(cs[n].dir, sizeof cs[n].dir, "%s/%s", sdir, names[i]);
            n++;
        }
        free_list(names, m);
    }

    /* run, jobs at a time */
    int next = 0, running = 0;
    while (next < n || running) {
        while (running < jobs && next < n) {
            start(&cs[next], timeout);
            if (cs[next].pid) running++;
            next++;
        }
        if (!running) continue;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            perror("conformance: waitpid");
            return 2;
        }
        for (int i = 0; i < next; i++)
            if (cs[i].pid == pid) {
                finish(&cs[i], status, timeout);
                running--;
                break;
            }
    }

    /* against the expected list */
    int nexp = 0, regressions = 0, missing = 0;
    bool expected = nexpected_files > 0;
    char **exp = expected ? read_expected(expected_files, nexpected_files, &nexp) : NULL;
    for (int e = 0; e < nexp; e++) {
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            if (!strcmp(cs[i].name, exp[e])) cs[i].expected = found = true;
        /* with a filter, cases left out are not missing */
        if (!found && !nfilters) {
            printf("MISSING %s: in the expected list but not in the test data\n", exp[e]);
            missing++;
        }
    }
    int count[6] = {0}, newly = 0;
    for (int i = 0; i < n; i++) {
        const ccase *c = &cs[i];
        count[c->result]++;
        if (c->expected && c->result != R_PASS) {
            printf("REGRESSION %s: %s: %s\n", c->name, R_NAMES[c->result], c->msg);
            regressions++;
        } else if (c->result == R_WRONG || c->result == R_CRASH)
            printf("%s %s: %s\n", c->result == R_WRONG ? "WRONG" : "CRASH", c->name, c->msg);
        else if (c->result == R_ERRATUM)
            printf("ERRATUM %s: %s (%s)\n", c->name, c->msg, erratum(c->name));
        else if (expected && c->result == R_PASS && !c->expected) {
            printf("NEW PASS %s (add it to the expected list)\n", c->name);
            newly++;
        } else if (verbose && c->result == R_REFUSED)
            printf("refused %s: %s\n", c->name, c->msg);
    }
    if (causes) print_causes(cs, n);
    if (write_pass) {
        FILE *f = fopen(write_pass, "w");
        if (!f) {
            fprintf(stderr, "conformance: cannot write '%s': %s\n", write_pass, strerror(errno));
            return 2;
        }
        fprintf(f, "# ONNX backend test cases tsopt passes (tests/conformance/conformance.c%s).\n"
                   "# A case listed here that stops passing fails `make test`.\n",
                g_cli ? ", through the command line: --cli" : "");
        for (int i = 0; i < n; i++)
            if (cs[i].result == R_PASS) fprintf(f, "%s\n", cs[i].name);
        fclose(f);
    }
    int failed = n - count[R_SKIP] - count[R_PASS];
    printf("conformance%s: %d passed, %d refused, %d wrong, %d crashed, %d errata (%d cases with tensor inputs; %d "
           "skipped: sequence/optional inputs)\n",
           g_ort ? " (ONNX Runtime, command line)" : g_cli ? " (command line)" : "", count[R_PASS],
           count[R_REFUSED], count[R_WRONG], count[R_CRASH], count[R_ERRATUM], n - count[R_SKIP], count[R_SKIP]);
    if (expected)
        printf("expected list: %d cases, %d regressed, %d missing; %d newly passing\n", nexp, regressions, missing,
               newly);
    printf("%d passed, %d failed\n", count[R_PASS], failed);
    free_list(exp, nexp);
    free(cs);
    free(filters);
    free(expected_files);
    return regressions || missing || count[R_WRONG] || count[R_CRASH] ? 1 : 0;
}
