#!/usr/bin/python3
"""End-to-end tests of `fpguard run --profile` (docs/executor.md, "Profiling a run"):

- on examples/transformer_block: every node of the graph appears exactly once, the node
  count of each op type equals the graph's (counted here with the onnx package), every
  node ran once per profiled run (--repeat 3: the first run warms up, two are averaged),
  the shares sum to 100, the JSON file parses and matches the printed tables, `--json`
  carries the same profile, and the outputs are bit-identical to a run without --profile;
- in a Loop and an If, body nodes are named by their path (`loop/body/step`), a Loop body
  node ran once per iteration, the branch not taken does not appear, and the enclosing
  node's own time excludes its body's (the shares still sum to 100).

Bad input (--profile onto the model, into a missing directory) is in the bad-input suite.

    profile_test.py --fpguard PATH
"""
import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, finish, num, read_outputs, run  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def table_rows(text, header):
    """The rows of the printed table whose header line starts with `header`, split on runs of
    two or more spaces."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().startswith(header))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or line.strip().startswith("("):
            break
        rows.append([c for c in line.strip().split("  ") if c.strip()])
    return [[c.strip() for c in r] for r in rows]


def example(f, tmp):
    ex = os.path.join(ROOT, "examples", "transformer_block")
    model = os.path.join(ex, "model.onnx")
    inputs = os.path.join(ex, "inputs")
    graph = onnx.load(model).graph
    names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(graph.node)]
    check(len(set(names)) == len(names), "example node names are unique", names)
    prof = os.path.join(tmp, "profile.json")
    out_p, out_n = os.path.join(tmp, "with"), os.path.join(tmp, "without")
    r = run(f, "run", model, "--inputs", inputs, "--repeat", "3", "--profile", prof,
            "--profile-top", "0", "--outputs", out_p)
    check(r.returncode == 0, "run --profile FILE", r.stderr)
    with open(prof) as fh:
        j = json.load(fh)
    check(j["schema_version"] == 1 and j["runs"] == 2, "schema_version, runs after warm-up", j["runs"])
    got = [n["name"] for n in j["nodes"]]
    check(sorted(got) == sorted(names), "every node exactly once", (sorted(got), sorted(names)))
    want_types = collections.Counter(n.op_type for n in graph.node)
    got_types = {t["op_type"]: t["nodes"] for t in j["op_types"]}
    check(got_types == dict(want_types), "node count per op type", (got_types, want_types))
    by_name = {n["name"]: n for n in j["nodes"]}
    op_of = {nm: n.op_type for nm, n in zip(names, graph.node)}
    check(all(by_name[nm]["op_type"] == op_of[nm] for nm in names), "op type of each node")
    check(all(n["calls"] == 2 and n["ms"] >= 0 for n in j["nodes"]), "each node ran once a run",
          [n for n in j["nodes"] if n["calls"] != 2])
    check(abs(sum(n["share"] for n in j["nodes"]) - 100) < 1e-6, "node shares sum to 100")
    check(abs(sum(t["share"] for t in j["op_types"]) - 100) < 1e-6, "op type shares sum to 100")
    total = sum(n["ms"] for n in j["nodes"])
    check(abs(j["total_ms"] - total) <= 1e-9 * max(1, total), "total_ms", (j["total_ms"], total))
    check(j["outside_ms"] >= 0, "outside_ms", j.get("outside_ms"))
    head = f"profile: {num(j['total_ms'])} ms a run in {len(names)} nodes, {num(j['outside_ms'])} ms " \
           f"outside them (median of 2 runs)"
    check(head in r.stdout, "the profile's first line: the JSON's numbers", r.stdout[:300])
    for t in j["op_types"]:
        ms = sum(n["ms"] for n in j["nodes"] if n["op_type"] == t["op_type"])
        check(abs(t["total_ms"] - ms) <= 1e-9 * max(1, ms), f"{t['op_type']} total_ms", (t, ms))
        check(abs(t["average_ms"] - ms / t["nodes"]) <= 1e-9 * max(1, ms), "average_ms", t)
    shares = [t["total_ms"] for t in j["op_types"]]
    check(shares == sorted(shares, reverse=True), "op types slowest first", shares)

    # The printed tables are the JSON's numbers (one number format).
    types = table_rows(r.stdout, "op type")
    check([row[0] for row in types] == [t["op_type"] for t in j["op_types"]], "op type rows", types)
    for row, t in zip(types, j["op_types"]):
        want = [t["op_type"], str(t["nodes"]), num(t["total_ms"]), num(t["average_ms"]),
                f"{t['share']:.1f}%"]
        check(row == want, f"op type row {t['op_type']}", (row, want))
    rows = table_rows(r.stdout, "node")
    check(len(rows) == len(names), "--profile-top 0 shows every node", len(rows))
    check(abs(sum(float(row[4].rstrip("%")) for row in rows) - 100) <= 0.05 * len(rows) + 1e-9,
          "printed shares sum to 100 within rounding")
    for row in rows:
        n = by_name[row[0]]
        want = [n["name"], n["op_type"], str(n["calls"]), num(n["ms"]), f"{n['share']:.1f}%"]
        check(row == want, f"node row {row[0]}", (row, want))
    ms = [by_name[row[0]]["ms"] for row in rows]
    check(ms == sorted(ms, reverse=True), "nodes slowest first", ms)

    # --warmup: untimed runs first; the --repeat runs are all timed and profiled.
    r4 = run(f, "run", model, "--inputs", inputs, "--warmup", "2", "--repeat", "3", "--profile",
             "--json")
    check(r4.returncode == 0, "run --warmup 2 --repeat 3", r4.stderr)
    j4 = json.loads(r4.stdout)
    check(j4["timing"]["runs"] == 3 and j4["profile"]["runs"] == 3,
          "--warmup: 3 timed and profiled runs", (j4["timing"]["runs"], j4["profile"]["runs"]))
    fails(f, "--warmup -1", ["run", model, "--inputs", inputs, "--warmup", "-1"], "--warmup",
          "must be 0 or more")

    # Default: the 20 slowest, and a line saying so.
    r2 = run(f, "run", model, "--inputs", inputs, "--profile", "--json", "--outputs", out_n)
    check(r2.returncode == 0, "run --profile --json", r2.stderr)
    jj = json.loads(r2.stdout)
    check(jj["profile"]["runs"] == 1 and len(jj["profile"]["nodes"]) == len(names),
          "--json carries the profile", jj.get("profile", {}).get("runs"))
    r3 = run(f, "run", model, "--inputs", inputs, "--profile")
    check(len(table_rows(r3.stdout, "node")) == 20 and f"(20 slowest of {len(names)} nodes" in r3.stdout,
          "default node table: top 20", r3.stdout[-400:])
    a, b = read_outputs(out_p), read_outputs(out_n)
    check(a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a),
          "profiling changes no output")


def save(graph, path):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def control_flow(f, tmp):
    """y = Loop(5) { acc = acc * 2 } ; z = If(c) { then: y + 1 } else { y - 1 }."""
    fl = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"], name="step")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", fl, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", fl, [4])])
    then_g = helper.make_graph([helper.make_node("Add", ["y", "one"], ["t"], name="inc")], "then",
                               [], [helper.make_tensor_value_info("t", fl, [4])],
                               [helper.make_tensor("one", fl, [], [1.0])])
    else_g = helper.make_graph([helper.make_node("Sub", ["y", "one_e"], ["e"], name="dec")], "else",
                               [], [helper.make_tensor_value_info("e", fl, [4])],
                               [helper.make_tensor("one_e", fl, [], [1.0])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body),
         helper.make_node("If", ["c"], ["z"], name="branch", then_branch=then_g, else_branch=else_g)],
        "cf",
        [helper.make_tensor_value_info("x", fl, [4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", fl, [4])],
        [helper.make_tensor("n", TensorProto.INT64, [], [5])])
    model = os.path.join(tmp, "cf.onnx")
    save(g, model)
    np.save(os.path.join(tmp, "x.npy"), np.arange(4, dtype=np.float32))
    np.save(os.path.join(tmp, "c.npy"), np.array(True))
    prof = os.path.join(tmp, "cf.json")
    r = run(f, "run", model, "--input", "x=" + os.path.join(tmp, "x.npy"), "--input",
            "c=" + os.path.join(tmp, "c.npy"), "--profile", prof, "--repeat", "2")
    check(r.returncode == 0, "control flow runs with --profile", r.stderr)
    j = json.load(open(prof))
    calls = {n["name"]: n["calls"] for n in j["nodes"]}
    want = {"loop": 1, "loop/body/keep": 5, "loop/body/step": 5, "branch": 1,
            "branch/then_branch/inc": 1}
    check(calls == want, "body nodes by path, calls per iteration, the branch taken only",
          (calls, want))
    check(abs(sum(n["share"] for n in j["nodes"]) - 100) < 1e-6, "control flow shares sum to 100")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    f = ap.parse_args().fpguard
    with tempfile.TemporaryDirectory() as tmp:
        example(f, tmp)
        control_flow(f, tmp)
    return finish("profile")


if __name__ == "__main__":
    sys.exit(main())
