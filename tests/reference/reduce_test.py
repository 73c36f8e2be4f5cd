"""Reductions of integer tensors (ReduceSum ... ReduceLogSumExp in int32 and int64;
ReduceMax and ReduceMin also in int8 and uint8, as ONNX defines them from opset 12) against
NumPy: the reduction computed in float64, then truncated toward zero into the input's type
(`astype`), as ONNX Runtime and the ONNX reference implementation compute them. The ONNX
node tests in libonnx-testdata reduce floats only; an integer ReduceL2, ReduceLogSum or
ReduceLogSumExp once returned the bare sum (no square root, logarithm or exponential).
Axes are the attribute (opset 13) and the input (opset 18; ReduceSum's since 13), with and
without keepdims, one axis, two, all (none given), and a negative one.
"""

import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import fpgref

OPS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
}
TYPES = {np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.int8: TensorProto.INT8,
         np.uint8: TensorProto.UINT8}


def model(op, x, axes, keepdims, opset):
    attrs = {"keepdims": int(keepdims)}
    inputs, init = ["x"], []
    axes_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    if axes is not None and axes_input:
        init.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = list(axes)
    node = helper.make_node(op, inputs, ["y"], name="r", **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TYPES[x.dtype.type], list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("reduce_test")
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (np.int32, np.int64, np.int8, np.uint8):
            # Positive values for the logarithm of a sum; small ones for exp and the product.
            positive = rng.integers(1, 40, (3, 4, 5)).astype(dtype)
            signed = rng.integers(0 if dtype == np.uint8 else -6, 7, (3, 4, 5)).astype(dtype)
            wide = dtype in (np.int32, np.int64)
            for op, ref in OPS.items():
                if not wide and op not in ("ReduceMax", "ReduceMin"):
                    continue
                x = positive if op == "ReduceLogSum" else signed
                if op == "ReduceProd":
                    x = rng.integers(-3, 4, (3, 4, 5)).astype(dtype)
                for axes, keep, opset in ((None, True, 13), ((1,), False, 13), ((0, 2), True, 18),
                                          ((-1,), False, 18), ((2,), True, 13)):
                    case = f"{op} {dtype.__name__} axes {axes} keepdims {keep} opset {opset}"
                    a = None if axes is None else tuple(axes)
                    with np.errstate(all="ignore"):
                        want = np.asarray(ref(x.astype(np.float64), a, keep)).astype(dtype)
                    got, r = fpgref.run_model(args.fpguard, tmp, model(op, x, axes, keep, opset), x)
                    if c.check(got is not None, f"{case}: exit code", r.stderr):
                        c.check(got.dtype == want.dtype and got.shape == want.shape and
                                np.array_equal(got, want), f"{case}: values",
                                f"got {got.dtype} {got.shape} {got.ravel()[:6]}, "
                                f"want {want.dtype} {want.shape} {want.ravel()[:6]}")
    return c.finish()


if __name__ == "__main__":
    raise SystemExit(main())
