/* The model record shared by a graph and its copies (meta.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/meta.h"
#include "ops/opaque.h"

ts_model_meta *ts_model_meta_new(void)
{
    ts_model_meta *m = calloc(1, sizeof *m);
    if (m) m->refcount = 1;
    return m;
}

ts_model_meta *ts_model_meta_ref(ts_model_meta *m)
{
    if (m) m->refcount++;
    return m;
}

static void free_kvs(ts_meta_kv *kv, int n)
{
    for (int i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

static void free_ios(ts_meta_io *io, int n)
{
    for (int i = 0; i < n; i++) {
        free(io[i].name);
        for (int d = 0; d < TS_MAX_RANK; d++) free(io[i].dims[d].param);
    }
    free(io);
}

void ts_model_meta_unref(ts_model_meta *m)
{
    if (!m || --m->refcount > 0) return;
    free(m->producer_name);
    free(m->producer_version);
    free(m->domain);
    free(m->doc_string);
    free_kvs(m->props, m->nprops);
    for (int i = 0; i < m->nopsets; i++) free(m->opsets[i].domain);
    free(m->opsets);
    free(m->graph_doc);
    free_kvs(m->node_docs, m->nnode_docs);
    free_ios(m->inputs, m->ninputs);
    free_ios(m->outputs, m->noutputs);
    for (int i = 0; i < m->nsyms; i++) free(m->syms[i].name);
    free(m->syms);
    for (int i = 0; i < m->nsized; i++) {
        ts_tensor_unref(m->sized[i].bound);
        ts_tensor_unref(m->sized[i].probe);
    }
    free(m->sized);
    for (int i = 0; i < m->nliterals; i++) ts_tensor_unref(m->literals[i]);
    free(m->literals);
    ts_opaque_table_free(m->opaque);
    for (int i = 0; i < m->nexternal; i++) free(m->external[i]);
    free(m->external);
    free(m);
}

const char *ts_model_meta_node_doc(const ts_model_meta *m, const char *name)
{
    if (!m || !name) return NULL;
    int lo = 0, hi = m->nnode_docs - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(m->node_docs[mid].key, name);
        if (!c) return m->node_docs[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const ts_tensor *ts_model_meta_sized_probe(const ts_model_meta *m, const ts_tensor *t)
{
    if (!m || !t) return NULL;
    for (int i = 0; i < m->nsized; i++)
        if (m->sized[i].bound == t) return m->sized[i].probe;
    return NULL;
}

const char *ts_model_meta_syms_str(const ts_model_meta *m, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; m && i < m->nsyms && at < n; i++) {
        const ts_meta_sym *s = &m->syms[i];
        const char *sep = i ? ", " : "";
        if (s->name)
            at += (size_t)snprintf(buf + at, n - at, "%s'%s'", sep, s->name);
        else if (s->input >= 0 && s->input < m->ninputs)
            at += (size_t)snprintf(buf + at, n - at, "%sinput '%s' axis %d", sep, m->inputs[s->input].name, s->axis);
    }
    return buf;
}

bool ts_model_meta_is_literal(const ts_model_meta *m, const ts_tensor *t)
{
    for (int i = 0; m && t && i < m->nliterals; i++)
        if (m->literals[i] == t) return true;
    return false;
}
