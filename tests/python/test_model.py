"""fpguard.load, run, check, plan and convert: the model's view against the onnx package's,
runs against NumPy on a model built here, and check/plan/convert against the CLI on the
examples (the same JSON field by field, the same converted file byte for byte)."""
import _thread
import json
import os
import threading
import time

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import fpguard
from conftest import cli_error

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLES = [os.path.relpath(os.path.join(ROOT, "examples", e, "model.onnx"))
            for e in ("clean_cnn", "superres", "transformer_block")]


def error_of(f, *args, **kwargs):
    with pytest.raises(fpguard.Error) as e:
        f(*args, **kwargs)
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and "\n" not in msg and msg
    return msg


def onnx_dims(t):
    return tuple(d.dim_value if d.HasField("dim_value") else
                 (d.dim_param if d.HasField("dim_param") else None)
                 for d in t.tensor_type.shape.dim)


@pytest.mark.parametrize("path", EXAMPLES)
def test_load_is_the_onnx_view(path):
    m, g = fpguard.load(path), onnx.load(path).graph
    inits = {i.name for i in g.initializer}
    runtime = [v for v in g.input if v.name not in inits]
    assert m.path == path
    assert [v.name for v in m.inputs] == [v.name for v in runtime]
    assert [v.name for v in m.outputs] == [v.name for v in g.output]
    for ours, theirs in zip(m.inputs + m.outputs, runtime + list(g.output)):
        np_type = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[theirs.type.tensor_type.elem_type]
        assert ours.dtype == np.dtype(np_type).name and ours.kind == "tensor"
        assert ours.shape == onnx_dims(theirs.type)
    assert len(m.nodes) == len(g.node)
    for ours, theirs in zip(m.nodes, g.node):
        assert (ours.name, ours.op_type, ours.domain) == (theirs.name, theirs.op_type,
                                                          theirs.domain)
        assert ours.inputs == tuple(theirs.input) and ours.outputs == tuple(theirs.output)
        assert ours.display_name == theirs.name  # every example node is named


def small_model(path, batch="N"):
    """y = Relu(x @ W + b), z = ReduceSum(y, axis 1): built here, computed by NumPy."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "b"], ["pre"]),  # unnamed: Add_1
             helper.make_node("Relu", ["pre"], ["y"], name="relu"),
             helper.make_node("ReduceSum", ["y", "axes"], ["z"], name="sum", keepdims=0)]
    g = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w, b


def test_load_symbolic_dims_and_display_names(tmp_path):
    small_model(str(tmp_path / "m.onnx"))
    m = fpguard.load(tmp_path / "m.onnx")
    assert m.inputs == [fpguard.ValueInfo("x", "float32", ("N", 8), "tensor")]
    assert [n.display_name for n in m.nodes] == ["mm", "Add_1", "relu", "sum"]
    assert m.nodes[1].name == ""


def test_run_against_numpy(tmp_path):
    path = str(tmp_path / "m.onnx")
    w, b = small_model(path)
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    y = np.maximum(x.astype(np.float64) @ w + b, 0)
    out = fpguard.run(fpguard.load(path), {"x": x})
    assert list(out) == ["y", "z"] and out["y"].dtype == np.float32
    np.testing.assert_allclose(out["y"], y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["z"], y.sum(axis=1), rtol=1e-5, atol=1e-5)
    # A CPU torch tensor, and a path for the model.
    t = fpguard.run(path, {"x": torch.from_numpy(x)})
    assert np.array_equal(t["y"], out["y"])
    # float16 emulation: inputs, weights and each node's output rounded to float16.
    h = lambda a: a.astype(np.float16).astype(np.float64)
    yh = h(np.maximum(h(h(h(x) @ h(w)) + h(b)), 0))
    got = fpguard.run(path, {"x": x}, precision="float16")["y"]
    np.testing.assert_allclose(got, yh, rtol=2 ** -10, atol=0)
    assert np.array_equal(h(got), got)  # values of float16
    # keep_fp32 of every node: the float32 run again.
    kept = fpguard.run(path, {"x": x}, precision=torch.float16,
                       keep_fp32_ops=["MatMul", "Add", "Relu", "ReduceSum"])
    assert np.array_equal(kept["y"], out["y"])


def test_run_errors_as_the_cli(cli, tmp_path):
    path = str(tmp_path / "m.onnx")
    small_model(path, batch=5)
    x = np.ones((5, 8), np.float32)
    np.save(tmp_path / "x.npy", x)
    for bad in (np.ones((5, 7), np.float32), np.ones(40, np.float32)):
        np.save(tmp_path / "f.npy", bad)
        want = cli_error(cli("run", path, "--input", f"x={tmp_path / 'f.npy'}", check=False))
        assert error_of(fpguard.run, path, {"x": bad}) == want
    want = cli_error(cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--input",
                         f"xx={tmp_path / 'x.npy'}", check=False))
    # The CLI names the flag where Python names the model; the rest is the same.
    assert want.startswith("--input xx=")
    assert error_of(fpguard.run, path, {"x": x, "xx": x}) == \
        f"{path}: " + want.split(": ", 1)[1]
    # The CLI converts a file's dtype to the declared one; arrays are taken as they are.
    assert error_of(fpguard.run, path, {"x": x.astype(np.float64)}) == \
        f"{path}: input 'x': has dtype float64 but the model declares float32"
    assert error_of(fpguard.run, path, {}) == f"{path}: input 'x' was not given"
    assert error_of(fpguard.run, path, {"x": x}, precision="flaot16") == \
        "format 'flaot16': unknown format; did you mean 'float16'?"
    assert error_of(fpguard.run, path, {"x": x.astype(object)}).startswith(
        "input 'x': dtype object is not supported")
    assert error_of(fpguard.run, path, [x]) == "inputs: a list is not a dict of arrays"
    assert error_of(fpguard.run, path, {"x": object()}) == "input 'x': dtype object is not supported"
    # A list is read by numpy.asarray: float64, not the declared float32.
    assert error_of(fpguard.run, path, {"x": x.tolist()}) == \
        f"{path}: input 'x': has dtype float64 but the model declares float32"
    assert error_of(fpguard.load, tmp_path / "none.onnx") == \
        cli_error(cli("run", str(tmp_path / "none.onnx"), check=False))


def example_inputs(path):
    d = os.path.join(os.path.dirname(path), "inputs")
    return d, {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}


@pytest.mark.parametrize("path", EXAMPLES)
def test_check_is_the_cli(cli, path):
    want = json.loads(cli("check", path, "--precision", "float16", "--json", "-",
                          check=False).stdout)
    got = fpguard.check(path)  # generated inputs, as the CLI's
    assert got.to_dict() == want
    assert got.verdict == want["verdict"] and json.loads(got.to_json()) == want
    assert [o.cosine for o in got.outputs] == [o["cosine"] for o in want["outputs"]]
    d, feed = example_inputs(path)
    want = json.loads(cli("check", path, "--precision", "bfloat16", "--inputs", d,
                          "--keep-fp32", got.nodes[0].name, "--json", "-", check=False).stdout)
    got = fpguard.check(fpguard.load(path), [feed], precision="bfloat16",
                        keep_fp32=[got.nodes[0].name])
    assert got.to_dict() == want


def test_check_origins_and_html(cli, tmp_path):
    path = EXAMPLES[2]
    want = json.loads(cli("check", path, "--precision", "float8_e4m3fn", "--samples", "2",
                          "--seed", "3", "--json", "-", check=False).stdout)
    got = fpguard.check(path, precision="float8_e4m3fn", samples=2, seed=3)
    assert got.to_dict() == want and got.verdict == "fail" and got.rules
    r = got.rules[0]
    assert r.to_dict() == want["rules"][0] and r.id == want["rules"][0]["id"]
    got.html(tmp_path / "r.html")
    cli("check", path, "--precision", "float8_e4m3fn", "--samples", "2", "--seed", "3",
        "--html", str(tmp_path / "c.html"), "--quiet", check=False)
    assert (tmp_path / "r.html").read_bytes() == (tmp_path / "c.html").read_bytes()
    assert error_of(got.html, path).startswith("path: ")


@pytest.mark.parametrize("path,precision", [(EXAMPLES[1], "float16"),
                                            (EXAMPLES[2], "float8_e4m3fn")])
def test_plan_is_the_cli(cli, tmp_path, path, precision):
    cli("plan", path, "--precision", precision, "-o", str(tmp_path / "cli.json"), "--quiet",
        check=False)
    p = fpguard.plan(path, precision=precision)
    p.save(tmp_path / "py.json")
    assert (tmp_path / "py.json").read_text() == (tmp_path / "cli.json").read_text()
    assert p.to_dict() == json.loads((tmp_path / "cli.json").read_text())
    assert p.fp32_nodes == p.to_dict()["fp32_nodes"]


def test_convert_is_the_cli(cli, tmp_path):
    path = EXAMPLES[2]
    keep = ["/ln1/Sqrt", "/attn/Softmax"]
    cli("plan", path, "--precision", "float16", "--keep-fp32", ",".join(keep), "-o",
        str(tmp_path / "plan.json"), "--quiet")
    text = cli("convert", path, "--plan", str(tmp_path / "plan.json"), "--keep-io-types", "-o",
               str(tmp_path / "cli.onnx")).stdout
    p = fpguard.plan(path, precision="float16", keep_fp32=keep)
    r = fpguard.convert(path, p, tmp_path / "py.onnx")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    assert r["precision"] == "float16" and r["fp32_nodes"] >= len(keep) and r["casts"] > 0
    # The verification: the CLI's numbers, on the inputs the plan records.
    (v,) = r["verified"]
    assert r["pass"] is True and v["pass"] is True and v["nonfinite"] == 0
    assert (f"  verified {v['output']}: ok   vs the float32 model: cosine {v['cosine']:.6f}, "
            f"max abs error {v['max_abs_error']:.4g}\n") in text
    # Against run on both models, on given inputs: the same cosine.
    _, feed = example_inputs(path)
    r = fpguard.convert(path, p, tmp_path / "py3.onnx", inputs=feed)
    want = fpguard.run(path, feed)["hidden"].astype(np.float64).ravel()
    got = fpguard.run(tmp_path / "py3.onnx", feed)["hidden"].astype(np.float64).ravel()
    cosine = want @ got / np.sqrt((want @ want) * (got @ got))
    assert abs(r["verified"][0]["cosine"] - cosine) < 1e-9
    assert fpguard.convert(path, p, tmp_path / "py4.onnx", verify=False)["pass"] is None
    # From the plan file, and without keep_io_types.
    fpguard.convert(path, tmp_path / "plan.json", tmp_path / "py2.onnx", keep_io_types=False)
    cli("convert", path, "--plan", str(tmp_path / "plan.json"), "-o", str(tmp_path / "c2.onnx"))
    assert (tmp_path / "py2.onnx").read_bytes() == (tmp_path / "c2.onnx").read_bytes()


def test_check_plan_convert_errors(cli, tmp_path):
    path = EXAMPLES[0]
    m = fpguard.load(path)
    assert error_of(fpguard.check, m, precision="flaot16") == \
        cli_error(cli("check", path, "--precision", "flaot16", check=False))
    assert error_of(fpguard.check, m, reference="float8") == \
        "reference float8: expected float32 or float64"
    assert error_of(fpguard.check, m, fail_on=["overflw"]) == \
        cli_error(cli("check", path, "--precision", "float16", "--fail-on", "overflw",
                      check=False)).replace("--fail-on", "fail_on")
    assert error_of(fpguard.check, m, {"image": np.ones((1, 3, 32, 32))}).endswith(
        "input 'image': has dtype float64 but the model declares float32")
    assert error_of(fpguard.check, m, [{}]) == f"{path}: input 'image' was not given"
    assert error_of(fpguard.check, m, []) == "inputs: no input set given"
    assert error_of(fpguard.check, m, {}, samples=2) == "samples 2: applies to generated " \
        "inputs (inputs=None); give a list of input sets instead"
    assert error_of(fpguard.plan, m, precision="float32") == \
        "precision float32: nothing to plan: it is float32"
    assert error_of(fpguard.plan, m, objective="fewest") == \
        "objective fewest: expected fewest-fp32 or fewest-casts"
    before = open(path, "rb").read()
    assert error_of(fpguard.convert, m, None, path, precision="float16").startswith("out_path")
    assert open(path, "rb").read() == before
    out = tmp_path / "o.onnx"
    assert error_of(fpguard.convert, m, None, out) == \
        "precision: give float16 or bfloat16 (or a plan)"
    p8 = fpguard.plan(m, precision="float8_e4m3fn")
    assert error_of(fpguard.convert, m, p8, out).startswith(
        "plan: the plan is for float8_e4m3fn, which convert does not write")
    p16 = fpguard.plan(m, precision="float16", keep_fp32=["/fc/Gemm"])
    assert error_of(fpguard.convert, m, p16, out, precision="bfloat16") == \
        "plan: the plan is for float16, not bfloat16"
    assert error_of(p16.save, path).startswith("path: ")
    assert error_of(fpguard.convert, m, p16, out, inputs={"image": np.ones(3)}).endswith(
        "input 'image': has dtype float64 but the model declares float32")
    assert error_of(fpguard.convert, EXAMPLES[1], p16, out) == \
        f"plan: node '/fc/Gemm' is not in {EXAMPLES[1]} (a plan for another model?)"
    assert not out.exists() and os.listdir(tmp_path) == []


def test_ctrl_c_stops_a_long_check():
    """A check of 10^6 input sets would take hours; Ctrl-C (a SIGINT as
    _thread.interrupt_main delivers it) stops it. The bound is a watchdog, not a speed test
    (well under a second when idle; 60 s only tells a stop from a hang under load)."""
    m = fpguard.load(EXAMPLES[2])
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        fpguard.check(m, samples=1_000_000)
    elapsed = time.monotonic() - t0
    timer.join()
    assert 0.5 <= elapsed < 60, elapsed
    assert fpguard.check(m).verdict == "pass"  # and the module still works


def test_stubs_and_all_name_what_exists():
    """_fpguard.pyi declares exactly the extension's functions and classes, and every name
    of fpguard.__all__ exists."""
    import ast
    from fpguard import _fpguard

    stub = os.path.join(os.path.dirname(fpguard.__file__), "_fpguard.pyi")
    tree = ast.parse(open(stub, encoding="utf-8").read())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert declared == {n for n in dir(_fpguard) if not n.startswith("__")}
    assert all(hasattr(fpguard, n) for n in fpguard.__all__)
