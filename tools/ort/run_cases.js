#!/usr/bin/env node
'use strict';
// Runs every single-op case exported by `opcases export DIR` in ONE node
// process (starting ONNX Runtime once per case would dominate the test time):
// for each DIR/<case>/model.onnx, reads in/*.npy, runs, writes ort/*.npy.
//
//   node run_cases.js DIR [FILTER]
//
// Prints "FAIL <case>: load|input|run|output: <message>" per broken case and a
// final "N ran, N failed" line; exits 1 when any case failed, 2 on usage errors.

const fs = require('fs');
const path = require('path');
const npy = require('./npy');

function oneLine(s) {
  return String(s).replace(/\s*\n\s*/g, ' ').trim();
}

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

async function runCase(ort, dir) {
  // No stale outputs from an earlier run may survive a failure.
  fs.rmSync(path.join(dir, 'ort'), { recursive: true, force: true });
  let session;
  try {
    session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionProviders: ['cpu'],
    });
  } catch (e) {
    return `load: ${oneLine(e.message)}`;
  }
  const feeds = {};
  for (const name of session.inputNames) {
    const file = path.join(dir, 'in', sanitize(name) + '.npy');
    try {
      const arr = npy.read(file);
      feeds[name] = new ort.Tensor(arr.type, arr.data, arr.shape);
    } catch (e) {
      return `input '${name}': ${oneLine(e.message)} (${file})`;
    }
  }
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    return `run: ${oneLine(e.message)}`;
  }
  const outDir = path.join(dir, 'ort');
  fs.mkdirSync(outDir);
  for (const name of session.outputNames) {
    const t = results[name];
    const file = path.join(outDir, sanitize(name) + '.npy');
    try {
      npy.write(file, t.type, Array.from(t.dims, Number), t.data);
    } catch (e) {
      return `output '${name}': ${oneLine(e.message)} (${file})`;
    }
  }
  if (typeof session.release === 'function') await session.release();
  return null;
}

async function main() {
  const [root, filter] = process.argv.slice(2);
  if (!root) {
    process.stderr.write('usage: run_cases.js DIR [FILTER]\n');
    process.exit(2);
  }
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`ort: cannot load onnxruntime-node (run 'make deps'): ${oneLine(e.message)}\n`);
    process.exit(2);
  }
  let names;
  try {
    names = fs.readdirSync(root).filter((n) => fs.existsSync(path.join(root, n, 'model.onnx'))).sort();
  } catch (e) {
    process.stderr.write(`ort: cannot read folder: ${oneLine(e.message)} (${root})\n`);
    process.exit(2);
  }
  if (filter) names = names.filter((n) => n.includes(filter));
  let failed = 0;
  for (const name of names) {
    const err = await runCase(ort, path.join(root, name));
    if (err) {
      failed++;
      process.stdout.write(`FAIL ${name}: ${err}\n`);
    }
  }
  process.stdout.write(`${names.length} ran, ${failed} failed\n`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  process.stderr.write(`ort: internal error: ${oneLine(e && e.stack ? e.stack : e)} (run_cases.js)\n`);
  process.exit(2);
});
