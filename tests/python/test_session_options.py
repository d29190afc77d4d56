"""tsopt.SessionOptions (onnxruntime's): graph_optimization_level as
GraphOptimizationLevel or 'none'/'basic'/'all', intra_op_num_threads, skip;
every level gives the same outputs at two batch sizes (each re-planned at
its level), the older positional threads argument still works, and a bad
level is one clear error.  Run by python_api.sh."""
import os
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import tsopt

D = tempfile.mkdtemp(prefix='tsopt-py-opts-')
RNG = np.random.default_rng(0)
# conv 1x1 -> AveragePool 2x2 (pooled first at basic) -> two equal Relus (one at basic)
W = numpy_helper.from_array(RNG.standard_normal((4, 8, 1, 1)).astype(np.float32), 'w')
G = helper.make_graph(
    [helper.make_node('Conv', ['x', 'w'], ['c']),
     helper.make_node('AveragePool', ['c'], ['p'], kernel_shape=[2, 2], strides=[2, 2]),
     helper.make_node('Relu', ['p'], ['a']), helper.make_node('Relu', ['p'], ['b']),
     helper.make_node('Add', ['a', 'b'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TP.FLOAT, ['n', 8, 16, 16])],
    [helper.make_tensor_value_info('y', TP.FLOAT, ['n', 4, 8, 8])], [W])
MODEL = os.path.join(D, 'm.onnx')
onnx.save(helper.make_model(G, opset_imports=[helper.make_opsetid('', 13)]), MODEL)


def run(level, x, skip=()):
    o = tsopt.SessionOptions()
    o.graph_optimization_level = level
    o.intra_op_num_threads = 1
    o.skip = list(skip)
    [y] = tsopt.InferenceSession(MODEL, o).run(None, {'x': x})
    return y


class SessionOptionsTest(unittest.TestCase):
    def test_levels_same_outputs(self):
        L = tsopt.GraphOptimizationLevel
        for n in (1, 3):
            x = RNG.standard_normal((n, 8, 16, 16)).astype(np.float32)
            ref = np.maximum(np.einsum('fc,nchw->nfhw', numpy_helper.to_array(W)[:, :, 0, 0], x)
                             .reshape(n, 4, 8, 2, 8, 2).mean(axis=(3, 5)), 0) * 2
            for level in ('none', 'basic', 'all', L.ORT_DISABLE_ALL, L.ORT_ENABLE_BASIC, L.ORT_ENABLE_EXTENDED,
                          L.ORT_ENABLE_ALL):
                np.testing.assert_allclose(run(level, x), ref, rtol=1e-3, atol=1e-4, err_msg=str(level))
            np.testing.assert_allclose(run('all', x, skip=['winograd', 'dnnl.conv']), ref, rtol=1e-3, atol=1e-4)

    def test_threads_positional_and_defaults(self):
        x = RNG.standard_normal((2, 8, 16, 16)).astype(np.float32)
        [a] = tsopt.InferenceSession(MODEL, 1).run(None, {'x': x})
        [b] = tsopt.InferenceSession(MODEL).run(None, {'x': x})
        np.testing.assert_array_equal(a, b)

    def test_bad_options(self):
        o = tsopt.SessionOptions()
        o.graph_optimization_level = 'extended'
        with self.assertRaisesRegex(ValueError, 'graph_optimization_level'):
            tsopt.InferenceSession(MODEL, o)
        o = tsopt.SessionOptions()
        o.intra_op_num_threads = -1
        with self.assertRaisesRegex(ValueError, 'intra_op_num_threads'):
            tsopt.InferenceSession(MODEL, o)
        with self.assertRaisesRegex(TypeError, 'sess_options'):
            tsopt.InferenceSession(MODEL, {'graph_optimization_level': 'none'})


if __name__ == '__main__':
    unittest.main()
