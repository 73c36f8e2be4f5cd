"""Conv against PyTorch (torch.nn.functional.conv1d/2d/3d in float64) for what the ONNX node
tests leave out: groups (grouped and depthwise), dilations, 1-D and 3-D kernels, asymmetric
and SAME pads, strides, with and without bias; the float32 path (oneDNN's convolution
primitive) and the float64 truth run (--precision float64, im2col + the float64 GEMM)."""

import os
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import fpgref

# (name, input shape, out channels, kernel, attrs): attrs are ONNX Conv attributes.
CASES = [
    ("2d grouped", [2, 6, 9, 8], 4, [3, 3], {"group": 2, "pads": [1, 1, 1, 1]}),
    ("2d depthwise", [1, 8, 10, 10], 8, [3, 3], {"group": 8, "strides": [2, 2],
                                                 "pads": [1, 1, 1, 1]}),
    ("2d depthwise x2", [1, 4, 7, 9], 8, [5, 3], {"group": 4, "pads": [2, 1, 2, 1]}),
    ("2d dilated", [1, 3, 12, 11], 5, [3, 3], {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ("2d asymmetric pads", [1, 3, 8, 8], 4, [3, 2], {"pads": [0, 1, 2, 0], "strides": [2, 1]}),
    ("2d strided, pad end unused", [1, 2, 10, 10], 3, [3, 3],
     {"strides": [3, 3], "pads": [1, 1, 1, 1]}),
    ("2d SAME_UPPER", [1, 3, 7, 6], 2, [4, 3], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("2d 1x1", [2, 16, 5, 5], 7, [1, 1], {}),
    ("1d", [2, 3, 17], 4, [5], {"pads": [2, 1], "strides": [2], "dilations": [2]}),
    ("1d grouped", [1, 4, 12], 6, [3], {"group": 2}),
    ("3d", [1, 2, 5, 6, 7], 3, [3, 2, 3], {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
    ("3d depthwise", [1, 3, 4, 5, 5], 3, [2, 2, 2], {"group": 3}),
]


def torch_conv(x, w, b, attrs):
    """The expected output in float64, padding explicitly (torch pads symmetrically only)."""
    k = w.shape[2:]
    sd = len(k)
    strides = attrs.get("strides", [1] * sd)
    dil = attrs.get("dilations", [1] * sd)
    if attrs.get("auto_pad") == "SAME_UPPER":
        pads_b, pads_e = [], []
        for i in range(sd):
            size = x.shape[2 + i]
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 - size)
            pads_b.append(total // 2)
            pads_e.append(total - total // 2)
    else:
        pads = attrs.get("pads", [0] * 2 * sd)
        pads_b, pads_e = pads[:sd], pads[sd:]
    pad = []
    for i in reversed(range(sd)):  # F.pad: last dimension first
        pad += [pads_b[i], pads_e[i]]
    xt = F.pad(torch.from_numpy(x).double(), pad)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[sd]
    bt = None if b is None else torch.from_numpy(b).double()
    y = fn(xt, torch.from_numpy(w).double(), bt, stride=strides, dilation=dil,
           groups=attrs.get("group", 1))
    return y.numpy()


def model(x_shape, w, b, attrs):
    inputs = ["x", "w"] + (["b"] if b is not None else [])
    init = [numpy_helper.from_array(w, "w")]
    if b is not None:
        init.append(numpy_helper.from_array(b, "b"))
    node = helper.make_node("Conv", inputs, ["y"], **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("conv_test")
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        for name, x_shape, m_out, kernel, attrs in CASES:
            group = attrs.get("group", 1)
            x = rng.standard_normal(x_shape).astype(np.float32)
            w = rng.standard_normal([m_out, x_shape[1] // group] + kernel).astype(np.float32)
            for with_bias in (False, True):
                b = rng.standard_normal(m_out).astype(np.float32) if with_bias else None
                want = torch_conv(x, w, b, attrs)
                case = f"{name}{' + bias' if with_bias else ''}"
                path = os.path.join(tmp, "m.onnx")
                onnx.save(model(x_shape, w, b, attrs), path)
                xp = os.path.join(tmp, "x.npy")
                np.save(xp, x)
                for precision, tol in (("float32", 1e-5), ("float64", None)):
                    out = os.path.join(tmp, "out_" + precision)
                    r = fpgref.run(args.fpguard, "run", path, "--input", "x=" + xp, "--outputs",
                                   out, "--precision", precision)
                    if not c.check(r.returncode == 0, f"{case} {precision}: exit code", r.stderr):
                        continue
                    got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
                    if not c.check(got.shape == want.shape, f"{case} {precision}: shape",
                                   f"{got.shape} vs {want.shape}"):
                        continue
                    # float32: a few float32 ulps of the sums' scale. float64: the truth run
                    # writes the declared float32, so each value is torch's float64 result
                    # rounded to float32, give or take one float32 ulp (a sum within 1e-15
                    # of a rounding boundary may round the other way).
                    scale = max(1.0, np.abs(want).max())
                    if precision == "float64":
                        want32 = want.astype(np.float32)
                        ulp = np.spacing(np.abs(want32)).astype(np.float64)
                        off = np.abs(got - want32.astype(np.float64)) / ulp
                        c.check(off.max() <= 1, f"{case} float64: values",
                                f"{off.max():.3g} float32 ulps off")
                    else:
                        err = np.abs(got - want).max()
                        c.check(err <= tol * scale, f"{case} float32: values",
                                f"max error {err:.3g} > {tol * scale:.3g}")
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
