"""tsopt.InferenceSession against ONNX Runtime (tools/ort/run.js; Debian has
no Python onnxruntime) on a torchvision ResNet-18 exported with a dynamic
batch ('batch') and run at batch 2; then tsopt.optimize on it: the dict of
`tsopt optimize --json`, and the written model still runs at batch 2 with
the same outputs.  The export is cached in $TSOPT_BUILD/models (shared with
tests/models/torchvision.sh).  Run by python_api.sh."""
import os
import subprocess
import sys
import tempfile

import numpy as np

import tsopt

SRC = os.environ['TSOPT_SRC']
BUILD = os.environ['TSOPT_BUILD']
ORT_RUN = os.environ.get('ORT_RUN', os.path.join(SRC, 'tools', 'ort', 'run.js'))


def log(*a):
    print(*a, flush=True)


def close(a, b, what):
    # atol scaled by the output's magnitude, as tests/models/torchvision.sh
    atol = 1e-4 * min(1.0, float(np.abs(b).max()))
    err = np.abs(a - b) - (atol + 1e-3 * np.abs(b))
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert err.max() <= 0, f'{what}: max |a-b| {np.abs(a - b).max():.3g} over tolerance'
    log(f'   {what}: max |a-b| {np.abs(a - b).max():.3g} (max |b| {np.abs(b).max():.3g})')


def main():
    model = os.path.join(BUILD, 'models', 'resnet18-op11.onnx')
    os.makedirs(os.path.dirname(model), exist_ok=True)
    if not os.path.exists(model):
        log('-- export resnet18 (dynamic batch)')
        subprocess.run([sys.executable, os.path.join(SRC, 'tools', 'export_torchvision.py'), 'resnet18', model,
                        '--opset', '11'], check=True, stdout=subprocess.DEVNULL)
    t = tempfile.mkdtemp(prefix='tsopt-ort-')

    log('-- tsopt.InferenceSession at batch 2')
    sess = tsopt.InferenceSession(model)
    [inp] = sess.get_inputs()
    assert (inp.name, inp.shape, inp.type) == ('input', ['batch', 3, 224, 224], 'tensor(float)'), inp
    assert sess.get_outputs()[0].shape == ['batch', 1000], sess.get_outputs()[0]
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    [y] = sess.run(None, {'input': x})
    assert y.shape == (2, 1000), y.shape

    log('-- ONNX Runtime on the same input')
    os.makedirs(os.path.join(t, 'in'))
    np.save(os.path.join(t, 'in', 'input.npy'), x)
    subprocess.run(['node', ORT_RUN, model, '--inputs', os.path.join(t, 'in'), '--save-outputs',
                    os.path.join(t, 'ort')], check=True, stdout=subprocess.DEVNULL)
    ort = np.load(os.path.join(t, 'ort', 'output.npy'))
    close(y, ort, 'tsopt vs ORT, batch 2')

    log('-- batch 1 then 2 again (re-planned, then the kept plan)')
    [y1] = sess.run(['output'], {'input': x[:1]})
    close(y1, ort[:1], 'batch 1')
    [y2] = sess.run(None, {'input': x})
    assert np.array_equal(y2, y)

    log('-- tsopt.optimize, then the written model at batch 2')
    dst = os.path.join(t, 'opt.onnx')
    r = tsopt.optimize(model, dst, time_limit=5, transforms='taso', no_timing=True, cost_model='roofline',
                       cost_cache=os.path.join(t, 'costs.tsv'))
    for k in ('written', 'cost_before_ms', 'cost_after_ms', 'latency_before_ms', 'latency_after_ms', 'applied',
              'search_s', 'peak_rss_mb', 'check'):
        assert k in r, k
    log(f"   written: {r['written']} ({r['reason']})")
    opt = tsopt.InferenceSession(dst)
    assert opt.get_inputs()[0].shape == ['batch', 3, 224, 224], opt.get_inputs()[0].shape
    [yo] = opt.run(None, {'input': x})
    close(yo, ort, 'optimized model vs ORT, batch 2')
    log('ok')


if __name__ == '__main__':
    main()
