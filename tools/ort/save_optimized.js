#!/usr/bin/env node
'use strict';
// Writes the graph ONNX Runtime runs after its optimizations ('all', CPU
// provider) to OUT: what its QDQ fusions made of a quantized model
// (tools/quantize_qdq.py --check-ort counts QLinearConv/QLinearMatMul in it).
//
//   node save_optimized.js MODEL OUT

const ort = require('onnxruntime-node');

async function main() {
  const [model, out] = process.argv.slice(2);
  if (!model || !out) {
    process.stderr.write('usage: save_optimized.js MODEL OUT\n');
    process.exit(2);
  }
  try {
    await ort.InferenceSession.create(model, {
      graphOptimizationLevel: 'all',
      executionProviders: ['cpu'],
      optimizedModelFilePath: out,
    });
  } catch (e) {
    process.stderr.write(`save_optimized.js: ${model}: ${String(e.message).split('\n')[0]}\n`);
    process.exit(1);
  }
}

main();
