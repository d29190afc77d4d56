/* Typed attribute structs of the operators whose attributes are read
 * outside their own op file (the runtime's fast kernels and fusions).
 * They live here, not as private copies in each reader, so that a change
 * of layout is one change the compiler sees everywhere: a mirrored struct
 * of the same size would be misread silently.  Every other operator keeps
 * its struct private to its file.  Each struct is filled by its op's parse
 * (src/ops/<file>.c) and is plain data (see docs/adding-an-operator.md). */
#ifndef TS_OPS_ATTRS_H
#define TS_OPS_ATTRS_H

#include "ops/window.h"

/* LeakyRelu, HardSigmoid (activation.c).  Kept as float, the precision
 * ONNX stores them in. */
typedef struct ts_alpha_beta_attrs {
    float alpha, beta;
} ts_alpha_beta_attrs;

/* Gelu (gelu.c): approximate = "tanh" (else "none", the erf form). */
typedef struct ts_gelu_attrs {
    bool tanh;
} ts_gelu_attrs;
/* GELU of x in double precision, the erf or (tanh_form) the tanh formula. */
double ts_gelu(double x, bool tanh_form);

/* Clip (activation.c).  Bounds are attributes before opset 11 and optional
 * scalar inputs after; either may be absent (no bound on that side). */
typedef struct ts_clip_attrs {
    bool has_min, has_max;
    float min, max;
} ts_clip_attrs;

/* BatchNormalization (batchnorm.c). */
typedef struct ts_batchnorm_attrs {
    double epsilon, momentum;
    int32_t training_mode;
    int32_t spatial; /* 1 unless an old model said otherwise */
} ts_batchnorm_attrs;

/* Conv (conv.c). */
typedef struct ts_conv_attrs {
    ts_window win;
    int64_t group;
} ts_conv_attrs;

/* ConvTranspose (conv_transpose.c). */
typedef struct ts_convt_attrs {
    ts_window win;
    int64_t group;
    int32_t nout_pad, nout_shape; /* -1 when absent */
    int64_t out_pad[TS_WIN_MAX];
    int64_t out_shape[TS_WIN_MAX + 2];
} ts_convt_attrs;
/* The geometry of a ConvTranspose over X, W (and B, NULL: not checked):
 * g->in is X's spatial size, g->out Y's, the pads resolved (pad_end < 0
 * when output_shape is larger than the natural size).  On failure writes
 * a sentence into why and returns false. */
bool ts_convt_geom(const ts_convt_attrs *a, const ts_shape *x, const ts_shape *w, const ts_shape *b,
                   ts_window_geom *g, char *why, size_t n);

/* MaxPool, AveragePool (pool.c). */
typedef struct ts_pool_attrs {
    ts_window win;
    int32_t count_include_pad; /* AveragePool */
    int32_t storage_order;     /* MaxPool: layout of the Indices output only */
} ts_pool_attrs;

/* Pad (pad.c).  npads -1: the opset >= 11 form (pads, constant_value and
 * axes are inputs). */
enum { TS_PAD_CONSTANT, TS_PAD_REFLECT, TS_PAD_EDGE };
typedef struct ts_pad_attrs {
    int mode; /* TS_PAD_* */
    int npads;
    int64_t pads[2 * TS_MAX_RANK];
    double value;
} ts_pad_attrs;

/* Gemm (matmul.c). */
typedef struct ts_gemm_attrs {
    double alpha, beta;
    int32_t trans_a, trans_b;
} ts_gemm_attrs;

/* LayerNormalization (layernorm.c). */
typedef struct ts_layernorm_attrs {
    int64_t axis;
    double epsilon;
    int64_t stash_type;
} ts_layernorm_attrs;

/* Softmax, LogSoftmax (softmax.c). */
typedef struct ts_softmax_attrs {
    int64_t axis;
    bool flatten; /* opset < 13 semantics */
} ts_softmax_attrs;

/* ReduceSum, ReduceMean, ReduceMax (reduce.c). */
typedef struct ts_reduce_attrs {
    int64_t axes[TS_MAX_RANK];
    int naxes;      /* -1: no axes attribute */
    int keepdims;   /* default 1 */
    int noop_empty; /* noop_with_empty_axes, default 0 */
} ts_reduce_attrs;

/* Transpose (transpose.c). */
typedef struct ts_transpose_attrs {
    int nperm; /* -1: absent, reverse */
    int64_t perm[TS_MAX_RANK];
} ts_transpose_attrs;

/* Slice (slice.c). */
typedef struct ts_slice_attrs {
    int nstarts, nends, naxes; /* -1: attribute absent (opset < 10 form) */
    int64_t starts[TS_MAX_RANK], ends[TS_MAX_RANK], axes[TS_MAX_RANK];
} ts_slice_attrs;

/* Concat (concat.c). */
typedef struct ts_concat_attrs {
    int64_t axis;
} ts_concat_attrs;

/* Gather (gather.c). */
typedef struct ts_gather_attrs {
    int64_t axis;
} ts_gather_attrs;

/* Resize, Upsample (resize.c).  The runtime's vec.resize reads these and
 * calls the coordinate helpers below rather than copies of them, so that
 * its precomputed indices are the reference kernel's to the bit (the
 * helpers are the op file's own float32 arithmetic, as ONNX Runtime). */
enum { TS_RESIZE_NEAREST, TS_RESIZE_LINEAR, TS_RESIZE_CUBIC, TS_RESIZE_BILINEAR };
enum { TS_RESIZE_HALF_PIXEL, TS_RESIZE_PYTORCH_HALF_PIXEL, TS_RESIZE_ALIGN_CORNERS, TS_RESIZE_ASYMMETRIC,
       TS_RESIZE_TF_HALF_PIXEL_FOR_NN, TS_RESIZE_TF_CROP_AND_RESIZE, TS_RESIZE_HALF_PIXEL_SYMMETRIC };
/* TS_RESIZE_SIMPLE: opset-10 Resize and Upsample, ORT's rule (ceil when
 * downscaling, else floor); no attribute spells it. */
enum { TS_RESIZE_ROUND_PREFER_FLOOR, TS_RESIZE_ROUND_PREFER_CEIL, TS_RESIZE_FLOOR, TS_RESIZE_CEIL,
       TS_RESIZE_SIMPLE };
enum { TS_RESIZE_STRETCH, TS_RESIZE_NOT_LARGER, TS_RESIZE_NOT_SMALLER };

typedef struct ts_resize_attrs {
    bool upsample; /* the Upsample operator */
    unsigned given; /* attributes given explicitly (bits private to resize.c) */
    int mode, coord, nearest, policy;
    int64_t antialias, exclude_outside;
    double cubic_coeff_a, extrapolation_value;
    int naxes;
    int64_t axes[TS_MAX_RANK];
    int nscales; /* Upsample-7 'scales' attribute; -1 absent */
    float scales[TS_MAX_RANK];
} ts_resize_attrs;

/* Input index holding the scales (-1: the Upsample-7 attribute); sizes are
 * input 3 from opset 11 on Resize. */
int ts_resize_scales_input(const ts_resize_attrs *p, int opset);
/* Raw scale/size lists (n = -1 when absent) -> per-axis float scale and
 * output size.  Returns an error message (in msg) or NULL. */
const char *ts_resize_sizes(const ts_resize_attrs *p, const ts_shape *in, const double *scl, int nscl,
                            const int64_t *sizes, int nsizes, float *scale, int64_t *out, char *msg, size_t msz);
/* Output coordinate -> input coordinate (coordinate mode `mode`), float32. */
float ts_resize_coord(int mode, float x, float scale, int64_t in_len, int64_t out_len);
/* Nearest input index for input coordinate x, clamped to [0, in_len). */
int64_t ts_resize_nearest(int mode, float x, float scale, int64_t in_len);

/* Cast (cast.c): the target type and its ONNX code (for export); the
 * runtime's half-precision lowering (exec/half.c) retargets and adds Casts. */
typedef struct ts_cast_attrs {
    ts_dtype to;
    int64_t onnx_to;
    /* float16/bfloat16 when a Cast to that type was retargeted to float32
     * (half.c): the values are still rounded to it; else TS_UNDEFINED */
    ts_dtype via;
} ts_cast_attrs;

#endif
