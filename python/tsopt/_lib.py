"""ctypes bindings of libtsopt.so: finding the library, the few C structs
the package reads (mirrored from include/tsopt.h), function prototypes,
and errors as exceptions."""
import ctypes
import os
from ctypes import POINTER, c_bool, c_char, c_char_p, c_int, c_int64, c_size_t, c_void_p

MAX_RANK = 8  # TS_MAX_RANK


class TsoptError(RuntimeError):
    """A failure reported by tsopt; str() is tsopt's one-line message and
    .status names its kind ('invalid', 'unsupported', 'io', 'parse', 'nomem')."""

    def __init__(self, message, status='invalid'):
        super().__init__(message)
        self.status = status


_STATUS = {1: 'invalid', 2: 'unsupported', 3: 'io', 4: 'parse', 5: 'nomem'}


class Shape(ctypes.Structure):
    _fields_ = [('rank', c_int), ('dims', c_int64 * MAX_RANK)]


class Tensor(ctypes.Structure):
    _fields_ = [('dtype', c_int), ('shape', Shape), ('data', c_void_p), ('nbytes', c_size_t),
                ('refcount', c_int), ('owns_data', c_bool)]


class Error(ctypes.Structure):
    _fields_ = [('code', c_int), ('msg', c_char * 1024)]


class IoInfo(ctypes.Structure):
    _fields_ = [('name', c_char_p), ('dtype', c_int), ('shape', Shape), ('dim_params', c_char_p * MAX_RANK)]


class InputBind(ctypes.Structure):
    _fields_ = [('name', c_char_p), ('shape', Shape)]


class PackCacheStats(ctypes.Structure):  # ts_pack_cache_stats
    _fields_ = [('hits', c_int64), ('misses', c_int64), ('hit_bytes', c_int64), ('entries', c_int64),
                ('bytes', c_int64), ('plain', c_int64)]


class SessionOptions(ctypes.Structure):  # ts_session_options
    _fields_ = [('threads', c_int), ('graph_opt', c_int), ('skip', c_char_p)]


def _candidates():
    """Where libtsopt.so may be, most specific first."""
    env = os.environ.get('TSOPT_LIBRARY')
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        # installed: PREFIX/lib/python3.X/site-packages/tsopt -> PREFIX/lib
        # (also PREFIX/lib/python3/dist-packages/tsopt)
        os.path.join(here, '..', '..', '..', 'libtsopt.so'),
        # a source checkout: python/tsopt -> build/
        os.path.join(here, '..', '..', 'build', 'libtsopt.so'),
        # the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig)
        'libtsopt.so',
    ]


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(os.path.normpath(path) if os.sep in path else path)
        except OSError as e:
            tried.append(f'{path} ({e})')
    raise ImportError('tsopt: cannot load libtsopt.so; tried ' + ', '.join(tried) +
                      '; set TSOPT_LIBRARY to its path')


# OpenMP's idle threads need no setting here: libtsopt adapts how they wait
# while it runs (src/measure/wait_policy.c)
lib = _load()

_PROTOS = {
    'tsopt_version': (c_char_p, []),
    'ts_free': (None, [c_void_p]),
    'ts_dtype_name': (c_char_p, [c_int]),
    'ts_dtype_size': (c_size_t, [c_int]),
    'ts_tensor_wrap': (POINTER(Tensor), [c_int, POINTER(Shape), c_void_p]),
    'ts_tensor_unref': (None, [c_void_p]),
    'ts_session_open': (c_int, [c_char_p, c_int, POINTER(c_void_p), POINTER(Error)]),
    'ts_session_open_with': (c_int, [c_char_p, POINTER(SessionOptions), POINTER(c_void_p), POINTER(Error)]),
    'ts_session_free': (None, [c_void_p]),
    'ts_session_ninputs': (c_int, [c_void_p]),
    'ts_session_noutputs': (c_int, [c_void_p]),
    'ts_session_input_info': (c_bool, [c_void_p, c_int, POINTER(IoInfo)]),
    'ts_session_output_info': (c_bool, [c_void_p, c_int, POINTER(IoInfo)]),
    'ts_session_run': (c_int, [c_void_p, POINTER(c_void_p), POINTER(POINTER(Tensor)), POINTER(Error)]),
    'ts_session_plan_builds': (c_int64, [c_void_p]),
    'ts_session_plan_rebinds': (c_int64, [c_void_p]),
    'ts_session_graph_derives': (c_int64, [c_void_p]),
    'ts_session_derive_stats': (None, [c_void_p, POINTER(c_int64), POINTER(c_int64)]),
    'ts_session_rebind_stats': (None, [c_void_p, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64)]),
    'ts_session_sized_fold_stats': (None, [c_void_p, POINTER(c_int64), POINTER(c_int64)]),
    'ts_session_pack_stats': (PackCacheStats, [c_void_p]),
    'ts_optimize_file': (c_int, [c_char_p, c_char_p, POINTER(InputBind), c_int, POINTER(c_char_p), c_int,
                                 POINTER(c_void_p), POINTER(Error)]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def check(status, err):
    """Raises TsoptError with tsopt's message when a call failed."""
    if status:
        msg = err.msg.decode('utf-8', 'replace') or 'unknown error'
        raise TsoptError(msg, _STATUS.get(status, 'invalid'))


def dtype_codes():
    """tsopt dtype code -> numpy dtype name, read from the library."""
    codes = {}
    for code in range(1, 64):
        name = lib.ts_dtype_name(code).decode()
        if name == 'invalid':
            break
        codes[code] = name
    return codes


def shape(dims):
    s = Shape()
    dims = tuple(int(d) for d in dims)
    if len(dims) > MAX_RANK:
        raise TsoptError(f'shape {dims}: tsopt supports at most {MAX_RANK} dimensions')
    s.rank = len(dims)
    for i, d in enumerate(dims):
        s.dims[i] = d
    return s
