/* Unit tests that build an ONNX model by hand: g as a model (IR 8, the
 * default domain at opset 13), packed into a malloc'd buffer of *n bytes. */
#ifndef TS_TEST_ONNX_PACK_H
#define TS_TEST_ONNX_PACK_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include "onnx.pb-c.h"

/* producer: NULL for none (a field after the graph, when a test needs one) */
static inline uint8_t *test_pack_model(Onnx__GraphProto *g, const char *producer, size_t *n)
{
    Onnx__OperatorSetIdProto op;
    onnx__operator_set_id_proto__init(&op);
    op.domain = "", op.has_version = 1, op.version = 13;
    Onnx__OperatorSetIdProto *ops[1] = {&op};
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1, m.ir_version = 8, m.n_opset_import = 1, m.opset_import = ops, m.graph = g;
    if (producer) m.producer_name = (char *)producer;
    *n = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*n);
    cr_assert(buf);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

#endif
