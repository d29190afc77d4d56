"""tsopt.InferenceSession: ONNX Runtime's InferenceSession over tsopt's
runtime (ts_session in the C library): symbolic dimensions are bound from
the inputs' shapes at each run, and a new shape signature re-plans."""
import ctypes
import os

import numpy as np

from . import _lib
from ._lib import TsoptError

# numpy dtype name -> ONNX Runtime's type string
# (bfloat16 is absent: numpy has no such dtype, so such an input is refused by name)
_ORT_TYPES = {'float32': 'tensor(float)', 'float64': 'tensor(double)', 'float16': 'tensor(float16)',
              'int64': 'tensor(int64)', 'int32': 'tensor(int32)', 'int8': 'tensor(int8)', 'uint8': 'tensor(uint8)',
              'bool': 'tensor(bool)'}
_CODES = {code: name for code, name in _lib.dtype_codes().items() if name in _ORT_TYPES}
_BY_NAME = {name: code for code, name in _CODES.items()}


class NodeArg:
    """A model input or output as onnxruntime describes it: .name, .shape
    (ints, dim_param strings for symbolic dimensions, None for unnamed
    ones) and .type ('tensor(float)', ...)."""

    def __init__(self, name, shape, type):
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self):
        return f'NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})'


def _node_arg(info):
    shape = []
    for d in range(info.shape.rank):
        p = info.dim_params[d]
        shape.append(int(info.shape.dims[d]) if p is None else (p.decode() or None))
    dtype = _CODES.get(info.dtype)
    return NodeArg(info.name.decode(), shape, _ORT_TYPES.get(dtype, 'tensor(undefined)')), dtype


class _TensorRef:
    """Holds one reference to a ts_tensor while a numpy array views its data."""
    __slots__ = ('ptr', 'tensor')

    def __init__(self, ptr):
        self.ptr = ptr
        self.tensor = ptr.contents

    def __del__(self):
        lib = getattr(_lib, 'lib', None)  # None late in the interpreter's exit
        if lib is not None:
            lib.ts_tensor_unref(self.ptr)


class _Holder:
    """The base of an output array: numpy reads the tensor's memory through
    __array_interface__ and the holder keeps the reference.  (A ctypes array
    of the output's size was a new ctypes type at each new size, every token
    of a decoder: 8 us an output, against 3.)  dims and dtype: the tensor's,
    to recognize the array when it comes back as an input (_own_tensor)."""
    __slots__ = ('__array_interface__', 'ref', 'dims', 'dtype')


def _to_numpy(ref, dtype):
    """A run's output as a numpy array over the tensor's own memory (the run
    made it for the caller alone): a decoder's presents, fed back as the next
    pasts, were copied out each token: a page-faulted copy of the whole cache,
    6-layer d512 decoder 134 -> 95 page faults per token over 200 tokens)."""
    t = ref.tensor
    dims = tuple(t.shape.dims[:t.shape.rank])
    if not t.nbytes:
        return np.empty(dims, dtype=dtype)
    h = _Holder()
    h.ref = ref  # the array's base: the tensor lives as long as the array
    h.dims, h.dtype = dims, dtype
    h.__array_interface__ = {'data': (t.data, False), 'shape': dims, 'typestr': dtype.str, 'version': 3}
    return np.asarray(h)


def _own_tensor(a):
    """The ts_tensor under `a` when `a` is an output array of a run, as that
    run returned it (views of it have the array, not the holder, as their
    base; shape, dtype and strides can be reassigned in place, so they are
    compared): passed to the next run as it is, without a wrap and an unref
    (a decoder's 12 presents fed back as pasts, every token).  None otherwise."""
    h = getattr(a, 'base', None)
    if type(h) is _Holder and type(a) is np.ndarray and a.shape == h.dims and a.dtype == h.dtype \
            and a.flags.c_contiguous:
        return h.ref.ptr
    return None


class GraphOptimizationLevel:
    """onnxruntime's levels; EXTENDED is tsopt's 'all' (its fusions are
    ONNX Runtime's extended ones: GELU, LayerNormalization)."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


# level -> ts_graph_opt (include/tsopt.h)
_LEVELS = {'none': 1, 'basic': 2, 'all': 3, GraphOptimizationLevel.ORT_DISABLE_ALL: 1,
           GraphOptimizationLevel.ORT_ENABLE_BASIC: 2, GraphOptimizationLevel.ORT_ENABLE_EXTENDED: 3,
           GraphOptimizationLevel.ORT_ENABLE_ALL: 3}


class SessionOptions:
    """onnxruntime's SessionOptions, the fields tsopt reads:
    graph_optimization_level (GraphOptimizationLevel, or 'none', 'basic',
    'all'; default all), intra_op_num_threads (0: one per core), and skip:
    kernel or feature names the plan must not use (docs/runtime.md,
    "Skipping kernels")."""

    def __init__(self):
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.intra_op_num_threads = 0
        self.skip = []

    def _c(self, threads):
        level = self.graph_optimization_level
        if level not in _LEVELS:
            raise ValueError(f'graph_optimization_level: expected a GraphOptimizationLevel or none, basic, all; '
                             f'got {level!r}')
        n = threads if threads is not None else self.intra_op_num_threads
        if not isinstance(n, int) or n < 0:
            raise ValueError(f'intra_op_num_threads: expected an integer >= 0, got {n!r}')
        skip = [self.skip] if isinstance(self.skip, str) else list(self.skip)
        return _lib.SessionOptions(n, _LEVELS[level], ','.join(skip).encode() if skip else None)


class InferenceSession:
    """Runs an ONNX model with tsopt's runtime, as onnxruntime's
    InferenceSession does.

    path: the .onnx file.  sess_options: a SessionOptions (onnxruntime's
    second argument).  threads: compute threads (None: the options', else
    one per core).  providers: accepted for onnxruntime compatibility; tsopt
    runs on the CPU.
    """

    def __init__(self, path, sess_options=None, providers=None, threads=None):
        if isinstance(path, bytearray) or (isinstance(path, bytes) and not os.path.exists(path)):
            raise TypeError('tsopt.InferenceSession takes a model path (serialized model bytes are not supported)')
        if isinstance(sess_options, int) and not isinstance(sess_options, bool):
            threads, sess_options = sess_options, None  # tsopt's older InferenceSession(path, threads)
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError(f'threads: expected a positive integer or None, got {threads!r}')
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise TypeError(f'sess_options: expected a tsopt.SessionOptions, got {type(sess_options).__name__}')
        opts = (sess_options or SessionOptions())._c(threads)
        self._s = None
        self._path = os.fspath(path)
        self._providers = list(providers) if providers else ['CPUExecutionProvider']
        handle = ctypes.c_void_p()
        err = _lib.Error()
        _lib.check(_lib.lib.ts_session_open_with(os.fsencode(self._path), ctypes.byref(opts), ctypes.byref(handle),
                                                 ctypes.byref(err)), err)
        self._s = handle
        self._inputs, self._in_dtypes = self._io(False)
        self._outputs, self._out_dtypes = self._io(True)
        # what run() checks and converts, once (a decoder runs per token)
        self._in_names = [a.name for a in self._inputs]
        self._in_set = frozenset(self._in_names)
        self._out_names = [a.name for a in self._outputs]
        self._in_np = [np.dtype(d) if d else None for d in self._in_dtypes]
        self._out_np = [np.dtype(d) for d in self._out_dtypes]  # None: float64, as np.frombuffer read it

    def _io(self, output):
        n = (_lib.lib.ts_session_noutputs if output else _lib.lib.ts_session_ninputs)(self._s)
        get = _lib.lib.ts_session_output_info if output else _lib.lib.ts_session_input_info
        args, dtypes = [], []
        for i in range(n):
            info = _lib.IoInfo()
            get(self._s, i, ctypes.byref(info))
            arg, dtype = _node_arg(info)
            args.append(arg)
            dtypes.append(dtype)
        return args, dtypes

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return list(self._providers)

    def run(self, output_names, input_feed, run_options=None):
        """Outputs (numpy arrays) named by output_names, in that order (None:
        every output), for input_feed, a dict input name -> array."""
        if self._s is None:
            raise TsoptError('run: the session is closed')
        names = self._in_names
        if len(input_feed) != len(names) or not self._in_set.issuperset(input_feed):
            missing = [n for n in names if n not in input_feed]
            if missing:
                raise TsoptError(f'run: required inputs {missing} are missing from the input feed {list(input_feed)}')
            extra = [n for n in input_feed if n not in self._in_set]
            raise TsoptError(f'run: {extra} are not inputs of the model (inputs: {names})')
        outs = self._out_names
        if output_names is None:
            want = range(len(outs))
        else:
            want = []
            for n in output_names:
                if n not in outs:
                    raise TsoptError(f"run: '{n}' is not an output of the model (outputs: {outs})")
                want.append(outs.index(n))
        n = len(names)
        ins = (ctypes.c_void_p * max(1, n))()
        wrapped = []  # tensors wrapped here, unreferenced after the run (not the ones passed as they are)
        try:
            for i, (name, dtype) in enumerate(zip(names, self._in_np)):
                a = input_feed[name]
                t = _own_tensor(a)
                if t is None:
                    a = np.require(a, requirements='C')  # not ascontiguousarray: it makes scalars 1-D
                if a.dtype != dtype:
                    raise TsoptError(f"run: input '{name}' is {a.dtype.name}, the model expects "
                                     f"{dtype.name if dtype else 'a type numpy lacks'}")
                if t is None:
                    t = _lib.lib.ts_tensor_wrap(_BY_NAME[a.dtype.name], _lib.shape(a.shape), a.ctypes.data)
                    if not t:
                        raise MemoryError('tsopt: out of memory wrapping an input')
                    wrapped.append(t)
                ins[i] = ctypes.addressof(t.contents)
            res = (ctypes.POINTER(_lib.Tensor) * max(1, len(outs)))()
            err = _lib.Error()
            # ctypes releases the GIL here; the library serializes runs of one session
            status = _lib.lib.ts_session_run(self._s, ins, res, err)
            _lib.check(status, err)
            refs = [_TensorRef(res[i]) for i in range(len(outs))]
            return [_to_numpy(refs[i], self._out_np[i]) for i in want]  # the others are released with refs
        finally:
            for t in wrapped:
                _lib.lib.ts_tensor_unref(t)

    @property
    def plan_builds(self):
        """Plans built so far (tsopt's own: each new shape signature that is
        not cached builds one; a decoder that re-plans per token shows it)."""
        return int(_lib.lib.ts_session_plan_builds(self._s)) if self._s is not None else 0

    @property
    def plan_rebinds(self):
        """Runs at new sizes that re-bound a cached plan of the same shape class
        instead of building one (a decoder's tokens after the first)."""
        return int(_lib.lib.ts_session_plan_rebinds(self._s)) if self._s is not None else 0

    @property
    def rebind_steps(self):
        """Steps the re-binds made for new sizes: 'lowered' again (a scratch
        plan over the graph) or 'resized' in place (ts_session_rebind_stats;
        a decoder's tokens lower none); 'derived_inplace': derived graphs
        made in place of the one before, not copied."""
        lo, rs, ip = ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0)
        if self._s is not None:
            _lib.lib.ts_session_rebind_stats(self._s, ctypes.byref(lo), ctypes.byref(rs), ctypes.byref(ip))
        return {'lowered': lo.value, 'resized': rs.value, 'derived_inplace': ip.value}

    @property
    def graph_derives(self):
        """Of the re-binds, runs whose graph was derived from the re-bound one
        (shapes re-inferred, size-dependent constants recomputed) instead of
        loading and rewriting the model again."""
        return int(_lib.lib.ts_session_graph_derives(self._s)) if self._s is not None else 0

    @property
    def derive_stats(self):
        """What the derived graphs recomputed (ts_session_derive_stats):
        'orders' topological orders (a graph derived in place keeps its own),
        'passes' shape re-inference passes over the graph."""
        o, p = ctypes.c_int64(0), ctypes.c_int64(0)
        if self._s is not None:
            _lib.lib.ts_session_derive_stats(self._s, ctypes.byref(o), ctypes.byref(p))
        return {'orders': o.value, 'passes': p.value}

    @property
    def sized_folds(self):
        """Of the size-dependent constants derived graphs recomputed: 'folded'
        by importing their slice of the model, 'shared' taken from another's
        fold (the same nodes at the same shapes: a decoder's per-layer masks)."""
        f, sh = ctypes.c_int64(0), ctypes.c_int64(0)
        if self._s is not None:
            _lib.lib.ts_session_sized_fold_stats(self._s, ctypes.byref(f), ctypes.byref(sh))
        return {'folded': f.value, 'shared': sh.value}

    @property
    def pack_stats(self):
        """The packed-weight cache shared by the session's plans (ts_pack_cache_stats):
        hits/misses of plan builds' lookups, hit_bytes (packing saved), entries/bytes held now,
        plain: shared weights read unpacked by plans built once (a prompt's; packed if run again)."""
        if self._s is None:
            return {}
        st = _lib.lib.ts_session_pack_stats(self._s)
        return {name: int(getattr(st, name)) for name, _ in _lib.PackCacheStats._fields_}

    def close(self):
        """Frees the session's graphs and plans now (also done when it is collected)."""
        if self._s is not None and _lib.lib is not None:
            _lib.lib.ts_session_free(self._s)
        self._s = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
