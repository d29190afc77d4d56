#!/usr/bin/env node
'use strict';
// ONNX Runtime peer for tsopt: runs MODEL on .npy inputs, saves .npy outputs,
// optionally times N runs. Used as the reference ("oracle") in tests and as
// the engine tsopt is benchmarked against.
//
//   node run.js MODEL --inputs DIR [--save-outputs DIR] [--iters N] [--min-time S] [--threads N]
//   node run.js MODEL --list-io
//
// Tensor files are named after the tensor, every character outside
// [A-Za-z0-9._-] replaced by '_' (the same rule as tsopt's).

const fs = require('fs');
const os = require('os');
const path = require('path');
const npy = require('./npy');

const USAGE = 'usage: run.js MODEL (--list-io | --inputs DIR [--save-outputs DIR] [--iters N] [--min-time S] [--threads N])';

class OrtError extends Error {
  constructor(what, where) {
    super(what);
    this.where = where;
  }
}

function fail(what, where) {
  throw new OrtError(what, where);
}

function oneLine(s) {
  return String(s).replace(/\s*\n\s*/g, ' ').trim();
}

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

function parseCount(flag, v) {
  if (v === undefined || !/^\d+$/.test(v) || Number(v) < 1) fail(`${flag} needs a positive integer`, v === undefined ? flag : v);
  return Number(v);
}

function parseArgs(argv) {
  const a = { model: null, inputs: null, outputs: null, iters: 0, minTime: 0, threads: 0, listIo: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    switch (arg) {
      case '--inputs': a.inputs = argv[++i]; if (a.inputs === undefined) fail('--inputs needs a folder', arg); break;
      case '--save-outputs': a.outputs = argv[++i]; if (a.outputs === undefined) fail('--save-outputs needs a folder', arg); break;
      case '--iters': a.iters = parseCount(arg, argv[++i]); break;
      case '--threads': a.threads = parseCount(arg, argv[++i]); break;
      case '--min-time': {
        // as tsopt bench --min-time: more timed runs until they add up to S seconds
        const v = argv[++i];
        if (v === undefined || !/^\d+(\.\d+)?$/.test(v)) fail('--min-time needs a number of seconds', v === undefined ? arg : v);
        a.minTime = Number(v);
        break;
      }
      case '--list-io': a.listIo = true; break;
      case '-h': case '--help': process.stdout.write(USAGE + '\n'); process.exit(0); break;
      default:
        if (arg.startsWith('-')) fail(`unknown option; ${USAGE}`, arg);
        if (a.model !== null) fail(`more than one model given; ${USAGE}`, arg);
        a.model = arg;
    }
  }
  if (a.model === null) fail(USAGE, 'arguments');
  if (!a.listIo && a.inputs === null) fail('missing --inputs DIR', a.model);
  return a;
}

function defaultThreads() {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node (run 'make deps'): ${oneLine(e.message)}`, path.join(__dirname, 'node_modules'));
  }
  return null;
}

function describe(meta) {
  if (!meta || meta.isTensor === false) return 'non-tensor';
  const dims = (meta.shape || []).map((d) => String(d));
  return `${meta.type} [${dims.join(',')}]`;
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// Peak resident set of this process. VmHWM is the high-water mark of this
// program's own memory; getrusage's maxRSS also counts the parent's memory
// when we were started by fork+exec from a big process (e.g. Python + torch).
function peakRss() {
  try {
    const m = /VmHWM:\s*(\d+)\s*kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch (_) { /* not Linux: fall back */ }
  return process.resourceUsage().maxRSS * 1024;
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  try {
    if (!fs.statSync(args.model).isFile()) fail('model is not a file', args.model);
  } catch (e) {
    if (e instanceof OrtError) throw e;
    fail(e.code === 'ENOENT' ? 'no such model file' : `cannot read model: ${oneLine(e.message)}`, args.model);
  }
  const ort = loadOrt();
  const threads = args.threads || defaultThreads();
  let session;
  try {
    session = await ort.InferenceSession.create(args.model, {
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionProviders: ['cpu'],
    });
  } catch (e) {
    fail(`cannot load model: ${oneLine(e.message)}`, args.model);
  }
  const inMeta = session.inputMetadata || [];
  const outMeta = session.outputMetadata || [];
  const metaOf = (list, name) => list.find((m) => m.name === name);

  if (args.listIo) {
    for (const n of session.inputNames) process.stdout.write(`input ${n} ${describe(metaOf(inMeta, n))}\n`);
    for (const n of session.outputNames) process.stdout.write(`output ${n} ${describe(metaOf(outMeta, n))}\n`);
    return;
  }

  const feeds = {};
  for (const name of session.inputNames) {
    const file = path.join(args.inputs, sanitize(name) + '.npy');
    let arr;
    try {
      arr = npy.read(file);
    } catch (e) {
      fail(`input '${name}': ${oneLine(e.message)}`, file);
    }
    const meta = metaOf(inMeta, name);
    if (meta && meta.isTensor && meta.type && meta.type !== arr.type) {
      fail(`input '${name}' is ${meta.type} in the model, file holds ${arr.type}`, file);
    }
    feeds[name] = new ort.Tensor(arr.type, arr.data, arr.shape);
  }

  const runOnce = async () => {
    try {
      return await session.run(feeds);
    } catch (e) {
      fail(`run failed: ${oneLine(e.message)}`, args.model);
    }
    return null;
  };

  // The first run is also the warm-up when timing.
  const results = await runOnce();
  let stats = null;
  if (args.iters > 0) {
    const times = [];
    // at least --iters runs, more until they add up to --min-time seconds:
    // a few-millisecond model's first runs are slower than its steady state
    let total = 0;
    while (times.length < args.iters || (total < args.minTime * 1000 && times.length < 1000000)) {
      const t0 = process.hrtime.bigint();
      await runOnce();
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      times.push(ms);
      total += ms;
    }
    times.sort((x, y) => x - y);
    stats = {
      median_ms: round3(median(times)),
      min_ms: round3(times[0]),
      max_ms: round3(times[times.length - 1]),
      iters: times.length,
      threads,
      peak_rss_bytes: peakRss(),
    };
  }

  if (args.outputs !== null) {
    try {
      fs.mkdirSync(args.outputs, { recursive: true });
    } catch (e) {
      fail(`cannot create output folder: ${oneLine(e.message)}`, args.outputs);
    }
    for (const name of session.outputNames) {
      const t = results[name];
      const file = path.join(args.outputs, sanitize(name) + '.npy');
      if (!t || t.data === undefined) fail(`output '${name}' is not a tensor`, file);
      try {
        npy.write(file, t.type, Array.from(t.dims, Number), t.data);
      } catch (e) {
        fail(`output '${name}': ${oneLine(e.message)}`, file);
      }
    }
  }
  if (stats) process.stdout.write(JSON.stringify(stats) + '\n');
}

main().catch((e) => {
  if (e instanceof OrtError) {
    process.stderr.write(`ort: ${e.message} (${e.where})\n`);
  } else {
    process.stderr.write(`ort: internal error: ${oneLine(e && e.stack ? e.stack : e)} (run.js)\n`);
  }
  process.exit(1);
});
