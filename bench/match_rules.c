/* Matching cost of a rule set on model graphs: what the optimizer's search
 * pays per graph it expands (one ts_match_index_build, then ts_match_all
 * for every rule).  Not a test: it prints, per model, the live node count,
 * the matches found and the time per pass (median of ROUNDS).
 *
 *   cmake --build build --target bench_match
 *   build/bench_match RULES [--no-reverses] [--rounds N] MODEL.onnx...
 *
 * Reverses are added as `tsopt optimize --rules` does (ts_rules_add_reverses). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "rules/apply.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool count(const ts_match *m, void *ctx)
{
    (void)m;
    ++*(long *)ctx;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s RULES [--no-reverses] [--rounds N] MODEL.onnx...\n", argv[0]);
        return 2;
    }
    ts_error err = {0};
    ts_rule *rules = NULL;
    int nrules = 0, added = 0, rounds = 5, first = 2;
    bool reverses = true;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "--no-reverses")) reverses = false;
        else if (!strcmp(argv[first], "--rounds") && first + 1 < argc) rounds = atoi(argv[++first]);
    }
    if (rounds < 1 || rounds > 99) rounds = 5;
    if (ts_rules_parse_file(argv[1], &rules, &nrules, &err) ||
        (reverses && ts_rules_add_reverses(&rules, &nrules, &added, &err))) {
        fprintf(stderr, "bench-match: %s\n", err.msg);
        return 1;
    }
    printf("%d rules (%d reverses), %d rounds\n", nrules, added, rounds);
    printf("%-16s %7s %9s %12s %12s\n", "model", "nodes", "matches", "median_ms", "min_ms");
    for (int a = first; a < argc; a++) {
        ts_graph *g = NULL;
        if (ts_onnx_load(argv[a], NULL, 0, &g, &err)) {
            fprintf(stderr, "bench-match: %s\n", err.msg);
            return 1;
        }
        int live = 0;
        for (int i = 0; i < g->nnodes; i++) live += !g->nodes[i].dead;
        double t[99];
        long matches = 0;
        for (int r = 0; r < rounds; r++) {
            long n = 0;
            double t0 = now();
            ts_match_index ix;
            if (ts_match_index_build(&ix, g, &err)) {
                fprintf(stderr, "bench-match: %s\n", err.msg);
                return 1;
            }
            for (int k = 0; k < nrules; k++) ts_match_all(&ix, &rules[k], count, &n);
            ts_match_index_free(&ix);
            t[r] = (now() - t0) * 1e3;
            matches = n;
        }
        qsort(t, (size_t)rounds, sizeof *t, cmp_double);
        const char *base = strrchr(argv[a], '/');
        printf("%-16s %7d %9ld %12.3f %12.3f\n", base ? base + 1 : argv[a], live, matches, t[rounds / 2], t[0]);
        fflush(stdout);
        ts_graph_free(g);
    }
    ts_rules_free(rules, nrules);
    return 0;
}
