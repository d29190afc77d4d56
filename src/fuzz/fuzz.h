/* POLYJUICE (docs/fuzz.md): random seed graphs, saturated with proved
 * rewrite rules in an e-graph (src/egraph/), give pairs of equivalent
 * graphs as different as possible (the most simplified and the most
 * complex); a target compiles and runs both on the same inputs, and
 * outputs that differ beyond a magnitude-scaled tolerance are a
 * mis-compilation, minimized and written to a findings folder.
 *
 * The pieces, one file each: seed.c (seed graphs), pair.c (the e-graph
 * pair), oracle.c (inputs, comparison, filters), target.c (the tsopt
 * runtime and optimizer), ort.c (one long-lived ONNX Runtime process),
 * reduce.c (delta debugging), report.c (folders), campaign.c (the loop). */
#ifndef TS_FUZZ_FUZZ_H
#define TS_FUZZ_FUZZ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "tsopt.h"

/* ------------------------------------------------------------ seed graphs */

/* splitmix64: the campaign's one source of randomness (deterministic). */
uint64_t ts_fuzz_rand(uint64_t *state);
/* The seed of pair i of a campaign seeded with seed. */
uint64_t ts_fuzz_pair_seed(uint64_t seed, long i);

/* A random graph of 3 to 12 operator nodes that the e-graph's atoms cover
 * (Add, Mul, MatMul, Conv, Relu, Transpose, Concat, Split, AveragePool,
 * MaxPool) and both targets run: either a matrix graph (2-D values) or an
 * image graph (NCHW values); weights are initializers with seeded values;
 * every value no node reads is an output.  NULL with err set only out of
 * memory or on a bug (the graph is validated). */
ts_graph *ts_fuzz_seed_graph(uint64_t seed, ts_error *err);

/* Runtime seeds (gen.c): a random graph over the operators and forms the
 * fast runtime lowers, built around one family (an operator in the forms
 * its kernels special-case, or a fusion's pattern; family < 0: drawn from
 * seed), in ranks 1-5, with broadcasting, arities 2-6, permutations,
 * strides, pads, dilations, groups and the runtime's dtypes.  Checked
 * against the float64 reference interpreter and the optimizer, not as a
 * pair. */
ts_graph *ts_fuzz_runtime_graph(uint64_t seed, int family, ts_error *err);
int ts_fuzz_families(void);
int ts_fuzz_family_weight(int f); /* turns of family f in the campaign's rotation */
const char *ts_fuzz_family_name(int f);

/* --------------------------------------------------------------- coverage */

/* What the campaign's plans ran (cover.c): the kernel tables' entries
 * (operator, kernel) reached, and finer keys (kernel, operator, dtype,
 * layouts, fused) for guidance. */
typedef struct ts_fuzz_cover ts_fuzz_cover;
ts_fuzz_cover *ts_fuzz_cover_new(void);
void ts_fuzz_cover_free(ts_fuzz_cover *c);
/* Records plan p's steps; returns how many entries and keys were new. */
int ts_fuzz_cover_plan(ts_fuzz_cover *c, const ts_plan *p);
void ts_fuzz_cover_counts(const ts_fuzz_cover *c, int *reached, int *entries, int *keys);
/* The entries not reached, "Op:kernel" space-separated into out (n bytes);
 * returns how many. */
int ts_fuzz_cover_missing(const ts_fuzz_cover *c, char *out, size_t n);
/* The coverage as text lines into a checkpoint, and back (false: write
 * error, or a section this build's kernel tables cannot take). */
bool ts_fuzz_cover_write(const ts_fuzz_cover *c, FILE *f);
bool ts_fuzz_cover_read(ts_fuzz_cover *c, FILE *f);

/* ------------------------------------------------------------------ pairs */

typedef struct ts_fuzz_pair {
    ts_graph *original; /* the most simplified equivalent graph */
    ts_graph *variant;  /* the most complex: the original's outputs first, then exposed intermediates */
    int nroots;         /* outputs the two have in common (the original's) */
    long applied;       /* rewrites that changed the e-graph */
    const char *stop;   /* why saturation ended (static string) */
} ts_fuzz_pair;

void ts_fuzz_pair_free(ts_fuzz_pair *p);

/* Rules the pairs are made with (pair.c): POLYJUICE's (rules/polyjuice.rules)
 * and the proved TASO rule sets, with the reverses of the generated ones. */
typedef struct ts_fuzz_rules ts_fuzz_rules;
ts_status ts_fuzz_rules_load(ts_fuzz_rules **out, ts_error *err);
void ts_fuzz_rules_free(ts_fuzz_rules *r);
int ts_fuzz_rules_count(const ts_fuzz_rules *r);
/* Saturation rounds of ts_fuzz_pair_make with these rules (0: the
 * default, TS_FUZZ_ROUNDS); the reducer lowers them. */
void ts_fuzz_rules_set_rounds(void *rules, int rounds);
#define TS_FUZZ_ROUNDS 5

/* Makes a pair from graph g: e-graph, saturation within fixed node and
 * iteration limits (so that the pair depends on the seed only),
 * extraction of both ends; seed breaks the extraction's ties.
 * TS_ERR_UNSUPPORTED when g holds an operator no atom covers. */
typedef ts_status (*ts_fuzz_pair_fn)(void *ctx, const ts_graph *g, uint64_t seed, ts_fuzz_pair *out, ts_error *err);
ts_status ts_fuzz_pair_make(void *rules, const ts_graph *g, uint64_t seed, ts_fuzz_pair *out, ts_error *err);

/* ----------------------------------------------------------------- oracle */

/* Random inputs of g (uniform in [-1, 1)), each seeded by seed and the
 * input's name, so that a graph with fewer inputs (minimization) keeps the
 * values of the ones left.  in: g->ninputs tensors, unref each. */
ts_status ts_fuzz_inputs(const ts_graph *g, uint64_t seed, ts_tensor **in, ts_error *err);
/* Inputs of g taken by name from those of `from` (the pair's other graph):
 * in[i] is a new reference; TS_ERR_INVALID names an input `from` lacks. */
ts_status ts_fuzz_inputs_by_name(const ts_graph *g, const ts_graph *from, ts_tensor *const *from_in, ts_tensor **in,
                                 ts_error *err);

typedef struct ts_fuzz_tol {
    double rtol, atol; /* 1e-3, 1e-4: "matches" in this project */
    double huge;       /* magnitudes above this are overflow-prone: filtered (1e6) */
} ts_fuzz_tol;
extern const ts_fuzz_tol ts_fuzz_tol_default;
/* The tolerance for g's outputs: base widened when a float16 (rtol x4) or
 * bfloat16 (x32) value occurs anywhere in g, whatever the output's dtype:
 * a 16-bit node rounds, and a float32 sum that lands on a 16-bit midpoint
 * rounds to the other neighbour, one 16-bit step that a later Cast to
 * float32 carries to the output (docs/fuzz-findings.md, seed 11 step 2094). */
ts_fuzz_tol ts_fuzz_tol_for(const ts_fuzz_tol *base, const ts_graph *g);

/* Where two tensors differ most. */
typedef struct ts_fuzz_diff {
    double scaled;   /* max |a-b| / (atol + rtol * max(|a|, |b|, scale)); <= 1 matches */
    double abs;      /* |a-b| there */
    double a, b;     /* the two values there */
    int64_t at;      /* flat index; -1: shapes or dtypes differ */
    double scale;    /* largest |a| of the whole tensor (the output's magnitude) */
} ts_fuzz_diff;

/* Compares a (the original's output) with b (the variant's).  Shapes or
 * dtypes that differ give scaled = INFINITY and at = -1. */
void ts_fuzz_compare(const ts_tensor *a, const ts_tensor *b, const ts_fuzz_tol *tol, ts_fuzz_diff *d);
/* Whether t holds a value that makes the comparison noise: NaN, an
 * infinity or a magnitude above tol->huge; why (n bytes) says which. */
bool ts_fuzz_unstable(const ts_tensor *t, const ts_fuzz_tol *tol, char *why, size_t n);

/* ---------------------------------------------------------------- targets */

typedef enum ts_fuzz_kind {
    TS_FUZZ_PASS = 0, /* equal outputs */
    TS_FUZZ_FILTERED, /* undefined or unstable values: not compared */
    TS_FUZZ_MISMATCH, /* a mis-compilation: outputs differ */
    TS_FUZZ_ERROR,    /* the target failed on one graph of the pair */
} ts_fuzz_kind;

const char *ts_fuzz_kind_name(ts_fuzz_kind k); /* "pass", "filtered", "mismatch", "error" */

/* What one pair gave on a target. */
typedef struct ts_fuzz_verdict {
    ts_fuzz_kind kind;
    char stage[32];  /* "runtime", "optimizer", "ort" */
    char what[640];  /* one line: the difference, the error, or why it was filtered */
    int output;      /* mismatch: which output */
    ts_fuzz_diff diff;
    /* float64 reference interpreter on a mismatch: which side is wrong
     * ("variant", "original", "optimized" (the runtime on the optimizer's
     * result), "both", "neither"), or "pair" (the pair is not equivalent:
     * a wrong rule of the fuzzer), "rewrite" (the optimizer's result
     * computes something else); "" when not run */
    char wrong[16];
    /* which oracle fired: "pair" (the original against its variant, on
     * the target), "reference" (the runtime against the float64 reference
     * interpreter on one graph), "optimizer" (the runtime on the
     * optimizer's result against the runtime on its input), "crash" (the
     * runtime crashed: a signal caught while a plan was built or run) */
    char oracle[16];
    bool optimized; /* tsopt: the optimizer rewrote the variant (its result was not the variant itself) */
} ts_fuzz_verdict;

typedef enum ts_fuzz_target_kind { TS_FUZZ_TARGET_TSOPT, TS_FUZZ_TARGET_ORT } ts_fuzz_target_kind;

typedef struct ts_fuzz_target_opts {
    ts_fuzz_target_kind kind;
    ts_fuzz_tol tol;
    /* tsopt: also the optimizer (the variant optimized with a tiny budget,
     * then run); true by default in campaigns */
    bool optimizer;
    int opt_budget; /* graphs the optimizer's search explores (2) */
    /* Test only: a planted wrong rewrite in the runtime target, to show
     * that the fuzzer finds one ("transpose-add": a 2-D Transpose of a
     * square matrix read by Add or Mul is dropped, as a fused path that
     * forgets it would; "optimizer-transpose-add": the same in the
     * optimizer's results only; "relu-abs": every Relu computes Abs, on
     * both graphs of a pair alike: only the reference oracle sees it).
     * NULL: none. */
    const char *plant;
    /* tsopt: the C compiler of the eOperators the optimizer's results
     * hold (src/einnet/codegen.c): NULL picks tcc when it is on $PATH (a
     * kernel in ~10 ms instead of gcc -O3's ~200: a campaign makes about one
     * new kernel a pair), "system" the product's ($CC, else cc), anything
     * else that command.  Every eop_system_every-th pair (by its seed: the
     * same pairs in every campaign and replay) uses the system compiler
     * anyway, so that what gcc -O3 makes of the kernels is tested too (0:
     * never; the default 32). */
    const char *eop_cc;
    int eop_system_every;
    const char *ort_serve; /* tools/ort/serve.js; NULL: $TSOPT_ORT_SERVE, else the source tree's */
    const char *ort_log;   /* the ORT process's stderr; NULL: discarded */
} ts_fuzz_target_opts;

typedef struct ts_fuzz_target ts_fuzz_target;

/* Opens a target: for ORT, starts the one node process of the campaign
 * (TS_ERR_UNSUPPORTED, saying why, when node or onnxruntime-node is
 * missing). */
ts_status ts_fuzz_target_open(const ts_fuzz_target_opts *o, ts_fuzz_target **out, ts_error *err);
void ts_fuzz_target_close(ts_fuzz_target *t);
const ts_fuzz_target_opts *ts_fuzz_target_options(const ts_fuzz_target *t);
/* ORT: give it these model files as they are instead of writing the
 * graphs (replay: the files of a folder, byte for byte); NULL, NULL: back
 * to writing them. */
void ts_fuzz_target_set_files(ts_fuzz_target *t, const char *original, const char *variant);
/* The compiler eop_cc stands for ("tcc", "system" or the command given;
 * NULL: "tcc" when on $PATH, else "system"). */
const char *ts_fuzz_eop_cc(const char *eop_cc);
/* The planted bugs there are, comma-separated ("transpose-add"). */
const char *ts_fuzz_plants(void);
bool ts_fuzz_plant_known(const char *name);

/* Runs both graphs of a pair on the target with the same inputs (those of
 * the original, taken by name for the variant) and judges the outputs the
 * two have in common.  seed: of the optimizer's check.  Fails (err set)
 * only on what is not the target's fault (out of memory, a temporary
 * folder that cannot be written). */
ts_status ts_fuzz_target_check(ts_fuzz_target *t, const ts_graph *original, const ts_graph *variant, int nroots,
                               ts_tensor *const *inputs, uint64_t seed, ts_fuzz_verdict *v, ts_error *err);

/* One runtime seed graph g on the tsopt target: the runtime against the
 * float64 reference interpreter (oracle "reference", stage "runtime"),
 * then, when the target runs the optimizer, on one graph in four (by
 * seed), the optimizer's result of g against g (oracle "optimizer").  Integer outputs must be equal, floats
 * within the tolerance (wider for float16 and bfloat16). */
ts_status ts_fuzz_target_check_graph(ts_fuzz_target *t, const ts_graph *g, ts_tensor *const *inputs, uint64_t seed,
                                     ts_fuzz_verdict *v, ts_error *err);
/* Coverage: every plan the target builds from now on is recorded in c
 * (NULL: none); ts_fuzz_target_fresh returns how many new entries and keys
 * the plans since its last call reached. */
void ts_fuzz_target_set_cover(ts_fuzz_target *t, ts_fuzz_cover *c);
int ts_fuzz_target_fresh(ts_fuzz_target *t);

/* ------------------------------------------------------------------- ORT */

typedef struct ts_fuzz_ort ts_fuzz_ort;
/* Starts `node SERVE` (tools/ort/serve.js) and waits for it to say it is
 * ready.  log: its stderr (NULL: /dev/null). */
ts_status ts_fuzz_ort_open(const char *serve, const char *log, ts_fuzz_ort **out, ts_error *err);
/* Runs the model at `model` on DIR_IN/<name>.npy, writing DIR_OUT/<name>.npy.
 * An ORT failure is TS_ERR_UNSUPPORTED with ORT's message; a process that
 * died or hung is TS_ERR_IO (the process is restarted for the next call). */
ts_status ts_fuzz_ort_run(ts_fuzz_ort *o, const char *model, const char *in_dir, const char *out_dir, ts_error *err);
void ts_fuzz_ort_close(ts_fuzz_ort *o);
/* The default serve.js: $TSOPT_ORT_SERVE, else the source tree's. */
const char *ts_fuzz_ort_default_serve(void);

/* --------------------------------------------------------------- campaign */

typedef struct ts_fuzz_stats {
    long generated; /* pairs made */
    long tested;    /* pairs compared (passed, or a finding) */
    long findings;  /* mismatches + errors */
    long mismatches, errors;
    long duplicates; /* errors like one already found (same message but for names and numbers): not findings */
    long filtered;  /* undefined or unstable values */
    long skipped;   /* no pair: the e-graph refused the seed graph */
    long saved;     /* pairs written to DIR/pairs */
    long original_nodes, variant_nodes; /* summed over tested pairs */
    long saturated; /* pairs whose e-graph saturated (else a limit stopped it) */
    long optimized; /* tsopt: pairs whose variant the optimizer rewrote */
    long graphs;    /* runtime seed graphs checked (tsopt) */
    long graph_filtered;
    long kept;      /* graphs that reached new coverage (the corpus) */
    int processes_died; /* under mpirun: ranks that died or failed (their counts are lost); the command exits 1 */
    int cover_reached, cover_entries, cover_keys;
    char cover_missing[2048];
    double seconds;
    char stop[32];  /* "time limit", "pairs", "findings", "interrupted" */
} ts_fuzz_stats;

typedef struct ts_fuzz_opts {
    ts_fuzz_target_opts target;
    uint64_t seed;
    double time_s;     /* wall-clock budget; 0: none (then max_pairs must be set) */
    long max_pairs;    /* pairs at most; 0: no limit */
    long max_findings; /* stop after this many findings; 0: no limit */
    int save_pairs;    /* the first K tested pairs go to DIR/pairs/NNN */
    const char *dir;   /* output folder (created) */
    bool no_minimize;
    /* tsopt: what a campaign step makes -- a POLYJUICE pair, a runtime
     * seed graph, or both (the default) */
    enum { TS_FUZZ_BOTH = 0, TS_FUZZ_PAIRS, TS_FUZZ_GRAPHS } mode;
    /* the pair maker; NULL: ts_fuzz_pair_make with the campaign's rules */
    ts_fuzz_pair_fn make_pair;
    void *make_ctx;
    /* called after every pair (progress on stderr) */
    void (*progress)(void *ctx, const ts_fuzz_stats *st, double elapsed_s);
    void *progress_ctx;
    volatile int *stop; /* set non-zero (a signal handler) to end the campaign */
    const char *command; /* how the campaign was started, for the READMEs */
    /* Several processes (src/dist/dist_fuzz.c): this one tests pairs
     * pair_offset, pair_offset + pair_stride, ... (0: every pair) */
    long pair_stride, pair_offset;
    /* continue the campaign DIR/checkpoint holds (same options); the time,
     * pair and finding budgets are the whole campaign's */
    bool resume;
} ts_fuzz_opts;

void ts_fuzz_opts_default(ts_fuzz_opts *o);

/* What a campaign carries from step to step (checkpoint.c): a resumed
 * campaign starts from it and makes the steps an uninterrupted one would. */
typedef struct ts_fuzz_resume {
    long next;        /* the next step */
    ts_fuzz_stats st; /* counts so far; seconds: time spent so far */
    int *family;      /* the corpus: kept seeds' families, the rotation's turn, its draw */
    int nfamily, turn;
    uint64_t rng;
    char **sig; /* error signatures met (duplicates) */
    int nsig;
} ts_fuzz_resume;
/* The options a resumed campaign must share with the first (seed, target,
 * mode, ...), as the checkpoint's second line. */
void ts_fuzz_checkpoint_key(const ts_fuzz_opts *o, char *out, size_t n);
/* DIR/checkpoint replaced atomically; cover may be NULL (target ort). */
ts_status ts_fuzz_checkpoint_save(const char *dir, const ts_fuzz_opts *o, const ts_fuzz_resume *r,
                                  const ts_fuzz_cover *cover, ts_error *err);
/* Reads DIR/checkpoint into r (free with ts_fuzz_resume_free) and cover;
 * TS_ERR_INVALID when it is missing or made with other options. */
ts_status ts_fuzz_checkpoint_load(const char *dir, const ts_fuzz_opts *o, ts_fuzz_resume *r, ts_fuzz_cover *cover,
                                  ts_error *err);
void ts_fuzz_resume_free(ts_fuzz_resume *r);
/* An error's signature: its stage and message with quoted names, numbers
 * and paths blanked, so that one failure met again in other graphs
 * ("Node input 'Pad_9_out' is not ...") is counted as a duplicate, not
 * written again.  Mismatches are never merged. */
void ts_fuzz_signature(const ts_fuzz_verdict *v, char *out, size_t n);
/* The campaign.  Deterministic for a seed: pair i is the same in every
 * run, time only decides how many there are. */
ts_status ts_fuzz_run(const ts_fuzz_opts *o, ts_fuzz_stats *st, ts_error *err);
/* The summary as the one-line JSON object `tsopt fuzz --json` prints;
 * malloc'd. */
char *ts_fuzz_stats_json(const ts_fuzz_opts *o, const ts_fuzz_stats *st);

/* -------------------------------------------------------- minimization */

/* Whether graph g (a seed) still gives a finding like v (same kind and
 * stage): the reducer's question. */
typedef struct ts_fuzz_reducer {
    ts_fuzz_target *target;
    ts_fuzz_pair_fn make_pair;
    void *make_ctx;
    uint64_t seed;   /* the pair's */
    int max_trials;  /* 0: 300 */
    /* Optional: sets the saturation rounds of make_pair (0: its default).
     * The reducer first looks for the fewest rounds (1 .. max_rounds - 1)
     * that still give the finding: fewer rewrites, a smaller variant. */
    void (*set_rounds)(void *make_ctx, int rounds);
    int max_rounds;
} ts_fuzz_reducer;

typedef struct ts_fuzz_reduced {
    ts_graph *seed_graph;     /* smallest seed graph that still gives it */
    ts_fuzz_pair pair;        /* its pair */
    ts_tensor **inputs;       /* pair.original->ninputs */
    ts_fuzz_verdict verdict;  /* of the reduced pair */
    int trials, accepted;
} ts_fuzz_reduced;

/* Delta debugging on the seed graph: drops outputs, then cuts nodes (a
 * node's result replaced by one of its inputs of the same shape, or by a
 * new graph input), remaking the pair each time, while the finding stays
 * (same kind, same stage).  Never fails to give a result: at worst the
 * graph it was given (out is then that graph's pair). */
ts_status ts_fuzz_reduce(const ts_fuzz_reducer *r, const ts_graph *seed_graph, const ts_fuzz_verdict *v,
                         ts_fuzz_reduced *out, ts_error *err);
void ts_fuzz_reduced_free(ts_fuzz_reduced *r);

/* Graph surgery for the reducer (and its tests): a copy of g without
 * output k; a copy in which node n's output slot 0 is replaced by its
 * input j (same shape) or, with j < 0, by a new graph input; dead nodes
 * and unused inputs dropped.  NULL when the cut does not apply. */
ts_graph *ts_fuzz_drop_output(const ts_graph *g, int k, ts_error *err);
ts_graph *ts_fuzz_cut_node(const ts_graph *g, int n, int j, ts_error *err);
/* Live operator nodes of g. */
int ts_fuzz_count_nodes(const ts_graph *g);

/* --------------------------------------------------------------- folders */

/* DIR/pairs/NNN/{original.onnx, variant.onnx}. */
ts_status ts_fuzz_save_pair(const char *dir, long k, const ts_fuzz_pair *p, ts_error *err);
/* A finding's folder, DIR/findings/NNN: original.onnx, variant.onnx,
 * inputs/NAME.npy, README.md (what was seen, how to reproduce it) and
 * finding.json; the unminimized pair under unminimized/ when it differs. */
typedef struct ts_fuzz_finding {
    long index;       /* NNN */
    long pair;        /* pair number in the campaign */
    uint64_t pair_seed;
    const ts_fuzz_opts *opts;
    const ts_fuzz_pair *pair_full;  /* as found */
    const ts_fuzz_verdict *verdict_full;
    const ts_fuzz_reduced *reduced; /* NULL when not minimized */
    const ts_tensor *const *inputs_full;
} ts_fuzz_finding;
ts_status ts_fuzz_write_finding(const char *dir, const ts_fuzz_finding *f, ts_error *err);

/* A runtime seed graph's finding, DIR/findings/NNN: model.onnx (minimized),
 * inputs/, README.md (the operators, the oracle, the commands),
 * finding.json, unminimized/model.onnx. */
ts_status ts_fuzz_write_graph_finding(const char *dir, long index, long step, uint64_t seed, const char *family,
                                      const ts_fuzz_opts *o, const ts_graph *full, const ts_graph *reduced,
                                      ts_tensor *const *in_reduced, const ts_fuzz_verdict *v, ts_error *err);
/* Delta debugging of a graph finding: outputs dropped, nodes cut, while
 * the target gives the same oracle's finding at the same stage.  *out: the
 * smallest graph (a copy of g at worst), in_out its inputs. */
ts_status ts_fuzz_reduce_graph(ts_fuzz_target *t, const ts_graph *g, uint64_t seed, const ts_fuzz_verdict *v,
                               ts_graph **out, ts_tensor ***in_out, ts_error *err);

/* Reads a finding's (or a saved pair's) folder back and checks it on a
 * target: the verdict now. */
ts_status ts_fuzz_replay(ts_fuzz_target *t, const char *folder, ts_fuzz_verdict *v, ts_error *err);

#endif
