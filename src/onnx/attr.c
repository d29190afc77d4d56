/* AttributeProto -> ts_attr.  Numeric lists are used in place (protobuf-c
 * stores them as int64_t / float arrays, the types ts_attr wants); strings
 * need a terminating NUL and tensors a decode, so those are owned by a
 * store that lives until the node has been added. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onnx/proto.h"

static const char *attr_type_name(int t)
{
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "GRAPH";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "STRINGS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
    }
}

/* IR version 1 files have no `type`: guess it from the field that is set. */
static int attr_type(const Onnx__AttributeProto *a)
{
    if (a->has_type) return a->type;
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static bool store_push(void ***arr, int *n, void *p)
{
    void **q = realloc(*arr, sizeof(void *) * (size_t)(*n + 1));
    if (!q) return false;
    q[(*n)++] = p;
    *arr = q;
    return true;
}

void ts_onnx_attr_store_free(ts_onnx_attr_store *s)
{
    for (int i = 0; i < s->nstrs; i++) free(s->strs[i]);
    for (int i = 0; i < s->ntensors; i++) ts_tensor_unref(s->tensors[i]);
    free(s->strs);
    free(s->tensors);
    memset(s, 0, sizeof *s);
}

ts_status ts_onnx_attrs_decode(Onnx__AttributeProto *const *attrs, size_t n, const char *base_dir, const char *node,
                               const char *op, ts_attr *out, ts_onnx_attr_store *store, ts_error *err)
{
    for (size_t k = 0; k < n; k++) {
        const Onnx__AttributeProto *a = attrs[k];
        const char *name = a->name ? a->name : "";
        ts_attr *d = &out[k];
        memset(d, 0, sizeof *d);
        d->name = name;
        if (!*name) return ts_error_set(err, TS_ERR_PARSE, "node '%s' (%s): attribute %zu has no name", node, op, k);
        if (a->ref_attr_name && *a->ref_attr_name)
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "node '%s' (%s): attribute '%s' refers to a function attribute (not supported)", node,
                                op, name);
        int type = attr_type(a);
        switch (type) {
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
            d->kind = TS_ATTR_INT;
            d->i = a->i;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
            d->kind = TS_ATTR_FLOAT;
            d->f = a->f;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
            bool ints = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            size_t cnt = ints ? a->n_ints : a->n_floats;
            if (cnt > INT_MAX)
                return ts_error_set(err, TS_ERR_PARSE, "node '%s' (%s): attribute '%s' has too many values", node, op,
                                    name);
            d->kind = ints ? TS_ATTR_INTS : TS_ATTR_FLOATS;
            d->ints = ints ? a->ints : NULL;
            d->floats = ints ? NULL : a->floats;
            d->n = (int)cnt;
            break;
        }
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
            /* protobuf bytes are not NUL-terminated; an embedded NUL would
             * silently truncate, so it is rejected */
            if (a->s.len && memchr(a->s.data, 0, a->s.len))
                return ts_error_set(err, TS_ERR_PARSE, "node '%s' (%s): attribute '%s' holds a NUL byte", node, op,
                                    name);
            char *s = malloc(a->s.len + 1);
            if (!s || !store_push((void ***)&store->strs, &store->nstrs, s)) {
                free(s);
                return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            }
            if (a->s.len) memcpy(s, a->s.data, a->s.len);
            s[a->s.len] = 0;
            d->kind = TS_ATTR_STRING;
            d->s = s;
            break;
        }
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
            if (!a->t)
                return ts_error_set(err, TS_ERR_PARSE, "node '%s' (%s): attribute '%s' has no tensor", node, op,
                                    name);
            char what[512];
            snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", node, op, name);
            ts_tensor *t;
            if (ts_onnx_tensor_decode(a->t, base_dir, what, &t, err)) return err->code;
            if (!store_push((void ***)&store->tensors, &store->ntensors, t)) {
                ts_tensor_unref(t);
                return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            }
            d->kind = TS_ATTR_TENSOR;
            d->t = t;
            break;
        }
        default:
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): attribute '%s' of type %s is not supported",
                                node, op, name, attr_type_name(type));
        }
    }
    return TS_OK;
}
