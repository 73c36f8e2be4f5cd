#!/usr/bin/python3
"""End-to-end tests of `--annotate OUT.onnx` (fpguard check and plan) on the shipped
examples superres and transformer_block:

- OUT passes onnx.checker, and its graph is the model's (nodes, attributes,
  initializers, inputs, outputs, opsets) but for doc_strings and metadata;
- `fpguard run` gives bit-identical outputs on the model and on OUT;
- every node carries the fpguard.* metadata, with the numbers of `--json` of the same
  run (damage, headroom, overflow + NaN of the local and of the propagated run, local and
  propagated relative RMS error; an origin's count is its node's local one), its origin
  (kind, cause) and, in its doc_string, the origin's sentence and fixes;
- plan --annotate adds fpguard.plan: float32 and the reason for the plan's nodes, the
  format for the others;
- annotating OUT again replaces the fpguard keys instead of repeating them;
- an OUT that is the model, a directory, in a missing or an unwritable directory: exit 2,
  one line naming --annotate, no file left.

NodeProto.metadata_props is field 22 (ONNX 1.16), newer than Debian's python3-onnx: it is
decoded here from the node's bytes, independently of fpguard's reader.

    annotate_test.py --fpguard PATH --examples DIR
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile

import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, failures, read_outputs, run  # noqa: E402

KEYS = ("fpguard.precision", "fpguard.damage", "fpguard.headroom_bits", "fpguard.overflow_local",
        "fpguard.overflow_propagated", "fpguard.local_error", "fpguard.propagated_error")
COUNTS = ("fpguard.overflow_local", "fpguard.overflow_propagated")


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def wire_fields(b):
    """(field number, value) of a serialized message, in order."""
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wt}")
        yield num, v


def node_metadata(node):
    """NodeProto.metadata_props (field 22) as a list of (key, value)."""
    out = []
    for num, v in wire_fields(node.SerializeToString()):
        if num == 22:
            kv = onnx.StringStringEntryProto()
            kv.ParseFromString(v)
            out.append((kv.key, kv.value))
    return out


def bare(node):
    """The node without what annotate may change."""
    n = onnx.NodeProto()
    n.CopyFrom(node)
    n.ClearField("doc_string")
    return n.input, n.output, n.name, n.op_type, n.domain, [a.SerializeToString() for a in
                                                            n.attribute]


def same_graph(case, a, b):
    check(len(a.graph.node) == len(b.graph.node), f"{case}: same node count")
    for x, y in zip(a.graph.node, b.graph.node):
        check(bare(x) == bare(y), f"{case}: node {x.name} unchanged")
    for attr in ("input", "output"):
        check(list(getattr(a.graph, attr)) == list(getattr(b.graph, attr)),
              f"{case}: graph {attr}s unchanged")
    opsets = [[(o.domain, o.version) for o in x.opset_import] for x in (a, b)]
    check(opsets[0] == opsets[1], f"{case}: opset imports unchanged", opsets)
    ia = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    ib = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
    check(ia.keys() == ib.keys(), f"{case}: same initializers")
    for k in ia:
        check(ia[k].dtype == ib[k].dtype and ia[k].tobytes() == ib[k].tobytes(),
              f"{case}: initializer {k} unchanged")


def close(text, want, case):
    """A number written by report::num (4 significant digits) against the JSON's."""
    if want == "n/a":  # no value: nothing finite in both runs
        check(text == "n/a", case, text)
        return
    if want is None:  # JSON null: inf or nan
        check(text in ("inf", "-inf", "nan"), case, text)
        return
    got = float(text)
    check(math.isclose(got, want, rel_tol=5e-4, abs_tol=1e-300), case, (text, want))


def expected_numbers(jn):
    outs = jn["outputs"]
    if not outs:
        return None
    inf = float("inf")
    head = min(inf if o["headroom_bits"] is None else o["headroom_bits"] for o in outs)
    def worst(run):
        # Over the outputs with values finite in both runs (docs/check.md); a null there
        # is an inf (a zero reference), n/a when no output has such values.
        errs = [inf if o[run]["rel_rms_error"] is None else o[run]["rel_rms_error"]
                for o in outs if o[run]["finite"] > 0]
        return max(errs) if errs else "n/a"

    return {
        # null: unbounded, shown as the table shows it
        "fpguard.damage": "inf/NaN" if jn["damage"] is None else jn["damage"],
        "fpguard.headroom_bits": head,
        "fpguard.overflow_local": sum(o["local"]["overflow"] + o["local"]["nan"] for o in outs),
        "fpguard.overflow_propagated": sum(o["overflow"] + o["nan"] for o in outs),
        "fpguard.local_error": worst("local"),
        "fpguard.propagated_error": worst("propagated"),
    }


def display_names(m):
    # The examples are in topological order: unnamed nodes are "<OpType>_<position>".
    return [n.name or f"{n.op_type}_{i}" for i, n in enumerate(m.graph.node)]


def check_numbers(case, m, j):
    """Every node: the fpguard.* keys with the JSON's numbers."""
    by_name = {n["name"]: n for n in j["nodes"]}
    for name, node in zip(display_names(m), m.graph.node):
        meta = node_metadata(node)
        keys = [k for k, _ in meta]
        check(len(keys) == len(set(keys)), f"{case}: {name}: each key once", keys)
        md = dict(meta)
        jn = by_name.get(name)
        check(jn is not None, f"{case}: {name} is in the JSON")
        if jn is None:
            continue
        check(md.get("fpguard.precision") == jn["precision"], f"{case}: {name}: precision",
              (md.get("fpguard.precision"), jn["precision"]))
        want = expected_numbers(jn)
        if want is None:
            check("fpguard.headroom_bits" not in md, f"{case}: {name}: no numbers (no float)")
            continue
        for k in KEYS[1:]:
            check(k in md, f"{case}: {name} has {k}", md)
        if all(k in md for k in KEYS[1:]):
            close(md["fpguard.headroom_bits"], want["fpguard.headroom_bits"], f"{case}: {name} hr")
            for k in COUNTS:
                check(int(md[k]) == want[k], f"{case}: {name}: {k}", (md[k], want[k]))
            if want["fpguard.damage"] == "inf/NaN":
                check(md["fpguard.damage"] == "inf/NaN", f"{case}: {name}: damage unbounded",
                      md["fpguard.damage"])
            else:
                close(md["fpguard.damage"], want["fpguard.damage"], f"{case}: {name}: damage")
            for k in ("fpguard.local_error", "fpguard.propagated_error"):
                close(md[k], want[k], f"{case}: {name}: {k}")
        check("[fpguard] check in " + j["precision"] in node.doc_string,
              f"{case}: {name}: doc_string line", node.doc_string)


def check_origins(case, m, j):
    """Origins on their nodes: kind (cause) in fpguard.origin, the sentence and the fixes
    in doc_string; no other node has an origin."""
    nodes = dict(zip(display_names(m), m.graph.node))
    with_origin = set()
    for o in j["origins"]:
        targets = [o["node"]] if o["node"] in nodes else [
            k for k, n in nodes.items() if o["node"] in n.input]
        for t in targets:
            with_origin.add(t)
            n = nodes[t]
            tag = dict(node_metadata(n)).get("fpguard.origin", "")
            check(f'{o["kind"]} ({o["cause"]}' in tag, f"{case}: {t}: origin kind and cause", tag)
            check("origin: " + o["message"] in n.doc_string, f"{case}: {t}: sentence",
                  n.doc_string)
            for s in o["suggestions"]:
                check("fix: " + s in n.doc_string, f"{case}: {t}: fix", (s, n.doc_string))
            if t == o["node"] and o["kind"] in ("overflow", "nan"):
                # The origin's count is its node's local inf/NaN: the same number.
                local = dict(node_metadata(n)).get("fpguard.overflow_local")
                check(local == str(o["affected"]), f"{case}: {t}: origin count is the local one",
                      (local, o["affected"]))
    check(len(with_origin) > 0, f"{case}: some node is an origin")
    for name, n in nodes.items():
        if name not in with_origin:
            check("fpguard.origin" not in dict(node_metadata(n)), f"{case}: {name}: no origin")


def same_outputs(f, case, model, out, inputs, tmp, *extra):
    dirs = []
    for i, mdl in enumerate((model, out)):
        d = os.path.join(tmp, f"run{i}")
        shutil.rmtree(d, ignore_errors=True)
        r = run(f, "run", mdl, "--inputs", inputs, "--outputs", d, *extra)
        check(r.returncode == 0, f"{case}: run {mdl}", r.stderr)
        dirs.append(d)
    a, b = read_outputs(dirs[0]), read_outputs(dirs[1])
    check(a.keys() == b.keys() and len(a) > 0, f"{case}: same outputs", (a.keys(), b.keys()))
    for k in a:
        check(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(),
              f"{case}: output {k} bit for bit {extra}")


def test_check(f, ex, tmp, name):
    model = os.path.join(ex, name, "model.onnx")
    inputs = os.path.join(ex, name, "inputs")
    out, js = os.path.join(tmp, f"{name}.annotated.onnx"), os.path.join(tmp, f"{name}.json")
    r = run(f, "check", model, "--inputs", inputs, "--precision", "float16", "--json", js,
            "--annotate", out, "--quiet")
    check(r.returncode in (0, 1) and os.path.isfile(out), f"{name}: check --annotate", r.stderr)
    if not os.path.isfile(out):
        return
    with open(js) as fh:
        j = json.load(fh)
    m, a = onnx.load(model), onnx.load(out)
    try:
        onnx.checker.check_model(a)
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnx.checker passes", e)
    same_graph(name, m, a)
    md = {p.key: p.value for p in a.metadata_props}
    check(md.get("fpguard.precision") == "float16", f"{name}: model precision", md)
    check(md.get("fpguard.verdict") == j["verdict"], f"{name}: model verdict", (md, j["verdict"]))
    check_numbers(name, a, j)
    check_origins(name, a, j)
    same_outputs(f, name, model, out, inputs, tmp)
    same_outputs(f, name, model, out, inputs, tmp, "--precision", "float16")

    # Annotating the annotated model replaces the keys and the doc_string lines.
    again = os.path.join(tmp, f"{name}.again.onnx")
    r = run(f, "check", out, "--inputs", inputs, "--precision", "float16", "--annotate", again,
            "--quiet")
    check(r.returncode in (0, 1), f"{name}: annotate again", r.stderr)
    b = onnx.load(again)
    for x, y in zip(a.graph.node, b.graph.node):
        check(node_metadata(x) == node_metadata(y) and x.doc_string == y.doc_string,
              f"{name}: {x.name}: annotating again changes nothing")
    check(list(a.metadata_props) == list(b.metadata_props), f"{name}: model metadata once")


def plan_annotated(f, tmp, model, inputs, case, *extra):
    out, pj = os.path.join(tmp, f"{case}.onnx"), os.path.join(tmp, f"{case}.json")
    r = run(f, "plan", model, "--inputs", inputs, "--precision", "float16", "-o", pj,
            "--annotate", out, "--quiet", *extra)
    check(r.returncode == 0 and os.path.isfile(out), f"{case}: plan --annotate", r.stderr)
    if not os.path.isfile(out):
        return None, None
    a = onnx.load(out)
    onnx.checker.check_model(a)
    same_graph(case, onnx.load(model), a)
    same_outputs(f, case, model, out, inputs, tmp)
    return json.load(open(pj)), a


def test_plan(f, ex, tmp):
    """plan --annotate: fpguard.plan from plan.json, numbers from check --json."""
    model = os.path.join(ex, "superres", "model.onnx")
    inputs = os.path.join(ex, "superres", "inputs")
    js = os.path.join(tmp, "plancheck.json")
    r = run(f, "check", model, "--inputs", inputs, "--precision", "float16", "--json", js, "--quiet")
    j = json.load(open(js))
    precision = {n["name"]: n["precision"] for n in j["nodes"]}

    # Float32 islands only: the plan's nodes say float32 and why.
    p, a = plan_annotated(f, tmp, model, inputs, "plan-islands", "--scale", "none")
    if a is None:
        return
    check_numbers("plan", a, j)
    fp32 = set(p["fp32_nodes"])
    check(len(fp32) > 0, "plan keeps some node in float32", p)
    for name, node in zip(display_names(a), a.graph.node):
        v = dict(node_metadata(node)).get("fpguard.plan")
        if name in fp32:
            check(v is not None and v.startswith("float32: "), f"plan: {name} float32 + reason", v)
        elif precision[name] == "none":
            check(v == "none", f"plan: {name}: none", v)
        else:
            check(v == "float16", f"plan: {name}: float16", v)
        if v:
            check("plan: " + v in node.doc_string, f"plan: {name}: doc_string", node.doc_string)
    md = {x.key: x.value for x in a.metadata_props}
    check(md.get("fpguard.plan", "").startswith(f"{len(fp32)} of {p['float_nodes']} "),
          "plan: model metadata", md)

    # With the scale rewrite: the overflow node says what is scaled.
    p, a = plan_annotated(f, tmp, model, inputs, "plan-scaled")
    if a is None:
        return
    check(len(p["scaled"]) > 0, "superres plan scales", p)
    nodes = dict(zip(display_names(a), a.graph.node))
    for s in p["scaled"]:
        v = dict(node_metadata(nodes[s["node"]])).get("fpguard.plan")
        check(v == f"float16, after scaling '{s['value']}' by 2^-{s['k']}", "plan: scaled node", v)


def test_errors(f, ex, tmp):
    model = os.path.join(ex, "superres", "model.onnx")
    copy = os.path.join(tmp, "err", "copy.onnx")
    os.makedirs(os.path.dirname(copy))
    shutil.copy(model, copy)
    before = open(copy, "rb").read()
    listing = sorted(os.listdir(os.path.dirname(copy)))
    for cmd in ("check", "plan"):
        base = [cmd, copy, "--precision", "float16", "--quiet", "--annotate"]
        fails(f, f"{cmd} --annotate onto the model", base + [copy], "--annotate", "input file")
        fails(f, f"{cmd} --annotate onto a directory", base + [os.path.dirname(copy)],
              "--annotate", "directory")
        missing = os.path.join(tmp, "err", "missing", "out.onnx")
        fails(f, f"{cmd} --annotate in a missing directory", base + [missing], "--annotate",
              "does not exist")
        fails(f, f"{cmd} --annotate unwritable", base + ["/proc/fpguard-annotate.onnx"],
              "--annotate", "cannot write")
        check(not os.path.exists("/proc/fpguard-annotate.onnx"), f"{cmd}: nothing in /proc")
    check(open(copy, "rb").read() == before, "the model is untouched")
    check(sorted(os.listdir(os.path.dirname(copy))) == listing, "no file left",
          os.listdir(os.path.dirname(copy)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("superres", "transformer_block"):
            test_check(args.fpguard, args.examples, tmp, name)
        test_plan(args.fpguard, args.examples, tmp)
        test_errors(args.fpguard, args.examples, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("annotate: all passed")


if __name__ == "__main__":
    main()
