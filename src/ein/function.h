/* An eOperator as an ONNX model-local function (docs/einnet.md, "Written
 * models"): the exporter writes a tsopt.EinNetOp node as a call of a
 * function in the domain ai.tsopt whose body is the expression's
 * instantiation in standard operators, so ONNX Runtime runs the written
 * model; tsopt's importer recognizes the call by domain and name and
 * reads the node back as the eOperator (its generated kernel runs). */
#ifndef TS_EIN_FUNCTION_H
#define TS_EIN_FUNCTION_H

#include "ein/expr.h"

#define TS_EIN_DOMAIN "ai.tsopt"
#define TS_EIN_FUNCTION_PREFIX "EinNetOp_"

/* The function's name for expression text `text` over dtype dt:
 * "EinNetOp_<16 hex digits>" (FNV-1a of both), so one expression written
 * twice is one function. */
void ts_ein_function_name(const char *text, ts_dtype dt, char *buf, size_t n);

/* Whether a node of domain `domain` and type `op_type` is a call of an
 * eOperator function (what the importer reads back as tsopt.EinNetOp). */
bool ts_ein_function_is_call(const char *domain, const char *op_type);

/* The function's body as a graph: inputs x0..x{k-1} of e's input shapes
 * (dtype dt), output y, the nodes e's instantiation (instantiate.c: MatMul,
 * Pad, Slice, Add, Transpose, Reshape, element-wise), constants only the
 * index tensors those take.  TS_ERR_UNSUPPORTED when a scope has no
 * standard-operator form: the eOperator cannot be written. */
ts_status ts_ein_function_body(const ts_ein *e, ts_dtype dt, int opset, ts_graph **out, ts_error *err);

#endif
