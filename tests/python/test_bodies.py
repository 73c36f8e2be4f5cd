"""Nodes inside If/Loop bodies: Model.nodes lists them by the path names check and
keep_fp32 use, and Ctrl-C stops a check or a run stuck inside one long Loop node."""
import _thread
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fpguard


def loop_model(path, trips):
    """x -> Loop(trips){ y = Mul(Add(y, one), half) } -> If(cond){ Neg | Abs } -> z, with
    unnamed body nodes (numbered by their body's order) and one named one."""
    f = lambda name, dims=(4,): helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["y_in", "one"], ["s"]),
         helper.make_node("Mul", ["s", "half"], ["y_out"], name="scale")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), f("y_in")],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f("y_out")])
    then_g = helper.make_graph([helper.make_node("Neg", ["y"], ["t"])], "then", [], [f("t")])
    else_g = helper.make_graph([helper.make_node("Abs", ["y"], ["e"])], "else", [], [f("e")])
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body),
         helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero"], ["cond"]),
         helper.make_node("If", ["cond"], ["z"], name="branch", then_branch=then_g,
                          else_branch=else_g)],
        "loop", [f("x")], [f("z")],
        [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
         numpy_helper.from_array(np.array(1, np.float32), "one"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(0, np.float32), "zero")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_model_nodes_include_bodies_by_path(tmp_path):
    path = str(tmp_path / "m.onnx")
    loop_model(path, 3)
    m = fpguard.load(path)
    got = [(n.display_name, n.op_type, n.parent) for n in m.nodes]
    assert got == [
        ("Loop_0", "Loop", ""),
        ("Loop_0/body/Identity_0", "Identity", "Loop_0"),
        ("Loop_0/body/Add_1", "Add", "Loop_0"),
        ("Loop_0/body/scale", "Mul", "Loop_0"),
        ("ReduceSum_1", "ReduceSum", ""),
        ("Greater_2", "Greater", ""),
        ("branch", "If", ""),
        ("branch/else_branch/Abs_0", "Abs", "branch"),  # attributes in file order
        ("branch/then_branch/Neg_0", "Neg", "branch"),
    ]
    assert [n.name for n in m.nodes][:4] == ["", "", "", "scale"]
    # The names are check's: its diagnosis names the same nodes, and keep_fp32 takes them.
    d = fpguard.check(m, {"x": np.linspace(-1, 1, 4, dtype=np.float32)}, precision="float16",
                      keep_fp32=["Loop_0/body/Add_1"])
    assert sorted(n.name for n in d.nodes) == sorted(n.display_name for n in m.nodes)
    kept = {n.name: n for n in d.nodes}["Loop_0/body/Add_1"]
    assert kept.precision == "float32" and kept.runs == 3


def interrupted_after(call, delay=0.5):
    """Seconds `call` took when a Ctrl-C (SIGINT, as _thread.interrupt_main delivers it)
    came `delay` seconds in; it must raise KeyboardInterrupt."""
    timer = threading.Timer(delay, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    elapsed = time.monotonic() - t0
    timer.join()
    return elapsed


def test_ctrl_c_stops_a_long_loop(tmp_path):
    """One Loop node of 2^62 iterations (it would run for centuries): Ctrl-C stops check and
    run inside it, not when the Loop node ends. The bound is a watchdog, not a speed test
    (about 0.5 s when idle; 60 s only tells a stop from a hang on a loaded machine)."""
    path = str(tmp_path / "long.onnx")
    loop_model(path, 2**62)
    x = {"x": np.ones(4, np.float32)}
    assert 0.5 <= interrupted_after(lambda: fpguard.check(path, x)) < 60
    assert 0.5 <= interrupted_after(lambda: fpguard.run(path, x, precision="float16")) < 60
    loop_model(path, 2)
    assert fpguard.check(path, x).verdict == "pass"  # and the module still works
