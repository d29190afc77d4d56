#!/usr/bin/env node
'use strict';
// Per-operator time of ONNX Runtime on one model, from ORT's own profiler:
//   node bench/ort_profile.js MODEL --inputs DIR [--iters N] [--threads N] [--nodes [--min]]
// prints one JSON object {"op_ms": {OP: ms per run}, "runs": N}, ORT's fused
// kernels mapped back to the op they start from (FusedConv -> Conv, ...),
// so that bench.py can say which kernel tsopt loses on.  Profiling adds
// overhead: these numbers explain a gap, they are not the latency.
const fs = require('fs');
const os = require('os');
const path = require('path');
const ortDir = path.join(__dirname, '..', 'tools', 'ort');
const ort = require(path.join(ortDir, 'node_modules', 'onnxruntime-node'));
const npy = require(path.join(ortDir, 'npy'));

const FUSED = { FusedConv: 'Conv', FusedGemm: 'Gemm', FusedMatMul: 'MatMul', QuickGelu: 'Mul', BiasGelu: 'Add',
  Gelu: 'Div', SkipLayerNormalization: 'Add', FastGelu: 'Add', NhwcFusedConv: 'Conv', MatMulNBits: 'MatMul' };

async function main() {
  const argv = process.argv.slice(2);
  const opt = (name, def) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : def;
  };
  const model = argv[0];
  const inputs = opt('--inputs');
  const iters = Number(opt('--iters', '5'));
  const threads = Number(opt('--threads', String(os.cpus().length)));
  if (!model || !inputs) throw new Error('usage: ort_profile.js MODEL --inputs DIR [--iters N] [--threads N]');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ortprof-'));
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', executionMode: 'sequential', intraOpNumThreads: threads, interOpNumThreads: 1,
    executionProviders: ['cpu'], enableProfiling: true, profileFilePrefix: path.join(tmp, 'p'),
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const a = npy.read(path.join(inputs, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'));
    feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
  }
  await session.run(feeds); // warm-up, excluded below by counting runs
  for (let i = 0; i < iters; i++) await session.run(feeds);
  session.endProfiling();
  const files = fs.readdirSync(tmp).filter((f) => f.endsWith('.json'));
  const events = files.length ? JSON.parse(fs.readFileSync(path.join(tmp, files[0]), 'utf8')) : [];
  fs.rmSync(tmp, { recursive: true, force: true });
  // Node events of every run; the first run (warm-up) is dropped.
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const start = runs.length > 1 ? runs[1].ts : 0;
  const opMs = {};
  const nodeMs = {}; // --nodes: every node's times, in the order they first ran
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < start) continue;
    const node = e.name.slice(0, -'_kernel_time'.length);
    (nodeMs[node] = nodeMs[node] || []).push(e.dur / 1000);
    let op = (e.args && e.args.op_name) || '?';
    op = FUSED[op] || op;
    opMs[op] = (opMs[op] || 0) + e.dur / 1000 / iters;
  }
  if (argv.includes('--nodes')) {
    // per node: the median over the runs (what tsopt profile prints per step),
    // --min the fastest (tsopt profile --roofline --min: under load, nearest a quiet run)
    const useMin = argv.includes('--min');
    for (const [node, t] of Object.entries(nodeMs)) {
      t.sort((a, b) => a - b);
      process.stdout.write(`${t[useMin ? 0 : t.length >> 1].toFixed(4)} ${node}\n`);
    }
  }
  process.stdout.write(JSON.stringify({ op_ms: opMs, runs: iters }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_profile: ${String(e.message).split('\n')[0]}\n`);
  process.exit(1);
});
