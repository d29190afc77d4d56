#!/usr/bin/env bash
# Kernels serve the nodes they are handed (issue 27 §3; src/exec/lower_group.c):
# the kernel files listed here read graph nodes only through xplan_node (which
# refuses, with the step check on, a node that is neither the kernel's own
# nor of the group the lowering stage handed it: test_lowering) and walk no
# graph: no node array, consumer counts, producers or claims.  A file comes
# onto the list when its kernels stop matching neighbours themselves (the rest
# of src/exec/ still does; no kernel declines after touching the plan, which
# keeps no undo: test_lowering's kernel_declining_after_touching_the_plan_refused).
# Checked on the tree, then shown failing on a planted read.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../src" && pwd)
# where kernel file $2 lies under src/ folder $1: the plan core or a kernel family
at() { local d; for d in exec dnnl vec; do [ -f "$1/$d/$2" ] && { echo "$1/$d/$2"; return; }; done; echo "$1/exec/$2"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

SERVED="dnnl_pool.c dnnl_transpose.c einnet_kernel.c vec_batchnorm.c vec_layernorm.c vec_layout.c vec_maxpool.c vec_pad.c vec_shuffle.c
        vec_quant.c vec_reduce.c vec_resize.c vec_softmax.c vec_split.c
        dnnl_conv.c dnnl_matmul.c deconv_gemm.c vec_depthwise.c vec_gconv.c dnnl_residual.c vec_se.c
        dnnl_concat.c vec_concat_cl.c vec_qlinear.c ref_kernel.c control_flow.c
        vec_fuse.c vec_eltwise.c dnnl_int8.c vec_attention.c vec_gemv.c vec_band.c
        vec_movement.c dense_concat.c dnnl_patch.c vec_sdpa.c"
# what walking the graph looks like in C here
WALK='nodes\[|sole_consumer|xhalf_consumers|consumers\[|claimed|xplan_claim|xd_fuse_claim|xd_fuse_collect|xplan_inputs_ready|(\.|->)producer\b'

# check DIR: one line per graph walk in a served file (comments skipped); status 1 if any
check() {
    local dir=$1 bad=0 f
    for f in $SERVED; do
        [ -f "$(at "$dir" "$f")" ] || { echo "$f: listed but missing"; bad=1; continue; }
        if grep -nE "$WALK" "$(at "$dir" "$f")" | grep -vE '^[0-9]+:\s*(/?\*|//)' | sed "s#^#$f:#" | grep .; then bad=1; fi
    done
    return $bad
}

out=$(check "$SRC") || { echo "$out" >&2; fail "served kernels walk the graph"; }

# planted: a served kernel looking at its input's producer, at a consumer,
# collecting its own post-op tail (lower_post.c's job), and vec.gemv looking
# for products to stack (lower_gemv.c's)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for plant in 'vec_softmax.c:int q = p->g->values[v].producer;' 'vec_layernorm.c:int c = xplan_sole_consumer(p, v);' \
             'dnnl_conv.c:st = xd_fuse_collect(p, yv, 1, F, &f, err);' \
             'vec_fuse.c:int c = xhalf_sole_consumer(p, cur);' 'vec_gemv.c:if (p->claimed[m]) return 0;'; do
    f=${plant%%:*} line=${plant#*:}
    rm -rf "$T/src" && mkdir "$T/src" && cp -r "$SRC/exec" "$SRC/dnnl" "$SRC/vec" "$T/src"
    printf '%s\n' "$line" >>"$(at "$T/src" "$f")"
    if out=$(check "$T/src"); then fail "planted '$line' in $f passed"; fi
    echo "$out" | grep -qF "$f:" || fail "planted $f: $out"
done
echo "kernel_nodes: ok"
