/* A campaign's checkpoint (issue 30: a long campaign stopped and resumed).
 *
 * Step i of a campaign depends only on its seed, its options and i, but
 * for what the campaign has learnt on the way: the coverage it reached
 * (which decides what is kept), the kept seeds' families and the corpus
 * draw (which decide the next graphs' families) and the error signatures
 * already met (which decide what is a duplicate).  DIR/checkpoint holds
 * those with the next step and the counts, so that a resumed campaign
 * tests the very steps an uninterrupted one would and numbers its
 * findings after the ones already written.  The file is replaced
 * atomically (written beside, then renamed): a kill leaves the previous
 * checkpoint whole.  Text, one section per line group; names and
 * signatures are one per line (they hold no newline). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz/fuzz.h"

#define MAGIC "tsopt-fuzz-checkpoint 1"

/* What must match for a resumed campaign to make the same steps. */
void ts_fuzz_checkpoint_key(const ts_fuzz_opts *o, char *out, size_t n)
{
    snprintf(out, n, "seed=%" PRIu64 " target=%s mode=%s optimizer=%d budget=%d minimize=%d plant=%s stride=%ld offset=%ld",
             o->seed, o->target.kind == TS_FUZZ_TARGET_ORT ? "ort" : "tsopt",
             o->mode == TS_FUZZ_PAIRS ? "pairs" : o->mode == TS_FUZZ_GRAPHS ? "graphs" : "both", o->target.optimizer,
             o->target.opt_budget, !o->no_minimize, o->target.plant ? o->target.plant : "-",
             o->pair_stride > 0 ? o->pair_stride : 1, o->pair_offset);
}

static void put_lines(FILE *f, const char *what, char *const *s, int n)
{
    fprintf(f, "%s %d\n", what, n);
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", s[i]);
}

ts_status ts_fuzz_checkpoint_save(const char *dir, const ts_fuzz_opts *o, const ts_fuzz_resume *r,
                                  const ts_fuzz_cover *cover, ts_error *err)
{
    char path[1100], tmp[1120], key[512];
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    ts_fuzz_checkpoint_key(o, key, sizeof key);
    const ts_fuzz_stats *s = &r->st;
    fprintf(f, MAGIC "\n%s\nnext %ld\nseconds %.17g\n", key, r->next, s->seconds);
    fprintf(f, "stats %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", s->generated, s->tested,
            s->findings, s->mismatches, s->errors, s->duplicates, s->filtered, s->skipped, s->saved, s->original_nodes,
            s->variant_nodes, s->saturated, s->optimized, s->graphs, s->graph_filtered, s->kept);
    fprintf(f, "corpus %d %d %" PRIu64, r->nfamily, r->turn, r->rng);
    for (int i = 0; i < r->nfamily; i++) fprintf(f, " %d", r->family[i]);
    fputc('\n', f);
    put_lines(f, "seen", r->sig, r->nsig);
    bool ok = !cover || ts_fuzz_cover_write(cover, f);
    ok &= !ferror(f);
    if (fclose(f)) ok = false;
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
    }
    return TS_OK;
}

void ts_fuzz_resume_free(ts_fuzz_resume *r)
{
    for (int i = 0; i < r->nsig; i++) free(r->sig[i]);
    free(r->sig);
    free(r->family);
    memset(r, 0, sizeof *r);
}

/* Reads one line (without its newline) into buf; false at end or error. */
static bool line(FILE *f, char *buf, size_t n)
{
    if (!fgets(buf, (int)n, f)) return false;
    buf[strcspn(buf, "\n")] = 0;
    return true;
}

ts_status ts_fuzz_checkpoint_load(const char *dir, const ts_fuzz_opts *o, ts_fuzz_resume *r, ts_fuzz_cover *cover,
                                  ts_error *err)
{
    char path[1100], buf[4096], key[512];
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_error_set(err, errno == ENOENT ? TS_ERR_INVALID : TS_ERR_IO, "fuzz --resume: cannot open '%s': %s",
                            path, strerror(errno));
    ts_fuzz_checkpoint_key(o, key, sizeof key);
    ts_status st = TS_OK;
    ts_fuzz_stats *s = &r->st;
    int nseen = 0;
    if (!line(f, buf, sizeof buf) || strcmp(buf, MAGIC)) {
        st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s' is not a tsopt fuzz checkpoint", path);
    } else if (!line(f, buf, sizeof buf) || strcmp(buf, key)) {
        st = ts_error_set(err, TS_ERR_INVALID,
                          "fuzz --resume: '%s' was made with other options (%s), this command gives %s: a resumed "
                          "campaign must make the same steps", path, buf, key);
    } else if (fscanf(f, "next %ld\nseconds %lf\n", &r->next, &s->seconds) != 2 ||
               fscanf(f, "stats %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", &s->generated,
                      &s->tested, &s->findings, &s->mismatches, &s->errors, &s->duplicates, &s->filtered, &s->skipped,
                      &s->saved, &s->original_nodes, &s->variant_nodes, &s->saturated, &s->optimized, &s->graphs,
                      &s->graph_filtered, &s->kept) != 16 ||
               fscanf(f, "corpus %d %d %" SCNu64, &r->nfamily, &r->turn, &r->rng) != 3 || r->nfamily < 0 ||
               r->nfamily > 100000000) {
        st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s': bad counts", path);
    }
    if (!st && !(r->family = malloc(sizeof *r->family * (size_t)(r->nfamily + 1))))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < r->nfamily; i++)
        if (fscanf(f, " %d", &r->family[i]) != 1 || r->family[i] < 0 || r->family[i] >= ts_fuzz_families())
            st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s': bad corpus", path);
    if (!st && (fscanf(f, "\nseen %d\n", &nseen) != 1 || nseen < 0 || nseen > 10000000))
        st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s': bad signature count", path);
    if (!st && !(r->sig = calloc((size_t)nseen + 1, sizeof *r->sig))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (; !st && r->nsig < nseen; r->nsig++)
        if (!line(f, buf, sizeof buf)) st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s': truncated", path);
        else if (!(r->sig[r->nsig] = strdup(buf))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st && cover && !ts_fuzz_cover_read(cover, f))
        st = ts_error_set(err, TS_ERR_PARSE, "fuzz --resume: '%s': bad coverage section", path);
    fclose(f);
    if (st) ts_fuzz_resume_free(r);
    return st;
}
