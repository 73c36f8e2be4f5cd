#!/usr/bin/python3
"""ONNX node conformance: runs every test of Debian's libonnx-testdata whose ops the
fpguard binary supports (`fpguard ops --json`), compares the outputs (rtol 1e-3,
atol 1e-5 for floating outputs; exact for integer and bool), and fails on any failure
not listed in expected_failures.txt. Prints `N passed, N failed, N skipped`.
Sequence and optional inputs/outputs (SequenceProto/OptionalProto .pb files) are fed and
compared too: a sequence element by element (same length), an empty optional exactly;
string tensors (written by fpguard as NumPy '<U' arrays) are compared exactly.
With `--precision float64` every test runs as fpguard's float64 truth run (every floating
value carried in double: each kernel's double instantiation), with the same tolerances
and expected failures.

Usage: run_conformance.py --fpguard BUILD/fpguard [--precision P] [--data DIR]
                          [--filter SUBSTR] [-v]
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"
MIN_OPSET = 1
MAX_OPSET = 21
TENSOR_TYPES_SUPPORTED = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16}


def type_problem(t):
    """Why fpguard cannot hold a value of TypeProto `t` (maps, FLOAT8...), or None.
    Tensors, sequences of tensors and optionals of either are supported."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        if t.tensor_type.elem_type not in TENSOR_TYPES_SUPPORTED:
            return f"elem_type {t.tensor_type.elem_type}"
        return None
    if kind == "sequence_type":
        inner = t.sequence_type.elem_type
        if inner.WhichOneof("value") != "tensor_type":
            return "a sequence of non-tensors"
        return type_problem(inner)
    if kind == "optional_type":
        return type_problem(t.optional_type.elem_type)
    return f"type {kind}"


def unsupported_io(m):
    """Why fpguard cannot take this model's inputs/outputs, or None."""
    for v in list(m.graph.input) + list(m.graph.output):
        why = type_problem(v.type)
        if why:
            return f"'{v.name}': {why}"
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i not in TENSOR_TYPES_SUPPORTED:
                return f"Cast to elem_type {a.i}"
    return None


def graph_ops(graph, out):
    for node in graph.node:
        dom = node.domain if node.domain not in ("", "ai.onnx") else ""
        out.add((dom, node.op_type))
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, out)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    graph_ops(g, out)
    return out


def load_expected(path):
    expected = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            expected[name] = reason.strip()
    return expected


def compare(got, want):
    """None when equal within tolerance, else a message."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {got.shape} != expected {want.shape}"
    if want.dtype.kind in "OUS" or got.dtype.kind in "OUS":  # strings: exactly, as text
        def text(a):
            return [x.decode() if isinstance(x, bytes) else x for x in a.ravel().tolist()]
        if got.dtype.kind not in "OUS" or want.dtype.kind not in "OUS":
            return f"dtype {got.dtype} != expected {want.dtype}"
        g, w = text(got), text(want)
        if g != w:
            i = next(k for k in range(len(g)) if g[k] != w[k])
            return f"strings differ; first at flat index {i}: {g[i]!r} vs expected {w[i]!r}"
        return None
    if want.dtype.kind in "fc" or got.dtype.kind in "fc":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        if want.dtype == np.float16 or got.dtype == np.float16:
            rtol, atol = 1e-3, 1e-3  # one float16 ulp near 1 is 9.8e-4
        else:
            rtol, atol = 1e-3, 1e-5
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            i = np.argwhere(~ok)[0]
            return (f"{(~ok).sum()} of {ok.size} values differ; first at {tuple(i)}: "
                    f"{g[tuple(i)]!r} vs expected {w[tuple(i)]!r}")
        return None
    if got.dtype != want.dtype and not (want.dtype == np.bool_ and got.dtype == np.bool_):
        return f"dtype {got.dtype} != expected {want.dtype}"
    if not np.array_equal(got, want):
        return "values differ (exact comparison)"
    return None


def read_expected(path, type_proto):
    """output_N.pb as a NumPy array, a list of arrays (a sequence) or None (an empty
    optional), by the graph output's declared type."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        p = onnx.SequenceProto()
    elif kind == "optional_type":
        p = onnx.OptionalProto()
    else:
        p = onnx.TensorProto()
    with open(path, "rb") as f:
        p.ParseFromString(f.read())
    if kind == "sequence_type":
        return numpy_helper.to_list(p)
    if kind == "optional_type":
        return numpy_helper.to_optional(p)
    return numpy_helper.to_array(p)


def read_got(tmp, entry):
    """An outputs.json entry as read_expected returns it."""
    kind = entry.get("kind", "tensor")
    if kind == "sequence":
        return [np.load(os.path.join(tmp, f)) for f in entry["files"]]
    if kind == "none":
        return None
    return np.load(os.path.join(tmp, entry["file"]))


def compare_value(got, want):
    """compare() extended to sequences (lists) and empty optionals (None)."""
    if want is None or got is None:
        return None if want is None and got is None else (
            f"{'an empty optional' if got is None else 'a value'} where "
            f"{'an empty optional' if want is None else 'a value'} is expected")
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)):
            return "a sequence and a tensor"
        if len(got) != len(want):
            return f"a sequence of {len(got)} tensors, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            msg = compare(g, w)
            if msg:
                return f"element {i}: {msg}"
        return None
    return compare(got, want)


def run_test(fpguard, test_dir, precision=None):
    model = os.path.join(test_dir, "model.onnx")
    m = onnx.load(model, load_external_data=False)
    outputs = [o.name for o in m.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    for s in sets:
        sdir = os.path.join(test_dir, s)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [fpguard, "run", model, "--inputs", sdir, "--outputs", tmp, "--threads", "1"]
            if precision:
                cmd += ["--precision", precision]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                return f"{s}: fpguard exited {r.returncode}: {r.stderr.strip()}"
            with open(os.path.join(tmp, "outputs.json")) as f:
                files = {t["name"]: t for t in json.load(f)["tensors"]}
            k = 0
            while os.path.exists(os.path.join(sdir, f"output_{k}.pb")):
                want = read_expected(os.path.join(sdir, f"output_{k}.pb"), m.graph.output[k].type)
                name = outputs[k]
                if m.graph.output[k].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
                    # ONNX's test data carries bfloat16 as uint16 bit patterns; fpguard
                    # writes bfloat16 outputs as float32 (NumPy has no bfloat16).
                    if want.dtype == np.uint16:
                        want = (want.astype(np.uint32) << 16).view(np.float32)
                if name not in files:
                    return f"{s}: output '{name}' missing"
                got = read_got(tmp, files[name])
                msg = compare_value(got, want)
                if msg:
                    return f"{s}: output '{name}': {msg}"
                k += 1
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--expected", default=os.path.join(HERE, "expected_failures.txt"))
    ap.add_argument("--filter", default="")
    ap.add_argument("--precision", default=None,
                    help="passed to `fpguard run` (float64: the double-carrier truth run)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    ops = set(json.loads(subprocess.run([args.fpguard, "ops", "--json"], check=True,
                                        capture_output=True, text=True).stdout)["ops"])
    expected = load_expected(args.expected)
    if args.precision in ("float64", "fp64"):
        expected.update(load_expected(os.path.join(HERE, "expected_failures_fp64.txt")))
    tests, skipped = [], []
    for name in sorted(os.listdir(args.data)):
        if args.filter not in name:
            continue
        d = os.path.join(args.data, name)
        if not os.path.exists(os.path.join(d, "model.onnx")):
            continue
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
        used = graph_ops(m.graph, set())
        if (opset > MAX_OPSET or opset < MIN_OPSET or unsupported_io(m)
                or any(dom or op not in ops for dom, op in used)):
            skipped.append(name)
        else:
            tests.append(name)

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(run_test, args.fpguard, os.path.join(args.data, t), args.precision): t
                for t in tests}
        for fut in concurrent.futures.as_completed(futs):
            t = futs[fut]
            try:
                results[t] = fut.result()
            except Exception as e:  # a crash of the runner itself is a failure too
                results[t] = f"runner error: {e!r}"

    passed = [t for t in tests if results[t] is None]
    failed = [t for t in tests if results[t] is not None]
    unexpected = [t for t in failed if t not in expected]
    fixed = [t for t in passed if t in expected]
    for t in sorted(failed):
        tag = "expected failure" if t in expected else "FAIL"
        if t not in expected or args.verbose:
            print(f"{tag}: {t}: {results[t]}")
    for t in fixed:
        print(f"note: {t} passes but is listed in expected_failures.txt (remove it)")
    if args.verbose:
        for t in skipped:
            print(f"skipped: {t}")
    print(f"{len(passed)} passed, {len(failed)} failed ({len(failed) - len(unexpected)} expected), "
          f"{len(skipped)} skipped")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
