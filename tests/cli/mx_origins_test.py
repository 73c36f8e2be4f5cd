#!/usr/bin/python3
"""End-to-end tests of the scaled-precision origins of `fpguard check` and of `fpguard plan`
with scaled precisions (docs/check.md, "Scaled precisions"): crafted MatMul models built with
onnx, every expected count recomputed in NumPy on tests/reference/mxref.py (written from the
OCP MX, NVFP4 and scaled-FP8 definitions, not from fpguard).

  - one large outlier per row of a MatMul's activation: a block_underflow origin at that
    MatMul in mxfp4_e2m1 (the outlier's block scale flushes its 31 neighbours), none in
    mxfp8_e4m3 (E4M3 elements hold 17 binades under the same scale);
  - one huge outlier in a MatMul's activation: a scale_underflow origin in fp8 (the amax it
    sets puts most values into E4M3's subnormals or to zero);
  - an amax margin of -4: values clipped far past rounding, a block_saturation origin;
  - plan --precision mxfp4_e2m1 keeps the outlier MatMul in float32, and the check of that
    plan passes.

    mx_origins_test.py --fpguard PATH
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
from clitest import check, check_json, failures, fails, run  # noqa: E402

M, K, N = 16, 64, 24


def save(tmp, name, nodes, inits, x_shape, y_shape):
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def inputs_dir(tmp, name, x):
    d = os.path.join(tmp, name + "_inputs", "set_0")
    os.makedirs(d)
    np.save(os.path.join(d, "x.npy"), x)
    return os.path.dirname(d)


def mx_counts(x, fmt, axis):
    """What the MX scales do to x (docs/check.md): per block of 32 along `axis`, values
    flushed to zero while a larger one stayed non-zero; swamped blocks are those where at least
    half the non-zero values were flushed."""
    q = mxref.quantize_mx(x, fmt, axis=axis)[0]
    xb, _ = mxref.blocks_view(x, axis, 32)
    qb, _ = mxref.blocks_view(q, axis, 32)
    nz = xb != 0
    zeroed = (nz & (qb == 0)).sum(axis=-1)
    kept = (nz & (qb != 0)).any(axis=-1)
    flushed = (zeroed > 0) & kept
    swamped = flushed & (2 * zeroed >= nz.sum(axis=-1))
    return {"nonzero": int(nz.sum()), "blocks": int(zeroed.size),
            "flushed": int(zeroed[flushed].sum()), "flushed_blocks": int(flushed.sum()),
            "swamped": int(zeroed[swamped].sum()), "swamped_blocks": int(swamped.sum())}


def outlier_model(tmp, rng, name):
    """x [M, K] ~ N(0, 1) with one outlier of 64 per row, in channel 0, which the first
    weight damps (as LLMs' outlier channels are): h = x @ w1 depends on the other channels,
    32 of which share the outlier's block. Then y = h @ w2."""
    x = rng.standard_normal((M, K)).astype(np.float32)
    x[:, 0] = 64 * np.sign(rng.standard_normal(M)).astype(np.float32)
    w1 = rng.standard_normal((K, N)).astype(np.float32)
    w1[0, :] *= 0.01
    w2 = rng.standard_normal((N, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm_outlier"),
             helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm_next")]
    model = save(tmp, name, nodes, {"w1": w1, "w2": w2}, [M, K], [M, 8])
    return model, inputs_dir(tmp, name, x), x, w1


def origins_of(j, kind):
    return [o for o in j["origins"] if o["kind"] == kind]


def block_underflow(f, tmp, rng):
    model, d, x, w1 = outlier_model(tmp, rng, "outlier")
    want = mx_counts(x, "mxfp4_e2m1", -1)
    # The test's premise, in NumPy: mxfp4 swamps the outlier blocks (one per row), mxfp8 none.
    check(want["swamped_blocks"] == M, "premise: one swamped block per row in mxfp4", want)
    check(mx_counts(x, "mxfp8_e4m3", -1)["swamped"] == 0, "premise: none in mxfp8")
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1")
    if not j:
        return
    got = origins_of(j, "block_underflow")
    check(len(got) == 1 and got[0]["node"] == "mm_outlier", "block_underflow at mm_outlier",
          json.dumps(j["origins"])[:600])
    if got:
        o = got[0]
        check(o["operand"] == 0 and o["related"] == "x" and o["format"] == "mxfp4_e2m1"
              and o["cause"] == "outlier_scale", "the activation operand", o)
        check((o["affected"], o["total"], o["blocks_affected"], o["blocks"])
              == (want["swamped"], want["nonzero"], want["swamped_blocks"], want["blocks"]),
              "affected values and blocks as NumPy counts them", (o, want))
        kinds = [x["kind"] for x in o["fixes"]]
        formats = [x.get("format") for x in o["fixes"]]
        check(kinds[0] == "keep_fp32" and o["fixes"][0]["nodes"] == ["mm_outlier"]
              and "block:float4_e2m1fn:float8_e8m0fnu:8" in formats and "nvfp4" in formats,
              "fixes: keep it, a smaller block, NVFP4", o["fixes"])
        check("flushes its neighbours" in o["message"] and "(nvfp4)" in " ".join(o["suggestions"]),
              "worded", (o["message"], o["suggestions"]))
        check("block_underflow" in r.stdout and "mm_outlier" in r.stdout, "text names it",
              r.stdout[-800:])
    # The node's operand counts, field by field (x along K; w1 along K too: axis 0).
    nodes = {n["name"]: n for n in j["nodes"]}
    ops = nodes["mm_outlier"]["scaled_operands"]
    check([s["input"] for s in ops] == [0, 1] and ops[1]["weight"] and not ops[0]["weight"],
          "both operands recorded", ops)
    for s, want_s in zip(ops, [want, mx_counts(w1, "mxfp4_e2m1", 0)]):
        check({k: s[k] for k in want_s} == want_s, f"operand {s['input']} counts", (s, want_s))
    r, j8 = check_json(f, tmp, model, d, "--precision", "mxfp8_e4m3")
    if j8:
        check(not origins_of(j8, "block_underflow"), "no block_underflow in mxfp8_e4m3",
              json.dumps(j8["origins"])[:400])
        ops8 = {n["name"]: n for n in j8["nodes"]}["mm_outlier"]["scaled_operands"]
        check(ops8[0]["swamped"] == 0 and ops8[0]["format"] == "mxfp8_e4m3", "mxfp8 counts",
              ops8[0])
    # --fail-on takes the new kinds.
    r, jf = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", "--min-cosine", "0",
                       "--fail-on", "block_underflow")
    if jf:
        check(r.returncode == 1 and jf["verdict"] == "fail" and "mm_outlier" in jf["absorbed"],
              "--fail-on block_underflow fails an absorbed one", (r.returncode, jf["absorbed"]))


def fp8_counts(x, amax):
    """Scaled FP8 of x with the static amax: non-zero values whose E4M3 element is a
    subnormal or zero."""
    vals, codes, _ = mxref.quantize_amax(x, "tensor:float8_e4m3fn")
    assert np.max(np.abs(x)) == amax
    nz = x != 0
    exp_bits, mant = (codes >> 3) & 0xF, codes & 0x7
    low = nz & ((vals == 0) | ((exp_bits == 0) & (mant != 0)))
    return int(nz.sum()), int(low.sum())


def one_outlier(tmp, rng, name, big):
    x = rng.standard_normal((M, K)).astype(np.float32)
    x[3, 5] = big
    w = rng.standard_normal((K, N)).astype(np.float32)
    model = save(tmp, name, [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                 {"w": w}, [M, K], [M, N])
    return model, inputs_dir(tmp, name, x), x


def scale_underflow(f, tmp, rng):
    model, d, x = one_outlier(tmp, rng, "huge", 1e5)
    total, low = fp8_counts(x, 1e5)
    check(2 * low >= total, "premise: most values subnormal or zero", (low, total))
    r, j = check_json(f, tmp, model, d, "--precision", "fp8")
    if not j:
        return
    got = origins_of(j, "scale_underflow")
    check(len(got) == 1 and got[0]["node"] == "mm" and got[0]["operand"] == 0,
          "scale_underflow at mm, its activation", json.dumps(j["origins"])[:600])
    if got:
        o = got[0]
        check((o["affected"], o["total"], o["format"]) == (low, total, "tensor:float8_e4m3fn"),
              "the values NumPy puts below E4M3's normal range", (o, low, total))
        check("mxfp8_e4m3" in [x.get("format") for x in o["fixes"]], "MX blocks suggested",
              o["fixes"])
    # Without the outlier nothing of the kind (N(0, 1): amax ~4, few values below 2^-6 amax/448).
    model, d, x = one_outlier(tmp, rng, "plain", 1.0)
    r, j = check_json(f, tmp, model, d, "--precision", "fp8")
    if j:
        check(not origins_of(j, "scale_underflow"), "none without the outlier", j["origins"])


def block_saturation(f, tmp, rng):
    # amax margin -4: the static scale is amax / 16 / 448, values beyond amax / 16 clip to it.
    model, d, x = one_outlier(tmp, rng, "margin", 1.0)
    r, j = check_json(f, tmp, model, d, "--precision", "fp8", "--amax-margin", "-4")
    if not j:
        return
    amax = np.float32(np.max(np.abs(x)))
    top = np.float32(np.float32(amax * np.float32(2.0 ** -4)) / np.float32(448)) * np.float32(448)
    a = np.abs(x.astype(np.float64))
    clipped = int(np.sum((a > top) & ((a - top) > 0.25 * a)))  # E4M3: 4 bits, half lost: 2^-2
    got = origins_of(j, "block_saturation")
    check(clipped > 0 and len(got) == 1 and got[0]["node"] == "mm" and got[0]["affected"] == clipped
          and got[0]["cause"] == "clipped", "block_saturation: the values NumPy clips",
          (clipped, json.dumps(j["origins"])[:500]))


def plan_mxfp4(f, tmp, rng):
    model, d, _, _ = outlier_model(tmp, rng, "planned")
    out = os.path.join(tmp, "plan.json")
    crit = ("--min-cosine", "0.95")
    r = run(f, "plan", model, "--inputs", d, "--precision", "mxfp4_e2m1", "-o", out, "--quiet",
            *crit)
    check(r.returncode == 0, "plan mxfp4_e2m1 meets", (r.returncode, r.stdout[-600:], r.stderr))
    if r.returncode != 0:
        return
    with open(out) as fh:
        p = json.load(fh)
    check(p["precision"] == "mxfp4_e2m1" and p["fp32_nodes"] == ["mm_outlier"],
          "plan keeps the outlier MatMul", (p["precision"], p["fp32_nodes"]))
    reasons = json.dumps(p.get("islands", ""))
    check("block_underflow" in reasons, "kept for its block_underflow origin", reasons[:400])
    # The re-check of the plan passes; the model as a whole does not.
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", "--keep-fp32",
                      "mm_outlier", *crit)
    if j:
        check(r.returncode == 0 and j["verdict"] == "pass", "the plan's check passes",
              j["outputs"])
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", *crit)
    if j:
        check(j["verdict"] == "fail", "without the plan it fails", j["outputs"])


def bad_input(f, tmp, rng):
    model, d, _ = one_outlier(tmp, rng, "bad", 1.0)
    fails(f, "plan --target with a scaled precision",
          ["plan", model, "--inputs", d, "--precision", "mxfp4_e2m1", "--target", "b200"],
          "--target", "scaled")
    fails(f, "--fail-on unknown kind", ["check", model, "--inputs", d, "--fail-on", "block"],
          "block_underflow")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    f = ap.parse_args().fpguard
    rng = np.random.default_rng(2121)
    with tempfile.TemporaryDirectory() as tmp:
        block_underflow(f, tmp, rng)
        scale_underflow(f, tmp, rng)
        block_saturation(f, tmp, rng)
        plan_mxfp4(f, tmp, rng)
        bad_input(f, tmp, rng)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("scaled-precision origins: all passed")


if __name__ == "__main__":
    main()
