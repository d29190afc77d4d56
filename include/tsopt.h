/* tsopt: a tensor-program superoptimizer.  This is the only header a user
 * includes.  Plain structs, explicit ownership, status codes; no globals. */
#ifndef TSOPT_H
#define TSOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_INVALID,     /* malformed graph or argument */
    TS_ERR_UNSUPPORTED, /* valid, but tsopt does not implement it */
    TS_ERR_IO,          /* file system */
    TS_ERR_PARSE,       /* a file's content is not what it claims */
    TS_ERR_NOMEM,
} ts_status;

/* Every fallible call takes an error record; the first failure fills it
 * with one line naming what is wrong and where (node, tensor, file). */
typedef struct ts_error {
    ts_status code;
    char msg[1024];
} ts_error;

ts_status ts_error_set(ts_error *err, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "context: " to an error that is already set. */
ts_status ts_error_prefix(ts_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------- dtypes, shapes */

typedef enum ts_dtype {
    TS_UNDEFINED = 0,
    TS_F32,
    TS_F64,
    TS_I64,
    TS_I32,
    TS_I8,
    TS_U8,
    TS_BOOL,
    TS_MODP, /* internal: integers mod 2^31-1 stored as uint32 (exact domain) */
    /* Narrow floats are stored in their own 16 bits and computed in the
     * number domain (float32), rounded to their precision at each node's
     * output, as NumPy's float16 arithmetic is. */
    TS_F16,
    TS_BF16,
    TS_I16,
    TS_U16,
    TS_U32,
    TS_U64,
    TS_DTYPE_COUNT
} ts_dtype;

size_t ts_dtype_size(ts_dtype t);
const char *ts_dtype_name(ts_dtype t); /* "float32", "int64", ... */
bool ts_dtype_is_float(ts_dtype t);    /* F32, F64, F16, BF16: the types number domains replace */

#define TS_MAX_RANK 8
/* Largest tensor tsopt accepts: protects against absurd declared shapes. */
#define TS_MAX_ELEMENTS ((int64_t)1 << 34)

typedef struct ts_shape {
    int rank;
    int64_t dims[TS_MAX_RANK];
} ts_shape;

ts_shape ts_shape_make(int rank, const int64_t *dims);
/* Element count; saturates at INT64_MAX instead of overflowing. */
int64_t ts_shape_numel(const ts_shape *s);
bool ts_shape_eq(const ts_shape *a, const ts_shape *b);
/* "1x3x224x224" ("scalar" for rank 0); buf of at least 160 bytes. */
const char *ts_shape_str(const ts_shape *s, char *buf, size_t n);
/* Parses "1x3x224x224" (also accepts ','), dims >= 0. */
ts_status ts_shape_parse(const char *text, ts_shape *out, ts_error *err);
/* Numpy multidirectional broadcast of a and b; false if incompatible. */
bool ts_shape_broadcast(const ts_shape *a, const ts_shape *b, ts_shape *out);
/* Row-major element strides of s; a broadcast view of `in` onto `out`
 * (in right-aligned, size-1 dims get stride 0) when out is given. */
void ts_shape_strides(const ts_shape *s, int64_t strides[TS_MAX_RANK]);
void ts_shape_bcast_strides(const ts_shape *in, const ts_shape *out, int64_t strides[TS_MAX_RANK]);

/* --------------------------------------------------------------- tensors */

/* Dense row-major tensor.  Reference counted so that weights are shared by
 * graph copies (search makes thousands of copies).  `data` is owned unless
 * the tensor was made with ts_tensor_wrap. */
typedef struct ts_tensor {
    ts_dtype dtype;
    ts_shape shape;
    void *data;
    size_t nbytes;
    int refcount;
    bool owns_data;
    /* When set, release(keep) runs with the last reference: data lies in
     * memory someone else owns (a weight memory-mapped from an ONNX
     * external data file, src/onnx/external_data.c). */
    void *keep;
    void (*release)(void *keep);
} ts_tensor;

/* Zero-filled; NULL (with err set) when the size is absurd or memory is out. */
ts_tensor *ts_tensor_new(ts_dtype dtype, const ts_shape *shape, ts_error *err);
ts_tensor *ts_tensor_wrap(ts_dtype dtype, const ts_shape *shape, void *data);
ts_tensor *ts_tensor_clone(const ts_tensor *t, ts_error *err);
ts_tensor *ts_tensor_ref(ts_tensor *t);
void ts_tensor_unref(ts_tensor *t);
int64_t ts_tensor_numel(const ts_tensor *t);
/* Element i of an integer or bool tensor as int64. */
int64_t ts_tensor_get_i64(const ts_tensor *t, int64_t i);
/* Element i of a float/int tensor as double (not for TS_MODP). */
double ts_tensor_get_f64(const ts_tensor *t, int64_t i);
void ts_tensor_set_f64(ts_tensor *t, int64_t i, double v);
/* v rounded to what a float dtype holds (float16, bfloat16: nearest, ties
 * to even, overflow to infinity; float32); other dtypes: v unchanged. */
double ts_dtype_round(ts_dtype t, double v);
/* Fills a float tensor with uniform values in [lo, hi), integers in [lo, hi]. */
void ts_tensor_fill_random(ts_tensor *t, uint64_t *rng_state, double lo, double hi);

/* NumPy .npy files, version 1.0/2.0, C order. */
ts_status ts_npy_load(const char *path, ts_tensor **out, ts_error *err);
ts_status ts_npy_save(const char *path, const ts_tensor *t, ts_error *err);
/* Tensor name -> file stem: every char outside [A-Za-z0-9._-] becomes '_'. */
void ts_name_sanitize(const char *name, char *out, size_t n);

/* ----------------------------------------------------------- attributes */

/* Generic attribute, the form attributes take at the API boundary (ONNX
 * import/export and the graph builder).  Inside the IR each operator keeps
 * its own typed, fixed-size attribute struct parsed from these. */
typedef enum ts_attr_kind {
    TS_ATTR_INT,
    TS_ATTR_FLOAT,
    TS_ATTR_STRING,
    TS_ATTR_INTS,
    TS_ATTR_FLOATS,
    TS_ATTR_TENSOR,
    TS_ATTR_GRAPH, /* a control-flow body (If's branches, Loop's and Scan's body): `body` */
} ts_attr_kind;

typedef struct ts_attr {
    const char *name;
    ts_attr_kind kind;
    int64_t i;
    double f;
    const char *s;
    const int64_t *ints; /* n entries */
    const float *floats; /* n entries */
    int n;
    const ts_tensor *t;
    const struct ts_body *body; /* TS_ATTR_GRAPH (src/ir/subgraph.h) */
    /* Storage for a one-element TENSOR attribute that an operator writes back
     * from plain data (ConstantOfShape's value): t points here, so such an
     * attribute is read where it was written, never copied. */
    ts_tensor scalar;
    union {
        double f64;
        float f32;
        int64_t i64;
        int32_t i32;
        uint8_t u8;
    } scalar_data;
} ts_attr;

/* Convenience constructors for builder code. */
ts_attr ts_attr_int(const char *name, int64_t v);
ts_attr ts_attr_float(const char *name, double v);
ts_attr ts_attr_string(const char *name, const char *s);
ts_attr ts_attr_ints(const char *name, const int64_t *v, int n);
ts_attr ts_attr_floats(const char *name, const float *v, int n);
ts_attr ts_attr_tensor(const char *name, const ts_tensor *t);
/* Makes *a a TENSOR attribute holding one element of dtype (value v). */
void ts_attr_set_scalar_tensor(ts_attr *a, const char *name, ts_dtype dtype, double v);

/* ---------------------------------------------------------------- graph */

typedef struct ts_op_desc ts_op_desc; /* operator descriptor, src/ops/op.h */

/* A value: a tensor produced by one node, a graph input, or a constant. */
typedef struct ts_value {
    char *name;
    ts_dtype dtype;
    ts_shape shape;
    ts_tensor *constant; /* weights and folded constants; shared by copies */
    int producer;        /* node index, -1 for graph inputs and constants */
    int producer_slot;   /* which output of the producer */
} ts_value;

typedef struct ts_node {
    const ts_op_desc *op;
    char *name;
    int ninputs, noutputs;
    int *inputs;  /* value ids; -1 for an absent optional input */
    int *outputs; /* value ids */
    void *attrs;  /* op->attr_size bytes, plain data: copied with memcpy */
    bool dead;    /* removed; dropped by ts_graph_compact */
} ts_node;

/* An SSA graph.  Values and nodes are referred to by index. */
typedef struct ts_graph {
    char *name;
    int opset; /* default ONNX opset (ai.onnx domain) */
    ts_value *values;
    int nvalues, cap_values;
    ts_node *nodes;
    int nnodes, cap_nodes;
    int *inputs; /* graph inputs (value ids), in order */
    int ninputs;
    int *outputs; /* graph outputs (value ids), in order */
    int noutputs;
    struct ts_model_meta *meta; /* what the ONNX file had beyond the graph (NULL for built graphs); shared by copies */
    /* value name -> id while a graph is built in bulk (ts_graph_index_names):
     * NULL otherwise, then ts_graph_find_value searches the values */
    struct ts_name_map *index;
} ts_graph;

ts_graph *ts_graph_new(const char *name, int opset);
void ts_graph_free(ts_graph *g);
/* Deep copy of structure; constant tensors are shared by reference. */
ts_graph *ts_graph_copy(const ts_graph *g);

/* Builder.  Each returns a value id (>= 0) or -1 with err set. */
int ts_graph_add_input(ts_graph *g, const char *name, ts_dtype dtype, const ts_shape *shape,
                       ts_error *err);
/* Takes a reference to t (the caller keeps its own). */
int ts_graph_add_constant(ts_graph *g, const char *name, ts_tensor *t, ts_error *err);
/* Adds a node of ONNX type `op`, parses attrs, infers its outputs' dtypes and
 * shapes.  `name` may be NULL (a unique one is made); output value names are
 * taken from out_names when given, else made from the node name.  Writes the
 * output value ids to outputs[0..nout-1]. Returns the node index or -1. */
int ts_graph_add_node(ts_graph *g, const char *op, const char *name, const int *inputs, int ninputs,
                      const ts_attr *attrs, int nattrs, int nout, const char *const *out_names,
                      int *outputs, ts_error *err);
ts_status ts_graph_add_output(ts_graph *g, int value, ts_error *err);

int ts_graph_find_value(const ts_graph *g, const char *name);
/* True when value v is one of g's outputs. */
bool ts_graph_is_output(const ts_graph *g, int v);
/* Node indices in a topological order (inputs before users); ignores dead
 * nodes.  Fails naming a node on a cycle.  order needs nnodes entries;
 * *count receives how many live nodes were written. */
ts_status ts_graph_topo_order(const ts_graph *g, int *order, int *count, ts_error *err);
/* Checks references, single producers, acyclicity, that every output is
 * computed, and re-infers every node to compare dtypes and shapes. */
ts_status ts_graph_validate(const ts_graph *g, ts_error *err);
/* Structural hash: independent of node order and value names. */
uint64_t ts_graph_hash(const ts_graph *g);
/* Bytes of the constants g's live nodes and outputs read: the weights a
 * written model holds. */
int64_t ts_graph_weight_bytes(const ts_graph *g);
/* Drops dead nodes and values nothing uses any more (renumbers ids). */
void ts_graph_compact(ts_graph *g);
/* Evaluates every node whose inputs are all constant and replaces its
 * outputs by constants (within a size limit); returns nodes folded or -1. */
int ts_graph_fold_constants(ts_graph *g, ts_error *err);

/* Totals for `tsopt info`. */
typedef struct ts_graph_stats {
    int nodes;
    int64_t params;     /* elements in constant tensors */
    int64_t param_bytes;
    double flops;
} ts_graph_stats;
void ts_graph_stats_get(const ts_graph *g, ts_graph_stats *st);

/* -------------------------------------------------------------- domains */

/* Reference arithmetic: results in float32 or float64, or exact integers
 * mod p = 2^31-1 (PET's random tests, TASO/EinNet fingerprints). */
typedef enum ts_domain_kind { TS_DOMAIN_F32, TS_DOMAIN_F64, TS_DOMAIN_MODP } ts_domain_kind;
#define TS_MODP_P 2147483647u

/* Runs g with the reference interpreter.  inputs[i] matches g->inputs[i]
 * (float tensors in the domain's storage type: F32, F64 or MODP); on success
 * outputs[i] receives a new tensor per graph output. */
ts_status ts_graph_run_reference(const ts_graph *g, ts_domain_kind domain, ts_tensor *const *inputs,
                                 ts_tensor **outputs, ts_error *err);

/* ----------------------------------------------------------------- ONNX */

/* Binds a dynamic (or overrides a) dimension set of one graph input. */
typedef struct ts_input_bind {
    const char *name;
    ts_shape shape;
} ts_input_bind;

ts_status ts_onnx_load(const char *path, const ts_input_bind *binds, int nbinds, ts_graph **out,
                       ts_error *err);
ts_status ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                              const ts_input_bind *binds, int nbinds, ts_graph **out, ts_error *err);
/* Writes to PATH.tmp then renames: never leaves a half-written file.  A
 * graph loaded from ONNX is written with what its file had beyond the graph
 * (ir_version, producer, metadata_props, opset imports, doc strings), and
 * with its inputs' and outputs' symbolic dimensions (dim_param) when the
 * graph still holds at other sizes (docs/decisions.md, "Symbolic
 * dimensions on export"), else at the sizes bound at load. */
ts_status ts_onnx_save(const ts_graph *g, const char *path, ts_error *err);

typedef struct ts_onnx_save_opts {
    bool static_dims;      /* write every dimension at its bound size */
    bool require_symbolic; /* fail (TS_ERR_UNSUPPORTED, saying why) rather than bind symbolic dimensions */
    /* Write the weights as ONNX external data: PATH.data beside PATH (its
     * file name as "location", with offset and length), the .onnx file
     * itself small.  Done anyway when the model would pass protobuf's
     * 2 GiB limit (docs/onnx-models.md). */
    bool external_data;
} ts_onnx_save_opts;
/* ts_onnx_save with options; o NULL: the defaults (all false). */
ts_status ts_onnx_save_with(const ts_graph *g, const char *path, const ts_onnx_save_opts *o, ts_error *err);
/* Whether ts_onnx_save writes g with symbolic dimensions.  When not, why
 * (may be NULL) receives one line: the model has none, or what ties the
 * graph to the bound sizes. */
bool ts_onnx_keeps_symbolic(const ts_graph *g, char *why, size_t n);

/* -------------------------------------------------------------- runtime */

/* A plan is built once per graph: schedule, fused kernels, static memory
 * plan, pre-packed weights (src/exec/).  Running it allocates nothing.
 * The plan reads the graph's constants in place (no copy of weights that
 * need no packing), so the graph must outlive the plan and stay unchanged. */
typedef struct ts_plan ts_plan;

typedef struct ts_plan_opts {
    int threads;       /* 0: one per core */
    bool no_fusion;    /* one step per node (debugging, cost measurement) */
    bool plain_layout; /* keep every tensor in plain row-major layout */
    /* Weights held once (src/exec/weights_once.c): free a graph constant's
     * data as soon as every node reading it was lowered by a kernel that
     * packed it into the plan's own copy (data becomes NULL).  Only for a
     * graph that is planned once and then used for its shapes and names:
     * it can no longer be planned again, interpreted or saved. */
    bool release_packed_weights;
    /* The graph optimization level (ts_graph_opt; 0: all) that
     * ts_graph_opt_plan applies before planning.  The plan itself makes no
     * rewrite: its fused steps keep each node's function at every level. */
    int graph_opt;
    /* Comma-separated kernel names ("vec.se", "dnnl.pool_conv") or feature
     * names ("winograd", "post_tail", ...; docs/runtime.md, "Skipping
     * kernels") the plan must not use; NULL: none.  $TSOPT_SKIP adds to it. */
    const char *skip;
    /* Packed weights shared with the other plans built with the same cache
     * (ts_pack_cache_new; NULL: every plan packs its own).  A constant
     * whose tensor is shared by several graphs (a session's model loaded at
     * new sizes: ts_onnx_kept) is packed once per kernel layout while any
     * plan using it lives. */
    struct ts_pack_cache *pack_cache;
} ts_plan_opts;

/* The cache behind ts_plan_opts.pack_cache (src/exec/pack_cache.c).  Free
 * it when no more plans are to be built with it: plans built with it may
 * outlive it (the packed weights go with the last plan using them). */
typedef struct ts_pack_cache ts_pack_cache;
typedef struct ts_pack_cache_stats {
    int64_t hits, misses; /* lookups by plan builds: found packed / packed now */
    int64_t hit_bytes;    /* packing saved by the hits */
    int64_t entries, bytes; /* held now (the live plans' packed weights, once) */
    int64_t plain; /* shared weights plan builds read where they lie, unpacked (dnnl_matmul.c) */
} ts_pack_cache_stats;
ts_pack_cache *ts_pack_cache_new(void);
void ts_pack_cache_free(ts_pack_cache *c);
ts_pack_cache_stats ts_pack_cache_get_stats(ts_pack_cache *c);

/* Graph optimization levels, as ONNX Runtime's: NONE runs the model's
 * nodes as they are; BASIC adds the rewrites that are exact in real
 * arithmetic and local (common subexpressions, BatchNormalization and
 * constant scales folded into the weights before them, pooling before a
 * 1x1 convolution); ALL adds the fusions into operators the model does
 * not spell (GELU, LayerNormalization, a squeeze-excite gate).  DEFAULT
 * is ALL. */
typedef enum ts_graph_opt {
    TS_GRAPH_OPT_DEFAULT = 0,
    TS_GRAPH_OPT_NONE,
    TS_GRAPH_OPT_BASIC,
    TS_GRAPH_OPT_ALL,
} ts_graph_opt;
/* "none", "basic", "all" -> level (false for anything else). */
bool ts_graph_opt_parse(const char *s, ts_graph_opt *out);
const char *ts_graph_opt_name(ts_graph_opt level);
/* Applies level's graph rewrites to g in place (before ts_plan_build with
 * the same level): returns how many it made, or -1 (err set).  The graph
 * keeps its inputs and outputs.  Sessions and `tsopt run`/`bench` call it;
 * ts_plan_build itself does not (a graph planned directly runs its nodes
 * as they are, but for the plan-time rewrites ts_plan_opts.graph_opt
 * allows). */
int ts_graph_opt_apply(ts_graph *g, ts_graph_opt level, ts_error *err);

typedef struct ts_plan_stats {
    int steps;           /* executable steps after fusion */
    int fused_nodes;     /* graph nodes absorbed into another node's step */
    int reorders;        /* layout conversions inserted */
    int fallback_steps;  /* steps running a reference kernel */
    int ref_impls;       /* oneDNN steps on which oneDNN chose its reference implementation */
    size_t arena_bytes;  /* activations, after buffer reuse */
    size_t naive_bytes;  /* activations if every tensor had its own buffer */
    size_t weight_bytes; /* constants, after pre-packing */
    size_t released_bytes; /* graph constants freed by release_packed_weights */
} ts_plan_stats;

ts_status ts_plan_build(const ts_graph *g, const ts_plan_opts *o, ts_plan **out, ts_error *err);
/* Re-binds plan p to g, the graph p was built from loaded at other sizes
 * (same nodes and values; shapes and folded constants may differ): only
 * the steps whose values changed are rebuilt (src/exec/plan_rebind.c).
 * TS_ERR_UNSUPPORTED: p cannot follow (it is unchanged); another error:
 * p is unusable, free it.  The graph p was built from must still outlive
 * p; g must outlive p or the next re-bind. */
ts_status ts_plan_rebind(ts_plan *p, const ts_graph *g, ts_error *err);
/* Steps p's re-binds so far made for the new sizes by lowering them again
 * (a scratch plan over the whole graph) and by resizing them in place (the
 * kernel's sizes from the new shapes; a decoder token's Concats, attention
 * and position row: nothing lowered). */
void ts_plan_rebind_stats(const ts_plan *p, int64_t *lowered, int64_t *resized);
/* inputs[i] match g->inputs[i]; outputs[i] are caller-allocated tensors of
 * the graph outputs' dtype and shape (plain layout), distinct from each other
 * and from the inputs (an output may be written before an input is read). */
ts_status ts_plan_run(ts_plan *p, ts_tensor *const *inputs, ts_tensor *const *outputs, ts_error *err);
void ts_plan_stats_get(const ts_plan *p, ts_plan_stats *st);
/* Coverage (tsopt fuzz): what step k of a plan runs -- its kernel's name
 * ("vec.concat", "dnnl.conv", "ref", "reorder"), the operator of the node
 * it lowered, how many graph nodes it covers (> 1: a fusion), the dtype of
 * that node's first output and the layouts of the step's first input and
 * its output ("plain", "perm": a dense permutation such as channels-last,
 * "blocked", "-": none).  Strings are static. */
typedef struct ts_plan_step_info {
    const char *kernel, *op;
    int nodes;
    ts_dtype dtype;
    const char *in_layout, *out_layout;
} ts_plan_step_info;
int ts_plan_step_count(const ts_plan *p);
void ts_plan_step_get(const ts_plan *p, int k, ts_plan_step_info *out);
/* The entries of the runtime's kernel tables, (operator, kernel) in the
 * order they are tried: ops[i], kernels[i] for i < min(max, count) (either
 * may be NULL); returns the count. */
int ts_plan_kernel_table(const char **ops, const char **kernels, int max);
void ts_plan_free(ts_plan *p);

/* Memory checked before allocation (src/exec/mem_check.c).  Available: the
 * smallest of /proc/meminfo MemAvailable, the cgroup's limit less its
 * non-cache usage, RLIMIT_AS / RLIMIT_DATA less what is mapped, and
 * $TSOPT_MEM_LIMIT when set (bytes, or a number with K, M, G, T: a cap);
 * SIZE_MAX when nothing is known.  ts_mem_check fails with TS_ERR_NOMEM
 * and one line naming `what` when `bytes` more do not fit.
 * ts_graph_mem_check: g's inputs, outputs and the largest set of values one
 * node holds at once (a lower bound of any plan) must fit; call it before
 * allocating inputs.  ts_plan_build checks its own arena the same way. */
size_t ts_mem_available(void);
ts_status ts_mem_check(size_t bytes, const char *what, ts_error *err);
ts_status ts_graph_mem_check(const ts_graph *g, ts_error *err);

/* ------------------------------------------------------------ op costs */

/* Measured cost model (TASO/PET): each distinct (op, attributes, input
 * shapes, layout) is timed once on this machine and kept in an on-disk cache
 * keyed by the CPU model; an analytic roofline estimate from FLOPs and bytes
 * (with the machine's measured peak) is the fallback. */
typedef struct ts_costdb ts_costdb;

/* Opens (creating if missing) the cache at path, or the default
 * ($TSOPT_CACHE_DIR or ~/.cache/tsopt)/costs-<cpu>.tsv when path is NULL. */
ts_status ts_costdb_open(const char *path, ts_costdb **out, ts_error *err);
ts_status ts_costdb_save(ts_costdb *db, ts_error *err); /* temp + rename */
void ts_costdb_free(ts_costdb *db);
/* Milliseconds for node n of g: cached measurement, else measured now when
 * `measure` is set (and cached), else the roofline estimate. */
double ts_cost_node(ts_costdb *db, const ts_graph *g, int n, bool measure);
/* Sum over live nodes.  With `measure`, groups with no cost cached are
 * timed inside a small plan of their neighbourhood (in context); on a
 * cache that was never primed, a graph none of whose groups is cached is
 * primed (below) instead. */
double ts_cost_graph(ts_costdb *db, const ts_graph *g, bool measure);
/* Times g's plan step by step and caches every group's in-plan cost (unless
 * the cache has them all): call once with the original graph before
 * costing its rewrites, which then share those costs (docs/runtime.md). */
ts_status ts_cost_prime(ts_costdb *db, const ts_graph *g, ts_error *err);

/* ------------------------------------------------------------- optimize */

/* The optimize pipeline (src/opt/): graph passes, then a cost-based search
 * over the rewrites proposed by the transformation sources ("taso", and
 * later "pet", "einnet"), then the final check of the best graph against
 * the original on random inputs, then original and result timed
 * alternately, and the keep decision.  The CLI's `tsopt optimize` and the
 * Python package call this one function. */
typedef struct ts_optimize_opts {
    const char *transforms; /* comma-separated source names; NULL: every source there is */
    const char *rules_path; /* TASO rule file (used both ways); NULL: the built-in rules */
    const char *cost_cache; /* op-cost cache file; NULL: the default ($TSOPT_CACHE_DIR or ~/.cache/tsopt) */
    double time_limit;      /* search seconds; 0: no limit */
    double alpha;           /* keep candidates costing < alpha x the best (TASO's 1.05; 1 = greedy) */
    int budget;             /* graphs taken from the frontier at most; 0: no limit */
    uint64_t seed;          /* random inputs of the check; search order is fixed */
    double min_gain;        /* percent the result must measure faster by to be written */
    double max_memory_mb;   /* frontier and caches kept under this; 0: 1536 */
    bool progress;          /* progress on stderr: one line rewritten in place on a terminal, else a line every 5 s */
    bool no_timing;         /* skip the measured comparison: write the checked result on the cost model alone */
    bool roofline;          /* rank graphs by a fixed analytic roofline (FLOPs, bytes), nothing timed:
                               the search is then the same on every machine (tests) */
    /* Read during the search: when *stop becomes non-zero (a signal handler
     * may set it), the search ends and the best graph so far goes on to the
     * check.  NULL: not used. */
    volatile int *stop;
    /* A folder with one NAME.npy per graph input (named as `tsopt run
     * --inputs` reads them): the whole-model check runs on these instead of
     * seeded random inputs.  NULL: random. */
    const char *inputs_dir;
    /* Let the written model's weights grow by more than 10% over the
     * original's (folded constants, concatenated weights); by default a
     * result that would is not written (docs/onnx-models.md). */
    bool allow_growth;
    /* The engine the model is optimized for (docs/optimize.md, "Targets"):
     * "tsopt" (NULL: the default) costs candidates on tsopt's runtime;
     * "ort" times them in ONNX Runtime (tools/ort/serve.js, found at
     * $TSOPT_ORT_SERVE or the source tree's), alternates original and result
     * there for the keep decision and runs the final check there too. */
    const char *target;
    int threads; /* threads of the target engine's runs (ort: intraOpNumThreads); 0: one per core */
    /* ort: the file g was loaded from, as ONNX Runtime loads it (no
     * bindings): the original that whole-graph timings, the keep decision
     * and the check run, and that is written byte for byte when it is kept
     * (res->copy_source).  NULL: tsopt's import of it stands in. */
    const char *source_path;
} ts_optimize_opts;

/* TASO's defaults: alpha 1.05, time limit 30 s, budget 1000, seed 1,
 * min_gain 3. */
void ts_optimize_opts_default(ts_optimize_opts *o);
/* Checks the options (ranges, source names: an unknown one is an error
 * listing the known ones) without doing any work. */
ts_status ts_optimize_opts_check(const ts_optimize_opts *o, ts_error *err);

#define TS_OPT_MAX_SOURCES 8
#define TS_OPT_NAME_MAX 64

/* How often one rewrite (a rule, a pass, a PET mutant, a derivation) is
 * present in the written graph. */
typedef struct ts_optimize_count {
    char name[TS_OPT_NAME_MAX];
    int count;
} ts_optimize_count;

typedef struct ts_optimize_result {
    ts_graph *graph;   /* what to write: the optimized graph or a copy of the original; owned */
    bool optimized;    /* graph is the optimized one ("written": "optimized") */
    char reason[256];  /* why this graph is the one written, one sentence */
    char stop[32];     /* why the search ended: "time limit", "budget", "exhausted", "interrupted", "memory" */
    double cost_before_ms, cost_after_ms;       /* cost model, of the original and of the search's best */
    double latency_before_ms, latency_after_ms; /* measured medians (after = before when the original is written) */
    double fastest_before_ms, fastest_after_ms; /* fastest measured runs (0 when not timed alternately) */
    bool machine_busy;       /* timing was disturbed by other processes: the original was kept */
    double search_s;         /* passes + search */
    double total_s;          /* everything, check and timing included */
    double peak_rss_mb;      /* of this process, so far */
    double max_scaled_error; /* check: max |a-b| / (atol*scale + rtol*|a|), <= 1 passes */
    int check_regions;       /* rewritten regions checked against their originals at their boundaries */
    bool check_whole;        /* the whole model was run and compared too (not when it has opaque nodes) */
    bool check_user_inputs;  /* the whole-model check ran on inputs_dir's tensors */
    int64_t weight_bytes_before, weight_bytes_after; /* the weights of the original and of the written graph */
    int explored, generated; /* graphs taken from the frontier / distinct graphs made */
    int nodes_before, nodes_after;
    char sources[512]; /* what each selected source loaded, one line each ("taso: 1407 rules from ...") */
    /* applied[k]: per source (and "passes"), rewrites present in the written
     * graph (0 everywhere when the original is written) */
    int nsources;
    ts_optimize_count applied[TS_OPT_MAX_SOURCES + 1];
    /* per rewrite name, on the path to the written graph; owned */
    int nrewrites;
    ts_optimize_count *rewrites;
    char target[16];         /* the target the latencies are of: "tsopt" or "ort" */
    char engine_version[32]; /* ort: onnxruntime-node's version; "" for tsopt */
    /* per rewrites[i]: the ms its steps took off the cost of the graphs they
     * rewrote (the target's cost model: ort, ONNX Runtime's region times);
     * owned, NULL when there are no rewrites */
    double *rewrite_gain_ms;
    /* ort: the search's best graphs (whole_candidates of them) timed whole
     * with the original in one ONNX Runtime process before the keep
     * decision: the original's median and the chosen one's (0: not done) */
    int whole_candidates;
    double whole_before_ms, whole_after_ms;
    /* ort: what ONNX Runtime timed as the original: "file" (source_path's
     * bytes) or "import" (tsopt's import of it); "" for tsopt */
    char compared[8];
    /* ort: the original is kept and is to be written as source_path's
     * bytes unchanged (res->graph, the import, is then not written) */
    bool copy_source;
} ts_optimize_result;

/* g is not modified.  Fails (err set) on bad options (an unknown source
 * name lists the known ones), on a graph the runtime cannot run, or when
 * the result differs from the original (never returned as a result). */
ts_status ts_optimize(const ts_graph *g, const ts_optimize_opts *o, ts_optimize_result *res, ts_error *err);
void ts_optimize_result_free(ts_optimize_result *res);
/* The result as the one-line JSON object `tsopt optimize --json` prints
 * (docs/optimize.md); malloc'd (free it), NULL out of memory. */
char *ts_optimize_result_json(const ts_optimize_result *r, const char *model, const char *output);
/* The known source names, comma-separated ("taso"). */
const char *ts_optimize_sources(void);

/* ------------------------------------------------------ version, memory */

/* "MAJOR.MINOR.PATCH" (CMakeLists.txt's project version; the soname is
 * libtsopt.so.MAJOR.MINOR). */
const char *tsopt_version(void);
/* Frees what the library returned for the caller to free
 * (ts_optimize_result_json, ts_optimize_file's JSON): for callers that do
 * not share the library's malloc (Python's ctypes, other languages). */
void ts_free(void *p);

/* ----------------------------------------------- declared symbolic dims */

/* Dimension d of graph input i (output i) as the ONNX file declared it:
 * its dim_param ("batch"); "" for a dimension the file left symbolic
 * without a name; NULL for a fixed dimension, and for graphs with no
 * record of a file (built through the API) or indices out of range. */
const char *ts_graph_input_dim_param(const ts_graph *g, int i, int d);
const char *ts_graph_output_dim_param(const ts_graph *g, int i, int d);

/* -------------------------------------------------------------- session */

/* An ONNX model ready to run on inputs of any size its symbolic dimensions
 * allow, as ONNX Runtime's InferenceSession (the Python package's is this):
 * the model is loaded at its default sizes (symbolic dimensions 1); a run
 * binds the symbolic dimensions from its inputs' shapes, loading the model
 * again at those sizes and building a plan for them; the last 4 shape
 * signatures keep their graph and plan, so only new sizes re-plan.  Runs
 * on one session are serialized (the plan's memory is reused). */
typedef struct ts_session ts_session;

/* A graph input or output: name, dtype, shape at the default sizes, and
 * per dimension what ts_graph_input_dim_param says (NULL: fixed).  The
 * strings belong to the session. */
typedef struct ts_io_info {
    const char *name;
    ts_dtype dtype;
    ts_shape shape;
    const char *dim_params[TS_MAX_RANK];
} ts_io_info;

/* threads: 0 for one per core. */
ts_status ts_session_open(const char *path, int threads, ts_session **out, ts_error *err);
/* Session options (ONNX Runtime's SessionOptions); zero-initialized:
 * one thread per core, every rewrite (ts_graph_opt), no kernel skipped. */
typedef struct ts_session_options {
    int threads;       /* 0: one per core */
    int graph_opt;     /* ts_graph_opt: applied to each graph the session loads, then planned at that level */
    const char *skip;  /* ts_plan_opts.skip (copied) */
} ts_session_options;
/* ts_session_open with options; o NULL: the defaults. */
ts_status ts_session_open_with(const char *path, const ts_session_options *o, ts_session **out, ts_error *err);
void ts_session_free(ts_session *s);
/* The graph at the default sizes (owned by the session); NULL for a model
 * whose shapes depend on the values of inputs (a Reshape's shape or a
 * Range's limits fed as graph inputs): such a model is loaded at each
 * run, with those inputs' values as constants, and its graphs and plans
 * are cached by the inputs' shapes and those values; NULL too for a model
 * that does not load with its symbolic dimensions at the placeholder 1
 * (the session opens from its declaration, ts_onnx_read_io, and loads it
 * at each run's sizes).  After a run at the
 * default sizes, the constants that plan packed have NULL data (weights
 * held once, ts_plan_opts.release_packed_weights): names, dtypes and
 * shapes stay.  A model with symbolic dimensions gets its graph
 * optimizations when the default sizes are first planned (before, the
 * graph is as imported). */
const ts_graph *ts_session_graph(const ts_session *s);
int ts_session_ninputs(const ts_session *s);
int ts_session_noutputs(const ts_session *s);
/* false when i is out of range. */
bool ts_session_input_info(const ts_session *s, int i, ts_io_info *info);
bool ts_session_output_info(const ts_session *s, int i, ts_io_info *info);
/* inputs[i] is graph input i (its dtype; fixed dimensions as declared);
 * on success outputs[i] receives a new tensor (the caller unrefs it) for
 * graph output i. */
ts_status ts_session_run(ts_session *s, ts_tensor *const *inputs, ts_tensor **outputs, ts_error *err);
/* Plans the session has built so far (each new shape signature that is not
 * cached builds one, unless a plan of its class re-binds): how a caller or
 * test sees whether its runs re-plan. */
int64_t ts_session_plan_builds(const ts_session *s);
/* Runs at new sizes that re-bound a cached plan of the same class instead
 * (ts_plan_rebind: a decoder's every token after the first). */
int64_t ts_session_plan_rebinds(const ts_session *s);
/* Steps those re-binds made for the new sizes by lowering them again and by
 * resizing them in place (ts_plan_rebind_stats summed over the session's
 * plans: a decoder's tokens lower none), and the derived graphs that were
 * derived in place of the one before instead of a copy (*inplace). */
void ts_session_rebind_stats(const ts_session *s, int64_t *lowered, int64_t *resized, int64_t *inplace);
/* Of those, runs whose graph was derived from the re-bound plan's (shapes
 * re-inferred, size-dependent constants recomputed) instead of loading and
 * rewriting the model again (docs/decoder.md). */
int64_t ts_session_graph_derives(const ts_session *s);
/* What those derives recomputed: topological orders of a graph (*orders: a
 * graph derived in place keeps its order from token to token, its nodes do
 * not change) and shape re-inference passes over it (*passes: the strict
 * check pass runs only when a pass kept a node's old shapes as a guess). */
void ts_session_derive_stats(const ts_session *s, int64_t *orders, int64_t *passes);
/* Of the size-dependent constants those derived graphs recomputed, how many
 * were folded by importing their slice of the model (*folded) and how many
 * were taken from another's fold, the same nodes at the same shapes
 * (*shared: a decoder's per-layer causal masks after the first layer's). */
void ts_session_sized_fold_stats(const ts_session *s, int64_t *folded, int64_t *shared);
/* The session's packed-weight cache (ts_pack_cache: plans of the model
 * loaded at new sizes reuse the weights earlier plans packed); zeros
 * before the first run at other than the default sizes. */
ts_pack_cache_stats ts_session_pack_stats(const ts_session *s);

/* The inputs (weights left out) and outputs of the ONNX model at path as
 * its file declares them, read without building the graph, so without the
 * shape checks that need symbolic dimensions bound (what binds them from
 * the user's inputs reads this first).  shape: the declared one with
 * symbolic dimensions 1, rank -1 where the file declares no shape;
 * dim_params as ts_io_info's.  One block: free it with ts_model_io_free. */
typedef struct ts_model_io {
    int ninputs, noutputs;
    ts_io_info *inputs, *outputs;
} ts_model_io;
ts_status ts_onnx_read_io(const char *path, ts_model_io **out, ts_error *err);
void ts_model_io_free(ts_model_io *io);
/* Whether an input has a symbolic dimension. */
bool ts_model_io_symbolic(const ts_model_io *io);
/* Binds from files: for each input of io with a symbolic dimension (or no
 * declared shape) that binds[0..*n) does not name, the shape of
 * dir/<sanitized name>.npy is appended to *binds (realloc'ed; the names
 * point into io).  A missing or unreadable file is skipped (the reader of
 * the inputs says what is wrong); a file whose rank or fixed dimensions
 * disagree with the declaration fails with one line naming the input, the
 * declaration and the file. */
ts_status ts_model_io_bind_dir(const ts_model_io *io, const char *dir, ts_input_bind **binds, int *n, ts_error *err);
/* The declared shape for messages: "[batch, 3, 224, 224]" ('?' for an
 * unnamed symbolic dimension), "any shape" for rank -1. */
const char *ts_io_declared_str(const ts_io_info *in, char *buf, size_t n);

/* ------------------------------------------------------------- pictures */

/* Writes a picture of g: Graphviz DOT for a path ending in .dot, or SVG /
 * PNG (.svg, .png) made by Graphviz's `dot`.  Nodes are labelled with
 * their operator, name and output shape; weights are folded into the node
 * that reads them.  With diff_against (the original of an optimized g),
 * nodes the original does not have are highlighted and the ones it lost
 * are listed under the picture.  Written to PATH.tmp, then renamed. */
ts_status ts_graph_draw(const ts_graph *g, const ts_graph *diff_against, const char *path, ts_error *err);

/* ------------------------------------------- optimize a file, for an FFI */

/* Sets one ts_optimize_opts field from text, for callers that cannot fill
 * the struct (the Python package): time_limit, alpha, budget, seed,
 * min_gain, max_memory_mb (numbers), transforms, rules, cost_cache
 * (strings, borrowed: they must outlive o), cost_model ("measured" or
 * "roofline"), no_timing, progress ("0"/"1").  Ranges are checked by
 * ts_optimize_opts_check. */
ts_status ts_optimize_opts_set(ts_optimize_opts *o, const char *key, const char *value, ts_error *err);
/* `tsopt optimize SRC -o DST --json` as a call: checks the options and
 * DST's folder, loads SRC (binds as ts_onnx_load; symbolic dimensions
 * they leave free bound from the files of option "inputs", as
 * ts_model_io_bind_dir does), runs ts_optimize,
 * writes the result to DST (ts_onnx_save) and gives in *json the object
 * ts_optimize_result_json makes (free it with ts_free).  options are
 * "key=value" strings for ts_optimize_opts_set; nothing is printed. */
ts_status ts_optimize_file(const char *src, const char *dst, const ts_input_bind *binds, int nbinds,
                           const char *const *options, int noptions, char **json, ts_error *err);

/* ------------------------------------------------------------------ zoo */

/* The seed papers' evaluation models, built through this API with seeded
 * random weights (src/zoo/).  Zero fields take the model's defaults. */
typedef struct ts_zoo_opts {
    int batch;    /* default 1 */
    int layers;   /* BERT/Longformer encoder layers, NasNet cells per stage... */
    int steps;    /* NasRNN time steps */
    uint64_t seed;
    bool no_weights; /* leave weights zero: fast, for shapes/statistics only */
} ts_zoo_opts;

typedef struct ts_zoo_model {
    const char *name;
    const char *summary; /* one line: what it is and its input shape */
    ts_status (*build)(const ts_zoo_opts *o, ts_graph **out, ts_error *err);
} ts_zoo_model;

/* The i-th zoo model, NULL past the last. */
const ts_zoo_model *ts_zoo_at(int i);
const ts_zoo_model *ts_zoo_find(const char *name);
ts_status ts_zoo_build(const char *name, const ts_zoo_opts *o, ts_graph **out, ts_error *err);

#ifdef __cplusplus
}
#endif
#endif
