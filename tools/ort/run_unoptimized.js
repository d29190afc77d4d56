#!/usr/bin/env node
'use strict';
// ONNX Runtime with its graph optimizations disabled: a QDQ model run as
// written (DequantizeLinear -> float op -> QuantizeLinear), not as its
// QLinear* fusions.  bench/quantized.py measures how far ORT's own fusions
// move a deep quantized model's outputs (the bound tsopt's distance from
// ORT is judged by).
//
//   node run_unoptimized.js MODEL INPUT_DIR OUTPUT_DIR

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const npy = require('./npy');

const sanitize = (n) => n.replace(/[^A-Za-z0-9._-]/g, '_');

async function main() {
  const [model, inputs, outputs] = process.argv.slice(2);
  if (!outputs) {
    process.stderr.write('usage: run_unoptimized.js MODEL INPUT_DIR OUTPUT_DIR\n');
    process.exit(2);
  }
  try {
    const s = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled', executionProviders: ['cpu'] });
    const feeds = {};
    for (const n of s.inputNames) {
      const a = npy.read(path.join(inputs, sanitize(n) + '.npy'));
      feeds[n] = new ort.Tensor(a.type, a.data, a.shape);
    }
    const r = await s.run(feeds);
    fs.mkdirSync(outputs, { recursive: true });
    for (const n of s.outputNames) npy.write(path.join(outputs, sanitize(n) + '.npy'), r[n].type, r[n].dims, r[n].data);
  } catch (e) {
    process.stderr.write(`run_unoptimized.js: ${model}: ${String(e.message).split('\n')[0]}\n`);
    process.exit(1);
  }
}

main();
