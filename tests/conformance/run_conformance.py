#!/usr/bin/python3
"""ONNX node conformance: runs every test of Debian's libonnx-testdata whose ops the
fpguard binary supports (`fpguard ops --json`), compares the outputs (rtol 1e-3,
atol 1e-5 for floating outputs; exact for integer and bool), and prints three counts:
passed, expected failures (expected_failures.txt) and skipped. It fails (exit 1) when
  - a test fails that is not an expected failure;
  - an expected failure passes (remove it from the list);
  - a test is skipped for a reason (an op fpguard does not register, an opset or a type it
    cannot hold) that has no entry in skipped_ops.txt, or an entry there skips nothing;
  - fewer tests pass than the floor in floor.txt for this precision (raise the floor
    whenever the count rises). The floor is checked on full runs only (not --filter),
    unless --floor gives one.
Sequence and optional inputs/outputs (SequenceProto/OptionalProto .pb files) are fed and
compared too: a sequence element by element (same length), an empty optional exactly;
string tensors (written by fpguard as NumPy '<U' arrays) are compared exactly.
With `--precision float64` every test runs as fpguard's float64 truth run (every floating
value carried in double: each kernel's double instantiation), with the same tolerances
and expected failures, plus expected_failures_fp64.txt.
`--pretend-missing-op OP` runs as if fpguard did not register OP (the guard test,
tests/conformance/guard_test.py, shows that this makes the run fail).

Usage: run_conformance.py --fpguard BUILD/fpguard [--precision P] [--data DIR]
                          [--filter SUBSTR] [--expected FILE] [--skips FILE]
                          [--floor N] [--pretend-missing-op OP] [-v]
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


def skip_keys(m, ops):
    """Why a test of model `m` cannot run, as keys of skipped_ops.txt: each op fpguard does
    not register ('Bernoulli', 'ai.onnx.preview.training.Adam'), 'opset:N' outside
    MIN_OPSET..MAX_OPSET, 'type:<problem>' ('type:elem_type_17') for inputs/outputs it
    cannot hold. Empty when the test runs."""
    keys = []
    # (a model of other domains only, such as the training ops', imports no default opset)
    opsets = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    if opsets and not MIN_OPSET <= max(opsets) <= MAX_OPSET:
        keys.append(f"opset:{max(opsets)}")
    why = unsupported_io(m)
    if why:
        keys.append("type:" + why.split(": ", 1)[-1].replace(" ", "_"))
    for dom, op in sorted(graph_ops(m.graph, set())):
        if dom or op not in ops:
            keys.append(f"{dom}.{op}" if dom else op)
    return keys


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


def load_floor(path, precision):
    """The committed floor of passed tests for this precision ('float32' or 'float64')."""
    want = "float64" if precision in ("float64", "fp64") else "float32"
    for key, reason in load_expected(path).items():
        if key == want:
            return int(reason.split()[0])
    sys.exit(f"run_conformance.py: {path}: no floor for {want}")


def select(args, ops):
    """(tests to run, {skipped test: [skip keys]}) under args.data, filtered."""
    tests, skipped = [], {}
    for name in sorted(os.listdir(args.data)):
        if args.filter not in name:
            continue
        d = os.path.join(args.data, name)
        if not os.path.exists(os.path.join(d, "model.onnx")):
            continue
        keys = skip_keys(onnx.load(os.path.join(d, "model.onnx"), load_external_data=False), ops)
        if keys:
            skipped[name] = keys
        else:
            tests.append(name)
    return tests, skipped


def run_all(args, tests):
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
    return results


def check_skips(skipped, reasons, full_run, verbose):
    """Prints the skipped tests by key; returns the problems: keys without a reason in
    skipped_ops.txt, and (on a full run) entries there that skip nothing."""
    problems = []
    by_key = {}
    for t, keys in sorted(skipped.items()):
        for k in keys:
            by_key.setdefault(k, []).append(t)
    for k, ts in sorted(by_key.items()):
        print(f"skipped: {k} ({len(ts)}): {reasons.get(k, 'NO REASON')}")
        if verbose:
            print("  " + " ".join(ts))
        if k not in reasons:
            problems.append(f"{len(ts)} test(s) skipped for '{k}', which has no reason in "
                            f"skipped_ops.txt: implement it or add '{k}  <reason>' there "
                            f"({', '.join(ts[:3])}{'...' if len(ts) > 3 else ''})")
    if full_run:
        for k in sorted(set(reasons) - set(by_key)):
            problems.append(f"skipped_ops.txt lists '{k}', which skips no test: remove it")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--expected", default=os.path.join(HERE, "expected_failures.txt"))
    ap.add_argument("--skips", default=os.path.join(HERE, "skipped_ops.txt"))
    ap.add_argument("--floor-file", default=os.path.join(HERE, "floor.txt"))
    ap.add_argument("--floor", type=int, default=None,
                    help="the minimum passed count (default: floor.txt, full runs only)")
    ap.add_argument("--pretend-missing-op", action="append", default=[], metavar="OP",
                    help="run as if fpguard did not register OP (to test the guards)")
    ap.add_argument("--filter", default="")
    ap.add_argument("--precision", default=None,
                    help="passed to `fpguard run` (float64: the double-carrier truth run)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    ops = set(json.loads(subprocess.run([args.fpguard, "ops", "--json"], check=True,
                                        capture_output=True, text=True).stdout)["ops"])
    ops -= set(args.pretend_missing_op)
    expected = load_expected(args.expected)
    if args.precision in ("float64", "fp64"):
        expected.update(load_expected(os.path.join(HERE, "expected_failures_fp64.txt")))
    full_run = not args.filter
    floor = args.floor
    if floor is None and full_run:
        floor = load_floor(args.floor_file, args.precision)
    tests, skipped = select(args, ops)
    results = run_all(args, tests)

    passed = [t for t in tests if results[t] is None]
    failed = [t for t in tests if results[t] is not None]
    unexpected = [t for t in failed if t not in expected]
    fixed = [t for t in passed if t in expected]
    problems = []
    for t in sorted(failed):
        tag = "expected failure" if t in expected else "FAIL"
        if t not in expected or args.verbose:
            print(f"{tag}: {t}: {results[t]}")
    problems += [f"{t} passes but is listed as an expected failure: remove it from the list"
                 for t in fixed]
    if full_run:
        problems += [f"{t} is listed as an expected failure but is not run: remove it"
                     for t in sorted(set(expected) - set(failed) - set(passed))]
    problems += check_skips(skipped, load_expected(args.skips), full_run, args.verbose)
    if floor is not None and len(passed) < floor:
        problems.append(f"{len(passed)} passed, below the floor of {floor} "
                        f"({os.path.relpath(args.floor_file)})")
    print(f"{len(passed)} passed, {len(failed) - len(unexpected)} expected failures, "
          f"{len(skipped)} skipped, {len(unexpected)} unexpected failures "
          f"(of {len(tests) + len(skipped)} node tests; floor {floor if floor is not None else '-'})")
    for p in problems:
        print(f"error: {p}")
    if floor is not None and len(passed) > floor and not problems and not unexpected:
        print(f"note: {len(passed)} passed is above the floor of {floor}: raise it")
    return 1 if unexpected or problems else 0


if __name__ == "__main__":
    sys.exit(main())
