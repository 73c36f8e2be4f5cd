#!/usr/bin/python3
"""End-to-end tests of `fpguard check` on the shipped examples (examples/):

- superres in float16: the squaring node /Pow is the one overflow origin (not its
  consumers); its overflow count equals NumPy's (the float32 ReLU output from
  `fpguard run --dump-all`, rounded to float16 by NumPy, squared, rounded again); the
  output cosine equals NumPy's over `fpguard run` outputs; the suggested --keep-fp32
  fix passes; bfloat16 passes.
- transformer_block in float16: the two LayerNorm Pow nodes are the origins; the
  suggested fixes together pass.
- clean_cnn passes in float16 with no origin.
- the verdict line: generated inputs (and --require-inputs), absorbed origins (and
  --fail-on), errors over no finite pair (n/a, null); the output errors against NumPy.
- the JSON fields of docs/check.md, several precisions side by side, and bad input
  (one line, exit 2, no output file).

    check_test.py --fpguard PATH --examples DIR
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import (check, check_json, fails, failures, first_line, num,  # noqa: E402
                     read_outputs, run)
import plan_derive  # noqa: E402

FLOAT16_MAX = 65504.0
FLOAT32_TINY = 2.0 ** -126


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def origins(j, kind=None):
    return [o["node"] for o in j["origins"] if kind is None or o["kind"] == kind]


def keep_list(j):
    """The nodes of every origin's --keep-fp32 suggestion."""
    nodes = []
    for o in j["origins"]:
        for s in o["suggestions"]:
            if "--keep-fp32 " in s:
                nodes += s.split("--keep-fp32 ")[1].rstrip(")").split(",")
    return nodes


def node(j, name):
    return next(n for n in j["nodes"] if n["name"] == name)


def output_line(r, name):
    """The summary line of output `name` (the lines after the verdict)."""
    return next((ln for ln in r.stdout.splitlines()[1:] if f" {name}: cosine" in ln), "")


def runtime_inputs(model):
    m = onnx.load(model)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def output_errors(r, v):
    """The output statistics of docs/check.md computed by NumPy from the reference `r` and
    the emulated `v`, over the elements finite in both."""
    r = r.astype(np.float64).ravel()
    v = v.astype(np.float64).ravel()
    ok = np.isfinite(r) & np.isfinite(v)
    d = np.abs(v[ok] - r[ok])
    ar = np.abs(r[ok])
    floor = max(np.abs(r[np.isfinite(r)]).max() * 2.0 ** -10, FLOAT32_TINY)
    return {"max_abs_error": float(d.max()),
            "max_rel_error": float((d / np.maximum(ar, FLOAT32_TINY)).max()),
            "max_scaled_error": float((d / np.maximum(ar, floor)).max()),
            "rel_rms_error": float(np.sqrt((d ** 2).sum() / (ar ** 2).sum()))}


def test_output_errors(case, jo, r, v, text):
    """The JSON's output errors against NumPy's, and the summary line shows them. The
    relative errors divide by a float32 reciprocal (docs/check.md: within 2^-24 of the
    quotient); the relative RMS error's sums run in another order."""
    want = output_errors(r, v)
    check(jo["max_abs_error"] == want["max_abs_error"], f"{case}: max_abs_error equals NumPy's",
          (jo["max_abs_error"], want["max_abs_error"]))
    for k in ("max_rel_error", "max_scaled_error"):
        check(abs(jo[k] - want[k]) <= 2.0 ** -23 * want[k], f"{case}: {k} equals NumPy's",
              (jo[k], want[k]))
    check(abs(jo["rel_rms_error"] - want["rel_rms_error"]) <= 1e-9 * want["rel_rms_error"],
          f"{case}: rel_rms_error equals NumPy's", (jo["rel_rms_error"], want["rel_rms_error"]))
    for label, k in (("relative RMS error", "rel_rms_error"),
                     ("max scaled error", "max_scaled_error"), ("max abs error", "max_abs_error")):
        check(f"{label} {num(jo[k])}" in text, f"{case}: the summary shows the {label}", text)
    check("max rel error" not in text, f"{case}: the pointwise max rel error is JSON only", text)


def test_schema(j):
    for k in ("schema_version", "model", "precision", "reference", "verdict", "outputs", "origins",
              "nodes", "rules"):
        check(k in j, f"JSON has {k}")
    check(j["schema_version"] == 3, "schema_version 3")
    for k in ("min_cosine", "atol", "rtol"):
        check(k in j["tolerance"], f"tolerance has {k}")
    for o in j["outputs"]:
        for k in ("name", "max_abs_error", "max_rel_error", "cosine", "pass"):
            check(k in o, f"outputs[] has {k}")
    for o in j["origins"]:
        for k in ("node", "op_type", "kind", "cause", "format", "affected", "total", "message",
                  "fixes", "suggestions", "keep_fp32", "outputs"):
            check(k in o, f"origins[] has {k}")
        check(len(o["fixes"]) == len(o["suggestions"]), "one sentence per structured fix", o)
        for fx in o["fixes"]:
            check(fx["kind"] in ("scale", "keep_fp32", "format", "replace_value", "guard"),
                  "fix kind", fx)
        check(o["kind"] in ("overflow", "nan", "underflow", "accuracy"), "origin kind", o["kind"])
    for n in j["nodes"]:
        for k in ("name", "op_type", "precision", "damage", "outputs"):
            check(k in n, f"nodes[] has {k}")
        for t in n["outputs"]:
            for k in ("name", "ref_min", "ref_max", "ref_absmax", "headroom_bits", "overflow", "nan",
                      "underflow", "subnormal", "local", "propagated"):
                check(k in t, f"nodes[].outputs[] has {k}")
            for side in ("local", "propagated"):
                for k in ("max_abs_error", "max_rel_error", "mean_rel_error", "cosine", "snr_db"):
                    check(k in t[side], f"{side} has {k}")
    for r in j["rules"]:
        check(set(r) == {"id", "node", "op_type", "tensor", "format", "observed", "limit",
                         "parameter", "count", "total", "centred", "types", "margin_bits", "norm_share",
                         "severity", "message"}, "rules[] fields", r)
        check(r["severity"] in ("major", "minor"), "rules[] severity", r["severity"])
    for n in j["notes"]:
        check(set(n) == {"kind", "count", "text", "message"}, "notes[] fields", n)


def test_superres(f, ex, tmp):
    model = os.path.join(ex, "superres", "model.onnx")
    inputs = os.path.join(ex, "superres", "inputs")
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j is None:
        return
    test_schema(j)
    check(r.returncode == 1, "superres fp16 fails (exit 1)", r.returncode)
    check(r.stdout.startswith("FAIL"), "verdict line first", r.stdout[:80])
    check(j["verdict"] == "fail", "superres fp16 verdict fail")
    check(origins(j) == ["/Pow"], "superres fp16: /Pow is the only origin", origins(j))
    check(j["origins"][0]["kind"] == "overflow", "…an overflow", j["origins"][0]["kind"])
    check(j["origins"][0]["cause"] == "square", "…a squaring", j["origins"][0]["cause"])
    check("squares values up to" in j["origins"][0]["message"], "…explained as a squaring",
          j["origins"][0]["message"])
    keep = [fx for fx in j["origins"][0]["fixes"] if fx["kind"] == "keep_fp32"]
    check(keep and keep[0]["nodes"] == j["origins"][0]["keep_fp32"],
          "…its float32 fix names the nodes keep_fp32 lists", keep)
    check(j["origins"][0]["outputs"] == ["/Pow_output_0"], "…with its output tensor",
          j["origins"][0]["outputs"])
    # NumPy: the float32 ReLU output rounded to float16, squared, rounded to float16.
    dump = os.path.join(tmp, "dump32")
    rr = run(f, "run", model, "--inputs", inputs, "--dump-all", dump)
    check(rr.returncode == 0, "run --dump-all", rr.stderr)
    tensors = read_outputs(dump)
    relu = tensors["/relu/Relu_output_0"]
    with np.errstate(over="ignore"):  # the overflow is the point
        sq = (relu.astype(np.float16).astype(np.float32) ** 2).astype(np.float16)
    pow_out = node(j, "/Pow")["outputs"][0]
    check(pow_out["local"]["overflow"] == int(np.isinf(sq).sum()),
          "/Pow local overflow count equals NumPy's",
          (pow_out["local"]["overflow"], int(np.isinf(sq).sum())))
    ref_pow = tensors["/Pow_output_0"]
    check(abs(pow_out["ref_absmax"] - float(np.abs(ref_pow).max())) == 0, "/Pow ref_absmax",
          (pow_out["ref_absmax"], float(np.abs(ref_pow).max())))
    check(pow_out["headroom_bits"] < 0, "/Pow has negative headroom", pow_out["headroom_bits"])
    # Consumers see the overflow (propagated) but are not origins.
    # /ReduceMean reads the overflowed squares: its local run inherits them; /Add and
    # /Sqrt get in-range reference inputs and are fine on their own.
    check(node(j, "/ReduceMean")["inputs_nonfinite"], "/ReduceMean inherits")
    for name in ("/ReduceMean", "/Add", "/Sqrt"):
        n = node(j, name)
        check(n["outputs"][0]["overflow"] > 0, f"{name} overflows in the emulated run")
        check(n["outputs"][0]["local"]["overflow"] == 0, f"{name}: no overflow of its own", n)
    # The verdict's cosine equals NumPy's over `fpguard run` outputs.
    o32, o16 = os.path.join(tmp, "o32"), os.path.join(tmp, "o16")
    run(f, "run", model, "--inputs", inputs, "--outputs", o32)
    run(f, "run", model, "--inputs", inputs, "--outputs", o16, "--precision", "float16")
    c = cosine(read_outputs(o32)["upscaled"], read_outputs(o16)["upscaled"])
    check(abs(j["outputs"][0]["cosine"] - c) < 1e-9, "output cosine equals NumPy's",
          (j["outputs"][0]["cosine"], c))
    test_output_errors("superres fp16", j["outputs"][0], read_outputs(o32)["upscaled"],
                       read_outputs(o16)["upscaled"], output_line(r, "upscaled"))
    check(j["inputs"] == "given" and j["generated_inputs"] == [], "superres: inputs given",
          (j["inputs"], j["generated_inputs"]))
    check(first_line(r).startswith("FAIL  "), "given inputs: nothing after FAIL", first_line(r))
    check(j["absorbed"] == [], "a failing output absorbs nothing", j["absorbed"])
    check(c < 0.999 and not j["outputs"][0]["pass"], "output fails", c)
    # The rules: Pow, the 1e-8 epsilon that flushes to zero, the normalisation pattern.
    ids = {r["id"] for r in j["rules"]}
    for rule in ("pow", "constant-underflow", "norm-as-primitives"):
        check(rule in ids, f"rule {rule} fires", ids)
    # The suggested fix passes.
    keep = keep_list(j)
    check(keep == ["/Pow", "/ReduceMean"], "keep /Pow and its reader /ReduceMean", keep)
    r2, j2 = check_json(f, tmp, model, inputs, "--precision", "float16", "--keep-fp32",
                        ",".join(keep))
    if j2:
        check(r2.returncode == 0 and j2["verdict"] == "pass", "the suggested fix passes",
              j2["outputs"])
        check(node(j2, "/Pow")["precision"] == "float32", "kept node runs in float32")
    # Keeping only /Pow moves the boundary: /ReduceMean reads its out-of-range values.
    r3, j3 = check_json(f, tmp, model, inputs, "--precision", "float16", "--keep-fp32", "/Pow")
    if j3:
        check(origins(j3) == ["/ReduceMean"], "boundary origin at /ReduceMean", origins(j3))
    # bfloat16 passes.
    r4, j4 = check_json(f, tmp, model, inputs, "--precision", "bfloat16")
    if j4:
        check(r4.returncode == 0 and j4["verdict"] == "pass", "superres bf16 passes",
              j4["outputs"])
        check(j4["origins"] == [], "no origin in bf16", j4["origins"])


def test_transformer(f, ex, tmp):
    model = os.path.join(ex, "transformer_block", "model.onnx")
    inputs = os.path.join(ex, "transformer_block", "inputs")
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j is None:
        return
    check(r.returncode == 1 and j["verdict"] == "fail", "transformer fp16 fails", j["outputs"])
    check(sorted(origins(j, "overflow")) == ["/ln1/Pow", "/ln2/Pow"],
          "the LayerNorm Pows are the overflow origins", origins(j))
    for n in origins(j):
        check("ReduceMean" not in n and "Sqrt" not in n and "Div" not in n,
              "no LayerNorm consumer is an origin", n)
    r2, j2 = check_json(f, tmp, model, inputs, "--precision", "float16", "--keep-fp32",
                        ",".join(keep_list(j)))
    if j2:
        check(j2["verdict"] == "pass", "transformer: the suggested fixes pass", j2["outputs"])
    r3, j3 = check_json(f, tmp, model, inputs, "--precision", "bfloat16")
    if j3:
        check(j3["verdict"] == "pass", "transformer bf16 passes", j3["outputs"])


def test_clean(f, ex, tmp):
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    inputs = os.path.join(ex, "clean_cnn", "inputs")
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j is None:
        return
    check(r.returncode == 0 and j["verdict"] == "pass", "clean CNN passes in fp16", j["outputs"])
    check(j["origins"] == [], "clean CNN: no origin", j["origins"])
    check(j["outputs"][0]["cosine"] >= 0.999, "clean CNN cosine", j["outputs"][0]["cosine"])
    # Several precisions side by side: one JSON with a check each; exit 1 if any fails.
    out = os.path.join(tmp, "multi.json")
    sr = os.path.join(ex, "superres")
    r = run(f, "check", os.path.join(sr, "model.onnx"), "--inputs", os.path.join(sr, "inputs"),
            "--precision", "float16,bfloat16", "float8_e4m3fn", "--json", out, "--quiet")
    check(r.returncode == 1, "fp16 fails, so exit 1", (r.returncode, r.stderr))
    check("Side by side" in r.stdout, "side-by-side table")
    with open(out) as fh:
        m = json.load(fh)
    check([c["precision"] for c in m["checks"]] == ["float16", "bfloat16", "float8_e4m3fn"],
          "one check per precision", [c.get("precision") for c in m.get("checks", [])])
    check([c["verdict"] for c in m["checks"]] == ["fail", "pass", "fail"], "verdicts",
          [c["verdict"] for c in m["checks"]])
    check(m["verdict"] == "fail", "combined verdict")
    # Low-precision accumulation: recorded in the JSON, and it costs accuracy.
    r, ja = check_json(f, tmp, model, inputs, "--precision", "float16", "--accumulate", "float16")
    if ja:
        check(ja["accumulate"] == "float16", "accumulate recorded", ja.get("accumulate"))
        conv = node(ja, "/conv2/Conv")["outputs"][0]["local"]["max_rel_error"]
        conv32 = node(j, "/conv2/Conv")["outputs"][0]["local"]["max_rel_error"]
        check(conv > conv32, "fp16 accumulation adds error to the conv", (conv, conv32))
    fails(f, "library order in fp16", ["check", model, "--precision", "fp16", "--accumulate", "fp16",
                                       "--accumulation", "library"], "--accumulation")
    # The errors of a passing output against NumPy's.
    o32, o16 = os.path.join(tmp, "c32"), os.path.join(tmp, "c16")
    run(f, "run", model, "--inputs", inputs, "--outputs", o32)
    run(f, "run", model, "--inputs", inputs, "--outputs", o16, "--precision", "float16")
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j:
        test_output_errors("clean_cnn fp16", j["outputs"][0], read_outputs(o32)["logits"],
                           read_outputs(o16)["logits"], output_line(r, "logits"))
    # Several generated samples aggregate.
    out = os.path.join(tmp, "samples.json")
    r = run(f, "check", model, "--precision", "float16", "--samples", "3", "--json", out,
            "--quiet")
    with open(out) as fh:
        check(json.load(fh)["samples"] == 3, "--samples 3")


def test_generated(f, ex, tmp):
    """Without data, the verdict line says it holds for generated inputs only, with the
    generator (docs/check.md: floating inputs uniform in [-1, 1]); --require-inputs refuses."""
    model = os.path.join(ex, "superres", "model.onnx")
    names = runtime_inputs(model)
    check(len(names) == 1, "superres has one input", names)
    out, html = os.path.join(tmp, "gen.json"), os.path.join(tmp, "gen.html")
    r = run(f, "check", model, "--precision", "float16", "--json", out, "--html", html,
            "--quiet")
    check(r.returncode in (0, 1), "generated inputs run", r.stderr)
    if r.returncode not in (0, 1):
        return
    with open(out) as fh:
        j = json.load(fh)
    qualifier = f"(generated inputs: {names[0]} uniform [-1, 1]; ranges unverified)"
    word = j["verdict"].upper()
    check(first_line(r).startswith(f"{word} {qualifier}"), "the verdict line says so",
          first_line(r))
    check(j["inputs"] == "generated", "JSON inputs: generated", j["inputs"])
    check(j["generated_inputs"] == [{"name": names[0], "distribution": "uniform", "low": -1,
                                     "high": 1, "default": True}],
          "JSON generated_inputs", j["generated_inputs"])
    with open(html) as fh:
        check(qualifier in fh.read(), "the HTML verdict says so too")
    # A generator asked for is recorded as such.
    r = run(f, "check", model, "--precision", "float16", "--json", out, "--quiet", "--input",
            names[0] + "=normal:0:2")
    with open(out) as fh:
        j = json.load(fh)
    check(j["generated_inputs"] == [{"name": names[0], "distribution": "normal", "mean": 0,
                                     "std": 2, "default": False}],
          "JSON generated_inputs of a spec", j["generated_inputs"])
    check(f"(generated inputs: {names[0]} normal (mean 0, std 2); ranges unverified)"
          in first_line(r), "the verdict names the generator asked for", first_line(r))
    # --require-inputs: generated inputs are an error, data is not.
    fails(f, "--require-inputs without inputs",
          ["check", model, "--precision", "fp16", "--require-inputs"], "--require-inputs",
          names[0])
    fails(f, "--require-inputs with a generator",
          ["check", model, "--precision", "fp16", "--require-inputs", "--input",
           names[0] + "=uniform:0:255"], "--require-inputs", names[0] + "=uniform:0:255")
    r = run(f, "check", model, "--precision", "bfloat16", "--require-inputs", "--quiet",
            "--inputs", os.path.join(ex, "superres", "inputs"))
    check(r.returncode == 0 and first_line(r).startswith("PASS  "),
          "--require-inputs with data runs", (r.returncode, first_line(r), r.stderr))


def write_model(path, nodes, inits, n):
    """A float model of x[1, n] -> y from `nodes` (ONNX helper nodes) and float initializers."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    g = helper.make_graph(nodes, "g", [x], [y],
                          [helper.make_tensor(k, TensorProto.FLOAT, [], [v]) for k, v in inits])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_absorbed(f, tmp):
    """y = x + 1/x^2 + 1/(x+1)^2 + x * 1e-9 with a few |x| = 300: both squares overflow
    float16 (300^2 > 65504) and the 1e-9 flushes to zero, yet y passes (1/inf = 0 is within
    the error of y ~ 300). The verdict names the absorbed origins; --fail-on fails them."""
    n = 64
    path = os.path.join(tmp, "absorbs.onnx")
    H = helper.make_node
    write_model(path, [
        H("Pow", ["x", "two"], ["sa"], name="pow_a"),
        H("Reciprocal", ["sa"], ["ra"], name="rec_a"),
        H("Add", ["x", "one"], ["x1"], name="shift"),
        H("Pow", ["x1", "two"], ["sb"], name="pow_b"),
        H("Reciprocal", ["sb"], ["rb"], name="rec_b"),
        H("Mul", ["x", "tiny"], ["t"], name="tiny_mul"),
        H("Add", ["x", "ra"], ["s1"], name="sum1"),
        H("Add", ["s1", "rb"], ["s2"], name="sum2"),
        H("Add", ["s2", "t"], ["y"], name="sum3")],
        [("two", 2.0), ("one", 1.0), ("tiny", 1e-9)], n)
    x = np.linspace(1, 10, n).astype(np.float32).reshape(1, n)
    x[0, ::16] = 300
    inputs = os.path.join(tmp, "absorbs_inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x.npy"), x)
    # NumPy: which nodes overflow / flush in float16 on float16-rounded inputs.
    with np.errstate(over="ignore"):
        over = [name for name, a in (("pow_a", x), ("pow_b", x + 1))
                if np.isinf((a.astype(np.float16).astype(np.float32) ** 2).astype(np.float16)).any()]
    flush = ["tiny_mul"] if np.float16(1e-9) == 0 else []
    check(over == ["pow_a", "pow_b"] and flush == ["tiny_mul"], "the model is built as meant",
          (over, flush))
    r, j = check_json(f, tmp, path, inputs, "--precision", "float16")
    if j is None:
        return
    check(r.returncode == 0 and j["verdict"] == "pass", "the outputs absorb them: PASS",
          (r.returncode, j["outputs"]))
    kinds = {o["node"]: o["kind"] for o in j["origins"]}
    check(kinds == {**{k: "overflow" for k in over}, **{k: "underflow" for k in flush}},
          "the origins are the overflows and the flush", kinds)
    check(sorted(j["absorbed"]) == sorted(over + flush), "JSON absorbed", j["absorbed"])
    check(j["fail_on"] == [], "JSON fail_on empty", j["fail_on"])
    want = f"PASS (2 overflows absorbed: {', '.join(over)}; 1 underflow absorbed: tiny_mul)  "
    check(first_line(r).startswith(want), "the verdict line names them", first_line(r))
    for words, code in (("overflow", 1), ("underflow", 1), ("nan", 0),
                        ("overflow,nan,underflow", 1)):
        r, jf = check_json(f, tmp, path, inputs, "--precision", "float16", "--fail-on", words)
        if jf is None:
            continue
        check(r.returncode == code and jf["verdict"] == ("fail" if code else "pass"),
              f"--fail-on {words}: exit {code}", (r.returncode, jf["verdict"]))
        check(all(o["pass"] for o in jf["outputs"]), f"--fail-on {words}: outputs pass")
        check(jf["fail_on"] == [k for k in ("overflow", "nan", "underflow")
                                if k in words.split(",")], f"--fail-on {words}: JSON fail_on",
              jf["fail_on"])
    r = run(f, "check", path, "--inputs", inputs, "--precision", "float16", "--quiet",
            "--fail-on", "overflow")
    want = (f"FAIL (2 overflows absorbed, failed by --fail-on overflow: {', '.join(over)}; "
            "1 underflow absorbed: tiny_mul)  ")
    check(first_line(r).startswith(want), "the FAIL line says why", first_line(r))
    fails(f, "--fail-on typo", ["check", path, "--precision", "fp16", "--fail-on", "overflw"],
          "--fail-on overflw", "did you mean 'overflow'")


def test_no_finite_pairs(f, tmp):
    """y = Relu(x * 30000) with x in [4, 8]: every value overflows float16, so no output
    value is finite in both runs: errors are n/a (null), never 0, and the worst-node table
    counts the non-finite values instead."""
    n = 16
    path = os.path.join(tmp, "broken.onnx")
    write_model(path, [helper.make_node("Mul", ["x", "c"], ["a"], name="mul_big"),
                       helper.make_node("Relu", ["a"], ["y"], name="relu_after")],
                [("c", 3e4)], n)
    x = np.linspace(4, 8, n).astype(np.float32).reshape(1, n)
    inputs = os.path.join(tmp, "broken_inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x.npy"), x)
    with np.errstate(over="ignore"):
        broken = int(np.isinf(x.astype(np.float16) * np.float16(3e4)).sum())
    check(broken == n, "NumPy: every product overflows float16", broken)
    r, j = check_json(f, tmp, path, inputs, "--precision", "float16")
    if j is None:
        return
    o = j["outputs"][0]
    check(r.returncode == 1 and not o["pass"] and o["nonfinite"] == broken, "the output fails",
          o)
    for k in ("max_abs_error", "max_rel_error", "max_scaled_error", "rel_rms_error", "cosine"):
        check(o[k] is None, f"no finite pair: {k} is null", o[k])
    line = output_line(r, "y")
    check(line.startswith("  FAIL y: cosine n/a, relative RMS error n/a, max scaled error n/a, "
                          f"max abs error n/a ({broken} non-finite values"),
          "the summary says n/a and counts them", line)
    for name in ("mul_big", "relu_after"):
        t = node(j, name)["outputs"][0]
        check(t["propagated"]["finite"] == 0 and t["propagated"]["max_abs_error"] is None and
              t["propagated"]["rel_rms_error"] is None, f"{name}: propagated errors null",
              t["propagated"])
    check(node(j, "relu_after")["outputs"][0]["local"]["count"] == 0,
          "relu_after's local run inherits the overflow: nothing compared")
    rows = {}  # the worst-node table: "  * name ..." (an origin) or "    name ..."
    for ln in r.stdout.splitlines():
        if ln.startswith(("  * ", "    ")) and len(ln.split()) > 2:
            cells = ln.split()
            rows[cells[1] if cells[0] == "*" else cells[0]] = ln
    check(f"{broken} non-finite" in rows.get("mul_big", "") and
          rows.get("mul_big", "").count("non-finite") == 2,
          "table: mul_big counts its non-finite values, local and propagated", rows)
    check("n/a" in rows.get("relu_after", "") and f"{broken} non-finite" in
          rows.get("relu_after", ""), "table: relu_after local n/a, propagated counted", rows)


def worst_rows(r):
    """The worst-node table of the text: name -> its cells after the name (op, damage,
    headroom, local inf/NaN, local error, prop. inf/NaN, prop. error), in order."""
    lines = r.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Worst nodes")), None)
    rows = {}
    if start is None:
        return rows
    for ln in lines[start + 2:]:
        if not ln.startswith("  ") or ln.startswith("  ("):
            break
        cells = ln.split()
        if cells[0] == "*":
            cells = cells[1:]
        rows[cells[0]] = cells[1:]
    return rows


def local_error(n):
    """A node's worst local relative RMS error over outputs with finite pairs (docs/check.md);
    None when none has."""
    errs = [float("inf") if o["local"]["rel_rms_error"] is None else o["local"]["rel_rms_error"]
            for o in n["outputs"] if o["local"]["finite"] > 0]
    return max(errs) if errs else None


def expected_damage(j):
    """docs/check.md's damage of every node of a model with one output that every node
    reaches: its own local error (unbounded for its own inf/NaN, 0 when not run locally)
    capped by the output's relative RMS error (unbounded for inf/NaN)."""
    inf = float("inf")
    (o,) = j["outputs"]
    reach = inf if o["nonfinite"] or o["rel_rms_error"] is None else o["rel_rms_error"]
    out = {}
    for n in j["nodes"]:
        own = local_error(n) or 0.0
        if any(t["local"]["overflow"] + t["local"]["nan"] for t in n["outputs"]):
            own = inf
        out[n["name"]] = min(own, reach)
    for a in j["origins"]:
        if a["kind"] == "accuracy":
            out[a["node"]] = a["contribution"]
    return out


def damage_of(n):
    return float("inf") if n["damage"] is None else n["damage"]


def ranked(j):
    """The worst-node ranking of docs/check.md from the JSON: by damage, then own inf/NaN,
    local error, propagated inf/NaN; stable in topological order."""
    def key(n):
        le = local_error(n)
        return (-damage_of(n), -sum(t["local"]["overflow"] + t["local"]["nan"] for t in n["outputs"]),
                -(le if le is not None else -1), -sum(t["overflow"] + t["nan"] for t in n["outputs"]))
    return [n["name"] for n in sorted((n for n in j["nodes"] if n["emulated"] and n["outputs"]),
                                      key=key)]


def test_counts_agree(f, ex, tmp):
    """Issue 17 item 4: an origin's count is that of its local run, and the same number
    everywhere (sentence, table, JSON); the emulated run's count is shown apart. Tokens in
    [-900, 900] make /ln2/Pow overflow on one value more in its local run (reference inputs)
    than in the emulated run (inputs carrying /ln1's error). Both counts against NumPy:
    local, the float32 Pow input rounded to float16, squared, rounded; propagated, the
    float16 run's Pow output from `fpguard run --dump-all`."""
    model = os.path.join(ex, "transformer_block", "model.onnx")
    inputs = os.path.join(tmp, "tb_wide")
    os.makedirs(inputs, exist_ok=True)
    x = np.random.default_rng(0).uniform(-900, 900, (1, 16, 64)).astype(np.float32)
    np.save(os.path.join(inputs, "tokens.npy"), x)
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j is None:
        return
    d32, d16 = os.path.join(tmp, "tb_dump32"), os.path.join(tmp, "tb_dump16")
    run(f, "run", model, "--inputs", inputs, "--dump-all", d32)
    run(f, "run", model, "--inputs", inputs, "--dump-all", d16, "--precision", "float16")
    t32, t16 = read_outputs(d32), read_outputs(d16)
    rows = worst_rows(r)
    differ = False
    for o in j["origins"]:
        n = node(j, o["node"])
        local = sum(t["local"]["overflow"] + t["local"]["nan"] for t in n["outputs"])
        prop = sum(t["overflow"] + t["nan"] for t in n["outputs"])
        differ = differ or local != prop
        pow_in = onnx_input(model, o["node"])
        with np.errstate(over="ignore"):
            sq = (t32[pow_in].astype(np.float16).astype(np.float32) ** 2).astype(np.float16)
        want_local = int(np.isinf(sq).sum())
        want_prop = int((~np.isfinite(t16[o["outputs"][0]]) & np.isfinite(t32[o["outputs"][0]])).sum())
        check((o["affected"], local, prop) == (want_local, want_local, want_prop),
              f"{o['node']}: affected = local count = NumPy's; propagated = NumPy's",
              (o["affected"], local, prop, want_local, want_prop))
        check(f"({o['affected']:,} of {o['total']:,} values become inf/NaN in its local run)"
              in o["message"], f"{o['node']}: the sentence counts the local run", o["message"])
        row = rows.get(o["node"], [])
        check(row[3:4] == [f"{local:,}"] and row[5:6] == [f"{prop:,}"],
              f"{o['node']}: the table shows the local and the propagated count", row)
    check(differ, "the inputs make a local and a propagated count differ")


def onnx_input(model, node_name):
    return next(n.input[0] for n in onnx.load(model).graph.node if n.name == node_name)


def test_damage(f, ex, tmp):
    """Issue 17 item 6: the worst nodes are ranked by damage to the outputs (docs/check.md),
    not by inf counts: a -1e9 mask whose -inf a Softmax absorbs does no damage, however many
    inf values its Add shows."""
    n = 64
    path = os.path.join(tmp, "masked.onnx")
    H = helper.make_node
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    mask = np.where(np.arange(n) % 2 == 0, 0, -1e9).astype(np.float32).reshape(1, n)
    g = helper.make_graph([H("Mul", ["x", "k"], ["g"], name="grow"),
                           H("Add", ["g", "mask"], ["s"], name="masked"),
                           H("Softmax", ["s"], ["p"], name="probs"),
                           H("Mul", ["p", "k"], ["y"], name="scale_out")], "g", [x], [y],
                          [helper.make_tensor("k", TensorProto.FLOAT, [], [1.1]),
                           numpy_helper.from_array(mask, "mask")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    inputs = os.path.join(tmp, "masked_inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x.npy"), np.linspace(-3, 3, n).astype(np.float32).reshape(1, n))
    r, j = check_json(f, tmp, path, inputs, "--precision", "float16")
    if j is None:
        return
    check(r.returncode == 0 and origins(j) == ["mask"], "the mask is the one origin, absorbed",
          (r.returncode, origins(j)))
    masked = node(j, "masked")["outputs"][0]
    check(masked["overflow"] == n // 2, "masked shows the mask's inf in the emulated run",
          masked["overflow"])
    check(node(j, "masked")["damage"] == 0, "…and does no damage", node(j, "masked")["damage"])
    order = list(worst_rows(r))
    check(order == ranked(j), "the table is ranked by damage", (order, ranked(j)))
    check(order.index("masked") > order.index("grow"), "grow's own error ranks above the mask",
          order)
    # The definition, from the JSON's own numbers, on this model and the examples.
    cases = [("masked", j)]
    for name in ("superres", "transformer_block"):
        rr, je = check_json(f, tmp, os.path.join(ex, name, "model.onnx"),
                            os.path.join(ex, name, "inputs"), "--precision", "float16")
        if je:
            cases.append((name, je))
            check(list(worst_rows(rr)) == ranked(je)[:10], f"{name}: the table ranks by damage",
                  (list(worst_rows(rr)), ranked(je)[:10]))
    for name, jj in cases:
        want = expected_damage(jj)
        got = {nn["name"]: damage_of(nn) for nn in jj["nodes"]}
        check(got == want, f"{name}: each node's damage as docs/check.md defines it", (got, want))
    # superres: the overflow ranks first, its damage the output's error.
    _, js = cases[1] if len(cases) > 1 else (None, None)
    if js:
        check(ranked(js)[0] == "/Pow" and node(js, "/Pow")["damage"] ==
              js["outputs"][0]["rel_rms_error"], "superres: /Pow first, with the output's error",
              (ranked(js)[:3], node(js, "/Pow")["damage"]))


def test_rule_severity(f, tmp):
    """Issue 17 item 6: rule findings in proportion. Ten 100x100 weights each with a few
    values below float16's smallest subnormal (k of 10,000: minor for k < 10, major from
    k = 10, 0.1%), one with 20 (0.2%: major), a 1e-8 epsilon (1 of 1: major). The severity of each finding is computed
    here from the weights (docs/check.md: 0.1% of the values or of the L2 norm, a margin
    under 2^4); the text lists the major ones and counts the others."""
    n, rng = 100, np.random.default_rng(3)
    H = helper.make_node
    nodes, inits, weights, prev = [], [], {}, "x"
    for k in list(range(1, 11)) + [20]:
        w = rng.normal(0, 0.1, (n, n)).astype(np.float32)
        w.flat[rng.choice(n * n, k, replace=False)] = 1e-9
        name = f"W{k}"
        weights[name] = w
        inits.append(numpy_helper.from_array(w, name))
        nodes.append(H("MatMul", [prev, name], [f"h{k}"], name=f"mm{k}"))
        prev = f"h{k}"
    eps = np.array(1e-8, np.float32)
    weights["eps"] = eps
    inits.append(numpy_helper.from_array(eps, "eps"))
    nodes.append(H("Add", [prev, "eps"], ["y"], name="add_eps"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    path = os.path.join(tmp, "tiny_weights.onnx")
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                                opset_imports=[helper.make_opsetid("", 13)]), path)
    inputs = os.path.join(tmp, "tiny_inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x.npy"), rng.uniform(-1, 1, (1, n)).astype(np.float32))
    r, j = check_json(f, tmp, path, inputs, "--precision", "float16")
    if j is None:
        return
    want = {}
    for name, w in weights.items():
        flushed = (w != 0) & (w.astype(np.float16) == 0)
        if flushed.any():
            share = float(np.sqrt((w[flushed].astype(np.float64) ** 2).sum() /
                                  (w.astype(np.float64) ** 2).sum()))
            want[name] = (int(flushed.sum()), w.size, share,
                          "major" if flushed.sum() >= 0.001 * w.size or share >= 0.001 else "minor")
    found = {fd["node"]: fd for fd in j["rules"] if fd["id"] == "constant-underflow"}
    check(set(found) == set(want), "a constant-underflow finding per weight that flushes",
          (sorted(found), sorted(want)))
    for name, (cnt, total, share, sev) in want.items():
        fd = found.get(name)
        if fd is None:
            continue
        check((fd["count"], fd["total"], fd["severity"]) == (cnt, total, sev) and
              abs(fd["norm_share"] - share) <= 1e-9 * share and fd["margin_bits"] is None,
              f"{name}: count, share and severity as NumPy's",
              (fd["count"], fd["norm_share"], fd["severity"], cnt, share, sev))
    for fd in j["rules"]:
        if fd["id"] not in ("constant-underflow", "constant-overflow"):
            check(fd["severity"] == ("major" if fd["margin_bits"] is not None and
                                     fd["margin_bits"] < 4 else "minor"),
                  f"{fd['id']} {fd['node']}: severity from its margin", fd)
    major = [fd for fd in j["rules"] if fd["severity"] == "major"]
    minor = len(j["rules"]) - len(major)
    check(minor == 9 and [fd["node"] for fd in major if fd["id"] == "constant-underflow"] ==
          ["W10", "W20", "eps"], "9 minor findings; W10 (0.1%), W20 and eps major",
          (minor, major))
    shown = [ln for ln in r.stdout.splitlines() if ln.startswith("  [")]
    check(sorted(shown) == sorted(f"  [{fd['id']}] {fd['node']}: {fd['message']}" for fd in major),
          "the text lists exactly the major findings", shown)
    check(f"  and {minor} more findings below the threshold (a margin of 2^4 or more, under 0.1% "
          "of a tensor's values and of its L2 norm); --json has all" in r.stdout.splitlines(),
          "…and counts the others in one line", r.stdout[-600:])


def test_fix_all(f, ex, tmp):
    """Issue 17 item 7: with several origins, one line fixes them all; its --keep-fp32 list
    (the union of the origins' float32 sets) passes; scalings say whether the outputs must
    be rescaled."""
    model = os.path.join(ex, "transformer_block", "model.onnx")
    inputs = os.path.join(ex, "transformer_block", "inputs")
    r, j = check_json(f, tmp, model, inputs, "--precision", "float16")
    if j is None:
        return
    order = [n["name"] for n in j["nodes"]]
    union = sorted({k for o in j["origins"] for k in o["keep_fp32"]}, key=order.index)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("  fix all ")), "")
    check(line.startswith(f"  fix all {len(j['origins'])} at once: keep {len(union)} nodes in "
                          f"float32 (--keep-fp32 {','.join(union)}); or scale "),
          "one line with the union of the float32 sets", (line, union))
    for o in j["origins"]:
        for fx in o["fixes"]:
            if fx["kind"] == "scale":
                check(f"`{fx['value']}` by 2^{fx['exponent']} for `{o['node']}`" in line,
                      f"the line scales {fx['value']}", line)
                check(not fx["undo"] and "the outputs need no rescaling" in line,
                      "LayerNorm scalings need no rescaling, and say so", line)
    check("`fpguard plan`" in line, "the line points to fpguard plan", line)
    r2 = run(f, "check", model, "--inputs", inputs, "--precision", "float16", "--quiet",
             "--keep-fp32", ",".join(union))
    check(r2.returncode == 0 and first_line(r2).startswith("PASS"), "the combined list passes",
          first_line(r2))
    # One origin: no combined line.
    r3 = run(f, "check", os.path.join(ex, "superres", "model.onnx"), "--inputs",
             os.path.join(ex, "superres", "inputs"), "--precision", "float16", "--quiet")
    check("fix all" not in r3.stdout, "one origin: no combined line")


def test_spread_failure(f, tmp):
    """Issue 17 item 7: a FAIL without origin. y = x * c1 * ... * c40, each Mul rounding
    to float16 (a local error under 4 units of roundoff: no accuracy origin) while the
    outputs miss --min-cosine 0.9999999 (NumPy's float16 chain says so). The origins section
    names the nodes of highest damage and points to fpguard plan."""
    n, rng = 256, np.random.default_rng(7)
    cs = rng.uniform(0.9, 1.1, 40).astype(np.float32)
    H = helper.make_node
    nodes, prev = [], "x"
    for i in range(len(cs)):
        out = "y" if i == len(cs) - 1 else f"v{i}"
        nodes.append(H("Mul", [prev, f"c{i}"], [out], name=f"m{i}"))
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    inits = [helper.make_tensor(f"c{i}", TensorProto.FLOAT, [], [float(c)]) for i, c in enumerate(cs)]
    path = os.path.join(tmp, "chain.onnx")
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                                opset_imports=[helper.make_opsetid("", 13)]), path)
    xs = rng.uniform(1, 2, (1, n)).astype(np.float32)
    inputs = os.path.join(tmp, "chain_inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x.npy"), xs)
    ref, emu = xs.copy(), xs.astype(np.float16)
    for c in cs:
        ref = ref * c
        emu = (emu.astype(np.float32) * np.float16(c).astype(np.float32)).astype(np.float16)
    check(cosine(ref, emu.astype(np.float32)) < 0.9999999, "NumPy: the float16 chain misses it",
          cosine(ref, emu.astype(np.float32)))
    html = os.path.join(tmp, "chain.html")
    r, j = check_json(f, tmp, path, inputs, "--precision", "float16", "--min-cosine", "0.9999999",
                      "--html", html)
    if j is None:
        return
    check(r.returncode == 1 and j["origins"] == [], "FAIL without origin", (r.returncode, j["origins"]))
    top = [f"`{name}` ({num(node(j, name)['damage'])})" for name in ranked(j)[:3]]
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("  none")), "")
    check(line.startswith("  none: no single node starts the failure") and
          f"the most damaging (worst nodes below): {', '.join(top)}; next: `fpguard plan`" in line,
          "the origins say what to do next", (line, top))
    check(list(worst_rows(r))[:3] == ranked(j)[:3], "…the first rows of the table")
    with open(html) as fh:
        check(line[len("  none: "):] in fh.read(), "the HTML says the same")


def test_plan(f, ex, tmp):
    """fpguard plan: the plans of the examples (exact scaling by default, float32 islands
    with --scale none), proven by check; plan.json fields; the TensorRT / ORT settings;
    errors."""
    out = os.path.join(tmp, "plan.json")
    # The expected float32 islands and scale rewrites, derived from check's value ranges
    # by the rules of docs/plan.md (plan_derive.py), not copied from a plan's output.
    islands, scaled = {}, {}
    for name in ("superres", "transformer_block", "clean_cnn"):
        model = os.path.join(ex, name, "model.onnx")
        inputs = os.path.join(ex, name, "inputs")
        _, j = check_json(f, tmp, model, inputs, "--precision", "float16")
        if j is None:
            continue
        islands[name], scaled[name] = plan_derive.derive(j, onnx.load(model), inputs,
                                                         FLOAT16_MAX)
        check(all(k is not None for _, _, k in scaled[name]), f"{name}: a k exists",
              scaled[name])
        # The two examples built to overflow do (examples/README.md); clean_cnn does not.
        check(bool(scaled[name]) == (name != "clean_cnn"), f"{name}: derived origins",
              scaled[name])
    for name in islands:
        model = os.path.join(ex, name, "model.onnx")
        inputs = os.path.join(ex, name, "inputs")
        for mode in ("auto", "none"):
            if os.path.exists(out):
                os.remove(out)
            r = run(f, "plan", model, "--inputs", inputs, "--precision", "float16", "-o", out,
                    "--quiet", "--scale", mode)
            check(r.returncode == 0 and r.stdout.startswith("PLAN"), f"plan {name} ({mode})",
                  (r.returncode, r.stdout[:200], r.stderr))
            if r.returncode != 0:
                continue
            with open(out) as fh:
                p = json.load(fh)
            for k in ("schema_version", "model", "precision", "tolerance", "fp32_nodes", "scaled",
                      "casts", "passes", "final", "meets", "islands"):
                check(k in p, f"plan.json has {k}")
            for k in ("max_abs_error", "max_rel_error", "max_scaled_error", "rel_rms_error",
                      "cosine"):
                check(k in p["final"], f"final has {k}")
            want_nodes = [] if mode == "auto" else islands[name]
            want_scaled = scaled[name] if mode == "auto" else []
            check(p["fp32_nodes"] == want_nodes, f"plan {name} ({mode}): float32 nodes",
                  p["fp32_nodes"])
            got_scaled = [(e["node"], e["value"], e["k"]) for e in p["scaled"]]
            check(got_scaled == want_scaled, f"plan {name} ({mode}): scale rewrites", got_scaled)
            check(all(e["scale"] == 2.0 ** -e["k"] for e in p["scaled"]), "scale is 2^-k")
            check(p["meets"] and p["passes"] >= 1, f"plan {name} meets", p)
            # Proof: check of the (rescaled) model with the plan's float32 nodes passes.
            target = model
            if p["scaled"]:
                target = os.path.join(tmp, name + "_scaled.onnx")
                rs = run(f, "convert", model, "--plan", out, "--scale-only", "-o", target)
                check(rs.returncode == 0, f"{name}: --scale-only", rs.stderr)
            argv = ["check", target, "--inputs", inputs, "--precision", "float16", "--quiet"]
            if want_nodes:
                argv += ["--keep-fp32", ",".join(p["fp32_nodes"])]
            rc = run(f, *argv)
            check(rc.returncode == 0 and rc.stdout.startswith("PASS"),
                  f"check proves plan {name} ({mode})", rc.stdout[:200])
            if mode == "none":
                trt = run(f, "plan", model, "--inputs", inputs, "--precision", "float16",
                          "--emit", "trtexec", "--quiet", "--scale", "none").stdout.strip()
                want_trt = "--fp16" + ("" if not want_nodes else " --layerPrecisions=" + ",".join(
                    n + ":fp32" for n in want_nodes) + " --precisionConstraints=obey")
                check(trt == want_trt, f"trtexec flags for {name}", trt)
                ort = json.loads(run(f, "plan", model, "--inputs", inputs, "--precision",
                                     "float16", "--emit", "ort", "--quiet", "--scale",
                                     "none").stdout)
                check(ort["node_block_list"] == want_nodes, f"ort node_block_list for {name}", ort)
    sr = os.path.join(ex, "superres")
    model, inputs = os.path.join(sr, "model.onnx"), os.path.join(sr, "inputs")
    r = run(f, "plan", model, "--inputs", inputs, "--precision", "float16", "--max-passes", "1",
            "--quiet")
    check(r.returncode == 1 and "NO PLAN MEETS" in r.stdout, "no plan within one pass: exit 1",
          (r.returncode, r.stdout[:200]))
    copy = os.path.join(tmp, "copy.onnx")
    shutil.copy(model, copy)
    before = open(copy, "rb").read()
    fails(f, "plan -o onto the model", ["plan", copy, "--precision", "fp16", "-o", copy], "-o")
    check(open(copy, "rb").read() == before, "plan leaves the model untouched")
    fails(f, "plan for float32", ["plan", model, "--precision", "float32"], "float32")
    fails(f, "plan objective", ["plan", model, "--precision", "fp16", "--objective", "fast"],
          "--objective")
    fails(f, "plan scale", ["plan", model, "--precision", "fp16", "--scale", "some"], "--scale")
    fails(f, "plan emit", ["plan", model, "--precision", "fp16", "--emit", "tvm"], "--emit")
    fails(f, "plan keep unknown", ["plan", model, "--precision", "fp16", "--keep-fp32", "/Pwo"],
          "/Pwo", "did you mean '/Pow'")


def test_target(f, ex, tmp):
    """--target picks the target's recommended format and refuses what it cannot run
    (the table of `fpguard targets --json`)."""
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    inputs = os.path.join(ex, "clean_cnn", "inputs")
    t = json.loads(run(f, "targets", "--json").stdout)
    rows = {r["name"]: r for r in t["targets"]}
    for name in ("sm_75", "sm_86", "sm_90"):
        r, j = check_json(f, tmp, model, inputs, "--target", name)
        if j:
            check(j["precision"] == rows[name]["recommended"], f"--target {name} picks its format",
                  (j["precision"], rows[name]["recommended"]))
    fails(f, "format the target cannot run", ["check", model, "--target", "sm_75", "--precision",
                                              "bfloat16"], "--target sm_75", "bfloat16")
    fails(f, "fp8 before sm_89", ["check", model, "--target", "sm_86", "--precision",
                                  "float8_e4m3fn"], "--target sm_86", "float8_e4m3fn")
    fails(f, "unknown target", ["check", model, "--target", "sm_68"], "sm_68", "did you mean")
    fails(f, "no precision", ["check", model], "--precision")
    # Scaled precisions: a block format runs where the table lists it by name (a native
    # element format is not enough); scaled FP8 where the element format runs.
    blocks = {n for n, r in rows.items() if "mxfp8_e4m3" in r.get("scaled_formats", [])}
    check("sm_100" in blocks and "sm_90" not in blocks, "setup: sm_100 runs MXFP8, sm_90 not",
          sorted(blocks))
    for name, precision in (("sm_100", "mxfp8_e4m3"), ("sm_90", "fp8")):
        r, j = check_json(f, tmp, model, inputs, "--target", name, "--precision", precision)
        check(j is not None, f"--target {name} --precision {precision} is accepted", r.stderr)
    fails(f, "block format the target cannot run", ["check", model, "--target", "sm_90",
          "--precision", "mxfp8_e4m3"], "--target sm_90", "mxfp8_e4m3")
    fails(f, "custom block format no target runs", ["check", model, "--target", "sm_100",
          "--precision", "block:float8_e4m3fn:e8m0:16"], "--target sm_100",
          "block:float8_e4m3fn:float8_e8m0fnu:16")
    fails(f, "scaled fp8 before sm_89", ["check", model, "--target", "sm_86", "--precision",
                                         "fp8"], "--target sm_86", "float8_e4m3fn")


def test_errors(f, ex, tmp):
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    fails(f, "unknown precision", ["check", model, "--precision", "float17"], "float17")
    fails(f, "input the model lacks", ["check", model, "--precision", "fp16", "--input",
                                       "imag=uniform:0:1"], "imag", "did you mean 'image'")
    fails(f, "unknown node to keep", ["check", model, "--precision", "fp16", "--keep-fp32",
                                      "/fc/Gem"], "/fc/Gem", "did you mean '/fc/Gemm'")
    fails(f, "unknown rule", ["check", model, "--precision", "fp16", "--disable-rule", "pows"],
          "pows")
    fails(f, "unknown reference", ["check", model, "--precision", "fp16", "--reference",
                                   "fp128"], "--reference fp128")
    fails(f, "bad accumulation order", ["check", model, "--precision", "fp16", "--accumulate",
                                        "fp16", "--accumulation", "blocked:0"], "--accumulation")
    bad = os.path.join(tmp, "wrong_shape.npy")
    np.save(bad, np.zeros((1, 3, 16, 16), np.float32))
    fails(f, "shape that does not fit", ["check", model, "--precision", "fp16", "--input",
                                         "image=" + bad], "image", "dimension 2")
    # --json onto the model itself: refused, the model untouched, nothing written.
    copy = os.path.join(tmp, "copy.onnx")
    shutil.copy(model, copy)
    before = open(copy, "rb").read()
    fails(f, "--json onto the model", ["check", copy, "--precision", "fp16", "--json", copy])
    check(open(copy, "rb").read() == before, "the model is untouched")
    out = os.path.join(tmp, "never.json")
    fails(f, "no output on error", ["check", model, "--precision", "float17", "--json", out])
    check(not os.path.exists(out), "no partial output file")
    # Unsupported ops are listed at once.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["a"], domain="ai.example"),
                           helper.make_node("Wibble", ["a"], ["y"], domain="ai.example")],
                          "g", [x], [y])
    unsup = os.path.join(tmp, "unsupported.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                  helper.make_opsetid("ai.example", 1)]), unsup)
    fails(f, "unsupported ops", ["check", unsup, "--precision", "fp16"], "Frobnicate", "Wibble")
    # A model without floating-point nodes passes, with a note.
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [3])
    j = helper.make_tensor_value_info("j", TensorProto.INT64, [3])
    g = helper.make_graph([helper.make_node("Add", ["i", "i"], ["j"])], "ints", [i], [j])
    ints = os.path.join(tmp, "ints.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), ints)
    r = run(f, "check", ints, "--precision", "fp16", "--quiet")
    check(r.returncode == 0 and "PASS" in r.stdout and "no floating-point" in r.stdout,
          "integer model passes with a note", (r.returncode, r.stdout, r.stderr))
    fails(f, "not a model", ["check", os.path.join(ex, "README.md"), "--precision", "fp16"],
          "README.md")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        test_superres(a.fpguard, a.examples, tmp)
        test_transformer(a.fpguard, a.examples, tmp)
        test_clean(a.fpguard, a.examples, tmp)
        test_generated(a.fpguard, a.examples, tmp)
        test_absorbed(a.fpguard, tmp)
        test_no_finite_pairs(a.fpguard, tmp)
        test_counts_agree(a.fpguard, a.examples, tmp)
        test_damage(a.fpguard, a.examples, tmp)
        test_rule_severity(a.fpguard, tmp)
        test_fix_all(a.fpguard, a.examples, tmp)
        test_spread_failure(a.fpguard, tmp)
        test_target(a.fpguard, a.examples, tmp)
        test_plan(a.fpguard, a.examples, tmp)
        test_errors(a.fpguard, a.examples, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all check tests passed")


if __name__ == "__main__":
    main()
