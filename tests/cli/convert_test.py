#!/usr/bin/python3
"""End-to-end tests of `fpguard convert` (with plans from `fpguard plan`):

- the examples: the converted models pass onnx.checker (full_check) and strict shape
  inference; weights are stored in float16; the planned nodes read float32; casts are
  one per (value, type), never Cast(Cast(x)), and as many as the plan predicted; the
  converted model's outputs (real 16-bit storage) equal the emulated prediction of the
  plan bit for bit; its verification against the float32 model passes; check passes on it.
- crafted graphs (onnx.helper): an initializer shared by a float32 and a float16 node, a
  graph output produced by a float32 node, an If whose float32 branch node (kept by path)
  reads an outer value that became float16, a Cast to float feeding float16 nodes, a Resize
  whose `scales` must stay float32; bfloat16.
- control flow (the models of control_flow_test.py: If, Loop reading a captured tensor, If
  in a Loop, a branch initializer beyond float16's max, a Scan RNN cell): planned and
  converted in float16 and bfloat16, whole in float16 on inputs in range; each passes the
  checker and strict shape inference and equals the emulated plan bit for bit; the body
  nodes compute in the format between Casts, a captured value is cast once, in the graph
  that defines it; the float16 ones run in ONNX Runtime too; a --keep-fp32 body path that
  names no node gets a "did you mean" over all paths, a plan naming a body node the model
  lacks is a plan for another model.
- bad input: a plan for another model, a malformed plan, a precision that contradicts the
  plan, -o onto the input, formats convert cannot write.
- a second runtime: every model convert writes here runs in ONNX Runtime (onnxruntime-node,
  installed by scripts/setup into the build tree), and its outputs are compared with
  `fpguard run` on the same inputs (ortcheck.py: a few float16 ulps; bit-identical for a
  graph whose float16 arithmetic is exact); each example also runs there in float32.

    convert_test.py --fpguard PATH --examples DIR --ort-node DIR
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
import ortcheck  # noqa: E402
from clitest import check, fails, failures, read_outputs, run  # noqa: E402

# Every model convert wrote, for ONNX Runtime: (path, {input: array} or None to draw
# them, tolerance mode of ortcheck.compare).
CONVERTED = []


def dir_inputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def example_inputs(ex, name):
    return dir_inputs(os.path.join(ex, name, "inputs"))


def valid(path, what):
    m = onnx.load(path)
    try:
        onnx.checker.check_model(m, full_check=True)
        onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - any checker failure is the finding
        check(False, f"{what}: checker and shape inference", e)
    return m


def structure(m, what):
    """One Cast per (value, type); no Cast reads a Cast."""
    casts = [n for n in m.graph.node if n.op_type == "Cast"]
    produced_by_cast = {n.output[0] for n in casts}
    check(not any(n.input[0] in produced_by_cast for n in casts), f"{what}: no Cast(Cast(x))")
    keys = [(n.input[0], [a.i for a in n.attribute if a.name == "to"][0]) for n in casts]
    check(len(keys) == len(set(keys)), f"{what}: one Cast per value and type", keys)
    return len(casts)


def elem_types(m):
    inferred = onnx.shape_inference.infer_shapes(m)
    t = {v.name: v.type.tensor_type.elem_type
         for v in list(inferred.graph.value_info) + list(inferred.graph.input) +
         list(inferred.graph.output)}
    t.update({i.name: i.data_type for i in m.graph.initializer})
    return t


def test_examples(f, ex, tmp):
    for name, scale_mode in (("superres", "none"), ("superres", "auto"),
                             ("transformer_block", "none"), ("transformer_block", "auto"),
                             ("clean_cnn", "auto")):
        model = os.path.join(ex, name, "model.onnx")
        inputs = os.path.join(ex, name, "inputs")
        before = open(model, "rb").read()
        plan = os.path.join(tmp, name + ".plan.json")
        r = run(f, "plan", model, "--inputs", inputs, "--precision", "fp16", "-o", plan, "--quiet",
                "--scale", scale_mode)
        check(r.returncode == 0, f"{name}: plan", r.stderr)
        with open(plan) as fh:
            p = json.load(fh)
        for io in (False, True):
            out = os.path.join(tmp, f"{name}{'_io' if io else ''}.onnx")
            argv = ["convert", model, "--plan", plan, "-o", out, "--inputs", inputs]
            r = run(f, *(argv + (["--keep-io-types"] if io else [])))
            check(r.returncode == 0 and "verified" in r.stdout and "FAIL" not in r.stdout,
                  f"{name}: convert verifies", (r.returncode, r.stdout, r.stderr))
            if r.returncode != 0:
                continue
            CONVERTED.append((out, example_inputs(ex, name), "fp16"))
            m = valid(out, name)
            n_casts = structure(m, name)
            types = elem_types(m)
            nodes = {n.name: n for n in m.graph.node}
            for keep in p["fp32_nodes"]:
                n = nodes[keep]
                check(all(types.get(i) == TensorProto.FLOAT for i in n.input[:1]),
                      f"{name}: {keep} reads float32", [types.get(i) for i in n.input])
            low = [n for n in m.graph.node if n.op_type in ("Conv", "MatMul", "Gemm")
                   and n.name not in p["fp32_nodes"]]
            for n in low:
                check(types.get(n.input[1]) == TensorProto.FLOAT16,
                      f"{name}: {n.name} weights stored in float16", types.get(n.input[1]))
            ins = {i.name: i.type.tensor_type.elem_type for i in m.graph.input}
            outs = {o.name: o.type.tensor_type.elem_type for o in m.graph.output}
            want_io = TensorProto.FLOAT if io else TensorProto.FLOAT16
            check(set(ins.values()) == {want_io} and set(outs.values()) == {want_io},
                  f"{name}: graph input/output types (keep-io {io})", (ins, outs))
            if io:
                check(n_casts == p["casts"], f"{name}: the plan's cast count",
                      (n_casts, p["casts"]))
                # Real 16-bit storage equals the emulated prediction of the plan (on the
                # model with the plan's scale rewrites).
                oc, oe = os.path.join(tmp, name + "_oc"), os.path.join(tmp, name + "_oe")
                run(f, "run", out, "--inputs", inputs, "--outputs", oc)
                emulated = model
                if p["scaled"]:
                    emulated = os.path.join(tmp, name + "_scaled.onnx")
                    run(f, "convert", model, "--plan", plan, "--scale-only", "-o", emulated)
                argv = ["run", emulated, "--inputs", inputs, "--precision", "float16",
                        "--outputs", oe]
                if p["fp32_nodes"]:
                    argv += ["--exclude"] + p["fp32_nodes"]
                run(f, *argv)
                a, b = read_outputs(oc), read_outputs(oe)
                for k in a:
                    check(np.array_equal(a[k].astype(np.float32), b[k].astype(np.float32)),
                          f"{name}: converted == emulated plan ({k})",
                          float(np.abs(a[k].astype(np.float32) - b[k].astype(np.float32)).max()))
                # Closing the loop: check passes on the converted model.
                rc = run(f, "check", out, "--inputs", inputs, "--precision", "fp16", "--quiet")
                check(rc.returncode == 0, f"{name}: check passes on the converted model",
                      rc.stdout[:300])
        check(open(model, "rb").read() == before, f"{name}: the input model is untouched")
    # Without the plan, the all-float16 conversion is written but does not verify, and
    # check on it names the overflow origin.
    model = os.path.join(ex, "superres", "model.onnx")
    inputs = os.path.join(ex, "superres", "inputs")
    out = os.path.join(tmp, "superres_all16.onnx")
    r = run(f, "convert", model, "--precision", "fp16", "-o", out, "--inputs", inputs)
    check(r.returncode == 1 and "FAIL" in r.stdout and os.path.exists(out),
          "all-float16 superres: written, verification fails (exit 1)", (r.returncode, r.stdout))
    rc = run(f, "check", out, "--inputs", inputs, "--precision", "fp16", "--json", "-", "--quiet")
    j = json.loads(rc.stdout) if rc.stdout.startswith("{") else {}
    check(rc.returncode == 1 and [o["node"] for o in j.get("origins", [])] == ["/Pow"],
          "check on the all-float16 model names /Pow", (rc.returncode, rc.stdout[:300]))


def save(graph, path, opset=13):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def crafted(f, tmp):
    F = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 1, (4, 4)).astype(np.float32), "w")
    # Shared initializer: read by a float32 MatMul ("keep") and a float16 one; the graph
    # output "y2" comes from the float32 node.
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["a"], name="low"),
         helper.make_node("Relu", ["a"], ["y1"], name="act"),
         helper.make_node("MatMul", ["x", "w"], ["y2"], name="keep")],
        "shared", [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y1", F, [2, 4]),
         helper.make_tensor_value_info("y2", F, [2, 4])], [w])
    src = save(g, os.path.join(tmp, "shared.onnx"))
    out = os.path.join(tmp, "shared16.onnx")
    r = run(f, "convert", src, "--precision", "fp16", "--keep-fp32", "keep", "--keep-io-types",
            "-o", out)
    check(r.returncode == 0, "shared: converts", (r.stdout, r.stderr))
    CONVERTED.append((out, None, "fp16"))
    m = valid(out, "shared")
    structure(m, "shared")
    inits = {i.name: i.data_type for i in m.graph.initializer}
    check(inits == {"w": TensorProto.FLOAT, "w_fp16": TensorProto.FLOAT16},
          "shared initializer stored once in each type", inits)
    nodes = {n.name: n for n in m.graph.node}
    check(nodes["keep"].input[1] == "w" and nodes["low"].input[1] == "w_fp16",
          "each reader reads its type", (list(nodes["keep"].input), list(nodes["low"].input)))
    check("y2" in nodes["keep"].output, "the float32 node still produces its graph output")

    # If: the then-branch reads an outer value ("h") that became float16.
    then_g = helper.make_graph([helper.make_node("Neg", ["h"], ["t"], name="neg")], "then", [],
                               [helper.make_tensor_value_info("t", F, [2, 4])])
    else_g = helper.make_graph([helper.make_node("Abs", ["h"], ["e"], name="abs")], "else", [],
                               [helper.make_tensor_value_info("e", F, [2, 4])])
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"),
         helper.make_node("If", ["c"], ["z"], name="branch", then_branch=then_g,
                          else_branch=else_g),
         helper.make_node("Sigmoid", ["z"], ["y"], name="sig")],
        "ifg", [helper.make_tensor_value_info("x", F, [2, 4]),
                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", F, [2, 4])])
    src = save(g, os.path.join(tmp, "if.onnx"))
    out = os.path.join(tmp, "if16.onnx")
    np.save(os.path.join(tmp, "c.npy"), np.array(True))
    np.save(os.path.join(tmp, "x.npy"), rng.normal(0, 1, (2, 4)).astype(np.float32))
    r = run(f, "convert", src, "--precision", "fp16", "-o", out, "--input",
            "c=" + os.path.join(tmp, "c.npy"), "--input", "x=" + os.path.join(tmp, "x.npy"),
            "--keep-fp32", "branch/then_branch/neg")
    check(r.returncode == 0 and "verified" in r.stdout, "if: converts and verifies",
          (r.stdout, r.stderr))
    CONVERTED.append((out, {"x": np.load(os.path.join(tmp, "x.npy")), "c": np.array(True)},
                      "fp16"))
    m = valid(out, "if")
    branch = next(n for n in m.graph.node if n.op_type == "If")
    then_in = branch.attribute[[a.name for a in branch.attribute].index("then_branch")].g
    else_in = branch.attribute[[a.name for a in branch.attribute].index("else_branch")].g
    check(then_in.node[0].input[0] == "h_fp32" and else_in.node[0].input[0] == "h",
          "the float32 branch node reads a float32 copy, the float16 one h itself",
          (list(then_in.node[0].input), list(else_in.node[0].input)))

    # Cast(to=FLOAT) feeding float16 nodes becomes Cast(to=FLOAT16); Resize keeps its
    # float32 scales.
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    g = helper.make_graph(
        [helper.make_node("Cast", ["xd"], ["xf"], name="to_float", to=F),
         helper.make_node("Relu", ["xf"], ["r"], name="relu"),
         helper.make_node("Resize", ["r", "", "scales"], ["y"], name="up", mode="nearest")],
        "castg", [helper.make_tensor_value_info("xd", TensorProto.DOUBLE, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", F, [1, 1, 4, 4])], [scales])
    src = save(g, os.path.join(tmp, "cast.onnx"))
    out = os.path.join(tmp, "cast16.onnx")
    r = run(f, "convert", src, "--precision", "fp16", "-o", out)
    check(r.returncode == 0, "cast: converts", (r.stdout, r.stderr))
    CONVERTED.append((out, None, "fp16"))
    m = valid(out, "cast")
    structure(m, "cast")
    to = [a.i for n in m.graph.node if n.name == "to_float" for a in n.attribute if a.name == "to"]
    check(to == [TensorProto.FLOAT16], "Cast to float now casts to float16", to)
    check({i.name: i.data_type for i in m.graph.initializer}.get("scales") == TensorProto.FLOAT,
          "Resize scales stay float32")

    # ConstantOfShape read only by float16 nodes makes float16 itself (no Cast after it).
    shape = numpy_helper.from_array(np.array([2, 4], np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["ones"], name="fill",
                          value=numpy_helper.from_array(np.array([1.5], np.float32))),
         helper.make_node("Add", ["x", "ones"], ["y"], name="add")],
        "cos", [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, [2, 4])], [shape])
    src = save(g, os.path.join(tmp, "cos.onnx"))
    out = os.path.join(tmp, "cos16.onnx")
    r = run(f, "convert", src, "--precision", "fp16", "-o", out, "--input",
            "x=" + os.path.join(tmp, "x.npy"))
    check(r.returncode == 0 and "verified" in r.stdout, "ConstantOfShape: converts", r.stdout)
    CONVERTED.append((out, None, "fp16"))
    m = valid(out, "ConstantOfShape")
    check(not any(n.op_type == "Cast" for n in m.graph.node), "no Cast after ConstantOfShape")
    fill = next(n for n in m.graph.node if n.op_type == "ConstantOfShape")
    check(fill.attribute[0].t.data_type == TensorProto.FLOAT16, "its value is float16")

    # float16 weights cast to float32 make a float32 model: check emulates all of it.
    w16 = numpy_helper.from_array(rng.normal(0, 1, (2, 4)).astype(np.float16), "w16")
    g = helper.make_graph(
        [helper.make_node("Cast", ["w16"], ["w"], name="widen", to=F),
         helper.make_node("Mul", ["x", "w"], ["y"], name="scale")],
        "w16", [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, [2, 4])], [w16])
    src = save(g, os.path.join(tmp, "w16.onnx"))
    rc = run(f, "check", src, "--precision", "fp16", "--json", "-", "--quiet")
    j = json.loads(rc.stdout) if rc.stdout.startswith("{") else {}
    mul = [n for n in j.get("nodes", []) if n["name"] == "scale"]
    check(mul and mul[0]["precision"] == "float16" and
          not any(n["kind"] == "mixed_storage" for n in j.get("notes", [])),
          "fp16 weights cast to float: the model is checked as float32", rc.stdout[:300])

    # bfloat16.
    out = os.path.join(tmp, "shared_bf16.onnx")
    r = run(f, "convert", os.path.join(tmp, "shared.onnx"), "--precision", "bf16", "-o", out)
    check(r.returncode == 0, "bf16: converts", (r.stdout, r.stderr))
    m = valid(out, "bf16")
    check(TensorProto.BFLOAT16 in {i.data_type for i in m.graph.initializer}, "bf16 weights")


def exact(f, tmp):
    """A graph whose float16 arithmetic is exact (small multiples of 1/8: every product,
    sum and max is a float16 value), converted: any two faithful runtimes agree bit for
    bit, whatever order they sum in."""
    F = TensorProto.FLOAT
    w = numpy_helper.from_array(np.arange(-8, 8, dtype=np.float32).reshape(4, 4) / 4, "w")
    c = numpy_helper.from_array(np.array([0.5, -1, 2, 0.125], np.float32), "c")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("Add", ["m", "c"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["r"], name="relu"),
         helper.make_node("Transpose", ["r"], ["t"], name="tr", perm=[1, 0]),
         helper.make_node("ReduceMax", ["t"], ["y"], name="max", axes=[1], keepdims=0)],
        "exact", [helper.make_tensor_value_info("x", F, [3, 4])],
        [helper.make_tensor_value_info("y", F, [4])], [w, c])
    src = save(g, os.path.join(tmp, "exact.onnx"))
    out = os.path.join(tmp, "exact16.onnx")
    r = run(f, "convert", src, "--precision", "fp16", "--keep-io-types", "-o", out, "--no-verify")
    check(r.returncode == 0, "exact: converts", (r.stdout, r.stderr))
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) - 6) / 8
    CONVERTED.append((out, {"x": x}, "exact"))


def body(m, node_name, attr):
    """The graph attribute `attr` of the main-graph node `node_name`."""
    n = next(n for n in m.graph.node if n.name == node_name)
    return next(a.g for a in n.attribute if a.name == attr)


def all_casts(g):
    """The Cast nodes of graph `g` and of every body in it, nested as deep as it goes."""
    n = 0
    for node in g.node:
        n += node.op_type == "Cast"
        for a in node.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                n += all_casts(sub)
    return n


def cf_case(f, tmp, label, model, inputs, precision, plan=True):
    """One control-flow model converted (with its plan, or all of it in `precision`) with
    --keep-io-types: it passes the checker and strict shape inference, its outputs (real
    16-bit storage) equal the emulated plan, `run --precision P --exclude <plan nodes>` on
    the original, bit for bit, and the plan's cast count is the number of Cast nodes the
    conversion added, bodies included. Returns (converted model, plan's fp32 nodes)."""
    keep = []
    casts = None
    argv = ["convert", model, "--keep-io-types", "--inputs", inputs]
    if plan:
        pj = os.path.join(tmp, label + ".plan.json")
        r = run(f, "plan", model, "--inputs", inputs, "--precision", precision, "-o", pj,
                "--quiet")
        check(r.returncode == 0, f"{label}: plan", (r.stdout[-500:], r.stderr))
        with open(pj) as fh:
            p = json.load(fh)
        keep, casts = p["fp32_nodes"], p["casts"]
        argv += ["--plan", pj]
    else:
        argv += ["--precision", precision]
    out = os.path.join(tmp, label + ".onnx")
    r = run(f, *argv, "-o", out)
    check(r.returncode == 0 and "verified" in r.stdout and "FAIL" not in r.stdout,
          f"{label}: convert verifies", (r.returncode, r.stdout, r.stderr))
    if r.returncode != 0:
        return None, keep
    m = valid(out, label)
    added = all_casts(m.graph) - all_casts(onnx.load(model).graph)
    check(casts is None or casts == added, f"{label}: the plan's cast count", (casts, added))
    oc, oe = os.path.join(tmp, label + "_oc"), os.path.join(tmp, label + "_oe")
    run(f, "run", out, "--inputs", inputs, "--outputs", oc)
    emulate = ["run", model, "--inputs", inputs, "--precision", precision, "--outputs", oe]
    run(f, *(emulate + (["--exclude"] + keep if keep else [])))
    a, b = read_outputs(oc), read_outputs(oe)
    check(a.keys() == b.keys() and len(a) > 0, f"{label}: the same outputs", (a.keys(), b.keys()))
    for k in a:
        check(np.array_equal(a[k].astype(np.float32), b[k].astype(np.float32)),
              f"{label}: converted == emulated plan ({k})",
              float(np.abs(a[k].astype(np.float32) - b[k].astype(np.float32)).max()))
    return m, keep


def cast_to(g, value):
    """The `to` of the Cast in `g` producing `value`, or None."""
    for n in g.node:
        if n.op_type == "Cast" and n.output[0] == value:
            return n.attribute[0].i
    return None


def if_reader_model(tmp):
    """y = Relu(If(c, then: x * w, else: -x)): both branches and the reader compute."""
    F = TensorProto.FLOAT
    w = numpy_helper.from_array(np.full(4, 3, np.float32), "w")
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"], name="scale")], "then",
                               [], [helper.make_tensor_value_info("t", F, [4])], [w])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [],
                               [helper.make_tensor_value_info("e", F, [4])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["b"], name="branch", then_branch=then_g,
                                            else_branch=else_g),
                           helper.make_node("Relu", ["b"], ["y"], name="relu")],
                          "g", [helper.make_tensor_value_info("x", F, [4]),
                                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, [4])])
    path = save(g, os.path.join(tmp, "if_reader.onnx"))
    d = os.path.join(tmp, "if_reader_in")
    os.makedirs(d)
    np.save(os.path.join(d, "x.npy"), np.array([1.5, -2, 0.1, 300], np.float32))
    np.save(os.path.join(d, "c.npy"), np.array(True))
    return path, d


def control_flow(f, tmp):
    """The models of control_flow_test.py (If, Loop reading a captured tensor, If nested in a
    Loop, a branch initializer beyond float16's max, a Scan RNN cell), planned and converted
    in float16 and bfloat16; in-range inputs converted whole in float16 too."""
    import control_flow_test as cf  # noqa: E402 - the models are built there
    H = TensorProto.FLOAT16
    d = os.path.join(tmp, "cf")
    os.makedirs(d)
    if_path, if_in, _ = cf.if_model(d)
    loop_path, loop_in = cf.loop_model(d, 10, 10000.0)
    nested_path, nested_in = cf.nested_model(d, 8)
    const_path, const_in = cf.const_model(d)
    rnn_path, rnn_in, _ = cf.scan_rnn_model(d)
    cases = [("if", if_path, if_in), ("loop", loop_path, loop_in),
             ("nested", nested_path, nested_in), ("const", const_path, const_in),
             ("rnn", rnn_path, rnn_in)]
    for label, model, inputs in cases:
        for precision in ("fp16", "bf16"):
            m, keep = cf_case(f, d, f"{label}_{precision}", model, inputs, precision)
            if m is not None and precision == "fp16":
                CONVERTED.append((os.path.join(d, f"{label}_{precision}.onnx"),
                                  dir_inputs(inputs), "fp16"))
            if label == "loop" and m is not None:
                add = next(n for n in body(m, "loop", "body").node if n.name == "acc_add")
                kept = precision == "fp16"
                check(keep == (["loop/body/acc_add"] if kept else []),
                      f"loop {precision}: the plan keeps the body node by path", keep)
                # bfloat16: the Add reads the carried value through a Cast in the body and
                # the captured x through one in the main graph (once, not per iteration).
                b = body(m, "loop", "body")
                check(kept or (cast_to(b, add.input[0]) == TensorProto.BFLOAT16 and
                               cast_to(m.graph, add.input[1]) == TensorProto.BFLOAT16),
                      f"loop {precision}: the body's Casts", list(add.input))
    # A --keep-fp32 path that names no node: one line with a "did you mean" over all paths,
    # and a plan naming a body node the model lacks: a plan for another model.
    never = os.path.join(d, "never.onnx")
    fails(f, "convert --keep-fp32 unknown body path",
          ["convert", if_path, "--precision", "fp16", "--keep-fp32", "If_0/then_branch/scal", "-o",
           never], "If_0/then_branch/scal'", "did you mean 'If_0/then_branch/scale'")
    other = os.path.join(d, "other.plan.json")
    with open(other, "w") as fh:
        json.dump({"schema_version": 1, "precision": "float16", "fp32_nodes": ["loop/body/acc_add"]},
                  fh)
    fails(f, "plan naming a body node the model lacks",
          ["convert", if_path, "--plan", other, "-o", never], "loop/body/acc_add", "another model")
    check(not os.path.exists(never), "no output on error")
    # Whole models in float16 on inputs in range: every body node in float16.
    small = os.path.join(d, "if_small")
    os.makedirs(small)
    np.save(os.path.join(small, "x.npy"), np.array([1, 2, 3, -4], np.float32))
    np.save(os.path.join(small, "c.npy"), np.array(True))
    loop_small = os.path.join(d, "loop_small")
    os.makedirs(loop_small)
    np.save(os.path.join(loop_small, "x.npy"), np.array([1.5], np.float32))
    short = os.path.join(d, "short")  # 4 doublings of 1000 stay within float16's range
    os.makedirs(short)
    short_path, short_in = cf.nested_model(short, 4)
    reader_path, reader_in = if_reader_model(d)
    for label, model, inputs in (("if_all16", if_path, small), ("loop_all16", loop_path, loop_small),
                                 ("nested_all16", short_path, short_in),
                                 ("if_reader_all16", reader_path, reader_in)):
        m, _ = cf_case(f, d, label, model, inputs, "fp16", plan=False)
        if m is None:
            continue
        CONVERTED.append((os.path.join(d, label + ".onnx"), dir_inputs(inputs), "fp16"))
        if label == "if_all16":
            then_g = body(m, "If_0", "then_branch")
            mul = next(n for n in then_g.node if n.name == "scale")
            inits = {i.name: i.data_type for i in then_g.initializer}
            check(inits.get(mul.input[1]) == H and cast_to(m.graph, mul.input[0]) == H and
                  cast_to(then_g, then_g.output[0].name) == TensorProto.FLOAT,
                  "if all fp16: the branch computes in float16 between Casts",
                  (list(mul.input), inits, [o.name for o in then_g.output]))
        if label == "if_reader_all16":
            # Both branches and the reader in float16: the If's output stays float16, with
            # no Cast out of the branches and none back before the Relu.
            branches = [body(m, "branch", a) for a in ("then_branch", "else_branch")]
            relu = next(n for n in m.graph.node if n.name == "relu")
            check(all(all_casts(b) == 0 and b.output[0].type.tensor_type.elem_type == H
                      for b in branches) and cast_to(m.graph, relu.input[0]) is None and
                  elem_types(m).get(relu.input[0]) == H,
                  "if feeding float16: its output stays float16, no Casts around it",
                  ([all_casts(b) for b in branches], list(relu.input)))


def declared_inputs(model):
    """{name: (NumPy dtype, shape)} of a model's runtime inputs."""
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return {i.name: (np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[i.type.tensor_type.elem_type]),
                     [d.dim_value for d in i.type.tensor_type.shape.dim])
            for i in m.graph.input if i.name not in inits}


def model_inputs(model, given):
    """The inputs to run `model` on, in its declared types (a float16 model's float32 data
    rounded to float16): `given`, or drawn, seeded: floats normal(0, 1), bools True."""
    rng = np.random.default_rng(1)
    out = {}
    for name, (dtype, shape) in declared_inputs(model).items():
        if given is not None:
            out[name] = given[name].astype(dtype)
        else:
            out[name] = (np.ones(shape, dtype) if dtype == np.bool_ else
                         rng.normal(0, 1, shape).astype(dtype))
    return out


def in_onnx_runtime(f, ex, ort_dir, tmp):
    """Every converted model, and each example in float32, in ONNX Runtime against
    `fpguard run` on the same inputs."""
    if not ortcheck.available(ort_dir):
        return
    cases = [(os.path.join(ex, name, "model.onnx"), example_inputs(ex, name), "fp32")
             for name in ("superres", "transformer_block", "clean_cnn")]
    check(len(CONVERTED) >= 10, "the converted models of this test are all registered",
          len(CONVERTED))
    for model, inputs, mode in cases + CONVERTED:
        inputs = model_inputs(model, inputs)
        d = os.path.join(tmp, "ort_case")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        argv = ["run", model, "--outputs", os.path.join(d, "ours")]
        for name, a in inputs.items():
            np.save(os.path.join(d, name + ".npy"), a)
            argv += ["--input", f"{name}={os.path.join(d, name + '.npy')}"]
        r = run(f, *argv)
        check(r.returncode == 0, f"{os.path.basename(model)}: fpguard run", r.stderr)
        theirs = ortcheck.run_ort(ort_dir, model, inputs, d)
        if r.returncode == 0 and theirs is not None:
            ortcheck.compare(f"{os.path.basename(model)} ({mode})",
                             read_outputs(os.path.join(d, "ours")), theirs, mode)


def external_data(f, ex, tmp):
    """--external-data: the initializers in OUTPUT.data, read back by onnx (an independent
    reader) with the values of the inline conversion; fpguard runs it the same."""
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    inputs = os.path.join(ex, "clean_cnn", "inputs")
    inline = os.path.join(tmp, "tb_inline.onnx")
    ext = os.path.join(tmp, "tb_ext.onnx")
    run(f, "convert", model, "--precision", "fp16", "-o", inline, "--no-verify")
    r = run(f, "convert", model, "--precision", "fp16", "-o", ext, "--external-data",
            "--inputs", inputs)
    check(r.returncode == 0 and "as external data" in r.stdout and
          os.path.exists(ext + ".data"), "--external-data: written and verified",
          (r.returncode, r.stdout, r.stderr))
    CONVERTED.append((ext, example_inputs(ex, "clean_cnn"), "fp16"))
    check(not os.path.exists(inline + ".data"), "no data file without --external-data")
    raw = onnx.load(ext, load_external_data=False)
    n_ext = sum(t.data_location == TensorProto.EXTERNAL for t in raw.graph.initializer)
    big = sum(numpy_helper.to_array(t).nbytes >= 1024 for t in onnx.load(inline).graph.initializer)
    check(n_ext == big and n_ext > 0, "initializers of 1 KiB or more are external", (n_ext, big))
    got = {t.name: numpy_helper.to_array(t) for t in valid(ext, "external").graph.initializer}
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(inline).graph.initializer}
    check(got.keys() == want.keys() and all(
        got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]) for k in want),
        "external initializers equal the inline ones")
    outs = []
    for i, path in enumerate((inline, ext)):
        od = os.path.join(tmp, f"tb_out{i}")
        run(f, "run", path, "--inputs", inputs, "--outputs", od)
        outs.append(read_outputs(od))
    check(outs[0].keys() == outs[1].keys() and all(
        np.array_equal(outs[0][k], outs[1][k]) for k in outs[0]),
        "the external-data model runs as the inline one")


def errors(f, ex, tmp):
    model = os.path.join(ex, "superres", "model.onnx")
    other = os.path.join(tmp, "other.plan.json")
    with open(other, "w") as fh:
        json.dump({"schema_version": 1, "precision": "float16", "fp32_nodes": ["/attn/Softmax"]},
                  fh)
    out = os.path.join(tmp, "never.onnx")
    fails(f, "plan for another model", ["convert", model, "--plan", other, "-o", out],
          "/attn/Softmax", "another model")
    check(not os.path.exists(out), "no output on error")
    bad = os.path.join(tmp, "bad.plan.json")
    with open(bad, "w") as fh:
        fh.write("{\"schema_version\": 1, \"fp32_nodes\": [")
    fails(f, "malformed plan", ["convert", model, "--plan", bad, "-o", out], "bad.plan.json")
    with open(bad, "w") as fh:
        json.dump({"schema_version": 1, "precision": "float16", "fp32_nodes": "x"}, fh)
    fails(f, "plan with a wrong field", ["convert", model, "--plan", bad, "-o", out], "fp32_nodes")
    with open(bad, "w") as fh:
        json.dump({"schema_version": 1, "precision": "float16", "fp32_nodes": []}, fh)
    fails(f, "precision against the plan", ["convert", model, "--plan", bad, "--precision", "bf16",
                                            "-o", out], "bfloat16")
    copy = os.path.join(tmp, "copy.onnx")
    shutil.copy(model, copy)
    before = open(copy, "rb").read()
    fails(f, "-o onto the input", ["convert", copy, "--precision", "fp16", "-o", copy], "-o")
    check(open(copy, "rb").read() == before, "the input is untouched")
    fails(f, "fp8 convert", ["convert", model, "--precision", "float8_e4m3fn", "-o", out],
          "float8_e4m3fn")
    fails(f, "no -o", ["convert", model, "--precision", "fp16"], "-o")
    fails(f, "unknown keep", ["convert", model, "--precision", "fp16", "--keep-fp32", "/Pwo", "-o",
                              out], "/Pwo")
    check(not os.path.exists(out), "still no output")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--ort-node", required=True,
                    help="onnxruntime-node's folder (scripts/setup BUILD: BUILD/ort-node)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        test_examples(a.fpguard, a.examples, tmp)
        crafted(a.fpguard, tmp)
        exact(a.fpguard, tmp)
        control_flow(a.fpguard, tmp)
        external_data(a.fpguard, a.examples, tmp)
        errors(a.fpguard, a.examples, tmp)
        in_onnx_runtime(a.fpguard, a.examples, a.ort_node, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all convert tests passed")


if __name__ == "__main__":
    main()
