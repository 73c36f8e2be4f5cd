#!/usr/bin/python3
"""Sequence and optional graph inputs and outputs in check, plan, convert and merge
(docs/check.md, "Sequence and optional outputs"; docs/convert.md), on models built here with
onnx and on the ONNX node tests that have them (Debian's libonnx-testdata):

- a sequence output [x + 1, x * 300, x - 1] and an optional output holding x + 1: in float16
  only `seq[1]` fails, with NumPy's count of values that overflow, and the origin is the
  Mul; the other elements and the optional pass; text, JSON and HTML name `seq[1]`; in
  bfloat16 everything passes;
- a Loop that appends its accumulator to a sequence while it is finite: in float16 the
  accumulator overflows and the loop stops early, so the sequence is shorter than the
  reference's (lengths from NumPy's float16 loop): a FAIL whose reason (the lengths, the
  input set, how many sets) the text, JSON and HTML give, the Add at the iteration NumPy
  finds its origin; check over the sets equals the merge of `check --shard` parts (the
  elements and the mismatch survive the part files);
- plan + convert on these and on the node tests with sequence or optional inputs or
  outputs (test_if_seq, test_if_opt, test_loop13_seq, test_loop16_seq_none,
  test_sequence_map_*), float16 and bfloat16: the converted models pass onnx.checker's full
  check and convert's verification; in float16, `check --reference-model` compares each
  output element of the converted model with the original's, and they run in ONNX Runtime (onnxruntime-node,
  which takes and gives tensors only: a wrapper model builds the sequence and optional
  inputs from tensors and takes each output element apart), whose outputs equal
  `fpguard run`'s of the converted model within float16's tolerance (ortcheck.py).

    sequence_test.py --fpguard PATH --ort-node DIR
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
import ortcheck  # noqa: E402
from clitest import check, finish, read_outputs, run  # noqa: E402
from control_flow_test import checked, inputs_dir, node  # noqa: E402
from shard_test import agree_on  # noqa: E402

NODE_TESTS = "/usr/share/libonnx-testdata/data/node"  # Debian's libonnx-testdata
WITH_VALUES = ("test_if_seq", "test_if_opt", "test_loop13_seq", "test_loop16_seq_none")


def elem_type(dtype):
    """The ONNX element type of a NumPy dtype."""
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]


def save(graph, path, opset=15):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def seq_model(tmp):
    """seq = [x + 1, x * 300, x - 1], opt = Optional(x + 1)."""
    F = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", F, [4])
    seq = helper.make_tensor_sequence_value_info("seq", F, [4])
    opt = helper.make_value_info("opt", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(F, [4])))
    inits = [numpy_helper.from_array(np.float32(1), "one"),
             numpy_helper.from_array(np.float32(300), "w")]
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["x", "w"], ["b"], name="scale"),
             helper.make_node("Sub", ["x", "one"], ["c"], name="sub"),
             helper.make_node("SequenceConstruct", ["a", "b", "c"], ["seq"], name="pack"),
             helper.make_node("Optional", ["a"], ["opt"], name="wrap")]
    path = os.path.join(tmp, "seq.onnx")
    save(helper.make_graph(nodes, "g", [x], [seq, opt], inits), path)
    xs = np.array([1, 100, 250, 300], np.float32)  # exact in float16
    return path, inputs_dir(tmp, "seq_in", x=xs), xs


def test_sequence_output(f, tmp):
    path, inputs, xs = seq_model(tmp)
    html = os.path.join(tmp, "seq.html")
    r, j = checked(f, tmp, path, inputs, "--html", html)
    want = int(np.sum(np.isinf(np.float16(xs * np.float32(300)))))  # NumPy's float16 Mul
    if j:
        outs = {o["name"]: o for o in j["outputs"]}
        s = outs.get("seq", {})
        names = [e["name"] for e in s.get("elements", [])]
        check(names == ["seq[0]", "seq[1]", "seq[2]"], "seq: its elements by path", names)
        check([e["pass"] for e in s.get("elements", [])] == [True, False, True],
              "seq fp16: only seq[1] fails", s.get("elements"))
        if len(names) == 3:
            check(s["elements"][1]["nonfinite"] == want and s["nonfinite"] == want,
                  "seq fp16: seq[1]'s non-finite count is NumPy's", (s["elements"][1], want))
        check(j["verdict"] == "fail" and not s.get("pass") and s.get("mismatch") is None,
              "seq fp16: the output fails, with no mismatch", (j["verdict"], s))
        check(outs.get("opt", {}).get("pass") is True and outs["opt"]["elements"] == [],
              "seq fp16: the optional output (present in both) passes", outs.get("opt"))
        check([o["node"] for o in j["origins"]] == ["scale"], "seq fp16: the Mul is the origin",
              j["origins"])
        lines = r.stdout.splitlines()
        check(any("FAIL" in ln and "seq[1]:" in ln for ln in lines) and
              any("seq[0]:" in ln and "FAIL" not in ln for ln in lines),
              "seq fp16: the text names the failing element", r.stdout[:900])
        check(os.path.exists(html) and "seq[1]" in open(html).read(), "seq fp16: the HTML names it")
    r, j = checked(f, tmp, path, inputs, precision="bfloat16")
    check(j is not None and j["verdict"] == "pass", "seq bf16 passes", r.stdout[-600:])
    return path, inputs


def grow_model(tmp):
    """acc, seq = Loop(10, acc = 0, seq = []) { acc += x; seq.append(acc); go on while acc
    is finite }."""
    F = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", F, [1])
    b_in = [helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", F, [1]),
            helper.make_tensor_sequence_value_info("seq_in", F, [1])]
    b_out = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [1]),
             helper.make_tensor_value_info("acc_out", F, [1]),
             helper.make_tensor_sequence_value_info("seq_out", F, [1])]
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="acc_add"),
         helper.make_node("SequenceInsert", ["seq_in", "acc_out"], ["seq_out"], name="append"),
         helper.make_node("IsInf", ["acc_out"], ["inf"], name="inf"),
         helper.make_node("Not", ["inf"], ["cond_out"], name="finite")], "body", b_in, b_out)
    inits = [numpy_helper.from_array(np.array(10, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(np.zeros(1, np.float32), "acc0")]
    nodes = [helper.make_node("SequenceEmpty", [], ["seq0"], name="empty"),
             helper.make_node("Loop", ["trips", "go", "acc0", "seq0"], ["acc", "seq"],
                              name="grow", body=body)]
    path = os.path.join(tmp, "grow.onnx")
    save(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("acc", F, [1]),
                                             helper.make_tensor_sequence_value_info("seq", F, [1])],
                           inits), path)
    return path


def grow_lengths(step, dtype):
    """NumPy's loop: the sequence's length and the first iteration that overflowed (None)."""
    acc, n = dtype(0), 0
    for i in range(10):
        acc = dtype(np.float32(acc) + np.float32(step))
        n += 1
        if np.isinf(acc):
            return n, i
    return n, None


def test_length_mismatch(f, tmp):
    path = grow_model(tmp)
    steps = [1000.0, 10000.0, 5000.0, 20000.0]  # sets 1 and 3 overflow float16
    sets = os.path.join(tmp, "grow_sets")
    for k, step in enumerate(steps):
        inputs_dir(sets, f"set_{k}", x=np.array([step], np.float32))
    lengths = [(grow_lengths(s, np.float32)[0], grow_lengths(s, np.float16)[0]) for s in steps]
    differ = [k for k, (a, b) in enumerate(lengths) if a != b]
    first = differ[0]
    html = os.path.join(tmp, "grow.html")
    r, j = checked(f, tmp, path, sets, "--html", html)
    if j:
        s = next((o for o in j["outputs"] if o["name"] == "seq"), {})
        mm = s.get("mismatch") or {}
        check(s.get("pass") is False and s.get("mismatched_sets") == len(differ),
              "grow fp16: the sequence fails in the sets NumPy finds", (s, differ))
        check(mm.get("set") == first and mm.get("reference") == {"kind": "sequence",
                                                                  "length": lengths[first][0]}
              and mm.get("emulated") == {"kind": "sequence", "length": lengths[first][1]},
              "grow fp16: the first mismatch, NumPy's lengths", (mm, lengths))
        check(len(s.get("elements", [])) == max(a for a, _ in lengths),
              "grow fp16: an element per position", len(s.get("elements", [])))
        want = (f"the emulated run gives a sequence of {lengths[first][1]} where the reference "
                f"gives a sequence of {lengths[first][0]}")
        check(want in mm.get("message", ""), "grow fp16: the JSON words it", mm)
        lines = [ln for ln in r.stdout.splitlines() if "its kind or length differs" in ln]
        check(len(lines) == 1 and want in lines[0] and f"input set {first}" in lines[0],
              "grow fp16: one text line gives the reason", r.stdout[:1200])
        check(os.path.exists(html) and want in open(html).read(), "grow fp16: the HTML gives it")
        k = grow_lengths(steps[first], np.float16)[1]
        got = [(o["node"], o.get("iteration")) for o in j["origins"]]
        check(("grow/body/acc_add", [k]) in got, f"grow fp16: the Add is an origin at iteration {k}",
              got)
        n = node(j, "grow/body/append")
        check(n is not None and n["parent"] == "grow", "grow: the body's sequence node is recorded",
              n)
    # The elements and the mismatch survive the part files of a sharded check.
    if j:
        agree_on(f, tmp, path, sets, "grow", ["--precision", "float16"], "fail", count=len(steps))
    return path, sets


def read_pb_inputs(model, data_dir):
    """The test_data_set's inputs by graph input: arrays, lists of arrays (sequences), None
    (an empty optional)."""
    out = {}
    for i, vi in enumerate(model.graph.input):
        raw = open(os.path.join(data_dir, f"input_{i}.pb"), "rb").read()
        t = vi.type
        if t.HasField("sequence_type"):
            p = onnx.SequenceProto()
            p.ParseFromString(raw)
            out[vi.name] = numpy_helper.to_list(p)
        elif t.HasField("optional_type"):
            p = onnx.OptionalProto()
            p.ParseFromString(raw)
            out[vi.name] = numpy_helper.to_optional(p)
        else:
            p = onnx.TensorProto()
            p.ParseFromString(raw)
            out[vi.name] = numpy_helper.to_array(p)
    return out


def wrapped(model, values, outputs, path):
    """`model` with tensor inputs and outputs only, for ONNX Runtime for Node.js: each
    sequence or optional input built from tensors `name__k`, each output element taken out
    as `name__k` (a tensor or optional tensor as `name`; an empty optional as its
    OptionalHasElement). `values`: the inputs; `outputs`: fpguard's outputs (their
    lengths). Returns the feeds and the names of fpguard's outputs as flattened."""
    g = model.graph
    first, last, feeds, flat = [], [], {}, {}
    new_inputs = []
    for vi in g.input:
        v = values[vi.name]
        if vi.type.HasField("tensor_type"):
            new_inputs.append(vi)
            feeds[vi.name] = v
            continue
        seq_name = vi.name if vi.type.HasField("sequence_type") else vi.name + "__seq"
        if v is None:
            first.append(helper.make_node("Optional", [], [vi.name],
                                          type=vi.type.optional_type.elem_type))
            continue
        items = v if isinstance(v, list) else None
        if items is None:  # an optional tensor
            new_inputs.append(helper.make_tensor_value_info(
                vi.name + "__t", elem_type(v.dtype), list(v.shape)))
            feeds[vi.name + "__t"] = v
            first.append(helper.make_node("Optional", [vi.name + "__t"], [vi.name]))
            continue
        names = []
        for k, a in enumerate(items):
            names.append(f"{vi.name}__{k}")
            new_inputs.append(helper.make_tensor_value_info(
                names[-1], elem_type(a.dtype), list(a.shape)))
            feeds[names[-1]] = a
        first.append(helper.make_node("SequenceConstruct", names, [seq_name]) if names else
                     helper.make_node("SequenceEmpty", [], [seq_name]))
        if seq_name != vi.name:
            first.append(helper.make_node("Optional", [seq_name], [vi.name]))
    new_outputs = []
    for vo in g.output:
        v = outputs[vo.name]
        src = vo.name
        if vo.type.HasField("optional_type"):
            if v is None:
                last.append(helper.make_node("OptionalHasElement", [src], [vo.name + "__has"]))
                new_outputs.append(helper.make_tensor_value_info(vo.name + "__has",
                                                                 TensorProto.BOOL, []))
                flat[vo.name + "__has"] = np.array(False)
                continue
            src = vo.name + "__got"
            last.append(helper.make_node("OptionalGetElement", [vo.name], [src]))
        if isinstance(v, list):
            for k, a in enumerate(v):
                name = f"{vo.name}__{k}"
                pos = vo.name + f"__at{k}"
                last.append(helper.make_node("Constant", [], [pos],
                                             value=numpy_helper.from_array(np.array(k, np.int64))))
                last.append(helper.make_node("SequenceAt", [src, pos], [name]))
                new_outputs.append(helper.make_tensor_value_info(
                    name, elem_type(a.dtype), None))
                flat[name] = a
        else:
            name = vo.name + "__t"
            last.append(helper.make_node("Identity", [src], [name]))
            new_outputs.append(helper.make_tensor_value_info(
                name, elem_type(v.dtype), None))
            flat[name] = v
    nodes = first + list(g.node) + last
    graph = helper.make_graph(nodes, g.name, new_inputs, new_outputs, list(g.initializer))
    m = helper.make_model(graph, opset_imports=list(model.opset_import))
    m.ir_version = model.ir_version
    onnx.save(m, path)
    return feeds, flat


def plan_convert(f, tmp, tag, path, inputs, precision, ort_dir):
    """plan + convert: a model onnx.checker accepts, that convert verifies; in float16, ONNX
    Runtime's outputs equal fpguard's."""
    plan = os.path.join(tmp, f"{tag}.{precision}.plan.json")
    r = run(f, "plan", path, "--inputs", inputs, "--precision", precision, "-o", plan, "--quiet")
    check(r.returncode == 0, f"{tag} {precision}: plan", (r.stdout[-600:], r.stderr))
    if r.returncode != 0:
        return
    out = os.path.join(tmp, f"{tag}.{precision}.onnx")
    r = run(f, "convert", path, "--plan", plan, "--keep-io-types", "--inputs", inputs, "-o", out)
    check(r.returncode == 0 and "FAIL" not in r.stdout, f"{tag} {precision}: convert verifies",
          (r.returncode, r.stdout[-800:], r.stderr))
    if r.returncode != 0:
        return
    m = onnx.load(out)
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001 - any checker failure is the finding
        check(False, f"{tag} {precision}: the converted model passes onnx.checker", e)
    if precision != "float16" or not ort_dir:
        return
    got = os.path.join(tmp, f"{tag}.out")
    r = run(f, "run", out, "--inputs", inputs, "--outputs", got)
    check(r.returncode == 0, f"{tag}: run the converted model", r.stderr)
    if r.returncode != 0:
        return
    if os.path.isdir(inputs) and any(n.endswith(".pb") for n in os.listdir(inputs)):
        values = read_pb_inputs(m, inputs)
    else:
        values = {n[:-4]: np.load(os.path.join(inputs, n)) for n in os.listdir(inputs)}
    # Checked against the original (--reference-model): a verdict per output element.
    outs = read_outputs(got)
    rj = os.path.join(tmp, f"{tag}.reference.json")
    r = run(f, "check", out, "--reference-model", path, "--inputs", inputs, "--precision",
            precision, "--json", rj, "--quiet")
    check(r.returncode in (0, 1), f"{tag}: check --reference-model runs", r.stderr)
    if r.returncode in (0, 1):
        with open(rj) as fh:
            elements = {o["name"]: len(o["elements"]) for o in json.load(fh)["outputs"]}
        want = {k: len(v) if isinstance(v, list) else 0 for k, v in outs.items()}
        check(elements == want, f"{tag}: check --reference-model compares each element",
              (elements, want))
    harness = os.path.join(tmp, f"{tag}.ort.onnx")
    feeds, ours = wrapped(m, values, outs, harness)
    theirs = ortcheck.run_ort(ort_dir, harness, feeds, tmp)
    if theirs is not None:
        ortcheck.compare(f"{tag} in ONNX Runtime", ours, theirs, "fp16")


def node_tests():
    names = sorted(d for d in os.listdir(NODE_TESTS)
                   if d in WITH_VALUES or d.startswith("test_sequence_map"))
    check(len(names) >= 14, "the node tests with sequence or optional inputs or outputs", names)
    return names


def main():
    np.seterr(over="ignore")  # the float16 loops overflow on purpose
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--ort-node", required=True)
    a = ap.parse_args()
    f = a.fpguard
    ort = ortcheck.available(a.ort_node)
    with tempfile.TemporaryDirectory() as tmp:
        for t in ("seq", "grow", "node"):
            os.makedirs(os.path.join(tmp, t))
        seq = test_sequence_output(f, os.path.join(tmp, "seq"))
        grow = test_length_mismatch(f, os.path.join(tmp, "grow"))
        runs = [("seq", *seq), ("grow", grow[0], os.path.join(grow[1], "set_1"))]
        runs += [(n, os.path.join(NODE_TESTS, n, "model.onnx"),
                  os.path.join(NODE_TESTS, n, "test_data_set_0")) for n in node_tests()]
        for tag, path, inputs in runs:
            for precision in ("float16", "bfloat16"):
                plan_convert(f, os.path.join(tmp, "node"), tag, path, inputs, precision,
                             a.ort_node if ort else None)
    return finish("sequence_test")


if __name__ == "__main__":
    sys.exit(main())
