#!/usr/bin/env node
'use strict';
// Greedy generation with ONNX Runtime over a decoder with a key/value cache
// (tools/export_decoder.py's inputs and outputs: input_ids, past_key_<i>,
// past_value_<i> -> logits, present_key_<i>, present_value_<i>).  The loop
// runs here, in one session, so each step costs what ONNX Runtime's run
// costs: the peer of bench/decode.py's tsopt loop.
//
//   node generate.js MODEL --prompt IDS.npy --new N [--threads N] [--save-tokens OUT.npy] [--save-logits OUT.npy]
//
// IDS.npy: int64 [batch, prompt_len].  Prints one JSON line: prompt_ms (the
// prompt's run), step_ms (each generated token's run, after the prompt),
// peak_rss_bytes.  --save-tokens writes the generated ids, int64 [batch, N];
// --save-logits the last position's logits of every run, float
// [N, batch, vocab] (the prompt's, then each step's but the last).

const fs = require('fs');
const os = require('os');
const npy = require('./npy');

const USAGE = 'usage: generate.js MODEL --prompt IDS.npy --new N [--threads N] [--save-tokens OUT.npy] [--save-logits OUT.npy]';

function die(msg) {
  process.stderr.write(`generate.js: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { model: null, prompt: null, n: 0, threads: 0, tokens: null, logits: null };
  const count = (flag, v) => {
    if (v === undefined || !/^\d+$/.test(v) || Number(v) < 1) die(`${flag} needs a positive integer`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--prompt') a.prompt = argv[++i];
    else if (arg === '--new') a.n = count(arg, argv[++i]);
    else if (arg === '--threads') a.threads = count(arg, argv[++i]);
    else if (arg === '--save-tokens') a.tokens = argv[++i];
    else if (arg === '--save-logits') a.logits = argv[++i];
    else if (!arg.startsWith('--') && a.model === null) a.model = arg;
    else die(`unknown argument '${arg}'\n${USAGE}`);
  }
  if (!a.model || !a.prompt || !a.n) die(USAGE);
  return a;
}

function peakRss() {
  const m = /VmHWM:\s*(\d+)\s*kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : process.resourceUsage().maxRSS * 1024;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    die(`cannot load onnxruntime-node (run 'make deps'): ${e.message}`);
  }
  let prompt;
  try {
    prompt = npy.read(a.prompt);
  } catch (e) {
    die(`${a.prompt}: ${e.message}`);
  }
  if (prompt.type !== 'int64' || prompt.shape.length !== 2) die(`${a.prompt}: expected int64 [batch, seq] ids`);
  const threads = a.threads || (os.availableParallelism ? os.availableParallelism() : os.cpus().length);
  let s;
  try {
    s = await ort.InferenceSession.create(a.model, {
      graphOptimizationLevel: 'all', executionMode: 'sequential', intraOpNumThreads: threads,
      interOpNumThreads: 1, executionProviders: ['cpu'],
    });
  } catch (e) {
    die(`${a.model}: cannot load: ${e.message.split('\n')[0]}`);
  }
  const past = s.inputNames.filter((n) => n.startsWith('past_'));
  const meta = (s.inputMetadata || []).find((m) => m.name === past[0]);
  if (!past.length || !meta || !meta.shape || meta.shape.length !== 4) die(`${a.model}: no past_* [batch, heads, past, head_dim] inputs`);
  const [batch] = prompt.shape;
  const heads = meta.shape[1], hd = meta.shape[3];
  const feeds = { input_ids: new ort.Tensor('int64', prompt.data, prompt.shape) };
  for (const n of past) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [batch, heads, 0, hd]);
  const tokens = new BigInt64Array(batch * a.n);
  const logitsOut = [];
  const stepMs = [];
  let promptMs = 0, vocab = 0;
  for (let step = 0; step < a.n; step++) {
    const t0 = process.hrtime.bigint();
    const r = await s.run(feeds);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (step === 0) promptMs = ms;
    else stepMs.push(ms);
    const lg = r.logits;
    const [, seq, v] = lg.dims;
    vocab = v;
    const next = new BigInt64Array(batch);
    for (let b = 0; b < batch; b++) {
      const row = lg.data.subarray((b * seq + seq - 1) * v, (b * seq + seq) * v);
      let best = 0;
      for (let j = 1; j < v; j++) if (row[j] > row[best]) best = j;
      next[b] = BigInt(best);
      tokens[b * a.n + step] = BigInt(best);
      if (a.logits) logitsOut.push(Float32Array.from(row));
    }
    feeds.input_ids = new ort.Tensor('int64', next, [batch, 1]);
    for (const n of past) feeds[n] = r[n.replace('past_', 'present_')];
  }
  if (a.tokens) npy.write(a.tokens, 'int64', [batch, a.n], tokens);
  if (a.logits) {
    const all = new Float32Array(a.n * batch * vocab);
    logitsOut.forEach((row, i) => all.set(row, i * vocab));
    npy.write(a.logits, 'float32', [a.n, batch, vocab], all);
  }
  process.stdout.write(JSON.stringify({ prompt_ms: promptMs, step_ms: stepMs, threads, peak_rss_bytes: peakRss() }) + '\n');
}

main().catch((e) => die(e.message.split('\n')[0]));
