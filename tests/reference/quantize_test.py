"""Blocked QuantizeLinear / DequantizeLinear (opset 21, `block_size`), which no ONNX node
test in libonnx-testdata 1.12 reaches, against NumPy: the scale and zero point repeated
`block_size` times along `axis` (the last block may be short), the quotient x / scale in
float32 rounded half to even, the zero point added and the result saturated to the
integer type; dequantization (q - zero point) * scale. Also the errors: a scale whose
shape does not fit the blocks is one line naming the node, exit 2.
"""

import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import fpgref

ONNX_TYPE = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8,
             np.int16: TensorProto.INT16, np.uint16: TensorProto.UINT16}


def expand(p, axis, block, length):
    return np.repeat(p, block, axis=axis).take(np.arange(length), axis=axis)


def quantize_ref(x, scale, zero, axis, block, dtype):
    s = expand(scale, axis, block, x.shape[axis]).astype(np.float32)
    z = 0 if zero is None else expand(zero, axis, block, x.shape[axis]).astype(np.float64)
    q = np.rint((x / s).astype(np.float32)).astype(np.float64) + z
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize_ref(q, scale, zero, axis, block):
    s = expand(scale, axis, block, q.shape[axis]).astype(np.float32)
    z = 0 if zero is None else expand(zero, axis, block, q.shape[axis]).astype(np.float32)
    return ((q.astype(np.float32) - z) * s).astype(np.float32)


def model(op, x, scale, zero, attrs, x_type):
    init = [numpy_helper.from_array(scale, "s")]
    inputs = ["x", "s"]
    if zero is not None:
        init.append(numpy_helper.from_array(zero, "z"))
        inputs.append("z")
    node = helper.make_node(op, inputs, ["y"], name="q", **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", x_type, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("quantize_test")
    rng = np.random.default_rng(11)
    cases = [  # x shape, axis, block size
        ((6, 10), 1, 4), ((6, 10), 0, 4), ((6, 10), -1, 10), ((6, 10), 1, 1),
        ((2, 5, 7), -1, 3), ((2, 5, 7), 1, 2), ((3, 8, 2, 2), 1, 8),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for shape, axis, block in cases:
            ax = axis % len(shape)
            s_shape = list(shape)
            s_shape[ax] = -(-shape[ax] // block)
            x = (rng.standard_normal(shape) * 40).astype(np.float32)
            scale = rng.uniform(0.05, 0.5, s_shape).astype(np.float32)
            for dtype in (np.uint8, np.int8, np.int16, np.uint16, None):
                info = np.iinfo(dtype if dtype else np.uint8)
                zero = (None if dtype is None else
                        rng.integers(max(info.min, -20), min(info.max, 20) + 1, s_shape)
                        .astype(dtype))
                out_type = dtype if dtype else np.uint8
                case = f"{shape} axis {axis} block {block} {out_type.__name__}" + \
                       ("" if zero is not None else " (no zero point)")
                attrs = {"axis": axis, "block_size": block}
                got, r = fpgref.run_model(args.fpguard, tmp, model("QuantizeLinear", x, scale, zero, attrs,
                                              TensorProto.FLOAT), x)
                want = quantize_ref(x, scale, zero, ax, block, out_type)
                if c.check(got is not None, f"quantize {case}: exit code", r.stderr):
                    c.check(got.dtype == want.dtype and np.array_equal(got, want),
                            f"quantize {case}: values",
                            f"{np.count_nonzero(got != want)} differ ({got.dtype})")
                # Dequantize the expected integers back.
                got, r = fpgref.run_model(args.fpguard, tmp, model("DequantizeLinear", want, scale, zero, attrs,
                                              ONNX_TYPE[out_type]), want)
                want_f = dequantize_ref(want, scale, zero, ax, block)
                if c.check(got is not None, f"dequantize {case}: exit code", r.stderr):
                    c.check(np.array_equal(got, want_f), f"dequantize {case}: values",
                            f"max diff {np.abs(got - want_f).max()}")
        # output_dtype without a zero point (int8), blocked.
        x = (rng.standard_normal((4, 9)) * 100).astype(np.float32)
        scale = rng.uniform(0.1, 1, (4, 3)).astype(np.float32)
        got, r = fpgref.run_model(args.fpguard, tmp, model("QuantizeLinear", x, scale, None,
                                      {"axis": 1, "block_size": 3,
                                       "output_dtype": TensorProto.INT8}, TensorProto.FLOAT), x)
        want = quantize_ref(x, scale, None, 1, 3, np.int8)
        if c.check(got is not None, "output_dtype int8: exit code", r.stderr):
            c.check(got.dtype == np.int8 and np.array_equal(got, want), "output_dtype int8: values")
        # Bad scale shapes: one line naming the node, exit 2.
        for s_shape, why in (((4, 2), "too few blocks"), ((4, 4), "too many blocks"),
                             ((3,), "wrong rank")):
            scale = np.ones(s_shape, np.float32)
            _, r = fpgref.run_model(args.fpguard, tmp, model("QuantizeLinear", x, scale, None,
                                        {"axis": 1, "block_size": 3}, TensorProto.FLOAT), x)
            lines = r.stderr.strip().splitlines()
            c.check(r.returncode == 2 and len(lines) == 1 and "'q'" in lines[0] and
                    "scale" in lines[0], f"bad scale ({why}): one line, exit 2",
                    f"exit {r.returncode}: {r.stderr!r}")
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
