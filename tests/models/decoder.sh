#!/usr/bin/env bash
# A GPT-style decoder with a key/value cache (issue 29 §3), run token by
# token: tools/export_decoder.py's tiny copy (2 layers, d_model 32), greedy
# from an 8-token prompt at batch 2 (the prompt with empty past tensors, then
# one token a step with the presents fed back), through tsopt's Python
# session and ONNX Runtime (tools/ort/generate.js): identical tokens, each
# step's last-position logits within 1e-4, and the session's plan builds
# counted: two (the prompt, the first token), every later token re-binds the
# token plan (ts_plan_rebind) and a repeated signature is served from the
# cache; the re-bound plan computes bit for bit what a cold plan does.
# 77 (skip): no torch or no onnxruntime-node.
set -euo pipefail
: "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
export TSOPT_LIBRARY=${TSOPT_LIBRARY:-$TSOPT_BUILD/libtsopt.so}
export PYTHONPATH=$TSOPT_SRC/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
"$PYTHON" -c 'import torch, onnx' 2>/dev/null || { echo "skip: no torch/onnx for $PYTHON"; exit 77; }
[ -d "$TSOPT_SRC/tools/ort/node_modules/onnxruntime-node" ] || { echo "skip: no onnxruntime-node"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PYTHON" "$TSOPT_SRC/tools/export_decoder.py" "$T/dec.onnx" --layers 2 --d-model 32 --heads 4 --vocab 64 \
  --max-pos 64 --seed 3 >/dev/null 2>"$T/export.log" || { cat "$T/export.log"; exit 1; }
NEW=12
"$PYTHON" -c "import numpy as np; np.save('$T/prompt.npy', np.random.default_rng(5).integers(0, 64, (2, 8), dtype=np.int64))"
node "$TSOPT_SRC/tools/ort/generate.js" "$T/dec.onnx" --prompt "$T/prompt.npy" --new $NEW --threads 2 \
  --save-tokens "$T/ort_tokens.npy" --save-logits "$T/ort_logits.npy" >/dev/null
"$PYTHON" - "$T" $NEW <<'PY'
import sys
import numpy as np
import tsopt
t, new = sys.argv[1], int(sys.argv[2])
s = tsopt.InferenceSession(f'{t}/dec.onnx', threads=2)
past = [a for a in s.get_inputs() if a.name.startswith('past_')]
outs = [a.name for a in s.get_outputs()]
ids = np.load(f'{t}/prompt.npy')
feed = {p.name: np.zeros((2, 4, 0, 8), np.float32) for p in past}
feed['input_ids'] = ids
tokens, logits = [], []
for step in range(new):
    r = dict(zip(outs, s.run(None, feed)))
    if step == 0:
        packed = s.pack_stats  # the first plan packed each weight
    if step == 1:
        builds_first_token = s.plan_builds
    last = r['logits'][:, -1, :]
    tokens.append(last.argmax(axis=1))
    logits.append(last)
    prev = feed
    feed = {p.name: r[p.name.replace('past_', 'present_')] for p in past}
    feed['input_ids'] = tokens[-1].astype(np.int64).reshape(2, 1)
tokens, logits = np.stack(tokens, axis=1), np.stack(logits)
want_t, want_l = np.load(f'{t}/ort_tokens.npy'), np.load(f'{t}/ort_logits.npy')
fail = []
if not np.array_equal(tokens, want_t):
    fail.append(f'tokens differ:\n tsopt {tokens.tolist()}\n ort   {want_t.tolist()}')
err = float(np.abs(logits - want_l).max())
if err > 1e-4:
    fail.append(f'logits differ from ONNX Runtime\'s by up to {err:.3g} (> 1e-4)')
# every step had a new past length: the prompt's plan and the first
# token's; the later tokens (one shape class) re-bind it, building none.  A
# signature still cached (the last step's) is served without a build
builds = s.plan_builds
if builds != 2 or builds_first_token != 2 or s.plan_rebinds != new - 2:
    fail.append(f'{builds} plan builds ({builds_first_token} after the first token), {s.plan_rebinds} re-binds '
                f'for {new} steps: want 2 builds, then one re-bind a token')
# a token's re-bind resizes its steps in place (the cache's Concats, the
# attention, the position row's Add: 2 layers x 3 + 1) and lowers none
# (plan_rebind.c; TSOPT_SKIP=rebind.resize lowers them: this fails)
rs = s.rebind_steps
if rs['lowered'] != 0 or rs['resized'] < 7 * s.plan_rebinds:
    fail.append(f're-bound steps {rs} over {s.plan_rebinds} re-binds: want none lowered, at least 7 resized a token')
# and each derived graph is derived in place of the one before (session.c:
# no copy, only the nodes after a changed size inferred; TSOPT_SKIP=derive.copy
# copies: this fails)
if rs['derived_inplace'] != s.graph_derives:
    fail.append(f'{rs["derived_inplace"]} of {s.graph_derives} derived graphs derived in place: want all')
# the first re-bind loads the graph, the next checks a derived graph against
# a load; every later token derives its graph from the last one's
if s.graph_derives != new - 4:
    fail.append(f'{s.graph_derives} of {s.plan_rebinds} re-binds derived their graph: want {new - 4}')
# a derived graph folds the position row and one causal mask (a guessed
# shape may fold one again); the second layer's mask (the same nodes at the
# same shapes) takes the first's fold instead of a third
folds = s.sized_folds
if folds['shared'] < s.graph_derives or folds['folded'] >= 3 * s.graph_derives:
    fail.append(f'sized constants {folds} over {s.graph_derives} derived graphs: want a shared mask each and fewer '
                f'than three folds a derived graph')
# the graph derived in place keeps its topological order from token to
# token (the checked copy and the first in-place derive order it), and a
# token re-infers twice (before and after its sized constants), without the
# strict pass when no guess was kept (session.c derive)
ds = s.derive_stats
if ds['orders'] != 2 or ds['passes'] > 2 * (s.graph_derives + 1):
    fail.append(f'derive {ds} over {s.graph_derives} derived graphs: want 2 orders, at most 2 passes a graph')
print('derive_stats', ds, 'derives', s.graph_derives)
last = s.run(None, prev)
if s.plan_builds != builds:
    fail.append(f'a repeated signature built a plan ({builds} -> {s.plan_builds})')
# re-plans reuse the first plan's packed weights (ts_pack_cache), held
# once however many plans are cached, and compute what a cold plan does
ps = s.pack_stats
if not (packed['misses'] > 0 and ps['misses'] == packed['misses'] and ps['hits'] >= (builds - 1) * packed['misses']
        and ps['entries'] == packed['entries']):
    fail.append(f'packed weights not reused: after the first plan {packed}, at the end {ps}')
cold = tsopt.InferenceSession(f'{t}/dec.onnx', threads=2)
for name, a, b in zip(outs, last, cold.run(None, prev)):
    if not np.array_equal(a, b):
        fail.append(f'{name}: the re-bound plan reusing packed weights differs from a cold plan')
# the same generation again in the same session: the token plan re-binds
# back to past lengths it had (its buffers kept the longest's shapes and a
# freed mask before), every step's logits bit for bit the first run's
feed = {p.name: np.zeros((2, 4, 0, 8), np.float32) for p in past}
feed['input_ids'] = ids
for step in range(new):
    r = dict(zip(outs, s.run(None, feed)))
    if not np.array_equal(r['logits'][:, -1, :], logits[step]):
        fail.append(f'generating again in the same session: step {step} differs')
        break
    feed = {p.name: r[p.name.replace('past_', 'present_')] for p in past}
    feed['input_ids'] = tokens[:, step].astype(np.int64).reshape(2, 1)
# a prompt of more rows than vec.gemv takes (2 x 12) runs on oneDNN's matmul,
# reading the weights shared with the kept model unpacked (a plan that may
# run once: packing was ~95 % of a prompt's build); the same sizes again
# build the plan once more, packed, and run no plan build after that; each
# run equals a session packing from the start
ids12 = np.random.default_rng(6).integers(0, 64, (2, 12), dtype=np.int64)
feed = {p.name: np.zeros((2, 4, 0, 8), np.float32) for p in past}
feed['input_ids'] = ids12
o = tsopt.SessionOptions()
o.skip = 'matmul.plain_shared'
want = tsopt.InferenceSession(f'{t}/dec.onnx', o).run(None, feed)
s2 = tsopt.InferenceSession(f'{t}/dec.onnx', threads=2)
runs = []
for k in range(3):
    runs.append((s2.run(None, feed), s2.plan_builds, s2.pack_stats['plain']))
if [b for _, b, _ in runs] != [1, 2, 2] or runs[0][2] < 4:
    fail.append(f'prompt of 12: plan builds {[b for _, b, _ in runs]} (want 1, 2, 2), '
                f'{runs[0][2]} shared weights read unpacked (want 4 a layer and more)')
for k, (got, _, _) in enumerate(runs):
    for name, a, b in zip(outs, got, want):
        if np.abs(a - b).max() > 1e-5 * max(1.0, float(np.abs(b).max())):
            fail.append(f'prompt of 12, run {k}: {name} differs from a plan packing its weights')
if fail:
    sys.exit('decoder: ' + '\n'.join(fail))
print(f'decoder: {new} tokens at batch 2 identical to ONNX Runtime\'s, logits within {err:.2g}, {builds} plan builds, '
      f'{s.plan_rebinds} re-binds ({s.graph_derives} graphs derived), '
      f'{ps["hits"]} packed weights reused ({ps["misses"]} packed)')
PY
