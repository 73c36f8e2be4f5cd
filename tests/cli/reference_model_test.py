#!/usr/bin/python3
"""`fpguard check converted.onnx --reference-model original.onnx` and the rules for models
another tool converted (docs/check.md, "Checking a converted model against its original"),
on small models built here with onnx:

- a LayerNorm written as primitives whose Pow overflows float16 (NumPy: the centred values
  fit float16, their squares do not), converted by `mimic_convert` below the way common
  converters do it (every float initializer to float16, clipped to +-1e4 and small values
  raised to 1e-7; Casts at the graph inputs and outputs; a block list kept in float32 with
  Casts around it, its output renamed): `check --reference-model` names the same origin as
  checking the original in float16, the outputs are judged against the original's float32
  run (NumPy's), tensors are matched by name and through a renamed node's outputs, and the
  clipping rules name the initializers the mimic clipped, with NumPy's counts;
- the same without an overflow: the clipped weights alone fail it, and with no origin the
  failure names the first matched tensor that leaves the tolerance (the clipped weight's
  reader), the output's cosine being NumPy's with the clipped weights;
- crafted defects: a Cast whose `to` contradicts the declared type, a Cast of a Cast, a
  float16 CumSum at opset 13 (its schema takes float16 from opset 14), declared or only
  inferred (a float16 initializer; a Cast's output inside an If's branch): each rule fires
  naming the node (a body node by its path); a model `fpguard convert` wrote has none of
  them;
- control flow converted by `mimic_convert_bodies` (bodies computing in float16, their
  initializers converted and clipped): body tensors are matched by key and compared with the
  original's run by run; the node where an overflow inside a Loop body starts is an origin,
  at NumPy's iteration, as checking the original in float16 names it (its local float32 run
  holds the converted model's 16-bit storage in float32, as main-graph nodes' do); the same
  for an If's branch; a clipped branch initializer without overflow makes the body tensor
  the first trouble (with NumPy's cosine);
- bad input: a reference model whose graph input or output differs: one line, exit 2.

    reference_model_test.py --fpguard PATH
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
from clitest import check, check_json, fails, failures, run  # noqa: E402

CLIP_MAX, CLIP_MIN = 1e4, 1e-7  # onnxconverter-common's max_finite_val, min_positive_val
NEW_RULES = ("cast-type", "cast-chain", "schema-type", "clipped-initializer",
             "floored-initializer")


def save(model, path, full_check=True):
    onnx.checker.check_model(model, full_check=full_check)
    onnx.save(model, path)


def layernorm(path):
    """y = (d / sqrt(mean(d^2) + eps)) * w + b, d = x - mean(x): w holds values beyond 1e4
    and b values below 1e-7, which the mimic converter clips and raises."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    w = np.array([2e4, 1.0, 0.5, 3e4, 1.0, 1.0, 2.0, 1.0], np.float32)
    b = np.array([1e-9, 0.25, 0, -3e-9, 0.5, 0, 0, 0.125], np.float32)
    inits = [numpy_helper.from_array(np.float32(2), "two"),
             numpy_helper.from_array(np.float32(1e-5), "eps"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mu"], "mean", axes=[-1]),
        helper.make_node("Sub", ["x", "mu"], ["d"], "sub"),
        helper.make_node("Pow", ["d", "two"], ["sq"], "pow"),
        helper.make_node("ReduceMean", ["sq"], ["var"], "var", axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"], "add_eps"),
        helper.make_node("Sqrt", ["ve"], ["std"], "sqrt"),
        helper.make_node("Div", ["d", "std"], ["n"], "div"),
        helper.make_node("Mul", ["n", "w"], ["nw"], "scale"),
        helper.make_node("Add", ["nw", "b"], ["y"], "shift"),
    ]
    g = helper.make_graph(nodes, "ln", [x], [y], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w, b


def mimic_convert(src, dst, block_ops=("Sqrt",)):
    """What common float16 converters do: float initializers to float16 (clipped to +-1e4,
    non-zero values below 1e-7 raised to +-1e-7), Casts after the graph inputs and before the
    outputs (keep_io_types), nodes of `block_ops` kept in float32 between Casts (their outputs
    renamed), the rest in float16."""
    m = onnx.load(src)
    g = m.graph
    for t in g.initializer:
        a = numpy_helper.to_array(t).astype(np.float64)
        tiny = (a != 0) & (np.abs(a) < CLIP_MIN)
        a = np.where(tiny, np.sign(a) * CLIP_MIN, np.clip(a, -CLIP_MAX, CLIP_MAX))
        t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name))
    nodes = []
    for v in g.input:
        nodes.append(helper.make_node("Cast", [v.name], [v.name + "_fp16"],
                                      "graph_input_cast_" + v.name, to=TensorProto.FLOAT16))
    rename = {v.name: v.name + "_fp16" for v in g.input}
    outputs = {v.name for v in g.output}
    for n in g.node:
        ins = [rename.get(i, i) for i in n.input]
        if n.op_type in block_ops:
            for k, i in enumerate(ins):
                nodes.append(helper.make_node("Cast", [i], [i + "_fp32"], f"{n.name}_in{k}_cast",
                                              to=TensorProto.FLOAT))
            ins = [i + "_fp32" for i in ins]
            outs = [o + "_fp32" for o in n.output]
            nodes.append(helper.make_node(n.op_type, ins, outs, n.name, **attr_dict(n)))
            for o, o32 in zip(n.output, outs):
                nodes.append(helper.make_node("Cast", [o32], [o], n.name + "_out_cast",
                                              to=TensorProto.FLOAT16))
            continue
        outs = [o + "_out_fp16" if o in outputs else o for o in n.output]
        nodes.append(helper.make_node(n.op_type, ins, outs, n.name, **attr_dict(n)))
        for o, o16 in zip(n.output, outs):
            if o != o16:
                nodes.append(helper.make_node("Cast", [o16], [o], "graph_output_cast_" + o,
                                              to=TensorProto.FLOAT))
    del g.node[:]
    g.node.extend(nodes)
    del g.value_info[:]
    save(m, dst)


def attr_dict(n):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


def reference_run(x, w, b):
    """The original in float32 (NumPy)."""
    d = x - x.mean(-1, keepdims=True)
    n = d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5))
    return (n * w + b).astype(np.float32), d


def checked(f, tmp, model, inputs, *extra):
    return check_json(f, tmp, model, inputs, "--precision", "fp16", *extra)


def test_converted(f, tmp):
    orig, conv = os.path.join(tmp, "ln.onnx"), os.path.join(tmp, "ln_fp16.onnx")
    w, b = layernorm(orig)
    mimic_convert(orig, conv)
    x = np.array([[0, 300, -300, 10, 5, -5, 0, 1], [1, 2, 3, 4, 5, 6, 7, 8]], np.float32)
    d_in = os.path.join(tmp, "in")
    os.makedirs(d_in)
    np.save(os.path.join(d_in, "x.npy"), x)
    _, d = reference_run(x, w, b)
    # Independent reason for the origin: d fits float16, d^2 does not.
    check(np.isfinite(d.astype(np.float16)).all() and not np.isfinite(
        (d.astype(np.float16) ** 2).astype(np.float16)).all(),
        "setup: the centred values fit float16 and their squares do not")

    _, jo = checked(f, tmp, orig, d_in)
    _, jc = checked(f, tmp, conv, d_in, "--reference-model", orig)
    if not jo or not jc:
        return
    first = sorted(o["node"] for o in jo["origins"])
    check("pow" in first, "original in float16: the Pow is an origin", jo["origins"])
    named = sorted(o["node"] for o in jc["origins"]) or [(jc["first_trouble"] or {}).get("node")]
    check(named == first, "--reference-model names the same origins as the original's check",
          (named, first))
    check(jc["verdict"] == "fail" and jc["reference_model"] == orig,
          "the converted model fails against its original", (jc["verdict"], jc["reference_model"]))
    nodes = {n["name"]: n for n in jc["nodes"]}
    # Matched by name (d) and through the renamed block-list node (sqrt: std_fp32 -> std).
    tens = {t["name"]: t for n in jc["nodes"] for t in n["outputs"]}
    check(tens.get("d", {}).get("original") == "d", "tensor d matched by name", tens.get("d"))
    check(tens.get("std_fp32", {}).get("original") == "std",
          "the renamed output of the kept node is matched through its node", tens.get("std_fp32"))
    check("sqrt" in nodes and nodes["sqrt"]["precision"] == "float32",
          "the block-list node runs in float32 as converted", nodes.get("sqrt"))
    # Row 1 stays finite in float16: its output is compared against NumPy's float32 run.
    check(tens.get("d", {}).get("against_original", {}).get("count") == x.size,
          "d is compared element by element with the original", tens.get("d"))
    out = jc["outputs"][0]
    check(not out["pass"] and out["cosine"] < 0.999, "the output fails against the original",
          out)
    # The clipping rules, with NumPy's counts of what the mimic changed.
    rules = {(r["id"], r["node"]): r for r in jc["rules"]}
    clip = rules.get(("clipped-initializer", "w"))
    check(clip is not None and clip["count"] == int((np.abs(w) > CLIP_MAX).sum())
          and clip["parameter"] == float(np.float16(CLIP_MAX))
          and clip["observed"] == float(np.abs(w).max()),
          "clipped-initializer names w with NumPy's count", clip)
    floor = rules.get(("floored-initializer", "b"))
    check(floor is not None and floor["count"] == int(((b != 0) & (np.abs(b) < CLIP_MIN)).sum()),
          "floored-initializer names b with NumPy's count", floor)
    check(not any(k[0] in ("clipped-initializer", "floored-initializer") for k in rules
                  if k[1] not in ("w", "b")), "no other initializer is called clipped", rules)
    # Without the reference model the clipping rules cannot fire.
    _, jn = checked(f, tmp, conv, d_in)
    if jn:
        check(not any(r["id"] in ("clipped-initializer", "floored-initializer")
                      for r in jn["rules"]), "no clipping rule without a reference model")


def test_clipped_only(f, tmp):
    """Inputs whose squares fit float16: what breaks the converted model is the weights the
    converter clipped. No node breaks in float16, so the failure names the first matched
    tensor that leaves the tolerance: `nw`, the output of `scale`, the first reader of w."""
    orig, conv = os.path.join(tmp, "ln.onnx"), os.path.join(tmp, "ln_fp16.onnx")
    w, b = layernorm(orig)
    mimic_convert(orig, conv)
    x = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [8, 1, 6, 3, 4, 5, 2, 7]], np.float32)
    d_in = os.path.join(tmp, "in")
    os.makedirs(d_in)
    np.save(os.path.join(d_in, "x.npy"), x)
    y, d = reference_run(x, w, b)
    wc = np.clip(w, -CLIP_MAX, CLIP_MAX)
    n = d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5))
    yc = (n * wc + b).ravel()
    cos = float(np.dot(yc, y.ravel()) / np.linalg.norm(yc) / np.linalg.norm(y))
    check(cos < 0.999, "setup: the clipped weights alone fail the cosine criterion", cos)
    _, j = checked(f, tmp, conv, d_in, "--reference-model", orig)
    if not j:
        return
    ft = j["first_trouble"] or {}
    check(j["verdict"] == "fail" and j["origins"] == [], "clipped only: FAIL without origin",
          (j["verdict"], j["origins"]))
    check((ft.get("tensor"), ft.get("node"), ft.get("nonfinite")) == ("nw", "scale", False),
          "clipped only: the first matched tensor that leaves the tolerance is scale's", ft)
    check(abs(j["outputs"][0]["cosine"] - cos) < 1e-3,
          "clipped only: the output's cosine is NumPy's with the clipped weights",
          (j["outputs"][0]["cosine"], cos))


def crafted(path, nodes, inputs, outputs, value_info=(), opset=13, full_check=True):
    g = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path,
         full_check)


def rule_nodes(f, tmp, model, x, rule):
    d = os.path.join(tmp, os.path.basename(model) + "_in")
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), x)
    _, j = checked(f, tmp, model, d)
    return [r["node"] for r in j["rules"] if r["id"] == rule] if j else None, j


def test_rules(f, tmp):
    x32 = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)
    vi = lambda n, t: helper.make_tensor_value_info(n, t, [1, 8])  # noqa: E731
    F, H = TensorProto.FLOAT, TensorProto.FLOAT16
    # A Cast to float16 whose output is declared float (the checker would refuse it).
    p = os.path.join(tmp, "cast_type.onnx")
    crafted(p, [helper.make_node("Cast", ["x"], ["h"], "to16", to=H),
                helper.make_node("Relu", ["h"], ["r"], "relu"),
                helper.make_node("Cast", ["r"], ["y"], "to32", to=F)],
            [vi("x", F)], [vi("y", F)], [vi("h", F)], full_check=False)
    got, j = rule_nodes(f, tmp, p, x32, "cast-type")
    check(got == ["to16"], "cast-type names the Cast whose output is declared otherwise", got)
    # Cast(Cast(x)): float32 -> float16 -> float32, a rounding round trip.
    p = os.path.join(tmp, "cast_chain.onnx")
    crafted(p, [helper.make_node("Cast", ["x"], ["h"], "c1", to=H),
                helper.make_node("Cast", ["h"], ["g"], "c2", to=F),
                helper.make_node("Relu", ["g"], ["y"], "relu")],
            [vi("x", F)], [vi("y", F)])
    got, j = rule_nodes(f, tmp, p, x32, "cast-chain")
    check(got == ["c2"], "cast-chain names the second Cast", got)
    if j:
        r = next(r for r in j["rules"] if r["id"] == "cast-chain")
        check(r["types"] == ["FLOAT", "FLOAT16", "FLOAT"] and r["severity"] == "major",
              "cast-chain: the types and a round trip is major", r)
    # A float16 CumSum at opset 13: CumSum-11's T has no float16 (CumSum-14 adds it).
    schema = onnx.defs.get_schema("CumSum", 13)
    check("tensor(float16)" not in schema.type_constraints[0].allowed_type_strs,
          "setup: CumSum-11 takes no float16")
    p = os.path.join(tmp, "schema.onnx")
    axis = numpy_helper.from_array(np.int64(1), "axis")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], "relu"),
                           helper.make_node("CumSum", ["r", "axis"], ["y"], "cumsum")],
                          "g", [vi("x", H)], [vi("y", H)], [axis])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    got, _ = rule_nodes(f, tmp, p, x32.astype(np.float16), "schema-type")
    check(got == ["cumsum"], "schema-type names the CumSum fed float16 at opset 13", got)
    # The same with no 16-bit value declared anywhere, only inferred: a float16 initializer
    # summed in the main graph, and a float16 Cast's output summed inside an If's branch.
    p = os.path.join(tmp, "schema_inferred.onnx")
    k = numpy_helper.from_array(np.linspace(0, 1, 8, dtype=np.float16).reshape(1, 8), "k")
    cast_sum = [helper.make_node("Cast", ["x"], ["h"], "to16", to=H),
                helper.make_node("CumSum", ["h", "axis"], ["s"], "cumsum"),
                helper.make_node("Cast", ["s"], ["t"], "to32", to=F)]
    then_g = helper.make_graph(cast_sum, "then", [], [vi("t", F)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], "same")], "else", [],
                               [vi("e", F)])
    c = numpy_helper.from_array(np.array(True), "c")
    g = helper.make_graph([helper.make_node("CumSum", ["k", "axis"], ["ks"], "ksum"),
                           helper.make_node("Cast", ["ks"], ["k32"], "k32", to=F),
                           helper.make_node("If", ["c"], ["b"], "branch", then_branch=then_g,
                                            else_branch=else_g),
                           helper.make_node("Add", ["b", "k32"], ["y"], "add")],
                          "g", [vi("x", F)], [vi("y", F)], [axis, k, c])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    got, _ = rule_nodes(f, tmp, p, x32, "schema-type")
    check(sorted(got or []) == ["branch/then_branch/cumsum", "ksum"],
          "schema-type names CumSums fed inferred float16, in a body too", got)
    # A model fpguard convert wrote has none of the converter rules.
    orig, conv = os.path.join(tmp, "ln.onnx"), os.path.join(tmp, "ln_clean.onnx")
    layernorm(orig)
    r = run(f, "convert", orig, "-o", conv, "--precision", "fp16", "--keep-fp32-ops", "Pow",
            "--keep-io-types", "--no-verify")
    check(r.returncode == 0, "convert writes the clean model", r.stderr)
    if r.returncode == 0:
        d = os.path.join(tmp, "clean_in")
        os.makedirs(d)
        np.save(os.path.join(d, "x.npy"), np.tile(x32, (2, 1)))
        _, j = checked(f, tmp, conv, d, "--reference-model", orig)
        if j:
            bad = [(r["id"], r["node"]) for r in j["rules"] if r["id"] in NEW_RULES]
            check(bad == [], "a model fpguard convert wrote trips no converter rule", bad)


def mimic_convert_bodies(src, dst):
    """mimic_convert for models with If/Loop bodies: every float initializer (bodies' too) to
    float16, clipped and raised as mimic_convert does; the bodies' float inputs and outputs
    typed float16; Casts after the graph inputs (read in the bodies through the cast name)
    and before the graph outputs; every node computing in float16."""
    m = onnx.load(src)
    g = m.graph
    floats = [v for v in g.input if v.type.tensor_type.elem_type == TensorProto.FLOAT]
    rename = {v.name: v.name + "_fp16" for v in floats}

    def convert(graph, top):
        for t in graph.initializer:
            if t.data_type != TensorProto.FLOAT:
                continue
            a = numpy_helper.to_array(t).astype(np.float64)
            tiny = (a != 0) & (np.abs(a) < CLIP_MIN)
            a = np.where(tiny, np.sign(a) * CLIP_MIN, np.clip(a, -CLIP_MAX, CLIP_MAX))
            t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name))
        if not top:
            for v in list(graph.input) + list(graph.output):
                if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                    v.type.tensor_type.elem_type = TensorProto.FLOAT16
        del graph.value_info[:]
        for n in graph.node:
            n.input[:] = [rename.get(i, i) for i in n.input]
            for a in n.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    convert(sub, False)

    convert(g, True)
    outputs = {v.name for v in g.output}
    nodes = [helper.make_node("Cast", [v.name], [v.name + "_fp16"], "graph_input_cast_" + v.name,
                              to=TensorProto.FLOAT16) for v in floats]
    for n in g.node:
        for k, o in enumerate(n.output):
            if o in outputs:
                n.output[k] = o + "_out_fp16"
                nodes.append(n)
                nodes.append(helper.make_node("Cast", [n.output[k]], [o], "graph_output_cast_" + o,
                                              to=TensorProto.FLOAT))
                break
        else:
            nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    save(m, dst)


def doubling_loop(path, trips, start):
    """acc = Loop(trips, acc0 = start) { acc * two }, `two` an initializer of the body."""
    F = TensorProto.FLOAT
    b_in = [helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", F, [1])]
    b_out = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("acc_out", F, [1])]
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"], "keep"),
                              helper.make_node("Mul", ["acc_in", "two"], ["acc_out"], "dbl")],
                             "body", b_in, b_out, [numpy_helper.from_array(np.ones(1, np.float32) * 2,
                                                                           "two")])
    # acc0 = x * start: the Loop's initial value comes from the graph input.
    g = helper.make_graph([helper.make_node("Mul", ["x", "start"], ["acc0"], "init"),
                           helper.make_node("Loop", ["trips", "go", "acc0"], ["acc"], "loop",
                                            body=body)],
                          "g", [helper.make_tensor_value_info("x", F, [1])],
                          [helper.make_tensor_value_info("acc", F, [1])],
                          [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
                           numpy_helper.from_array(np.array(True), "go"),
                           numpy_helper.from_array(np.full(1, start, np.float32), "start")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def gain_branch(path, w):
    """y = If(c, then: x * w (w an initializer of the branch), else: x)."""
    F = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"], "scale")], "then", [],
                               [helper.make_tensor_value_info("t", F, [4])],
                               [numpy_helper.from_array(w, "w")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], "same")], "else", [],
                               [helper.make_tensor_value_info("e", F, [4])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], "branch", then_branch=then_g,
                                            else_branch=else_g)],
                          "g", [helper.make_tensor_value_info("x", F, [4]),
                                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, [4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_bodies(f, tmp):
    """Control flow converted by mimic_convert_bodies, checked against its original: body
    tensors are matched by key and compared run by run (aggregated over a Loop's
    iterations); the node where an overflow inside a Loop body starts is the origin
    checking the original names, at the same iteration; with no origin, the first tensor
    that leaves the tolerance is the body tensor the clipped branch initializer makes, not
    the If's output."""
    trips, start = 8, 1000.0
    orig, conv = os.path.join(tmp, "loop.onnx"), os.path.join(tmp, "loop_fp16.onnx")
    doubling_loop(orig, trips, start)
    mimic_convert_bodies(orig, conv)
    d_in = os.path.join(tmp, "loop_in")
    os.makedirs(d_in)
    np.save(os.path.join(d_in, "x.npy"), np.ones(1, np.float32))
    # NumPy: the first iteration whose float16 product is inf.
    acc, k = np.float16(start), None
    for i in range(trips):
        acc = np.float16(np.float32(acc) * 2)
        if np.isinf(acc) and k is None:
            k = i
    check(k is not None, "setup: the doubling overflows float16 within the trips", k)
    _, jo = checked(f, tmp, orig, d_in)
    _, jc = checked(f, tmp, conv, d_in, "--reference-model", orig)
    if jo and jc:
        want = [(o["node"], o["iteration"]) for o in jo["origins"]]
        check(want == [("loop/body/dbl", [k])], "body origin: at NumPy's iteration", (want, k))
        named = [(o["node"], o["iteration"]) for o in jc["origins"]]
        check(named == want, "body origin: --reference-model names the same origin",
              (named, want, jc["first_trouble"]))
        tens = {t["name"]: t for n in jc["nodes"] for t in n["outputs"]}
        t = tens.get("loop/body/acc_out", {})
        check(t.get("original") == "loop/body/acc_out" and
              t.get("against_original", {}).get("count") == trips,
              "the body tensor is matched and compared in every iteration", t)
        check(t.get("against_original", {}).get("overflow", 0) == trips - k,
              "it is non-finite against the original from iteration k on",
              (t.get("against_original"), trips - k))
    # An overflow that starts in an If's branch: both factors fit float16 (and the
    # mimic's clipping), their product does not.
    w = np.array([300, 1, 1, 1], np.float32)
    x = np.array([300, 5, -2.5, 1.25], np.float32)
    check(np.isinf(np.float16(x[0] * w[0])) and np.abs(w).max() < CLIP_MAX,
          "setup: the branch's product overflows float16, its weight is not clipped")
    orig, conv = os.path.join(tmp, "if_over.onnx"), os.path.join(tmp, "if_over_fp16.onnx")
    gain_branch(orig, w)
    mimic_convert_bodies(orig, conv)
    d_in = os.path.join(tmp, "if_over_in")
    os.makedirs(d_in)
    np.save(os.path.join(d_in, "x.npy"), x)
    np.save(os.path.join(d_in, "c.npy"), np.array(True))
    _, jo = checked(f, tmp, orig, d_in)
    _, jc = checked(f, tmp, conv, d_in, "--reference-model", orig)
    if jo and jc:
        want = [o["node"] for o in jo["origins"]]
        check(want == ["branch/then_branch/scale"], "branch origin: checking the original", want)
        named = [o["node"] for o in jc["origins"]]
        check(named == want, "branch origin: --reference-model names the same origin",
              (named, jc["first_trouble"]))
    # A clipped branch initializer: nothing overflows, the branch's product leaves the
    # tolerance first.
    w = np.array([2e4, 1, 1, 1], np.float32)
    orig, conv = os.path.join(tmp, "if.onnx"), os.path.join(tmp, "if_fp16.onnx")
    gain_branch(orig, w)
    mimic_convert_bodies(orig, conv)
    d_in = os.path.join(tmp, "if_in")
    os.makedirs(d_in)
    x = np.array([1e-3, 5, -2.5, 1.25], np.float32)
    np.save(os.path.join(d_in, "x.npy"), x)
    np.save(os.path.join(d_in, "c.npy"), np.array(True))
    y, yc = x * w, x * np.clip(w, -CLIP_MAX, CLIP_MAX)
    cos = float(np.dot(y, yc) / np.linalg.norm(y) / np.linalg.norm(yc))
    check(cos < 0.999, "setup: the clipped branch weight alone fails the cosine criterion", cos)
    _, j = checked(f, tmp, conv, d_in, "--reference-model", orig)
    if j:
        ft = j["first_trouble"] or {}
        check(j["verdict"] == "fail" and j["origins"] == [] and
              (ft.get("tensor"), ft.get("node"), ft.get("nonfinite")) ==
              ("branch/then_branch/t", "branch/then_branch/scale", False),
              "clipped branch: the first trouble is the body tensor", (j["origins"], ft))
        check(abs(ft.get("cosine", 0) - cos) < 1e-3, "clipped branch: its cosine is NumPy's",
              (ft.get("cosine"), cos))
        # The clipping rule reads bodies' initializers too, named by their body key.
        clip = [r for r in j["rules"] if r["id"] == "clipped-initializer"]
        check([(r["node"], r["count"], r["observed"]) for r in clip] ==
              [("branch/then_branch/w", int((np.abs(w) > CLIP_MAX).sum()),
                float(np.abs(w).max()))],
              "clipped branch: clipped-initializer names the branch's w with NumPy's count",
              clip)


def test_bad_reference(f, tmp):
    orig, conv = os.path.join(tmp, "ln.onnx"), os.path.join(tmp, "ln_fp16.onnx")
    layernorm(orig)
    mimic_convert(orig, conv)
    m = onnx.load(orig)
    m.graph.input[0].name = "z"
    m.graph.node[0].input[0] = "z"
    m.graph.node[1].input[0] = "z"
    other = os.path.join(tmp, "other_input.onnx")
    onnx.save(m, other)
    fails(f, "reference model with another input", ["check", conv, "--precision", "fp16", "--reference-model", other],
          "--reference-model", "'x'")
    m = onnx.load(orig)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    other = os.path.join(tmp, "other_output.onnx")
    onnx.save(m, other)
    fails(f, "reference model with an int64 output", ["check", conv, "--precision", "fp16", "--reference-model", other],
          "--reference-model", "'y'", "INT64")


def main():
    np.seterr(over="ignore")  # float16 squares overflow on purpose
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for t in (test_converted, test_clipped_only, test_bodies, test_rules,
                  test_bad_reference):
            sub = os.path.join(tmp, t.__name__)
            os.makedirs(sub)
            t(a.fpguard, sub)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
