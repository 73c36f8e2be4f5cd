#!/usr/bin/python3
"""End-to-end tests of models whose weights are in ONNX external data (issue 20, item 4:
the data file is memory-mapped and its float32 tensors used in place). One small
Conv -> Relu -> Reshape -> MatMul -> Add model, saved three ways by Python's onnx:

    inline.onnx           every tensor in raw_data
    ext.onnx (+ .data)    every tensor in one external file (onnx's writer)
    odd.onnx (+ .data)    the same, each tensor at an odd offset (not aligned for its type:
                          fpguard copies those instead of viewing the map)

`run` gives bit-identical outputs for the three, equal to NumPy's; `run --precision
float16` and `check --precision float16` agree between them too; none of the model and
data files is ever written (bytes and mtime). A data file cut short is one error line
naming the file and the tensor, exit 2 (never SIGBUS). `inspect` of a large .npy (read
through a memory map) equals `inspect` of the same array in an .npz (read into memory).

    external_data_test.py --fpguard PATH
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, failures, read_outputs, run  # noqa: E402


def weights():
    rng = np.random.default_rng(20)
    return {
        "w": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32),
        "b": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "shape": np.array([1, 8 * 16 * 16], np.int64),
        "w2": (rng.standard_normal((8 * 16 * 16, 10)) * 0.05).astype(np.float32),
        "b2": (rng.standard_normal(10) * 0.1).astype(np.float32),
    }


def model(w):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "w2"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b2"], ["y"], name="add"),
    ]
    g = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          [numpy_helper.from_array(v, k) for k, v in w.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def save_odd(m, path):
    """Every initializer in path + ".data", each at an odd offset."""
    location = os.path.basename(path) + ".data"
    data = b""
    for t in m.graph.initializer:
        raw = t.raw_data
        data += b"\x00" * (1 + (len(data) % 2 == 1))  # the next offset is odd
        offset = len(data)
        data += raw
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            e = t.external_data.add()
            e.key, e.value = k, v
    with open(path + ".data", "wb") as fh:
        fh.write(data)
    onnx.save(m, path)


def reference(w, x):
    """NumPy: the convolution as a sum over the kernel's taps."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    c = np.zeros((1, 8, 16, 16))
    for i in range(3):
        for j in range(3):
            c += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 16, j:j + 16], w["w"][:, :, i, j])
    c += w["b"][None, :, None, None]
    return np.maximum(c, 0).reshape(1, -1) @ w["w2"] + w["b2"]


def fingerprint(paths):
    """Bytes and modification time of each file."""
    out = {}
    for p in paths:
        with open(p, "rb") as fh:
            out[p] = (hashlib.sha256(fh.read()).hexdigest(), os.stat(p).st_mtime_ns)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    f = ap.parse_args().fpguard
    with tempfile.TemporaryDirectory() as tmp:
        w = weights()
        paths = {k: os.path.join(tmp, k + ".onnx") for k in ("inline", "ext", "odd")}
        onnx.save(model(w), paths["inline"])
        onnx.save_model(model(w), paths["ext"], save_as_external_data=True,
                        all_tensors_to_one_file=True, location="ext.onnx.data", size_threshold=0)
        save_odd(model(w), paths["odd"])
        files = list(paths.values()) + [paths["ext"] + ".data", paths["odd"] + ".data"]
        before = fingerprint(files)
        ext_raw = onnx.load(paths["ext"], load_external_data=False)
        check(all(t.data_location == TensorProto.EXTERNAL for t in ext_raw.graph.initializer),
              "ext.onnx holds every tensor externally")

        x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
        xf = os.path.join(tmp, "x.npy")
        np.save(xf, x)
        want = reference(w, x)
        for precision in ("float32", "float16"):
            outs = {}
            for k, p in paths.items():
                d = os.path.join(tmp, f"out_{k}_{precision}")
                r = run(f, "run", p, "--input", "x=" + xf, "--outputs", d, "--precision", precision)
                check(r.returncode == 0, f"run {k} {precision}", r.stderr)
                outs[k] = read_outputs(d)["y"] if r.returncode == 0 else None
            for k in ("ext", "odd"):
                check(outs[k] is not None and outs["inline"] is not None and
                      outs[k].tobytes() == outs["inline"].tobytes(),
                      f"{k}: {precision} outputs bit-identical to the inline model's",
                      (outs[k], outs["inline"]))
            if precision == "float32" and outs["inline"] is not None:
                check(np.allclose(outs["inline"], want, rtol=1e-5, atol=1e-5),
                      "float32 outputs match NumPy", (outs["inline"], want))

        # check: the same findings whichever way the weights are stored.
        nodes = {}
        for k, p in paths.items():
            j = os.path.join(tmp, f"check_{k}.json")
            r = run(f, "check", p, "--input", "x=" + xf, "--precision", "float16", "--json", j,
                    "--quiet")
            check(r.returncode in (0, 1), f"check {k}", r.stderr)
            if r.returncode in (0, 1):
                with open(j) as fh:
                    nodes[k] = json.load(fh)["nodes"]
        check(len(nodes) == 3 and nodes["ext"] == nodes["inline"] == nodes["odd"],
              "check: the same per-node numbers", nodes)

        check(fingerprint(files) == before, "no model or data file was written",
              (before, fingerprint(files)))

        # A data file cut short: one line naming the file and the tensor.
        short = os.path.join(tmp, "short")
        os.mkdir(short)
        onnx.save_model(model(w), os.path.join(short, "m.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="m.onnx.data", size_threshold=0)
        data = os.path.join(short, "m.onnx.data")
        size = os.path.getsize(data)
        os.truncate(data, size - 4096)
        fails(f, "truncated external data", ["run", os.path.join(short, "m.onnx")],
              os.path.join(short, "m.onnx") + ": initializer 'w2'", "is past the end of 'm.onnx.data'")

        # inspect: a large .npy (memory-mapped) gives what the same array read from an .npz
        # gives.
        big = np.random.default_rng(8).standard_normal((1024, 1024)).astype(np.float32) * 300
        np.save(os.path.join(tmp, "big.npy"), big)
        np.savez(os.path.join(tmp, "big.npz"), big=big)
        a = run(f, "inspect", os.path.join(tmp, "big.npy"), "--json")
        b = run(f, "inspect", os.path.join(tmp, "big.npz"), "--json")
        check(a.returncode == 0 and b.returncode == 0, "inspect runs", a.stderr + b.stderr)
        if a.returncode == 0 and b.returncode == 0:
            ta, tb = json.loads(a.stdout)["tensors"][0], json.loads(b.stdout)["tensors"][0]
            ta.pop("name"), tb.pop("name")
            check(ta == tb, "inspect of a mapped .npy equals that of the .npz", (ta, tb))

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("external data: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
