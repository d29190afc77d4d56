/* tsopt compare: every .npy in DIR_A against the same name in DIR_B, with
 * numpy's allclose rule |a - b| <= atol + rtol * |b|.  NaN equals NaN (two
 * engines agreeing on a NaN is agreement); NaN against a number fails.  An
 * infinity equals only the same infinity: the rule alone would pass 1
 * against inf (rtol * inf is inf) and +inf against -inf.  Integers and
 * bools compare exactly (through doubles, int64 values past 2^53 would
 * blur, and a tolerance on an index or a count hides bugs).  float16 and
 * bfloat16 default to two units in their last place: two engines that
 * round every node's output to them differ by that much.
 * A subfolder NAME/ holding 0.npy, 1.npy, ... is an ONNX sequence
 * (docs/conformance.md, ".npy files"): same length, then element by element. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt compare DIR_A DIR_B [--rtol R] [--atol A]\n"
    "  compares every .npy in DIR_A with the file of the same name in DIR_B, and every\n"
    "  sequence folder NAME/ (0.npy, 1.npy, ...) with DIR_B/NAME/, element by element;\n"
    "  a float element fails when |a - b| > atol + rtol * |b| (defaults rtol 1e-3, atol 1e-4;\n"
    "  without --rtol, float16 uses rtol 2e-3 and bfloat16 1.6e-2: two units in their last\n"
    "  place); NaN matches only NaN, an infinity only the same infinity; integers and bools\n"
    "  must be equal.\n"
    "  exit 0: all match; 1: some tensor differs; 2: usage or file error\n";

/* Without --rtol: 1e-3, or two units in the last place of the narrow
 * floats (float16 2 * 2^-10, bfloat16 2 * 2^-7, rounded up). */
static double default_rtol(ts_dtype t) { return t == TS_F16 ? 2e-3 : t == TS_BF16 ? 1.6e-2 : 1e-3; }

typedef struct tol {
    double rtol, atol;
    bool rtol_given;
    bool narrow_seen; /* a float16/bfloat16 tensor used its own default */
    int ntensors, nfailed;
} tol;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void free_names(char **names, int n)
{
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* Sorted entries of dir: .npy files (named with the suffix) and, when
 * folders is set, subfolders (sequences; named with a trailing '/').
 * NULL (error printed) when it cannot be read. */
static char **list_entries(const char *dir, bool folders, int *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(CLI_USAGE, "cannot read folder (%s)", dir);
        return NULL;
    }
    char **names = NULL;
    int cnt = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        bool npy = len >= 5 && !strcmp(e->d_name + len - 4, ".npy"), sub = false;
        if (!npy && folders) {
            char p[4096];
            struct stat sb;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            sub = !stat(p, &sb) && S_ISDIR(sb.st_mode);
        }
        if (!npy && !sub) continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, sizeof *nn * (size_t)cap);
            if (!nn) break;
            names = nn;
        }
        if (!(names[cnt] = malloc(len + 2))) break;
        snprintf(names[cnt], len + 2, "%s%s", e->d_name, sub ? "/" : "");
        cnt++;
    }
    closedir(d);
    if (cnt) qsort(names, (size_t)cnt, sizeof *names, by_name);
    *n = cnt;
    if (!names) names = calloc(1, sizeof *names);
    return names;
}

typedef struct diff {
    double max_abs, max_rel;
    int64_t bad, worst; /* count out of tolerance; index of the worst one, -1 none */
    int64_t nan_bad;    /* NaN against a number */
    double worst_excess;
} diff;

static diff measure(const ts_tensor *a, const ts_tensor *b, double rtol, double atol)
{
    diff d = {.worst = -1, .worst_excess = -INFINITY};
    int64_t n = ts_tensor_numel(a);
    bool flt = ts_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        double x = ts_tensor_get_f64(a, i), y = ts_tensor_get_f64(b, i);
        double ad, rel;
        bool ok;
        if (!flt) { /* exactly: the difference in 64 bits, then as a double */
            int64_t p = ts_tensor_get_i64(a, i), q = ts_tensor_get_i64(b, i);
            bool gt = a->dtype == TS_U64 ? (uint64_t)p > (uint64_t)q : p > q;
            ok = p == q;
            ad = (double)(gt ? (uint64_t)p - (uint64_t)q : (uint64_t)q - (uint64_t)p);
            rel = ok ? 0 : y != 0 ? ad / fabs(y) : INFINITY;
        } else if (isnan(x) || isnan(y)) {
            ok = isnan(x) && isnan(y);
            ad = rel = ok ? 0 : INFINITY;
            d.nan_bad += !ok;
        } else if (x == y) { /* also equal infinities */
            ok = true;
            ad = rel = 0;
        } else if (isinf(x) || isinf(y)) {
            ok = false;
            ad = rel = INFINITY;
        } else {
            ad = fabs(x - y);
            rel = y != 0 ? ad / fabs(y) : INFINITY;
            ok = ad <= atol + rtol * fabs(y);
        }
        if (ad > d.max_abs) d.max_abs = ad;
        if (rel > d.max_rel) d.max_rel = rel;
        if (!ok) {
            double excess = flt && isfinite(ad) ? ad - (atol + rtol * fabs(y)) : ad;
            if (d.worst < 0 || excess > d.worst_excess) d.worst = i, d.worst_excess = excess;
            d.bad++;
        }
    }
    return d;
}

/* Element i as the file holds it: integers exactly (uint64 unsigned). */
static void print_value(const ts_tensor *t, int64_t i)
{
    if (ts_dtype_is_float(t->dtype))
        printf("%.7g", ts_tensor_get_f64(t, i));
    else if (t->dtype == TS_U64)
        printf("%llu", (unsigned long long)ts_tensor_get_i64(t, i));
    else
        printf("%lld", (long long)ts_tensor_get_i64(t, i));
}

/* Files pa and pb, shown as name: 0 OK, 1 FAIL (line printed), 2 error
 * (printed). */
static int compare_one(const char *pa, const char *pb, const char *name, tol *tl)
{
    char sa[160], sb[160];
    ts_tensor *a = NULL, *b = NULL;
    ts_error err = {0};
    int rc = CLI_USAGE;
    if (ts_npy_load(pa, &a, &err) || ts_npy_load(pb, &b, &err)) {
        cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    ts_shape_str(&a->shape, sa, sizeof sa);
    if (!ts_shape_eq(&a->shape, &b->shape) || a->dtype != b->dtype) {
        printf("FAIL %-32s %s %s vs %s %s\n", name, ts_dtype_name(a->dtype), sa, ts_dtype_name(b->dtype),
               ts_shape_str(&b->shape, sb, sizeof sb));
        rc = CLI_FAIL;
        goto done;
    }
    double rtol = tl->rtol;
    if (!tl->rtol_given && default_rtol(a->dtype) != rtol) {
        rtol = default_rtol(a->dtype);
        tl->narrow_seen = true;
    }
    diff d = measure(a, b, rtol, tl->atol);
    if (d.nan_bad) d.max_abs = d.max_rel = NAN; /* "inf" would hide that a NaN appeared */
    printf("%-4s %-32s %-16s max_abs %-10.3g max_rel %.3g", d.bad ? "FAIL" : "OK", name, sa, d.max_abs,
           d.max_rel);
    if (d.bad) {
        /* The worst element, by multi-index, with both values. */
        int64_t strides[TS_MAX_RANK], r = d.worst;
        ts_shape_strides(&a->shape, strides);
        printf(" %lld of %lld elements off; worst at [", (long long)d.bad, (long long)ts_tensor_numel(a));
        for (int k = 0; k < a->shape.rank; k++) {
            printf("%s%lld", k ? "," : "", (long long)(r / strides[k]));
            r %= strides[k];
        }
        printf("]: ");
        print_value(a, d.worst);
        printf(" vs ");
        print_value(b, d.worst);
    }
    printf("\n");
    rc = d.bad ? CLI_FAIL : CLI_OK;
done:
    ts_tensor_unref(a);
    ts_tensor_unref(b);
    return rc;
}

/* Counts one compared tensor; CLI_USAGE when r is an error. */
static int tally(tol *tl, int r)
{
    tl->ntensors++;
    tl->nfailed += r == CLI_FAIL;
    return r == CLI_USAGE ? CLI_USAGE : CLI_OK;
}

/* The element files of a sequence folder must be exactly 0.npy .. N-1.npy:
 * a gap or a stray name is a broken sequence, not a shorter one. */
static bool seq_names_ok(const char *dir, char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        char *end;
        long k = strtol(names[i], &end, 10);
        if (end == names[i] || strcmp(end, ".npy") || k < 0 || k >= n || (names[i][0] == '0' && end - names[i] > 1)) {
            cli_error(CLI_USAGE, "sequence folder holds '%s': want 0.npy .. %d.npy (%s)", names[i], n - 1, dir);
            return false;
        }
    }
    return true;
}

/* Sequence folder sub ("NAME/") in both: same length, then NAME[i] one by one. */
static int compare_seq(const char *da, const char *db, const char *sub, tol *tl)
{
    char pa[4096], pb[4096];
    int na = 0, nb = 0, rc = CLI_USAGE;
    snprintf(pa, sizeof pa, "%s/%s", da, sub);
    snprintf(pb, sizeof pb, "%s/%s", db, sub);
    char **ea = list_entries(pa, false, &na), **eb = ea ? list_entries(pb, false, &nb) : NULL;
    if (!ea || !eb || !seq_names_ok(pa, ea, na) || !seq_names_ok(pb, eb, nb)) goto done;
    int namelen = (int)strlen(sub) - 1;
    if (na != nb) {
        printf("FAIL %-32.*s sequence of %d vs %d tensors\n", namelen, sub, na, nb);
        rc = tally(tl, CLI_FAIL);
        goto done;
    }
    rc = CLI_OK;
    for (int k = 0; k < na && rc == CLI_OK; k++) {
        char fa[4200], fb[4200], shown[1100];
        snprintf(fa, sizeof fa, "%s%d.npy", pa, k);
        snprintf(fb, sizeof fb, "%s%d.npy", pb, k);
        snprintf(shown, sizeof shown, "%.*s[%d]", namelen, sub, k);
        rc = tally(tl, compare_one(fa, fb, shown, tl));
    }
done:
    free_names(ea, na);
    free_names(eb, nb);
    return rc;
}

int cli_compare(int argc, char **argv)
{
    const char *dirs[2] = {NULL, NULL}, *val;
    int ndirs = 0;
    tol tl = {.rtol = 1e-3, .atol = 1e-4};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (cli_opt(argc, argv, &i, "--rtol", &val)) {
            if (!val || !cli_parse_double("--rtol", val, &tl.rtol)) return CLI_USAGE;
            tl.rtol_given = true;
        } else if (cli_opt(argc, argv, &i, "--atol", &val)) {
            if (!val || !cli_parse_double("--atol", val, &tl.atol)) return CLI_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(CLI_USAGE, "compare: unknown option '%s'", argv[i]);
        } else if (ndirs == 2) {
            return cli_error(CLI_USAGE, "compare: more than two folders given ('%s')", argv[i]);
        } else {
            dirs[ndirs++] = argv[i];
        }
    }
    if (ndirs < 2) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    struct stat sb;
    if (stat(dirs[1], &sb) || !S_ISDIR(sb.st_mode)) return cli_error(CLI_USAGE, "cannot read folder (%s)", dirs[1]);
    int n = 0;
    char **names = list_entries(dirs[0], true, &n);
    if (!names) return CLI_USAGE;
    int rc = CLI_OK;
    if (!n) rc = cli_error(CLI_USAGE, "no .npy files or sequence folders in folder (%s)", dirs[0]);
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        size_t len = strlen(names[i]);
        if (names[i][len - 1] == '/') {
            rc = compare_seq(dirs[0], dirs[1], names[i], &tl);
            continue;
        }
        char pa[4096], pb[4096], name[1024];
        snprintf(pa, sizeof pa, "%s/%s", dirs[0], names[i]);
        snprintf(pb, sizeof pb, "%s/%s", dirs[1], names[i]);
        snprintf(name, sizeof name, "%.*s", (int)len - 4, names[i]);
        rc = tally(&tl, compare_one(pa, pb, name, &tl));
    }
    if (rc == CLI_OK) {
        printf("%d of %d tensors match (rtol %g, atol %g%s)\n", tl.ntensors - tl.nfailed, tl.ntensors, tl.rtol,
               tl.atol, tl.narrow_seen ? "; float16 rtol 2e-3, bfloat16 1.6e-2" : "");
        if (tl.nfailed) rc = CLI_FAIL;
    }
    free_names(names, n);
    return rc;
}
