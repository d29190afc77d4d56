#!/usr/bin/env node
'use strict';
// ONNX Runtime on ONNX's backend test cases, for docs/conformance.md (not run
// by `make test`).  ort_backend.py prepares DIR/<case>/{model.onnx,feeds.json,
// in_K.bin}; this runs every case in ONE node process (starting ONNX Runtime
// per case would dominate) and writes DIR/<case>/result.json: {"error": ...}
// or {"outputs": [{name, type, dims, file | strings}]} with raw little-endian
// data in out_K.bin.
//
//   node tests/conformance/ort_backend.js DIR
const fs = require('fs');
const path = require('path');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array,
  int32: Int32Array, int16: Int16Array, int8: Int8Array, uint64: BigUint64Array,
  uint32: Uint32Array, uint16: Uint16Array, uint8: Uint8Array, bool: Uint8Array,
};

function oneLine(s) {
  return String(s).replace(/\s*\n\s*/g, ' ').trim();
}

async function runCase(ort, dir) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, 'feeds.json'), 'utf8'));
  let session;
  try {
    session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
      graphOptimizationLevel: 'all', executionMode: 'sequential',
      intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'],
    });
  } catch (e) {
    return { error: `load: ${oneLine(e.message)}` };
  }
  const feeds = {};
  try {
    for (const f of spec.inputs) {
      if (f.type === 'string') {
        feeds[f.name] = new ort.Tensor('string', f.strings, f.dims);
        continue;
      }
      const A = ARRAYS[f.type];
      if (!A) throw new Error(`element type ${f.type} cannot be fed from Node`);
      const buf = fs.readFileSync(path.join(dir, f.file));
      const data = new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
      feeds[f.name] = new ort.Tensor(f.type, data, f.dims);
    }
  } catch (e) {
    return { error: `input: ${oneLine(e.message)}` };
  }
  let res;
  try {
    res = await session.run(feeds);
  } catch (e) {
    return { error: `run: ${oneLine(e.message)}` };
  }
  const outputs = [];
  session.outputNames.forEach((name, k) => {
    const t = res[name];
    const o = { name, type: t.type, dims: Array.from(t.dims, Number) };
    if (t.type === 'string') o.strings = Array.from(t.data);
    else {
      o.file = `out_${k}.bin`;
      const d = t.data;
      fs.writeFileSync(path.join(dir, o.file), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    }
    outputs.push(o);
  });
  if (typeof session.release === 'function') await session.release();
  return { outputs };
}

async function main() {
  const root = process.argv[2];
  const ort = require(path.join(__dirname, '../../tools/ort/node_modules/onnxruntime-node'));
  const names = fs.readdirSync(root).filter((n) => fs.existsSync(path.join(root, n, 'feeds.json'))).sort();
  for (const name of names) {
    let r;
    try {
      r = await runCase(ort, path.join(root, name));
    } catch (e) {
      r = { error: `internal: ${oneLine(e.message)}` };
    }
    fs.writeFileSync(path.join(root, name, 'result.json'), JSON.stringify(r));
  }
  process.stdout.write(`ort ${require(path.join(__dirname, '../../tools/ort/node_modules/onnxruntime-node/package.json')).version}: ${names.length} cases run\n`);
}

main().catch((e) => {
  process.stderr.write(`ort_backend: ${oneLine(e && e.stack ? e.stack : e)}\n`);
  process.exit(2);
});
