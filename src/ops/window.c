/* Window geometry (see window.h).  Output sizes follow the ONNX operator
 * specification and ONNX Runtime where the specification is loose:
 *   explicit pads: out = floor((in + pb + pe - ((k-1)*d+1)) / s) + 1
 *                  (ceil with ceil_mode; a last window that would start in
 *                  the end padding is dropped, as in ORT and PyTorch)
 *   SAME_*:        out = ceil(in / s), total padding split with the odd
 *                  pixel at the end (UPPER) or at the beginning (LOWER)
 *   VALID:         no padding. */
#include <stdio.h>
#include <string.h>
#include "ops/window.h"

static const char *const pad_names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

static ts_status get_list(const ts_attr *a, int na, const char *name, int64_t *out, int max, int32_t *n, int64_t lo,
                          ts_error *err)
{
    int cnt;
    ts_status st = ts_attr_get_ints(a, na, name, out, max, &cnt, err);
    if (st) return st;
    for (int i = 0; i < cnt; i++)
        if (out[i] < lo)
            return ts_error_set(err, TS_ERR_INVALID, "attribute '%s': value %lld is below %lld", name,
                                (long long)out[i], (long long)lo);
    *n = cnt;
    return TS_OK;
}

ts_status ts_window_parse(ts_window *w, const ts_attr *a, int na, bool ceil, ts_error *err)
{
    ts_status st;
    char pad[32];
    if ((st = get_list(a, na, "kernel_shape", w->kernel, TS_WIN_MAX, &w->nkernel, 1, err)) ||
        (st = get_list(a, na, "strides", w->strides, TS_WIN_MAX, &w->nstrides, 1, err)) ||
        (st = get_list(a, na, "pads", w->pads, 2 * TS_WIN_MAX, &w->npads, 0, err)) ||
        (st = get_list(a, na, "dilations", w->dilations, TS_WIN_MAX, &w->ndilations, 1, err)) ||
        (st = ts_attr_get_string(a, na, "auto_pad", "NOTSET", pad, sizeof pad, err)))
        return st;
    w->auto_pad = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(pad, pad_names[i])) w->auto_pad = i;
    if (!*pad) w->auto_pad = TS_PAD_NOTSET; /* some exporters write "" */
    if (w->auto_pad < 0)
        return ts_error_set(err, TS_ERR_INVALID,
                            "attribute 'auto_pad': '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", pad);
    if (w->npads > 0 && w->npads % 2)
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'pads': %d values, expected a begin and an end per axis",
                            w->npads);
    if (ceil) {
        int64_t cm;
        if ((st = ts_attr_get_int(a, na, "ceil_mode", 0, &cm, err))) return st;
        if (cm != 0 && cm != 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'ceil_mode': expected 0 or 1");
        w->ceil_mode = (int32_t)cm;
    }
    return TS_OK;
}

int ts_window_emit(const ts_window *w, ts_attr *out, int max)
{
    int n = 0;
#define PUT(X)                                                                                                     \
    do {                                                                                                           \
        if (n >= max) return -1;                                                                                   \
        out[n++] = (X);                                                                                            \
    } while (0)
    if (w->nkernel >= 0) PUT(ts_attr_ints("kernel_shape", w->kernel, w->nkernel));
    if (w->nstrides >= 0) PUT(ts_attr_ints("strides", w->strides, w->nstrides));
    if (w->npads >= 0) PUT(ts_attr_ints("pads", w->pads, w->npads));
    if (w->ndilations >= 0) PUT(ts_attr_ints("dilations", w->dilations, w->ndilations));
    if (w->auto_pad != TS_PAD_NOTSET) PUT(ts_attr_string("auto_pad", pad_names[w->auto_pad]));
    if (w->ceil_mode) PUT(ts_attr_int("ceil_mode", w->ceil_mode));
#undef PUT
    return n;
}

bool ts_window_check(const ts_window *w, int nsp, const int64_t *kernel, char *why, size_t n)
{
    if (nsp < 1 || nsp > TS_WIN_MAX) {
        snprintf(why, n, "expected 1 to %d spatial dimensions, got %d", TS_WIN_MAX, nsp);
        return false;
    }
    if (w->nkernel >= 0 && w->nkernel != nsp) {
        snprintf(why, n, "kernel_shape has %d values, expected %d (one per spatial dimension)", w->nkernel, nsp);
        return false;
    }
    if (w->nkernel >= 0 && kernel)
        for (int i = 0; i < nsp; i++)
            if (w->kernel[i] != kernel[i]) {
                snprintf(why, n, "kernel_shape[%d] = %lld but the weight's spatial dimension is %lld", i,
                         (long long)w->kernel[i], (long long)kernel[i]);
                return false;
            }
    if (!kernel && w->nkernel < 0) {
        snprintf(why, n, "attribute kernel_shape is required");
        return false;
    }
    if (w->nstrides >= 0 && w->nstrides != nsp) {
        snprintf(why, n, "strides has %d values, expected %d", w->nstrides, nsp);
        return false;
    }
    if (w->ndilations >= 0 && w->ndilations != nsp) {
        snprintf(why, n, "dilations has %d values, expected %d", w->ndilations, nsp);
        return false;
    }
    if (w->npads >= 0 && w->npads != 2 * nsp) {
        snprintf(why, n, "pads has %d values, expected %d (begin and end per spatial dimension)", w->npads, 2 * nsp);
        return false;
    }
    return true;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool ts_window_resolve(const ts_window *w, int nsp, const int64_t *in, const int64_t *kernel, ts_window_geom *g,
                       char *why, size_t n)
{
    if (!ts_window_check(w, nsp, kernel, why, n)) return false;
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        g->in[i] = in[i];
        g->kernel[i] = kernel ? kernel[i] : w->kernel[i];
        g->stride[i] = w->nstrides >= 0 ? w->strides[i] : 1;
        g->dil[i] = w->ndilations >= 0 ? w->dilations[i] : 1;
        int64_t span = (g->kernel[i] - 1) * g->dil[i] + 1, s = g->stride[i];
        if (w->auto_pad == TS_PAD_SAME_UPPER || w->auto_pad == TS_PAD_SAME_LOWER) {
            g->out[i] = ceil_div(in[i], s);
            int64_t total = (g->out[i] - 1) * s + span - in[i];
            if (total < 0) total = 0;
            g->pad_begin[i] = w->auto_pad == TS_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pad_end[i] = total - g->pad_begin[i];
            continue;
        }
        if (w->auto_pad == TS_PAD_NOTSET && w->npads >= 0) {
            g->pad_begin[i] = w->pads[i];
            g->pad_end[i] = w->pads[nsp + i];
        }
        int64_t room = in[i] + g->pad_begin[i] + g->pad_end[i] - span;
        if (room < 0) {
            snprintf(why, n,
                     "window of %lld (kernel %lld, dilation %lld) is larger than spatial dimension %d of %lld "
                     "plus padding %lld+%lld",
                     (long long)span, (long long)g->kernel[i], (long long)g->dil[i], i, (long long)in[i],
                     (long long)g->pad_begin[i], (long long)g->pad_end[i]);
            return false;
        }
        if (w->ceil_mode) {
            g->out[i] = ceil_div(room, s) + 1;
            if ((g->out[i] - 1) * s >= in[i] + g->pad_begin[i]) g->out[i]--;
        } else
            g->out[i] = floor_div(room, s) + 1;
    }
    return true;
}

int64_t ts_window_kernel_size(const ts_window_geom *g)
{
    int64_t k = 1;
    for (int i = 0; i < g->nsp; i++) k *= g->kernel[i];
    return k;
}
