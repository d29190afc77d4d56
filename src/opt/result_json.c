/* The JSON form of an optimize result: the contract of `tsopt optimize
 * --json` (DESIGN.md; fields in docs/optimize.md), produced here so the
 * command and the Python package print the same object. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "tsopt.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->failed = true;
        return;
    }
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = 2 * (b->n + (size_t)k + 1);
        char *t = realloc(b->s, cap);
        if (!t) {
            b->failed = true;
            return;
        }
        b->s = t;
        b->cap = cap;
        va_start(ap, fmt);
        vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
    }
    b->n += (size_t)k;
}

static void str(sbuf *b, const char *s)
{
    put(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(b, "\\%c", c);
        else if (c == '\n') put(b, "\\n");
        else if (c < 0x20) put(b, "\\u%04x", c);
        else put(b, "%c", c);
    }
    put(b, "\"");
}

char *ts_optimize_result_json(const ts_optimize_result *r, const char *model, const char *output)
{
    sbuf b = {.s = malloc(1024), .cap = 1024};
    if (!b.s) return NULL;
    b.s[0] = 0;
    put(&b, "{\"model\": ");
    str(&b, model);
    put(&b, ", \"output\": ");
    str(&b, output);
    put(&b, ", \"written\": \"%s\", \"reason\": ", r->optimized ? "optimized" : "original");
    str(&b, r->reason);
    put(&b, ", \"cost_before_ms\": %.6g, \"cost_after_ms\": %.6g", r->cost_before_ms, r->cost_after_ms);
    put(&b, ", \"latency_before_ms\": %.6g, \"latency_after_ms\": %.6g", r->latency_before_ms, r->latency_after_ms);
    /* whose latencies they are: tsopt's runtime, or ONNX Runtime (and which) */
    put(&b, ", \"target\": ");
    str(&b, r->target[0] ? r->target : "tsopt");
    if (r->engine_version[0]) {
        put(&b, ", \"ort_version\": ");
        str(&b, r->engine_version);
    }
    if (r->compared[0]) { /* ort: what was timed as the original; a kept one written as its file's bytes */
        put(&b, ", \"compared\": ");
        str(&b, r->compared);
        put(&b, ", \"source_copied\": %s", r->copy_source ? "true" : "false");
    }
    if (r->whole_candidates > 0)
        put(&b, ", \"whole_candidates\": %d, \"whole_before_ms\": %.6g, \"whole_after_ms\": %.6g",
            r->whole_candidates, r->whole_before_ms, r->whole_after_ms);
    put(&b, ", \"fastest_before_ms\": %.6g, \"fastest_after_ms\": %.6g", r->fastest_before_ms, r->fastest_after_ms);
    put(&b, ", \"machine_busy\": %s, \"applied\": {", r->machine_busy ? "true" : "false");
    for (int k = 0; k < r->nsources; k++) {
        put(&b, "%s", k ? ", " : "");
        str(&b, r->applied[k].name);
        put(&b, ": %d", r->applied[k].count);
    }
    put(&b, "}, \"rewrites\": {");
    for (int i = 0; i < r->nrewrites; i++) {
        put(&b, "%s", i ? ", " : "");
        str(&b, r->rewrites[i].name);
        put(&b, ": %d", r->rewrites[i].count);
    }
    put(&b, "}, \"search_s\": %.3f, \"total_s\": %.3f, \"stop\": ", r->search_s, r->total_s);
    str(&b, r->stop);
    put(&b, ", \"explored\": %d, \"generated\": %d, \"nodes_before\": %d, \"nodes_after\": %d", r->explored,
        r->generated, r->nodes_before, r->nodes_after);
    put(&b, ", \"weight_bytes_before\": %lld, \"weight_bytes_after\": %lld", (long long)r->weight_bytes_before,
        (long long)r->weight_bytes_after);
    put(&b, ", \"peak_rss_mb\": %.1f, \"check\": {\"max_scaled_error\": %.6g, \"rtol\": 1e-3, \"atol\": 1e-4",
        r->peak_rss_mb, r->max_scaled_error);
    put(&b, ", \"regions\": %d, \"whole_model\": %s, \"inputs\": \"%s\"}}", r->check_regions,
        r->check_whole ? "true" : "false", r->check_user_inputs ? "user" : "random");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
