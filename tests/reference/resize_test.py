"""Resize-18 with antialias = 1 (no ONNX node test in libonnx-testdata 1.12 reaches it)
against two independent references:

- PyTorch's antialiased interpolation (torch.nn.functional.interpolate with antialias=True,
  float64): bilinear and bicubic, which drop the taps beyond the input and renormalise
  (ONNX exclude_outside = 1) and use the cubic coefficient -0.5; half_pixel coordinates.
- A NumPy transcription of the Resize specification's reference algorithm (1-D
  interpolation along each axis in turn, the n nearest input positions of an
  edge-padded axis, the filter stretched by 1/scale and normalised), for what torch does
  not cover: exclude_outside = 0, the other coordinate transformations, cubic -0.75,
  upscaling (where antialias changes nothing), and `axes`.
"""

import math
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import fpgref


def source_coordinate(x, scale, in_len, out_len, transform):
    if transform == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else 0.0
    if transform == "align_corners":
        return 0.0 if out_len == 1 else x * (in_len - 1) / (out_len - 1)
    if transform == "asymmetric":
        return x / scale
    if transform == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        center = in_len / 2
        return center * (1 - adjustment) + (x + 0.5) / scale - 0.5
    raise ValueError(transform)


def cubic(a, x):
    x = abs(x)
    if x <= 1:
        return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
    if x < 2:
        return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
    return 0.0


def coefficients(mode, ratio, scale, a, antialias):
    """Weights of the taps floor-ish(x) + start ... for ratio in (0, 1], as the spec's
    reference computes them (antialias: the filter stretched by 1/min(scale, 1))."""
    s = min(scale, 1.0) if antialias else 1.0
    support = 1 if mode == "linear" else 2
    start = math.floor(-support / s) + 1
    offsets = np.arange(start, 2 - start)
    if mode == "linear":
        w = np.clip(1 - np.abs((offsets - ratio) * s), 0, 1)
    else:
        w = np.array([cubic(a, (o - ratio) * s) for o in offsets])
    return w / w.sum()


def interpolate_1d(data, scale, out_len, mode, transform, a, exclude_outside, antialias):
    in_len = len(data)
    out = np.empty(out_len)
    for o in range(out_len):
        x = source_coordinate(o, scale, in_len, in_len * scale, transform)
        base = math.floor(x)
        ratio = 1.0 if x == base else x - base  # (0, 1]: the tap left of x is preferred
        w = coefficients(mode, ratio, scale, a, antialias)
        n = len(w)
        # The n input positions nearest to x (ties: the lower one), on the axis padded with
        # its edge values.
        pad = math.ceil(n / 2)
        padded = np.pad(data, pad, mode="edge")
        order = sorted(range(len(padded)), key=lambda i: (abs(x + pad - i), i))[:n]
        idx = np.array(sorted(order))
        points = padded[idx]
        if exclude_outside:
            w = np.where((idx - pad < 0) | (idx - pad >= in_len), 0.0, w)
            w = w / w.sum()
        out[o] = np.dot(w, points)
    return out


def spec_resize(x, scales, out_shape, mode, transform, a, exclude_outside, antialias):
    y = x.astype(np.float64)
    for axis in range(x.ndim):
        if out_shape[axis] == x.shape[axis] and scales[axis] == 1.0:
            continue
        y = np.apply_along_axis(interpolate_1d, axis, y, scales[axis], out_shape[axis], mode,
                                transform, a, exclude_outside, antialias)
    return y


def model(x_shape, sizes, attrs, axes=None):
    node_attrs = dict(attrs)
    if axes is not None:
        node_attrs["axes"] = axes
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], antialias=1, **node_attrs)
    g = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array(sizes, dtype=np.int64), "sizes")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def run_fpguard(args, tmp, m, x):
    y, r = fpgref.run_model(args.fpguard, tmp, m, x)
    return (None if y is None else y.astype(np.float64)), r.stderr


def compare(c, case, got, err, want):
    if not c.check(got is not None, f"{case}: exit code", err):
        return
    if not c.check(got.shape == want.shape, f"{case}: shape", f"{got.shape} vs {want.shape}"):
        return
    # fpguard computes in double and stores float32: a float32 rounding of values ~1.
    e = np.abs(got - want).max()
    c.check(e <= 2e-6 * max(1.0, np.abs(want).max()), f"{case}: values", f"max error {e:.3g}")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("resize_test")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        # PyTorch: NCHW, downscaling by integral and non-integral factors, and upscaling.
        for mode, torch_mode in (("linear", "bilinear"), ("cubic", "bicubic")):
            for in_hw, out_hw in (((16, 12), (4, 6)), ((13, 17), (5, 7)), ((9, 8), (9, 3)),
                                  ((6, 5), (11, 8))):
                x = rng.standard_normal((2, 3) + in_hw).astype(np.float32)
                want = F.interpolate(torch.from_numpy(x).double(), size=out_hw, mode=torch_mode,
                                     align_corners=False, antialias=True).numpy()
                attrs = {"mode": mode, "exclude_outside": 1,
                         "coordinate_transformation_mode": "half_pixel"}
                if mode == "cubic":
                    attrs["cubic_coeff_a"] = -0.5
                got, err = run_fpguard(args, tmp, model(list(x.shape), [2, 3, *out_hw], attrs), x)
                compare(c, f"torch {torch_mode} {in_hw}->{out_hw}", got, err, want)

        # The specification's algorithm: every transformation, both exclude_outside values,
        # cubic -0.75, a 1-D input, and axes (resizing the last axis only).
        for mode in ("linear", "cubic"):
            for transform in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                              "half_pixel_symmetric"):
                for exclude in (0, 1):
                    for in_len, out_len in ((20, 6), (11, 4), (7, 7), (5, 9)):
                        x = rng.standard_normal((3, in_len)).astype(np.float32)
                        scales = [1.0, out_len / in_len]
                        want = spec_resize(x, scales, [3, out_len], mode, transform, -0.75,
                                           exclude, True)
                        attrs = {"mode": mode, "exclude_outside": exclude,
                                 "coordinate_transformation_mode": transform}
                        got, err = run_fpguard(args, tmp, model([3, in_len], [out_len], attrs,
                                                                axes=[1]), x)
                        compare(c, f"spec {mode} {transform} exclude={exclude} "
                                   f"{in_len}->{out_len}", got, err, want)
        # Without antialias the same downscale differs (the attribute is not ignored).
        x = rng.standard_normal((1, 16)).astype(np.float32)
        plain = spec_resize(x, [1.0, 0.25], [1, 4], "linear", "half_pixel", -0.75, 0, False)
        aa = spec_resize(x, [1.0, 0.25], [1, 4], "linear", "half_pixel", -0.75, 0, True)
        got, err = run_fpguard(args, tmp, model([1, 16], [4], {"mode": "linear"}, axes=[1]), x)
        if c.check(got is not None, "antialias matters: exit code", err):
            c.check(np.abs(got - aa).max() < 1e-5 < np.abs(plain - aa).max(),
                    "antialias matters: values", f"{got} vs {aa} (plain {plain})")
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
