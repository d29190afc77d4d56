/* Operator registry.  Each family file (list_*.c) exports a NULL-terminated
 * table of its descriptors; this file only chains the families. */
#include <pthread.h>
#include <string.h>
#include "ir/name_map.h"
#include "ops/op.h"

extern const ts_op_desc *const ts_ops_nn[];     /* conv, pooling, normalization, matmul */
extern const ts_op_desc *const ts_ops_math[];   /* element-wise, activations, reductions */
extern const ts_op_desc *const ts_ops_tensor[]; /* data movement, shapes, constants */

static const ts_op_desc *const *const families[] = {ts_ops_nn, ts_ops_math, ts_ops_tensor};

const ts_op_desc *ts_op_at(int i)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ts_op_desc *const *d = families[f]; *d; d++)
            if (i-- == 0) return *d;
    return NULL;
}

/* Every node built looks its operator up here, several times per node
 * while importing (a decoder's re-load per token: a walk of the families
 * with strcmp was 2.6% of its CPU): a name index, made once. */
static ts_name_map by_name;
static bool by_name_ok;
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static void index_ops(void)
{
    by_name_ok = true;
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (int i = 0; families[f][i] && by_name_ok; i++)
            if (!ts_name_map_find(&by_name, families[f][i]->name, NULL)) /* the first of a name wins */
                by_name_ok = ts_name_map_put(&by_name, families[f][i]->name, (int)(f << 16) | i);
}

const ts_op_desc *ts_op_find(const char *name)
{
    pthread_once(&by_name_once, index_ops);
    int k;
    if (by_name_ok) return ts_name_map_find(&by_name, name, &k) ? families[k >> 16][k & 0xffff] : NULL;
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) /* out of memory: searched */
        for (const ts_op_desc *const *d = families[f]; *d; d++)
            if (!strcmp((*d)->name, name)) return *d;
    return NULL;
}
