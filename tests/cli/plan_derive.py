"""What `fpguard plan` must answer for a model, derived independently of the planner from
the value ranges of the check JSON and the rules of docs/plan.md (check_test.py compares
the plans of the examples with it, instead of repeating a sample output):

- an overflow origin is a node with an output beyond the format's max whose inputs are all
  within it; its float32 island (`--scale none`) is the origin and every node that reads
  one of its out-of-range outputs (docs/plan.md, step 1);
- the exact scaling (`--scale auto`) multiplies the origin's widest input x by 2^-k. Every
  value computed from x has a degree of homogeneity d in x (Mul adds degrees, Div
  subtracts, Pow by a constant e multiplies by e, Sqrt halves, Reciprocal negates,
  MatMul/Conv/Gemm add their operands', an Add/Sub with a constant or of equal degrees and
  ReLU, means and data movement keep it; any other op has none: the rewrite multiplies
  back before it). k is the smallest integer with every k*d integral, every value of
  positive degree within half the max after scaling (absmax * 2^-kd <= max/2) and every
  value of negative degree within the max.
"""
import os
from fractions import Fraction

import numpy as np
from onnx import numpy_helper

KEEP = {"Relu", "ReduceMean", "ReduceSum", "Reshape", "Transpose", "Flatten", "Identity",
        "DepthToSpace", "SpaceToDepth", "MaxPool", "AveragePool", "GlobalAveragePool",
        "Squeeze", "Unsqueeze", "Neg"}
PRODUCTS = {"MatMul", "Conv", "Gemm"}


def constants(model):
    c = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            c[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return c


def value_ranges(j, model, inputs_dir):
    """absmax of each value: node outputs from the check JSON (the reference run), graph
    inputs from the input files, initializers from the model."""
    r = {o["name"]: o["ref_absmax"] for n in j["nodes"] for o in n["outputs"]}
    for name, a in constants(model).items():
        r.setdefault(name, float(np.abs(a).max()) if a.size else 0.0)
    for fn in os.listdir(inputs_dir):
        if fn.endswith(".npy"):
            r[fn[:-4]] = float(np.abs(np.load(os.path.join(inputs_dir, fn))).max())
    return r


def overflow_origins(model, ranges, fmax):
    """[(origin node, its island: node names in topological order)]."""
    consumers = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n.name)
    out = []
    for n in model.graph.node:  # (topological in the exported examples)
        beyond = [o for o in n.output if ranges.get(o, 0) > fmax]
        if beyond and all(ranges.get(i, 0) <= fmax for i in n.input if i):
            island = [n.name] + [c for o in beyond for c in consumers.get(o, [])]
            out.append((n, island))
    return out


def degree(n, deg, const):
    """The degree of n's output given its inputs' (absent: 0), or None (no degree)."""
    d = [deg.get(i, Fraction(0)) for i in n.input]
    op = n.op_type
    if op in KEEP:
        return d[0]
    if op in ("Add", "Sub"):
        live = {deg[i] for i in n.input if i in deg}
        ok = all(i in deg or i in const for i in n.input)  # a constant is rescaled
        return live.pop() if len(live) == 1 and ok else None
    if op == "Mul":
        return sum(d, Fraction(0))
    if op == "Div":
        return d[0] - d[1]
    if op in PRODUCTS:
        return d[0] + d[1] if all(i in const for i in n.input[2:] if i) else None
    if op == "Pow":
        e = const.get(n.input[1])
        return d[0] * Fraction(float(e)) if e is not None and e.size == 1 else None
    if op == "Sqrt":
        return d[0] / 2
    if op == "Reciprocal":
        return -d[0]
    return None


def degrees(model, start):
    """{value: nonzero degree in `start`} over the values computed from it."""
    const = constants(model)
    deg = {start: Fraction(1)}
    for n in model.graph.node:
        if not any(i in deg for i in n.input):
            continue
        d = degree(n, deg, const)
        if d:  # None: the rewrite undoes the scale before n; 0: n's output is unchanged
            for o in n.output:
                deg[o] = d
    return deg


def scale_exponent(deg, ranges, fmax):
    for k in range(1, 65):
        if any((k * d).denominator != 1 for d in deg.values()):
            continue
        if all(ranges.get(v, 0) * 2.0 ** float(-k * d) <= (fmax / 2 if d > 0 else fmax)
               for v, d in deg.items()):
            return k
    return None


def derive(j, model, inputs_dir, fmax):
    """(float32 nodes of `--scale none`, [(node, value, k)] of `--scale auto`)."""
    ranges = value_ranges(j, model, inputs_dir)
    order = {n.name: i for i, n in enumerate(model.graph.node)}
    fp32, scaled = set(), []
    for n, island in overflow_origins(model, ranges, fmax):
        fp32.update(island)
        x = max((i for i in n.input if i), key=lambda i: ranges.get(i, 0))  # the widest
        scaled.append((n.name, x, scale_exponent(degrees(model, x), ranges, fmax)))
    return sorted(fp32, key=order.get), scaled
