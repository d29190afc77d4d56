#!/usr/bin/env python3
"""The facts of issue 19 ("any valid ONNX model"), measured, in one run:

  1. control-flow models of our own making (tests/models/make_control_flow.py:
     torch.jit.script exports at opsets 15-18, float16 inside a branch, a
     Scan with a nested If, an opset-8 batched Scan, ...): `tsopt run` (fast
     runtime and --reference) against ONNX Runtime, and `tsopt optimize`'s
     output run by ONNX Runtime against the original's outputs;
  2. the ONNX backend suite's If/Loop/Scan cases: tsopt's session (the
     Python package; test_loop11's trip count is an input, so the loop is
     unrolled at the run's values) and ONNX Runtime against the expected
     outputs, and `tsopt run` where the model's shapes do not depend on
     input values;
  3. a custom-domain node between supported operators (float16 around it):
     optimize keeps it, its domain and opset import, and rewrites around it;
  4. optimize --inputs on a Loop whose trip count is an input: the check
     and the timing both use the user's inputs (random ones cannot run it);
  5. with --big: a model of more than 2 GiB of weights in external data
     (tests/models/make_big_model.py, deleted afterwards): `tsopt run` peak
     memory (VmHWM) against the weights' size W, and optimize writing it
     back with external data, ONNX Runtime running the result.

    bench/any_model_facts.py [--big] [--tsopt PATH] [--keep DIR]

Prints one line per fact and a summary; exits non-zero when a fact fails.
Needs torch, onnx and tools/ort (onnxruntime-node), as make test does.  The
--big part writes ~4.5 GiB under a temporary folder and takes a few minutes
(ONNX Runtime loads the 2.25 GiB twice); it is not part of make test.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(SRC, 'tools', 'ort', 'run.js')
RTOL, ATOL = 1e-3, 1e-4
BACKEND = '/usr/share/libonnx-testdata/data/node'
CF_CASES = ['test_if', 'test_loop11', 'test_scan_sum', 'test_scan9_sum', 'test_range_float_type_positive_delta_expanded',
            'test_range_int32_type_negative_delta_expanded']

failures = []


def fact(ok, text):
    print(('ok    ' if ok else 'FAIL  ') + text, flush=True)
    if not ok:
        failures.append(text)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def load_dir(d):
    return {os.path.basename(p)[:-4]: np.load(p) for p in sorted(glob.glob(os.path.join(d, '*.npy')))}


def max_err(a, b):
    """Largest |a - b| and whether every value is within rtol/atol (NaN only against NaN)."""
    worst, ok = 0.0, a.keys() == b.keys()
    for k in a.keys() & b.keys():
        x, y = a[k], b[k]
        if x.shape != y.shape:
            return float('inf'), False
        if x.dtype == bool or np.issubdtype(x.dtype, np.integer):
            ok &= bool(np.array_equal(x, y))
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        d = np.where(both_nan, 0, np.abs(x - y))
        if d.size:
            worst = max(worst, float(np.nanmax(d)))
        ok &= bool(np.all(both_nan | (d <= ATOL + RTOL * np.abs(y))))
    return worst, ok


def ort(model, inputs, out):
    r = sh(['node', ORT_RUN, model, '--inputs', inputs, '--save-outputs', out, '--threads', '1'])
    if r.returncode:
        raise RuntimeError('ONNX Runtime: ' + (r.stderr or r.stdout).strip().splitlines()[-1])
    return load_dir(out)


def tsopt_run(tsopt, model, inputs, out, *extra):
    r = sh([tsopt, 'run', model, '--inputs', inputs, '--save-outputs', out, *extra])
    if r.returncode:
        raise RuntimeError('tsopt run: ' + r.stderr.strip())
    return load_dir(out)


def control_flow_models(tsopt, d):
    print('== control-flow models of our own making (tests/models/make_control_flow.py)')
    r = sh([sys.executable, os.path.join(SRC, 'tests', 'models', 'make_control_flow.py'), d])
    if r.returncode:
        fact(False, 'make_control_flow.py: ' + r.stderr.strip()[-300:])
        return
    import onnx
    for name in open(os.path.join(d, 'models.txt')).read().split():
        m, ins = os.path.join(d, name + '.onnx'), os.path.join(d, name + '.in')
        binds = []
        if os.path.exists(os.path.join(d, name + '.binds')):
            for b in open(os.path.join(d, name + '.binds')).read().split():
                binds += ['--input', b]
        model = onnx.load(m)
        opset = [o.version for o in model.opset_import if o.domain in ('', 'ai.onnx')][0]
        ops = sorted({n.op_type for n in model.graph.node} & {'If', 'Loop', 'Scan'})
        f16 = 'float16' if 'FLOAT16' in str(model.graph) or 'data_type: 10' in str(model.graph) else ''
        try:
            ref = ort(m, ins, os.path.join(d, name + '.ort'))
            fast = tsopt_run(tsopt, m, ins, os.path.join(d, name + '.fast'), *binds)
            interp = tsopt_run(tsopt, m, ins, os.path.join(d, name + '.ref'), '--reference', *binds)
            e1, ok1 = max_err(fast, ref)
            e2, ok2 = max_err(interp, ref)
            o = os.path.join(d, name + '.opt.onnx')
            r = sh([tsopt, 'optimize', m, '-o', o, *binds, '--cost-model', 'roofline', '--no-timing', '--budget', '20',
                    '--time-limit', '5', '--inputs', ins, '--json'])
            if r.returncode:
                raise RuntimeError('tsopt optimize: ' + r.stderr.strip())
            j = json.loads(r.stdout)
            e3, ok3 = max_err(ort(o, ins, os.path.join(d, name + '.ort_opt')), ref)
            fact(ok1 and ok2 and ok3,
                 f'{name:16s} opset {opset:2d} {",".join(ops):8s} {f16:7s} run vs ORT: max|err| fast {e1:.2e}, '
                 f'reference {e2:.2e}; optimize wrote {j["written"]} (passes {j["applied"].get("passes", 0)}), '
                 f'ORT on it vs original: {e3:.2e}')
        except RuntimeError as ex:
            fact(False, f'{name}: {ex}')


def backend_cases(tsopt, d):
    print('== the backend suite\'s If/Loop/Scan cases (libonnx-testdata, ONNX 1.12)')
    if not os.path.isdir(BACKEND):
        fact(False, f'{BACKEND} is missing (make deps)')
        return
    import onnx
    from onnx import numpy_helper
    sys.path.insert(0, os.path.join(SRC, 'python'))
    import tsopt as tsopt_py
    for case in CF_CASES:
        cd = os.path.join(BACKEND, case)
        m = onnx.load(os.path.join(cd, 'model.onnx'))
        in_names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
        out_names = [o.name for o in m.graph.output]
        for ds in sorted(glob.glob(os.path.join(cd, 'test_data_set_*'))):
            read = lambda p: numpy_helper.to_array(onnx.load_tensor(p))
            feed = {n: read(os.path.join(ds, f'input_{i}.pb')) for i, n in enumerate(in_names)}
            want = {n: read(os.path.join(ds, f'output_{i}.pb')) for i, n in enumerate(out_names)}
            ins = os.path.join(d, case + '.in')
            os.makedirs(ins, exist_ok=True)
            for k, v in feed.items():
                np.save(os.path.join(ins, k + '.npy'), v)
            try:
                got = dict(zip(out_names, tsopt_py.InferenceSession(os.path.join(cd, 'model.onnx')).run(None, feed)))
                e1, ok1 = max_err(got, want)
                ref = ort(os.path.join(cd, 'model.onnx'), ins, os.path.join(d, case + '.ort'))
                e2, ok2 = max_err(ref, want)
                e3, ok3 = max_err(got, ref)
                r = sh([tsopt, 'run', os.path.join(cd, 'model.onnx'), '--inputs', ins, '--save-outputs',
                        os.path.join(d, case + '.fast')])
                if r.returncode:
                    cli = 'tsopt run refuses: ' + r.stderr.strip()[:110]
                    ok4 = 'must be a constant' in r.stderr  # a shape from an input's value: the session's case
                else:
                    e4, ok4 = max_err(load_dir(os.path.join(d, case + '.fast')), want)
                    cli = f'tsopt run vs expected {e4:.2e}'
                fact(ok1 and ok2 and ok3 and ok4,
                     f'{case:46s} session vs expected {e1:.2e}, ORT vs expected {e2:.2e}, session vs ORT {e3:.2e}; '
                     f'{cli}')
            except Exception as ex:  # noqa: BLE001 - a fact that failed, said in one line
                fact(False, f'{case}: {ex}')


def custom_domain(tsopt, d):
    print('== a custom-domain node between supported operators')
    import onnx
    from onnx import helper, numpy_helper, TensorProto as TP
    rng = np.random.default_rng(2)
    f32 = lambda n, a: numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [f32('w', rng.standard_normal((4, 3, 3, 3)) * 0.3), f32('s', 1 + rng.random(4)), f32('o', rng.random(4)),
             f32('m', rng.random(4) * 0.1), f32('v', 0.5 + rng.random(4)),
             f32('w2', rng.standard_normal((4, 4, 1, 1)) * 0.3), f32('s2', 1 + rng.random(4)),
             f32('o2', rng.random(4)), f32('m2', rng.random(4) * 0.1), f32('v2', 0.5 + rng.random(4)),
             numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float16).reshape(4, 1, 1), 'w16')]
    nodes = [helper.make_node('Conv', ['x', 'w'], ['c'], pads=[1, 1, 1, 1]),
             helper.make_node('BatchNormalization', ['c', 's', 'o', 'm', 'v'], ['b']),
             helper.make_node('Cast', ['b'], ['h'], to=TP.FLOAT16), helper.make_node('Mul', ['h', 'w16'], ['hw']),
             helper.make_node('MyOp', ['hw'], ['u'], domain='com.example', name='custom', gain=0.5),
             helper.make_node('Cast', ['u'], ['uf'], to=TP.FLOAT), helper.make_node('Conv', ['uf', 'w2'], ['c2']),
             helper.make_node('BatchNormalization', ['c2', 's2', 'o2', 'm2', 'v2'], ['y'])]
    g = helper.make_graph(nodes, 'custom', [helper.make_tensor_value_info('x', TP.FLOAT, ['batch', 3, 8, 8])],
                          [helper.make_tensor_value_info('y', TP.FLOAT, ['batch', 4, 8, 8])], inits,
                          value_info=[helper.make_tensor_value_info('u', TP.FLOAT16, ['batch', 4, 8, 8])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17), helper.make_opsetid('com.example', 1)])
    model.ir_version = 8
    src, dst = os.path.join(d, 'custom.onnx'), os.path.join(d, 'custom.opt.onnx')
    onnx.save(model, src)
    r = sh([tsopt, 'optimize', src, '-o', dst, '--cost-model', 'roofline', '--no-timing', '--budget', '20',
            '--min-gain', '0', '--json'])
    if r.returncode:
        fact(False, 'custom: optimize failed: ' + r.stderr.strip())
        return
    j = json.loads(r.stdout)
    out = onnx.load(dst)
    kept = [n for n in out.graph.node if n.name == 'custom']
    ops = [n.op_type for n in out.graph.node]
    imports = sorted((o.domain, o.version) for o in out.opset_import)
    ok = (j['written'] == 'optimized' and len(kept) == 1 and kept[0].domain == 'com.example' and
          ('com.example', 1) in imports and ops.count('BatchNormalization') < 2)  # a Conv+BN folded, at least
    fact(ok, f'custom: optimize wrote {j["written"]} ({j["check"]["regions"]} regions checked, whole model '
             f'{j["check"]["whole_model"]}); nodes {j["nodes_before"]} -> {j["nodes_after"]} '
             f'({", ".join(ops)}); node kept: {kept[0].domain}::{kept[0].op_type} gain={kept[0].attribute[0].f}; '
             f'opset imports {imports}' if kept else 'custom: the node was not kept')
    r = sh([tsopt, 'run', dst, '--input', 'x:1x3x8x8'])
    fact(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "node 'custom'" in r.stderr,
         'custom: tsopt run says: ' + r.stderr.strip())


def user_inputs(tsopt, d):
    print('== optimize --inputs: the check and the timing on the user\'s inputs')
    m, ins = os.path.join(d, 'loop_data_op16.onnx'), os.path.join(d, 'loop_data_op16.in')
    if not os.path.exists(m):
        fact(False, 'loop_data_op16.onnx was not built')
        return
    base = [tsopt, 'optimize', m, '--cost-model', 'roofline', '--budget', '20', '--time-limit', '2', '--min-gain', '0',
            '--json']
    r = sh(base + ['-o', os.path.join(d, 'ld.rand.onnx')])
    fact(r.returncode != 0 and 'Loop' in r.stderr,
         'random inputs (no --inputs) cannot run it: ' + (r.stderr.strip().splitlines() or ['?'])[-1][:150])
    r = sh(base + ['-o', os.path.join(d, 'ld.user.onnx'), '--inputs', ins])
    if r.returncode:
        fact(False, '--inputs: ' + r.stderr.strip())
        return
    j = json.loads(r.stdout)
    fact(j['check']['inputs'] == 'user' and j['check']['whole_model'],
         f'--inputs: check on {j["check"]["inputs"]} inputs (whole model {j["check"]["whole_model"]}), timing '
         f'{"measured" if j["latency_before_ms"] or j["machine_busy"] else "not run"}: {j["reason"][:120]}')


def vmhwm_of(cmd, stdout_to=None):
    """Runs cmd, returning (returncode, stderr, VmHWM in bytes) from GNU time."""
    r = sh(['/usr/bin/time', '-f', 'MAXRSS %M'] + cmd)
    if stdout_to:
        with open(stdout_to, 'w') as f:
            f.write(r.stdout)
    kb = [int(x.split()[1]) for x in r.stderr.splitlines() if x.startswith('MAXRSS ')]
    return r.returncode, r.stderr, (kb[-1] * 1024 if kb else 0)


def big_model(tsopt, d):
    print('== a model of more than 2 GiB of weights in external data')
    bd = os.path.join(d, 'big')
    r = sh([sys.executable, os.path.join(SRC, 'tests', 'models', 'make_big_model.py'), bd])
    if r.returncode:
        fact(False, 'make_big_model.py: ' + r.stderr.strip()[-300:])
        return
    m = os.path.join(bd, 'big.onnx')
    W = os.path.getsize(m + '.data')
    ins = os.path.join(bd, 'in')
    os.makedirs(ins)
    np.save(os.path.join(ins, 'x.npy'), np.random.default_rng(0).standard_normal((1, 8192)).astype(np.float32))
    rc, err, peak = vmhwm_of([tsopt, 'run', m, '--inputs', ins, '--save-outputs', os.path.join(bd, 'tsopt.out')])
    fact(rc == 0 and peak < W + 512 * 2**20,
         f'tsopt run: W = {W / 2**30:.3f} GiB, peak (VmHWM) {peak / 2**30:.3f} GiB = W + {(peak - W) / 2**20:.0f} MiB'
         + ('' if rc == 0 else ' ' + err.strip()[-200:]))
    o = os.path.join(bd, 'out', 'big.onnx')
    os.makedirs(os.path.dirname(o))
    rc, err, peak = vmhwm_of([tsopt, 'optimize', m, '-o', o, '--cost-model', 'roofline', '--no-timing', '--budget',
                              '20', '--time-limit', '20', '--json'], os.path.join(bd, 'opt.json'))
    if rc:
        fact(False, 'optimize: ' + err.strip()[-300:])
        return
    with open(os.path.join(bd, 'opt.json')) as f:
        j = json.load(f)
    onnx_size = os.path.getsize(o)
    data = o + '.data'
    fact(onnx_size < 1 << 20 and os.path.exists(data) and os.path.getsize(data) >= W,
         f'optimize (no option: automatic past 2 GiB) wrote the {j.get("written")} graph ({j.get("explored")} '
         f'explored, stop: {j.get("stop")}) as {o} of {onnx_size} bytes and {os.path.getsize(data) / 2**30:.3f} '
         f'GiB of external data; its peak (VmHWM) {peak / 2**30:.3f} GiB')
    try:
        mine = load_dir(os.path.join(bd, 'tsopt.out'))
        a = ort(m, ins, os.path.join(bd, 'ort.orig'))
        shutil.rmtree(os.path.join(bd, 'ort.orig'))
        b = ort(o, ins, os.path.join(bd, 'ort.opt'))
        e1, ok1 = max_err(b, a)
        e2, ok2 = max_err(mine, a)
        fact(ok1 and ok2, f'ORT runs the written model: max|err| vs ORT on the original {e1:.2e}; tsopt run vs ORT '
                          f'{e2:.2e} (y = {float(a["y"].ravel()[0]):.4f}, ...)')
    except RuntimeError as ex:
        fact(False, str(ex))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--big', action='store_true', help='also the >2 GiB model (minutes, ~4.5 GiB of disk)')
    ap.add_argument('--tsopt', default=os.environ.get('TSOPT', os.path.join(SRC, 'build', 'tsopt')))
    ap.add_argument('--keep', help='work in this folder and keep it (default: a temporary one, deleted)')
    a = ap.parse_args()
    os.environ.setdefault('TSOPT_LIBRARY', os.path.join(os.path.dirname(os.path.abspath(a.tsopt)), 'libtsopt.so'))
    d = a.keep or tempfile.mkdtemp(prefix='tsopt-facts-')
    os.makedirs(d, exist_ok=True)
    os.environ.setdefault('TSOPT_CACHE_DIR', os.path.join(d, 'cache'))
    try:
        control_flow_models(a.tsopt, d)
        backend_cases(a.tsopt, d)
        custom_domain(a.tsopt, d)
        user_inputs(a.tsopt, d)
        if a.big:
            big_model(a.tsopt, d)
    finally:
        if a.keep:
            shutil.rmtree(os.path.join(d, 'big'), ignore_errors=True)  # never keep the 4.5 GiB
        else:
            shutil.rmtree(d, ignore_errors=True)
    print(f'{len(failures)} failed' if failures else 'all facts hold')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
