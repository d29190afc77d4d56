#!/usr/bin/env python3
"""ONNX Runtime on ONNX's backend test data, the same cases and tolerance as
tests/conformance/conformance.c (tsopt's runner), for docs/conformance.md.
Not part of `make test` (it needs Node and takes about a minute).

    /usr/bin/python3 tests/conformance/ort_backend.py [--data DIR] [--write-pass FILE] [--verbose]

Converts every case's .pb tensors (onnx.numpy_helper) to raw buffers, runs
them all in one node process (ort_backend.js, onnxruntime-node from
tools/ort), and compares each output with the expected one: same element
type and shape, floats within rtol 1e-3 + atol 1e-5 (NaN matches NaN),
everything else exactly.  Prints "ort: N passed, N failed (N cases ...)".
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper, TensorProto

SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator"]
RTOL, ATOL = 1e-3, 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))

ORT_TYPE = {np.float32: "float32", np.float64: "float64", np.float16: "float16", np.int64: "int64",
            np.int32: "int32", np.int16: "int16", np.int8: "int8", np.uint64: "uint64", np.uint32: "uint32",
            np.uint16: "uint16", np.uint8: "uint8", np.bool_: "bool"}
NP_TYPE = {v: k for k, v in ORT_TYPE.items()}


def load_tensor(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t, numpy_helper.to_array(t)


def prepare(data, work):
    """Writes work/<id>/ per (case, data set); returns {case: [ids]} and the skipped count."""
    cases, skipped = {}, 0
    for suite in SUITES:
        sdir = os.path.join(data, suite)
        for name in sorted(os.listdir(sdir)):
            cdir = os.path.join(sdir, name)
            model = onnx.load(os.path.join(cdir, "model.onnx"), load_external_data=False)
            if not all(v.type.HasField("tensor_type") for v in model.graph.input):
                skipped += 1
                continue
            init = {i.name for i in model.graph.initializer}
            feeds = [v.name for v in model.graph.input if v.name not in init]
            case = f"{suite}/{name}"
            cases[case] = []
            for s in sorted(d for d in os.listdir(cdir) if d.startswith("test_data_set_")):
                wid = f"{suite}__{name}__{s}"
                wdir = os.path.join(work, wid)
                os.makedirs(wdir)
                os.symlink(os.path.join(cdir, "model.onnx"), os.path.join(wdir, "model.onnx"))
                inputs = []
                sdir_ = os.path.join(cdir, s)
                ins = sorted((f for f in os.listdir(sdir_) if f.startswith("input_")),
                             key=lambda f: int(f[6:-3]))
                for f in ins:
                    k = int(f[6:-3])
                    tp, a = load_tensor(os.path.join(sdir_, f))
                    fd = {"name": feeds[k] if k < len(feeds) else tp.name, "dims": list(a.shape)}
                    if tp.data_type == TensorProto.BFLOAT16:
                        fd["type"] = "bfloat16"
                    elif a.dtype.kind in "OSU":
                        fd["type"] = "string"
                        fd["strings"] = [x.decode() if isinstance(x, bytes) else str(x) for x in a.flatten()]
                    else:
                        fd["type"] = ORT_TYPE.get(a.dtype.type, str(a.dtype))
                        fd["file"] = f"in_{k}.bin"
                        np.ascontiguousarray(a).tofile(os.path.join(wdir, fd["file"]))
                    inputs.append(fd)
                with open(os.path.join(wdir, "feeds.json"), "w") as f:
                    json.dump({"inputs": inputs}, f)
                cases[case].append((wid, sdir_))
    return cases, skipped


def compare(wdir, set_dir):
    with open(os.path.join(wdir, "result.json")) as f:
        r = json.load(f)
    if "error" in r:
        return r["error"]
    outs = r["outputs"]
    k = 0
    while os.path.exists(os.path.join(set_dir, f"output_{k}.pb")):
        tp, want = load_tensor(os.path.join(set_dir, f"output_{k}.pb"))
        if k >= len(outs):
            return f"output {k} missing"
        o = outs[k]
        if o["type"] == "string":
            got = np.array(o["strings"], dtype=object).reshape(o["dims"])
            want = np.array([x.decode() if isinstance(x, bytes) else x for x in want.flatten()],
                            dtype=object).reshape(want.shape)
        else:
            if o["type"] not in NP_TYPE:
                return f"output {k}: type {o['type']}"
            got = np.fromfile(os.path.join(wdir, o["file"]), dtype=NP_TYPE[o["type"]]).reshape(o["dims"])
        if tp.data_type == TensorProto.BFLOAT16 or got.dtype != want.dtype and not (
                got.dtype == object and want.dtype.kind in "OSU"):
            return f"output {k} is {o['type']}, expected {want.dtype}"
        if got.shape != want.shape:
            return f"output {k} has shape {got.shape}, expected {want.shape}"
        if got.dtype.kind == "f":
            ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            return f"output {k} differs"
        k += 1
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--write-pass")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ort-backend-")
    try:
        cases, skipped = prepare(a.data, work)
        p = subprocess.run(["node", os.path.join(HERE, "ort_backend.js"), work], capture_output=True, text=True)
        sys.stdout.write(p.stdout)
        if p.returncode:
            sys.stderr.write(p.stderr)
            return 2
        passed = []
        for case, sets in cases.items():
            why = None
            for wid, set_dir in sets:
                why = why or compare(os.path.join(work, wid), set_dir)
            if not sets:
                why = "no test data set"
            if why is None:
                passed.append(case)
            elif a.verbose:
                print(f"fail {case}: {why}")
        if a.write_pass:
            with open(a.write_pass, "w") as f:
                f.writelines(c + "\n" for c in passed)
        print(f"ort: {len(passed)} passed, {len(cases) - len(passed)} failed "
              f"({len(cases)} cases with tensor inputs; {skipped} skipped; rtol {RTOL:g}, atol {ATOL:g})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
