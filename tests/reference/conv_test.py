"""Conv against PyTorch (torch.nn.functional.conv1d/2d/3d in float64) for what the ONNX node
tests leave out: groups (grouped and depthwise), dilations, 1-D and 3-D kernels, asymmetric
and SAME pads, strides, with and without bias; the float32 paths (oneDNN's convolution
primitive, in its layouts and in nChw16c, the direct depthwise kernel, 1x1 kernels as a
GEMM) and the float64 truth run (--precision float64, im2col + the float64 GEMM);
convolutions large enough for two threads give one thread's bits; a chain of convolutions
run twice in one process. ConvTranspose (2-D) against torch.nn.functional.conv_transpose2d
the same way."""

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
    # Depthwise 2-D convolutions run directly on NCHW, along output rows (wide enough for
    # several vectors and a tail); 1x1 kernels as one GEMM per image and group.
    ("2d depthwise 3x3 wide rows", [2, 6, 19, 45], 6, [3, 3], {"group": 6, "pads": [1, 1, 1, 1]}),
    ("2d depthwise 5x5 strided", [1, 5, 23, 41], 5, [5, 5],
     {"group": 5, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ("2d depthwise stride 3, dilated, asymmetric pads", [1, 4, 17, 38], 8, [3, 3],
     {"group": 4, "strides": [2, 3], "dilations": [2, 2], "pads": [0, 3, 2, 1]}),
    ("2d depthwise kernel wider than the input", [1, 3, 4, 5], 3, [3, 7],
     {"group": 3, "pads": [1, 3, 1, 3]}),
    ("2d depthwise SAME_LOWER", [1, 4, 9, 20], 4, [4, 4], {"group": 4, "auto_pad": "SAME_LOWER"}),
    ("2d 1x1 strided", [1, 8, 9, 11], 6, [1, 1], {"strides": [2, 2]}),
    ("2d 1x1 grouped", [2, 8, 6, 5], 6, [1, 1], {"group": 2}),
    ("2d 1x1 padded", [1, 4, 5, 5], 3, [1, 1], {"pads": [1, 0, 0, 1]}),
    ("1d 1x1", [2, 5, 9], 3, [1], {}),
    # 1x1 kernels over small planes and depthwise ones with narrow rows, over whole blocks of
    # 16 channels: oneDNN's primitive on its channel-blocked layout (nChw16c) where it runs
    # AVX-512 kernels.
    ("2d 1x1 channel blocks, small plane", [1, 64, 3, 3], 32, [1, 1], {}),
    ("2d 1x1 channel blocks, strided", [1, 64, 5, 5], 128, [1, 1], {"strides": [2, 2]}),
    # (oneDNN has only its reference kernel for a padded 1x1 on nChw16c: its own layout.)
    ("2d 1x1 channel blocks, padded", [1, 128, 2, 2], 64, [1, 1], {"pads": [1, 1, 1, 1]}),
    ("2d depthwise channel blocks, narrow rows", [1, 32, 7, 7], 32, [3, 3],
     {"group": 32, "pads": [1, 1, 1, 1]}),
    ("2d depthwise x2 channel blocks, narrow rows", [1, 16, 6, 6], 32, [3, 3],
     {"group": 16, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # An image's channels into 16-channel blocks: X read as NCHW, Y in nChw16c.
    ("2d image channels to channel blocks", [1, 3, 20, 22], 32, [3, 3],
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("2d one image channel to channel blocks", [2, 1, 9, 9], 16, [3, 3], {}),
    # Large enough to run on the pool's threads (smaller ones run on one thread).
    ("2d 1x1 channel blocks, threaded", [1, 512, 7, 7], 256, [1, 1], {}),
    ("2d depthwise channel blocks 5x5, threaded", [1, 960, 7, 7], 960, [5, 5],
     {"group": 960, "pads": [2, 2, 2, 2]}),
    ("2d image channels to channel blocks 7x7, threaded", [1, 3, 64, 64], 64, [7, 7],
     {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ("2d 3x3, threaded", [1, 32, 40, 40], 48, [3, 3], {"pads": [1, 1, 1, 1]}),
    ("2d depthwise, threaded", [1, 96, 60, 60], 96, [3, 3], {"group": 96, "pads": [1, 1, 1, 1]}),
    # 3x3 onto a plane of 128 x 128 (oneDNN's blocked layout for both; its output channels
    # not a whole block).
    ("2d 3x3 channel blocks, large plane, threaded", [1, 32, 128, 128], 24, [3, 3],
     {"pads": [1, 1, 1, 1]}),
    # 1x1 kernels over a 1 x 1 plane: products of the images' rows with W transposed.
    ("2d 1x1 on a 1x1 plane", [3, 24, 1, 1], 40, [1, 1], {}),
    ("2d 1x1 on a 1x1 plane, threaded", [1, 960, 1, 1], 240, [1, 1], {}),
]

# Convolutions in a chain, on oneDNN's primitive (3x3 kernels) with activations of growing
# and shrinking sizes (the buffers of their blocked layouts are kept and reused), run
# twice in one process (the second run reuses what the first prepared): (out channels,
# stride) per layer, on an input of [1, 5, 33, 29].
CHAIN = [(12, 1), (40, 1), (8, 2), (64, 1), (3, 1)]

# ConvTranspose (name, input shape, out channels, kernel, attrs): col2im by output rows, or
# (strides equal to the kernel, no pads) each input position's own tile of Y.
TRANSPOSED = [
    ("2d 2x2 stride 2", [1, 4, 6, 7], 3, [2, 2], {"strides": [2, 2]}),
    ("2d 2x2 stride 2 grouped", [2, 4, 6, 5], 6, [2, 2], {"strides": [2, 2], "group": 2}),
    ("2d 3x2 stride 3x2", [1, 3, 4, 5], 2, [3, 2], {"strides": [3, 2]}),
    ("2d 2x2 stride 2, threaded", [1, 24, 60, 50], 24, [2, 2], {"strides": [2, 2]}),
    ("2d 2x2 stride 2, padded", [1, 3, 5, 4], 2, [2, 2], {"strides": [2, 2],
                                                          "pads": [1, 0, 0, 1]}),
    ("2d 3x3 stride 2, pads, output_padding", [2, 3, 5, 6], 4, [3, 3],
     {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 1]}),
    ("2d dilated, stride 3x1", [1, 2, 4, 9], 2, [3, 2],
     {"strides": [3, 1], "dilations": [2, 3], "pads": [2, 1, 0, 3]}),
    ("2d grouped", [1, 4, 5, 5], 6, [3, 3], {"group": 2, "strides": [2, 2]}),
]


def torch_conv(x, w, b, attrs):
    """The expected output in float64, padding explicitly (torch pads symmetrically only)."""
    k = w.shape[2:]
    sd = len(k)
    strides = attrs.get("strides", [1] * sd)
    dil = attrs.get("dilations", [1] * sd)
    if attrs.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER"):
        pads_b, pads_e = [], []
        for i in range(sd):
            size = x.shape[2 + i]
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 - size)
            small = total // 2  # SAME_UPPER puts the odd one at the end, SAME_LOWER first
            pads_b.append(small if attrs["auto_pad"] == "SAME_UPPER" else total - small)
            pads_e.append(total - pads_b[-1])
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


def torch_conv_transpose(x, w, b, attrs):
    """ONNX ConvTranspose in float64: torch's unpadded result cropped by the pads."""
    sd = w.ndim - 2
    pads = attrs.get("pads", [0] * 2 * sd)
    bt = None if b is None else torch.from_numpy(b).double()
    y = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), bt,
                           stride=attrs.get("strides", [1] * sd),
                           output_padding=attrs.get("output_padding", [0] * sd),
                           groups=attrs.get("group", 1),
                           dilation=attrs.get("dilations", [1] * sd))
    h, wd = y.shape[2], y.shape[3]
    return y[:, :, pads[0]:h - pads[2], pads[1]:wd - pads[3]].numpy()


def model(x_shape, w, b, attrs, op="Conv"):
    inputs = ["x", "w"] + (["b"] if b is not None else [])
    init = [numpy_helper.from_array(w, "w")]
    if b is not None:
        init.append(numpy_helper.from_array(b, "b"))
    node = helper.make_node(op, inputs, ["y"], **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def chain_model(x_shape, layers):
    """The Convs of `layers` in a chain, and the weights and biases they take."""
    nodes, init, params, c, name = [], [], [], x_shape[1], "x"
    rng = np.random.default_rng(11)
    for i, (m, stride) in enumerate(layers):
        w = (rng.standard_normal([m, c, 3, 3]) / np.sqrt(9 * c)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        init += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        params.append((w, b, {"pads": [1, 1, 1, 1], "strides": [stride, stride]}))
        out = "y" if i == len(layers) - 1 else f"h{i}"
        nodes.append(helper.make_node("Conv", [name, f"w{i}", f"b{i}"], [out], **params[-1][2]))
        name, c = out, m
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, params


def check_chain(c, fpguard, tmp):
    """CHAIN against PyTorch layer by layer (float64), twice in one process."""
    x_shape = [1, 5, 33, 29]
    m, params = chain_model(x_shape, CHAIN)
    x = np.random.default_rng(12).standard_normal(x_shape).astype(np.float32)
    want = x.astype(np.float64)
    for w, b, attrs in params:
        want = torch_conv(want, w, b, attrs)
    path, xp, out = (os.path.join(tmp, f) for f in ("chain.onnx", "chain_x.npy", "chain_out"))
    onnx.save(m, path)
    np.save(xp, x)
    r = fpgref.run(fpguard, "run", path, "--input", "x=" + xp, "--outputs", out, "--repeat", "2")
    if c.check(r.returncode == 0, "Conv chain: exit code", r.stderr):
        got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
        err = np.abs(got - want).max() if got.shape == want.shape else np.inf
        c.check(err <= 1e-5 * max(1.0, np.abs(want).max()), "Conv chain: values",
                f"shape {got.shape} vs {want.shape}, max error {err:.3g}")


def check_squeeze(c, fpguard, tmp):
    """A squeeze-excitation block's layers (1x1 Convs over a 1 x 1 plane, each with the op
    the executor fuses into it) against PyTorch, and fused against --no-fusion bit for
    bit."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal([2, 576, 1, 1]).astype(np.float32)
    w1 = (rng.standard_normal([144, 576, 1, 1]) / 24).astype(np.float32)
    w2 = (rng.standard_normal([576, 144, 1, 1]) / 12).astype(np.float32)
    b1, b2 = (rng.standard_normal(n).astype(np.float32) for n in (144, 576))
    h = F.relu(F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w1).double(),
                        torch.from_numpy(b1).double()))
    want = F.hardsigmoid(F.conv2d(h, torch.from_numpy(w2).double(),
                                  torch.from_numpy(b2).double())).numpy()
    init = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"),
                                                        (b2, "b2"))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("HardSigmoid", ["c2"], ["y"], alpha=1 / 6, beta=0.5)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path, xp = os.path.join(tmp, "squeeze.onnx"), os.path.join(tmp, "squeeze_x.npy")
    onnx.save(m, path)
    np.save(xp, x)
    outs = []
    for flags in ([], ["--no-fusion"]):
        out = os.path.join(tmp, "squeeze_out" + "".join(flags))
        r = fpgref.run(fpguard, "run", path, "--input", "x=" + xp, "--outputs", out, *flags)
        if not c.check(r.returncode == 0, f"squeeze block {flags}: exit code", r.stderr):
            return
        outs.append(np.load(os.path.join(out, "y.npy")))
    err = np.abs(outs[0].astype(np.float64) - want).max()
    c.check(err <= 1e-5, "squeeze block: values", f"max error {err:.3g}")
    c.check(outs[0].tobytes() == outs[1].tobytes(), "squeeze block: fused bit for bit",
            f"max difference {np.abs(outs[0] - outs[1]).max():.3g}")


def check_threads_agree(c, fpguard, path, xp, tmp, case):
    """One thread and two give the same bits: work is split by output, never along a sum."""
    outs = []
    for threads in ("1", "2"):
        out = os.path.join(tmp, "threads_" + threads)
        r = fpgref.run(fpguard, "run", path, "--input", "x=" + xp, "--outputs", out,
                       "--threads", threads)
        if not c.check(r.returncode == 0, f"{case} --threads {threads}: exit code", r.stderr):
            return
        outs.append(np.load(os.path.join(out, "y.npy")))
    c.check(outs[0].tobytes() == outs[1].tobytes(), f"{case}: 1 and 2 threads, bit for bit",
            f"max difference {np.abs(outs[0] - outs[1]).max():.3g}")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("conv_test")
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("Conv",) + case for case in CASES]
        cases += [("ConvTranspose",) + case for case in TRANSPOSED]
        for op, name, x_shape, m_out, kernel, attrs in cases:
            group = attrs.get("group", 1)
            x = rng.standard_normal(x_shape).astype(np.float32)
            if op == "Conv":
                w_shape = [m_out, x_shape[1] // group] + kernel
            else:
                w_shape = [x_shape[1], m_out // group] + kernel
            w = rng.standard_normal(w_shape).astype(np.float32)
            for with_bias in (False, True):
                b = rng.standard_normal(m_out).astype(np.float32) if with_bias else None
                reference = torch_conv if op == "Conv" else torch_conv_transpose
                want = reference(x, w, b, attrs)
                case = f"{op} {name}{' + bias' if with_bias else ''}"
                path = os.path.join(tmp, "m.onnx")
                onnx.save(model(x_shape, w, b, attrs, op), path)
                xp = os.path.join(tmp, "x.npy")
                np.save(xp, x)
                if "threaded" in name:
                    check_threads_agree(c, args.fpguard, path, xp, tmp, case)
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
        check_chain(c, args.fpguard, tmp)
        check_squeeze(c, args.fpguard, tmp)
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
