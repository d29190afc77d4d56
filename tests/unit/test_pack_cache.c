/* ts_pack_cache (src/exec/pack_cache.c): plans of graphs sharing a constant
 * tensor (a session's model loaded at new sizes) pack it once; the plan
 * that reuses the packing computes what a plan packing its own computes,
 * and stays valid when the plan that packed it and the cache are freed. */
#include "exec_check.h"

/* x [rows x 32] @ W [32 x 48] -> Relu: vec.gemv packs W. */
static ts_graph *product(ts_tensor *w, const char *xdims)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", xdims);
    int wv = xt_const(g, w);
    int m = xt_node(g, "MatMul", (int[]){x, wv}, 2, NULL, 0);
    xt_output(g, xt_node(g, "Relu", &m, 1, NULL, 0));
    return g;
}

static ts_tensor *run(ts_plan *p, const ts_graph *g, uint64_t seed)
{
    ts_error e = {0};
    ts_tensor *in = ts_tensor_new(TS_F32, &g->values[g->inputs[0]].shape, &e), *out;
    out = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert(in && out, "%s", e.msg);
    ts_tensor_fill_random(in, &seed, -1, 1);
    cr_assert_eq(ts_plan_run(p, &in, &out, &e), TS_OK, "%s", e.msg);
    ts_tensor_unref(in);
    return out;
}

Test(pack_cache, shared_weights_pack_once_and_outlive_their_packer)
{
    uint64_t rng = 3;
    ts_error e = {0};
    ts_shape ws = xt_shape("32x48");
    ts_tensor *w = ts_tensor_new(TS_F32, &ws, &e);
    cr_assert_not_null(w, "%s", e.msg);
    ts_tensor_fill_random(w, &rng, -0.5, 0.5);
    /* two graphs at different sizes holding the same tensor, as
     * ts_onnx_kept's loads do */
    ts_graph *a = product(ts_tensor_ref(w), "1x32"), *b = product(ts_tensor_ref(w), "3x32");
    ts_pack_cache *c = ts_pack_cache_new();
    cr_assert_not_null(c);
    ts_plan_opts o = {.threads = 1, .pack_cache = c};
    ts_plan *pa = xt_plan_check(a, &o, 5, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(pa, "vec.gemv"), 1);
    ts_pack_cache_stats st = ts_pack_cache_get_stats(c);
    cr_assert(st.misses == 1 && st.hits == 0 && st.entries == 1, "first plan: %lld misses, %lld hits",
              (long long)st.misses, (long long)st.hits);
    ts_plan *pb = xt_plan_check(b, &o, 6, -1, 1, 1e-4, XT_TOL_MAX);
    st = ts_pack_cache_get_stats(c);
    cr_assert(st.misses == 1 && st.hits == 1 && st.entries == 1 && st.hit_bytes == st.bytes,
              "second plan: %lld misses, %lld hits, %lld entries", (long long)st.misses, (long long)st.hits,
              (long long)st.entries);
    /* a cold plan of b (its own packing) */
    ts_plan *cold = NULL;
    cr_assert_eq(ts_plan_build(b, &(ts_plan_opts){.threads = 1}, &cold, &e), TS_OK, "%s", e.msg);
    /* the cache and the plan that packed W go first */
    ts_pack_cache_free(c);
    ts_plan_free(pa);
    ts_tensor *got = run(pb, b, 9), *want = run(cold, b, 9);
    cr_assert_eq(memcmp(got->data, want->data, want->nbytes), 0, "the reused packing computes otherwise");
    ts_tensor_unref(got);
    ts_tensor_unref(want);
    ts_plan_free(pb);
    ts_plan_free(cold);
    ts_graph_free(a);
    ts_graph_free(b);
    ts_tensor_unref(w);
}

/* A constant no other graph holds cannot be presented again: not cached
 * (and weights held once may still release it). */
Test(pack_cache, unshared_constant_is_not_cached)
{
    uint64_t rng = 4;
    ts_error e = {0};
    ts_shape ws = xt_shape("32x48");
    ts_tensor *w = ts_tensor_new(TS_F32, &ws, &e);
    cr_assert_not_null(w, "%s", e.msg);
    ts_tensor_fill_random(w, &rng, -0.5, 0.5);
    ts_graph *a = product(w, "1x32");
    ts_pack_cache *c = ts_pack_cache_new();
    ts_plan_opts o = {.threads = 1, .pack_cache = c, .release_packed_weights = true};
    ts_plan *p = xt_plan_check(a, &o, 5, -1, 1, 1e-4, XT_TOL_MAX);
    ts_pack_cache_stats st = ts_pack_cache_get_stats(c);
    cr_assert(st.misses == 0 && st.hits == 0 && st.entries == 0);
    cr_assert_null(a->values[a->nodes[0].inputs[1]].constant->data, "the weight was not released");
    ts_plan_free(p);
    ts_pack_cache_free(c);
    ts_graph_free(a);
}
