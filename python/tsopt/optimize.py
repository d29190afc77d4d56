"""tsopt.optimize: `tsopt optimize SRC -o DST --json` as a function, through
the same library call (ts_optimize, via ts_optimize_file)."""
import ctypes
import json
import os
import tempfile

import numpy as np

from . import _lib


def _text(v):
    if isinstance(v, bool):
        return '1' if v else '0'
    if isinstance(v, float):
        return repr(v)
    return str(v)


def optimize(src, dst, time_limit=None, transforms=None, *, inputs=None, rules=None, alpha=None, budget=None,
             seed=None, min_gain=None, max_memory_mb=None, cost_cache=None, cost_model=None, no_timing=None,
             progress=None, check_inputs=None, allow_growth=None, external_data=None, target=None,
             threads=None):
    """Optimizes the ONNX model src and writes the result to dst.

    Returns the dict `tsopt optimize --json` prints (docs/optimize.md):
    'written' ('optimized' or 'original'), 'cost_before_ms', 'cost_after_ms',
    'latency_before_ms', 'latency_after_ms', 'applied', 'search_s',
    'peak_rss_mb', 'check', ...  Options left None take the command's
    defaults (time_limit 30 s, every transformation source, ...);
    inputs={'name': shape} binds dynamic dimensions as --input does.
    check_inputs is --inputs: the whole-model check and the timing run on
    these inputs instead of random ones (a loop's trip count, a branch, as
    the data take them): a folder of NAME.npy, or a dict name -> array;
    their shapes bind the symbolic dimensions inputs leaves free, so the
    search runs at those sizes.
    allow_growth=True is --allow-growth (write a result whose weights grew
    by more than 10%); external_data=True is --external-data (the weights
    in DST.data beside DST; automatic past protobuf's 2 GiB).
    target='ort' is --target ort (optimize for ONNX Runtime: candidates
    timed there, latencies ONNX Runtime's); threads is --threads.
    Raises TsoptError with tsopt's message on bad options or models.
    """
    opts = {'time_limit': time_limit, 'transforms': transforms, 'rules': rules, 'alpha': alpha, 'budget': budget,
            'seed': seed, 'min_gain': min_gain, 'max_memory_mb': max_memory_mb, 'cost_cache': cost_cache,
            'cost_model': cost_model, 'no_timing': no_timing, 'progress': progress, 'allow_growth': allow_growth,
            'external_data': external_data, 'target': target, 'threads': threads}
    if isinstance(transforms, (list, tuple)):
        opts['transforms'] = ','.join(transforms)
    for k in ('rules', 'cost_cache'):
        if opts[k] is not None:
            opts[k] = os.fspath(opts[k])
    if isinstance(check_inputs, dict):
        # the library reads a folder: the arrays are written there as .npy
        with tempfile.TemporaryDirectory(prefix='tsopt-inputs-') as d:
            for name, a in check_inputs.items():
                if os.sep in name or name in ('', '.', '..'):
                    raise ValueError(f'check_inputs: {name!r} is not a usable input name')
                np.save(os.path.join(d, name + '.npy'), np.asarray(a))
            return _optimize(src, dst, opts, inputs, d)
    return _optimize(src, dst, opts, inputs, None if check_inputs is None else os.fspath(check_inputs))


def _optimize(src, dst, opts, inputs, check_dir):
    if check_dir is not None:
        opts = dict(opts, inputs=check_dir)
    texts = [f'{k}={_text(v)}'.encode() for k, v in opts.items() if v is not None]
    options = (ctypes.c_char_p * max(1, len(texts)))(*texts)
    binds = list((inputs or {}).items())
    barr = (_lib.InputBind * max(1, len(binds)))()
    for i, (name, dims) in enumerate(binds):
        barr[i].name = name.encode()
        barr[i].shape = _lib.shape(dims)
    out = ctypes.c_void_p()
    err = _lib.Error()
    status = _lib.lib.ts_optimize_file(os.fsencode(os.fspath(src)), os.fsencode(os.fspath(dst)), barr, len(binds),
                                       options, len(texts), ctypes.byref(out), ctypes.byref(err))
    _lib.check(status, err)
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        _lib.lib.ts_free(out)
