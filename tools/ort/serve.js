#!/usr/bin/env node
'use strict';
// ONNX Runtime as a long-lived server: one process loads many models, so a
// request costs session loads and runs, not a node start-up.  Clients:
// `tsopt fuzz --target ort` (src/fuzz/ort.c: run) and `tsopt optimize
// --target ort` (src/opt/ort_peer.c: time, pair, rank, compare; docs/optimize.md).
//
// Protocol, one line each way on stdin/stdout, fields separated by tabs:
//   on start:  ready <TAB> ORT_VERSION             (or exit 1, reason on stderr)
//   request:   run <TAB> MODEL <TAB> INPUT_DIR <TAB> OUTPUT_DIR
//   reply:     ok                                   every output written as OUTPUT_DIR/<name>.npy
//   request:   time <TAB> MODEL <TAB> INPUTS <TAB> THREADS <TAB> MIN_MS
//   reply:     ok <TAB> MEDIAN_MS <TAB> FASTEST_MS <TAB> RUNS
//              after 2 warm-up runs, at least 5 timed runs, more until they add up to MIN_MS
//   request:   pair <TAB> MODEL_A <TAB> MODEL_B <TAB> INPUTS <TAB> THREADS <TAB> ROUNDS <TAB> MIN_MS [<TAB> BUDGET_MS]
//   reply:     ok <TAB> MEDIAN_A <TAB> MEDIAN_B <TAB> FASTEST_A <TAB> FASTEST_B <TAB> ROUNDS <TAB> B_WINS
//              both sessions open at once, timed in alternating rounds (A B B A ...), each half-round
//              at least one run and MIN_MS; with BUDGET_MS > 0, ROUNDS is the fewest rounds and the
//              rounds and MIN_MS are sized from the warm-up runs to fit BUDGET_MS from the request's
//              start (sizeRounds); medians and fastest over the runs of all rounds; B_WINS: the
//              rounds whose B half-round median was below its A half-round's; then per round, one field
//              FASTEST_A FASTEST_B MEDIAN_A MEDIAN_B of its half-rounds, space-separated (src/opt/keep.c)
//   request:   rank <TAB> INPUTS <TAB> THREADS <TAB> BUDGET_MS <TAB> MODEL_0 <TAB> MODEL_1 ...
//   reply:     ok <TAB> MEDIAN_0 FASTEST_0 RATIO_0 <TAB> MEDIAN_1 FASTEST_1 RATIO_1 ... <TAB> ROUNDS
//              RATIO_i: the median over rounds of model i's run / model 0's run in the same round
//              all sessions open at once, one warm-up run each (a model is not loaded once the loads
//              and warm-ups took half the budget, two at least: its fields are nan), then rounds of one run of each model,
//              the order rotated every round (0 1 2, 1 2 0, ...); as many rounds as fit in what is
//              left of BUDGET_MS after the loads and warm-ups, judged by the warm-up runs (2 to 15)
//   request:   compare <TAB> MODEL_A <TAB> MODEL_B <TAB> INPUTS <TAB> THREADS
//   reply:     ok <TAB> WORST <TAB> WHERE         largest max|a-b| / (1e-4 max(1,max|a|) + 1e-3 |a|) over
//              the outputs (A the reference; <= 1 matches at rtol 1e-3, atol 1e-4), and the output it was in
//   any:       error <TAB> ONE LINE                 the model was refused or failed to run
// INPUTS is a folder of <name>.npy files, names sanitized as tsopt does (every
// character outside [A-Za-z0-9._-] becomes '_'), or "-": seeded random inputs
// made here from the model's declared inputs (floats uniform in [-1, 1),
// integers and booleans 0: a valid index whatever the table; symbolic
// dimensions 1, or "-:N" for N).  Sessions use all of ORT's graph
// optimizations; run's use one thread (TSOPT_ORT_THREADS to change it), the
// others THREADS.  Idle intra-op threads do not spin
// (session.intra_op.allow_spinning 0): with two sessions open, the idle
// one's pool would otherwise take the CPUs the timed one runs on.  EOF on
// stdin ends the process.

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

function optionsFor(n) {
  return {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: n,
    interOpNumThreads: 1,
    executionProviders: ['cpu'],
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  };
}

async function open(model, n) {
  try {
    return await ort.InferenceSession.create(model, optionsFor(n));
  } catch (e) {
    throw new Error(`cannot load ${model}: ${oneLine(e.message)}`);
  }
}

async function release(session) {
  if (session && typeof session.release === 'function') await session.release();
}

const TYPED = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array, int32: Int32Array,
  int16: Int16Array, int8: Int8Array, uint64: BigUint64Array, uint32: Uint32Array, uint16: Uint16Array,
  uint8: Uint8Array, bool: Uint8Array,
};

// xorshift64*: the same inputs for every model of a request
function rng(seed) {
  let x = BigInt(seed) | 1n;
  return () => {
    x ^= x >> 12n; x ^= (x << 25n) & 0xffffffffffffffffn; x ^= x >> 27n;
    return Number(((x * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn) >> 11n) / 2 ** 53;
  };
}

// Feeds for session: read from dir, or made up ("-" or "-:N", see the top).
function feedsFor(session, dir) {
  const feeds = {};
  if (dir[0] !== '-') {
    for (const name of session.inputNames) {
      const file = path.join(dir, sanitize(name) + '.npy');
      let arr;
      try {
        arr = npy.read(file);
      } catch (e) {
        throw new Error(`input '${name}': ${oneLine(e.message)} (${file})`);
      }
      feeds[name] = new ort.Tensor(arr.type, arr.data, arr.shape);
    }
    return feeds;
  }
  const sym = Math.max(1, Number(dir.slice(2)) || 1);
  const next = rng(0x5eed);
  const meta = session.inputMetadata || [];
  for (const name of session.inputNames) {
    const m = meta.find((x) => x.name === name);
    if (!m || m.isTensor === false || !TYPED[m.type]) throw new Error(`input '${name}' is not a tensor tsopt can make`);
    const shape = (m.shape || []).map((d) => (typeof d === 'number' && d >= 0 ? d : sym));
    const count = shape.reduce((a, b) => a * b, 1);
    const data = new TYPED[m.type](count);
    if (m.type === 'float32' || m.type === 'float64') for (let i = 0; i < count; i++) data[i] = 2 * next() - 1;
    feeds[name] = new ort.Tensor(m.type, data, shape);
  }
  return feeds;
}

function median(t) {
  const s = [...t].sort((a, b) => a - b), n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// the least of t, without spreading t into arguments: a sub-0.01 ms model
// gives up to 100000 runs a call, past V8's argument limit (least(t)
// threw "Maximum call stack size exceeded")
function least(t) {
  let m = Infinity;
  for (const x of t) if (x < m) m = x;
  return m;
}

async function runs(session, feeds, count, minMs, into) {
  let total = 0;
  for (let i = 0; i < count || (total < minMs && i < 100000); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    into.push(ms);
    total += ms;
  }
}

function count(s, what) {
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${what}: expected a number, got '${s}'`);
  return n;
}

async function time(model, dir, n, minMs) {
  const session = await open(model, Math.max(1, count(n, 'threads')));
  try {
    const feeds = feedsFor(session, dir);
    await runs(session, feeds, 2, 0, []);
    const t = [];
    await runs(session, feeds, 5, count(minMs, 'min_ms'), t);
    return [median(t), least(t), t.length].map((x) => +x.toFixed(4)).join('\t');
  } finally {
    await release(session);
  }
}

// pair's rounds sized by the time left after the warm-ups: as many rounds
// of three runs per half-round as fit in avail ms, from minRounds to 15,
// each half-round at least avail / (2 rounds) ms (at most 1 s); the runs'
// time judged by the slower graph's second warm-up run, taken now and not
// predicted: at load a run can take twice what the client predicted before
// its search (r3d_18: 1786 ms against 768), and rounds sized for three runs
// then got one each and overran the client's time
function sizeRounds(avail, runMs, minRounds) {
  const run = Math.max(runMs, 0.01);
  const r = Math.min(Math.max(Math.floor(avail / (2 * 3 * run)), minRounds), 15);
  return [r, Math.min(Math.max(avail / (2 * r), 0), 1000)];
}

async function pair(a, b, dir, n, rounds, minMs, budgetMs) {
  const k = Math.max(1, count(n, 'threads'));
  const t0 = process.hrtime.bigint();
  const sa = await open(a, k);
  let sb = null;
  try {
    sb = await open(b, k);
    const fa = feedsFor(sa, dir), fb = feedsFor(sb, dir), wa = [], wb = [];
    await runs(sa, fa, 2, 0, wa);
    await runs(sb, fb, 2, 0, wb);
    let r = Math.max(1, count(rounds, 'rounds')), m = count(minMs, 'min_ms');
    if (budgetMs !== undefined && count(budgetMs, 'budget_ms') > 0) {
      const spent = Number(process.hrtime.bigint() - t0) / 1e6;
      [r, m] = sizeRounds(Number(budgetMs) - spent, Math.max(wa[1], wb[1]), r);
    }
    const ta = [], tb = [];
    let wins = 0;
    const per = [];
    for (let i = 0; i < r; i++) {
      const ra = [], rb = [];
      const first = i % 2 ? [sb, fb, rb] : [sa, fa, ra], second = i % 2 ? [sa, fa, ra] : [sb, fb, rb];
      await runs(first[0], first[1], 1, m, first[2]);
      await runs(second[0], second[1], 1, m, second[2]);
      wins += median(rb) < median(ra);
      per.push([least(ra), least(rb), median(ra), median(rb)].map((x) => +x.toFixed(4)).join(' '));
      for (const x of ra) ta.push(x);
      for (const x of rb) tb.push(x);
    }
    return [median(ta), median(tb), least(ta), least(tb)].map((x) => +x.toFixed(4)).concat([r, wins], per).join('\t');
  } finally {
    await release(sb);
    await release(sa);
  }
}

async function rank(dir, n, budgetMs, models) {
  const k = Math.max(1, count(n, 'threads')), budget = count(budgetMs, 'budget_ms');
  const t0 = process.hrtime.bigint(), sessions = [];
  try {
    const elapsed = () => Number(process.hrtime.bigint() - t0) / 1e6, feeds = [], warm = [];
    for (const m of models) {
      if (sessions.length >= 2 && elapsed() > budget / 2) break; // big models on a busy machine
      const s = await open(m, k), f = feedsFor(s, dir), t = [];
      sessions.push(s);
      feeds.push(f);
      await runs(s, f, 1, 0, []);
      await runs(s, f, 1, 0, t);
      warm.push(t[0]);
    }
    const round = warm.reduce((a, b) => a + b, 0);
    const left = budget - elapsed();
    const rounds = Math.min(15, Math.max(2, Math.floor(left / Math.max(round, 1e-3))));
    const t = sessions.map(() => []);
    for (let r = 0; r < rounds; r++)
      for (let j = 0; j < sessions.length; j++) {
        const i = (r + j) % sessions.length;
        await runs(sessions[i], feeds[i], 1, 0, t[i]);
      }
    // a round's runs are next to each other in time: each model's run over
    // model 0's in the same round shares that round's load
    const ratio = (i) => median(t[i].map((v, r) => v / t[0][r]));
    return models.map((_, i) => (i < t.length ? [median(t[i]), least(t[i]), ratio(i)].map((v) => +v.toFixed(4)).join(' ')
      : 'nan nan nan')).concat([rounds]).join('\t');
  } finally {
    for (const s of sessions.reverse()) await release(s);
  }
}

async function compare(a, b, dir, n) {
  const k = Math.max(1, count(n, 'threads'));
  const outs = [];
  for (const model of [a, b]) {
    const s = await open(model, k);
    try {
      const res = await s.run(feedsFor(s, dir));
      outs.push(s.outputNames.map((name) => [name, res[name]]));
    } catch (e) {
      throw new Error(`${model}: ${oneLine(e.message)}`);
    } finally {
      await release(s);
    }
  }
  let worst = 0, where = '-';
  if (outs[0].length !== outs[1].length) throw new Error('the models have different output counts');
  for (let o = 0; o < outs[0].length; o++) {
    const [name, x] = outs[0][o], y = outs[1][o][1];
    if (!y || x.data.length !== y.data.length || String(x.dims) !== String(y.dims))
      throw new Error(`output '${name}': shapes differ (${x.dims} vs ${y ? y.dims : 'none'})`);
    let big = 1;
    for (let i = 0; i < x.data.length; i++) big = Math.max(big, Math.abs(Number(x.data[i])) || 0);
    for (let i = 0; i < x.data.length; i++) {
      const u = Number(x.data[i]), v = Number(y.data[i]);
      let e;
      if (Number.isNaN(u) || Number.isNaN(v)) e = Number.isNaN(u) && Number.isNaN(v) ? 0 : Infinity;
      else if (!Number.isFinite(u) || !Number.isFinite(v)) e = u === v ? 0 : Infinity;
      else e = Math.abs(u - v) / (1e-4 * big + 1e-3 * Math.abs(u));
      if (e > worst) { worst = e; where = name; }
    }
  }
  return `${worst}\t${sanitize(where)}`;
}

async function run(model, inDir, outDir) {
  const session = await open(model, threads);
  try {
    const feeds = feedsFor(session, inDir);
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
    await release(session);
  }
}

// request name -> [field count, handler]
const REQUESTS = {
  run: [4, (f) => run(f[1], f[2], f[3]).then(() => '')],
  time: [5, (f) => time(f[1], f[2], f[3], f[4])],
  pair: [-7, (f) => pair(f[1], f[2], f[3], f[4], f[5], f[6], f[7])], // BUDGET_MS optional
  compare: [5, (f) => compare(f[1], f[2], f[3], f[4])],
  rank: [-6, (f) => rank(f[1], f[2], f[3], f.slice(4))], // -N: N fields or more
};

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
    const req = REQUESTS[f[0]];
    if (!req || (req[0] > 0 ? f.length !== req[0] : f.length < -req[0])) {
      out(`error\tbad request '${oneLine(line).slice(0, 200)}' (expected run<TAB>MODEL<TAB>INPUT_DIR<TAB>OUTPUT_DIR, or time, pair, rank, compare: see serve.js)`);
      continue;
    }
    try {
      const r = await req[1](f);
      out(r ? `ok\t${r}` : 'ok');
    } catch (e) {
      out(`error\t${oneLine(e && e.message ? e.message : e)}`);
    }
  }
}

main().catch((e) => {
  process.stderr.write(`serve.js: internal error: ${oneLine(e && e.stack ? e.stack : e)}\n`);
  process.exit(1);
});
