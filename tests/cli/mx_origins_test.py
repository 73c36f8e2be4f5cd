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
  - the keep_unscaled fix: --keep-unscaled runs the outlier MatMul unscaled in bfloat16
    (its output NumPy's bf16 product) and the re-check passes;
  - plan --precision mxfp4_e2m1 keeps the outlier MatMul unscaled in bfloat16, and the check
    of that plan passes;
  - a MatMul inside an If body: its operand counts recorded and its origin named by path;
  - convert refuses scaled precisions in one line;
  - plan/check --target with scaled precisions: run where the target runs the format
    natively, refused in one line where it does not.

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
from clitest import check, check_json, failures, fails, read_outputs, run  # noqa: E402

M, K, N = 16, 64, 24


def torch_bf16(v):
    """float32 values rounded to bfloat16 by torch (nearest-even), as float32."""
    import torch
    return torch.from_numpy(np.asarray(v, dtype=np.float32)).bfloat16().float().numpy()


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
        check(kinds[:2] == ["keep_unscaled", "keep_fp32"]
              and o["fixes"][0]["format"] == "bfloat16"
              and all(x["nodes"] == ["mm_outlier"] for x in o["fixes"][:2])
              and "block:float4_e2m1fn:float8_e8m0fnu:8" in formats and "nvfp4" in formats,
              "fixes: unscaled in bf16, float32, a smaller block, NVFP4", o["fixes"])
        check("flushes its neighbours" in o["message"] and "(nvfp4)" in " ".join(o["suggestions"])
              and "--keep-unscaled mm_outlier" in o["suggestions"][0],
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


def keep_unscaled(f, tmp, rng):
    """The keep_unscaled fix applied: the outlier MatMul unscaled in bfloat16 (its operands
    rounded to bfloat16, no shared scale), the rest in mxfp4_e2m1: the re-check passes where
    the whole model in mxfp4_e2m1 fails, and the node runs in bfloat16 with no operand counts
    and no scale origin."""
    model, d, x, w1 = outlier_model(tmp, rng, "unscaled")
    crit = ("--min-cosine", "0.95")
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", *crit)
    if j:
        check(j["verdict"] == "fail", "premise: mxfp4_e2m1 fails", j["outputs"])
    for other in ("bfloat16", "float16"):
        r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", "--other-precision",
                          other, "--keep-unscaled", "mm_outlier", *crit)
        if not j:
            continue
        check(r.returncode == 0 and j["verdict"] == "pass",
              f"--keep-unscaled mm_outlier ({other}) passes", j["outputs"])
        nodes = {n["name"]: n for n in j["nodes"]}
        check(nodes["mm_outlier"]["precision"] == other and
              not nodes["mm_outlier"]["scaled_operands"] and
              nodes["mm_next"]["precision"] == "mxfp4_e2m1",
              f"mm_outlier in {other}, mm_next still scaled",
              {k: (v["precision"], v["scaled_operands"]) for k, v in nodes.items()})
        check(not origins_of(j, "block_underflow"), "no scale origin left", j["origins"])
    # run: the unscaled node's output is bf16(bf16(x) @ bf16(w1)) (float32 accumulation:
    # within float32's gamma_K of NumPy's product, then the same bfloat16 rounding, up to one
    # bfloat16 ulp where the two float32 sums straddle a rounding boundary).
    outs = os.path.join(tmp, "unscaled_out")
    one = os.path.join(d, "set_0")
    r = run(f, "run", model, "--inputs", one, "--precision", "mxfp4_e2m1", "--keep-unscaled",
            "mm_outlier", "--dump-all", outs)
    check(r.returncode == 0, "run --keep-unscaled", r.stderr)
    if r.returncode == 0:
        h = read_outputs(outs).get("h")
        bf = lambda v: torch_bf16(v)  # noqa: E731
        want = bf(bf(x).astype(np.float64) @ bf(w1).astype(np.float64))
        check(h is not None and np.all(np.abs(h - want) <= 2.0**-7 * np.abs(want) + 1e-30),
              "mm_outlier = bf16(bf16(x) @ bf16(w1)) to one bfloat16 ulp",
              None if h is None else np.max(np.abs(h - want) / np.maximum(np.abs(want), 1e-30)))
    fails(f, "--keep-unscaled without a scaled precision",
          ["run", model, "--inputs", one, "--precision", "fp16", "--keep-unscaled", "mm_outlier"],
          "--keep-unscaled", "scaled")


def body_node(f, tmp, rng):
    """A MatMul inside an If's then-branch reading an activation with one outlier per row:
    its operand counts are recorded (by its path) and its block_underflow origin named, as
    for a main-graph node; --keep-unscaled takes the path."""
    x = rng.standard_normal((M, K)).astype(np.float32)
    x[:, 0] = 64 * np.sign(rng.standard_normal(M)).astype(np.float32)
    w1 = rng.standard_normal((K, N)).astype(np.float32)
    w1[0, :] *= 0.01
    w2 = rng.standard_normal((N, 8)).astype(np.float32)
    out = [helper.make_tensor_value_info("hb", TensorProto.FLOAT, [M, N])]
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["hb"], name="mm_body")],
                               "then", [], out)
    else_g = helper.make_graph([helper.make_node("Identity", ["w_else"], ["hb"], name="id")],
                               "else", [], out)
    nodes = [helper.make_node("Constant", [], ["c"], name="c",
                              value=numpy_helper.from_array(np.array(True), "c")),
             helper.make_node("If", ["c"], ["h"], name="branch", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm_next")]
    model = save(tmp, "body", nodes, {"w1": w1, "w2": w2, "w_else": np.zeros((M, N), np.float32)},
                 [M, K], [M, 8])
    d = inputs_dir(tmp, "body", x)
    want = mx_counts(x, "mxfp4_e2m1", -1)
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1")
    if not j:
        return
    path = "branch/then_branch/mm_body"
    nodes = {n["name"]: n for n in j["nodes"]}
    check(path in nodes, "the body node has a record", list(nodes))
    if path in nodes:
        ops = nodes[path]["scaled_operands"]
        check([s["input"] for s in ops] == [0, 1], "body node: both operands recorded", ops)
        if ops:
            check({k: ops[0][k] for k in want} == want, "body node: activation counts as NumPy's",
                  (ops[0], want))
    got = origins_of(j, "block_underflow")
    check(len(got) == 1 and got[0]["node"] == path and got[0]["operand"] == 0,
          "block_underflow named at the body MatMul", json.dumps(j["origins"])[:600])
    if got:
        check(got[0]["fixes"][0]["kind"] == "keep_unscaled" and
              got[0]["fixes"][0]["nodes"] == [path], "its fix names the path", got[0]["fixes"])
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", "--keep-unscaled", path)
    if j:
        nodes = {n["name"]: n for n in j["nodes"]}
        check(nodes[path]["precision"] == "bfloat16" and not nodes[path]["scaled_operands"]
              and not origins_of(j, "block_underflow"), "--keep-unscaled takes a body path",
              (nodes[path], j["origins"]))


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
    # It keeps the outlier MatMul out of mxfp4_e2m1, unscaled in bfloat16 rather than float32
    # (the keep_unscaled fix meets the tolerance: keep_unscaled() checks it).
    check(p["precision"] == "mxfp4_e2m1" and p["fp32_nodes"] == []
          and p["unscaled_nodes"] == ["mm_outlier"],
          "plan keeps the outlier MatMul unscaled in bfloat16",
          (p["precision"], p["fp32_nodes"], p["unscaled_nodes"]))
    reasons = json.dumps(p.get("reasons", ""))
    check("block_underflow" in reasons, "kept for its block_underflow origin", reasons[:400])
    # The re-check of the plan passes; the model as a whole does not. Keeping the node in
    # float32 (the search's first step) passes too.
    for keep in (("--keep-unscaled", "mm_outlier"), ("--keep-fp32", "mm_outlier")):
        r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", *keep, *crit)
        if j:
            check(r.returncode == 0 and j["verdict"] == "pass", f"the plan's check passes {keep}",
                  j["outputs"])
    r, j = check_json(f, tmp, model, d, "--precision", "mxfp4_e2m1", *crit)
    if j:
        check(j["verdict"] == "fail", "without the plan it fails", j["outputs"])


def plan_target(f, tmp, rng):
    """plan --target with a scaled precision: allowed where the target's matrix units run the
    block format (and its other ops the other precision), refused in one line elsewhere, as
    check --target does."""
    model, d, _ = one_outlier(tmp, rng, "target", 1.0)
    out = os.path.join(tmp, "plan_target.json")
    r = run(f, "plan", model, "--inputs", d, "--precision", "mxfp4_e2m1", "--target", "b200",
            "-o", out, "--quiet")
    check(r.returncode in (0, 1) and os.path.exists(out), "plan --target b200 mxfp4_e2m1 runs",
          (r.returncode, r.stderr))
    if os.path.exists(out):
        with open(out) as fh:
            check(json.load(fh)["precision"] == "mxfp4_e2m1", "the plan is for mxfp4_e2m1")
        # convert does not write scaled precisions: one line saying why.
        fails(f, "convert a scaled plan",
              ["convert", model, "--plan", out, "-o", os.path.join(tmp, "never.onnx")],
              "--plan", "mxfp4_e2m1, a scaled format", "ONNX has no MX")
    for cmd in ("plan", "check"):
        fails(f, f"{cmd} --target h100 mxfp4_e2m1",
              [cmd, model, "--inputs", d, "--precision", "mxfp4_e2m1", "--target", "h100"],
              "--target", "mxfp4_e2m1", "natively")
        # scaled FP8 runs where its element format runs in the matrix units (Hopper) ...
        r = run(f, cmd, model, "--inputs", d, "--precision", "fp8", "--target", "h100",
                "--quiet", *(["-o", os.path.join(tmp, "fp8.json")] if cmd == "plan" else []))
        check(r.returncode in (0, 1), f"{cmd} --target h100 fp8 runs", (r.returncode, r.stderr))
        # ... and not on a GPU without FP8 (Ampere).
        fails(f, f"{cmd} --target a100 fp8",
              [cmd, model, "--inputs", d, "--precision", "fp8", "--target", "a100"],
              "--target", "float8_e4m3fn")


def bad_input(f, tmp, rng):
    model, d, _ = one_outlier(tmp, rng, "bad", 1.0)
    never = os.path.join(tmp, "never.onnx")
    fails(f, "convert --precision mxfp4_e2m1",
          ["convert", model, "--precision", "mxfp4_e2m1", "-o", never],
          "--precision mxfp4_e2m1", "a scaled format", "ONNX has no MX")
    check(not os.path.exists(never), "convert refusal: nothing written")
    fails(f, "--keep-unscaled an unknown node",
          ["check", model, "--inputs", d, "--precision", "mxfp4_e2m1", "--keep-unscaled", "mmm"],
          "--keep-unscaled mmm", "did you mean 'mm'")
    fails(f, "--fail-on unknown kind", ["check", model, "--inputs", d, "--fail-on", "block"],
          "block_underflow")
    # --keep-unscaled names a GEMM that runs scaled, in run, check and plan alike: not
    # another op, not one kept in float32; the hint is a GEMM's name.
    x = rng.standard_normal((M, K)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="act")]
    two = save(tmp, "two", nodes, {"w": rng.standard_normal((K, N)).astype(np.float32)},
               [M, K], [M, N])
    d2 = inputs_dir(tmp, "two", x)
    for cmd in ("run", "check", "plan"):
        argv = [cmd, two, "--inputs", d2 if cmd != "run" else os.path.join(d2, "set_0"),
                "--precision", "mxfp4_e2m1"]
        fails(f, f"{cmd} --keep-unscaled a Relu", argv + ["--keep-unscaled", "act"],
              "fpguard: error: --keep-unscaled act: 'act' is a Relu node; only MatMul, Gemm and "
              "Conv operands are quantized\n")
        fails(f, f"{cmd} --keep-unscaled an unknown node", argv + ["--keep-unscaled", "mn"],
              "--keep-unscaled mn: the model has no node named 'mn'; did you mean 'mm'?")
        keep = ["--exclude", "mm"] if cmd == "run" else ["--keep-fp32", "mm"]
        fails(f, f"{cmd} --keep-unscaled a GEMM kept in float32",
              argv + keep + ["--keep-unscaled", "mm"],
              "--keep-unscaled mm: 'mm' runs in float32, not quantized")


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
        keep_unscaled(f, tmp, rng)
        body_node(f, tmp, rng)
        plan_target(f, tmp, rng)
        bad_input(f, tmp, rng)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("scaled-precision origins: all passed")


if __name__ == "__main__":
    main()
