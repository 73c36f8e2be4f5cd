#!/usr/bin/python3
"""End-to-end tests of scaled precisions in `fpguard run` and `fpguard check`
(docs/executor.md): MatMul, Gemm (transB=1) and a grouped Conv run in MX / NVFP4 against
NumPy built on tests/reference/mxref.py (operands quantized along the reduction axis,
products summed, the output rounded to bfloat16); `check --precision fp8` on a conv net with
large folded-BatchNorm weights passes where raw float8_e4m3fn fails.

    scaled_test.py --fpguard PATH
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import mxref  # noqa: E402

sys.path.insert(0, HERE)
from clitest import check, check_json, failures, read_outputs, run  # noqa: E402


def bf16(x):
    """float64 values rounded once, to nearest-even, into bfloat16 (8 significant bits)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    with np.errstate(divide="ignore"):
        _, ex = np.frexp(a)
    quantum = np.ldexp(1.0, np.maximum(ex - 1, -126) - 7)
    return np.copysign(np.rint(a / quantum) * quantum, x)


def check_products(got, exact, magnitude, what):
    """The fpguard output `got` is bf16(s) for the float32 sum s of the products, whose exact
    value is `exact`. A float32 sum of K terms is within K * 2^-24 * sum |terms| of the exact
    one (`magnitude` bounds that sum times 2^-17, K <= 128 here); bfloat16 rounding is
    monotonic, so got lies between bf16 of the two ends of that interval: where they agree
    (all but values next to a bfloat16 rounding boundary) it is that value, bit for bit."""
    lo, hi = bf16(exact - magnitude), bf16(exact + magnitude)
    got = got.astype(np.float64)
    ok = (got >= lo) & (got <= hi)
    check(bool(ok.all()), f"{what}: within the float32 sum's rounding", (got[~ok], exact[~ok]))
    exact_share = np.mean(got == bf16(exact))
    check(exact_share >= 0.9, f"{what}: bit for bit almost everywhere", exact_share)


def save(tmp, name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    return path


def tensor(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def run_model(f, tmp, model, x, precision):
    xp = os.path.join(tmp, "x.npy")
    np.save(xp, x)
    out = os.path.join(tmp, "out")
    r = run(f, "run", model, "--input", "x=" + xp, "--precision", precision, "--outputs", out)
    check(r.returncode == 0, f"run {model} {precision}", r.stderr)
    return read_outputs(out)["y"] if r.returncode == 0 else None


def matmul_mx(f, tmp, rng):
    # K = 70: two blocks of 32 and a short one of 6 along K, for A (axis -1) and B (axis -2).
    a = (rng.standard_normal((4, 70)) * np.exp(rng.uniform(-4, 4, (4, 70)))).astype(np.float32)
    b = rng.standard_normal((70, 5)).astype(np.float32)
    model = save(tmp, "matmul", [helper.make_node("MatMul", ["x", "b"], ["y"])],
                 [tensor("x", [4, 70])], [tensor("y", [4, 5])], {"b": b})
    got = run_model(f, tmp, model, a, "mxfp8_e4m3")
    if got is None:
        return
    qa = mxref.quantize_mx(a, "mxfp8_e4m3", axis=-1)[0].astype(np.float64)
    qb = mxref.quantize_mx(b, "mxfp8_e4m3", axis=0)[0].astype(np.float64)
    check_products(got, qa @ qb, np.ldexp(np.abs(qa) @ np.abs(qb), -17), "MatMul mxfp8_e4m3")
    # Not just a bfloat16 MatMul: the quantization shows.
    check(not np.array_equal(got, bf16(a.astype(np.float64) @ b)), "MatMul: operands quantized")


def gemm_trans_b(f, tmp, rng):
    # B is [N, K] with transB = 1: its blocks run along axis 1; the bias C stays bfloat16.
    a = rng.standard_normal((3, 40)).astype(np.float32)
    b = rng.standard_normal((6, 40)).astype(np.float32)
    c = rng.standard_normal(6).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "b", "c"], ["y"], transB=1)
    model = save(tmp, "gemm", [node], [tensor("x", [3, 40])], [tensor("y", [3, 6])],
                 {"b": b, "c": c})
    got = run_model(f, tmp, model, a, "mxfp4_e2m1")
    if got is None:
        return
    qa = mxref.quantize_mx(a, "mxfp4_e2m1", axis=1)[0].astype(np.float64)
    qb = mxref.quantize_mx(b, "mxfp4_e2m1", axis=1)[0].astype(np.float64)
    bias = bf16(c)
    mag = np.ldexp(np.abs(qa) @ np.abs(qb).T + np.abs(bias), -17)
    check_products(got, qa @ qb.T + bias, mag, "Gemm transB=1 mxfp4_e2m1")


def conv_grouped(f, tmp, rng):
    # group = 2: 40 input channels per group, blocked within the group (16 + 16 + 8 for
    # NVFP4's blocks of 16), per kernel position; W [O, C/group, kh, kw] along axis 1.
    x = rng.standard_normal((1, 80, 4, 4)).astype(np.float32)
    w = rng.standard_normal((4, 40, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2)
    model = save(tmp, "conv", [node], [tensor("x", [1, 80, 4, 4])], [tensor("y", [1, 4, 2, 2])],
                 {"w": w})
    got = run_model(f, tmp, model, x, "nvfp4")
    if got is None:
        return
    qx = mxref.quantize_nvfp4(x.reshape(1, 2, 40, 4, 4), axis=2)[0].reshape(x.shape)
    qw = mxref.quantize_nvfp4(w, axis=1)[0]
    qx, qw = qx.astype(np.float64), qw.astype(np.float64)
    exact = np.zeros((1, 4, 2, 2))
    mag = np.zeros((1, 4, 2, 2))
    for o in range(4):
        grp = o // 2
        for i in range(2):
            for j in range(2):
                patch = qx[0, 40 * grp:40 * grp + 40, i:i + 3, j:j + 3]
                exact[0, o, i, j] = np.sum(patch * qw[o])
                mag[0, o, i, j] = np.sum(np.abs(patch * qw[o]))
    check_products(got, exact, np.ldexp(mag, -17), "Conv group=2 nvfp4")


def folded_bn_net(tmp, rng):
    """Conv -> Relu -> Conv whose weights carry a folded BatchNorm's large scale (beyond
    448) and whose input reaches 1e4: raw FP8 cannot hold them, scaled FP8 can."""
    w1 = (rng.standard_normal((8, 4, 3, 3)) * 300).astype(np.float32)  # |w| up to ~1200
    b1 = rng.standard_normal(8).astype(np.float32) * 100
    w2 = (rng.standard_normal((4, 8, 3, 3)) * 0.01).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    model = save(tmp, "bn_net", nodes, [tensor("x", [1, 4, 8, 8])], [tensor("y", [1, 4, 8, 8])],
                 {"w1": w1, "b1": b1, "w2": w2})
    d = os.path.join(tmp, "bn_inputs")
    for k in range(2):  # two input sets: the calibration covers both
        os.makedirs(os.path.join(d, f"set_{k}"))
        x = rng.uniform(-1e4, 1e4, (1, 4, 8, 8)).astype(np.float32)
        np.save(os.path.join(d, f"set_{k}", "x.npy"), x)
    return model, d


def check_fp8(f, tmp, rng):
    # FP8's 4 significant bits give a random-sign convolution a relative RMS error near 5%
    # (cosine ~0.9988): both checks are judged by cosine >= 0.99, which raw FP8's NaN fails.
    model, d = folded_bn_net(tmp, rng)
    crit = ("--min-cosine", "0.99")
    r, raw = check_json(f, tmp, model, d, "--precision", "float8_e4m3fn", *crit)
    if raw:
        check(raw["verdict"] == "fail" and raw["outputs"][0]["nonfinite"] > 0,
              "raw float8_e4m3fn fails (inf/NaN)", raw["outputs"])
    r, j = check_json(f, tmp, model, d, "--precision", "fp8", *crit)
    if not j:
        return
    check(r.returncode == 0 and j["verdict"] == "pass", "check --precision fp8 passes",
          (j["outputs"], r.stdout[-600:]))
    check(j["precision"] == "tensor:float8_e4m3fn" and j["other_precision"] == "bfloat16"
          and j["amax_margin"] == 0, "scaled precision fields", (j["precision"],))
    prec = {n["name"]: n["precision"] for n in j["nodes"]}
    check(prec == {"Conv_0": "tensor:float8_e4m3fn", "Relu_1": "bfloat16",
                   "Conv_2": "tensor:float8_e4m3fn"}, "node precisions", prec)
    # A margin far below the calibrated amax saturates the activations: visibly worse.
    r, low = check_json(f, tmp, model, d, "--precision", "fp8", "--amax-margin", "-6", *crit)
    if low:
        check(low["amax_margin"] == -6, "margin recorded", low["amax_margin"])
        check(low["outputs"][0]["cosine"] < j["outputs"][0]["cosine"], "margin -6 saturates",
              (low["outputs"][0]["cosine"], j["outputs"][0]["cosine"]))
    # Lists mix scalar and scaled precisions.
    r, both = check_json(f, tmp, model, d, "--precision", "bfloat16,channel:float8_e4m3fn")
    if both:
        check([c["precision"] for c in both["checks"]] == ["bfloat16", "channel:float8_e4m3fn"]
              and both["checks"][0]["other_precision"] == "", "a list of precisions",
              json.dumps(both)[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    f = ap.parse_args().fpguard
    rng = np.random.default_rng(21)
    with tempfile.TemporaryDirectory() as tmp:
        matmul_mx(f, tmp, rng)
        gemm_trans_b(f, tmp, rng)
        conv_grouped(f, tmp, rng)
        check_fp8(f, tmp, rng)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("scaled precisions: all passed")


if __name__ == "__main__":
    main()
