/* Coverage of the fast runtime (issue 31): which kernel-table entries
 * (operator, kernel) the campaign's plans used, and finer keys -- kernel,
 * operator, dtype, the layouts in and out, fused or not -- that tell the
 * campaign which graphs reached something new (campaign.c keeps those).
 * The plans say what they ran through ts_plan_step_get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz/fuzz.h"
#include "util/hash.h"

#define MAX_ENTRIES 256

struct ts_fuzz_cover {
    const char *op[MAX_ENTRIES], *kernel[MAX_ENTRIES];
    long hits[MAX_ENTRIES];
    int nentries;
    char **keys; /* open addressing, power-of-two capacity */
    int nkeys, cap;
};

ts_fuzz_cover *ts_fuzz_cover_new(void)
{
    ts_fuzz_cover *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nentries = ts_plan_kernel_table(c->op, c->kernel, MAX_ENTRIES);
    if (c->nentries > MAX_ENTRIES) c->nentries = MAX_ENTRIES;
    c->cap = 1024;
    if (!(c->keys = calloc((size_t)c->cap, sizeof *c->keys))) {
        free(c);
        return NULL;
    }
    return c;
}

void ts_fuzz_cover_free(ts_fuzz_cover *c)
{
    if (!c) return;
    for (int i = 0; i < c->cap; i++) free(c->keys[i]);
    free(c->keys);
    free(c);
}

/* Adds key; true when it is new. */
static bool add_key(ts_fuzz_cover *c, const char *key)
{
    if (2 * (c->nkeys + 1) > c->cap) {
        int cap = 2 * c->cap;
        char **k = calloc((size_t)cap, sizeof *k);
        if (!k) return false;
        for (int i = 0; i < c->cap; i++)
            if (c->keys[i]) {
                uint64_t j = ts_hash_str(TS_HASH_SEED, c->keys[i]) & (uint64_t)(cap - 1);
                while (k[j]) j = (j + 1) & (uint64_t)(cap - 1);
                k[j] = c->keys[i];
            }
        free(c->keys);
        c->keys = k, c->cap = cap;
    }
    uint64_t j = ts_hash_str(TS_HASH_SEED, key) & (uint64_t)(c->cap - 1);
    for (; c->keys[j]; j = (j + 1) & (uint64_t)(c->cap - 1))
        if (!strcmp(c->keys[j], key)) return false;
    if (!(c->keys[j] = strdup(key))) return false;
    c->nkeys++;
    return true;
}

int ts_fuzz_cover_plan(ts_fuzz_cover *c, const ts_plan *p)
{
    int fresh = 0;
    for (int k = 0, n = ts_plan_step_count(p); k < n; k++) {
        ts_plan_step_info s;
        ts_plan_step_get(p, k, &s);
        for (int e = 0; e < c->nentries; e++)
            if (!strcmp(c->kernel[e], s.kernel) && !strcmp(c->op[e], s.op)) {
                fresh += !c->hits[e]++;
                break;
            }
        char key[160];
        snprintf(key, sizeof key, "%s|%s|%s|%s>%s|%s", s.kernel, s.op, ts_dtype_name(s.dtype), s.in_layout,
                 s.out_layout, s.nodes > 1 ? "fused" : "one");
        fresh += add_key(c, key);
    }
    return fresh;
}

void ts_fuzz_cover_counts(const ts_fuzz_cover *c, int *reached, int *entries, int *keys)
{
    int r = 0;
    for (int e = 0; e < c->nentries; e++) r += c->hits[e] > 0;
    *reached = r, *entries = c->nentries, *keys = c->nkeys;
}

int ts_fuzz_cover_missing(const ts_fuzz_cover *c, char *out, size_t n)
{
    size_t k = 0;
    int miss = 0;
    if (n) out[0] = 0;
    for (int e = 0; e < c->nentries; e++) {
        if (c->hits[e]) continue;
        miss++;
        if (k < n) k += (size_t)snprintf(out + k, n - k, "%s%s:%s", k ? " " : "", c->op[e], c->kernel[e]);
    }
    if (k >= n && n) out[n - 1] = 0;
    return miss;
}

/* "cover E" then "hits op kernel" per reached entry, "keys K" then a key
 * per line.  Entries are matched by name: a kernel this build lacks fails. */
bool ts_fuzz_cover_write(const ts_fuzz_cover *c, FILE *f)
{
    int reached = 0;
    for (int e = 0; e < c->nentries; e++) reached += c->hits[e] > 0;
    fprintf(f, "cover %d\n", reached);
    for (int e = 0; e < c->nentries; e++)
        if (c->hits[e]) fprintf(f, "%ld %s %s\n", c->hits[e], c->op[e], c->kernel[e]);
    fprintf(f, "keys %d\n", c->nkeys);
    for (int i = 0; i < c->cap; i++)
        if (c->keys[i]) fprintf(f, "%s\n", c->keys[i]);
    return !ferror(f);
}

bool ts_fuzz_cover_read(ts_fuzz_cover *c, FILE *f)
{
    int n, nk;
    char op[64], kernel[64], key[256];
    if (fscanf(f, "cover %d\n", &n) != 1 || n < 0 || n > c->nentries) return false;
    for (int k = 0; k < n; k++) {
        long hits;
        if (fscanf(f, "%ld %63s %63s\n", &hits, op, kernel) != 3 || hits < 1) return false;
        int e = 0;
        while (e < c->nentries && (strcmp(c->op[e], op) || strcmp(c->kernel[e], kernel))) e++;
        if (e == c->nentries) return false;
        c->hits[e] = hits;
    }
    if (fscanf(f, "keys %d\n", &nk) != 1 || nk < 0) return false;
    for (int k = 0; k < nk; k++) {
        if (!fgets(key, sizeof key, f)) return false;
        key[strcspn(key, "\n")] = 0;
        add_key(c, key);
    }
    return true;
}
