/* The fast runtime's internals.
 *
 * Building a plan walks the graph in topological order and lowers each node
 * to a step: the first kernel in the node's candidate list (kernels.c) whose
 * build() accepts it, else the reference kernel (always correct, plain
 * layout).  A step may compute following nodes too (fusion: bias,
 * activation, residual add into a convolution): the lowering stage
 * (lower_group.c, lower_post.c) hands a served kernel its group and the
 * plan claims it; kernels not yet served still claim nodes themselves.  Then buffers get
 * lifetimes over the step order and offsets in one arena (memplan.c), so
 * running a plan resolves pointers and calls run() per step: no allocation.
 *
 * Layouts: a buffer is plain row-major unless `blocked`, in which case `md`
 * is the oneDNN memory descriptor it holds.  Kernels that need plain inputs
 * call xplan_plain(), which inserts a reorder step when needed. */
#ifndef TS_EXEC_EXEC_H
#define TS_EXEC_EXEC_H

#include <oneapi/dnnl/dnnl.h>
#include "ir/ir.h"

typedef struct xplan xplan;

typedef enum xbuf_kind {
    XB_ARENA,  /* activation in the arena */
    XB_INPUT,  /* graph input: pointer bound at run time */
    XB_OUTPUT, /* graph output: the caller's tensor, bound at run time */
    XB_CONST,  /* plan-owned constant (graph weight or pre-packed copy) */
    XB_ALIAS,  /* same storage as buffer `alias_of` (reshape-like views, in-place) */
} xbuf_kind;

typedef struct xbuf {
    ts_dtype dtype;
    ts_shape shape; /* logical shape */
    size_t bytes;   /* physical size (blocked layouts may pad) */
    xbuf_kind kind;
    int value;      /* graph value id, or -1 for plan-internal buffers */
    int64_t offset; /* XB_ARENA: byte offset in the arena (memplan);
                       XB_INPUT/XB_OUTPUT: index in g->inputs/g->outputs */
    void *data;     /* XB_CONST: the data (owned when owns_data) */
    bool owns_data;
    /* XB_CONST re-laid out by a kernel: the constant's data it was made
     * from and the kernel's layout tag, so nodes sharing a weight share one
     * copy (NULL when not such a copy) */
    const void *packed_from;
    const char *packing;
    /* XB_CONST whose data is a ts_pack_cache entry's (owns_data false):
     * the plan holds a reference, dropped when it is freed */
    struct xpack_entry *shared;
    int alias_of;   /* XB_ALIAS */
    bool blocked;   /* layout is `md` (oneDNN), not plain row-major */
    dnnl_memory_desc_t md;
    int first_step, last_step; /* lifetime, filled by the planner */
    /* XB_CONST float32 contents stored in the plan's half type (float16 or
     * bfloat16, half.c): `bytes` are the stored ones, every step reading it
     * widens it per run into its scratch */
    bool half;
} xbuf;

typedef struct xstep {
    const struct xkernel *k;
    int node;      /* first graph node covered (names in errors/profiles) */
    int nfused;    /* further nodes absorbed into this step */
    void *state;   /* kernel-owned, freed by k->destroy */
    int nin, nout;
    int *in, *out; /* buffer ids; -1 in `in` for an absent optional input (NULL at run) */
    size_t scratch_bytes; /* per-step scratch, carved from the arena */
    int64_t scratch_offset;
    bool ref_impl; /* the library primitive underneath is oneDNN's slow reference one (stats) */
    int variant;   /* the choice of the lowering's group it was built from (xgroup_form) */
} xstep;

typedef struct xkernel {
    const char *name; /* "dnnl.conv", "vec.binary", "ref", ... */
    /* Plan time: lower node n into s (inputs/outputs via xplan_value_buf /
     * xplan_new_buf / xplan_plain, state, scratch size); may claim following
     * nodes.  Returning TS_ERR_UNSUPPORTED declines without error: the next
     * candidate is tried, on the plan as the kernel found it, so a kernel
     * decides everything it may decline on before it makes a buffer or a
     * step (xplan_value_layout looks at a layout without making one);
     * xplan_build_step fails the plan on a decline that did not. */
    ts_status (*build)(xplan *p, int n, xstep *s, ts_error *err);
    /* Run time: must not allocate. in/out are the step's buffers' pointers. */
    void (*run)(const xstep *s, void *const *in, void *const *out, void *scratch);
    void (*destroy)(void *state);
} xkernel;

/* Re-binding (plan_rebind.c): step s as built, made for graph g (the
 * plan's graph at other sizes: the same nodes and wiring; its buffers'
 * values may have other shapes, constants other contents) without lowering
 * again: *state receives the step's new state (NULL: the one it has stays
 * right), *scratch its scratch bytes.  Reads values' shapes only.
 * TS_ERR_UNSUPPORTED declines (the step is lowered again).  The kernels
 * that have one are listed in plan_rebind.c (vec.concat, vec.attention,
 * vec.eltwise: a decoder token's re-bound steps, so that a token lowers
 * nothing; issue 29 §3). */
typedef ts_status (*xresize_fn)(const xplan *p, const xstep *s, const ts_graph *g, void **state, size_t *scratch,
                                ts_error *err);

struct xplan {
    const ts_graph *g;
    ts_plan_opts opts;
    xbuf *bufs;
    int nbufs, cap_bufs;
    xstep *steps;
    int nsteps, cap_steps;
    int *value_buf; /* graph value id -> current buffer id (-1 none yet) */
    bool *claimed;  /* graph node -> already lowered (fused) */
    signed char net_in_blocks; /* xplan_net_in_blocks: 0 not asked yet, 1 no, 2 yes (net_blocks.c) */
    const struct xkernel **claimed_by; /* graph node -> kernel of the step holding it (NULL: view, alias) */
    int *consumers; /* graph value id -> number of live consumer nodes (+1 if graph output) */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    size_t arena_bytes;
    void *arena;
    void **ptrs; /* run-time pointer per buffer (resolved each run, no allocation) */
    ts_plan_stats stats;
    /* of stats.released_bytes, what only the plan's end released
     * (xweights_once_all): constants waited for the last node */
    size_t released_late;
    /* planning's code goes back as it goes (plan.c, xplan_release_code):
     * a plan built once to be run, code_pages not skipped */
    bool release_code;
    double *step_ms; /* optional per-step timer (step_timer.h): NULL = off */
    /* half-precision graphs (half.c): the float32-computing copy the plan
     * lowers (g points to it; owned), the caller's graph, its 16-bit type */
    ts_graph *own_g;
    const ts_graph *caller_g;
    ts_dtype half;
    bool half_release_caller; /* the caller's opts.release_packed_weights */
    /* Re-binding to the same graph at other sizes (plan_rebind.c): the
     * graph the plan was built from (steps never rebuilt may point into
     * it), which steps were rebuilt since (NULL: none), the arena's size */
    const ts_graph *built_g;
    bool *rebound;
    bool *rebuf; /* buffer -> a re-bind gave it other than the built shape or constant */
    /* ts_plan_rebind_stats: steps re-bound by lowering again, by resizing */
    int64_t rebind_lowered, rebind_resized;
    size_t arena_cap;
    /* The node being lowered and the group the lowering stage handed its
     * kernel (lower_group.c; NULL: none); a node a kernel read through
     * xplan_node that it was not handed (-1: none). */
    int lowering;
    const struct xgroup *group;
    int stray_node;
};

/* ---- the lowering stage's fused groups (lower_group.c) */

#define XGROUP_MAX 40 /* vec.se: pool, two convs with their tails, the Mul */
#define XGROUP_VARIANTS 3 /* choices of a group a kernel may be offered */
#define XGROUP_GEMV_ROWS 16 /* vec.gemv: rows of all stacked products together */
#define XD_MAX_FUSE 16 /* bias + GELU's tanh form is 10 nodes */
/* A convolution's or product's post-op tail (lower_post.c): the nodes
 * after the kernel's raw output that its step computes too.  Affine folds
 * first (an Add of a per-channel constant: y + shift[c], into the bias),
 * then oneDNN post-ops in order (element-wise activations, a residual
 * sum). */
typedef enum { XD_PO_ELTWISE, XD_PO_SUM } xd_po_kind;
typedef struct xd_po {
    xd_po_kind kind;
    dnnl_alg_kind_t alg;
    float alpha, beta;
} xd_po;
typedef struct xd_fuse {
    int nodes[XD_MAX_FUSE]; /* absorbed nodes, in order */
    int nnodes;
    int naffine;            /* the first naffine nodes are affine folds */
    int in_value;           /* the kernel's raw output */
    int out_value;          /* value the step finally produces */
    /* y*scale[c] + shift[c] applied before any post-op (folded into the
     * weights/bias); NULL when no affine node was absorbed. */
    float *scale, *shift;
    xd_po po[XD_MAX_FUSE];
    int npo;
    int sum_value; /* residual operand of the sum post-op, or -1 */
    int sum_node;  /* the Add reading it, or -1 */
    /* A half plan that rounds every node (no AVX512-FP16): the product's
     * bias Add (shift, scale all 1) absorbed as round(round(y) + shift),
     * computed by the kernel (dnnl.matmul) where it copies or walks its
     * result, never as oneDNN's bias (that adds before the rounding). */
    bool half_bias;
    /* The same for a convolution's residual Add (sum_value, sum_node; no
     * sum post-op) and a Relu after it (half_relu): the step computes
     * relu(round(round(y) + r)) over its result (dnnl.conv), the unfused
     * plan's arithmetic, instead of a step of its own. */
    bool half_sum, half_relu;
    /* A half_bias sum's element-wise chain, every reader of that sum, its
     * other operands of the sum's shape (ViT's GELU; the MLP's residual
     * Add), each node rounded as vec.eltwise's
     * program rounds it, run on the sum's rows as they are written (the
     * sum is never stored); NULL: none (lower_chain.c xv_chain_reading) */
    struct xv_chain *half_chain;
    int half_chain_sum; /* the rounded sum's value: the chain's operand read from the step itself */
} xd_fuse;
/* LayerNorm written out (vec.layernorm.ops): x viewed as [outer, d,
 * inner], normalized over d (mask: the reduced axes of x); gamma / beta
 * the constant values scaling / shifting it, or -1; round: the 16-bit
 * type every node rounds to in a half plan. */
typedef struct xgroup_layernorm {
    int x, gamma, beta;
    int64_t outer, d, inner;
    bool mask[TS_MAX_RANK];
    float eps;
    ts_dtype round;
} xgroup_layernorm;
/* A MatMul reading a band gathered by a constant index table (vec.band,
 * lower_band.c): which input is the band (0 scores, 1 context), the
 * Gather node and its index constant, the leading dims' product H, the
 * source's rows S of C, the table's L x J. */
typedef struct xgroup_band {
    int side, gather, idx;
    int64_t H, S, C, L, J;
} xgroup_band;
/* vec.attention's step inputs (lower_attention.c): Q, K, V, the mask, the
 * scores' scale and the mask's fill value (-1: absent) */
enum { XATT_Q, XATT_K, XATT_V, XATT_MASK, XATT_SCALE, XATT_FILL, XATT_N };
/* Nodes one step computes, decided before its kernel is asked: nodes[0]
 * the node being lowered, the others claimed for the step once it is
 * built; y the value the step writes (the last node's output); what else
 * the kernel needs of them.  vec.batchnorm: the node and a Relu after it. */
typedef struct xgroup {
    const struct xkernel *k;
    int nodes[XGROUP_MAX], nnodes;
    int y;
    union {
        xgroup_layernorm ln;
        int64_t shuffle_groups; /* vec.shuffle: g of the Reshape [N, g, C/g, H, W] */
        /* vec.slice_transpose (lower_group.c; nodes[0] the Slice, then the
         * Reshape if any, the Transpose, the Mul or Div if any): the
         * Reshape (-1 none) and the Transpose, the scalar and 0 none,
         * 1 multiply, 2 divide */
        struct {
            int st_reshape, st_transpose;
            float st_scale;
            int st_op;
        };
        struct xv_chain *chain; /* vec.eltwise: the chain's program (lower_chain.c) */
        /* vec.band (nodes[0] the MatMul) and vec.band.defer (nodes[0]
         * the Gather: the MatMul that will read it through the index);
         * band_src: the deferred Gather's source buffer (vec.band) */
        struct {
            xgroup_band band;
            int band_src;
        };
        /* dnnl.dense_concat (lower_concat.c): the chain's last member's
         * value (its buffer B's), B when an earlier member made it (-1:
         * this one makes it), the inputs that member wrote, the channel
         * block, which inputs' producers write their slices of B */
        struct {
            int dc_last_y, dc_root, dc_first, dc_block;
            bool *dc_direct;
        };
        /* vec.concat (lower_concat.c): the values of the Relus reading
         * the Concat (nodes[1..]), which all become the step's output */
        struct {
            int relu_y[XGROUP_MAX], nrelu;
        };
        /* vec.gemv (lower_gemv.c): the products by the same constant
         * weights stacked with node n's (their nodes, also in nodes[]),
         * and the element-wise chain after n's product (NULL: none) */
        struct {
            int gemv_stack[XGROUP_GEMV_ROWS], gemv_nstack;
            struct xv_chain *gemv_chain;
        };
        /* dnnl.matmul_integer: Cast -> Mul(scale) [-> Add(bias)] [-> Relu]
         * after the product: the scale and bias values (-1: none; no
         * scale: the product alone), a Relu ending it */
        struct {
            int dyn_scale, dyn_bias;
            bool dyn_relu;
        };
        /* vec.attention (lower_attention.c; nodes[0] the keys' Transpose)
         * and vec.sdpa (nodes[0] the scores' MatMul): the step's inputs, the mask's element strides along (batch,
         * query row, key), whether true mask entries take the fill */
        struct {
            int att_in[XATT_N];
            int64_t att_mstride[3];
            bool att_fills;
            bool att_ytr; /* vec.sdpa: a Transpose after it, the output [.., s, H, dv] */
        };
        /* convolutions, products (lower_post.c): the post-op tail; for
         * dnnl.conv_gated (nodes[0] the Mul) also the Mul's weight and
         * gate operands and the Conv node */
        struct {
            xd_fuse post;
            int gate_w, gate_g, gate_conv;
        };
        /* vec.se (lower_post.c; nodes[0] the GlobalAveragePool): the two
         * 1x1 convs with their tails, the block's Mul x * gate or -1 */
        struct {
            xd_fuse se1, se2;
            int se_c1, se_c2, se_mul;
        };
    };
} xgroup;
/* k's group at node n, its variant-th choice (0 the largest; a kernel
 * that declines one is asked with the next, plan.c): 1 formed (gr
 * filled), -1 k serves groups and none forms here (k is not asked), 0 k
 * forms no groups (it is asked as is, variant 0 only). */
int xgroup_form(const xplan *p, const struct xkernel *k, int n, int variant, xgroup *gr);
void xgroup_free(xgroup *gr);
/* How many choices k's group has (lower_node offers variants below it). */
int xgroup_choices(const struct xkernel *k);
/* lower_post.c, for lower_group.c's table */
bool xgroup_post(const xplan *p, const struct xkernel *k, int n, int variant, xgroup *gr);
bool xgroup_serves_post(const struct xkernel *k);
/* lower_chain.c: vec.eltwise's chain; lower_attention.c: vec.attention's six nodes */
bool xgroup_eltwise_chain(const xplan *p, int n, xgroup *gr);
bool xgroup_attention(const xplan *p, int n, xgroup *gr);
/* lower_attention.c: vec.sdpa's MatMul-(Mul)-Softmax-MatMul-(Transpose) */
bool xgroup_sdpa(const xplan *p, int n, xgroup *gr);
/* The attention group's shape conditions (lower_attention.c) for Q, K, V
 * and the mask (NULL: none): the flattened leading dims and the mask's
 * strides; false where the group would not form. */
bool xattention_shapes(const ts_shape *qs, const ts_shape *ks, const ts_shape *vs, const ts_shape *ms, int64_t *nb,
                       int64_t *mstride);
/* lower_chain.c: extends gr by the sole-reader element-wise chain after
 * value cur, lowered into ch; half: with half plans' roundings (vec.eltwise)
 * or none (vec.gemv's epilogue).  Returns the chain's last value. */
int xgroup_chain_after(const xplan *p, int cur, xgroup *gr, struct xv_chain *ch, bool half);
/* lower_chain.c: the chain reading value v (and values of v's shape
 * computed already) and being v's every reader, each node rounded (half
 * plans); its nodes into
 * nodes[] (*nn, at most max).  Returns its last value, -1: none. */
int xv_chain_reading(const xplan *p, int v, struct xv_chain *ch, int *nodes, int *nn, int max);
/* lower_gemv.c: vec.gemv's stacked products and epilogue chain */
bool xgroup_gemv(const xplan *p, int n, xgroup *gr);
/* lower_band.c: vec.band's MatMul and the Gather vec.band.defer defers for it */
bool xgroup_band_matmul(const xplan *p, int n, xgroup *gr);
bool xgroup_band_gather(const xplan *p, int n, xgroup *gr);
/* lower_concat.c: vec.concat's Relu readers, dnnl.dense_concat's chain */
bool xgroup_concat_relu(const xplan *p, int n, xgroup *gr);
bool xgroup_dense_concat(const xplan *p, int n, xgroup *gr);
/* The float32 weights of the plan's convolutions and products, each
 * constant once (dnnl.conv's Winograd budget; lower_post.c). */
size_t xplan_product_weight_bytes(const xplan *p);
/* Where p->release_code: the code pages loading and planning touched so far
 * go back (util/code_pages.c), before a large packing transient (dnnl_conv.c)
 * and at the plan's start and end (plan.c). */
void xplan_release_code(const xplan *p);
/* From this size of packed weight on, the code planning ran so far goes
 * back before the packing: its transient is the lowering's peak. */
#define XWEIGHTS_RELEASE_CODE_BYTES ((size_t)8 << 20)
/* Node n built by kernel k into s, handed its group's variant-th choice
 * when the lowering stage serves k (plan.c; also what plan_rebind.c
 * replays, with the step's variant).  TS_ERR_INVALID when k declined after
 * making steps or buffers, or (step check on) read what its step may not. */
ts_status xplan_build_step(xplan *p, const struct xkernel *k, int n, int variant, xstep *s, ts_error *err);

/* ---- for kernels, at plan time */

/* Graph node k, for a kernel served by the lowering stage: the node it
 * lowers or one of its group.  With the step check on (xstep_checking) a
 * read of any other node is recorded, and plan.c refuses the step. */
const ts_node *xplan_node(const xplan *p, int k);

/* True when buffer b is plain or a dense permutation of its logical dims;
 * order[k] is then the logical dim stored at physical position k
 * (outermost first), for b's rank (rank 0 counts as 1).  buf_order.c */
bool xbuf_dense_order(const xbuf *b, int *order);
/* True when order is 0, 1, ..., rank-1 (plain row-major). */
bool xbuf_order_plain(const int *order, int rank);
/* Whether the plan's graph runs its convs in 16-channel blocks
 * (conv.stem_blocks, dnnl_conv.c): a property of the whole graph, decided
 * here by the planner side once per plan (kernels walk no graph:
 * tests/cli/kernel_nodes.sh).  net_blocks.c */
bool xplan_net_in_blocks(xplan *p);
/* True when buffer b is 4-D in oneDNN's 16-channel blocks (aBcd16b: N,
 * C/16, H, W dense, 16 channels innermost) with no padding (C a multiple
 * of 16).  buf_order.c */
bool xbuf_is_blocks16(const xbuf *b);
/* The same with C padded to the next multiple of 16 allowed (the padding
 * channels hold zeros wherever oneDNN wrote the buffer).  buf_order.c */
bool xbuf_is_blocks16_padded(const xbuf *b);

/* Buffer currently holding graph value v (created on first use: graph
 * inputs/outputs/constants/arena). */
int xplan_value_buf(xplan *p, int v);
/* The buffer graph value v is read from, without making one: the one
 * holding it, or (none made yet) the plain one xplan_value_buf would make,
 * described in *scratch.  For a kernel's decisions on its inputs' layouts,
 * taken before it touches the plan (it must not decline after). */
const xbuf *xplan_value_layout(const xplan *p, int v, xbuf *scratch);
/* A new buffer for graph value v (or -1 for internal), plain layout. */
int xplan_new_buf(xplan *p, int v, ts_dtype dt, const ts_shape *shape);
/* Makes buffer b the current holder of value v (after a kernel chose a
 * blocked output layout, or for aliases). */
void xplan_bind_value(xplan *p, int v, int b);
/* Plain-layout buffer with the contents of b: b itself, or the output of a
 * reorder step inserted now. */
int xplan_plain(xplan *p, int b, ts_error *err);
/* Node consuming value v when it has exactly one live consumer and is not a
 * graph output, else -1 (fusion candidates). */
int xplan_sole_consumer(const xplan *p, int v);
/* Marks node n as lowered inside the current step. */
void xplan_claim(xplan *p, int n, xstep *s);
/* Step arrays: allocate s->in / s->out for nin/nout ids. */
ts_status xstep_alloc(xstep *s, int nin, int nout, ts_error *err);
/* Constant data of value v when it is a constant, else NULL. */
const ts_tensor *xplan_const(const xplan *p, int v);
/* True when node n may overwrite buffer b in place (make its output an
 * XB_ALIAS of b): b's storage is plain arena memory (not a graph input,
 * output or constant) and no value stored there is needed after n. */
bool xplan_inplace_ok(const xplan *p, int b, int n);
/* The same for the step being built: every value stored in b's storage is
 * read from now on only by the nodes the step computes (the node lowered
 * and its group), which may each read it. */
bool xplan_inplace_ok_step(const xplan *p, int b);
/* True when every input of node c other than value cur exists when the
 * current step runs (a graph input or constant, or the output of a node
 * lowered before): c may join the step (fusion, stacking). */
bool xplan_inputs_ready(const xplan *p, int c, int cur);
/* The lowering's contract (step_check.c): step s, just built, reads only
 * inputs of its node s->node and of the nodes[0..nnodes) of its group,
 * buffers made by its build (ids >= nbufs_before) or packed constants;
 * else TS_ERR_INVALID naming the value read.  Checked by xplan_build_step
 * when xstep_checking(): debug builds, $TSOPT_CHECK_STEPS=1. */
ts_status xstep_check_reads(const xplan *p, const xstep *s, const int *nodes, int nnodes, int nbufs_before,
                            ts_error *err);
bool xstep_checking(void);
/* True when the plan must not use kernel or feature `name`: listed in
 * opts.skip or $TSOPT_SKIP (skip.c). */
bool xplan_skips(const xplan *p, const char *name);

/* ---- kernel registry (kernels.c): candidates for one ONNX op type, best
 * first, written to buf (XKERNELS_MAX + 1 entries) NULL-terminated; the
 * reference kernel is the implicit last.  Family tables are arrays of
 * {op descriptor (ops/list.h), kernel} ending with {NULL, NULL}. */
#define XKERNELS_MAX 8
typedef struct xentry {
    const ts_op_desc *op;
    const xkernel *k;
} xentry;
const xkernel *const *xkernels_for(const ts_op_desc *op, const xkernel **buf);
extern const xkernel xk_ref;     /* reference kernel on plain float32 buffers */
extern const xkernel xk_reorder; /* layout conversion (inserted by xplan_plain) */

/* ---- memory planning (memplan.c) */
/* Assigns arena offsets to XB_ARENA buffers and scratch; returns arena size.
 * every_order: the smallest of three greedy placements (a plan's build),
 * else the first alone (a decoder token's re-bind, per token). */
size_t xmemplan_assign(xplan *p, bool every_order);

#endif
