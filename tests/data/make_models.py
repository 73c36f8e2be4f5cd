#!/usr/bin/python3
"""Writes the small ONNX models (and their NumPy references) that tests/model_test.cpp,
tests/exec_test.cpp and the `fpguard run` CLI tests use, into OUT_DIR. Run with Debian's
/usr/bin/python3 (numpy, onnx 1.12). The checker is not run on models meant to be bad.

Usage: make_models.py OUT_DIR |
       make_models.py --check MODEL.onnx [--same-as REF.onnx] [--all-external]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="fpguard-tests")
    m.ir_version = 8
    return m


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)

    # mlp: MatMul + Add + Relu + Gemm, with a NumPy reference.
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal((8,)).astype(np.float32)
    w2 = rng.standard_normal((3, 8)).astype(np.float32)
    b2 = rng.standard_normal((3,)).astype(np.float32)
    m = model([
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu1"),
        helper.make_node("Gemm", ["h2", "w2", "b2"], ["y"], name="gemm2", transB=1, alpha=1.0),
    ], [vi("x", [2, 4])], [vi("y", [2, 3])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "mlp.onnx"))
    x = rng.standard_normal((2, 4)).astype(np.float32)
    y = np.maximum(x @ w1 + b1, 0) @ w2.T + b2
    np.save(os.path.join(out, "mlp_x.npy"), x)
    np.save(os.path.join(out, "mlp_y.npy"), y.astype(np.float32))

    # pow_mean_sqrt: RMS of x; x^2 overflows float16 for |x| > 256.
    m = model([
        helper.make_node("Pow", ["x", "two"], ["sq"], name="pow"),
        helper.make_node("ReduceMean", ["sq"], ["ms"], name="mean", axes=[1], keepdims=1),
        helper.make_node("Sqrt", ["ms"], ["y"], name="sqrt"),
    ], [vi("x", [1, 4])], [vi("y", [1, 1])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "pow_mean_sqrt.onnx"))

    # shared_weight: one weight read by two MatMuls (rounded once), then a Reshape.
    w = np.array([[1.0001, 2.0], [3.0, 0.1]], np.float32)
    m = model([
        helper.make_node("MatMul", ["x", "w"], ["a"], name="mm_a"),
        helper.make_node("MatMul", ["a", "w"], ["b"], name="mm_b"),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
    ], [vi("x", [2, 2])], [vi("b", [2, 2]), vi("r", [4])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([4], np.int64), "shape")])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "shared_weight.onnx"))

    # half: a float16 model (inputs, weights and outputs in float16).
    m = model([
        helper.make_node("Add", ["x", "c"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "s"], ["y"], name="square"),
    ], [vi("x", [3], TensorProto.FLOAT16)], [vi("y", [3], TensorProto.FLOAT16)],
        [numpy_helper.from_array(np.array([1, 2, 300], np.float16), "c")])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "half.onnx"))

    # cast_boundary: Casts are precision boundaries, never rounded to the node's format.
    m = model([
        helper.make_node("Cast", ["x"], ["x32"], name="to32", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["x16"], name="to16", to=TensorProto.FLOAT16),
    ], [vi("x", [1])], [vi("x32", [1]), vi("x16", [1], TensorProto.FLOAT16)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "cast_boundary.onnx"))

    # dynamic: a dim_param input for --shape.
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [vi("x", ["batch", 3])], [vi("y", ["batch", 3])])
    onnx.save(m, os.path.join(out, "dynamic.onnx"))

    # external: an initializer stored in weights.bin beside the model.
    m = model([helper.make_node("Add", ["x", "ext"], ["y"], name="add")],
              [vi("x", [64])], [vi("y", [64])],
              [numpy_helper.from_array(np.arange(64, dtype=np.float32), "ext")])
    onnx.save_model(m, os.path.join(out, "external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    # escaping: the same with a location outside the model's directory (refused).
    for t in m.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "../escape.bin"
    onnx.save(m, os.path.join(out, "escaping.onnx"))

    # subgraph: If whose branches read an outer value; opset 21 (newer than libonnx).
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"], name="then_add")],
                               "then", [], [vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                               "else", [], [vi("e", [2])])
    m = model([
        helper.make_node("Relu", ["x0"], ["x"], name="relu"),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ], [vi("x0", [2]), vi("c", [], TensorProto.BOOL)], [vi("y", [2])], opset=21)
    onnx.save(m, os.path.join(out, "subgraph.onnx"))

    # attrs: every attribute kind, for the round trip (never run).
    m = model([helper.make_node(
        "Custom", ["x"], ["y"], name="custom", domain="",
        f=1.5, i=-3, s=b"text", t=numpy_helper.from_array(np.array([1, 2], np.int32)),
        floats=[1.0, 2.5], ints=[1, 2, 3], strings=[b"a", b"b"],
        tensors=[numpy_helper.from_array(np.array([1.5], np.float16))])],
        [vi("x", [1])], [vi("y", [1])])
    onnx.save(m, os.path.join(out, "attrs.onnx"))

    # bad models.
    m = model([helper.make_node("Relu", ["b"], ["a"], name="first"),
               helper.make_node("Relu", ["a"], ["b"], name="second")],
              [vi("x", [1])], [vi("a", [1])])
    onnx.save(m, os.path.join(out, "cycle.onnx"))
    m = model([helper.make_node("Relu", ["nowhere"], ["y"], name="lost")],
              [vi("x", [1])], [vi("y", [1])])
    onnx.save(m, os.path.join(out, "missing_input.onnx"))
    m = model([helper.make_node("NotAnOp", ["x"], ["a"], name="n1"),
               helper.make_node("Relu", ["a"], ["b"], name="n2"),
               helper.make_node("AlsoNotAnOp", ["b"], ["y"], name="n3")],
              [vi("x", [1])], [vi("y", [1])])
    onnx.save(m, os.path.join(out, "unsupported.onnx"))
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")],
              [vi("x", [1])], [vi("y", [1])], opset=5)
    onnx.save(m, os.path.join(out, "opset5.onnx"))
    # Opset 6: Relu-6 and Abs-6 are the definitions still in force at opset 7.
    m = model([helper.make_node("Relu", ["x"], ["a"], name="r"),
               helper.make_node("Abs", ["a"], ["y"], name="abs")],
              [vi("x", [1])], [vi("y", [1])], opset=6)
    onnx.save(m, os.path.join(out, "opset6.onnx"))

    # values: a sequence input and an optional input; outputs a sequence (x appended to s),
    # its concatenation, and the optional passed through (the CLI's value I/O).
    seq_f = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    opt_f = helper.make_value_info(
        "o", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    m = model([helper.make_node("SequenceInsert", ["s", "x"], ["s2"], name="append"),
               helper.make_node("ConcatFromSequence", ["s2"], ["y"], name="concat", axis=0),
               helper.make_node("Identity", ["o"], ["o2"], name="same")],
              [seq_f, vi("x", [2]), opt_f],
              [helper.make_tensor_sequence_value_info("s2", TensorProto.FLOAT, None), vi("y", [None]),
               helper.make_value_info("o2", opt_f.type)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "values.onnx"))
    seq = onnx.numpy_helper.from_list([np.array([1, 2], np.float32), np.array([3], np.float32)], "s")
    with open(os.path.join(out, "values_s.pb"), "wb") as f:
        f.write(seq.SerializeToString())
    with open(os.path.join(out, "values_o_none.pb"), "wb") as f:
        f.write(onnx.numpy_helper.from_optional(None, "o").SerializeToString())
    with open(os.path.join(out, "values_o_seq.pb"), "wb") as f:
        f.write(onnx.numpy_helper.from_optional([np.array([5], np.float32)], "o").SerializeToString())
    np.save(os.path.join(out, "values_x.npy"), np.array([4, 5], np.float32))

    # to_text: float32 -> STRING (outputs as NumPy unicode arrays).
    m = model([helper.make_node("Cast", ["x"], ["y"], name="text", to=TensorProto.STRING)],
              [vi("x", [3])], [vi("y", [3], TensorProto.STRING)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "to_text.onnx"))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--check":
        # onnx.load reads external data itself: an independent reader of fpguard's files.
        m = onnx.load(sys.argv[2])
        onnx.checker.check_model(m)
        rest = sys.argv[3:]
        if "--same-as" in rest:
            ref = onnx.load(rest[rest.index("--same-as") + 1])
            got = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
            want = {t.name: numpy_helper.to_array(t) for t in ref.graph.initializer}
            if got.keys() != want.keys() or any(
                    got[k].dtype != want[k].dtype or not np.array_equal(got[k], want[k])
                    for k in want):
                sys.exit("initializers differ from the reference")
        if "--all-external" in rest:
            raw = onnx.load(sys.argv[2], load_external_data=False)
            if any(t.data_location != TensorProto.EXTERNAL or t.raw_data
                   for t in raw.graph.initializer):
                sys.exit("an initializer is stored inline")
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
