/* ONNX sequences at import (sequence.c).  tsopt's graphs carry tensors
 * only, so the sequence operators are resolved while the graph is built:
 * a sequence is the list of the tensor values it holds, known because its
 * length and every position are constants; SequenceAt, SequenceLength,
 * ConcatFromSequence and SplitToSequence turn into tensor nodes (Identity,
 * a constant, Concat, Slice, Reshape).  A position or split that the run
 * gives fails with "must be a constant", which a session answers by
 * loading the model at the run's values (docs/conformance.md). */
#ifndef TS_ONNX_SEQUENCE_H
#define TS_ONNX_SEQUENCE_H

#include "onnx/proto.h"

/* The sequences of one graph being imported, by name (NULL: none yet). */
typedef struct ts_seq_set ts_seq_set;

/* Whether n is one of the sequence operators this file resolves. */
bool ts_onnx_seq_is_op(const Onnx__NodeProto *n);
/* Whether name is a sequence of set. */
bool ts_onnx_seq_has(const ts_seq_set *set, const char *name);

/* The value id of a tensor name (the importer's resolution, captures of
 * enclosing graphs included); false when there is none. */
typedef bool (*ts_seq_resolve)(void *ctx, const char *name, int *v);

/* Imports sequence node n (named `name` in messages) into g: a sequence
 * output is recorded in *set (created on first use); a tensor output is
 * added to g and its value id returned in *out (-1 for none). */
ts_status ts_onnx_seq_node(ts_graph *g, ts_seq_set **set, const Onnx__NodeProto *n, const char *name,
                           ts_seq_resolve resolve, void *ctx, int *out, ts_error *err);

void ts_onnx_seq_set_free(ts_seq_set *set);

#endif
