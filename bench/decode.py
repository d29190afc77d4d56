#!/usr/bin/python3
"""Greedy generation with a key/value-cache decoder: tsopt against ONNX Runtime.

    bench/decode.py [--model M.onnx] [--batches 1,4] [--prompt-len 32] [--new 64] [--rounds R]
                    [--threads T] [--vocab V] [--out BENCHMARKS.md] [--lib libtsopt.so]

The model is tools/export_decoder.py's (default: exported once into
build/decode/decoder.onnx: 6 layers, d_model 512, 8 heads, vocabulary 8,000,
seed 0).  For each batch: a seeded random prompt; tsopt's loop (Python,
tsopt.InferenceSession, in a child process) and ONNX Runtime's
(tools/ort/generate.js, node) alternately, R rounds each.  Both feed the
prompt with empty past tensors, then each step's token (argmax of the last
position's logits) with the step's present_* as the next past_*.  The
generated tokens must be identical (exit 1 otherwise).

Reported per engine: ms per generated token (median over the steps of a
round, median over rounds), the prompt's run (median over rounds), and peak
memory: the largest VmHWM of the engine's process over the rounds minus that
of the same process that only loaded its runtime (python3 + tsopt, node +
onnxruntime-node).  Writes the "## Decoder generation" section of --out
(omit --out to only print; not written when tokens differ).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = '## Decoder generation'


def peak_rss():
    with open('/proc/self/status') as f:
        return int(re.search(r'VmHWM:\s*(\d+)', f.read()).group(1)) * 1024


def tsopt_generate(model, prompt_path, n, threads, tokens_path=None, logits_path=None):
    """The tsopt loop (runs in the child): the same protocol as generate.js."""
    import time
    import numpy as np
    import tsopt
    base = peak_rss()
    ids = np.load(prompt_path)
    opts = tsopt.SessionOptions()
    opts.intra_op_num_threads = threads
    s = tsopt.InferenceSession(model, opts)
    past = [a for a in s.get_inputs() if a.name.startswith('past_')]
    outs = [a.name for a in s.get_outputs()]
    b = ids.shape[0]
    feed = {p.name: np.zeros((b, p.shape[1], 0, p.shape[3]), np.float32) for p in past}
    feed['input_ids'] = ids
    tokens, logits, steps, prompt_ms = [], [], [], 0.0
    for step in range(n):
        t0 = time.perf_counter()
        r = dict(zip(outs, s.run(None, feed)))
        ms = (time.perf_counter() - t0) * 1e3
        if step == 0:
            prompt_ms = ms
        else:
            steps.append(ms)
        last = r['logits'][:, -1, :]
        nxt = last.argmax(axis=1).astype(np.int64)
        tokens.append(nxt)
        logits.append(last.copy())
        feed = {p.name: r[p.name.replace('past_', 'present_')] for p in past}
        feed['input_ids'] = nxt.reshape(b, 1)
    if tokens_path:
        np.save(tokens_path, np.stack(tokens, axis=1))
    if logits_path:
        np.save(logits_path, np.stack(logits))
    return {'prompt_ms': prompt_ms, 'step_ms': steps, 'peak_rss_bytes': peak_rss(), 'base_rss_bytes': base,
            'plan_builds': s.plan_builds, 'plan_rebinds': getattr(s, 'plan_rebinds', 0)}


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f'decode.py: {" ".join(cmd)} failed: {r.stderr.strip()[-800:]}')
    return json.loads(r.stdout.strip().splitlines()[-1])


def node_base_rss():
    code = ("require('onnxruntime-node');const m=/VmHWM:\\s*(\\d+)/.exec(require('fs').readFileSync("
            "'/proc/self/status','utf8'));console.log(JSON.stringify({rss:Number(m[1])*1024}))")
    return run_json(['node', '-e', code], env=dict(os.environ, NODE_PATH=os.path.join(ROOT, 'tools/ort/node_modules')))['rss']


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model')
    ap.add_argument('--batches', default='1,4')
    ap.add_argument('--prompt-len', type=int, default=32)
    ap.add_argument('--new', type=int, default=64)
    ap.add_argument('--vocab', type=int, default=8000, help='prompt ids are drawn below this')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--threads', type=int, default=0)
    ap.add_argument('--out')
    ap.add_argument('--lib', help='libtsopt.so to use (default: the tsopt package\'s search)')
    ap.add_argument('--child', nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:  # model prompt n threads tokens logits
        sys.path.insert(0, os.path.join(ROOT, 'python'))
        m, p, n, t, tok, lg = a.child
        print(json.dumps(tsopt_generate(m, p, int(n), int(t), tok, lg if lg != '-' else None)))
        return 0
    import numpy as np
    threads = a.threads or os.cpu_count()
    model = a.model
    if not model:
        model = os.path.join(ROOT, 'build', 'decode', 'decoder.onnx')
        if not os.path.exists(model):
            os.makedirs(os.path.dirname(model), exist_ok=True)
            subprocess.run(['/usr/bin/python3', os.path.join(ROOT, 'tools/export_decoder.py'), model], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ)
    if a.lib:
        env['TSOPT_LIBRARY'] = os.path.abspath(a.lib)
    node_base = node_base_rss()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for b in [int(x) for x in a.batches.split(',')]:
            rng = np.random.default_rng(b)
            prompt = os.path.join(tmp, f'prompt{b}.npy')
            np.save(prompt, rng.integers(0, a.vocab, (b, a.prompt_len), dtype=np.int64))
            res = {'tsopt': [], 'ort': []}
            for r in range(a.rounds):
                tt, to = os.path.join(tmp, f't{b}_{r}.npy'), os.path.join(tmp, f'o{b}_{r}.npy')
                res['tsopt'].append(run_json([sys.executable, os.path.abspath(__file__), '--child', model, prompt,
                                              str(a.new), str(threads), tt, '-'], env=env))
                res['ort'].append(run_json(['node', os.path.join(ROOT, 'tools/ort/generate.js'), model, '--prompt', prompt,
                                            '--new', str(a.new), '--threads', str(threads), '--save-tokens', to]))
                same = np.array_equal(np.load(tt), np.load(to))
                ok &= same
                if not same:
                    print(f'batch {b} round {r}: tokens differ\n tsopt {np.load(tt).tolist()}\n ort   {np.load(to).tolist()}',
                          file=sys.stderr)
            row = {'batch': b, 'same': ok}
            for eng, runs in res.items():
                row[eng + '_step'] = statistics.median(statistics.median(x['step_ms']) for x in runs)
                row[eng + '_prompt'] = statistics.median(x['prompt_ms'] for x in runs)
                base = runs[0].get('base_rss_bytes', node_base)
                row[eng + '_mem'] = (max(x['peak_rss_bytes'] for x in runs) - base) / 2**20
            row['plan_builds'] = res['tsopt'][0].get('plan_builds')
            row['plan_rebinds'] = res['tsopt'][0].get('plan_rebinds', 0)
            rows.append(row)
            print(f"batch {b}: ms/token tsopt {row['tsopt_step']:.2f} ort {row['ort_step']:.2f} "
                  f"(ratio {row['tsopt_step'] / row['ort_step']:.2f}); prompt tsopt {row['tsopt_prompt']:.1f} "
                  f"ort {row['ort_prompt']:.1f} ms; peak MiB tsopt {row['tsopt_mem']:.0f} ort {row['ort_mem']:.0f}; "
                  f"plan builds {row['plan_builds']}, re-binds {row['plan_rebinds']}; tokens {'identical' if row['same'] else 'DIFFER'}", flush=True)
    if a.out and ok:  # the section says the tokens were identical
        write_section(a, rows, threads)
    return 0 if ok else 1


def write_section(a, rows, threads):
    load = os.getloadavg()[0]
    lines = [SECTION, '',
             f'`bench/decode.py --rounds {a.rounds} --threads {threads}` ({datetime.date.today()}, load {load:.1f} at the end): '
             f'tools/export_decoder.py\'s decoder (6 layers, d_model 512, 8 heads, vocabulary 8,000, seed 0), greedy, '
             f'{a.prompt_len}-token prompt then {a.new} tokens, tsopt (Python InferenceSession) and ONNX Runtime '
             f'(tools/ort/generate.js) alternately; tokens identical in every round. ms/token: median over the steps of '
             f'a round, median over rounds; peak memory above the bare runtime process.', '',
             '| batch | tsopt ms/token | ORT ms/token | tsopt/ORT | tsopt prompt ms | ORT prompt ms | tsopt peak MiB | ORT peak MiB | tsopt plan builds |',
             '|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['batch']} | {r['tsopt_step']:.2f} | {r['ort_step']:.2f} | {r['tsopt_step'] / r['ort_step']:.2f} | "
                     f"{r['tsopt_prompt']:.1f} | {r['ort_prompt']:.1f} | {r['tsopt_mem']:.0f} | {r['ort_mem']:.0f} | "
                     f"{r['plan_builds']} |")
    text = open(a.out).read() if os.path.exists(a.out) else ''
    block = '\n'.join(lines) + '\n'
    m = re.search(r'^## Decoder generation\n.*?(?=^## |\Z)', text, flags=re.S | re.M)
    text = text[:m.start()] + block + '\n' + text[m.end():] if m else text.rstrip('\n') + '\n\n' + block
    with open(a.out, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
