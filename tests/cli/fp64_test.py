#!/usr/bin/python3
"""End-to-end tests of the float64 truth run (float64 carriers):

- `fpguard run --precision float64` computes in double: on a float32 model exercising
  MatMul, Gemm (transB), Add, Tanh, LayerNormalization, Softmax, Conv, Relu,
  GlobalAveragePool, Exp and ReduceSum, every node output (`--dump-all`, float64 carriers)
  matches NumPy's float64 evaluation to 1e-12 (relative to the tensor's largest value),
  while the float32 run is off by more than 1e-9: the test tells the two apart. The
  graph outputs are written in the declared float32, equal to the double values rounded.
- A Cast to float16 in a float64 run still rounds to float16, and the product after it is
  exact in double (bit for bit against NumPy; the float32 run rounds it).
- `fpguard check --reference fp64`: on examples/clean_cnn the JSON says reference
  "float64" and the output errors agree with the float32 reference's to 1%; superres
  keeps its /Pow overflow origin. A crafted model whose float32 reference is itself wrong
  ((x + 1e7) - 1e7 rounds x to an integer in float32) passes against the float32
  reference and fails against the float64 one.
- Bad input: --accumulate or --exclude with --precision float64 (check_test.py has
  --reference fp128).

    fp64_test.py --fpguard PATH --examples DIR
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, failures, read_outputs, run  # noqa: E402


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def save(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def rel_err(got, want):
    """max |got - want| over the largest |want|: the norm-wise relative error."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def mix_model(tmp, rng):
    """A float32 model over several kernel families, and NumPy's float64 values of each
    node output (float32 weights and inputs, widened)."""
    w1 = rng.normal(0, 1, (512, 64)).astype(np.float32)
    b1 = rng.normal(0, 1, (64,)).astype(np.float32)
    w2 = rng.normal(0, 0.5, (32, 64)).astype(np.float32)
    c2 = rng.normal(0, 1, (32,)).astype(np.float32)
    sc = rng.uniform(0.5, 1.5, (32,)).astype(np.float32)
    bi = rng.normal(0, 0.1, (32,)).astype(np.float32)
    wc = rng.normal(0, 1, (4, 3, 3, 3)).astype(np.float32)
    bc = rng.normal(0, 1, (4,)).astype(np.float32)
    axes = np.array([1], np.int64)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b1"], ["h2"], name="add"),
        helper.make_node("Tanh", ["h2"], ["t"], name="tanh"),
        helper.make_node("Gemm", ["t", "w2", "c2"], ["g"], name="gemm", transB=1, alpha=0.75),
        helper.make_node("LayerNormalization", ["g", "sc", "bi"], ["ln"], name="ln", axis=-1),
        helper.make_node("Softmax", ["ln"], ["y"], name="softmax", axis=-1),
        helper.make_node("Conv", ["img", "wc", "bc"], ["cv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["cv"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["z"], name="gap"),
        helper.make_node("Exp", ["x"], ["ex"], name="exp"),
        helper.make_node("ReduceSum", ["ex", "axes"], ["s"], name="sum", keepdims=0),
    ]
    path = os.path.join(tmp, "mix.onnx")
    save(path, nodes, [vi("x", [8, 512]), vi("img", [1, 3, 16, 16])],
         [vi("y", [8, 32]), vi("z", [1, 4, 1, 1]), vi("s", [8])],
         {"w1": w1, "b1": b1, "w2": w2, "c2": c2, "sc": sc, "bi": bi, "wc": wc, "bc": bc,
          "axes": axes})
    x = rng.uniform(-1, 1, (8, 512)).astype(np.float32)
    img = rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    np.save(os.path.join(tmp, "img.npy"), img)

    D = np.float64
    want = {}
    want["h"] = x.astype(D) @ w1.astype(D)
    want["h2"] = want["h"] + b1.astype(D)
    want["t"] = np.tanh(want["h2"])
    want["g"] = 0.75 * (want["t"] @ w2.astype(D).T) + c2.astype(D)
    g = want["g"]
    mu = g.mean(-1, keepdims=True)
    var = ((g - mu) ** 2).mean(-1, keepdims=True)
    want["ln"] = (g - mu) / np.sqrt(var + D(np.float32(1e-5))) * sc.astype(D) + bi.astype(D)
    e = np.exp(want["ln"] - want["ln"].max(-1, keepdims=True))
    want["y"] = e / e.sum(-1, keepdims=True)
    xp = np.pad(img.astype(D), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cv = np.zeros((1, 4, 16, 16))
    for o in range(4):
        for i in range(16):
            for j in range(16):
                cv[0, o, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * wc[o].astype(D)) + bc[o]
    want["cv"] = cv
    want["r"] = np.maximum(cv, 0)
    want["z"] = want["r"].mean(axis=(2, 3), keepdims=True)
    want["ex"] = np.exp(x.astype(D))
    want["s"] = want["ex"].sum(1)
    return path, want


def test_run(f, tmp):
    rng = np.random.default_rng(7)
    model, want = mix_model(tmp, rng)
    inputs = ["--input", "x=" + os.path.join(tmp, "x.npy"), "--input",
              "img=" + os.path.join(tmp, "img.npy"), "--threads", "1"]
    d64, d32, o64 = (os.path.join(tmp, n) for n in ("dump64", "dump32", "out64"))
    r = run(f, "run", model, *inputs, "--precision", "float64", "--dump-all", d64,
            "--outputs", o64)
    check(r.returncode == 0, "run --precision float64", r.stderr)
    r = run(f, "run", model, *inputs, "--dump-all", d32)
    check(r.returncode == 0, "run (float32)", r.stderr)
    r = run(f, "run", model, *inputs, "--precision", "fp64", "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["outputs"][0]["dtype"] == "float32",
          "fp64 alias; outputs in the declared dtype", r.stdout[-300:] + r.stderr)
    if failures:
        return
    got64, got32 = read_outputs(d64), read_outputs(d32)
    for name, w in want.items():
        g64, g32 = got64[name], got32[name]
        check(g64.dtype == np.float64, f"{name}: the float64 run's carrier is float64", g64.dtype)
        check(g32.dtype == np.float32, f"{name}: the float32 run's carrier is float32", g32.dtype)
        e64, e32 = rel_err(g64, w), rel_err(g32, w)
        check(e64 <= 1e-12, f"{name}: float64 run matches NumPy float64", e64)
        check(e32 > 1e-9, f"{name}: float32 run differs from NumPy float64", e32)
    outs = read_outputs(o64)
    for name in ("y", "z", "s"):
        check(outs[name].dtype == np.float32 and
              np.array_equal(outs[name], got64[name].astype(np.float32)),
              f"{name}: written as float32, the double values rounded")


def test_cast(f, tmp):
    # y = float(float16(x)) * x: the Cast rounds to float16 in either run; the product of
    # an 11-bit and a 24-bit significand is exact in double, not in float32.
    path = os.path.join(tmp, "cast.onnx")
    save(path, [helper.make_node("Cast", ["x"], ["h"], name="to16", to=TensorProto.FLOAT16),
                helper.make_node("Cast", ["h"], ["hf"], name="to32", to=TensorProto.FLOAT),
                helper.make_node("Mul", ["hf", "x"], ["y"], name="mul")],
         [vi("x", [256])], [vi("y", [256])], {})
    x = np.random.default_rng(3).uniform(-3, 3, 256).astype(np.float32)
    xf = os.path.join(tmp, "xc.npy")
    np.save(xf, x)
    want = x.astype(np.float16).astype(np.float64) * x.astype(np.float64)
    d64, d32 = os.path.join(tmp, "cast64"), os.path.join(tmp, "cast32")
    r = run(f, "run", path, "--input", "x=" + xf, "--precision", "float64", "--dump-all", d64)
    check(r.returncode == 0, "cast model, float64", r.stderr)
    r = run(f, "run", path, "--input", "x=" + xf, "--dump-all", d32)
    check(r.returncode == 0, "cast model, float32", r.stderr)
    if failures:
        return
    g64, g32 = read_outputs(d64), read_outputs(d32)
    check(np.array_equal(g64["hf"], x.astype(np.float16).astype(np.float64)),
          "Cast to float16 rounds to float16 in a float64 run")
    check(np.array_equal(g64["y"], want), "float64 run: the product exactly",
          np.max(np.abs(g64["y"] - want)))
    check(not np.array_equal(g32["y"].astype(np.float64), want), "float32 run: the product rounded")


def check_json(f, tmp, model, *argv):
    out = os.path.join(tmp, "check.json")
    if os.path.exists(out):
        os.remove(out)
    r = run(f, "check", model, "--json", out, "--quiet", *argv)
    check(r.returncode in (0, 1), f"check {model} {argv} runs", r.stderr)
    if r.returncode not in (0, 1):
        return None
    with open(out) as fh:
        return json.load(fh)


def test_check_examples(f, ex, tmp):
    cnn = os.path.join(ex, "clean_cnn")
    args = ["--inputs", os.path.join(cnn, "inputs"), "--precision", "fp16"]
    j32 = check_json(f, tmp, os.path.join(cnn, "model.onnx"), *args)
    j64 = check_json(f, tmp, os.path.join(cnn, "model.onnx"), *args, "--reference", "fp64")
    if not j32 or not j64:
        return
    check(j32["reference"] == "float32" and j64["reference"] == "float64", "reference field",
          (j32["reference"], j64["reference"]))
    check(j64["verdict"] == "pass", "clean_cnn passes against the float64 reference", j64["verdict"])
    for a, b in zip(j32["outputs"], j64["outputs"]):
        check(b["max_abs_error"] > 0 and
              abs(a["max_abs_error"] - b["max_abs_error"]) <= 0.01 * a["max_abs_error"],
              "clean_cnn: output max abs error agrees with the float32 reference's",
              (a["max_abs_error"], b["max_abs_error"]))
        check(abs(a["cosine"] - b["cosine"]) < 1e-6, "clean_cnn: cosine agrees",
              (a["cosine"], b["cosine"]))
    sr = os.path.join(ex, "superres")
    j = check_json(f, tmp, os.path.join(sr, "model.onnx"), "--inputs",
                   os.path.join(sr, "inputs"), "--precision", "fp16", "--reference", "fp64")
    if j:
        check(j["verdict"] == "fail" and [o["node"] for o in j["origins"]] == ["/Pow"],
              "superres against float64: the /Pow origin", [o["node"] for o in j["origins"]])
        pw = next(n for n in j["nodes"] if n["name"] == "/Pow")
        check(pw["outputs"][0]["overflow"] == 59, "superres /Pow overflow count",
              pw["outputs"][0]["overflow"])


def test_check_inaccurate_reference(f, tmp):
    # (x + 1e7) - 1e7 in float32 rounds x in [0, 1) to 0 or 1 (the spacing of float32 at
    # 1e7 is 1); in float64 it is x. With Add and Sub kept in float32 the float16 run
    # computes exactly what the float32 reference does (Mul by 1 is exact), so it
    # "passes"; against the float64 truth it fails.
    path = os.path.join(tmp, "cancel.onnx")
    save(path, [helper.make_node("Add", ["x", "big"], ["a"], name="add"),
                helper.make_node("Sub", ["a", "big"], ["b"], name="sub"),
                helper.make_node("Mul", ["b", "one"], ["y"], name="mul")],
         [vi("x", [1024])], [vi("y", [1024])],
         {"big": np.array([1e7], np.float32), "one": np.array([1.0], np.float32)})
    x = np.random.default_rng(5).uniform(0, 1, 1024).astype(np.float32)
    xf = os.path.join(tmp, "xcancel.npy")
    np.save(xf, x)
    args = ["--input", "x=" + xf, "--precision", "fp16", "--keep-fp32", "add,sub"]
    j32 = check_json(f, tmp, path, *args)
    j64 = check_json(f, tmp, path, *args, "--reference", "fp64")
    if not j32 or not j64:
        return
    o32, o64 = j32["outputs"][0], j64["outputs"][0]
    check(j32["verdict"] == "pass" and o32["max_abs_error"] == 0,
          "cancel: the float16 run equals the float32 reference", o32)
    check(j64["verdict"] == "fail", "cancel: fails against the float64 reference", o64)
    want = np.max(np.abs(np.round(x.astype(np.float64)) - x.astype(np.float64)))
    check(abs(o64["max_abs_error"] - want) <= 1e-7, "cancel: max abs error = max |round(x) - x|",
          (o64["max_abs_error"], want))
    sub = next(n for n in j64["nodes"] if n["name"] == "sub")
    check(sub["precision"] == "float32" and sub["outputs"][0]["propagated"]["max_abs_error"] > 0.4,
          "cancel: the float32 node's error is visible against float64", sub)


def test_errors(f, ex, tmp):
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    fails(f, "float64 with --accumulate", ["run", model, "--precision", "float64",
                                           "--accumulate", "fp16"], "--accumulate")
    fails(f, "float64 with --exclude", ["run", model, "--precision", "float64", "--exclude",
                                        "Relu"], "--exclude")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        test_run(a.fpguard, tmp)
        test_cast(a.fpguard, tmp)
        test_check_examples(a.fpguard, a.examples, tmp)
        test_check_inaccurate_reference(a.fpguard, tmp)
        test_errors(a.fpguard, a.examples, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
