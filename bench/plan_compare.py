#!/usr/bin/python3
"""fpguard plan against two common static recipes, computed by fpguard itself on the same
models, inputs and tolerance (cosine >= 0.999 of every output in float16):

  autocast   keep PyTorch autocast's float32 op list in float32 (as ONNX op types)
  absmax512  keep every node whose input or output reaches |x| > 512 in float32

For each model: whether each recipe meets the tolerance, how many floating nodes it leaves
in float16, the casts its conversion needs, the planner's passes, and its wall time over
one `fpguard check`. Usage: bench/plan_compare.py BUILD_DIR (models: the bench models in
BUILD_DIR/bench/models and examples/)."""
import json
import os
import subprocess
import sys
import tempfile
import time

import onnx  # Debian's python3-onnx

HERE = os.path.dirname(os.path.abspath(__file__))

# torch.autocast (CUDA) "float32" ops, as ONNX op types: pow, exp, log*, reciprocal, rsqrt,
# softmax/log_softmax, sum/prod and norms, layer/group norm, softplus, cumsum, and the
# trigonometric/hyperbolic ops on its list.
AUTOCAST_FP32 = ["Pow", "Exp", "Log", "Reciprocal", "Softmax", "LogSoftmax", "ReduceSum",
                 "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                 "ReduceSumSquare", "LayerNormalization", "GroupNormalization", "Softplus",
                 "CumSum", "Acos", "Asin", "Cosh", "Sinh", "Tan"]


def fpguard(build, *argv):
    r = subprocess.run([os.path.join(build, "fpguard"), *argv], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"fpguard {' '.join(argv)}: {r.stderr.strip()}")
    return r


def check_json(build, model, inputs, *extra):
    r = fpguard(build, "check", model, "--inputs", inputs, "--precision", "float16", "--json",
                "-", "--quiet", *extra)
    return json.loads(r.stdout)


def recipe(build, model, inputs, keep_nodes=(), keep_ops=()):
    extra = []
    if keep_nodes:
        extra += ["--keep-fp32", ",".join(keep_nodes)]
    if keep_ops:
        extra += ["--keep-fp32-ops", ",".join(keep_ops)]
    # plan with one pass evaluates the forced configuration as it is: meets, nodes, casts.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        fpguard(build, "plan", model, "--inputs", inputs, "--precision", "float16", "--quiet",
                "--scale", "none", "--max-passes", "1", "-o", out, *extra)
        with open(out) as fh:
            p = json.load(fh)
    d = check_json(build, model, inputs, *extra)
    return {"meets": d["verdict"] == "pass", "low": p["low_nodes"], "float": p["float_nodes"],
            "casts": p["casts"]}


def models(build):
    out = []
    for root in (os.path.join(build, "bench", "models"), os.path.join(HERE, "..", "examples")):
        if os.path.isdir(root):
            for name in sorted(os.listdir(root)):
                d = os.path.join(root, name)
                if os.path.exists(os.path.join(d, "model.onnx")):
                    out.append((name, os.path.join(d, "model.onnx"), os.path.join(d, "inputs")))
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    print(f"{'model':<18} {'recipe':<10} {'meets':>5} {'fp16 nodes':>11} {'casts':>6} "
          f"{'passes':>7} {'time/check':>11}")
    for name, model, inputs in models(build):
        t0 = time.perf_counter()
        check_json(build, model, inputs)
        t_check = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "plan.json")
            t0 = time.perf_counter()
            fpguard(build, "plan", model, "--inputs", inputs, "--precision", "float16", "--quiet",
                    "-o", out)
            t_plan = time.perf_counter() - t0
            with open(out) as fh:
                p = json.load(fh)
        base = check_json(build, model, inputs)
        big = set()
        absmax = {}
        for n in base["nodes"]:
            for t in n["outputs"]:
                absmax[t["name"]] = t["ref_absmax"] or 0
        g = onnx.load(model).graph  # the node inputs of the model
        names = {n["name"] for n in base["nodes"] if n["precision"] != "none"}
        for i, n in enumerate(g.node):
            node = n.name or f"{n.op_type}_{i}"  # (torch names every node)
            vals = [absmax.get(v, 0) for v in list(n.input) + list(n.output)]
            if node in names and any(v > 512 for v in vals):
                big.add(node)
        rows = [("fpguard", {"meets": p["meets"], "low": p["low_nodes"], "float": p["float_nodes"],
                             "casts": p["casts"]}, p["passes"], t_plan / t_check),
                ("autocast", recipe(build, model, inputs, keep_ops=AUTOCAST_FP32), "", None),
                ("absmax512", recipe(build, model, inputs, keep_nodes=sorted(big)), "", None)]
        for r, v, passes, ratio in rows:
            print(f"{name:<18} {r:<10} {'yes' if v['meets'] else 'NO':>5} "
                  f"{v['low']:>5} of {v['float']:<3} {v['casts']:>6} {passes!s:>7} "
                  f"{'' if ratio is None else f'{ratio:.1f}':>11}")


if __name__ == "__main__":
    main()
