"""ONNX Runtime (onnxruntime-node, CPU) as a second runtime for the CLI tests: models
that fpguard converts, and the examples in float32, are run in it and compared with
`fpguard run` on the same inputs (convert_test.py). scripts/setup BUILD installs the
runtime into BUILD/ort-node; without it the tests fail, saying so (they never skip).

Tolerances (docs/convert.md):
- float32 models: |ort - fpguard| <= 1e-5 * max|fpguard| elementwise (two float32
  runtimes that sum in different orders);
- converted float16 models: |ort - fpguard| <= 4 float16 ulps of max|fpguard| (ulp =
  2^(floor(log2 max|fpguard|) - 10)); both round every float16 node output, but may sum
  in different orders in float32 before rounding, so a value can sit one rounding apart
  and that difference can travel a few nodes;
- graphs whose float16 arithmetic is exact: bit-identical.
"""
import json
import os
import shutil
import subprocess

import numpy as np

from clitest import check

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_run.js")
FP32_RTOL = 1e-5
FP16_ULPS = 4


def available(ort_dir):
    """True when node and onnxruntime-node are there; else a failure that says how to
    get them."""
    pkg = os.path.join(ort_dir, "node_modules", "onnxruntime-node", "package.json")
    node = shutil.which("node")
    check(node is not None and os.path.exists(pkg),
          "ONNX Runtime for Node.js is installed for the tests",
          f"{pkg} is missing (node: {node}): `scripts/setup {os.path.dirname(ort_dir)}` "
          "installs it with npm; if npm cannot reach its registry, these tests fail")
    return node is not None and os.path.exists(pkg)


def run_ort(ort_dir, model, inputs, tmp):
    """The outputs of `model` in ONNX Runtime for `inputs` (name -> array), by name; None
    (and a failure) when it does not run."""
    ind, outd = os.path.join(tmp, "ort_in"), os.path.join(tmp, "ort_out")
    for d in (ind, outd):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    listed = []
    for i, (name, a) in enumerate(inputs.items()):
        dtype = "float16" if a.dtype == np.float16 else str(a.dtype)
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(ind, f"in_{i}.bin"))
        listed.append({"name": name, "dtype": dtype, "shape": list(a.shape), "file": f"in_{i}.bin"})
    with open(os.path.join(ind, "tensors.json"), "w") as fh:
        json.dump(listed, fh)
    r = subprocess.run(["node", RUNNER, ort_dir, model, ind, outd], capture_output=True,
                       text=True, timeout=600)
    check(r.returncode == 0, f"{os.path.basename(model)}: runs in ONNX Runtime", r.stderr[-500:])
    if r.returncode != 0:
        return None
    out = {}
    with open(os.path.join(outd, "tensors.json")) as fh:
        for t in json.load(fh):
            dt = {"float16": np.float16, "bool": np.bool_}.get(t["dtype"], t["dtype"])
            out[t["name"]] = np.fromfile(os.path.join(outd, t["file"]),
                                         dtype=np.dtype(dt).newbyteorder("<")).reshape(t["shape"])
    return out


def fp16_ulp(x):
    """The float16 ulp at magnitude x (normal range)."""
    return 2.0 ** (np.floor(np.log2(max(x, 2.0 ** -14))) - 10)


def compare(what, ours, theirs, mode):
    """mode: "fp32", "fp16" or "exact" (see the module's tolerances)."""
    check(set(ours) == set(theirs), f"{what}: the same outputs", (sorted(ours), sorted(theirs)))
    for name in sorted(set(ours) & set(theirs)):
        a = np.asarray(ours[name]).astype(np.float64)
        b = np.asarray(theirs[name]).astype(np.float64)
        if a.shape != b.shape:
            check(False, f"{what} {name}: shape", (a.shape, b.shape))
            continue
        if mode == "exact":
            check(np.array_equal(a, b, equal_nan=True), f"{what} {name}: bit-identical",
                  float(np.nanmax(np.abs(a - b))) if a.size else 0)
            continue
        finite = np.isfinite(a)
        check(np.array_equal(finite, np.isfinite(b)), f"{what} {name}: the same non-finite values")
        scale = float(np.abs(a[finite]).max()) if finite.any() else 0.0
        bound = FP32_RTOL * scale if mode == "fp32" else FP16_ULPS * fp16_ulp(scale)
        diff = float(np.abs(a[finite] - b[finite]).max()) if finite.any() else 0.0
        check(diff <= bound, f"{what} {name}: ONNX Runtime within {mode} tolerance",
              f"max |diff| {diff:.6g} > {bound:.6g} (max |value| {scale:.6g})")
