/* tsopt compare: every .npy in DIR_A against the same name in DIR_B, with
 * numpy's allclose rule |a - b| <= atol + rtol * |b|.  NaN equals NaN (two
 * engines agreeing on a NaN is agreement); NaN against a number fails.  An
 * infinity equals only the same infinity: the rule alone would pass 1
 * against inf (rtol * inf is inf) and +inf against -inf. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt compare DIR_A DIR_B [--rtol R] [--atol A]\n"
    "  compares every .npy in DIR_A with the file of the same name in DIR_B;\n"
    "  an element fails when |a - b| > atol + rtol * |b| (defaults rtol 1e-3, atol 1e-4);\n"
    "  NaN matches only NaN, an infinity only the same infinity.\n"
    "  exit 0: all match; 1: some tensor differs; 2: usage or file error\n";

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted .npy names in dir; NULL (error printed) when it cannot be read. */
static char **list_npy(const char *dir, int *n)
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
        if (len < 5 || e->d_name[0] == '.' || strcmp(e->d_name + len - 4, ".npy")) continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, sizeof *nn * (size_t)cap);
            if (!nn) break;
            names = nn;
        }
        if (!(names[cnt] = strdup(e->d_name))) break;
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
    for (int64_t i = 0; i < n; i++) {
        double x = ts_tensor_get_f64(a, i), y = ts_tensor_get_f64(b, i);
        double ad, rel;
        bool ok;
        if (isnan(x) || isnan(y)) {
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
            double excess = isfinite(ad) ? ad - (atol + rtol * fabs(y)) : INFINITY;
            if (d.worst < 0 || excess > d.worst_excess) d.worst = i, d.worst_excess = excess;
            d.bad++;
        }
    }
    return d;
}

/* One tensor: 0 OK, 1 FAIL (line printed), 2 error (printed). */
static int compare_one(const char *dir_a, const char *dir_b, const char *file, double rtol, double atol)
{
    char pa[4096], pb[4096], sa[160], sb[160];
    snprintf(pa, sizeof pa, "%s/%s", dir_a, file);
    snprintf(pb, sizeof pb, "%s/%s", dir_b, file);
    ts_tensor *a = NULL, *b = NULL;
    ts_error err = {0};
    int rc = CLI_USAGE;
    char name[1024];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(file) - 4), file);
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
    diff d = measure(a, b, rtol, atol);
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
        printf("]: %.7g vs %.7g", ts_tensor_get_f64(a, d.worst), ts_tensor_get_f64(b, d.worst));
    }
    printf("\n");
    rc = d.bad ? CLI_FAIL : CLI_OK;
done:
    ts_tensor_unref(a);
    ts_tensor_unref(b);
    return rc;
}

int cli_compare(int argc, char **argv)
{
    const char *dirs[2] = {NULL, NULL}, *val;
    int ndirs = 0;
    double rtol = 1e-3, atol = 1e-4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (cli_opt(argc, argv, &i, "--rtol", &val)) {
            if (!val || !cli_parse_double("--rtol", val, &rtol)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--atol", &val)) {
            if (!val || !cli_parse_double("--atol", val, &atol)) return CLI_USAGE;
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
    char **names = list_npy(dirs[0], &n);
    if (!names) return CLI_USAGE;
    int rc = CLI_OK, failed = 0;
    if (!n) rc = cli_error(CLI_USAGE, "no .npy files in folder (%s)", dirs[0]);
    for (int i = 0; i < n && rc != CLI_USAGE; i++) {
        int r = compare_one(dirs[0], dirs[1], names[i], rtol, atol);
        if (r == CLI_USAGE) rc = CLI_USAGE;
        if (r == CLI_FAIL) failed++;
    }
    if (rc != CLI_USAGE) {
        printf("%d of %d tensors match (rtol %g, atol %g)\n", n - failed, n, rtol, atol);
        if (failed) rc = CLI_FAIL;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}
