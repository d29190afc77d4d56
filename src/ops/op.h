/* Operator descriptors: everything tsopt knows about one operator lives in
 * one `ts_op_desc` (attributes, shape inference, reference kernel, cost,
 * algebraic flags).  Adding an operator means adding one descriptor (one
 * file under src/ops/) and listing it in its family's list file. */
#ifndef TS_OPS_OP_H
#define TS_OPS_OP_H

#include "tsopt.h"
#include "ops/num.h"

/* Flags describing the operator's algebra, used by the optimizers. */
enum {
    TS_OP_ELEMENTWISE = 1 << 0, /* out[i] depends only on inputs[i] (after broadcast) */
    TS_OP_EXACT = 1 << 1,       /* has a kernel in the mod-p domain (polynomial or data movement) */
    TS_OP_MOVEMENT = 1 << 2,    /* only moves/copies elements (reshape, transpose, slice...) */
    TS_OP_SHAPE = 1 << 3,       /* computes on shapes (Shape, ConstantOfShape...) */
    TS_OP_SHAPE_ONLY = 1 << 4,  /* reads only its inputs' shapes, never their data (Shape):
                                   folds to a constant as soon as shapes are static */
    TS_OP_RANDOM = 1 << 5,      /* may draw random numbers (Dropout in training mode, Random*):
                                   two such nodes are never one (CSE) */
    TS_OP_OPAQUE = 1 << 6,      /* a file's node kept as it is (ops/opaque.h): no kernel,
                                   never folded, a boundary for every rewrite */
    TS_OP_NO_FOLD = 1 << 7,     /* never folded, even on constant inputs: the file keeps it
                                   (DequantizeLinear of int8 weights would write them as
                                   float, four times larger, their quantization lost) */
    TS_OP_CONTRACTION = 1 << 8, /* sums products over a reduced axis (Conv, ConvTranspose, MatMul,
                                   Gemm): the op a fused group is built around, its cost
                                   dominated by arithmetic rather than memory traffic */
};

/* Shape/dtype inference context.  Inputs absent in the node are NULL.  An
 * input whose value is known (weights, folded shape arithmetic) has
 * in[i]->constant set; ops that need a value (Reshape's shape...) read it. */
typedef struct ts_infer_ctx {
    const ts_graph *graph;
    const ts_node *node;
    const void *attrs;
    int opset;
    int nin;
    const ts_value *const *in;
    int nout;
    ts_dtype *out_dtype; /* nout entries to fill */
    ts_shape *out_shape; /* nout entries to fill */
    ts_error *err;
} ts_infer_ctx;

/* Kernel context.  Tensors of float dtype are stored in the domain's type
 * (num->storage); integer and bool tensors keep their dtype.  Output tensors
 * are allocated (zeroed) by the caller from the inferred shapes. */
typedef struct ts_kernel_ctx {
    const ts_node *node;
    const void *attrs;
    int opset;
    const ts_num *num;
    int nin;
    const ts_tensor *const *in; /* NULL for an absent optional input */
    int nout;
    ts_tensor *const *out;
    ts_error *err;
} ts_kernel_ctx;

/* Attribute schema checking is the parser's job: unknown attributes are
 * ignored (ONNX allows extra ones in newer opsets), wrong kinds and values
 * are errors naming the attribute. */
struct ts_op_desc {
    const char *name; /* ONNX op_type */
    size_t attr_size; /* size of the typed attribute struct (plain data) */
    int min_inputs, max_inputs;   /* max_inputs -1: variadic */
    int min_outputs, max_outputs; /* max_outputs -1: variadic */
    unsigned flags;
    uint32_t linear_inputs; /* bit i: output is linear in input i (PET's multi-linear test) */
    /* Canonical tensor-algebra expression at default attributes, for the
     * reader (EinNet), or NULL.  The optimizer builds the expression of a
     * node from its attributes and shapes in src/einnet/translate.c
     * (stride, dilation, groups, padding included). */
    const char *expr;
    /* The ai.onnx opsets whose version of this operator tsopt implements:
     * opset_min (>= 1: where its current form begins, e.g. 7 for arithmetic,
     * whose older versions had the legacy 'broadcast' attribute) to
     * opset_max (0: every later opset too).  `tsopt ops` lists them. */
    int opset_min, opset_max;

    /* Fills the zeroed struct `attrs` from generic attributes (defaults for
     * those absent).  NULL: the op has no attributes. */
    ts_status (*parse)(void *attrs, const ts_attr *a, int na, int opset, ts_error *err);
    /* Writes the attributes back in ONNX form; returns how many (<= max).
     * Strings/arrays point into `attrs` or static storage.  NULL: none. */
    int (*emit)(const void *attrs, ts_attr *out, int max);
    ts_status (*infer)(ts_infer_ctx *c);
    ts_status (*kernel)(ts_kernel_ctx *k);
    /* Multiply-adds counted as 2 flops. NULL: one flop per output element. */
    double (*flops)(const ts_node *n, const ts_graph *g);
    /* For attribute structs holding references (control-flow bodies,
     * ops/control_flow.h): called after a node's attrs are copied byte for
     * byte (graph copies) and before they are freed.  NULL: plain data. */
    void (*attrs_retain)(void *attrs);
    void (*attrs_release)(void *attrs);
};

/* ----------------------------------------------------------- registry */

const ts_op_desc *ts_op_find(const char *name);
/* The i-th registered descriptor, NULL past the last. */
const ts_op_desc *ts_op_at(int i);

/* ------------------------------------------------- helpers for op files */

/* Error for node in context c: "node 'NAME' (OP): <message>". */
ts_status ts_infer_fail(ts_infer_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ts_status ts_kernel_fail(ts_kernel_ctx *k, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ts_status ts_attr_fail(ts_error *err, const ts_attr *a, const char *what);

/* Attribute lookup: NULL when absent. */
const ts_attr *ts_attr_find(const ts_attr *a, int na, const char *name);
/* Typed readers: absent -> default; wrong kind -> error. */
ts_status ts_attr_get_int(const ts_attr *a, int na, const char *name, int64_t def, int64_t *out,
                          ts_error *err);
ts_status ts_attr_get_float(const ts_attr *a, int na, const char *name, double def, double *out,
                            ts_error *err);
/* Copies up to max ints; *n = -1 when absent. */
ts_status ts_attr_get_ints(const ts_attr *a, int na, const char *name, int64_t *out, int max, int *n,
                           ts_error *err);
/* Copies into out (size n, NUL-terminated); def when absent. */
ts_status ts_attr_get_string(const ts_attr *a, int na, const char *name, const char *def, char *out,
                             size_t n, ts_error *err);

/* Reads the constant integer values of input i (int64/int32) at inference
 * time: up to max; fails (naming the input) when it is not constant.
 * *n receives the element count. */
ts_status ts_infer_const_ints(ts_infer_ctx *c, int i, int64_t *out, int max, int *n);
/* Same for float constants (Resize scales, Clip bounds). */
ts_status ts_infer_const_floats(ts_infer_ctx *c, int i, double *out, int max, int *n);
/* The constant tensor of input i, for operators whose output shape
 * depends on input values (NonZero, NonMaxSuppression...); NULL with the
 * error set (the same "must be a constant" as above, which a session
 * answers by loading the model at the run's values) when it is not. */
const ts_tensor *ts_infer_const_tensor(ts_infer_ctx *c, int i);

/* uint64 tensors are computed through int64 (src/ops/elementwise.h): a
 * value of 2^63 or more would compare, divide and reduce wrongly.  Fails
 * (naming the node) when an input of node n holds one, unless n only moves
 * data or converts it bit-exactly (Cast, CastLike, BitShift). */
ts_status ts_kernel_u64_check(const ts_node *n, int nin, const ts_tensor *const *in, ts_error *err);

/* The dtype of an ONNX TensorProto.DataType code (Cast's `to`, EyeLike's
 * `dtype`); TS_UNDEFINED for types tsopt does not handle. */
ts_dtype ts_dtype_from_onnx(int64_t code);

/* Normalizes a possibly negative axis against rank; false if out of range. */
bool ts_axis_norm(int64_t axis, int rank, int *out);

#endif
