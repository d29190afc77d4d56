"""tsopt for Python: ONNX models run and optimized by tsopt (ctypes over
libtsopt.so; numpy arrays in and out).

    import numpy as np, tsopt
    sess = tsopt.InferenceSession('resnet18.onnx')        # as onnxruntime's
    [y] = sess.run(None, {'input': np.zeros((2, 3, 224, 224), np.float32)})
    report = tsopt.optimize('resnet18.onnx', 'fast.onnx', time_limit=10)

docs/python.md has the details; errors raise tsopt.TsoptError carrying
tsopt's one-line message.
"""
from . import _lib
from ._lib import TsoptError
from .optimize import optimize
from .session import GraphOptimizationLevel, InferenceSession, NodeArg, SessionOptions

__version__ = _lib.lib.tsopt_version().decode()  # the library's: CMakeLists.txt's project version


def get_device():
    """onnxruntime's get_device(): tsopt runs on the CPU."""
    return 'CPU'


__all__ = ['InferenceSession', 'SessionOptions', 'GraphOptimizationLevel', 'NodeArg', 'TsoptError', 'optimize', 'get_device', '__version__']
