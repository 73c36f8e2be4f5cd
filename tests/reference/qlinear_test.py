"""The quantized integer ops against PyTorch and NumPy, for what the six ONNX node tests
leave out: ConvInteger and QLinearConv with groups, strides, dilations, asymmetric pads,
1-D and 3-D kernels, int8 and uint8 operands, per-output-channel zero points and scales,
an int32 bias, saturation; MatMulInteger and QLinearMatMul batched with broadcasting,
with zero points and scales per row of A and per column of B, and 1-D operands.
The integer results must be exact: the reference sums the products in float64 (torch
conv/matmul on integers below 2^53, exact), fpguard in int32. The requantization of the
QLinear ops is acc * (x_scale * w_scale / y_scale) rounded half to even, in float32 for
the default run and in float64 for --precision float64 (the carrier). Also the errors: a
reduction long enough to overflow int32 and a zero point of the wrong type are one line
naming the node, exit 2.
"""

import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import fpgref

ONNX = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}

# (name, x shape, out channels, kernel, attrs)
CONV_CASES = [
    ("2d plain", [1, 3, 6, 7], 4, [3, 3], {}),
    ("2d grouped, padded", [2, 6, 9, 8], 4, [3, 3], {"group": 2, "pads": [1, 1, 1, 1]}),
    ("2d depthwise, strided", [1, 4, 10, 10], 4, [3, 3], {"group": 4, "strides": [2, 2],
                                                         "pads": [1, 0, 1, 0]}),
    ("2d dilated, asymmetric pads", [1, 3, 12, 11], 5, [3, 2],
     {"dilations": [2, 3], "pads": [2, 0, 1, 3]}),
    ("2d SAME_UPPER", [1, 3, 7, 6], 2, [4, 3], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("1d", [2, 3, 17], 4, [5], {"pads": [2, 1], "strides": [2], "dilations": [2]}),
    ("3d", [1, 2, 5, 6, 7], 3, [3, 2, 3], {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
]


def rand_q(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def conv_ref(x, w, xz, wz, attrs):
    """sum (x - xz)(w - wz) over the window, exact (float64 holds these integers)."""
    sd = w.ndim - 2
    strides = attrs.get("strides", [1] * sd)
    dil = attrs.get("dilations", [1] * sd)
    if attrs.get("auto_pad") == "SAME_UPPER":
        pads_b, pads_e = [], []
        for i in range(sd):
            out = -(-x.shape[2 + i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (w.shape[2 + i] - 1) * dil[i] + 1 -
                        x.shape[2 + i])
            pads_b.append(total // 2)
            pads_e.append(total - total // 2)
    else:
        pads = attrs.get("pads", [0] * 2 * sd)
        pads_b, pads_e = pads[:sd], pads[sd:]
    pad = []
    for i in reversed(range(sd)):
        pad += [pads_b[i], pads_e[i]]
    xt = F.pad(torch.from_numpy(x.astype(np.float64) - float(xz)), pad)  # pads with 0 = xz
    wz = np.asarray(wz, np.float64).reshape([-1] + [1] * (w.ndim - 1))
    wt = torch.from_numpy(w.astype(np.float64) - wz)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[sd]
    y = fn(xt, wt, None, stride=strides, dilation=dil, groups=attrs.get("group", 1))
    return y.numpy()


def matmul_ref(a, b, az, bz):
    a = a.astype(np.float64) - (np.asarray(az, np.float64).reshape(-1, 1) if a.ndim > 1 and
                                np.size(az) > 1 else np.float64(np.ravel(az)[0]))
    b = b.astype(np.float64) - np.asarray(bz, np.float64).reshape(-1)
    return np.matmul(a, b)


def requant_ref(acc, mult, zy, out_dtype, carrier):
    """round_half_even(acc * mult) + zy, saturated; mult per output element (broadcast)."""
    v = np.rint(acc.astype(carrier) * mult.astype(carrier)) + carrier(zy)
    info = np.iinfo(out_dtype)
    return np.clip(v, info.min, info.max).astype(out_dtype)


def model(op, inputs, x, attrs):
    """One node `op` on ("x", then initializers named in `inputs`: (name, array) or None
    for an omitted optional input)."""
    names, init = ["x"], []
    for item in inputs:
        if item is None:
            names.append("")
            continue
        name, arr = item
        names.append(name)
        init.append(numpy_helper.from_array(arr, name))
    node = helper.make_node(op, names, ["y"], name="q", **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", ONNX[x.dtype.type], list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                          initializer=init)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def run(fpguard, tmp, m, x, precision=None):
    import onnx
    path, xp, out = (os.path.join(tmp, n) for n in ("m.onnx", "x.npy", "out"))
    onnx.save(m, path)
    np.save(xp, x)
    argv = ["run", path, "--input", "x=" + xp, "--outputs", out]
    if precision:
        argv += ["--precision", precision]
    r = fpgref.run(fpguard, *argv)
    return (np.load(os.path.join(out, "y.npy")) if r.returncode == 0 else None), r


def exact(c, case, got, want, r):
    if c.check(got is not None, f"{case}: exit code", r.stderr):
        c.check(got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want),
                f"{case}: values", f"{got.dtype} {got.shape} vs {want.dtype} {want.shape}; "
                f"{np.count_nonzero(got != want) if got.shape == want.shape else '-'} differ")


def conv_cases(c, fpguard, tmp, rng):
    for name, xs, m, k, attrs in CONV_CASES:
        for xt, wt in ((np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)):
            case = f"{name} x {xt.__name__} w {wt.__name__}"
            x = rand_q(rng, xt, xs)
            w = rand_q(rng, wt, [m, xs[1] // attrs.get("group", 1)] + k)
            xz, wz = rand_q(rng, xt, []), rand_q(rng, wt, [m])
            acc = conv_ref(x, w, xz, wz, attrs)
            got, r = run(fpguard, tmp, model("ConvInteger", [("w", w), ("xz", xz), ("wz", wz)],
                                             x, attrs), x)
            exact(c, f"ConvInteger {case}", got, acc.astype(np.int32), r)
            # QLinearConv of the same operands: per-channel w scale, a bias, and a y_scale
            # that puts the largest |result| near 400: it saturates whatever y_zero_point.
            xs_ = np.float32(0.02)
            ws = rng.uniform(0.01, 0.05, m).astype(np.float32)
            bias = rng.integers(-5000, 5000, m).astype(np.int32)
            ys = np.float32(xs_ * ws.max() * np.abs(acc).max() / 400)
            out_t = np.int8 if wt is np.int8 else np.uint8
            zy = rand_q(rng, out_t, [])
            inputs = [("xs", xs_), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz), ("ys", ys),
                      ("zy", zy), ("b", bias)]
            mshape = [1, m] + [1] * len(k)
            for precision, carrier in ((None, np.float32), ("float64", np.float64)):
                mult = (carrier(xs_) * ws.astype(carrier)) / carrier(ys)
                want = requant_ref(acc + bias.reshape(mshape), mult.reshape(mshape), zy, out_t,
                                   carrier)
                got, r = run(fpguard, tmp, model("QLinearConv", inputs, x, attrs), x, precision)
                exact(c, f"QLinearConv {case} ({precision or 'float32'})", got, want, r)
                if got is not None and precision is None:
                    info = np.iinfo(out_t)
                    saturated = (got == info.min) | (got == info.max)
                    c.check(saturated.any() and not saturated.all(),
                            f"QLinearConv {case}: some values saturate, not all")


# (a shape, b shape): batched with broadcasting, and 1-D operands.
MATMUL_CASES = [((4, 3), (3, 5)), ((2, 3, 4, 6), (6, 5)), ((3, 1, 4, 6), (2, 6, 3)),
                ((6,), (6, 4)), ((5, 6), (6,)), ((7,), (7,))]


def matmul_cases(c, fpguard, tmp, rng):
    for sa, sb in MATMUL_CASES:
        for at, bt in ((np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)):
            case = f"{sa} x {sb} {at.__name__} {bt.__name__}"
            a, b = rand_q(rng, at, sa), rand_q(rng, bt, sb)
            m = sa[-2] if len(sa) > 1 else 1
            n = sb[-1] if len(sb) > 1 else 1
            az = rand_q(rng, at, [m] if len(sa) > 1 else [])
            bz = rand_q(rng, bt, [n] if len(sb) > 1 else [])
            acc = matmul_ref(a, b, az, bz)
            got, r = run(fpguard, tmp, model("MatMulInteger", [("b", b), ("az", az), ("bz", bz)],
                                             a, {}), a)
            exact(c, f"MatMulInteger {case}", got, acc.astype(np.int32), r)
            as_ = rng.uniform(0.01, 0.03, [m] if len(sa) > 1 else []).astype(np.float32)
            bs = rng.uniform(0.01, 0.03, [n] if len(sb) > 1 else []).astype(np.float32)
            ys = np.float32(rng.uniform(0.5, 2))
            zy = rand_q(rng, np.int8, [])
            inputs = [("as", as_), ("az", az), ("b", b), ("bs", bs), ("bz", bz), ("ys", ys),
                      ("zy", zy)]
            for precision, carrier in ((None, np.float32), ("float64", np.float64)):
                # per (row, column) for 2-D operands; per column or row when one is 1-D
                ma, mb = as_.astype(carrier), bs.astype(carrier)
                if len(sa) > 1 and len(sb) > 1:
                    ma = ma.reshape(-1, 1)
                mult = (ma * mb) / carrier(ys)
                want = requant_ref(acc, np.asarray(mult), zy, np.int8, carrier)
                got, r = run(fpguard, tmp, model("QLinearMatMul", inputs, a, {}), a, precision)
                exact(c, f"QLinearMatMul {case} ({precision or 'float32'})", got, want, r)


def tie_cases(c, fpguard, tmp, rng):
    """a_scale 0.5, b_scale 1, y_scale 1: y = acc / 2 exactly, every odd acc a tie, which
    rounds to even (not away from zero)."""
    a = rand_q(rng, np.int8, (6, 5)) // 32  # in [-4, 3]: |acc| <= 80, no saturation
    b = rand_q(rng, np.int8, (5, 7)) // 32
    acc = matmul_ref(a, b, 0, 0)
    for precision in (None, "float64"):
        inputs = [("as", np.float32(0.5)), ("az", np.int8(0)), ("b", b), ("bs", np.float32(1)),
                  ("bz", np.int8(0)), ("ys", np.float32(1)), ("zy", np.int8(3))]
        got, r = run(fpguard, tmp, model("QLinearMatMul", inputs, a, {}), a, precision)
        want = (np.rint(acc / 2) + 3).astype(np.int8)
        c.check(np.count_nonzero(acc % 2) > 5, "ties: the case has odd sums")
        exact(c, f"QLinearMatMul: ties round half to even ({precision or 'float32'})", got, want,
              r)


def error_cases(c, fpguard, tmp):
    # 33026 terms of up to 255 * 255 may overflow int32: refused before the loop.
    a, b = np.zeros((1, 33026), np.uint8), np.zeros((33026, 1), np.uint8)
    _, r = run(fpguard, tmp, model("MatMulInteger", [("b", b)], a, {}), a)
    lines = r.stderr.strip().splitlines()
    c.check(r.returncode == 2 and len(lines) == 1 and "'q'" in lines[0] and "int32" in lines[0],
            "MatMulInteger: a reduction that may overflow int32 is refused",
            f"exit {r.returncode}: {r.stderr!r}")
    a, b = np.zeros((1, 33025), np.uint8), np.full((33025, 1), 255, np.uint8)
    a[:] = 255
    got, r = run(fpguard, tmp, model("MatMulInteger", [("b", b)], a, {}), a)
    exact(c, "MatMulInteger: 33025 products of 255 * 255 (the int32 limit)", got,
          np.array([[33025 * 255 * 255]], np.int32), r)
    x = np.zeros((1, 1, 3, 3), np.uint8)
    w = np.zeros((1, 1, 2, 2), np.uint8)
    _, r = run(fpguard, tmp, model("ConvInteger", [("w", w), ("xz", np.int8(0))], x, {}), x)
    lines = r.stderr.strip().splitlines()
    c.check(r.returncode == 2 and len(lines) == 1 and "x_zero_point" in lines[0],
            "ConvInteger: an int8 zero point of a uint8 input is refused",
            f"exit {r.returncode}: {r.stderr!r}")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("qlinear_test")
    rng = np.random.default_rng(23)
    with tempfile.TemporaryDirectory() as tmp:
        conv_cases(c, args.fpguard, tmp, rng)
        matmul_cases(c, args.fpguard, tmp, rng)
        tie_cases(c, args.fpguard, tmp, rng)
        error_cases(c, args.fpguard, tmp)
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
