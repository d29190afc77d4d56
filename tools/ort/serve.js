#!/usr/bin/env node
'use strict';
// ONNX Runtime as a long-lived server for `tsopt fuzz --target ort`: one
// process per campaign loads many models, so a pair costs two session loads
// and two runs, not two node start-ups (src/fuzz/ort.c is the client).
//
// Protocol, one line each way on stdin/stdout, fields separated by tabs:
//   on start:  ready <TAB> ORT_VERSION             (or exit 1, reason on stderr)
//   request:   run <TAB> MODEL <TAB> INPUT_DIR <TAB> OUTPUT_DIR
//   reply:     ok                                   every output written as OUTPUT_DIR/<name>.npy
//              error <TAB> ONE LINE                 the model was refused or failed to run
// Inputs are read from INPUT_DIR/<name>.npy, names sanitized as tsopt does
// (every character outside [A-Za-z0-9._-] becomes '_').  Sessions use all of
// ORT's graph optimizations (the compiler under test), one thread each
// (TSOPT_ORT_THREADS to change it).  EOF on stdin ends the process.

const fs = require('fs');
const path = require('path');
const readline = require('readline');
const npy = require('./npy');

function oneLine(s) {
  return String(s).replace(/\s*\n\s*/g, ' ').replace(/\t/g, ' ').trim();
}

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  process.stderr.write(`serve.js: cannot load onnxruntime-node (run 'make deps'): ${oneLine(e.message)}\n`);
  process.exit(1);
}
let version = '?';
try {
  version = require('onnxruntime-node/package.json').version;
} catch (_) { /* the version is informative only */ }

const threads = Math.max(1, Number(process.env.TSOPT_ORT_THREADS) || 1);
const sessionOptions = {
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionProviders: ['cpu'],
};

async function run(model, inDir, outDir) {
  let session;
  try {
    session = await ort.InferenceSession.create(model, sessionOptions);
  } catch (e) {
    throw new Error(`cannot load ${model}: ${oneLine(e.message)}`);
  }
  try {
    const feeds = {};
    for (const name of session.inputNames) {
      const file = path.join(inDir, sanitize(name) + '.npy');
      let arr;
      try {
        arr = npy.read(file);
      } catch (e) {
        throw new Error(`input '${name}': ${oneLine(e.message)} (${file})`);
      }
      feeds[name] = new ort.Tensor(arr.type, arr.data, arr.shape);
    }
    let results;
    try {
      results = await session.run(feeds);
    } catch (e) {
      throw new Error(`run failed: ${oneLine(e.message)}`);
    }
    fs.mkdirSync(outDir, { recursive: true });
    for (const name of session.outputNames) {
      const t = results[name];
      if (!t || t.data === undefined) throw new Error(`output '${name}' is not a tensor`);
      npy.write(path.join(outDir, sanitize(name) + '.npy'), t.type, Array.from(t.dims, Number), t.data);
    }
  } finally {
    if (typeof session.release === 'function') await session.release();
  }
}

async function main() {
  // Ctrl-C reaches the whole process group: the client (tsopt) finishes its
  // pair and closes our stdin, which ends this process; dying first would
  // turn the pair in flight into a false finding.
  process.on('SIGINT', () => {});
  const out = (s) => process.stdout.write(s + '\n');
  out(`ready\t${version}`);
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of rl) {
    if (!line) continue;
    const f = line.split('\t');
    if (f[0] !== 'run' || f.length !== 4) {
      out(`error\tbad request '${oneLine(line).slice(0, 200)}' (expected run<TAB>MODEL<TAB>INPUT_DIR<TAB>OUTPUT_DIR)`);
      continue;
    }
    try {
      await run(f[1], f[2], f[3]);
      out('ok');
    } catch (e) {
      out(`error\t${oneLine(e && e.message ? e.message : e)}`);
    }
  }
}

main().catch((e) => {
  process.stderr.write(`serve.js: internal error: ${oneLine(e && e.stack ? e.stack : e)}\n`);
  process.exit(1);
});
