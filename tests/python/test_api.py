"""tsopt's Python package on small models made with onnx.helper: the
onnxruntime-like session (inputs/outputs description, dynamic batch bound
at run time and re-planned, output selection, errors with tsopt's
message), tsopt.optimize (the dict of `tsopt optimize --json`, the written
model still dynamic), the version.  Run by python_api.sh."""
import gc
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import tsopt

TSOPT = os.environ.get('TSOPT')
BUILD = os.environ.get('TSOPT_BUILD', '')


def save(graph, path, opset=13):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


class Models:
    """Builds the test models once, in a temporary folder."""
    d = tempfile.mkdtemp(prefix='tsopt-py-')
    rng = np.random.default_rng(0)

    # y = relu(x @ W + b) * 2, z = x + 1; x: ['N', 8]; unnamed dim in z's declaration
    W = rng.standard_normal((8, 4)).astype(np.float32)
    B = rng.standard_normal((4,)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node('MatMul', ['x', 'W'], ['xw']), helper.make_node('Add', ['xw', 'b'], ['xb']),
         helper.make_node('Relu', ['xb'], ['r']), helper.make_node('Mul', ['r', 'two'], ['y']),
         helper.make_node('Add', ['x', 'one'], ['z'])], 'small',
        [helper.make_tensor_value_info('x', TP.FLOAT, ['N', 8])],
        [helper.make_tensor_value_info('y', TP.FLOAT, ['N', 4]),
         helper.make_tensor_value_info('z', TP.FLOAT, [None, 8])],
        [helper.make_tensor('W', TP.FLOAT, W.shape, W.flatten()), helper.make_tensor('b', TP.FLOAT, B.shape, B),
         helper.make_tensor('two', TP.FLOAT, [], [2.0]), helper.make_tensor('one', TP.FLOAT, [], [1.0])])
    small = os.path.join(d, 'small.onnx')
    save(g, small)

    # two MatMuls sharing a weight: the shared-weight merge applies (at a static batch)
    WS = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node('MatMul', ['x0', 'W'], ['a0']), helper.make_node('MatMul', ['x1', 'W'], ['a1']),
         helper.make_node('Tanh', ['a0'], ['t0']), helper.make_node('Tanh', ['a1'], ['t1']),
         helper.make_node('Add', ['t0', 't1'], ['y'])], 'shared',
        [helper.make_tensor_value_info('x0', TP.FLOAT, [1, 256]), helper.make_tensor_value_info('x1', TP.FLOAT, [1, 256])],
        [helper.make_tensor_value_info('y', TP.FLOAT, [1, 256])],
        [helper.make_tensor('W', TP.FLOAT, WS.shape, WS.flatten())])
    shared = os.path.join(d, 'shared.onnx')
    save(g, shared)

    # fixed shape, int64 and bool inputs
    g = helper.make_graph(
        [helper.make_node('Add', ['i', 'i'], ['i2']), helper.make_node('Not', ['m'], ['nm'])], 'fixed',
        [helper.make_tensor_value_info('i', TP.INT64, [2, 3]), helper.make_tensor_value_info('m', TP.BOOL, [4])],
        [helper.make_tensor_value_info('i2', TP.INT64, [2, 3]), helper.make_tensor_value_info('nm', TP.BOOL, [4])])
    fixed = os.path.join(d, 'fixed.onnx')
    save(g, fixed)

    # float16 in and out: y = relu(x @ W16) + x[:, :4]
    W16 = (rng.standard_normal((8, 4)) / 4).astype(np.float16)
    g = helper.make_graph(
        [helper.make_node('MatMul', ['x', 'W'], ['xw']), helper.make_node('Relu', ['xw'], ['r']),
         helper.make_node('Slice', ['x', 'st', 'en', 'ax'], ['xs']), helper.make_node('Add', ['r', 'xs'], ['y'])],
        'half', [helper.make_tensor_value_info('x', TP.FLOAT16, ['N', 8])],
        [helper.make_tensor_value_info('y', TP.FLOAT16, ['N', 4])],
        [numpy_helper.from_array(W16, 'W'),
         helper.make_tensor('st', TP.INT64, [1], [0]), helper.make_tensor('en', TP.INT64, [1], [4]),
         helper.make_tensor('ax', TP.INT64, [1], [1])])
    half = os.path.join(d, 'half.onnx')
    save(g, half)

    @classmethod
    def small_ref(cls, x):
        return np.maximum(x @ cls.W + cls.B, 0) * 2, x + 1


class SessionTest(unittest.TestCase):
    def test_io_description(self):
        s = tsopt.InferenceSession(Models.small)
        [i] = s.get_inputs()
        self.assertEqual((i.name, i.shape, i.type), ('x', ['N', 8], 'tensor(float)'))
        y, z = s.get_outputs()
        self.assertEqual((y.name, y.shape, y.type), ('y', ['N', 4], 'tensor(float)'))
        self.assertEqual((z.name, z.shape), ('z', [None, 8]))  # unnamed symbolic dimension, as onnxruntime
        f = tsopt.InferenceSession(Models.fixed)
        self.assertEqual([(a.name, a.shape, a.type) for a in f.get_inputs()],
                         [('i', [2, 3], 'tensor(int64)'), ('m', [4], 'tensor(bool)')])

    def test_dynamic_batch_replans(self):
        s = tsopt.InferenceSession(Models.small, threads=1)
        rng = np.random.default_rng(1)
        # sizes coming back hit the kept plans; more than 4 signatures evict the oldest
        for n in (1, 3, 7, 3, 1, 2, 5, 6, 1):
            x = rng.standard_normal((n, 8)).astype(np.float32)
            y, z = s.run(None, {'x': x})
            ry, rz = Models.small_ref(x)
            self.assertEqual(y.shape, (n, 4))
            np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(z, rz)

    def test_output_names(self):
        s = tsopt.InferenceSession(Models.small)
        x = np.ones((2, 8), np.float32)
        z, y = s.run(['z', 'y'], {'x': x})
        self.assertEqual((z.shape, y.shape), ((2, 8), (2, 4)))
        [z2] = s.run(['z'], {'x': x})
        np.testing.assert_array_equal(z, z2)

    def test_non_contiguous_and_dtypes(self):
        s = tsopt.InferenceSession(Models.small)
        x = np.random.default_rng(2).standard_normal((8, 6)).astype(np.float32).T  # a transposed view
        np.testing.assert_allclose(s.run(['y'], {'x': x})[0], Models.small_ref(x)[0], rtol=1e-5, atol=1e-5)
        f = tsopt.InferenceSession(Models.fixed)
        i = np.arange(6, dtype=np.int64).reshape(2, 3)
        m = np.array([True, False, False, True])
        i2, nm = f.run(None, {'i': i, 'm': m})
        self.assertEqual((i2.dtype, nm.dtype), (np.int64, np.bool_))
        np.testing.assert_array_equal(i2, i + i)
        np.testing.assert_array_equal(nm, ~m)

    def test_float16(self):
        """float16 models take and return numpy float16 arrays (computed as
        ONNX specifies: each operator's result rounded to float16)."""
        s = tsopt.InferenceSession(Models.half)
        self.assertEqual([(a.name, a.shape, a.type) for a in s.get_inputs()], [('x', ['N', 8], 'tensor(float16)')])
        x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float16)
        [y] = s.run(None, {'x': x})
        self.assertEqual((y.dtype, y.shape), (np.float16, (3, 4)))
        want = (np.maximum(x.astype(np.float32) @ Models.W16.astype(np.float32), 0).astype(np.float16) + x[:, :4])
        np.testing.assert_allclose(y.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
        with self.assertRaisesRegex(tsopt.TsoptError, "input 'x' is float32, the model expects float16"):
            s.run(None, {'x': x.astype(np.float32)})

    def test_outputs_outlive_run_and_session(self):
        """run's outputs are arrays over the run's own tensors (their base
        holds the reference): a later run, closing the session and a
        collection leave them intact, and they are writable."""
        s = tsopt.InferenceSession(Models.small, threads=1)
        x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
        y, z = s.run(None, {'x': x})
        s.run(None, {'x': np.zeros((3, 8), np.float32)})
        s.close()
        del s
        gc.collect()
        ry, rz = Models.small_ref(x)
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(z, rz)
        self.assertEqual((y.dtype, y.flags.c_contiguous, y.flags.writeable), (np.float32, True, True))
        z[0, 0] = 7.0
        self.assertEqual(float(z[0, 0]), 7.0)

    def test_outputs_fed_back_are_passed_as_they_are(self):
        """An output array fed back as an input (a decoder's presents as the
        next pasts) is passed to the run as its own tensor, not wrapped
        again; a view of it, or the array with its shape reassigned in place,
        is wrapped as any array (the values each time: z + 1 per run)."""
        from tsopt import _lib
        s = tsopt.InferenceSession(Models.small, threads=1)
        x = np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32)
        one = np.float32(1)
        x1, x2, x3 = x + one, x + one + one, x + one + one + one  # float32 sums, as the run's
        wrap, wraps = _lib.lib.ts_tensor_wrap, []

        def counting(*a):
            wraps.append(a)
            return wrap(*a)
        _lib.lib.ts_tensor_wrap = counting
        try:
            _, z = s.run(None, {'x': x})
            self.assertEqual(len(wraps), 1)  # x, a caller's array
            np.testing.assert_array_equal(z, x1)
            _, z2 = s.run(None, {'x': z})  # z, the run's own: passed as it is
            self.assertEqual(len(wraps), 1)
            np.testing.assert_array_equal(z2, x2)
            _, z3 = s.run(None, {'x': z2[1:]})  # a view: wrapped, one row fewer
            self.assertEqual(len(wraps), 2)
            np.testing.assert_array_equal(z3, x3[1:])
            z2.shape = (6, 4)  # reassigned in place: no longer the tensor's shape
            with self.assertRaisesRegex(tsopt.TsoptError, 'x'):
                s.run(None, {'x': z2})
            self.assertEqual(len(wraps), 3)
            z2.shape = (3, 8)
            _, z4 = s.run(None, {'x': z2})
            self.assertEqual(len(wraps), 3)
            np.testing.assert_array_equal(z4, x3)
            del z, z2, z3
            gc.collect()
            np.testing.assert_array_equal(z4, x3)
        finally:
            _lib.lib.ts_tensor_wrap = wrap

    def test_errors_carry_tsopts_message(self):
        with self.assertRaisesRegex(tsopt.TsoptError, r"^cannot open model '.*nope\.onnx': No such file") as cm:
            tsopt.InferenceSession(os.path.join(Models.d, 'nope.onnx'))
        self.assertEqual(cm.exception.status, 'io')
        bad = os.path.join(Models.d, 'bad.onnx')
        with open(bad, 'wb') as f:
            f.write(b'not a model')
        with self.assertRaisesRegex(tsopt.TsoptError, 'not a valid ONNX'):
            tsopt.InferenceSession(bad)
        s = tsopt.InferenceSession(Models.small)
        with self.assertRaisesRegex(tsopt.TsoptError, r"input 'x' has shape 2x4, the model expects Nx8"):
            s.run(None, {'x': np.zeros((2, 4), np.float32)})
        with self.assertRaisesRegex(tsopt.TsoptError, r"input 'x' is float64, the model expects float32"):
            s.run(None, {'x': np.zeros((2, 8))})
        with self.assertRaisesRegex(tsopt.TsoptError, r"required inputs \['x'\] are missing"):
            s.run(None, {'q': np.zeros((2, 8), np.float32)})
        with self.assertRaisesRegex(tsopt.TsoptError, r"\['q'\] are not inputs of the model"):
            s.run(None, {'x': np.zeros((2, 8), np.float32), 'q': np.zeros(1, np.float32)})
        with self.assertRaisesRegex(tsopt.TsoptError, r"'w' is not an output"):
            s.run(['w'], {'x': np.zeros((2, 8), np.float32)})
        f = tsopt.InferenceSession(Models.fixed)
        with self.assertRaisesRegex(tsopt.TsoptError, r"input 'i' has shape 3x3, the model expects 2x3"):
            f.run(None, {'i': np.zeros((3, 3), np.int64), 'm': np.zeros(4, bool)})
        # the session still works after errors
        self.assertEqual(s.run(['y'], {'x': np.zeros((3, 8), np.float32)})[0].shape, (3, 4))

    def test_loop_slicing_by_iteration(self):
        """A Loop whose body slices x[i:i+1] (ONNX's test_loop11 pattern: the
        body's shapes follow the iteration number) runs once the trip count
        is known: the session unrolls it (src/api/loop_unroll.c)."""
        body = helper.make_graph(
            [helper.make_node('Identity', ['c_in'], ['c_out']),
             helper.make_node('Add', ['i', 'one'], ['end']),
             helper.make_node('Unsqueeze', ['i', 'ax'], ['st']), helper.make_node('Unsqueeze', ['end', 'ax'], ['en']),
             helper.make_node('Slice', ['x', 'st', 'en'], ['xi']),
             helper.make_node('Add', ['y_in', 'xi'], ['y_out']), helper.make_node('Mul', ['y_out', 'y_out'], ['sq'])],
            'body', [helper.make_tensor_value_info('i', TP.INT64, []), helper.make_tensor_value_info('c_in', TP.BOOL, []),
                     helper.make_tensor_value_info('y_in', TP.FLOAT, [1])],
            [helper.make_tensor_value_info('c_out', TP.BOOL, []), helper.make_tensor_value_info('y_out', TP.FLOAT, [1]),
             helper.make_tensor_value_info('sq', TP.FLOAT, [1])],
            [helper.make_tensor('one', TP.INT64, [], [1]), helper.make_tensor('ax', TP.INT64, [1], [0])])
        g = helper.make_graph(
            [helper.make_node('Loop', ['n', '', 'y0'], ['y', 'sqs'], body=body)], 'loop_slice',
            [helper.make_tensor_value_info('n', TP.INT64, []), helper.make_tensor_value_info('y0', TP.FLOAT, [1]),
             helper.make_tensor_value_info('x', TP.FLOAT, [6])],
            [helper.make_tensor_value_info('y', TP.FLOAT, [1]), helper.make_tensor_value_info('sqs', TP.FLOAT, ['T', 1])])
        path = os.path.join(Models.d, 'loop_slice.onnx')
        save(g, path, opset=13)
        s = tsopt.InferenceSession(path)
        x = np.array([1, 2, 3, 4, 5, 6], np.float32)
        for n in (3, 5, 0, 1, 3):
            y, sqs = s.run(None, {'n': np.array(n, np.int64), 'y0': np.array([0.5], np.float32), 'x': x})
            acc = 0.5 + np.cumsum(x[:n])
            np.testing.assert_allclose(y, [acc[-1] if n else 0.5], rtol=1e-6)
            np.testing.assert_allclose(sqs.reshape(-1), acc ** 2, rtol=1e-6)

    def test_close(self):
        with tsopt.InferenceSession(Models.small) as s:
            s.run(None, {'x': np.zeros((1, 8), np.float32)})
        with self.assertRaisesRegex(tsopt.TsoptError, 'closed'):
            s.run(None, {'x': np.zeros((1, 8), np.float32)})
        for _ in range(3):  # sessions collected without close()
            tsopt.InferenceSession(Models.small).run(None, {'x': np.zeros((2, 8), np.float32)})
        gc.collect()


class OptimizeTest(unittest.TestCase):
    def test_optimize_returns_the_json_dict(self):
        dst = os.path.join(Models.d, 'shared-opt.onnx')
        cache = os.path.join(Models.d, 'costs.tsv')
        r = tsopt.optimize(Models.shared, dst, time_limit=2, transforms='taso', cost_model='roofline',
                           no_timing=True, cost_cache=cache)
        for k in ('written', 'cost_before_ms', 'cost_after_ms', 'latency_before_ms', 'latency_after_ms', 'applied',
                  'search_s', 'peak_rss_mb', 'check'):
            self.assertIn(k, r)
        self.assertEqual(r['written'], 'optimized', r['reason'])
        self.assertGreater(sum(r['applied'].values()), 0)
        # the same dict as the command's --json, field by field where the run does not show
        if TSOPT:
            dst2 = os.path.join(Models.d, 'shared-cli.onnx')
            out = subprocess.run([TSOPT, 'optimize', Models.shared, '-o', dst2, '--time-limit', '2', '--transforms',
                                  'taso', '--cost-model', 'roofline', '--no-timing', '--cost-cache', cache, '--json'],
                                 check=True, capture_output=True, text=True).stdout
            c = json.loads(out)
            self.assertEqual(sorted(c), sorted(r))
            for k in ('written', 'applied', 'rewrites', 'nodes_before', 'nodes_after', 'cost_before_ms',
                      'cost_after_ms'):
                self.assertEqual(c[k], r[k], k)
        a, b = tsopt.InferenceSession(Models.shared), tsopt.InferenceSession(dst)
        rng = np.random.default_rng(3)
        feed = {'x0': rng.standard_normal((1, 256)).astype(np.float32),
                'x1': rng.standard_normal((1, 256)).astype(np.float32)}
        np.testing.assert_allclose(b.run(None, feed)[0], a.run(None, feed)[0], rtol=1e-4, atol=1e-4)

    def test_optimize_keeps_dynamic_batch(self):
        dst = os.path.join(Models.d, 'small-opt.onnx')
        r = tsopt.optimize(Models.small, dst, time_limit=1, transforms='taso', cost_model='roofline', no_timing=True,
                           cost_cache=os.path.join(Models.d, 'costs.tsv'))
        self.assertIn(r['written'], ('optimized', 'original'))
        s = tsopt.InferenceSession(dst)
        self.assertEqual(s.get_inputs()[0].shape, ['N', 8])
        x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
        y, z = s.run(None, {'x': x})
        ry, rz = Models.small_ref(x)
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(z, rz)

    def test_optimize_check_inputs(self):
        """check_inputs (the CLI's --inputs): a dict of arrays or a folder of
        .npy; the whole-model check says it used them."""
        cache = os.path.join(Models.d, 'costs.tsv')
        rng = np.random.default_rng(5)
        feed = {'x0': rng.standard_normal((1, 256)).astype(np.float32),
                'x1': rng.standard_normal((1, 256)).astype(np.float32)}
        kw = dict(time_limit=2, transforms='taso', cost_model='roofline', no_timing=True, cost_cache=cache)
        r = tsopt.optimize(Models.shared, os.path.join(Models.d, 'user-dict.onnx'), check_inputs=feed, **kw)
        self.assertEqual(r['written'], 'optimized', r['reason'])
        self.assertEqual((r['check']['inputs'], r['check']['whole_model']), ('user', True))
        folder = os.path.join(Models.d, 'user-in')
        os.makedirs(folder, exist_ok=True)
        for k, v in feed.items():
            np.save(os.path.join(folder, k + '.npy'), v)
        r = tsopt.optimize(Models.shared, os.path.join(Models.d, 'user-dir.onnx'), check_inputs=folder, **kw)
        self.assertEqual(r['check']['inputs'], 'user')
        r = tsopt.optimize(Models.shared, os.path.join(Models.d, 'random.onnx'), **kw)
        self.assertEqual(r['check']['inputs'], 'random')
        bad = dict(feed, x0=np.zeros((3, 256), np.float32))
        with self.assertRaisesRegex(tsopt.TsoptError, r"input 'x0': the model wants float32 1x256, .* holds float32 "
                                                      r"3x256"):
            tsopt.optimize(Models.shared, os.path.join(Models.d, 'bad-in.onnx'), check_inputs=bad, **kw)
        self.assertFalse(os.path.exists(os.path.join(Models.d, 'bad-in.onnx')))

    def test_optimize_external_data(self):
        dst = os.path.join(Models.d, 'ext', 'shared.onnx')
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        r = tsopt.optimize(Models.shared, dst, time_limit=2, transforms='taso', cost_model='roofline', no_timing=True,
                           external_data=True, cost_cache=os.path.join(Models.d, 'costs.tsv'))
        self.assertIn(r['written'], ('optimized', 'original'))
        self.assertLess(os.path.getsize(dst), 16 * 1024)  # the 256 KiB weight is beside it
        self.assertGreaterEqual(os.path.getsize(dst + '.data'), 256 * 256 * 4)
        m = onnx.load(dst, load_external_data=False)
        self.assertTrue(any(t.data_location == TP.EXTERNAL for t in m.graph.initializer))
        rng = np.random.default_rng(6)
        feed = {'x0': rng.standard_normal((1, 256)).astype(np.float32),
                'x1': rng.standard_normal((1, 256)).astype(np.float32)}
        a, b = tsopt.InferenceSession(Models.shared), tsopt.InferenceSession(dst)
        np.testing.assert_allclose(b.run(None, feed)[0], a.run(None, feed)[0], rtol=1e-4, atol=1e-4)

    def test_optimize_allow_growth(self):
        """x @ w1 + x @ w2 -> x @ (w1 + w2) while w1 and w2 stay for other
        readers: the weights grow by half, written only with allow_growth."""
        rng = np.random.default_rng(7)
        w1, w2 = ((rng.standard_normal((256, 256)) * 0.1).astype(np.float32) for _ in range(2))
        g = helper.make_graph(
            [helper.make_node('MatMul', ['x', 'w1'], ['p']), helper.make_node('MatMul', ['x', 'w2'], ['q']),
             helper.make_node('Add', ['p', 'q'], ['y']), helper.make_node('MatMul', ['w1', 'z'], ['s']),
             helper.make_node('MatMul', ['w2', 'z'], ['t']), helper.make_node('Relu', ['s'], ['y2']),
             helper.make_node('Relu', ['t'], ['y3'])], 'grow',
            [helper.make_tensor_value_info('x', TP.FLOAT, [4, 256]), helper.make_tensor_value_info('z', TP.FLOAT, [256, 4])],
            [helper.make_tensor_value_info('y', TP.FLOAT, [4, 256]), helper.make_tensor_value_info('y2', TP.FLOAT, [256, 4]),
             helper.make_tensor_value_info('y3', TP.FLOAT, [256, 4])],
            [helper.make_tensor('w1', TP.FLOAT, w1.shape, w1.flatten()),
             helper.make_tensor('w2', TP.FLOAT, w2.shape, w2.flatten())])
        src = os.path.join(Models.d, 'grow.onnx')
        save(g, src)
        kw = dict(cost_model='roofline', no_timing=True, budget=20, min_gain=0,
                  cost_cache=os.path.join(Models.d, 'costs.tsv'))
        a = tsopt.optimize(src, os.path.join(Models.d, 'grow-a.onnx'), **kw)
        self.assertEqual(a['written'], 'original')
        self.assertIn('--allow-growth', a['reason'])
        b = tsopt.optimize(src, os.path.join(Models.d, 'grow-b.onnx'), allow_growth=True, **kw)
        self.assertEqual(b['written'], 'optimized', b['reason'])
        self.assertGreater(b['weight_bytes_after'], 1.1 * b['weight_bytes_before'])

    def test_optimize_errors(self):
        dst = os.path.join(Models.d, 'never.onnx')
        with self.assertRaisesRegex(tsopt.TsoptError, r"unknown source 'nosuch' \(known: "):
            tsopt.optimize(Models.small, dst, transforms='nosuch')
        with self.assertRaisesRegex(tsopt.TsoptError, "cost_model': expected 'measured' or 'roofline', got 'fast'"):
            tsopt.optimize(Models.small, dst, cost_model='fast')
        with self.assertRaisesRegex(tsopt.TsoptError, 'does not exist'):
            tsopt.optimize(Models.small, os.path.join(Models.d, 'no', 'x.onnx'))
        with self.assertRaisesRegex(tsopt.TsoptError, 'alpha'):
            tsopt.optimize(Models.small, dst, alpha=0.5)
        self.assertFalse(os.path.exists(dst))


class VersionTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(tsopt.__version__, r'^\d+\.\d+\.\d+$')
        pc = os.path.join(BUILD, 'tsopt.pc')
        if os.path.exists(pc):
            with open(pc) as f:
                self.assertIn(f'Version: {tsopt.__version__}\n', f.read())
        if TSOPT:
            out = subprocess.run([TSOPT, '--version'], check=True, capture_output=True, text=True).stdout
            self.assertEqual(out, f'tsopt {tsopt.__version__}\n')


if __name__ == '__main__':
    unittest.main(argv=sys.argv)
