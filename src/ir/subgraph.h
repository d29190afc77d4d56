/* Control-flow bodies (If's branches, Loop's and Scan's body) as graphs of
 * their own (docs/control-flow.md).
 *
 * A body is an ordinary ts_graph whose inputs are first its formal inputs
 * (the ONNX body's inputs: none for If; iteration, condition and carried
 * values for Loop; states and scan slices for Scan), then the values of
 * the enclosing graph it reads ("captures": ONNX's outer-scope
 * references).  The control-flow node lists every capture as an extra
 * input after its explicit ONNX inputs, so that the enclosing graph sees
 * the dependency (order, liveness, memory plan, optimizer) like any other.
 * A captured constant is a constant in the body too (so shape arithmetic
 * folds there); its node input keeps it alive and named in the outer graph.
 *
 * Node attribute structs are plain data copied with memcpy, so a body is
 * reference counted and immutable once made: graph copies share it, the
 * optimizer makes a new one (ts_body_replace_graph). */
#ifndef TS_IR_SUBGRAPH_H
#define TS_IR_SUBGRAPH_H

#include "tsopt.h"

typedef struct ts_body {
    int refcount;
    ts_graph *g;    /* owned */
    int nformal;    /* g->inputs[0..nformal-1] are the formal inputs */
    int ncap;       /* captured outer values */
    char **cap_name; /* name of capture j inside the body (an input or a constant of g) */
    int *cap_slot;   /* the control-flow node's input index holding capture j */
    /* What the model declares for the node's outputs (from the enclosing
     * graph's outputs and value_info): used where the body alone does not
     * give a static shape (If branches of different shapes, a Loop whose
     * trip count depends on data).  decl_shape[k].rank -1: nothing static. */
    int ndecl;
    ts_dtype *decl_dtype;
    ts_shape *decl_shape;
} ts_body;

/* A new body owning g (on failure g is freed): refcount 1, no captures. */
ts_body *ts_body_new(ts_graph *g, int nformal, ts_error *err);
ts_body *ts_body_ref(ts_body *b);
void ts_body_unref(ts_body *b);
/* Records capture `name` (already a value of b->g) read from node input slot. */
ts_status ts_body_add_capture(ts_body *b, const char *name, int slot, ts_error *err);
/* Copies the declared types of the node's nout outputs. */
ts_status ts_body_set_declared(ts_body *b, int nout, const ts_dtype *dt, const ts_shape *sh, ts_error *err);
/* A new body with the same formal inputs, captures and declarations over
 * graph g (taken; freed on failure): the optimizer's rewritten body.  Its
 * inputs must be b's (a capture g no longer reads may be gone). */
ts_body *ts_body_with_graph(const ts_body *b, ts_graph *g, ts_error *err);
/* The node input slot feeding body input i (i >= nformal: a capture), or -1. */
int ts_body_input_slot(const ts_body *b, int i);
/* Index of capture j's name among b's captures, -1 when name is none. */
int ts_body_capture_index(const ts_body *b, const char *name);
/* b's output types when its inputs (every one: formal, then captures) have
 * the shapes in_sh instead of those it was built for: every node re-inferred
 * on a copy, nested bodies too (export's check of a model at other sizes of
 * a symbolic dimension).  Constants folded at import stay as they are; the
 * importer makes sure none of them follows the sizes (probe_diff). */
ts_status ts_body_reinfer(const ts_body *b, const ts_shape *in_sh, ts_dtype *odt, ts_shape *osh, ts_error *err);
/* Total nodes in b and the bodies nested in it. */
int ts_body_count_nodes(const ts_body *b);

#endif
