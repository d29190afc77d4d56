/* If, Loop and Scan (control_flow.c): their attribute struct, and the
 * iteration semantics shared by the reference interpreter (bodies run by
 * ts_graph_run_reference) and the fast runtime (bodies as nested plans,
 * src/exec/control_flow.c), which differ only in how a body runs. */
#ifndef TS_OPS_CONTROL_FLOW_H
#define TS_OPS_CONTROL_FLOW_H

#include "ir/subgraph.h"
#include "ops/op.h"

#define TS_CF_MAX_BODIES 2
#define TS_CF_MAX_SCAN 32 /* scan inputs and outputs of one Scan */

typedef struct ts_cf_attrs {
    ts_body *body[TS_CF_MAX_BODIES]; /* If: then, else; Loop, Scan: body (references held) */
    int32_t nbodies;
    /* Scan (opset 9+) */
    int32_t num_scan_inputs;
    int32_t nin_axes, nin_dirs, nout_axes, nout_dirs; /* -1: attribute absent */
    int64_t in_axes[TS_CF_MAX_SCAN], in_dirs[TS_CF_MAX_SCAN];
    int64_t out_axes[TS_CF_MAX_SCAN], out_dirs[TS_CF_MAX_SCAN];
    /* Scan of opset 8: a batch axis 0 on every state, scan input and
     * output (the scan axis is 1), sequence_lens as explicit input 0, and
     * `directions` (held in in_dirs) for the scan inputs only */
    int32_t batched;
} ts_cf_attrs;

extern const ts_op_desc ts_op_if, ts_op_loop, ts_op_scan;

/* Whether op is If, Loop or Scan. */
bool ts_op_is_control_flow(const ts_op_desc *op);
/* The bodies of node n (none unless control flow): count, written to out. */
int ts_cf_bodies(const ts_node *n, ts_body **out);
/* Number of node inputs that are the ONNX node's own (the rest are captures). */
int ts_cf_explicit_inputs(const ts_node *n);
/* The names ONNX gives the body attributes of op: "then_branch", ... */
const char *ts_cf_body_attr_name(const ts_op_desc *op, int k);

/* How one body runs: on in[0..g->ninputs-1] (formal inputs, then the
 * body's non-constant captures in its input order), writing its outputs
 * into out[0..g->noutputs-1] (allocated by the caller with the body
 * outputs' shapes in storage dtypes). */
typedef struct ts_cf_runner {
    ts_status (*run)(void *ctx, int body, ts_tensor *const *in, ts_tensor *const *out, ts_error *err);
    /* dtype a value of declared dtype dt is stored in */
    ts_dtype (*storage)(void *ctx, ts_dtype dt);
    void *ctx;
} ts_cf_runner;

/* Runs control-flow node n: in[] are its inputs (NULL when absent), out[]
 * its outputs at their bound shapes.  Errors name the node. */
ts_status ts_cf_execute(const ts_node *n, const ts_cf_runner *r, const ts_tensor *const *in, ts_tensor *const *out,
                        ts_error *err);

#endif
