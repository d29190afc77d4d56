/* Every ai.onnx operator descriptor says which opsets it implements
 * (op.h: opset_min, opset_max; `tsopt ops` lists them), spot-checked
 * against the ONNX operator history. */
#include <criterion/criterion.h>
#include <string.h>
#include "ops/op.h"

Test(ops_opsets, every_descriptor_has_a_range)
{
    int n = 0;
    for (const ts_op_desc *d; (d = ts_op_at(n)); n++) {
        if (strchr(d->name, '.')) continue; /* tsopt-internal, not an ai.onnx operator */
        cr_expect_geq(d->opset_min, 1, "%s: set .opset_min in its descriptor (the first ai.onnx opset whose version "
                      "of the operator it implements)", d->name);
        cr_expect(d->opset_max == 0 || d->opset_max >= d->opset_min, "%s: opset_max %d < opset_min %d", d->name,
                  d->opset_max, d->opset_min);
    }
    cr_assert_gt(n, 90);
}

Test(ops_opsets, known_operators)
{
    static const struct {
        const char *name;
        int min;
    } known[] = {
        {"Conv", 1}, {"Relu", 1},    {"Add", 7},        /* before 7: the legacy 'broadcast' attribute */
        {"Mod", 10}, {"HardSwish", 14}, {"LayerNormalization", 17}, {"Reshape", 5}, /* shape as an input */
        {"Resize", 10}, {"Trilu", 14},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        const ts_op_desc *d = ts_op_find(known[i].name);
        cr_assert_not_null(d, "%s", known[i].name);
        cr_expect_eq(d->opset_min, known[i].min, "%s: %d", known[i].name, d->opset_min);
        cr_expect_eq(d->opset_max, 0, "%s", known[i].name);
    }
}
