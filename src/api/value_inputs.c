/* Graph inputs whose values carry shapes (value_inputs.h): which inputs
 * they are, and the model loaded with their values as constants. */
#include <stdlib.h>
#include <string.h>
#include "api/loop_unroll.h"
#include "api/value_inputs.h"
#include "ops/op.h"

/* The one message ts_infer_const_ints/floats give for a shape-carrying
 * input that is not constant (src/ops/attr.c). */
#define NOT_CONSTANT "') must be a constant"

bool ts_vin_needs_value(const ts_error *err, char *name, size_t n)
{
    const char *end = strstr(err->msg, NOT_CONSTANT), *start = NULL;
    if (!end || !n) return false;
    for (const char *p = err->msg; p < end; p++)
        if (p[0] == '(' && p[1] == '\'') start = p + 2;
    if (!start || (size_t)(end - start) >= n) return false;
    memcpy(name, start, (size_t)(end - start));
    name[end - start] = 0;
    return true;
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && !strcmp(gp->initializer[i]->name, name)) return true;
    return false;
}

static void io_info(const Onnx__ValueInfoProto *vi, ts_io_info *io, bool *any_shape)
{
    io->name = vi->name;
    const Onnx__TypeProto__Tensor *tt =
        vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? vi->type->tensor_type : NULL;
    if (!tt || !tt->has_elem_type || !ts_onnx_dtype_from(tt->elem_type, &io->dtype)) io->dtype = TS_UNDEFINED;
    const Onnx__TensorShapeProto *sp = tt ? tt->shape : NULL;
    *any_shape = !sp || sp->n_dim > TS_MAX_RANK;
    if (*any_shape) return;
    io->shape.rank = (int)sp->n_dim;
    for (int d = 0; d < io->shape.rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
        bool fixed = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0;
        io->shape.dims[d] = fixed ? dim->dim_value : 1;
        io->dim_params[d] = fixed ? NULL
                            : dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param
                                ? dim->dim_param
                                : "";
    }
}

ts_status ts_vin_io_infos(const Onnx__ModelProto *mp, ts_io_info **ins, int *nin, bool **any_shape,
                          ts_io_info **outs, int *nout, ts_error *err)
{
    const Onnx__GraphProto *gp = mp->graph;
    *ins = calloc(gp->n_input + 1, sizeof **ins);
    *outs = calloc(gp->n_output + 1, sizeof **outs);
    *any_shape = calloc(gp->n_input + 1, sizeof **any_shape);
    bool scratch;
    if (!*ins || !*outs || !*any_shape) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    *nin = *nout = 0;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || is_initializer(gp, vi->name)) continue;
        io_info(vi, &(*ins)[*nin], &(*any_shape)[*nin]);
        if ((*ins)[*nin].dtype == TS_UNDEFINED)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "input '%s': element type is not supported", vi->name);
        (*nin)++;
    }
    for (size_t i = 0; i < gp->n_output; i++) io_info(gp->output[i], &(*outs)[(*nout)++], &scratch);
    return TS_OK;
}

/* Whether a graph attribute of n (at any depth) computes or initializes name. */
static bool body_defines(const Onnx__NodeProto *n, const char *name)
{
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__AttributeProto *at = n->attribute[a];
        for (size_t q = 0; q < at->n_graphs + 1; q++) {
            const Onnx__GraphProto *g = q < at->n_graphs ? at->graphs[q] : at->g;
            if (!g) continue;
            if (is_initializer(g, name)) return true;
            for (size_t k = 0; k < g->n_node; k++) {
                for (size_t o = 0; o < g->node[k]->n_output; o++)
                    if (g->node[k]->output[o] && !strcmp(g->node[k]->output[o], name)) return true;
                if (body_defines(g->node[k], name)) return true;
            }
        }
    }
    return false;
}

int ts_vin_mark_sources(const Onnx__ModelProto *mp, const char *name, bool *mark)
{
    const Onnx__GraphProto *gp = mp->graph;
    size_t nn = gp->n_node, cap = 1;
    for (size_t k = 0; k < nn; k++) cap += gp->node[k]->n_input; /* each node's inputs are queued once */
    bool *seen = calloc(nn + 1, sizeof *seen);
    const char **todo = malloc(sizeof *todo * cap);
    if (!seen || !todo) {
        free(seen);
        free(todo);
        return 0;
    }
    size_t ntodo = 0;
    int added = 0;
    todo[ntodo++] = name;
    while (ntodo) {
        const char *v = todo[--ntodo];
        int slot = 0;
        for (size_t i = 0; i < gp->n_input; i++) {
            const char *in = gp->input[i]->name;
            if (!in || is_initializer(gp, in)) continue;
            if (!strcmp(in, v) && !mark[slot]) {
                mark[slot] = true;
                added++;
            }
            slot++;
        }
        for (size_t k = 0; k < nn; k++) {
            const Onnx__NodeProto *nd = gp->node[k];
            bool produces = false;
            for (size_t o = 0; o < nd->n_output && !produces; o++) produces = nd->output[o] && !strcmp(nd->output[o], v);
            /* a value inside a body: a Loop's shapes there follow its trip
             * count and condition (which unroll it, loop_unroll.h); other
             * bodies' follow any input of the node */
            bool loop = nd->op_type && !strcmp(nd->op_type, "Loop");
            if (!produces && body_defines(nd, v)) {
                if (seen[k]) continue;
                seen[k] = true;
                for (size_t j = 0; j < (loop && nd->n_input > 2 ? 2 : nd->n_input); j++)
                    if (nd->input[j] && *nd->input[j] && ntodo < cap) todo[ntodo++] = nd->input[j];
                continue;
            }
            if (!produces || seen[k]) continue;
            seen[k] = true;
            /* Shape and Size read only their input's shape, which the
             * binds give: the data behind them is not needed */
            const ts_op_desc *op = nd->op_type ? ts_op_find(nd->op_type) : NULL;
            if (op && (op->flags & TS_OP_SHAPE_ONLY)) continue;
            for (size_t j = 0; j < nd->n_input; j++)
                if (nd->input[j] && *nd->input[j] && ntodo < cap) todo[ntodo++] = nd->input[j];
        }
    }
    free(seen);
    free(todo);
    return added;
}

ts_status ts_vin_load(const Onnx__ModelProto *mp, const char *base_dir, const ts_io_info *ins, int nin,
                      const bool *value_in, ts_tensor *const *inputs, ts_graph **out, int *slot, ts_error *err)
{
    *out = NULL;
    const Onnx__GraphProto *gp = mp->graph;
    int nvals = 0;
    for (int i = 0; i < nin; i++) nvals += value_in[i];
    Onnx__TensorProto *tps = calloc((size_t)nvals + 1, sizeof *tps);
    Onnx__TensorProto **inits = calloc(gp->n_initializer + (size_t)nvals + 1, sizeof *inits);
    ts_input_bind *binds = calloc((size_t)nin + 1, sizeof *binds);
    ts_status st = TS_OK;
    uint8_t *buf = NULL;
    ts_unroll_arena arena = {0};
    if (!tps || !inits || !binds) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* shallow copies: only the initializer list differs from the file's */
    Onnx__GraphProto g2 = *gp;
    Onnx__ModelProto m2 = *mp;
    m2.graph = &g2;
    g2.initializer = inits;
    for (size_t i = 0; i < gp->n_initializer; i++) inits[i] = gp->initializer[i];
    int nb = 0, k = 0;
    for (int i = 0; i < nin; i++) {
        if (!value_in[i]) {
            binds[nb++] = (ts_input_bind){ins[i].name, inputs[i]->shape};
            continue;
        }
        onnx__tensor_proto__init(&tps[k]);
        if ((st = ts_onnx_tensor_encode(&tps[k], inputs[i], ins[i].name, err))) goto done;
        inits[g2.n_initializer++] = &tps[k++];
    }
    int opset = 1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx")) opset = (int)mp->opset_import[i]->version;
    }
    /* a Loop whose body's shapes follow the iteration number is unrolled
     * once its trip count is a constant (loop_unroll.h), and loaded again */
    for (int tries = 0;; tries++) {
        size_t size = onnx__model_proto__get_packed_size(&m2);
        free(buf);
        if (!(buf = malloc(size ? size : 1))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        onnx__model_proto__pack(&m2, buf);
        if (!(st = ts_onnx_load_buffer(buf, size, base_dir, binds, nb, out, err))) break;
        char name[256];
        int r = tries < 16 && ts_vin_needs_value(err, name, sizeof name) ? ts_loop_unroll(&g2, name, opset, &arena) : 0;
        if (r < 0) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory unrolling a loop");
        if (r <= 0) goto done;
        memset(err, 0, sizeof *err);
    }
    for (int g = 0; g < (*out)->ninputs; g++) {
        const char *name = (*out)->values[(*out)->inputs[g]].name;
        slot[g] = -1;
        for (int i = 0; i < nin && slot[g] < 0; i++)
            if (!value_in[i] && !strcmp(ins[i].name, name)) slot[g] = i;
        if (slot[g] < 0) {
            st = ts_error_set(err, TS_ERR_INVALID, "graph input '%s' is not an input of the model", name);
            ts_graph_free(*out);
            *out = NULL;
            goto done;
        }
    }
done:
    ts_unroll_arena_free(&arena);
    free(buf);
    free(tps);
    free(inits);
    free(binds);
    return st;
}
